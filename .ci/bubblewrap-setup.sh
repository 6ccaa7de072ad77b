#!/usr/bin/env bash
# Give CI Debian's bubblewrap: the local backend binds a workspace (the notebook's folder) into
# its kernel's own mount namespace with it (tests/test_workspace.py); without it, local copies.
# Idempotent; runs as root on Debian 12.
set -euo pipefail
# shellcheck source=apt.sh
source "$(dirname "$0")/apt.sh"   # apt_install

command -v bwrap >/dev/null || apt_install bubblewrap
bwrap --version
