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

SCRIPT=install_chromium.sh; WHAT=Chromium; SKIPS="the browser test will skip"
# shellcheck source=scripts/apt_best_effort.sh
. "$(dirname "$0")/apt_best_effort.sh"
apt_possible "chromium chromium-driver" || exit 0
apt_install chromium chromium-driver || exit 0

if have_all; then
    echo "install_chromium.sh: installed $(chromium --version 2>/dev/null || echo chromium) and $(chromedriver --version 2>/dev/null | cut -d' ' -f1-2 || echo chromedriver)"
else
    echo "install_chromium.sh: Chromium install incomplete (chromium or chromedriver missing after apt-get); the browser test will skip"
fi
exit 0
