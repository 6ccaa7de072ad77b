"""The ``gateway`` backend: the session's kernel runs on a Jupyter Kernel Gateway, a Jupyter
Enterprise Gateway (kernels as Kubernetes pods, Docker containers, YARN applications) or any
Jupyter Server, reached through its REST + websocket kernel API (:mod:`.rest`, :mod:`.ws`).

Isolation is the gateway's: a Kernel Gateway on the same host gives none (its kernels are
processes of the gateway's user); Enterprise Gateway on Kubernetes gives each kernel a pod with
its own limits and network policies. The gateway's token never appears in messages, logs,
``describe()`` or notebooks. Death and oversized messages: :mod:`.watch`; files travel
through the kernel itself: :mod:`.files`. Options and the mapping to gateway settings:
docs/how-to/gateway.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import json
import os
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from traitlets import Bool, Dict, Float, Unicode, default

from ...core.errors import (
    BackendUnavailable,
    EgressError,
    GatewayUnreachable,
    KernelGone,
    SandboxError,
    SandboxStartError,
)
from ...core.events import Emit, Outcome
from ...runtime.traits import ByteSize
from .. import workspace
from ..base import StdinHandler
from ..egress import allow_hosts_trait
from ..kernel_client import KernelClientBackend, drop_note
from ..workspace.options import EnvDict
from . import files
from .progress import StartProgress
from .rest import Endpoint, call, kernel_path
from .watch import DeathWatch, iopub, settle
from .ws import GatewayKernelClient, KernelWebsocket, ws_session


class GatewayBackend(KernelClientBackend):
    """A kernel on a Jupyter gateway or server, one per session (see the module docstring)."""

    name = "gateway"
    capabilities = replace(KernelClientBackend.capabilities, files=True, reattach=True)

    url = Unicode(help="Base URL of the gateway, e.g. http://127.0.0.1:8888 (default: $JUPYTER_GATEWAY_URL).").tag(
        config=True)
    auth_token = Unicode(help="The gateway's token, sent as 'Authorization: token ...' (default: "
                              "$JUPYTER_GATEWAY_AUTH_TOKEN). Prefer the variable: options can end up in notebooks.").tag(
        config=True, secret=True)
    kernel_name = Unicode("", help="Kernelspec name on the gateway; empty: the gateway's default kernel.").tag(config=True)
    headers = Dict(value_trait=Unicode(), help="Extra HTTP headers for every request, e.g. for an auth proxy "
                                               "(default: $JUPYTER_GATEWAY_HEADERS, a JSON object).").tag(config=True)
    validate_cert = Bool(True, help="Verify the gateway's TLS certificate (false only for a test gateway).").tag(
        config=True)
    ca_certs = Unicode("", help="CA bundle (PEM file) to verify the gateway's certificate; empty: the system's.").tag(
        config=True)
    client_cert = Unicode("", help="Client certificate (PEM file) for gateways that require mutual TLS.").tag(config=True)
    client_key = Unicode("", help="Private key (PEM file) of client_cert.").tag(config=True)
    env = EnvDict(value_trait=Unicode(), help="Variables for the kernel, NAME=value: sent at start (Enterprise "
                                              "Gateway honours KERNEL_*: KERNEL_USERNAME, KERNEL_NAMESPACE, "
                                              "KERNEL_IMAGE...; Kernel Gateway those it allows, allowed_envs), and set "
                                              "in the kernel's environment once it runs, so every name arrives. "
                                              "KERNEL_USERNAME defaults to this process's user.").tag(config=True)
    connect_timeout = Float(120.0, help="Seconds to wait for the gateway to start the kernel and open its channels "
                                        "(a Kubernetes pod can take a minute to schedule); also sent as "
                                        "KERNEL_LAUNCH_TIMEOUT.").tag(config=True)
    request_timeout = Float(30.0, help="Seconds to wait for the gateway's other REST calls, and for a completion, "
                                       "inspection or comm_info reply.").tag(config=True)
    keep_alive = Bool(False, help="Leave the kernel running on the gateway at shutdown (reattach with kernel_id); "
                                  "the gateway's culling still applies.").tag(
        config=True)
    kernel_id = Unicode("", help="Attach to this existing kernel on the gateway instead of starting one (its id is "
                                 "the sandbox id in %sandbox status).").tag(config=True)
    allow_hosts = allow_hosts_trait("Hosts the kernel may reach, as for docker (NAME[:PORT], *.DOMAIN, addresses, "
                                    "CIDR networks, 'pypi'): refused unless network_policy names the network "
                                    "policy the gateway enforces on its kernels, which then decides (keeping the "
                                    "two in step is yours).")
    network_policy = Unicode("", help="The network policy the gateway enforces on its kernels (e.g. the Kubernetes "
                                      "NetworkPolicy of Enterprise Gateway's kernel pods), named to say that it, not "
                                      "sandbox-kernel, decides allow_hosts; without it allow_hosts is refused.").tag(
        config=True)
    max_message_bytes = ByteSize(32 * 1024**2, help="Largest message (one websocket frame) accepted from the kernel; "
                                                    "a larger one is dropped before it is read (the cell says so, the "
                                                    "kernel keeps its state). 0: no limit.").tag(config=True)
    heartbeat_interval = Float(2.0, help="Seconds between checks that the kernel still exists on the "
                                         "gateway (GET /api/kernels/{id}).").tag(config=True)
    heartbeat_timeout = Float(15.0, help="Seconds without an answer from the gateway before the kernel counts as "
                                         "lost (also the websocket's ping interval and timeout).").tag(config=True)

    @default("url")
    def _url_default(self) -> str:
        return os.environ.get("JUPYTER_GATEWAY_URL", "")

    @default("auth_token")
    def _auth_token_default(self) -> str:
        return os.environ.get("JUPYTER_GATEWAY_AUTH_TOKEN", "")

    @default("headers")
    def _headers_default(self) -> dict[str, str]:
        with contextlib.suppress(ValueError, TypeError):
            return {str(k): str(v) for k, v in json.loads(os.environ.get("JUPYTER_GATEWAY_HEADERS", "{}")).items()}
        return {}

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._kernel: str | None = None  # the kernel's id on the gateway while we use it
        self._ws: KernelWebsocket | None = None
        self._deaths: DeathWatch | None = None  # of the connection to the kernel
        self._first_emit: Emit | None = None
        self._attach = self.kernel_id
        self._fresh = False  # a kernel started, not attached: env and the workspace go in at start

    # -- the gateway -----------------------------------------------------------------------------
    def _endpoint(self) -> Endpoint:
        if not self.url:
            raise BackendUnavailable("No gateway URL is set.",
                                     fix="set JUPYTER_GATEWAY_URL or --GatewayBackend.url=http://HOST:PORT")
        return Endpoint(self.url, self.auth_token, dict(self.headers), self.validate_cert, self.ca_certs or None,
                        self.client_cert or None, self.client_key or None, self.request_timeout)

    def _where(self) -> str:
        parts = urlsplit(self.url)
        return f"{parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}{parts.path}".rstrip("/")

    async def start(self) -> None:
        """Start (or attach to) the kernel on the gateway and open its websocket; a start slower
        than 2 s shows its progress in the cell that caused it."""
        if self.started:
            return
        if self.allow_hosts and not self.network_policy:
            raise EgressError("The gateway backend cannot enforce allow_hosts: the gateway decides its kernels' "
                              "network. If it enforces a network policy, name it with "
                              "--GatewayBackend.network_policy=NAME (the allowlist is then yours to keep in step with "
                              "it); else use the docker backend.")
        emit = self._progress_handler if self._first_emit is None else self._first_emit
        with StartProgress(emit, self._where(), self.kernel_name) as progress:
            await super().start()
            progress.ok = True
        fresh, self._fresh = self._fresh, False
        if fresh:  # a kernel this backend started (an attached one keeps what it had)
            try:
                await self._settle_in()
            except BaseException:
                await self.shutdown()
                raise

    async def _settle_in(self) -> None:
        """In a kernel just started: ``env`` in its environment (a gateway may drop names at
        start; in a Python kernel only: another language's kernel has what the start request
        sent, e.g. Enterprise Gateway's ``KERNEL_*``), then the workspace copied into a folder of
        its own that becomes its working directory (a Kernel Gateway's kernels share the gateway's)."""
        language = ((self.kernel_info or {}).get("language_info") or {}).get("name")
        if self.env and language == "python":
            reply = await self.run_silently(f"__import__('os').environ.update({dict(self.env)!r})")
            if reply.get("status") != "ok":
                raise SandboxStartError("Could not set env in the gateway's kernel: it does not run Python.")
        if (plan := workspace.plan_of(self)) is not None:
            self.workspace_view = await workspace.copy_in(self, plan, fresh=True)

    async def _launch(self) -> dict[str, Any]:
        endpoint = self._endpoint()
        if self._attach:
            try:
                model = await call(endpoint, kernel_path(self._attach), "attach to the kernel")
            except KernelGone:
                raise SandboxStartError(f"The gateway at {self._where()} has no kernel {self._attach} to attach to "
                                        "(unset --GatewayBackend.kernel_id to start a new one).") from None
            self._attach = ""  # once: a kernel that dies is replaced by a new one
            self._kernel = model["id"]
            return {"kernel_id": self._kernel}
        if (plan := workspace.plan_of(self)) is not None:  # before a kernel is started for nothing
            workspace.check_size(plan, self.workspace_max_bytes, "GatewayBackend.workspace_max_bytes")
        self._fresh = True
        env = {"KERNEL_USERNAME": getpass.getuser(), **self.env, "KERNEL_LAUNCH_TIMEOUT": str(int(self.connect_timeout))}
        body = {"name": self.kernel_name, "env": env} if self.kernel_name else {"env": env}
        model = await call(endpoint, "/api/kernels", "start a kernel", "POST", body, timeout=self.connect_timeout)
        self._kernel = model["id"]
        return {"kernel_id": self._kernel}

    async def _open_client(self, info: dict[str, Any]) -> GatewayKernelClient:
        self._ws = await KernelWebsocket.open(self._endpoint(), info["kernel_id"], ws_session(),
                                             timeout=self.connect_timeout, max_message_size=self.max_message_bytes,
                                             ping_interval=self.heartbeat_timeout)
        self._deaths = DeathWatch(self._endpoint(), info["kernel_id"], self._where(),
                                  heartbeat_interval=self.heartbeat_interval, heartbeat_timeout=self.heartbeat_timeout)
        self._ws.watch = self._deaths.on_iopub
        return GatewayKernelClient(self._ws)

    STDIN_SETTLE_S = 0.2
    """Seconds given to the stdin connection after the kernel is ready. A margin, not a proof:
    the websocket cannot see the gateway's own ZMQ connection to the kernel, whose stdin ROUTER
    drops an ``input_request`` for a peer not yet connected (jupyter_client's ``wait_for_ready``
    gives the same 0.2 s as IOPub silence)."""

    async def _stdin_settled(self, client: GatewayKernelClient) -> None:
        await asyncio.sleep(self.STDIN_SETTLE_S)

    def _watch_drops(self, client: GatewayKernelClient) -> None:
        """Nothing to watch: the websocket has no ZMQ sockets, and a message over
        max_message_bytes closes it, which :class:`DeathWatch` turns into a reconnect."""

    END_GRACE_S = 0.0  # the gateway's own DELETE /api/kernels/{id} asks the kernel to end first

    async def _terminate(self) -> None:
        ws, kernel, self._ws, self._kernel = self._ws, self._kernel, None, None
        self.workspace_view, self._fresh = None, False
        if ws is not None:
            ws.close()
        unreachable = self._deaths is not None and self._deaths.unreachable
        self._deaths = None
        if kernel is None or self.keep_alive:
            return
        if unreachable:  # do not wait for a gateway that does not answer
            self.log.warning("left kernel %s on the gateway, which stopped answering (its culling takes it)", kernel)
            return
        # A kernel the gateway is restarting (its process died) cannot be deleted until the
        # restart is done: jupyter_client answers 500 meanwhile. Try a few times.
        for attempt in range(8):
            try:
                await call(self._endpoint(), kernel_path(kernel), "shut down the kernel", "DELETE",
                           timeout=min(self.request_timeout, 10.0))
                return
            except KernelGone:
                return
            except (BackendUnavailable, GatewayUnreachable) as exc:
                error = exc
                break
            except SandboxError as exc:
                error = exc
                await asyncio.sleep(0.25 * (attempt + 1))
        self.log.warning("could not delete kernel %s on the gateway (it culls idle kernels itself, if "
                         "configured to): %s", kernel, error)

    # -- death, and messages above max_message_bytes ---------------------------------------------
    async def _wait_dead(self) -> str:
        return await self._deaths.wait_dead(lambda: self._ws, self._reconnect)

    async def _reconnect(self, interrupt: bool) -> bool:
        """After the websocket was closed over a message above max_message_bytes: open a new one,
        tell the running cell that an output was dropped and, with ``interrupt``, stop a cell
        that keeps sending such outputs. The kernel and its state are kept. A new session id:
        with the old one the server would replay what it buffered (the huge message may be
        among it) and its shell replies could keep going to the old connection's socket, which
        has the same ZMQ identity. False if the kernel cannot be reached again."""
        for task in self._tasks:
            task.cancel()
        try:
            ws = await KernelWebsocket.open(self._endpoint(), self._kernel, ws_session(), timeout=self.connect_timeout,
                                            max_message_size=self.max_message_bytes,
                                            ping_interval=self.heartbeat_timeout)
        except SandboxError:
            return False
        self._ws, ws.watch = ws, self._deaths.on_iopub
        self._client = GatewayKernelClient(ws)
        note = drop_note(*self.message_bound)
        running = [request for request in self._requests.values() if request.execute]
        for request in running:  # one note per cell
            text = "" if request.told else note
            text += "[the cell kept sending such outputs and was interrupted]\n" if interrupt else ""
            request.dropped = request.told = True
            if text:
                request.iopub.put_nowait(iopub("stream", {"name": "stderr", "text": text}))
        self._start_readers()
        self._tasks.append(asyncio.ensure_future(settle(self._client, self._requests, running)))
        if interrupt:
            await self.interrupt()
        return True

    # -- running code ----------------------------------------------------------------------------
    async def execute(self, code: str, emit: Emit, *, timeout: float | None = None,
                      stdin: StdinHandler | None = None, **request: Any) -> Outcome:
        """:meth:`KernelClientBackend.execute` (``request``: ``silent``, ``store_history``,
        ``user_expressions``), showing a slow kernel start's progress in this cell."""
        self._first_emit = emit  # a slow kernel start shows its progress in this cell
        try:
            return await super().execute(code, emit, timeout=timeout, stdin=stdin, **request)
        finally:
            self._first_emit = None

    async def interrupt(self) -> None:
        """``POST /api/kernels/{id}/interrupt``: the gateway signals or messages the kernel as its
        kernelspec says."""
        if self._kernel is None:
            return
        with contextlib.suppress(SandboxError):  # gone meanwhile: the death watch reports it
            await call(self._endpoint(), kernel_path(self._kernel, "interrupt"), "interrupt the kernel", "POST")

    async def restart(self) -> None:
        """``POST /api/kernels/{id}/restart`` (same kernel id, fresh interpreter), then a new
        websocket; a kernel the gateway no longer has is replaced by a new one."""
        if not self.started:
            return await self.start()
        async with self._lock:
            for task in [*self._tasks, self._death]:
                task.cancel()
            self._client.stop_channels()
            self._client = None
            try:
                await call(self._endpoint(), kernel_path(self._kernel, "restart"), "restart the kernel", "POST",
                           timeout=self.connect_timeout)
                self._client, self.kernel_info = await self._connect({"kernel_id": self._kernel})
                self._start_readers()
                restarted = True
            except SandboxError:
                restarted = False
        if not restarted:
            await self.shutdown()
            return await self.start()
        try:  # a fresh process: in the gateway's working directory, with the gateway's environment
            await self._settle_in()
        except BaseException:
            await self.shutdown()
            raise

    # -- files: through the kernel itself (Enterprise Gateway has no file API) ----------------------
    async def upload(self, local: Any, remote: str) -> str:
        await self.start()
        return await files.upload(self.run_silently, local, remote)

    async def download(self, remote: str, local: Any, *, max_bytes: int = 0) -> Any:
        await self.start()
        return await files.download(self.run_silently, remote, local, max_bytes)

    async def usage(self) -> dict[str, int] | None:
        """The kernel process's resident memory as it reads it itself (``VmRSS`` in
        ``/proc/self/status``, Linux kernels); None while a cell runs (the kernel answers one
        request at a time) or when it cannot tell."""
        if self._client is None or any(r.execute for r in self._requests.values()):
            return None
        rss = "int(next(l for l in open('/proc/self/status') if l.startswith('VmRSS')).split()[1]) * 1024"
        try:
            reply = await asyncio.wait_for(self.run_silently("", {"rss": rss}), 5)
            value = reply["user_expressions"]["rss"]
            return {"memory_bytes": int(value["data"]["text/plain"])} if value.get("status") == "ok" else None
        except (SandboxError, asyncio.TimeoutError, KeyError, ValueError):
            return None

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "sandbox_id": self._kernel, "gateway": self._where() if self.url else None,
                "kernel_name": self.kernel_name or "(the gateway's default)", "keep_alive": self.keep_alive,
                "env": sorted(self.env) or None,
                "limits": {"set_by": "the gateway (its kernelspec and KERNEL_* settings)"},
                "network": f"the gateway's policy {self.network_policy!r}" if self.network_policy else "the gateway's"}
