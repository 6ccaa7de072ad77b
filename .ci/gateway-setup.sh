#!/usr/bin/env bash
# Give CI what the gateway tests need beyond `make install` (which brings Jupyter Kernel Gateway,
# a test extra): Jupyter Enterprise Gateway in a venv of its own (it pins jupyter_client<7,
# jupyter_server<2 and pyzmq<25, which cannot live beside this project's), and the
# pycryptodomex wheel that our kernel launcher (tests/gateway_eg/kernel_launcher.py) needs inside the kernel image (the tests build
# sandbox-kernel-eg:test from sandbox-kernel:latest with it; no registry is needed).
# Idempotent. env: PYTHON_BIN (python3), EG_VENV (build/eg-venv), EG_WHEELS (build/eg-wheels)
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON_BIN=${PYTHON_BIN:-python3}
EG_VENV=${EG_VENV:-build/eg-venv}
EG_WHEELS=${EG_WHEELS:-build/eg-wheels}
EG_VERSION=3.3.0

if ! "$EG_VENV/bin/python" -c "import enterprise_gateway as eg, sys; sys.exit(eg.__version__ != '$EG_VERSION')" \
        2>/dev/null; then
    echo "installing jupyter-enterprise-gateway $EG_VERSION into $EG_VENV"
    "$PYTHON_BIN" -m venv "$EG_VENV"
    "$EG_VENV/bin/python" -m pip install -q --upgrade pip
    "$EG_VENV/bin/python" -m pip install -q "jupyter-enterprise-gateway==$EG_VERSION"
fi
mkdir -p "$EG_WHEELS"
if ! compgen -G "$EG_WHEELS/pycryptodomex-*.whl" >/dev/null; then
    # The kernel image's Python is Debian bookworm's 3.11; this wheel is abi3 (any CPython >= 3.7).
    "$EG_VENV/bin/python" -m pip download -q --only-binary=:all: --no-deps --python-version 3.11 \
        --platform manylinux2014_x86_64 pycryptodomex -d "$EG_WHEELS"
fi
echo "Enterprise Gateway $("$EG_VENV/bin/python" -c 'import enterprise_gateway as eg; print(eg.__version__)') in $EG_VENV;" \
     "kernel image wheels in $EG_WHEELS"
