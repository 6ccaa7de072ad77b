#!/usr/bin/env bash
# Give CI a running Docker engine and the sandbox images, with no container registry.
# Idempotent: installs, starts and builds only what is missing. Runs as root on Debian 12.
#   env: PYTHON (.venv/bin/python), BASE_IMAGE, SANDBOX_IMAGE, WHEELHOUSE, DOCKERD_LOG
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-.venv/bin/python}
BASE_IMAGE=${BASE_IMAGE:-sandbox-kernel-base:bookworm}
SANDBOX_IMAGE=${SANDBOX_IMAGE:-sandbox-kernel:latest}
WHEELHOUSE=${WHEELHOUSE:-build/wheelhouse}
DOCKERD_LOG=${DOCKERD_LOG:-/tmp/dockerd.log}
# shellcheck source=../sandbox_kernel/images/make-base-image.sh
source sandbox_kernel/images/make-base-image.sh   # apt_mirror, build_base_image (debootstrap)

install_packages() {
    local missing=()
    command -v dockerd >/dev/null || missing+=(docker.io)
    command -v debootstrap >/dev/null || missing+=(debootstrap)
    ((${#missing[@]} == 0)) && return 0
    echo "installing ${missing[*]}"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1 apt-get install -y -q "${missing[@]}"
}

engine_answers() { docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

start_engine() {
    engine_answers && return 0
    echo "starting dockerd (log: $DOCKERD_LOG)"
    setsid dockerd >"$DOCKERD_LOG" 2>&1 </dev/null &
    for _ in $(seq 60); do
        engine_answers && return 0
        sleep 0.5
    done
    tail -n 20 "$DOCKERD_LOG" >&2
    echo "error: dockerd did not answer on /var/run/docker.sock within 30 s (log: $DOCKERD_LOG)" >&2
    return 1
}

has_image() { docker image inspect "$1" >/dev/null 2>&1; }

install_packages
start_engine
echo "engine $(docker version --format '{{.Server.Version}}') answers"
has_image "$BASE_IMAGE" || build_base_image "$BASE_IMAGE"
# --if-needed: also rebuilds an image made from an older recipe (label org.sandbox-kernel.recipe)
"$PYTHON" -m sandbox_kernel.images build --if-needed \
    --base "$BASE_IMAGE" --wheelhouse "$WHEELHOUSE" --tag "$SANDBOX_IMAGE"
docker image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' \
    | grep -F -e "$BASE_IMAGE" -e "$SANDBOX_IMAGE"
