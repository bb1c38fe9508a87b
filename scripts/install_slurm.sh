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

SCRIPT=install_slurm.sh; WHAT=SLURM; SKIPS="SLURM tests will skip"
# shellcheck source=scripts/apt_best_effort.sh
. "$(dirname "$0")/apt_best_effort.sh"
apt_possible "slurm-wlm munge" || exit 0

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

apt_install slurm-wlm munge || exit 0

if have_all; then
    echo "install_slurm.sh: installed $(slurmd -V 2>/dev/null || echo slurm) and $(munged --version 2>/dev/null | head -n1 || echo munge)"
else
    echo "install_slurm.sh: SLURM install incomplete (missing binaries after apt-get); SLURM tests will skip"
fi
exit 0
