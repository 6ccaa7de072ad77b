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
# shellcheck source=../sandbox_kernel/backends/docker/images/make-base-image.sh
source sandbox_kernel/backends/docker/images/make-base-image.sh   # apt_mirror, build_base_image (debootstrap)

# shellcheck source=apt.sh
source .ci/apt.sh   # apt_install

install_packages() {
    local missing=()
    command -v dockerd >/dev/null || missing+=(docker.io)
    command -v debootstrap >/dev/null || missing+=(debootstrap)
    command -v runsc >/dev/null || missing+=(runsc)
    apt_install "${missing[@]}"
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

# gVisor: register Debian's runsc with the engine as the runtime `runsc` (flags measured in
# ENVIRONMENT.md: --network=none, else it refuses to start; --host-uds=all, else the host cannot
# reach the kernel's ipc sockets). Merges into an existing daemon.json and reloads the engine's
# configuration with SIGHUP (runtimes are reloadable): running containers are not touched.
DAEMON_JSON=${DAEMON_JSON:-/etc/docker/daemon.json}
register_runsc() {
    docker info --format '{{json .Runtimes}}' | grep -q '"runsc"' && return 0
    echo "registering runsc (gVisor) in $DAEMON_JSON"
    mkdir -p "$(dirname "$DAEMON_JSON")"
    python3 - "$DAEMON_JSON" "$(command -v runsc)" <<'PY'
import json, os, sys
path, runsc = sys.argv[1], sys.argv[2]
config = json.load(open(path)) if os.path.exists(path) and os.path.getsize(path) else {}
config.setdefault("runtimes", {})["runsc"] = {"path": runsc, "runtimeArgs": ["--network=none", "--host-uds=all"]}
with open(path + ".new", "w") as f:
    json.dump(config, f, indent=2)
os.replace(path + ".new", path)
PY
    kill -HUP "$(pidof dockerd)"
    for _ in $(seq 20); do
        docker info --format '{{json .Runtimes}}' | grep -q '"runsc"' && return 0
        sleep 0.5
    done
    echo "error: dockerd did not pick up the runsc runtime from $DAEMON_JSON (log: $DOCKERD_LOG)" >&2
    return 1
}

has_image() { docker image inspect "$1" >/dev/null 2>&1; }

install_packages
start_engine
echo "engine $(docker version --format '{{.Server.Version}}') answers"
register_runsc
has_image "$BASE_IMAGE" || build_base_image "$BASE_IMAGE"
# --if-needed: also rebuilds an image made from an older recipe (label org.sandbox-kernel.recipe)
"$PYTHON" -m sandbox_kernel.backends.docker.images build --if-needed \
    --base "$BASE_IMAGE" --wheelhouse "$WHEELHOUSE" --tag "$SANDBOX_IMAGE"
docker image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' \
    | grep -F -e "$BASE_IMAGE" -e "$SANDBOX_IMAGE"
