#!/usr/bin/env bash
# Give CI Debian's podman (its Docker-compatible API is tested by tests/targets/podman.py, which
# starts and stops `podman system service` itself) and the sandbox image in podman's storage,
# copied from the Docker engine (.ci/docker-setup.sh runs first). Idempotent: installs only what
# is missing, loads the image only when podman's copy is missing or not the engine's.
# Runs as root on Debian 12.   env: SANDBOX_IMAGE
set -euo pipefail
cd "$(dirname "$0")/.."

SANDBOX_IMAGE=${SANDBOX_IMAGE:-sandbox-kernel:latest}

# shellcheck source=apt.sh
source .ci/apt.sh   # apt_install

install_packages() {
    local missing=()
    command -v podman >/dev/null || missing+=(podman)
    # podman's init for --init (the backend's init=True); Debian installs it at /usr/bin/catatonit,
    # which the test's containers.conf names (podman 4.3 looks in /usr/libexec/podman/)
    command -v catatonit >/dev/null || missing+=(catatonit)
    apt_install "${missing[@]}"
}

image_id() { "$@" image inspect --format '{{.Id}}' "$SANDBOX_IMAGE" 2>/dev/null | sed 's/^sha256://'; }

install_packages
echo "$(podman --version)"
wanted=$(image_id docker)
if [[ -z "$wanted" ]]; then
    echo "error: the Docker engine has no $SANDBOX_IMAGE to copy (run .ci/docker-setup.sh first)" >&2
    exit 1
fi
if [[ "$(image_id podman)" != "$wanted" ]]; then
    echo "copying $SANDBOX_IMAGE from the Docker engine into podman's storage"
    docker save "$SANDBOX_IMAGE" | podman load -q
fi
podman image ls --format '{{.Repository}}:{{.Tag}} {{.ID}} {{.Size}}' | grep -F "${SANDBOX_IMAGE%%:*}"
