#!/usr/bin/env bash
# Best-effort installer for a single-node SLURM test cluster (Debian/Ubuntu).
#
# Installs slurm-wlm (slurmctld, slurmd, sbatch & co.) and munge so that
# tests/support/slurm_cluster.py can start a throw-away cluster for the tests
# (tests/test_slurm_cluster.py).  Idempotent and never fails the build: when it
# cannot install (not root, no apt-get, install error) it prints one line saying
# why and exits 0; the SLURM tests then skip with a precise reason.
#
# Only the packages are installed: no daemon is started and nothing is
# enabled (the Debian packages' systemd units are left alone; in a container
# without systemd, policy-rc.d keeps dpkg from starting them).
set -u

REQUIRED=(sbatch squeue sinfo scancel slurmctld slurmd munged)

have_all() {
    local b
    for b in "${REQUIRED[@]}"; do
        command -v "$b" >/dev/null 2>&1 || [ -x "/usr/sbin/$b" ] || return 1
    done
    return 0
}

if have_all; then
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "install_slurm.sh: SLURM not installed: not root (run as root, or: sudo apt-get install slurm-wlm munge); SLURM tests will skip"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install_slurm.sh: SLURM not installed: apt-get not available (install slurm-wlm and munge by hand); SLURM tests will skip"
    exit 0
fi

export DEBIAN_FRONTEND=noninteractive
# Keep dpkg from starting the packaged daemons (no systemd here, and the test
# cluster runs its own instances with its own config).  Only added if absent,
# and removed again afterwards.
POLICY=/usr/sbin/policy-rc.d
ADDED_POLICY=0
if [ ! -e "$POLICY" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$POLICY" && chmod +x "$POLICY" && ADDED_POLICY=1
fi
cleanup() { [ "$ADDED_POLICY" = 1 ] && rm -f "$POLICY"; }
trap cleanup EXIT

LOG=$(mktemp)
ok=1
if ! apt-get update -qq >"$LOG" 2>&1; then
    ok=0
elif ! apt-get install -y -qq --no-install-recommends slurm-wlm munge >>"$LOG" 2>&1; then
    ok=0
fi
if [ "$ok" = 0 ]; then
    echo "install_slurm.sh: SLURM not installed: apt-get failed; SLURM tests will skip. Last lines:"
    tail -n 20 "$LOG" | sed 's/^/  /'
    rm -f "$LOG"
    exit 0
fi
# Show warnings/errors but not the usual progress chatter.
grep -E '^(E:|W:)' "$LOG" || true
rm -f "$LOG"

if have_all; then
    echo "install_slurm.sh: installed $(slurmd -V 2>/dev/null || echo slurm) and $(munged --version 2>/dev/null | head -n1 || echo munge)"
else
    echo "install_slurm.sh: SLURM install incomplete (missing binaries after apt-get); SLURM tests will skip"
fi
exit 0
