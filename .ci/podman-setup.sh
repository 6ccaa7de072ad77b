#!/usr/bin/env bash
# Give CI Debian's podman (its Docker-compatible API is tested by tests/targets/podman.py, which
# starts and stops `podman system service` itself) and the sandbox image, the egress proxy's and
# the egress rig's in podman's storage, copied from the Docker engine (.ci/docker-setup.sh and
# .ci/egress-setup.sh run first). Idempotent: installs only what
# is missing, loads the image only when podman's copy is missing or not the engine's.
# Runs as root on Debian 12.   env: SANDBOX_IMAGE
set -euo pipefail
cd "$(dirname "$0")/.."

SANDBOX_IMAGE=${SANDBOX_IMAGE:-sandbox-kernel:latest}
EGRESS_IMAGE=${EGRESS_IMAGE:-sandbox-kernel-egress:latest}
EGRESS_RIG_IMAGE=${EGRESS_RIG_IMAGE:-sandbox-kernel-egress-rig:latest}

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

image_id() { "$1" image inspect --format '{{.Id}}' "$2" 2>/dev/null | sed 's/^sha256://'; }

# copy IMAGE from the Docker engine into podman's storage unless podman has the same image
copy_image() {
    local wanted
    wanted=$(image_id docker "$1")
    if [[ -z "$wanted" ]]; then
        echo "error: the Docker engine has no $1 to copy (run .ci/docker-setup.sh and .ci/egress-setup.sh first)" >&2
        exit 1
    fi
    if [[ "$(image_id podman "$1")" != "$wanted" ]]; then
        echo "copying $1 from the Docker engine into podman's storage"
        docker save "$1" | podman load -q
    fi
}

install_packages
echo "$(podman --version)"
for image in "$SANDBOX_IMAGE" "$EGRESS_IMAGE" "$EGRESS_RIG_IMAGE"; do
    copy_image "$image"
done
podman image ls --format '{{.Repository}}:{{.Tag}} {{.ID}} {{.Size}}' | grep -F -e "${SANDBOX_IMAGE%%:*}"
