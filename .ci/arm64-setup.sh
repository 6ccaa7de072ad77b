#!/usr/bin/env bash
# Give CI an arm64 sandbox image on this x86_64 engine, run under emulation: Debian's
# qemu-user-static registered with binfmt_misc, an arm64 base image made with debootstrap, and
# the default recipe built with --platform linux/arm64. After .ci/docker-setup.sh (the engine runs).
# Idempotent: installs, registers and builds only what is missing. Runs as root on Debian 12.
# Measured here (2 shared, busy cores): packages ~8 s, base image 3.5-4 min, sandbox image
# 2.5-3.5 min (wheel download included): 6-7.5 min in all; ~1 s when everything is there.
#   env: PYTHON (.venv/bin/python), ARM64_BASE_IMAGE, ARM64_IMAGE, WHEELHOUSE
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-.venv/bin/python}
ARM64_BASE_IMAGE=${ARM64_BASE_IMAGE:-sandbox-kernel-base:bookworm-arm64}
ARM64_IMAGE=${ARM64_IMAGE:-sandbox-kernel:arm64}
WHEELHOUSE=${WHEELHOUSE:-build/wheelhouse}
BINFMT=/proc/sys/fs/binfmt_misc
# shellcheck source=../sandbox_kernel/backends/docker/images/make-base-image.sh
source sandbox_kernel/backends/docker/images/make-base-image.sh   # build_base_image (debootstrap)

# shellcheck source=apt.sh
source .ci/apt.sh   # apt_install

install_packages() {
    local missing=()
    for package in qemu-user-static binfmt-support debootstrap; do
        dpkg-query -W -f '${Status}' "$package" 2>/dev/null | grep -q 'ok installed' || missing+=("$package")
    done
    apt_install "${missing[@]}"
}

# The kernel runs aarch64 binaries through qemu once qemu-aarch64 is registered. Its flags must
# hold F (the interpreter is opened at registration), so that containers, which do not have
# /usr/libexec/qemu-binfmt in their root, can use it: Debian's package registers it with "PF".
register_qemu() {
    mountpoint -q "$BINFMT" || mount -t binfmt_misc binfmt_misc "$BINFMT"
    [[ -e $BINFMT/qemu-aarch64 ]] || update-binfmts --enable qemu-aarch64
    if ! grep -q '^enabled' "$BINFMT/qemu-aarch64" || ! grep -q '^flags: .*F' "$BINFMT/qemu-aarch64"; then
        cat "$BINFMT/qemu-aarch64" >&2
        echo "error: qemu-aarch64 is not registered enabled with the F flag in $BINFMT" >&2
        return 1
    fi
}

has_image() { docker image inspect "$1" >/dev/null 2>&1; }

install_packages
register_qemu
echo "binfmt: qemu-aarch64 $(grep '^flags' "$BINFMT/qemu-aarch64")"
has_image "$ARM64_BASE_IMAGE" || build_base_image "$ARM64_BASE_IMAGE" "" arm64
machine=$(docker run --rm --platform linux/arm64 --network none "$ARM64_BASE_IMAGE" uname -m)
[[ $machine == aarch64 ]] || { echo "error: $ARM64_BASE_IMAGE runs as $machine, not aarch64" >&2; exit 1; }
"$PYTHON" -m sandbox_kernel.backends.docker.images build --if-needed --platform linux/arm64 \
    --base "$ARM64_BASE_IMAGE" --wheelhouse "$WHEELHOUSE" --tag "$ARM64_IMAGE"
docker image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' \
    | grep -F -e "$ARM64_BASE_IMAGE" -e "$ARM64_IMAGE"
