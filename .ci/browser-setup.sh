#!/usr/bin/env bash
# Give CI a headless browser for tests/test_browser.py: Debian's chromium, driven by the
# `playwright` Python package (the `test` extra) with executable_path=/usr/bin/chromium.
# Never `playwright install`: it downloads browsers, and only the package indexes are reachable.
# Idempotent; runs as root on Debian 12.
set -euo pipefail

if ! command -v chromium >/dev/null; then
    echo "installing chromium"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1 apt-get install -y -q chromium
fi
chromium --version 2>/dev/null
