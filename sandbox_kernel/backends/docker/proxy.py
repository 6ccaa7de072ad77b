"""The docker backend's egress proxy: how a sandbox with ``allow_hosts`` reaches exactly those hosts,
the egress package's program (:mod:`sandbox_kernel.backends.egress`) run as a container of the engine.

The sandbox keeps ``network_mode=none``: no route, no DNS, no UDP, only ``lo``. Its one way out is
a unix socket in a small tmpfs volume it mounts read-only, where a proxy container listens: the
program of :mod:`..egress.proxy` on mitmproxy, in the image :data:`.proxy_spec.IMAGE`, on an ordinary
network of the engine (``egress_network``, default ``bridge``). Inside the sandbox, the kernel's
launcher pipes ``127.0.0.1:3128`` to that socket and ``HTTP(S)_PROXY`` name it
(:data:`~sandbox_kernel.backends.egress.options.PROXY_PORT`). The proxy resolves names itself,
decides each connection (``allow_hosts``, TLS server names, ``Host`` headers, resolved addresses:
:mod:`..egress.rules`), sets the headers of ``secrets`` on requests it terminated TLS for, and
reports each refusal.

Measured on Docker 20.10 (docs/explanation/security.md, "Egress"): an ``internal`` network is no way to do
this here: its bridge keeps the gateway address, every container on it has a default route
through it, and a listener of the host on any address answered from it. A network without a
gateway (macvlan, ipvlan) is refused by this kernel ("operation not supported").

The proxy is the session's: started with the sandbox, attached to this process (its stdin: the
configuration, then allowlist changes; when this process ends the engine closes it and the proxy
exits), and removed with it. Its decisions come back as JSON lines on its stdout.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from ...core.errors import SandboxError, SandboxStartError
from ..egress import options as egress_options
from ..egress.bootstrap import sources
from .boundary import engine_errors, load_docker
from .bridge import Demux, raw_socket
from .proxy_spec import ALLOW_TIMEOUT, PROXY_DIR, PROXY_UID, READY_TIMEOUT, VOLUME_BYTES, EgressSettings, proxy_spec

__all__ = ["Egress"]

_log = logging.getLogger(__name__)


class Egress:
    """One session's proxy: its volume and container, the stream to it, its events.

    Args:
        client: docker-py's client of the engine.
        settings: the session's egress options.
        name: base name of the container and volume (the sandbox's name and ``-egress``).
        labels: ownership labels (:func:`.engine.labels`), so leftovers are removed as the
            sandbox's are.
        podman: the engine is Podman's API (its tmpfs volumes take ``nr_blocks``).
        on_event: called on the event loop with each decision the proxy reports
            (``{"event": "refused", "host", "port", "reason", "allowable"}``).
    """

    def __init__(self, client: Any, settings: EgressSettings, *, name: str, labels: dict[str, str], podman: bool,
                 on_event: Callable[[dict[str, Any]], None]) -> None:
        self.client, self.settings = client, settings
        self.name, self.volume = f"{name}-egress", f"{name}-egress"
        self.labels, self.podman, self.on_event = labels, podman, on_event
        self.container: Any = None
        self.entries = settings.entries
        self._loop = asyncio.get_running_loop()
        self._ready = self._loop.create_future()
        self._ready.add_done_callback(lambda f: f.cancelled() or f.exception())  # read: no "never retrieved"
        self._acks: dict[int, asyncio.Future] = {}
        self._ids = itertools.count(1)
        self._stdin: Any = None
        self._write_lock = threading.Lock()
        self._removing = False  # its stream's end is then no news
        self.starting: asyncio.Future | None = None
        """The future of :meth:`start_proxy`, run in a thread (:meth:`launch`, :meth:`after_start`)."""

    # -- what the sandbox's container gets -------------------------------------------------------
    def sandbox_mount(self) -> Any:
        """The volume, read-only at :data:`~..egress.options.SANDBOX_DIR` in the sandbox."""
        docker = load_docker()
        return docker.types.Mount(egress_options.SANDBOX_DIR, self.volume, type="volume", read_only=True)

    def sandbox_environment(self) -> dict[str, str]:
        return egress_options.sandbox_environment(self.settings.allow, self.settings.secrets, self.settings.index)

    # -- start (blocking parts run in threads) ----------------------------------------------------
    def create_volume(self) -> None:
        """The tmpfs volume of the socket and CA bundle, owned by the proxy's uid. Blocking."""
        from .spec import volume_options

        with engine_errors("create the egress proxy's volume"):
            self.client.api.create_volume(self.volume, driver="local", labels=self.labels,
                                          driver_opts=volume_options(VOLUME_BYTES, PROXY_UID, PROXY_UID,
                                                                     podman=self.podman))

    def start_proxy(self) -> None:
        """Create, attach and start the proxy container, send it its program and configuration,
        and read its events. Two attaches, made before it starts (nothing is missed): stdin, which
        only this process writes, and stdout, which only a thread reads (a TLS stream is never
        used by two threads). Blocking.

        Raises:
            EgressError: a secret cannot be read.
            SandboxError: the engine refused (no such image: the message says how to build it).
        """
        payload = json.dumps({"modules": sources(), "config": self._config()}).encode()
        with engine_errors(f"start the egress proxy from {self.settings.image}"):
            self.container = self.client.containers.create(**proxy_spec(self.settings, self.name, self.volume,
                                                                         self.labels))
            self._stdin = self.client.api.attach_socket(self.container.id, params={"stdin": 1, "stream": 1})
            stdout = self.client.api.attach_socket(self.container.id, params={"stdout": 1, "stream": 1})
            self.container.start()
        self._write(b"%012d" % len(payload) + payload)
        threading.Thread(target=self._follow, args=(stdout,), name=f"{self.name}-events", daemon=True).start()

    def _config(self) -> dict[str, Any]:
        secrets: dict[str, list[list[str]]] = {}
        for secret in self.settings.secrets:
            host = secret.host.rsplit(":", 1)[0] if secret.host.count(":") == 1 else secret.host
            secrets.setdefault(host, []).append([secret.header, secret.value()])
        return {"allow": self.entries, "secrets": secrets, "upstream_ca": self.settings.upstream_ca or None,
                "directory": PROXY_DIR}

    def _write(self, data: bytes) -> None:
        with self._write_lock:
            raw_socket(self._stdin).sendall(data)

    def _follow(self, attached: Any) -> None:
        """The proxy's stdout, a JSON object a line, each handed to the loop. Ends with the stream
        (the container stopped or was removed)."""
        pending = bytearray()

        def lines(data: bytes) -> None:
            pending.extend(data)
            *complete, rest = pending.split(b"\n")
            pending[:] = rest
            for line in complete:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                self._loop.call_soon_threadsafe(self._dispatch, event)

        demux, raw = Demux(lines, lambda data: None), raw_socket(attached)
        try:
            while data := raw.recv(65536):
                demux.feed(data)
        except OSError as exc:
            _log.debug("egress proxy stream ended: %s", exc)
        finally:
            with contextlib.suppress(Exception):
                attached.close()
        self._loop.call_soon_threadsafe(self._dispatch, {"event": "ended"})

    def _dispatch(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        if kind == "ready" and not self._ready.done():
            self._ready.set_result(None)
        elif kind in ("allowed", "flushed") and (ack := self._acks.pop(event.get("id"), None)) and not ack.done():
            ack.set_result(None)
        elif kind == "ended" and not self._ready.done():
            if self._removing:
                self._ready.cancel()
            else:
                self._ready.set_exception(SandboxStartError(f"The egress proxy stopped before it was ready: "
                                                            f"{self._tail()}"))
        elif kind != "ended" or not self._removing:
            self.on_event(event)

    def _tail(self) -> str:
        try:
            text = self.container.logs(stdout=False, stderr=True, tail=5).decode("utf-8", "replace").strip()
        except Exception:  # noqa: BLE001 - gone already: no log to show
            text = ""
        return text.splitlines()[-1] if text else "no log"

    def launch(self) -> None:
        """Called as the sandbox's container is made (the volume exists): the proxy starts now if
        the sandbox needs its CA bundle as it starts (``host_secrets``); else after the kernel
        (:meth:`after_start`). Measured on 2 busy cores: started beside the kernel, the proxy's
        container and Python imports (mitmproxy: about 0.5 s of CPU) slowed the kernel's start by
        0.5-0.9 s; after it, they cost the start nothing, and a connection made at once waits in
        the sandbox's forwarder until the proxy listens."""
        if self.settings.secrets:
            self._begin()

    async def after_start(self) -> None:
        """Called once the kernel is ready: start the proxy now (without ``host_secrets``), or wait
        until it is ready (with them).

        Raises:
            SandboxError: the engine refused the proxy; it stopped, or was not ready in time."""
        if not self.settings.secrets:
            self._begin()
            return
        await self.starting
        await self.ready()

    def _begin(self) -> None:
        self.starting = asyncio.ensure_future(self._loop.run_in_executor(None, self.start_proxy))
        self.starting.add_done_callback(self._start_done)

    def _start_done(self, future: asyncio.Future) -> None:
        if not future.cancelled() and (exc := future.exception()) is not None:
            _log.warning("the egress proxy did not start: %s", exc)
            self.on_event({"event": "failed", "reason": str(exc)})

    async def stopped_starting(self) -> None:
        """Wait until no thread is creating the proxy any more (before :meth:`remove`)."""
        if self.starting is not None:
            with contextlib.suppress(BaseException):
                await self.starting

    async def ready(self, timeout: float = READY_TIMEOUT) -> None:
        """Wait until the proxy listens on its socket (and wrote the CA bundle). A session waits
        for it only when the sandbox needs the CA bundle (``host_secrets``): else the sandbox's
        forwarder waits for the socket, and the start costs no more than the proxy's volume.

        Raises:
            SandboxStartError: it stopped first, or was not ready within ``timeout`` seconds."""
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), timeout)
        except asyncio.TimeoutError:
            raise SandboxStartError(f"The egress proxy was not ready within {timeout:g} s: {self._tail()}") from None

    async def _ask(self, message: dict[str, Any]) -> None:
        """Send ``message`` with a new ``id`` and wait for the proxy's answer naming it.

        Raises:
            SandboxError: no answer within :data:`ALLOW_TIMEOUT` seconds (the proxy is gone)."""
        ident = next(self._ids)
        ack = self._acks[ident] = self._loop.create_future()
        line = json.dumps({**message, "id": ident}).encode() + b"\n"
        try:
            self._write(line)  # a line in an empty socket buffer: no thread hop (the stream is stdin only)
            await asyncio.wait_for(ack, ALLOW_TIMEOUT)
        except (OSError, asyncio.TimeoutError):
            self._acks.pop(ident, None)
            raise SandboxError(f"The egress proxy did not answer within {ALLOW_TIMEOUT:g} s: {self._tail()}") from None

    async def allow(self, entries: list[str]) -> None:
        """Replace the allowlist the running proxy enforces (``entries`` already expanded);
        returns once the proxy said it is in force (within :data:`ALLOW_TIMEOUT` seconds).

        Raises:
            SandboxError: the proxy did not start, or did not answer in time."""
        if self.starting is not None:  # just after a start the proxy may still be coming up: its program
            await self.starting        # goes first on its stdin, and a line written before it would be
        await self.ready()             # read as the program's length
        await self._ask({"allow": entries})
        self.entries = entries

    async def flush(self) -> None:
        """Return once every decision the proxy made before this call has been handed to
        ``on_event`` (its events come in order): a cell's refusals are shown in that cell.
        A proxy that does not answer is logged, not raised; one not listening yet decided nothing.
        """
        if self._ready.done() and not self._ready.cancelled() and self._ready.exception() is None:
            try:
                await self._ask({"flush": True})
            except SandboxError as exc:
                _log.warning("%s", exc)

    def remove(self, orphans: Any) -> None:
        """Remove the container and the volume (after the sandbox's container, which mounts it);
        what the engine cannot remove now goes to ``orphans`` (:class:`.orphans.Orphans`). Blocking."""
        self._removing = True
        if self._stdin is not None:
            try:
                self._stdin.close()
            except OSError:
                pass
        orphans.remove(self.client, self.container and self.container.id, self.volume)


