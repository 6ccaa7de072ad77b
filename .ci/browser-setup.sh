#!/usr/bin/env bash
# Give CI a headless browser for tests/test_browser.py: Debian's chromium, driven by the
# `playwright` Python package (the `test` extra) with executable_path=/usr/bin/chromium.
# Never `playwright install`: it downloads browsers, and only the package indexes are reachable.
# Idempotent; runs as root on Debian 12.
set -euo pipefail
# shellcheck source=apt.sh
source "$(dirname "$0")/apt.sh"   # apt_install

command -v chromium >/dev/null || apt_install chromium
chromium --version 2>/dev/null
