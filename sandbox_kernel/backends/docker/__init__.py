"""The ``docker`` backend: one hardened container per session runs ipykernel, reached with no
network at all: over ZMQ ``ipc`` sockets in a per-session host directory when the engine shares
this host's filesystem (``transport="ipc"``), else over the engine's own API, the kernel's
channels carried by the container's attach stream (``transport="api"``, :mod:`.bridge`), which
works with any engine: Docker Desktop, Colima, OrbStack, Podman, remote engines over tcp or ssh.

Secure by default, each an option: no network, a read-only root filesystem, a tmpfs ``/tmp``,
a size-limited working directory (a tmpfs volume, the kernel's cwd), all capabilities dropped,
no-new-privileges, a non-root uid, 256 pids, 1 GiB of memory without swap, 1 CPU, an init
process. Only the host variables named in ``env_vars`` enter the container; the Docker socket
is never mounted. Death (out of memory, exit, killed from outside, the engine gone) is learned
from the engine (``POST /containers/{id}/wait`` and the container's state), not the heartbeat.
Options and messages: docs/explanation/docker-backend.md.
"""

from __future__ import annotations

import asyncio
import os
import posixpath
import re
import secrets
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from traitlets import TraitError

from ...core.errors import CheckpointError, EgressError, SandboxError
from ...core.events import Emit, Outcome, Stream
from ...runtime import lock
from ...runtime.paths import within
from ...runtime.traits import format_bytes
from .. import pool
from ..base import StdinHandler
from ..checkpoint.link import KeeperLink
from ..egress import parse_secret
from ..egress.notes import RefusalNotes
from ..usage import CpuMeter
from . import engine, pooled, quota, view
from .boundary import box_memory, memory_used, stats
from .container import SandboxContainer
from .inside import KERNEL_DIR as INSIDE_DIR
from .link import EngineLink
from .options import DockerOptions
from .orphans import REMOVAL_WAIT_S, Orphans
from .prepare import use_image
from .proxy_spec import settings_of as egress_settings_of
from .spec import container_spec, prepare_hostdir, runs_keeper, uid_gid
from .watch import run_blocking


class DockerBackend(DockerOptions):
    """A kernel in a hardened container, one per session (see the module docstring; its options:
    :class:`.options.DockerOptions`). What it learns of the engine and image is its
    :class:`.link.EngineLink`; the running sandbox, its :class:`.container.SandboxContainer`."""

    name = "docker"
    capabilities = replace(DockerOptions.capabilities, files=True, pool=True, egress_update=True, checkpoints=True)
    WATCH_FROM_LAUNCH = True  # its container (the engine's wait) is watched from its creation

    @classmethod
    def pool_status(cls, asked: bool = False) -> list[dict[str, Any]]:
        """``sandbox-kernel pool status``: this host's waiting pooled sandboxes (see :mod:`.pooled`)."""
        return pooled.pool_status(asked)

    @classmethod
    def pool_stop(cls, asked: bool = False) -> list[str]:
        """``sandbox-kernel pool stop``: remove this host's waiting pooled sandboxes; their names."""
        return pooled.pool_stop(asked)

    @classmethod
    def remove_leftovers(cls) -> list[str]:
        """The containers, volumes (the egress proxy's too) and host directories of this host's
        sandboxes whose kernel is gone (:func:`.engine.remove_leftovers`), on the engine the
        environment names, as ``sandbox-kernel gc`` does. Blocking.

        Raises:
            BackendUnavailable: the engine cannot be reached."""
        client = engine.connect()
        try:
            removed = engine.remove_leftovers(client) + pooled.sweep(client)
            # Podman ignores, or refuses, the removal of a container stopping by itself: again (.orphans)
            deadline = time.monotonic() + REMOVAL_WAIT_S
            while engine.remove_leftovers(client, dry_run=True) and time.monotonic() < deadline:
                time.sleep(0.2)
                removed += engine.remove_leftovers(client)
            return removed
        finally:
            client.close()

    @property
    def runs_other_language(self) -> bool:
        return bool(self.kernel_name)

    @property
    def starts_at_launch(self) -> bool:
        """Always: a new notebook's first requests (a Tab, Shift-Tab, the debugger's) are answered
        from the sandbox, which must be up by then; JupyterLab's completer waits about 1 s, less
        than a container's start under load (benchmarks/first_completion.py). A notebook that
        never runs a cell costs one idle container until the kernel stops."""
        return True

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._cpu = CpuMeter()
        self._link = EngineLink()
        self._box: SandboxContainer | None = None  # the running sandbox
        self._orphans = Orphans()  # what could not be removed yet
        self._notes = RefusalNotes()
        self._starting = asyncio.Lock()  # a start's whole (the kernel, then after_start)

    @property
    def completer_cached(self) -> bool:
        """The image holds jedi's cache of what IPython's first completion parses (looked up as
        the image is prepared: :attr:`.link.EngineLink.completer_cached`)."""
        return self._link.completer_cached

    # what tests and a debugger look at, by the names they always had
    _container = property(lambda self: self._box and self._box.container)
    _hostdir = property(lambda self: self._box and self._box.hostdir)
    _pooled_name = property(lambda self: self._box and self._box.pooled_name)
    _transport = property(lambda self: self._link.transport)

    # -- launch and stop -----------------------------------------------------------------------
    async def _launch(self) -> dict[str, Any]:
        link = self._link
        client = await link.prepare(self, self._progress_handler)
        await run_blocking(self._remove_leftovers, client)
        uid, gid = uid_gid(self.user)
        plan, bound = await run_blocking(view.prepare, self, not link.relayed, uid, gid)
        if (info := await pool.take(self)) is not None:
            self.workspace_view, self._box.plan = bound, plan if link.relayed else None
            return info
        await run_blocking(quota.check, client, self.memory_limit, lock.load())
        hostdir = None if link.relayed else Path(tempfile.mkdtemp(prefix=f"{engine.HOSTDIR_PREFIX}{os.getpid()}-",
                                                                  dir=engine.hostdir_root()))
        name = f"sandbox-kernel-{re.sub(r'[^A-Za-z0-9_.-]', '-', self.session)[:40]}-{secrets.token_hex(4)}"
        box = self._box = SandboxContainer(self, link, self._orphans, volume=self.workdir_volume or f"{name}-work",
                                           hostdir=hostdir)
        self.workspace_view, box.plan = bound, plan if link.relayed else None  # a copy is made once the kernel runs
        try:
            box.info = {} if link.relayed else prepare_hostdir(hostdir, uid)
            owned = engine.labels(self.session, hostdir)
            labels = {**owned, **quota.labels(self.memory_limit)}
            await box.start_egress(name, owned, self._notes)  # not the quota's: the proxy is no sandbox of the user
            spec = container_spec(self, name, hostdir, box.volume, labels, engine_here=link.here, egress=box.egress,
                                  plan=plan)
            spec = use_image(spec, link.run_image, link.kernelspec, relayed=link.relayed)
            box.created, box.ready = int(time.time()), False
            warning = await run_blocking(box.create, spec, labels)
            if link.relayed:
                box.info = await box.start_bridge(self.message_bound[0], self._bridge_dropped)
            box.watch_it()
            if warning is not None:
                self.log.warning("%s", warning)
                if self._progress_handler is not None:
                    self._progress_handler(Stream("stderr", warning + "\n"))
        except BaseException:
            await self._terminate()
            raise
        return dict(box.info)

    async def start(self) -> None:
        """Start the sandbox (idempotent: called before every cell). A second caller waits for the
        first's whole start, its :meth:`.container.SandboxContainer.after_start` too (the workspace's
        copy, which a cell must find, and its view, which the cell's first line shows): the kernel
        answers (:attr:`started`) before that ends."""
        if self.started and not self._starting.locked():
            return
        async with self._starting:
            if self.started:
                return
            await super().start()
            try:
                copied = await self._box.after_start()
            except BaseException:
                await self.shutdown()
                raise
            if copied is not None:  # a copy of the workspace, through the engine's archive API
                self.workspace_view = copied

    def _remove_leftovers(self, client: Any) -> None:
        self._orphans.retry(client)
        try:
            removed = engine.remove_leftovers(client) + pooled.sweep(client)
        except SandboxError as exc:  # never a reason not to start
            self.log.warning("could not remove leftover sandboxes: %s", exc)
            return
        if removed:
            self.log.info("removed sandboxes left by kernels that are gone: %s", ", ".join(removed))

    async def _terminate(self) -> None:
        box, self._box = self._box, None
        self.workspace_view = None
        if box is not None:
            await box.remove()

    async def _wait_dead(self) -> str:
        return await self._box.wait_dead()

    def _iopub_taken(self) -> Callable[[int], None] | None:
        return self._box.bridge_taken() if self._box is not None else None

    def _unreachable_hint(self) -> str:
        if self._link.transport != "ipc":
            return ""
        return (" With transport=ipc the host reaches the kernel through sockets in a folder it shares with the "
                "container, which an engine in a VM or on another machine cannot share: use "
                "--DockerBackend.transport=api (or auto).")

    # -- checkpoints (sandbox_kernel.backends.checkpoint: the keeper runs in the container) ------------
    async def _open_keeper(self) -> KeeperLink | None:
        """The keeper's socket in the host directory (ipc), or its lines on the relay's stream (api)."""
        box = self._box
        if not runs_keeper(self) or self._link.kernelspec or box is None:
            return None
        if box.bridge is not None:
            link = KeeperLink(send=box.bridge.send_keeper)
            box.bridge.on_keeper = link.feed
            return link
        return await KeeperLink.connect(str(box.hostdir / "keeper"), self.ready_timeout)

    RUNSC_FORK_PIDS = 40
    """Processes and threads one fork adds to a gVisor sandbox, where ``pids_limit`` counts
    runsc's own host threads (measured here: a sandbox at 165 went to 231 with 2 forks, 247 after
    a cell in each; about 95 at start)."""

    async def _fork_room(self, count: int) -> None:
        """Under gVisor a sandbox past its ``pids_limit`` is stopped by runsc itself: a fork that
        would take it there is refused instead, with the fix."""
        box = self._box
        if self.runtime != "runsc" or not self.pids_limit or box is None or box.watch is None:
            return
        in_use = await run_blocking(box.watch.pids_in_use)
        if in_use + count * self.RUNSC_FORK_PIDS > self.pids_limit:
            raise CheckpointError(
                f"No room for {count} fork{'s' if count > 1 else ''} in this gVisor sandbox: {in_use} of its pids_limit "
                f"({self.pids_limit}) are in use (runsc counts its own threads there) and a fork needs about "
                f"{self.RUNSC_FORK_PIDS}. Fix: a larger --DockerBackend.pids_limit (e.g. "
                f"{in_use + count * self.RUNSC_FORK_PIDS + 64}), or fewer forks at once.")

    def _fork_folder(self) -> str | None:
        return f"{INSIDE_DIR}/forks"  # the container's own /tmp: the host directory takes no files

    async def _reach_fork(self, answer: dict[str, Any], on_drop: Any, on_end: Any) -> tuple[dict[str, Any], Any]:
        """A relay started by ``exec`` in the container carries the fork's channels
        (:meth:`.container.SandboxContainer.reach_fork`)."""
        bridge = await self._box.reach_fork(answer["ip"], self.message_bound[0], on_drop, on_end)
        return dict(bridge.connection), bridge

    def _keeper_death_reason(self, status: Any, oom: bool | None) -> str:
        """The keeper's word, with the container's memory limit when it ran out of memory (the
        OOM killer takes the kernel first: its ``oom_score_adj`` is raised)."""
        reason = super()._keeper_death_reason(status, oom)
        if self.memory_limit and oom:
            reason += f" (limit {format_bytes(self.memory_limit)})"
        elif self.memory_limit and oom is None and status == -9:
            reason += f" (maybe out of memory: the limit is {format_bytes(self.memory_limit)})"
        return reason

    def _bridge_dropped(self, channel: str) -> None:
        if self._recovery is not None:
            self._recovery.on_drop(channel)

    # -- the warm pool (sandbox_kernel.backends.pool; the docker side: .pooled) -------------------------
    async def _pool_key(self) -> str | None:
        return await pooled.key_of(self, self._link)

    def _pool_options(self) -> dict[str, Any]:
        return pool.options_of(self)

    async def _pool_launch(self) -> tuple[str, dict[str, Any]]:
        return await pooled.launch(self, self._link, self._orphans)

    async def _adopt(self, record: dict[str, Any]) -> dict[str, Any] | None:
        self._box = SandboxContainer(self, self._link, self._orphans)
        return await self._box.adopt(record, self.message_bound[0], self._bridge_dropped)

    async def _pool_discard(self, record: dict[str, Any]) -> None:
        if self._box is not None:
            self._box.pooled_name = None
        await self._terminate()
        if self._link.client is not None:  # it never became this session's: its own volume goes too
            await run_blocking(self._orphans.remove, self._link.client, record.get("id"),
                               None if self.workdir_volume else record.get("volume"))
        engine.remove_hostdir(record.get("hostdir"))

    # -- running code ------------------------------------------------------------------------------
    async def execute(self, code: str, emit: Emit, *, timeout: float | None = None,
                      stdin: StdinHandler | None = None, **request: Any) -> Outcome:
        """:meth:`KernelClientBackend.execute` (``request``: ``silent``, ``store_history``,
        ``user_expressions``), after building a missing image, then freeing process slots."""
        if not self.started:  # the first cell builds a missing image and shows the progress
            await self._link.ensure_image(self, emit)
        outcome = None
        self._notes.begin(emit)
        try:
            outcome = await super().execute(code, emit, timeout=timeout, stdin=stdin, **request)
            if (egress := self._box and self._box.egress) is not None:  # the cell's refusals, before it ends
                await egress.flush()
            return outcome
        finally:
            self._notes.end()
            watch = self._box and self._box.watch
            if watch is not None and self._client is not None and not self.kernel_name:  # the reaper is Python
                await watch.free_process_slots(emit, outcome is None or outcome.status == "error", self.run_silently)

    async def set_allow_hosts(self, hosts: list[str]) -> list[str]:
        self.check_lock(allow_hosts=list(hosts))
        try:
            self.allow_hosts = list(hosts)
        except TraitError as exc:
            raise EgressError(str(exc)) from None
        settings = egress_settings_of(self)
        entries = settings.entries if settings is not None else []
        if (egress := self._box and self._box.egress) is not None:
            await egress.allow(entries)
        elif self.started:
            raise EgressError("This sandbox started without allow_hosts, so it has no egress proxy to change: the "
                              "new list applies when it restarts (which loses its state).")
        return entries

    # -- files -------------------------------------------------------------------------------------
    def _sandbox_path(self, remote: str) -> str:
        return posixpath.normpath(posixpath.join(self.workdir, remote))

    async def upload(self, local: str | Path, remote: str) -> str:
        await self.start()
        target = self._sandbox_path(remote)
        if within(self.workdir, remote) is None:
            raise PermissionError(f"Uploads go into the sandbox's working directory {self.workdir} "
                                  f"(its root filesystem is read-only), not {target}.")
        if self.workspace_view is not None:  # read-only: one line, as local's, not the engine's "resource busy"
            self.workspace_view.refuse_upload(posixpath.relpath(target, self.workdir))
        if not Path(local).is_file():
            raise FileNotFoundError(f"{local} is not a file")
        await run_blocking(engine.put_file, self._box.container, Path(local), self.workdir,
                           posixpath.relpath(target, self.workdir), *uid_gid(self.user))
        return target

    async def download(self, remote: str, local: str | Path, *, max_bytes: int = 0) -> Path:
        await self.start()
        return await run_blocking(engine.get_file, self._box.container, self._sandbox_path(remote), Path(local),
                                  max_bytes)

    async def usage(self) -> dict[str, Any] | None:
        """The container's use as ``docker stats`` counts it, from the engine's one-shot stats
        (``GET /containers/{id}/stats``): memory less the inactive file cache, the percent of one
        CPU used since the previous call (its CPU time over the host's, times the online CPUs),
        and the CPUs it may use (``cpus``, else the host's); as its host's figures, the container
        seen as a machine of its own: the percent of the CPUs it may use, and its memory against its
        limit (:func:`~.boundary.box_memory`)."""
        container = self._box and self._box.container
        if container is None:
            return None
        try:
            figures = await run_blocking(stats, container)
        except SandboxError:  # gone meanwhile, or the engine is: no figure
            return None
        memory, cpu = memory_used(figures), figures.get("cpu_stats") or {}
        if memory is None:
            return None
        online = cpu.get("online_cpus") or len((cpu.get("cpu_usage") or {}).get("percpu_usage") or ()) or 1
        used, span = (cpu.get("cpu_usage") or {}).get("total_usage"), cpu.get("system_cpu_usage")
        percent = self._cpu.sample(used, span, online) if used is not None and span else None
        count = int(self.cpus) if self.cpus and float(self.cpus).is_integer() else self.cpus or online
        return {"memory_bytes": memory, "cpu_percent": percent, "cpu_count": count,
                "host_cpu_percent": percent and percent / count, "host_memory": box_memory(figures)}

    def describe(self) -> dict[str, Any]:
        sizes = {"memory": self.memory_limit, "swap": self.swap, "workdir": self.workdir_size, "tmp": self.tmp_size}
        limits = {**{k: format_bytes(v) for k, v in sizes.items() if v}, "cpus": self.cpus, "pids": self.pids_limit}
        box = self._box
        egress = box and box.egress
        return {**super().describe(), "sandbox_id": box.container.short_id if box and box.container else None,
                "image": self._link.run_image or self.image, "kernel_name": self.kernel_name, "network": self.network,
                "transport": self._link.transport or self.transport,
                "allow_hosts": egress.entries if egress is not None else list(self.allow_hosts),
                "egress_proxy": egress.name if egress is not None else None,
                "host_secrets": [f"{secret.host} {secret.header}" for secret in map(parse_secret, self.host_secrets)],
                "workdir": self.workdir, "env": sorted(self.env) or None,
                "limits": {k: v for k, v in limits.items() if v}}
