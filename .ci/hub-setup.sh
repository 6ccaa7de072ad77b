#!/usr/bin/env bash
# Give CI a JupyterHub rig for tests/test_hub.py, tests/test_docker_rootless.py and tests/test_grading.py:
# - two Linux users (hub-alice, hub-bob: homes 0700, passwords in a root-only file for the browser's login);
# - Debian's rootless Podman for them (podman, uidmap, slirp4netns, fuse-overlayfs, catatonit) and each
#   one's own engine, started with this project's recipe (`sandbox-kernel user-engine start`), which
#   also copies the sandbox image from the Docker engine (.ci/docker-setup.sh runs first);
# - a venv every user can run (Debian's python3: the project's .venv lives under root's home) with
#   JupyterHub, JupyterLab, Notebook, Voila, nbgrader and this clone (editable: tests run today's code);
# - npm's configurable-http-proxy (the PyPI package of that name is another program).
# The hub itself, its config and kernelspecs are the tests' (they start and stop it).
# Idempotent; runs as root on Debian 12.   env: HUB_ROOT (/opt/sandbox-kernel-hub)
set -euo pipefail
cd "$(dirname "$0")/.."

HUB_ROOT=${HUB_ROOT:-/opt/sandbox-kernel-hub}
USERS=(hub-alice hub-bob)
JUPYTERHUB=6.1.1
CHP=5.3.0
ENGINE_LIMITS=(--memory 3g --pids 1024 --cpus 1)   # each user's sandboxes together (tests/targets/hub.py)

# shellcheck source=apt.sh
source .ci/apt.sh   # apt_install

missing=()
for tool in podman:podman newuidmap:uidmap slirp4netns:slirp4netns fuse-overlayfs:fuse-overlayfs \
            catatonit:catatonit npm:npm setpriv:util-linux runuser:util-linux curl:curl nsenter:util-linux kill:procps; do
    command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
done
apt_install "${missing[@]}"

# the users: a 0700 home each, a password the tests read (root only)
install -d -m 0700 "$HUB_ROOT/secrets"
for user in "${USERS[@]}"; do
    if ! id "$user" >/dev/null 2>&1; then
        useradd --create-home --shell /bin/bash "$user"   # adds its /etc/subuid and /etc/subgid ranges
    fi
    chmod 0700 "/home/$user"
    if [[ ! -s "$HUB_ROOT/secrets/$user" ]]; then
        head -c 18 /dev/urandom | base64 | tr -d '/+=' > "$HUB_ROOT/secrets/$user"
        echo "$user:$(cat "$HUB_ROOT/secrets/$user")" | chpasswd
    fi
done

# the venv every user runs (the hub's single-user servers, their kernels, nbgrader)
if [[ ! -x "$HUB_ROOT/venv/bin/jupyterhub" ]] || ! "$HUB_ROOT/venv/bin/python" -c \
        "import jupyterhub, sys; sys.exit(jupyterhub.__version__ != '$JUPYTERHUB')" 2>/dev/null; then
    echo "installing JupyterHub $JUPYTERHUB and the notebook front ends into $HUB_ROOT/venv"
    /usr/bin/python3 -m venv "$HUB_ROOT/venv"
    "$HUB_ROOT/venv/bin/python" -m pip install -q --upgrade pip
    "$HUB_ROOT/venv/bin/python" -m pip install -q "jupyterhub==$JUPYTERHUB" "jupyterlab>=4.6" "notebook>=7.6" \
        "voila>=0.5.13" "nbgrader>=0.9.6" "papermill>=2.6" "ipywidgets>=8"
fi
# this clone, editable where the users can read it (the tests then run today's code), else a copy
if runuser -u "${USERS[0]}" -- test -r "$(pwd)/pyproject.toml"; then editable=-e; else
    editable=""
    echo "note: $(pwd) is closed to other users: installing a copy (run this script again after changing the code)"
fi
# (skipped when the venv already has this clone, editable, installed from this pyproject.toml)
installed="$(pwd -P) $(sha256sum pyproject.toml | cut -c1-16)"
if [[ -z "$editable" || "$(cat "$HUB_ROOT/venv/.sandbox-kernel-clone" 2>/dev/null)" != "$installed" ]]; then
    if ! log=$("$HUB_ROOT/venv/bin/python" -m pip install -q $editable ".[docker,widgets]" 2>&1); then
        echo "$log" >&2
        exit 1
    fi
    chmod -R a+rX "$HUB_ROOT/venv"
    if [[ -n "$editable" ]]; then echo "$installed" >"$HUB_ROOT/venv/.sandbox-kernel-clone"; else rm -f "$HUB_ROOT/venv/.sandbox-kernel-clone"; fi
fi
runuser -u "${USERS[0]}" -- "$HUB_ROOT/venv/bin/python" -c "import sandbox_kernel, jupyterhub"

if [[ "$("$HUB_ROOT/chp/node_modules/.bin/configurable-http-proxy" --version 2>/dev/null)" != "$CHP" ]]; then
    echo "installing configurable-http-proxy $CHP from npm into $HUB_ROOT/chp"
    npm install --silent --no-audit --no-fund --prefix "$HUB_ROOT/chp" "configurable-http-proxy@$CHP"
fi

# each user's own rootless engine, in a cgroup of its own, with the sandbox image
for user in "${USERS[@]}"; do
    "$HUB_ROOT/venv/bin/sandbox-kernel" user-engine start "$user" "${ENGINE_LIMITS[@]}"
done
echo "hub rig in $HUB_ROOT: JupyterHub $("$HUB_ROOT/venv/bin/jupyterhub" --version)," \
     "configurable-http-proxy $("$HUB_ROOT/chp/node_modules/.bin/configurable-http-proxy" --version), users ${USERS[*]}"
