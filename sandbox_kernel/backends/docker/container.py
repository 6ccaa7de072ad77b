"""One docker sandbox while it exists: its container and what goes with it (the working directory's
volume, the ipc transport's host directory, the kernel's connection info, the death watch, the
api transport's bridge, the egress proxy, a workspace copy still due). Made at a start or taken
from the warm pool (:mod:`.pooled`), removed by :meth:`SandboxContainer.remove`. It is given the
backend's options (public traits), its :class:`~.link.EngineLink` and its :class:`~.orphans.Orphans`.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...core.errors import Refused, SandboxStartError
from .. import pool
from ..checkpoint.keeper import SOURCE as KEEPER_SOURCE
from .boundary import container_log, engine_errors, running_container
from .boundary import host as boundary_host
from .bridge import AttachBridge, claim_by_stdin
from .engine import no_python, pids_file, remove_hostdir
from .inside import BOOTSTRAP
from .inside import KERNEL_DIR as INSIDE_DIR
from .link import EngineLink
from .orphans import Orphans
from .podman import start_failure
from .prepare import kernel_argv
from .proxy import Egress
from .proxy_spec import settings_of as egress_settings_of
from .rootless import dropped_limits, dropped_message
from .spec import LAUNCHER, launcher_argv, runs_keeper, seal_hostdir, uid_gid, volume_options
from .view import copy_in
from .watch import ContainerWatch, Limits, run_blocking
from .workspace import ensure_volume, give_to

STREAM_END_WAIT = 5.0
"""Seconds the api transport waits, after the attach stream ended, for the engine to report the
container's stop (its reason); then the container is removed and the stream's end is the reason."""


class SandboxContainer:
    """One sandbox's container and what goes with it (see the module docstring).

    Args:
        options: the backend (its traits are read, nothing else).
        link: the backend's engine and image.
        orphans: what the engine could not remove yet, retried later.
        volume, hostdir: the working directory's volume and the ipc host directory, when known.
    """

    def __init__(self, options: Any, link: EngineLink, orphans: Orphans, *, volume: str | None = None,
                 hostdir: Path | None = None) -> None:
        self.options, self.link, self.orphans = options, link, orphans
        self.volume, self.hostdir = volume, hostdir
        self.container: Any = None
        self.info: dict[str, Any] = {}
        self.created = 0
        self.ready = False
        self.watch: ContainerWatch | None = None
        self.bridge: AttachBridge | None = None
        self.bridge_end: asyncio.Future | None = None  # done when the bridge's stream ended
        self.attached: Any = None  # the container's attach socket, until the bridge takes it
        self.pooled_name: str | None = None  # when taken from the pool
        self.egress: Egress | None = None  # the proxy (allow_hosts)
        self.plan: Any = None  # the workspace's, while a copy of it is due (api transport)

    # -- made and started (blocking parts run in threads) ---------------------------------------
    def create(self, spec: dict[str, Any], volume_labels: dict[str, str], attach: bool = True) -> str | None:
        """Create and start the container (and its working directory's volume); returns a
        warning for the cell, if any. ``attach``: False for a pooled sandbox, attached by the
        session that takes it (:meth:`adopt`). Blocking."""
        options, link, client = self.options, self.link, self.link.client
        uid, gid = uid_gid(options.user)
        new_workspace, warning = False, None
        if options.workdir_volume:
            new_workspace, warning = ensure_volume(client, self.volume, options.workdir_size, link.podman)
            if new_workspace:
                give_to(client, self.volume, link.run_image, uid, gid)
        else:
            driver_opts = volume_options(options.workdir_size, uid, gid, podman=link.podman,
                                         shared=options.workspace == "ro" and link.relayed)
            with engine_errors("create the sandbox's working directory volume"):
                client.api.create_volume(self.volume, driver="local", labels=volume_labels, driver_opts=driver_opts)
        try:
            with engine_errors(f"start a sandbox container from {link.image_label(options)}"):
                self.container = container = client.containers.create(**spec)
                if dropped := dropped_limits(options, container.attrs.get("HostConfig") or {}):
                    raise SandboxStartError(dropped_message(dropped, boundary_host(), link.rootless))
                # Attached before it starts: the api transport's stream (nothing of it is missed), or,
                # for ipc, stdin alone. Either way the engine closes the container's stdin when this
                # process ends, and the container ends with it (the relay or the launcher sees EOF).
                if attach:
                    self.attached = self.attach(container.id)
                container.start()
        except Refused as exc:
            if (error := self.start_error(exc)) is exc:
                raise
            raise error from exc
        return warning

    def attach(self, container_id: str) -> Any:
        """The container's attach socket: stdin, and for the api transport stdout and stderr."""
        streams = {"stdout": 1, "stderr": 1} if self.link.relayed else {}
        return self.link.client.api.attach_socket(container_id, params={"stdin": 1, "stream": 1, **streams})

    def start_error(self, exc: Refused) -> Exception:
        """The error for a container the engine would not create or start: the cause and fix
        where known, else the engine's own refusal."""
        if "could not select device driver" in exc.explanation:
            return SandboxStartError(f"The sandbox could not start: gpus={self.options.gpus} needs GPU support in "
                                     "the Docker engine, which it lacks. Fix: install the NVIDIA Container Toolkit on "
                                     "the engine's host, or leave gpus empty.")
        if self.link.podman and (reason := start_failure(exc.explanation)):
            return SandboxStartError(f"The sandbox could not start: {reason}")
        if match := re.search(r"bind source path does not exist: (\S+)", exc.explanation):
            where = "this machine" if self.link.here else "the Docker engine's host"
            return SandboxStartError(f"The sandbox could not start: the mount's host path {match.group(1)} does not "
                                     f"exist on {where}. `mounts` name paths on the engine's host.")
        if "executable file not found" in exc.explanation:
            return SandboxStartError(f"The sandbox could not start: {no_python(self.link.image_label(self.options))}.")
        return exc

    async def start_egress(self, name: str, labels: dict[str, str], on_event: Callable[[dict[str, Any]], None]) -> None:
        """With ``allow_hosts``: the proxy's volume (the sandbox mounts it); its container starts now
        or once the kernel is ready (:meth:`.proxy.Egress.launch`)."""
        settings = egress_settings_of(self.options)
        if settings is not None:
            self.egress = Egress(self.link.client, settings, name=name, labels=labels, podman=self.link.podman,
                                 on_event=on_event)
            await run_blocking(self.egress.create_volume)
            self.egress.launch()

    async def start_bridge(self, max_frame: int, on_drop: Callable[[str], None]) -> dict[str, Any]:
        """Relay the kernel's channels over the container's attach stream (the api transport);
        returns the connection info of the bridge's endpoints. Waits until the relay said its
        kernel's IOPub listens (or the container stopped: the death watch then says why)."""
        kernelspec = self.link.kernelspec
        end = self.bridge_end = asyncio.get_running_loop().create_future()
        keeper = runs_keeper(self.options) and not kernelspec
        argv = kernel_argv(kernelspec) if kernelspec else launcher_argv(INSIDE_DIR, "{connection_file}",
                                                                          self.options.history_file, keeper=keeper)
        self.bridge = AttachBridge(self.attached, argv=argv, launcher=None if kernelspec else LAUNCHER,
                                   max_frame=max_frame, on_drop=on_drop,
                                   on_end=lambda: end.done() or end.set_result(None),
                                   keeper=KEEPER_SOURCE if keeper else None)
        self.attached = None
        self.bridge.start()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.bridge.hello.wait(), self.options.ready_timeout)
        return dict(self.bridge.connection)

    async def reach_fork(self, attach: str, max_frame: int, on_drop: Callable[[str], None],
                         on_end: Callable[[], None]) -> AttachBridge:
        """A relay the engine starts by ``exec`` in the container (any engine, any transport) to
        carry the channels of a kernel forked from a checkpoint, whose ``ipc`` address prefix is
        ``attach``; returns its bridge once the relay greeted it (or ``ready_timeout`` passed)."""
        client, container = self.link.client, self.container
        uid, gid = uid_gid(self.options.user)

        def exec_socket() -> Any:
            with engine_errors("start a relay to the fork's kernel"):
                made = client.api.exec_create(container.id, ["python", "-c", BOOTSTRAP], stdin=True, stdout=True,
                                              stderr=True, user=f"{uid}:{gid}")
                return client.api.exec_start(made["Id"], socket=True)

        bridge = AttachBridge(await run_blocking(exec_socket), argv=None, launcher=None, key=self.info["key"],
                              max_frame=max_frame, on_drop=on_drop, on_end=on_end, attach=attach)
        bridge.start()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(bridge.hello.wait(), self.options.ready_timeout)
        return bridge

    def watch_it(self) -> None:
        """Watch the container for its death (:class:`.watch.ContainerWatch`)."""
        options, link = self.options, self.link
        limits = Limits(options.memory_limit, options.pids_limit, options.runtime, link.image_label(options),
                        link.podman)
        self.watch = ContainerWatch(link.client, self.container, None if link.relayed else self.info, limits,
                                    self.created)

    async def after_start(self) -> Any:
        """Once the kernel answers: the proxy started (or waited for), the pids file known, the ipc
        host directory sealed, and a due copy of the workspace made; returns that copy's View, or
        None. Raises what they raise (the backend then shuts the sandbox down)."""
        if self.egress is not None:
            await self.egress.after_start()
        self.ready = True
        if self.watch is not None:
            self.watch.pids_file = pids_file(self.watch.container.id)
        if self.hostdir is not None:  # ipc only
            seal_hostdir(self.hostdir)
        plan, self.plan = self.plan, None
        if plan is None:  # no copy: the workspace, if any, is bound
            return None
        return await run_blocking(copy_in, self.container, plan, self.options, self.options.workdir,
                                  *uid_gid(self.options.user))

    # -- taken from the pool ---------------------------------------------------------------------
    async def adopt(self, record: dict[str, Any], max_frame: int, on_drop: Callable[[str], None]) -> dict[str, Any] | None:
        """Attach to a pooled container (so it ends with this process) and watch it as if it had
        been started here; its connection info, or None when it stopped while it waited."""
        container = await run_blocking(running_container, self.link.client, record["id"])
        if container is None:
            return None
        self.container, self.volume = container, record["volume"]
        self.hostdir = Path(record["hostdir"]) if record["hostdir"] else None
        self.created, self.ready, self.pooled_name = record["created"], False, record["name"]
        self.attached = await run_blocking(self.attach, container.id)
        if self.link.relayed:
            end = self.bridge_end = asyncio.get_running_loop().create_future()
            self.bridge = AttachBridge(self.attached, argv=None, launcher=None, key=record["connection_key"],
                                       max_frame=max_frame, on_drop=on_drop,
                                       on_end=lambda: end.done() or end.set_result(None))
            self.attached = None
            self.bridge.start()
            self.info = dict(self.bridge.connection)
        else:
            await run_blocking(claim_by_stdin, self.attached)
            self.info = dict(record["info"])
        self.watch_it()
        return dict(self.info)

    async def pooled_ready(self) -> None:
        """Wait until a pooled container's kernel said it is ready (``READY_LINE`` in its log), so a
        session never takes one still booting.

        Raises:
            SandboxStartError: it stopped, or did not say so within ``ready_timeout``."""
        from ..kernel_client.launcher import READY_LINE

        deadline = time.monotonic() + self.options.ready_timeout
        while time.monotonic() < deadline:
            state, log = await run_blocking(container_log, self.link.client, self.container.id)
            if READY_LINE in log:
                return
            if state != "running":
                break
            await asyncio.sleep(0.1)
        raise SandboxStartError(f"A pooled sandbox's kernel did not become ready: {log.strip()[-300:] or state}")

    # -- its end --------------------------------------------------------------------------------
    async def wait_dead(self) -> str:
        """Return, with the reason as a phrase, once the container stopped (the engine says why),
        or, on the api transport, once its stream ended and the engine said nothing within
        :data:`STREAM_END_WAIT` seconds (the container is then removed)."""
        death = asyncio.ensure_future(self.watch.wait_dead(starting=lambda: not self.ready))
        if self.bridge is None:
            return await death
        bridge, end = self.bridge, self.bridge_end
        try:
            await asyncio.wait({death, end}, return_when=asyncio.FIRST_COMPLETED)
            if not death.done():  # the stream ended first: the engine says why, if the container stopped
                await asyncio.wait({death}, timeout=STREAM_END_WAIT)
            if death.done():
                return death.result()
        except asyncio.CancelledError:
            death.cancel()
            raise
        death.cancel()
        reason = bridge.error or "the Docker engine's stream to it ended while it kept running"
        await run_blocking(self.orphans.remove, self.link.client, self.container and self.container.id, None)
        return reason

    async def remove(self) -> None:
        """Remove the container, its volume (unless ``workdir_volume``: a workspace outlives its
        sandboxes), its proxy and host directory, and release its pool record. Never raises."""
        container, hostdir = self.container, self.hostdir
        volume = None if self.options.workdir_volume else self.volume
        self.container = self.volume = self.hostdir = self.plan = None
        self.ready = False
        watch, self.watch = self.watch, None
        bridge, self.bridge = self.bridge, None
        egress, self.egress = self.egress, None
        if watch is not None:
            await watch.await_farewell()  # before the host directory (the kernel's ipc sockets) goes
        # The container goes first, running (as with ipc): closing the stream first would have it
        # stop by itself meanwhile, and Podman then ignored the removal of a container stopping.
        if self.link.client is not None:
            await run_blocking(self.orphans.remove, self.link.client, container and container.id, volume)
            if egress is not None:  # after the sandbox, which mounts its volume
                await egress.stopped_starting()  # not while a thread still creates it
                await run_blocking(egress.remove, self.orphans)
        if bridge is not None:  # if the engine could not remove it, the relay stops the kernel
            bridge.close()
        attached, self.attached = self.attached, None
        if attached is not None:
            with contextlib.suppress(Exception):
                attached.close()
        remove_hostdir(hostdir)
        if self.pooled_name is not None:
            pool.release(self.options.name, self.pooled_name)
            self.pooled_name = None

    # -- while it runs ---------------------------------------------------------------------------
    def bridge_taken(self) -> Callable[[int], None] | None:
        """The api transport's bridge counts each IOPub message until the client read it."""
        return self.bridge.taken if self.bridge is not None else None


__all__ = ["STREAM_END_WAIT", "SandboxContainer"]
