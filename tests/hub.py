"""A JupyterHub on 127.0.0.1 for the tests, set up as docs/how-to/jupyterhub.md tells an administrator:
the rig of .ci/hub-setup.sh (two Linux users, each with a rootless Podman engine of their own, a
venv every user can run, npm's configurable-http-proxy), LocalProcessSpawner, PAM logins, the
sandbox kernels installed by root under umask 077, the mandatory setup (only sandbox kernels, no
terminals) and the administrator's lock. Users log in through headless Chromium (playwright).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests.browser import CHROMIUM, stop_server

ROOT = Path(os.environ.get("HUB_ROOT", "/opt/sandbox-kernel-hub"))
VENV = ROOT / "venv"
CHP = ROOT / "chp" / "node_modules" / ".bin" / "configurable-http-proxy"
USERS = ("hub-alice", "hub-bob")
ENGINE_LIMITS = {"memory": 3 * 1024**3, "pids": 1024, "cpus": 1.0}  # as .ci/hub-setup.sh starts the engines
SETUP = "run `bash .ci/hub-setup.sh` as root (after .ci/docker-setup.sh)"
KERNEL_OPTIONS = ["--DockerBackend.memory_limit=0", "--DockerBackend.pids_limit=0", "--DockerBackend.cpus=0"]
"""The hub's sandbox-docker kernelspec: rootless Podman on cgroup v1 cannot limit one sandbox, the
user's engine's cgroup bounds them together (sandbox_kernel/backends/docker/rootless.py)."""
LOCK = {"backends": ["docker"], "output_policy": "sanitize",
        "DockerBackend": {"network": "none", "mounts": [], "env_vars": {"subset_of": []}},
        "per_user": {"sandboxes": 3}}
LOCK_FILE = VENV / "etc" / "jupyter" / "sandbox_kernel_lock.json"
CONFIG = """
from sandbox_kernel.backends.docker.user_engine import Limits, spawner_hook
c = get_config()
c.JupyterHub.ip, c.JupyterHub.port = "127.0.0.1", {port}
c.JupyterHub.hub_ip, c.JupyterHub.hub_port = "127.0.0.1", {hub_port}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_port}"
c.ConfigurableHTTPProxy.command = ["{chp}"]
c.JupyterHub.db_url = "sqlite:///{tmp}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = "{tmp}/cookie_secret"
c.JupyterHub.pid_file = "{tmp}/jupyterhub.pid"
c.Authenticator.allowed_users = {users!r}
c.JupyterHub.services = [{{"name": "tests", "api_token": "{token}"}}]
c.JupyterHub.load_roles = [{{"name": "tests", "services": ["tests"],
                            "scopes": ["admin:users", "admin:servers", "access:servers"]}}]
c.Spawner.cmd = ["{venv}/bin/jupyterhub-singleuser"]
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = c.Spawner.http_timeout = 120
c.Spawner.pre_spawn_hook = spawner_hook(Limits(**{limits!r}), image={image!r})
c.Spawner.args = {args!r}
"""
MANDATORY = ["--KernelSpecManager.allowed_kernelspecs=sandbox-docker", "--KernelSpecManager.ensure_native_kernel=False",
             "--MappingKernelManager.default_kernel_name=sandbox-docker", "--ServerApp.terminals_enabled=False"]
"""docs/how-to/jupyterhub.md's mandatory setup: command-line options of every user's server (they beat
the user's own config files)."""


def unavailable() -> str | None:
    for path, what in ((VENV / "bin" / "jupyterhub", "JupyterHub"), (CHP, "configurable-http-proxy"),
                       (Path(CHROMIUM), "chromium")):
        if not path.exists():
            return f"{what} is not installed ({path}); {SETUP}"
    if os.getuid() != 0:
        return "a hub with real Linux users runs as root"
    for user in USERS:
        if not (ROOT / "secrets" / user).exists():
            return f"the rig user {user} is missing; {SETUP}"
    return None


def free_port() -> int:
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def password(user: str) -> str:
    return (ROOT / "secrets" / user).read_text().strip()


def as_user(user: str, *argv: str, **kwargs: Any) -> subprocess.CompletedProcess:
    """``argv`` run as Linux user ``user`` (its login environment and runtime folder)."""
    uid = Path(f"/home/{user}").stat().st_uid
    return subprocess.run(["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--reset-env", "env",
                           f"XDG_RUNTIME_DIR=/run/user/{uid}", *argv], capture_output=True, text=True, **kwargs)


def install_kernelspecs(options: list[str] = KERNEL_OPTIONS) -> subprocess.CompletedProcess:
    """``sandbox-kernel install --sys-prefix`` into the rig's venv as root under umask 077."""
    return subprocess.run(["sh", "-c", 'umask 077 && exec "$@"', "sh", str(VENV / "bin" / "sandbox-kernel"), "install",
                           "--sys-prefix", "--backend", "docker", "--", *options],
                          capture_output=True, text=True, timeout=120)


class Hub:
    """The hub, started by :meth:`start` with ``args`` for every user's server (default:
    :data:`MANDATORY`), ``lock`` as the administrator's lock (None: no lock file), ``image`` the
    sandbox image its spawner hook gives each user's engine and ``env`` added to its environment."""

    def __init__(self, args: list[str] | None = None, lock: dict | None = LOCK, image: str = "sandbox-kernel:latest",
                 env: dict[str, str] | None = None) -> None:
        self.args = MANDATORY if args is None else args
        self.lock, self.image, self.env = lock, image, env or {}
        self.tmp = Path(tempfile.mkdtemp(prefix="sandbox-kernel-hub-"))
        self.token = secrets.token_hex(16)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    def start(self) -> Hub:
        if self.lock is not None:
            LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
            LOCK_FILE.write_text(json.dumps(self.lock))
            LOCK_FILE.chmod(0o644)
        (self.tmp / "jupyterhub_config.py").write_text(CONFIG.format(
            port=self.port, hub_port=free_port(), proxy_port=free_port(), chp=CHP, tmp=self.tmp, users=set(USERS),
            token=self.token, venv=VENV, limits=ENGINE_LIMITS, image=self.image, args=self.args))
        self.log = open(self.tmp / "hub.log", "wb")
        env = {"PATH": f"{VENV}/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8", **self.env}
        self.process = subprocess.Popen([str(VENV / "bin" / "jupyterhub"), "-f", "jupyterhub_config.py"], cwd=self.tmp,
                                        env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"jupyterhub exited: {(self.tmp / 'hub.log').read_text()[-3000:]}")
            with contextlib.suppress(OSError):
                if self.api("GET", "/hub/api/") is not None:
                    return self
            time.sleep(0.3)
        raise RuntimeError(f"jupyterhub did not answer within 60 s: {(self.tmp / 'hub.log').read_text()[-3000:]}")

    def stop(self) -> None:
        for user in USERS:
            with contextlib.suppress(Exception):
                self.api("DELETE", f"/hub/api/users/{user}/server")
        if self.process is not None:  # the hub stops the users' servers on SIGTERM
            stop_server(self.process, self.log, self.tmp / "hub.log", "jupyterhub.log", grace=60)
        if self.lock is not None:  # another hub's lock is not this one's to remove
            LOCK_FILE.unlink(missing_ok=True)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def api(self, method: str, path: str, body: Any = None) -> Any:
        """The hub's (or, under ``/user/NAME/``, a user server's) JSON answer with the tests'
        service token; None for an empty answer."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=60) as answer:
            text = answer.read()
        return json.loads(text) if text else None

    def kernels(self, user: str) -> list[dict]:
        """The kernels running in ``user``'s server (``GET /api/kernels``); [] when it is stopped."""
        try:
            return self.api("GET", f"/user/{user}/api/kernels")
        except urllib.error.HTTPError:
            return []


def write_notebook(user: str, name: str, cells: list[str], kernel: str = "sandbox-docker") -> Path:
    """``~USER/NAME.ipynb`` (owned by the user) with one code cell per source, for ``kernel``."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": kernel, "display_name": kernel, "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    path = Path("/home", user, f"{name}.ipynb")
    nbformat.write(nb, path)
    shutil.chown(path, user, user)
    return path


def volumes(user: str) -> list[str]:
    """Names of the sandbox volumes (``-work``) in ``user``'s own engine."""
    done = as_user(user, "podman", "volume", "ls", "--format", "{{.Name}}", "--filter",
                   "label=org.sandbox-kernel.owner", timeout=60)
    return done.stdout.split()


def user_engine(action: str, user: str, **env: str) -> subprocess.CompletedProcess:
    """``sandbox-kernel user-engine ACTION USER`` as root, with the rig's limits (as
    .ci/hub-setup.sh starts the engines) and ``env`` added to the environment."""
    limits = ["--memory", str(ENGINE_LIMITS["memory"]), "--pids", str(ENGINE_LIMITS["pids"]),
              "--cpus", str(ENGINE_LIMITS["cpus"])] if action == "start" else []
    return subprocess.run([str(VENV / "bin" / "sandbox-kernel"), "user-engine", action, user, *limits],
                          capture_output=True, text=True, timeout=300, env={**os.environ, **env})


def sandboxes(user: str) -> list[str]:
    """Names of the sandbox containers in ``user``'s own engine (running or not)."""
    done = as_user(user, "podman", "ps", "-a", "--format", "{{.Names}}", "--filter", "label=org.sandbox-kernel.owner",
                   timeout=60)
    return done.stdout.split()
