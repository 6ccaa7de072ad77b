"""The E2B endpoints of the test server: one handler method per endpoint.

Which plane a request is for comes from the ``E2b-Sandbox-Port`` header the SDK
sends to ``E2B_SANDBOX_URL`` (or a ``{port}-{sandbox id}.{domain}`` Host, as in the
cloud): none → control plane, 49999 → code interpreter, 49983 → envd. The sandbox
is named by the ``E2b-Sandbox-Id`` header (or that Host).
"""

from __future__ import annotations

import gzip
import json
import queue
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import parse_qsl

try:
    from .e2b_server_http import HandlerBase, HTTPError
    from .e2b_server_kernels import Context
    from .e2b_server_sandbox import ContextError, Sandbox
    from .e2b_server_wire import END_OF_EXECUTION, error_event
except ImportError:  # tests/ itself is on sys.path
    from e2b_server_http import HandlerBase, HTTPError
    from e2b_server_kernels import Context
    from e2b_server_sandbox import ContextError, Sandbox
    from e2b_server_wire import END_OF_EXECUTION, error_event

if TYPE_CHECKING:
    from e2b_server import E2BTestServer

JUPYTER_PORT = "49999"
ENVD_PORT = "49983"
T = TypeVar("T")

API = None
"""The plane of the E2B REST API (no ``E2b-Sandbox-Port``); the sandbox's are its ports."""
ROUTES: dict[str | None, list[tuple[str, str, str]]] = {}
"""Plane → ``(method, path pattern, handler method name)``, filled by :func:`endpoint`."""
F = TypeVar("F", bound=Callable)


def endpoint(plane: str | None, method: str, pattern: str) -> Callable[[F], F]:
    """Route ``method`` requests whose path matches ``pattern`` on ``plane`` to the handler below."""

    def register(handler: F) -> F:
        ROUTES.setdefault(plane, []).append((method, pattern, handler.__name__))
        return handler

    return register


_HOST = re.compile(r"^(\d+)-([^.]+)\.")  # {port}-{sandbox id}.{domain}


def sandbox_model(sandbox: Sandbox, envd_version: str, detail: bool = False) -> dict:
    """The API's ``Sandbox`` model; ``SandboxDetail``/``ListedSandbox`` when ``detail``."""
    data = {"templateID": sandbox.template_id, "sandboxID": sandbox.id, "clientID": "e2b-test",
            "envdVersion": envd_version, "envdAccessToken": sandbox.access_token}
    if detail:
        data.update(startedAt=_iso(sandbox.started_at), endAt=_iso(sandbox.end_at), cpuCount=2,
                    memoryMB=512, diskSizeMB=1024, state=sandbox.state, metadata=sandbox.metadata)
        if sandbox.network is not None:
            data["network"] = sandbox.network
    return data


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat()


class Handler(HandlerBase):
    """Routes to ``api_*`` (control plane), ``ci_*`` (code interpreter) or ``envd_*`` methods."""

    sandbox: Sandbox

    @property
    def app(self) -> E2BTestServer:
        return self.server.app  # type: ignore[attr-defined]

    def route(self, method: str, path: str) -> None:
        port = self.headers.get("E2b-Sandbox-Port")
        sandbox_id = self.headers.get("E2b-Sandbox-Id")
        if host := _HOST.match(self.headers.get("Host", "")):
            port, sandbox_id = port or host[1], sandbox_id or host[2]
        if port is None:
            key = self.headers.get("X-API-KEY")
            if not key or key in self.app.invalid_keys:
                raise HTTPError(401, "Invalid API key, please check your credentials")
            return self.dispatch(ROUTES[API], method, path)
        sandbox = self.app.get(sandbox_id or "")
        if sandbox is not None and sandbox.paused and sandbox.auto_resume:
            sandbox.resume()  # E2B's proxy resumes a paused sandbox created with auto_resume
        if sandbox is None or sandbox.paused:  # what E2B's proxy answers for a sandbox not running
            raise HTTPError(502, f"The sandbox {sandbox_id} was not found", sandboxId=sandbox_id)
        if port not in ROUTES:
            raise HTTPError(502, "The sandbox is running but port is not open", sandboxId=sandbox_id)
        self.sandbox = sandbox
        return self.dispatch(ROUTES[port], method, path)

    def check_access_token(self) -> None:
        """envd and ``/execute`` want the ``envdAccessToken`` of create/connect (``X-Access-Token``)."""
        if self.headers.get("X-Access-Token") != self.sandbox.access_token:
            raise HTTPError(401, "invalid access token")

    # -- control plane (E2B REST API) ------------------------------------------------------
    @endpoint(API, "POST", r"/v2/sandboxes")
    def api_create(self) -> None:
        """``POST /v2/sandboxes`` (NewSandboxV2) → 201 ``Sandbox``."""
        body = self.json_body()
        sandbox = self.app.create_sandbox(body.get("templateID", "base"), body.get("timeout"),
                                          body.get("envVars") or {}, body.get("metadata") or {},
                                          auto_pause=bool(body.get("autoPause")),
                                          auto_resume=bool((body.get("autoResume") or {}).get("enabled")))
        sandbox.network = body.get("network")  # kept and shown, not enforced: E2B's proxy enforces it
        self.send_json(201, sandbox_model(sandbox, self.app.envd_version))

    @endpoint(API, "GET", r"/v2/sandboxes|/sandboxes")
    def api_list(self) -> None:
        """``GET /v2/sandboxes[?state=running|paused][&metadata=k%3Dv...]`` → 200 ``[ListedSandbox]``,
        one page (no ``x-next-token``)."""
        wanted = dict(parse_qsl(self.query.get("metadata", "")))
        sandboxes = [s for s in map(self.app.get, self.app.sandboxes) if s is not None
                     and self.query.get("state", s.state) == s.state
                     and all(s.metadata.get(k) == v for k, v in wanted.items())]
        self.send_json(200, [sandbox_model(s, self.app.envd_version, detail=True) for s in sandboxes])

    @endpoint(API, "GET", r"/sandboxes/([^/]+)")
    def api_get(self, sandbox_id: str) -> None:
        """``GET /sandboxes/{id}`` (``get_info``) → 200 ``SandboxDetail``."""
        self.send_json(200, sandbox_model(self._live(sandbox_id), self.app.envd_version, detail=True))

    @endpoint(API, "DELETE", r"/sandboxes/([^/]+)")
    def api_kill(self, sandbox_id: str) -> None:
        """``DELETE /sandboxes/{id}`` → 204; 404 when unknown or already killed."""
        self._live(sandbox_id)
        self.app.kill_sandbox(sandbox_id)
        self.send_bytes(204, b"")

    @endpoint(API, "PUT", r"/sandboxes/([^/]+)/network")
    def api_update_network(self, sandbox_id: str) -> None:
        """``PUT /sandboxes/{id}/network`` (``update_network``) ``{"allowOut", "denyOut", "rules", ...}``
        → 204: replaces the whole egress configuration (kept, not enforced: see :meth:`api_create`)."""
        self._live(sandbox_id).network = self.json_body()
        self.send_bytes(204, b"")

    @endpoint(API, "POST", r"/sandboxes/([^/]+)/timeout")
    def api_set_timeout(self, sandbox_id: str) -> None:
        """``POST /sandboxes/{id}/timeout`` ``{"timeout": seconds}`` → 204; 404 when paused."""
        sandbox = self._live(sandbox_id)
        if sandbox.paused:
            raise HTTPError(404, f"Sandbox {sandbox_id} is paused")
        sandbox.end_at = time.time() + self.json_body()["timeout"]
        sandbox.renewals.append(time.time())
        self.send_bytes(204, b"")

    @endpoint(API, "POST", r"(?:/v2)?/sandboxes/([^/]+)/connect")
    def api_connect(self, sandbox_id: str) -> None:
        """``POST /v2/sandboxes/{id}/connect`` → 200 ``Sandbox``; a timeout only ever extends."""
        sandbox = self._live(sandbox_id)
        resumed, timeout = sandbox.paused, self.json_body().get("timeout")
        sandbox.resume(timeout)  # a paused sandbox resumes; a running one's timeout only ever extends
        self.send_json(201 if resumed else 200, sandbox_model(sandbox, self.app.envd_version))

    @endpoint(API, "POST", r"/sandboxes/([^/]+)/pause")
    def api_pause(self, sandbox_id: str) -> None:
        """``POST /sandboxes/{id}/pause`` ``{"memory"?}`` → 204; 409 when already paused."""
        self.json_body()  # {"memory": ...}: E2B's snapshot kind; here the kernels keep running
        sandbox = self._live(sandbox_id)
        if sandbox.paused:
            raise HTTPError(409, f"Sandbox {sandbox_id} is already paused")
        sandbox.pause()
        self.send_bytes(204, b"")

    def _live(self, sandbox_id: str) -> Sandbox:
        sandbox = self.app.get(sandbox_id)
        if sandbox is None:
            raise HTTPError(404, f"sandbox \"{sandbox_id}\" doesn't exist or you don't have access to it")
        return sandbox

    # -- code interpreter (port 49999) -----------------------------------------------------
    @endpoint(JUPYTER_PORT, "POST", r"/execute")
    def ci_execute(self) -> None:
        """``POST /execute`` ``{"code", "context_id", "language", "env_vars"}`` → NDJSON stream."""
        self.check_access_token()
        body = self.json_body()
        ctx = _context_call(lambda: self.sandbox.context(body.get("context_id"), body.get("language")))
        if not ctx.started:  # a failed kernel start is a 500, not an event
            self.app.loop.call(ctx.start())
        if self.app.take_lost_execution(body.get("code", "")):  # as one sent while E2B's kernel restarts: never answered
            return self.stream_execution(ctx, "", {}, execute=ctx.never_answer)
        self.stream_execution(ctx, body.get("code", ""), body.get("env_vars") or {})

    @endpoint(JUPYTER_PORT, "GET", r"/contexts")
    def ci_list_contexts(self) -> None:
        """``GET /contexts`` → ``[{"id", "language", "cwd"}]``."""
        self.send_json(200, [c.to_json() for c in self.sandbox.contexts()])

    @endpoint(JUPYTER_PORT, "POST", r"/contexts")
    def ci_create_context(self) -> None:
        """``POST /contexts`` ``{"language", "cwd"}`` → ``{"id", "language", "cwd"}``."""
        body = self.json_body()
        ctx = _context_call(lambda: self.sandbox.create_context(body.get("language"), body.get("cwd")))
        self.send_json(200, ctx.to_json())

    @endpoint(JUPYTER_PORT, "DELETE", r"/contexts/([^/]+)")
    def ci_remove_context(self, context_id: str) -> None:
        """``DELETE /contexts/{id}`` → 200 ``null`` (E2B's FastAPI handler returns None); 404
        "Context {id} not found" as text/plain when unknown."""
        _context_call(lambda: self.sandbox.remove_context(context_id))
        self.send_json(200, None)

    @endpoint(JUPYTER_PORT, "POST", r"/contexts/([^/]+)/restart")
    def ci_restart_context(self, context_id: str) -> None:
        """``POST /contexts/{id}/restart`` → 200 ``null`` once a fresh kernel runs under the same
        context id (it answers its first execution ``restart_warmup`` seconds later)."""
        _context_call(lambda: self.sandbox.restart_context(context_id))
        self.send_json(200, None)

    def stream_execution(self, ctx: Context, code: str, env_vars: dict, execute=None) -> None:
        """Stream one execution's events as chunked NDJSON, one flushed line per event, with
        no Content-Type (E2B's ``StreamingListJsonResponse`` sets none).

        After ``keepalive_interval`` seconds without output a keepalive line goes out.
        If the client disconnects, the execution is cancelled (the kernel is interrupted
        ``Timings.interrupt_latency`` seconds later, the context is free at once);
        if the sandbox is killed meanwhile, the connection is cut as E2B's proxy does.
        """
        events: queue.Queue = queue.Queue()
        work = execute() if execute else ctx.execute(code, env_vars, events.put)
        future = self.app.loop.submit(work)
        self.start_stream(None)
        last_write = time.monotonic()
        try:
            while not (future.done() and events.empty()):
                if self.sandbox.killed or self.client_gone():
                    future.cancel()
                    return self.abort_connection()
                try:
                    event = events.get(timeout=0.05)
                except queue.Empty:
                    if future.done() or time.monotonic() - last_write < self.app.keepalive_interval:
                        continue
                    event = {"type": "keepalive"}
                self.write_chunk(json.dumps(event).encode() + b"\n")
                last_write = time.monotonic()
            if not future.cancelled() and (exc := future.exception()) is not None:
                self.write_chunk(json.dumps(error_event(type(exc).__name__, str(exc))).encode() + b"\n")
            self.write_chunk(END_OF_EXECUTION)
            self.end_stream()
        except OSError:  # the client went away while we wrote
            future.cancel()
            self.close_connection = True

    # -- envd (port 49983) -----------------------------------------------------------------
    @endpoint(JUPYTER_PORT, "GET", r"/health")
    @endpoint(ENVD_PORT, "GET", r"/health")
    def envd_health(self) -> None:
        """``GET /health`` → 204."""
        self.send_bytes(204, b"")

    @endpoint(ENVD_PORT, "GET", r"/files")
    def envd_read(self) -> None:
        """``GET /files?path=P[&username=U]`` → the file's bytes; 404 when missing."""
        self.check_access_token()
        path = self._file_path()
        if path.is_dir():
            raise HTTPError(400, f"path '{path}' is a directory")
        if not path.is_file():
            raise HTTPError(404, f"path '{path}' does not exist")
        self.send_bytes(200, path.read_bytes(), "application/octet-stream")

    @endpoint(ENVD_PORT, "POST", r"/files")
    def envd_write(self) -> None:
        """``POST /files?path=P`` (multipart ``file`` fields or octet-stream) → ``[{"name","type","path"}]``.

        Without ``path``, each multipart filename is the path (``write_files``).
        """
        self.check_access_token()
        body = self.body()
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        ctype = self.headers.get("Content-Type", "")
        if ctype.startswith("multipart/form-data"):
            files = [(self._file_path(name), data) for name, data in self.multipart_files(ctype)]
            if len(files) == 1 and self.query.get("path"):
                files = [(self._file_path(), files[0][1])]
        else:
            files = [(self._file_path(), body)]
        written = []
        for path, data in files:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            written.append({"name": path.name, "type": "file", "path": str(path)})
        self.send_json(200, written)

    def _file_path(self, name: str | None = None) -> Path:
        """The ``path`` parameter (or a multipart filename), relative to the work dir."""
        name = name or self.query.get("path")
        if not name:
            raise HTTPError(400, "missing 'path'")
        return self.sandbox.workdir / name  # an absolute path replaces the work dir


def _context_call(action: Callable[[], T]) -> T:
    try:
        return action()
    except ContextError as exc:  # E2B's code interpreter answers these in plain text
        raise HTTPError(exc.status, str(exc), plain=True) from exc
