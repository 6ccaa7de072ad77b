#!/usr/bin/env bash
# Give CI the rig of "an engine that does not share this host's filesystem" (tests/remote_engine/,
# started and stopped by tests/targets/remote_engine.py): its image, Debian's docker.io and an
# sshd on the project's base image, and the host tools the tests make its keys with (openssl,
# ssh-keygen). Runs after docker-setup.sh (engine and base image). Idempotent: the legacy
# builder's cache makes a rebuild of an unchanged recipe take about a second. Root, Debian 12.
#   env: BASE_IMAGE, RIG_IMAGE
set -euo pipefail
cd "$(dirname "$0")/.."

BASE_IMAGE=${BASE_IMAGE:-sandbox-kernel-base:bookworm}
RIG_IMAGE=${RIG_IMAGE:-sandbox-kernel-remote-engine:latest}
# shellcheck source=apt.sh
source .ci/apt.sh   # apt_install

missing=()
command -v openssl >/dev/null || missing+=(openssl)
command -v ssh-keygen >/dev/null || missing+=(openssh-client)
apt_install "${missing[@]}"

# No BuildKit here (ENVIRONMENT.md); apt in the build reaches the mirror the base image names.
start=$SECONDS
DOCKER_BUILDKIT=0 docker build -q --build-arg "BASE=$BASE_IMAGE" -t "$RIG_IMAGE" tests/remote_engine 2>&1 \
    | grep -v -e DEPRECATED -e 'BuildKit is currently disabled' -e 'environment-variable' -e '^ *$' || true
docker image inspect "$RIG_IMAGE" >/dev/null
echo "$RIG_IMAGE ready in $((SECONDS - start)) s ($(docker image inspect --format '{{.Size}}' "$RIG_IMAGE" | numfmt --to=iec))"
