#!/usr/bin/env bash
# Download the wheels the tests install, so that the tests run pip with no index (PIP_NO_INDEX=1,
# PIP_FIND_LINKS=a folder of build/test-wheels: tests/support/wheels.py) and reach no listener but
# their own. A test asking for a wheel missing here fails instead of going to the index.
#   build/test-wheels/host     this machine's Python: tests/test_newcomer.py's fresh venv (the README's
#                              `pip install '.[docker,examples]'`, hatchling for its isolated build and
#                              JupyterLab) and tests/test_docker_build.py's
#                              bash_kernel wheels (downloaded by the host's pip into a build context)
#   build/test-wheels/x86_64   the sandbox image's Python (CPython 3.11, manylinux x86_64): the docker
#                              backend's `packages` in tests/test_docker_build.py, tests/test_image_ahead.py
#   build/test-wheels/aarch64  the same for arm64 images: tests/test_docker_arm64.py
# Idempotent (pip resolves offline first; downloads only when something is missing; skipped when
# the stamp says this recipe's download completed); quiet unless it fails. Needs the package index.   env: PYTHON (.venv/bin/python), TEST_WHEELS (build/test-wheels)
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-.venv/bin/python}
TEST_WHEELS=${TEST_WHEELS:-build/test-wheels}
HOST_WHEELS="$TEST_WHEELS/host"
NEWCOMER=('.[docker,examples]' 'hatchling>=1.27' jupyterlab)
BASH_KERNEL=(--no-deps --only-binary=:all: bash_kernel==0.10.0 pexpect==4.9.0 ptyprocess==0.7.0 filetype==1.2.0)
SANDBOX_X86_64=(tqdm scikit-learn==1.9.1)
SANDBOX_AARCH64=(pyyaml)

# A complete download leaves a stamp naming this recipe (these lists and the project's dependencies):
# then nothing is resolved again (pip's offline resolution takes 10-30 s here). Delete it to check.
STAMP="$TEST_WHEELS/.complete"
recipe=$(cat "$0" pyproject.toml | sha256sum | cut -c1-16)
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$recipe" ]]; then
    exit 0
fi

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# host_wheels ARG...: `pip download ARG...` into $HOST_WHEELS unless it already holds them all
host_wheels() {
    local pip=("$PYTHON" -m pip download --quiet --disable-pip-version-check --dest "$HOST_WHEELS")
    "${pip[@]}" --isolated --no-index --find-links "$HOST_WHEELS" "$@" >/dev/null 2>&1 && return 0
    "${pip[@]}" "$@" >"$scratch/pip.log" 2>&1 || { tail -n 30 "$scratch/pip.log" >&2; return 1; }
}

# sandbox_wheels PLATFORM REQUIREMENT...: the backend's own download (its tags, its folder per architecture)
sandbox_wheels() {
    local platform=$1
    shift
    printf '%s\n' "$@" >"$scratch/requirements.txt"
    "$PYTHON" -m sandbox_kernel.backends.docker.images download --wheelhouse "$TEST_WHEELS" \
        --requirements "$scratch/requirements.txt" --platform "$platform" >"$scratch/download.log" 2>&1 \
        || { cat "$scratch/download.log" >&2; return 1; }
}

mkdir -p "$HOST_WHEELS"
host_wheels "${NEWCOMER[@]}"
host_wheels "${BASH_KERNEL[@]}"
sandbox_wheels linux/amd64 "${SANDBOX_X86_64[@]}"
sandbox_wheels linux/arm64 "${SANDBOX_AARCH64[@]}"
if sdists=$(find "$TEST_WHEELS" -type f ! -name '*.whl' ! -name .complete | grep .); then
    echo "error: not wheels (their build would need the index while tests run): $sdists" >&2
    exit 1
fi
echo "$recipe" >"$STAMP"
