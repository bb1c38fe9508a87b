#!/usr/bin/env bash
# Best-effort installer for headless Chromium and its WebDriver (Debian/Ubuntu).
#
# Installs Debian's chromium and chromium-driver so that tests/test_report_site.py can open the
# results site (python -m vcast.report site) in a real browser through selenium, offline.
# Idempotent and never fails the build: when it cannot install (not root, no apt-get, install
# error) it prints one line saying why and exits 0; the browser test then skips with the reason.
set -u

have_all() {
    command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1
}

if have_all; then
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "install_chromium.sh: Chromium not installed: not root (run as root, or: sudo apt-get install chromium chromium-driver); the browser test will skip"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install_chromium.sh: Chromium not installed: apt-get not available (install chromium and its chromedriver by hand); the browser test will skip"
    exit 0
fi

export DEBIAN_FRONTEND=noninteractive
LOG=$(mktemp)
ok=1
if ! apt-get update -qq >"$LOG" 2>&1; then
    ok=0
elif ! apt-get install -y -qq --no-install-recommends chromium chromium-driver >>"$LOG" 2>&1; then
    ok=0
fi
if [ "$ok" = 0 ]; then
    echo "install_chromium.sh: Chromium not installed: apt-get failed; the browser test will skip. Last lines:"
    tail -n 20 "$LOG" | sed 's/^/  /'
    rm -f "$LOG"
    exit 0
fi
# Show warnings/errors but not the usual progress chatter.
grep -E '^(E:|W:)' "$LOG" || true
rm -f "$LOG"

if have_all; then
    echo "install_chromium.sh: installed $(chromium --version 2>/dev/null || echo chromium) and $(chromedriver --version 2>/dev/null | cut -d' ' -f1-2 || echo chromedriver)"
else
    echo "install_chromium.sh: Chromium install incomplete (chromium or chromedriver missing after apt-get); the browser test will skip"
fi
exit 0
