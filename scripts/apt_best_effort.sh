# Sourced by the best-effort installers (install_slurm.sh, install_chromium.sh): install Debian
# packages with apt-get, or say in one line why not. Nothing here exits: each function returns 1
# when the packages are not installed, and the caller exits 0 (the build never fails on them; the
# tests that need them skip with the reason).
#
#   SCRIPT=install_x.sh; WHAT="X"; SKIPS="the X tests will skip"
#   apt_possible "x-package" || exit 0
#   apt_install x-package other-package || exit 0

# Whether apt-get can install here (root, apt-get present); else one line naming what to run.
apt_possible() {
    local packages="$1"
    if [ "$(id -u)" -ne 0 ]; then
        echo "$SCRIPT: $WHAT not installed: not root (run as root, or: sudo apt-get install $packages); $SKIPS"
        return 1
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "$SCRIPT: $WHAT not installed: apt-get not available (install $packages by hand); $SKIPS"
        return 1
    fi
    return 0
}

# apt-get update + install of the packages given, quietly; on failure the log's last lines.
apt_install() {
    export DEBIAN_FRONTEND=noninteractive
    local log ok=1
    log=$(mktemp)
    if ! apt-get update -qq >"$log" 2>&1; then
        ok=0
    elif ! apt-get install -y -qq --no-install-recommends "$@" >>"$log" 2>&1; then
        ok=0
    fi
    if [ "$ok" = 0 ]; then
        echo "$SCRIPT: $WHAT not installed: apt-get failed; $SKIPS. Last lines:"
        tail -n 20 "$log" | sed 's/^/  /'
        rm -f "$log"
        return 1
    fi
    grep -E '^(E:|W:)' "$log" || true  # warnings and errors, not the usual progress chatter
    rm -f "$log"
    return 0
}
