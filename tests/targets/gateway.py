"""The gateway backend against a real Jupyter Kernel Gateway (``jupyter-kernel-gateway``, a
test extra) that the test session starts on 127.0.0.1 with a token; its kernels are ipykernel
processes of this venv, in a scratch directory. :func:`gateway` gives it to tests that stop it
or delete kernels behind the backend's back (also the ``kernel_gateway`` fixture). Enterprise
Gateway: tests/targets/gateway_eg.py."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import secrets
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from . import Prepared, Target


def free_port(ip: str = "127.0.0.1") -> int:
    """A port the OS just gave out on ``ip`` (the gateways cannot report a port they picked)."""
    with socket.socket() as sock:
        sock.bind((ip, 0))
        return sock.getsockname()[1]


def wait_http(url: str, timeout: float, process: subprocess.Popen | None = None) -> None:
    """Wait until ``url`` answers (any HTTP status); raise RuntimeError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the server exited with code {process.returncode}")
        try:
            urllib.request.urlopen(url, timeout=2, context=ssl._create_unverified_context())  # a test's own cert
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer within {timeout:g} s")


def stop_process(process: subprocess.Popen | None, grace: float) -> None:
    """SIGTERM ``process`` if it runs, then SIGKILL it after ``grace`` seconds."""
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def die_with_parent() -> None:
    """For ``Popen(preexec_fn=...)``: the server gets SIGTERM when the test process dies, even
    by SIGKILL (Linux ``prctl(PR_SET_PDEATHSIG)``), so no gateway outlives a killed run."""
    import ctypes
    import signal

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1


class KernelGateway:
    """``python -m kernel_gateway`` on a free port of 127.0.0.1 with a random token; restartable."""

    def __init__(self, *options: str, kernelspecs: dict[str, list[str]] | None = None, scheme: str = "http") -> None:
        self.token = secrets.token_hex(16)
        self.port = free_port()
        self.url = f"{scheme}://127.0.0.1:{self.port}"
        self.options = options
        self.workdir = Path(tempfile.mkdtemp(prefix="sandbox-gateway-test-"))
        self.home = self.workdir / "home"  # the gateway's folder, so its kernels': not where its log grows
        self.home.mkdir()
        self.process: subprocess.Popen | None = None
        for name, argv in (kernelspecs or {}).items():
            spec = self.workdir / "share" / "kernels" / name
            spec.mkdir(parents=True)
            (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": name, "language": "python"}))

    def start(self) -> KernelGateway:
        log = open(self.workdir / "gateway.log", "ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kernel_gateway", "--KernelGatewayApp.ip=127.0.0.1",
             f"--KernelGatewayApp.port={self.port}", "--KernelGatewayApp.port_retries=0",
             f"--KernelGatewayApp.auth_token={self.token}", *self.options],
            cwd=self.home, env={**os.environ, "JUPYTER_PATH": str(self.workdir / "share")}, stdout=log,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)
        log.close()
        wait_http(f"{self.url}/api", 60, self.process)
        return self

    def kill(self) -> None:
        """SIGKILL: the gateway vanishes without closing anything (its kernels die with it)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop(self) -> None:
        stop_process(self.process, 15)

    def request(self, method: str, path: str, token: str | None = None) -> tuple[int, bytes]:
        req = urllib.request.Request(f"{self.url}{path}", method=method,
                                     headers={"Authorization": f"token {token or self.token}"})
        try:
            with urllib.request.urlopen(req, timeout=10) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def env(self) -> dict[str, str]:
        return {"JUPYTER_GATEWAY_URL": self.url, "JUPYTER_GATEWAY_AUTH_TOKEN": self.token}

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


def gateway() -> KernelGateway:
    """The session's running Kernel Gateway (the ``kernel_gateway`` fixture)."""
    from tests.support.backends import prepared

    return prepared("gateway").rig


def _unavailable() -> str | None:
    for module, extra in (("jupyter_server", "sandbox-kernel[gateway]"), ("kernel_gateway", "sandbox-kernel[test]")):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (pip install '{extra}')"
    return None


# The gateway's restarter checks its kernels every time_to_dead seconds (jupyter_client: 3 s);
# a shorter period makes a dead kernel's report quicker, as a production gateway may choose.
# Its websocket drops IOPub output above 1 MB/s by default (jupyter_server's rate limit), which
# would hide large outputs from the tests of max_message_bytes; docs/how-to/gateway.md says the same.
OPTIONS = ("--KernelRestarter.time_to_dead=0.5", "--ZMQChannelsWebsocketConnection.limit_rate=False")

SLOW_START_S = 3
KERNELSPECS = {"slow-python": [sys.executable, "-c", f"import runpy, sys, time; time.sleep({SLOW_START_S}); "
                               "sys.argv = ['ipykernel_launcher', '-f', sys.argv[1]]; "
                               "runpy.run_module('ipykernel_launcher', run_name='__main__')", "{connection_file}"]}
"""A kernel that takes SLOW_START_S seconds to come up, as a pod being scheduled does."""


@contextlib.contextmanager
def _prepare() -> Iterator[Prepared]:
    server = KernelGateway(*OPTIONS, kernelspecs=KERNELSPECS).start()
    try:
        yield Prepared(traits={"url": server.url, "auth_token": server.token, "heartbeat_interval": 1.0},
                       kernel_env=server.env(), rig=server)
    finally:
        server.close()


TARGET = Target("gateway", unavailable=_unavailable, prepare=_prepare)
