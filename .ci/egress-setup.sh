#!/usr/bin/env bash
# Give CI the images of egress by name (allow_hosts, issue 31), built offline from wheels downloaded
# on the host: the egress proxy's (mitmproxy 12, which needs Python >= 3.12: on a Debian trixie base
# made with debootstrap, sandbox_kernel/backends/docker/images/egress.Dockerfile) and the tests' rig
# (tests/egress_rig/: pypiserver, dnslib, on the bookworm base). Runs after docker-setup.sh (engine,
# bookworm base). Idempotent: each image is rebuilt only when its recipe changed. Root, Debian 12.
#   env: PYTHON, WHEELHOUSE, BASE_IMAGE, EGRESS_BASE, EGRESS_IMAGE, EGRESS_RIG_IMAGE
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-.venv/bin/python}
WHEELHOUSE=${WHEELHOUSE:-build/wheelhouse}
BASE_IMAGE=${BASE_IMAGE:-sandbox-kernel-base:bookworm}
EGRESS_BASE=${EGRESS_BASE:-sandbox-kernel-base:trixie}
EGRESS_IMAGE=${EGRESS_IMAGE:-sandbox-kernel-egress:latest}
EGRESS_RIG_IMAGE=${EGRESS_RIG_IMAGE:-sandbox-kernel-egress-rig:latest}
RIG_WHEELS="$WHEELHOUSE/egress-rig-$(uname -m)"
# shellcheck source=../sandbox_kernel/backends/docker/images/make-base-image.sh
source sandbox_kernel/backends/docker/images/make-base-image.sh   # build_base_image (debootstrap)

has_image() { docker image inspect "$1" >/dev/null 2>&1; }

# pip's arguments for the rig's Python: bookworm's CPython 3.11 on this machine's architecture
rig_target=(--only-binary=:all: --python-version 3.11 --implementation cp --abi cp311
            --platform "manylinux2014_$(uname -m)" -r tests/egress_rig/requirements.txt)
rig_wheels_complete() {
    local target
    target=$(mktemp -d)
    "$PYTHON" -m pip install --isolated --dry-run --quiet --no-index --find-links "$RIG_WHEELS" --target "$target" \
        "${rig_target[@]}" >/dev/null 2>&1
    local status=$?
    rm -rf "$target"
    return $status
}

has_image "$EGRESS_BASE" || build_base_image "$EGRESS_BASE" "" "" trixie
"$PYTHON" -m sandbox_kernel.backends.docker.images build --egress --if-needed \
    --base "$EGRESS_BASE" --wheelhouse "$WHEELHOUSE" --tag "$EGRESS_IMAGE"

mkdir -p "$RIG_WHEELS"
rig_wheels_complete || "$PYTHON" -m pip download --quiet --disable-pip-version-check --dest "$RIG_WHEELS" \
    "${rig_target[@]}"
context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
cp tests/egress_rig/Dockerfile tests/egress_rig/requirements.txt "$context/"
cp -r "$RIG_WHEELS" "$context/wheels"
# the legacy builder's cache: an unchanged recipe and wheels rebuild in about a second
DOCKER_BUILDKIT=0 docker build -q --build-arg "BASE=$BASE_IMAGE" -t "$EGRESS_RIG_IMAGE" "$context" 2>&1 \
    | grep -v -e DEPRECATED -e 'BuildKit is currently disabled' -e 'environment-variable' -e '^ *$' || true
docker image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' \
    | grep -F -e "$EGRESS_IMAGE" -e "$EGRESS_RIG_IMAGE" -e "$EGRESS_BASE"
