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
Options and messages: docs/docker.md.
"""

from __future__ import annotations

import asyncio
import contextlib
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

from traitlets import Bool, Float, Integer, List, TraitError, Unicode, validate

from ...core.errors import EgressError, Refused, SandboxError, SandboxStartError
from ...core.events import Emit, Outcome, Stream
from ...runtime import lock
from ...runtime.paths import within
from ...runtime.traits import ByteSize, HostVariables, format_bytes
from .. import pool
from ..base import StdinHandler
from ..egress import allow_hosts_trait, parse_secret, pypi_index_trait, secrets_trait
from ..kernel_client import KernelClientBackend
from ..kernel_client.launcher import READY_LINE, READY_VARIABLE
from ..pool import pool_size_trait, pool_ttl_trait
from ..usage import CpuMeter
from . import engine, podman, pooled, quota, rootless, view, workspace
from .boundary import container_log, engine_errors, image_identity, memory_used, running_container, stats
from .boundary import host as boundary_host
from .bridge import AttachBridge, claim_by_stdin
from .egress import IMAGE as EGRESS_IMAGE
from .egress import Egress
from .egress import settings_of as egress_settings_of
from .egress.notes import RefusalNotes
from .image import BuildProgress
from .images import DEFAULT_TAG
from .images.for_kernel import build_command
from .inside import KERNEL_DIR as INSIDE_DIR
from .inside import SOURCE as RELAY_SOURCE
from .inside import pooled_environment
from .mounts import parse_gpus
from .orphans import Orphans
from .prepare import check_option, kernel_argv, prepare_image, use_image
from .spec import (
    LAUNCHER,
    POOL_TTL_VARIABLE,
    container_spec,
    launcher_argv,
    prepare_hostdir,
    seal_hostdir,
    uid_gid,
    volume_options,
)
from .watch import ContainerWatch, Limits
from .watch import run_blocking as _run_blocking

STREAM_END_WAIT = 5.0
"""Seconds the api transport waits, after the attach stream ended, for the engine to report the
container's stop (its reason); then the container is removed and the stream's end is the reason."""


class DockerBackend(KernelClientBackend):
    """A kernel in a hardened container, one per session (see the module docstring)."""

    name = "docker"
    capabilities = replace(KernelClientBackend.capabilities, files=True, pool=True, egress_update=True)

    @classmethod
    def pool_status(cls, asked: bool = False) -> list[dict[str, Any]]:
        """``sandbox-kernel pool status``: this host's waiting pooled sandboxes (see :mod:`.pooled`)."""
        return pooled.pool_status(asked)

    @classmethod
    def pool_stop(cls, asked: bool = False) -> list[str]:
        """``sandbox-kernel pool stop``: remove this host's waiting pooled sandboxes; their names."""
        return pooled.pool_stop(asked)

    image = Unicode(DEFAULT_TAG, help="Image with `python -m ipykernel_launcher`. sandbox-kernel[:TAG] images are "
                                      "built from the packaged recipe when missing; others are never pulled.").tag(config=True)
    network = Unicode("none", help="Docker network mode: 'none' (no network) or a network such as 'bridge' to opt in.").tag(
        config=True)
    read_only = Bool(True, help="Mount the container's root filesystem read-only.").tag(config=True)
    tmp_size = ByteSize(256 * 1024**2, help="Size of the tmpfs at /tmp (counts toward memory_limit).").tag(config=True)
    workdir = Unicode("/home/sandbox/work", help="The kernel's working directory: a tmpfs volume, the target of uploads.").tag(
        config=True)
    workdir_size = ByteSize(512 * 1024**2, help="Size limit of the working directory (counts toward memory_limit); "
                                                "0: none.").tag(config=True)
    user = Unicode("", help="Numeric uid:gid of the kernel. Default: 1000:1000 when this process runs as root, "
                            "else this process's own uid:gid (so it can reach the kernel's sockets).").tag(config=True)
    cap_drop = List(Unicode(), ["ALL"], help="Linux capabilities to drop.").tag(config=True)
    no_new_privileges = Bool(True, help="Forbid gaining privileges (setuid binaries) in the container.").tag(config=True)
    pids_limit = Integer(256, help="Most processes and threads in the container (a fork bomb stops there); 0: none.").tag(
        config=True)
    memory_limit = ByteSize(1024**3, help="Memory of the container, e.g. '2g'; past it the kernel is killed. 0: none.").tag(
        config=True)
    swap = ByteSize(0, help="Swap the container may use beyond memory_limit; 0: none.").tag(config=True)
    cpus = Float(1.0, help="CPUs the container may use (fractions allowed); 0: no limit.").tag(config=True)
    init = Bool(True, help="Run an init process as PID 1 (signals, zombies, fast stop).").tag(config=True)
    env_vars = HostVariables(help="Names of host environment variables to pass into the container; nothing else "
                                  "from the host environment enters it (never JupyterHub's).").tag(config=True)
    runtime = Unicode("", help="OCI runtime, e.g. 'runsc' (gVisor) if the engine has it; empty: the engine's default.").tag(
        config=True)
    mounts = List(Unicode(), help="Host paths to mount, HOST:CONTAINER[:ro|rw] each, read-only unless ':rw'; "
                                  "CONTAINER inside /home/sandbox, e.g. '~/data:/home/sandbox/data'.").tag(config=True)
    history_file = Unicode(":memory:", help="Where the sandbox's IPython keeps its history (what history_request, "
                                            "console Up-arrow and %history read): ':memory:' (default) for this "
                                            "sandbox's life; a path in the workdir_volume keeps it with its files.").tag(
        config=True)
    workdir_volume = Unicode("", help="A Docker volume for the working directory instead of the tmpfs: its files survive "
                                      "restarts and new kernels naming it; removed only by `sandbox-kernel gc "
                                      "--volumes`. Empty: a tmpfs that goes with the sandbox.").tag(config=True)
    gpus = Unicode("", help="GPUs for the container: 'all' or a count (needs the NVIDIA Container Toolkit on the "
                            "engine's host); empty: none.").tag(config=True)
    auto_build = Bool(True, help="Build a missing or outdated sandbox-kernel[:TAG] image at the first cell.").tag(config=True)
    build_base = Unicode("", help="Base image for automatic builds; empty: python:3.11-slim-bookworm or "
                                  "sandbox-kernel-base:bookworm, whichever is present.").tag(config=True)
    build_wheelhouse = Unicode("", help="Wheel directory for automatic builds; empty: "
                                        "~/.cache/sandbox-kernel/wheelhouse.").tag(config=True)
    packages = List(Unicode(), help="pip requirements added to the image (e.g. 'tqdm', 'scikit-learn>=1.5'): "
                                    "wheels downloaded on the host into build_wheelhouse, built once into "
                                    "sandbox-kernel-packages:DIGEST.").tag(config=True)
    dockerfile = Unicode("", help="Path of your Dockerfile, built instead of image (its folder is the context, "
                                  "legacy builder), rebuilt when the context or build_args change.").tag(config=True)
    build_args = List(Unicode(), help="NAME=value build arguments of dockerfile, repeated.").tag(config=True)
    kernel_name = Unicode("", help="Jupyter kernelspec in the image to run (e.g. 'bash'); empty: Python "
                                   "(ipykernel).").tag(config=True)
    pool_size = pool_size_trait()
    pool_ttl = pool_ttl_trait()
    allow_hosts = allow_hosts_trait()
    host_secrets = secrets_trait()
    pypi_index = pypi_index_trait()
    egress_network = Unicode("bridge", help="The engine network the egress proxy reaches allowed hosts through "
                                            "(with allow_hosts; the sandbox itself stays on network 'none').").tag(
        config=True)
    egress_dns = List(Unicode(), help="DNS servers (addresses) the egress proxy resolves names with; empty: the "
                                      "engine's default.").tag(config=True)
    egress_ca = Unicode("", help="A PEM file of CAs the egress proxy trusts, besides the system's, for the hosts "
                                 "of host_secrets.").tag(config=True)
    egress_image = Unicode(EGRESS_IMAGE, help="Image of the egress proxy (mitmproxy), built from the packaged "
                                              "recipe when missing.").tag(config=True)
    transport = Unicode("auto", help="How the host reaches the sandbox's kernel: 'ipc' (ZMQ sockets in a host "
                                     "directory mounted into the container: only for an engine on this machine "
                                     "that shares its filesystem), 'api' (the kernel's channels carried by the "
                                     "engine's attach stream: any engine, e.g. Docker Desktop, Colima, Podman, "
                                     "DOCKER_HOST=tcp:// or ssh://), or 'auto': ipc where it is known to work, "
                                     "else api.").tag(config=True)

    @validate("transport")
    def _check_transport(self, proposal: dict) -> str:
        if proposal["value"] not in ("auto", "ipc", "api"):
            raise TraitError(f"transport must be 'auto', 'ipc' or 'api', not {proposal['value']!r}")
        return proposal["value"]

    @validate("packages", "build_args")
    def _check_environment(self, proposal: dict) -> list[str]:
        return check_option(proposal["trait"].name, proposal["value"])

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

    @property
    def _image_label(self) -> str:
        """The image the session runs, as messages name it."""
        return (self._run_image or self.image) + (f" built from {self.dockerfile}" if self.dockerfile else "")

    @validate("user")
    def _check_user(self, proposal: dict) -> str:
        if proposal["value"] and not re.fullmatch(r"\d+(:\d+)?", proposal["value"]):
            raise TraitError(f"user must be a numeric uid or uid:gid, not {proposal['value']!r}")
        return proposal["value"]

    @validate("workdir_volume")
    def _check_workdir_volume(self, proposal: dict) -> str:
        if proposal["value"] and not workspace.NAME.fullmatch(proposal["value"]):
            raise TraitError(f"workdir_volume must be a volume name ([A-Za-z0-9][A-Za-z0-9_.-]+), "
                             f"not {proposal['value']!r}")
        return proposal["value"]

    @validate("gpus")
    def _check_gpus(self, proposal: dict) -> str:
        parse_gpus(proposal["value"])  # ValueError: a bad option value
        return proposal["value"]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._cpu = CpuMeter()
        self._docker: Any = None
        self._podman = False  # the engine is Podman's Docker-compatible API
        self._container: Any = None
        self._volume: str | None = None
        self._hostdir: Path | None = None
        self._info: dict[str, Any] = {}
        self._created = 0
        self._ready = False
        self._watch: ContainerWatch | None = None  # of the running container
        self._orphans = Orphans()  # what could not be removed yet
        self._run_image = ""  # the image the session runs: image, or built from dockerfile and packages
        self._kernelspec: dict[str, Any] | None = None  # kernel_name's kernel.json in that image
        self._prepared = False  # _run_image and _kernelspec were just looked up (by the first cell)
        self._transport = ""  # what transport="auto" chose for this engine
        self._engine_here = True  # the engine shares this machine's filesystem (host paths mean the same)
        self._rootless = False  # the engine runs as a user (rootless.py)
        self._bridge: AttachBridge | None = None  # the api transport's, for the running container
        self._bridge_end: asyncio.Future | None = None  # done when its stream ended
        self._attached: Any = None  # the container's attach socket, until the bridge takes it
        self._pooled_name: str | None = None  # the running sandbox's, when taken from the pool
        self._egress: Egress | None = None  # the running sandbox's proxy (allow_hosts)
        self._notes = RefusalNotes()
        self._plan: Any = None  # the workspace's, while a copy of it is due (api transport)

    def _uid_gid(self) -> tuple[int, int]:
        return uid_gid(self.user)

    # -- launch and stop -----------------------------------------------------------------------
    async def _engine(self) -> Any:
        if self._docker is None:
            client = await _run_blocking(engine.connect)
            self._podman = await _run_blocking(podman.is_podman, client)
            self._docker = client
        if self._podman:  # before any build or container: options it would ignore
            podman.refuse_ignored(self)
        return self._docker

    async def _ensure_image(self, emit: Emit | None) -> None:
        """Check the image (an inspect), building it first if needed, with progress in the cell."""
        client = await self._engine()
        loop = asyncio.get_running_loop()
        progress = BuildProgress(emit, self.image, loop) if emit is not None else None
        if progress is not None:
            progress.command = build_command(self)
        log = progress or (lambda line: self.log.info("image build: %s", line))
        ok = False
        try:
            self._run_image, self._kernelspec = await _run_blocking(prepare_image, client, self, log)
            self._prepared = ok = True
        finally:
            if progress is not None:
                progress.done(ok)

    def _create(self, client: Any, spec: dict[str, Any], volume_labels: dict[str, str],
                attach: bool = True) -> str | None:
        """Create and start the container (and its working directory's volume); returns a
        warning for the cell, if any. ``attach``: False for a pooled sandbox, attached by the
        session that takes it (:meth:`_adopt`). Blocking."""
        new_workspace, warning = False, None
        if self.workdir_volume:
            new_workspace, warning = workspace.ensure_volume(client, self._volume, self.workdir_size, self._podman)
            if new_workspace:
                workspace.give_to(client, self._volume, self._run_image, *self._uid_gid())
        else:
            options = volume_options(self.workdir_size, *self._uid_gid(), podman=self._podman,
                                     shared=self.workspace == "ro" and self._transport == "api")
            with engine_errors("create the sandbox's working directory volume"):
                client.api.create_volume(self._volume, driver="local", labels=volume_labels, driver_opts=options)
        try:
            with engine_errors(f"start a sandbox container from {self._image_label}"):
                self._container = container = client.containers.create(**spec)
                if dropped := rootless.dropped_limits(self, container.attrs.get("HostConfig") or {}):
                    raise SandboxStartError(rootless.dropped_message(dropped, boundary_host(), self._rootless))
                # Attached before it starts: the api transport's stream (nothing of it is missed), or,
                # for ipc, stdin alone. Either way the engine closes the container's stdin when this
                # process ends, and the container ends with it (the relay or the launcher sees EOF).
                if attach:
                    self._attached = self._attach(client, container.id)
                container.start()
        except Refused as exc:
            if (error := self._start_error(exc)) is exc:
                raise
            raise error from exc
        return warning

    def _attach(self, client: Any, container_id: str) -> Any:
        """The container's attach socket: stdin, and for the api transport stdout and stderr."""
        streams = {"stdout": 1, "stderr": 1} if self._transport == "api" else {}
        return client.api.attach_socket(container_id, params={"stdin": 1, "stream": 1, **streams})

    def _start_error(self, exc: Refused) -> Exception:
        """The error for a container the engine would not create or start: the cause and fix
        where known, else the engine's own refusal."""
        if "could not select device driver" in exc.explanation:
            return SandboxStartError(f"The sandbox could not start: gpus={self.gpus} needs GPU support in the Docker "
                                     "engine, which it lacks. Fix: install the NVIDIA Container Toolkit on the "
                                     "engine's host, or leave gpus empty.")
        if self._podman and (reason := podman.start_failure(exc.explanation)):
            return SandboxStartError(f"The sandbox could not start: {reason}")
        if match := re.search(r"bind source path does not exist: (\S+)", exc.explanation):
            where = "this machine" if self._engine_here else "the Docker engine's host"
            return SandboxStartError(f"The sandbox could not start: the mount's host path {match.group(1)} does not "
                                     f"exist on {where}. `mounts` name paths on the engine's host.")
        if "executable file not found" in exc.explanation:
            return SandboxStartError(f"The sandbox could not start: {engine.no_python(self._image_label)}.")
        return exc

    async def _prepare(self) -> Any:
        """The engine, with the image checked (built if needed) and the transport chosen."""
        client = await self._engine()
        if not self._prepared:  # a build at start shows where the front door says
            await self._ensure_image(self._progress_handler)
        self._prepared = False  # the next start looks again (a changed Dockerfile is rebuilt)
        await self._choose_transport(client)
        return client

    async def _choose_transport(self, client: Any) -> None:
        """What ``transport`` means for this engine, looked up once per backend."""
        if not self._transport:
            self._engine_here = await _run_blocking(engine.engine_is_here, client)
            self._rootless = await _run_blocking(rootless.is_rootless, client)  # ipc cannot work there
            self._transport = engine.choose_transport(client, self.transport, self._engine_here and not self._rootless)

    async def _launch(self) -> dict[str, Any]:
        client = await self._prepare()
        await _run_blocking(self._remove_leftovers, client)
        relayed = self._transport == "api"
        uid, gid = self._uid_gid()
        plan, self.workspace_view = await _run_blocking(view.prepare, self, not relayed, uid, gid)
        self._plan = plan if relayed else None  # copied once the kernel runs (start)
        if (info := await pool.take(self)) is not None:
            return info
        await _run_blocking(quota.check, client, self.memory_limit, lock.load())
        self._hostdir = None if relayed else Path(tempfile.mkdtemp(prefix=f"{engine.HOSTDIR_PREFIX}{os.getpid()}-",
                                                                   dir=engine.hostdir_root()))
        try:
            self._info = {} if relayed else prepare_hostdir(self._hostdir, uid)
            owned = engine.labels(self.session, self._hostdir)
            labels = {**owned, **quota.labels(self.memory_limit)}
            name = f"sandbox-kernel-{re.sub(r'[^A-Za-z0-9_.-]', '-', self.session)[:40]}-{secrets.token_hex(4)}"
            self._volume = self.workdir_volume or f"{name}-work"
            await self._start_egress(client, name, owned)  # not the quota's: the proxy is no sandbox of the user
            spec = container_spec(self, name, self._hostdir, self._volume, labels, engine_here=self._engine_here,
                                  egress=self._egress, plan=plan)
            spec = use_image(spec, self._run_image, self._kernelspec, relayed=relayed)
            self._created, self._ready = int(time.time()), False
            warning = await _run_blocking(self._create, client, spec, labels)
            if relayed:
                self._info = await self._start_bridge()
            self._watch_container(client)
            if warning is not None:
                self.log.warning("%s", warning)
                if self._progress_handler is not None:
                    self._progress_handler(Stream("stderr", warning + "\n"))
        except BaseException:
            await self._terminate()
            raise
        return dict(self._info)

    async def _start_egress(self, client: Any, name: str, labels: dict[str, str]) -> None:
        """With ``allow_hosts``: the proxy's volume (the sandbox mounts it); its container starts now
        or once the kernel is ready (:meth:`.egress.Egress.launch`)."""
        settings = egress_settings_of(self)
        if settings is not None:
            self._egress = Egress(client, settings, name=name, labels=labels, podman=self._podman,
                                  on_event=self._notes)
            await _run_blocking(self._egress.create_volume)
            self._egress.launch()

    def _watch_container(self, client: Any) -> None:
        limits = Limits(self.memory_limit, self.pids_limit, self.runtime, self._image_label, self._podman)
        self._watch = ContainerWatch(client, self._container, None if self._transport == "api" else self._info,
                                     limits, self._created)

    # -- the warm pool (sandbox_kernel.backends.pool) ---------------------------------------------------
    async def _pool_key(self) -> str | None:
        """Everything that shapes this session's container: its whole specification (the
        per-sandbox names aside), the image's id, the transport and the code the container
        runs (launcher, relay)."""
        if self.kernel_name or self.allow_hosts or self.host_secrets:  # another language, or a proxy: not pooled
            return None
        client = await self._engine()
        if not self._run_image:  # the filler: nothing prepared yet
            await self._ensure_image(None)
        await self._choose_transport(client)
        relayed = self._transport == "api"
        plan = None if relayed else await _run_blocking(view.workspace.plan_of, self)
        spec = container_spec(self, "NAME", None if relayed else Path("/HOSTDIR"),
                              self.workdir_volume or "VOLUME", {}, engine_here=self._engine_here, plan=plan)
        spec = use_image(spec, self._run_image, self._kernelspec, relayed=relayed)
        image_id = await _run_blocking(image_identity, client, self._run_image)
        return pool.key_of({"spec": spec, "image_id": image_id, "transport": self._transport, "uid": self._uid_gid(),
                            "launcher": LAUNCHER, "relay": RELAY_SOURCE, "ttl": self.pool_ttl,
                            "workspace_copy": self.workspace if relayed else "off"})  # its volume's owner

    def _pool_options(self) -> dict[str, Any]:
        return pool.options_of(self)

    async def _pool_launch(self) -> tuple[str, dict[str, Any]]:
        """A container that waits, its kernel started, for a session to attach (see
        :mod:`.pooled`); returns its name and record. Blocking parts run in threads."""
        client = await self._engine()
        key = await self._pool_key()
        await _run_blocking(quota.check, client, self.memory_limit, lock.load())
        relayed = self._transport == "api"
        uid, _ = self._uid_gid()
        hostdir = None if relayed else Path(tempfile.mkdtemp(prefix=pooled.HOSTDIR_PREFIX, dir=engine.hostdir_root()))
        name = f"{pooled.NAME_PREFIX}{secrets.token_hex(6)}"
        volume = self.workdir_volume or f"{name}-work"
        labels = {**pooled.labels(key, hostdir), **quota.labels(self.memory_limit)}
        record: dict[str, Any] = {"key": key, "transport": self._transport, "hostdir": str(hostdir or ""),
                                  "volume": volume, "created": int(time.time())}
        try:
            info = {} if relayed else prepare_hostdir(hostdir, uid)
            plan = None if relayed else await _run_blocking(view.workspace.plan_of, self)
            spec = container_spec(self, name, hostdir, volume, labels, engine_here=self._engine_here, plan=plan)
            spec = use_image(spec, self._run_image, self._kernelspec, relayed=relayed)
            if relayed:
                secret = secrets.token_hex(32)
                spec["environment"] = {**spec["environment"], **pooled_environment(
                    {"key": secret, "argv": launcher_argv(INSIDE_DIR, "{connection_file}", self.history_file), "launcher": LAUNCHER,
                     "ttl": self.pool_ttl})}
                record["connection_key"] = secret
            else:
                spec["environment"] = {**spec["environment"], POOL_TTL_VARIABLE: str(self.pool_ttl)}
                record["info"] = info
            spec["environment"] = {**spec["environment"], READY_VARIABLE: "1"}
            self._volume = volume
            await _run_blocking(self._create, client, spec, labels, False)
            record["id"] = self._container.id
            await self._pooled_ready(client)
        except BaseException:
            self._container, self._volume = None, None  # a created one is removed, running or not
            await _run_blocking(self._orphans.remove, client, record.get("id"), None if self.workdir_volume else volume)
            engine.remove_hostdir(hostdir)
            raise
        self._container = self._volume = None
        return name, record

    async def _pooled_ready(self, client: Any) -> None:
        """Wait until the pooled container's kernel said it is ready (:data:`READY_LINE` in its
        log), so a session never takes one still booting.

        Raises:
            SandboxStartError: it stopped, or did not say so within ``ready_timeout``."""
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            state, log = await _run_blocking(container_log, client, self._container.id)
            if READY_LINE in log:
                return
            if state != "running":
                break
            await asyncio.sleep(0.1)
        raise SandboxStartError(f"A pooled sandbox's kernel did not become ready: {log.strip()[-300:] or state}")

    async def _adopt(self, record: dict[str, Any]) -> dict[str, Any] | None:
        """Attach to a pooled container (so it ends with this process) and watch it as if
        :meth:`_launch` had started it; None when it stopped while it waited."""
        client = self._docker
        container = await _run_blocking(running_container, client, record["id"])
        if container is None:
            return None
        self._container, self._volume = container, record["volume"]
        self._hostdir = Path(record["hostdir"]) if record["hostdir"] else None
        self._created, self._ready = record["created"], False
        self._pooled_name = record["name"]
        self._attached = await _run_blocking(self._attach, client, container.id)
        if self._transport == "api":
            end = self._bridge_end = asyncio.get_running_loop().create_future()
            self._bridge = AttachBridge(self._attached, argv=None, launcher=None, key=record["connection_key"],
                                        max_frame=self.message_bound[0], on_drop=self._bridge_dropped,
                                        on_end=lambda: end.done() or end.set_result(None))
            self._attached = None
            self._bridge.start()
            self._info = dict(self._bridge.connection)
        else:
            await _run_blocking(claim_by_stdin, self._attached)
            self._info = dict(record["info"])
        self._watch_container(client)
        return dict(self._info)

    async def _pool_discard(self, record: dict[str, Any]) -> None:
        self._pooled_name = None
        await self._terminate()
        if self._docker is not None:  # it never became this session's: its own volume goes too
            await _run_blocking(self._orphans.remove, self._docker, record.get("id"),
                                None if self.workdir_volume else record.get("volume"))
        engine.remove_hostdir(record.get("hostdir"))

    async def _start_bridge(self) -> dict[str, Any]:
        """Relay the kernel's channels over the container's attach stream (the api transport);
        returns the connection info of the bridge's endpoints. Waits until the relay said its
        kernel's IOPub listens (or the container stopped: the death watch then says why)."""
        end = self._bridge_end = asyncio.get_running_loop().create_future()
        argv = kernel_argv(self._kernelspec) if self._kernelspec else launcher_argv(INSIDE_DIR, "{connection_file}", self.history_file)
        self._bridge = AttachBridge(self._attached, argv=argv, launcher=None if self._kernelspec else LAUNCHER,
                                    max_frame=self.message_bound[0], on_drop=self._bridge_dropped,
                                    on_end=lambda: end.done() or end.set_result(None))
        self._attached = None
        self._bridge.start()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._bridge.hello.wait(), self.ready_timeout)
        return dict(self._bridge.connection)

    def _iopub_taken(self) -> Callable[[int], None] | None:
        """The api transport's bridge counts each IOPub message until the client read it."""
        return self._bridge.taken if self._bridge is not None else None

    def _unreachable_hint(self) -> str:
        if self._transport != "ipc":
            return ""
        return (" With transport=ipc the host reaches the kernel through sockets in a folder it shares with the "
                "container, which an engine in a VM or on another machine cannot share: use "
                "--DockerBackend.transport=api (or auto).")

    def _bridge_dropped(self, channel: str) -> None:
        if self._recovery is not None:
            self._recovery.on_drop(channel)

    async def start(self) -> None:
        if self.started:  # called before every cell
            return
        await super().start()
        if self._egress is not None:
            try:
                await self._egress.after_start()
            except BaseException:
                await self.shutdown()
                raise
        self._ready = True
        if self._watch is not None:
            self._watch.pids_file = engine.pids_file(self._watch.container.id)
        if self._hostdir is not None:  # ipc only
            seal_hostdir(self._hostdir)
        plan, self._plan = self._plan, None
        if plan is not None:  # a copy of the workspace, through the engine's archive API
            try:
                self.workspace_view = await _run_blocking(view.copy_in, self._container, plan, self, self.workdir,
                                                          *self._uid_gid())
            except BaseException:
                await self.shutdown()
                raise

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
        container, hostdir = self._container, self._hostdir
        volume = None if self.workdir_volume else self._volume  # a workspace outlives its sandboxes
        self._container = self._volume = self._hostdir = self.workspace_view = self._plan = None
        self._ready = False
        watch, self._watch = self._watch, None
        bridge, self._bridge = self._bridge, None
        egress, self._egress = self._egress, None
        if watch is not None:
            await watch.await_farewell()  # before the host directory (the kernel's ipc sockets) goes
        # The container goes first, running (as with ipc): closing the stream first would have it
        # stop by itself meanwhile, and Podman then ignored the removal of a container stopping.
        if self._docker is not None:
            await _run_blocking(self._orphans.remove, self._docker, container and container.id, volume)
            if egress is not None:  # after the sandbox, which mounts its volume
                await egress.stopped_starting()  # not while a thread still creates it
                await _run_blocking(egress.remove, self._orphans)
        if bridge is not None:  # if the engine could not remove it, the relay stops the kernel
            bridge.close()
        attached, self._attached = self._attached, None
        if attached is not None:
            with contextlib.suppress(Exception):
                attached.close()
        engine.remove_hostdir(hostdir)
        if self._pooled_name is not None:
            pool.release(self.name, self._pooled_name)
            self._pooled_name = None

    # -- running code ------------------------------------------------------------------------------
    async def execute(self, code: str, emit: Emit, *, timeout: float | None = None,
                      stdin: StdinHandler | None = None, **request: Any) -> Outcome:
        """:meth:`KernelClientBackend.execute` (``request``: ``silent``, ``store_history``,
        ``user_expressions``), after building a missing image, then freeing process slots."""
        if not self.started:  # the first cell builds a missing image and shows the progress
            await self._ensure_image(emit)
        outcome = None
        self._notes.begin(emit)
        try:
            outcome = await super().execute(code, emit, timeout=timeout, stdin=stdin, **request)
            if self._egress is not None:  # the cell's refusals, before the cell ends
                await self._egress.flush()
            return outcome
        finally:
            self._notes.end()
            if self._watch is not None and self._client is not None and not self.kernel_name:  # the reaper is Python
                await self._watch.free_process_slots(emit, outcome is None or outcome.status == "error",
                                                     self.run_silently)

    async def set_allow_hosts(self, hosts: list[str]) -> list[str]:
        self.check_lock(allow_hosts=list(hosts))
        try:
            self.allow_hosts = list(hosts)
        except TraitError as exc:
            raise EgressError(str(exc)) from None
        settings = egress_settings_of(self)
        entries = settings.entries if settings is not None else []
        if self._egress is not None:
            await self._egress.allow(entries)
        elif self.started:
            raise EgressError("This sandbox started without allow_hosts, so it has no egress proxy to change: the "
                              "new list applies when it restarts (which loses its state).")
        return entries

    async def _wait_dead(self) -> str:
        death = asyncio.ensure_future(self._watch.wait_dead(starting=lambda: not self._ready))
        if self._bridge is None:
            return await death
        bridge, end = self._bridge, self._bridge_end
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
        await _run_blocking(self._orphans.remove, self._docker, self._container and self._container.id, None)
        return reason

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
        await _run_blocking(engine.put_file, self._container, Path(local), self.workdir,
                            posixpath.relpath(target, self.workdir), *self._uid_gid())
        return target

    async def download(self, remote: str, local: str | Path, *, max_bytes: int = 0) -> Path:
        await self.start()
        return await _run_blocking(engine.get_file, self._container, self._sandbox_path(remote), Path(local), max_bytes)

    async def usage(self) -> dict[str, Any] | None:
        """The container's use as ``docker stats`` counts it, from the engine's one-shot stats
        (``GET /containers/{id}/stats``): memory less the inactive file cache, the percent of one
        CPU used since the previous call (its CPU time over the host's, times the online CPUs),
        and the CPUs it may use (``cpus``, else the host's)."""
        container = self._container
        if container is None:
            return None
        try:
            figures = await _run_blocking(stats, container)
        except SandboxError:  # gone meanwhile, or the engine is: no figure
            return None
        memory, cpu = memory_used(figures), figures.get("cpu_stats") or {}
        if memory is None:
            return None
        online = cpu.get("online_cpus") or len((cpu.get("cpu_usage") or {}).get("percpu_usage") or ()) or 1
        used, span = (cpu.get("cpu_usage") or {}).get("total_usage"), cpu.get("system_cpu_usage")
        percent = self._cpu.sample(used, span, online) if used is not None and span else None
        return {"memory_bytes": memory, "cpu_percent": percent, "cpu_count": self.cpus or online}

    def describe(self) -> dict[str, Any]:
        sizes = {"memory": self.memory_limit, "swap": self.swap, "workdir": self.workdir_size, "tmp": self.tmp_size}
        limits = {**{k: format_bytes(v) for k, v in sizes.items() if v}, "cpus": self.cpus, "pids": self.pids_limit}
        return {**super().describe(), "sandbox_id": self._container.short_id if self._container else None,
                "image": self._run_image or self.image, "kernel_name": self.kernel_name, "network": self.network,
                "transport": self._transport or self.transport,
                "allow_hosts": self._egress.entries if self._egress is not None else list(self.allow_hosts),
                "egress_proxy": self._egress.name if self._egress is not None else None,
                "host_secrets": [f"{secret.host} {secret.header}" for secret in map(parse_secret, self.host_secrets)],
                "workdir": self.workdir, "env": sorted(self.env) or None,
                "limits": {k: v for k, v in limits.items() if v}}
