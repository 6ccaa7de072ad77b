"""An E2B-compatible server on 127.0.0.1 for testing with the real SDK over real HTTP.

The real ``e2b`` / ``e2b_code_interpreter`` SDKs send every request here when
``E2B_API_URL`` and ``E2B_SANDBOX_URL`` point at this server (see :meth:`E2BTestServer.env`):

* control plane (no ``E2b-Sandbox-Port`` header, ``X-API-KEY`` checked):
  ``POST /v2/sandboxes``, ``GET /v2/sandboxes``, ``GET|DELETE /sandboxes/{id}``,
  ``POST /sandboxes/{id}/timeout``, ``POST /v2/sandboxes/{id}/connect`` (resumes a paused one),
  ``POST /sandboxes/{id}/pause``; the lifecycle of create (``autoPause``, ``autoResume``);
* code interpreter (``E2b-Sandbox-Port: 49999``): ``POST /execute``,
  ``GET|POST /contexts``, ``DELETE /contexts/{id}``, ``POST /contexts/{id}/restart``;
* envd (``E2b-Sandbox-Port: 49983``): ``GET /health``, ``GET|POST /files``.

In-sandbox requests name their sandbox with the ``E2b-Sandbox-Id`` header (or a
``{port}-{id}.{domain}`` Host). A killed, expired or unknown sandbox answers 502
"The sandbox ... was not found", as E2B's proxy does.

Usage::

    with E2BTestServer() as srv:
        monkeypatch.setenv(...)  # for each item of srv.env()
        sbx = await AsyncSandbox.create()

or standalone: ``python tests/e2b_server.py --port 8765`` prints ``export`` lines.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Iterable
from http.server import ThreadingHTTPServer
from pathlib import Path

try:
    from .e2b_server_kernels import KernelFactory, KernelLoop
    from .e2b_server_routes import Handler
    from .e2b_server_sandbox import Sandbox
    from .e2b_server_wire import KEEPALIVE_INTERVAL, Timings
except ImportError:  # run as a script, or tests/ itself is on sys.path
    from e2b_server_kernels import KernelFactory, KernelLoop
    from e2b_server_routes import Handler
    from e2b_server_sandbox import Sandbox
    from e2b_server_wire import KEEPALIVE_INTERVAL, Timings

DEFAULT_SANDBOX_TIMEOUT = 300  # seconds, E2B's default


class E2BTestServer:
    """An E2B-compatible HTTP server in a background thread; a context manager.

    Args:
        host: Address to bind.
        port: Port to bind; 0 picks a free one.
        api_key: Value of ``E2B_API_KEY`` in :meth:`env`. Any key is accepted except ``invalid_keys``.
        invalid_keys: API keys answered with 401 (the SDK raises ``AuthenticationException``).
        keepalive_interval: Seconds between ``{"type": "keepalive"}`` lines of a silent execution
            (E2B's: 5).
        timings: When the code interpreter does what, in seconds; E2B's measured ones by default
            (``e2b_server_wire.Timings``).
        envd_version: ``envdVersion`` reported to the SDK (≥ 0.5.7 enables octet-stream uploads).
        expire: Kill sandboxes whose timeout (``timeout`` / ``set_timeout``) has passed.
        verbose: Log each request to stderr.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, api_key: str = "e2b_test_key",
                 invalid_keys: Iterable[str] = ("bad-key",), keepalive_interval: float = KEEPALIVE_INTERVAL,
                 timings: Timings | None = None, envd_version: str = "0.5.7", expire: bool = True,
                 verbose: bool = False) -> None:
        self.api_key = api_key
        self.invalid_keys = frozenset(invalid_keys)
        self.keepalive_interval = keepalive_interval
        self.timings = timings or Timings()
        self.envd_version = envd_version
        self.expire = expire
        self.verbose = verbose
        self._address = (host, port)
        self._sandboxes: dict[str, Sandbox] = {}
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._lost_executions, self._lost_containing = 0, ""

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> E2BTestServer:
        """Bind, start serving in a daemon thread and start the kernel loop."""
        self._root = Path(tempfile.mkdtemp(prefix="e2b-test-server-"))
        self._kernels = KernelFactory(self._root)
        self.loop = KernelLoop()
        self._httpd = ThreadingHTTPServer(self._address, Handler)
        self._httpd.daemon_threads = True
        self._httpd.app = self  # type: ignore[attr-defined]
        threading.Thread(target=self._httpd.serve_forever, name="e2b-http", daemon=True).start()
        return self

    def close(self) -> None:
        """Kill every sandbox (kernels included), stop serving, remove scratch dirs."""
        if self._httpd is None:
            return
        for sandbox_id in list(self._sandboxes):
            self.kill_sandbox(sandbox_id)
        self._httpd.shutdown()
        self._httpd.server_close()
        self._httpd = None
        self.loop.stop()
        shutil.rmtree(self._root, ignore_errors=True)

    def __enter__(self) -> E2BTestServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- public API ------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """``http://HOST:PORT`` of the running server."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def env(self) -> dict[str, str]:
        """Environment variables that point the E2B SDK at this server."""
        return {"E2B_API_KEY": self.api_key, "E2B_API_URL": self.url,
                "E2B_SANDBOX_URL": self.url, "E2B_DEBUG": "false"}

    @property
    def sandboxes(self) -> list[str]:
        """Ids of the sandboxes alive (expired ones are killed first)."""
        with self._lock:
            ids = list(self._sandboxes)
        return [i for i in ids if self.get(i) is not None]

    def get(self, sandbox_id: str) -> Sandbox | None:
        """The live sandbox with this id, or None (killing it if it has expired)."""
        with self._lock:
            sandbox = self._sandboxes.get(sandbox_id)
        if sandbox is not None and self.expire and sandbox.expired:
            if sandbox.auto_pause:  # lifecycle on_timeout='pause'
                sandbox.pause()
                return sandbox
            self.kill_sandbox(sandbox_id)
            return None
        return sandbox

    def lose_executions(self, count: int, containing: str = "") -> None:
        """Answer the next ``count`` ``POST /execute`` requests whose code contains ``containing``
        with keepalives only, as E2B's server does for a request sent while Jupyter restarts the
        context's kernel."""
        with self._lock:
            self._lost_executions, self._lost_containing = count, containing

    def take_lost_execution(self, code: str) -> bool:
        with self._lock:
            if self._lost_executions <= 0 or self._lost_containing not in code:
                return False
            self._lost_executions -= 1
            return True

    def raced(self, sandbox_id: str) -> int:
        """How many executions of this sandbox reached their kernel while the interrupt of a
        closed stream was still on its way to it (each may have been hit by that interrupt)."""
        return sum(getattr(ctx, "raced", 0) for ctx in self._sandboxes[sandbox_id].contexts())

    def workdir(self, sandbox_id: str) -> Path:
        """The scratch directory of a live sandbox (its home and default cwd).

        Raises:
            KeyError: The sandbox is not alive.
        """
        return self._sandboxes[sandbox_id].workdir

    def kill_sandbox(self, sandbox_id: str) -> bool:
        """Kill a sandbox as if it expired; return False if it was not alive."""
        with self._lock:
            sandbox = self._sandboxes.pop(sandbox_id, None)
        if sandbox is None:
            return False
        sandbox.kill()
        return True

    def create_sandbox(self, template_id: str, timeout: float | None, envs: dict, metadata: dict,
                       auto_pause: bool = False, auto_resume: bool = False) -> Sandbox:
        """Create a sandbox (``POST /v2/sandboxes``); ``timeout`` in seconds, None for the default;
        ``auto_pause``/``auto_resume``: the lifecycle (on timeout pause; resume on a request)."""
        sandbox = Sandbox(self._root / "sandboxes", self.loop, self._kernels, template_id=template_id,
                          timeout=timeout or DEFAULT_SANDBOX_TIMEOUT, envs=envs, metadata=metadata,
                          auto_pause=auto_pause, auto_resume=auto_resume, timings=self.timings)
        with self._lock:
            self._sandboxes[sandbox.id] = sandbox
        return sandbox


def main(argv: list[str] | None = None) -> None:
    """``python tests/e2b_server.py [--port N]``: serve until SIGINT/SIGTERM."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--quiet", action="store_true", help="do not log requests")
    parser.add_argument("--no-expire", action="store_true", help="keep sandboxes past their timeout")
    args = parser.parse_args(argv)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with E2BTestServer(args.host, args.port, expire=not args.no_expire, verbose=not args.quiet) as srv:
        for key, value in srv.env().items():
            print(f"export {key}={shlex.quote(value)}", flush=True)
        print(f"# E2B test server on {srv.url}; Ctrl-C to stop", file=sys.stderr, flush=True)
        stop.wait()


if __name__ == "__main__":
    main()
