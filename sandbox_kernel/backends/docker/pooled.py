"""The docker backend's warm pool (see :mod:`sandbox_kernel.backends.pool`): the key of a session's
containers, how the filler makes one (:func:`launch`), their labels, and what removes them.

A pooled container has no owner label (its filler's process is gone long before a session
takes it), so the sweep of :func:`.engine.remove_leftovers` never sees it. It carries
``org.sandbox-kernel.pool`` (its key), ``org.sandbox-kernel.pool-host`` (this host's name:
on an engine shared by several hosts, each host has its own pool) and ``org.sandbox-kernel.pool-root``
(its registry's folder, :func:`~sandbox_kernel.backends.pool.pool_root`: two users of one engine, or
two registries of one user, each sweep only their own). Its name starts with
:data:`NAME_PREFIX`, its ipc host directory with ``/tmp/skd-pool-``. Which one is waiting and
which one a session took is in this host's registry (:class:`~sandbox_kernel.backends.pool.Registry`).
"""

from __future__ import annotations

import contextlib
import secrets
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

from ...core.errors import Refused
from .. import pool
from ..workspace import plan_of
from .boundary import engine_errors
from .engine import CREATED_LABEL, HOSTDIR_LABEL, LABEL, SESSION_LABEL, hostdir_root, owner_is_gone, remove_hostdir

POOL_LABEL = f"{LABEL}.pool"
POOL_HOST_LABEL = f"{LABEL}.pool-host"
POOL_ROOT_LABEL = f"{LABEL}.pool-root"
NAME_PREFIX = "sandbox-kernel-pool-"
HOSTDIR_PREFIX = "skd-pool-"
YOUNG_S = 120.0
"""Seconds after its creation during which a pooled container or volume the registry does not
list yet is left alone by the sweep (its filler is still starting it)."""


def labels(key: str, hostdir: Any) -> dict[str, str]:
    """The labels of a pooled container and its volume (``hostdir``: the ipc transport's)."""
    made = {POOL_LABEL: key, POOL_HOST_LABEL: socket.gethostname(), POOL_ROOT_LABEL: str(pool.pool_root()),
            SESSION_LABEL: "pool", CREATED_LABEL: str(int(time.time()))}
    return {**made, HOSTDIR_LABEL: str(hostdir)} if hostdir is not None else made


def _ours(info_labels: dict[str, str]) -> bool:
    """Made for this host's registry (one made before the root label was: for this host's)."""
    root = info_labels.get(POOL_ROOT_LABEL)
    return info_labels.get(POOL_HOST_LABEL) == socket.gethostname() and root in (None, str(pool.pool_root()))


def _young(info_labels: dict[str, str]) -> bool:
    created = info_labels.get(CREATED_LABEL, "0")
    return created.isdigit() and time.time() - int(created) < YOUNG_S


def sweep(client: Any, *, waiting_too: bool = False, dry_run: bool = False) -> list[str]:
    """Remove this host's pooled containers (and their volumes and host directories) that no
    session can use: stopped ones, those whose session's process is gone, and those the
    registry lost. ``waiting_too`` (``gc``, ``pool stop``) also removes those waiting to be
    taken. Claimed ones of live sessions are never touched. Blocking.

    Returns:
        The names of the removed containers and volumes (with ``dry_run``: of those that
        would be, each waiting one marked ``(pooled, waiting)``).
    """
    waiting = {record["name"]: registry for registry, record in pool.waiting_records("docker")}
    claimed = {record["name"]: record for record in pool.claimed_records("docker")}
    removed: list[str] = []
    with engine_errors("list pooled sandbox containers"):
        containers = client.api.containers(all=True, filters={"label": POOL_LABEL})
    names = set()
    for info in containers:
        info_labels = info.get("Labels") or {}
        name = info["Names"][0].lstrip("/")
        names.add(name)
        if not _ours(info_labels):
            continue
        record = claimed.get(name)
        if record is not None:  # a session's: left to it while it runs
            if not owner_is_gone(record.get("claimed_by", "")):
                continue
        elif name in waiting:
            if not waiting_too and info.get("State") == "running":
                continue
        elif _young(info_labels):  # its filler has not offered it yet
            continue
        if dry_run:
            removed.append(name + (" (pooled, waiting)" if name in waiting else " (pooled)"))
            continue
        if name in waiting and not waiting[name].withdraw(name):
            continue  # a session took it meanwhile
        with contextlib.suppress(Refused), engine_errors("remove a pooled container"):
            client.api.remove_container(info["Id"], force=True)
            removed.append(name)
        remove_hostdir(info_labels.get(HOSTDIR_LABEL))
        pool.release("docker", name)
    for name, registry in waiting.items():  # records of containers that are gone
        if name not in names and not dry_run:
            registry.withdraw(name)
    for name, record in claimed.items():
        if name not in names and owner_is_gone(record.get("claimed_by", "")) and not dry_run:
            pool.release("docker", name)
    with engine_errors("list pooled sandbox volumes"):
        volumes = client.api.volumes(filters={"label": POOL_LABEL}).get("Volumes") or []
    for volume in volumes:
        volume_labels = volume.get("Labels") or {}
        if not _ours(volume_labels) or _young(volume_labels) or dry_run:
            continue
        with contextlib.suppress(Refused), engine_errors("remove a pooled volume"):  # in use: kept
            client.api.remove_volume(volume["Name"])
            removed.append(volume["Name"])
    return removed


def status(client: Any) -> list[dict[str, Any]]:
    """This host's waiting pooled containers: name, key, transport, seconds waited, and the
    memory each holds (bytes, as ``docker stats`` counts it; None if unknown). Blocking."""
    from .boundary import memory_used, stats

    rows = []
    for _registry, record in pool.waiting_records("docker"):
        memory = None
        with contextlib.suppress(Exception):
            with engine_errors("read a pooled container's memory"):
                container = client.containers.get(record["id"])
            memory = memory_used(stats(container))
        rows.append({"name": record["name"], "key": record.get("key", ""), "transport": record.get("transport", ""),
                     "waited_s": time.time() - record.get("offered", time.time()), "memory_bytes": memory})
    return rows


def _engine(asked: bool) -> Any:
    """A client of the engine, or None when it cannot be reached and docker was not asked for
    by name (then its pool is simply not listed)."""
    from ...core.errors import BackendUnavailable
    from .engine import connect

    try:
        return connect()
    except BackendUnavailable:
        if asked:
            raise
        return None


def pool_status(asked: bool = False) -> list[dict[str, Any]]:
    """``sandbox-kernel pool status``: :func:`status` of the engine, or nothing when none is
    waiting here (the engine is then not even asked). Raises BackendUnavailable when ``asked``
    by name and the engine cannot be reached."""
    if not asked and not pool.waiting_records("docker"):
        return []
    client = _engine(asked)
    if client is None:
        return []
    try:
        return status(client)
    finally:
        client.close()


def pool_stop(asked: bool = False) -> list[str]:
    """``sandbox-kernel pool stop``: remove this host's waiting pooled containers (and the
    unusable ones :func:`sweep` removes); returns their names."""
    client = _engine(asked)
    if client is None:
        return []
    try:
        return sweep(client, waiting_too=True)
    finally:
        client.close()


# -- made by the filler, taken by a session (the hooks of :mod:`sandbox_kernel.backends.pool`) -----
async def key_of(options: Any, link: Any) -> str | None:
    """Everything that shapes a session's container: its whole specification (the per-sandbox
    names aside), the image's id, the transport and the code the container runs (launcher,
    relay); None for a session that is not pooled (another language, or a proxy)."""
    from ..checkpoint.keeper import SOURCE as KEEPER_SOURCE
    from .boundary import image_identity
    from .inside import SOURCE as RELAY_SOURCE
    from .prepare import use_image
    from .spec import LAUNCHER, container_spec, runs_keeper, uid_gid
    from .watch import run_blocking

    if options.kernel_name or options.allow_hosts or options.host_secrets:
        return None
    client = await link.connect(options)
    if not link.run_image:  # the filler: nothing prepared yet
        await link.ensure_image(options, None)
    await link.choose_transport(options.transport)
    plan = None if link.relayed else await run_blocking(plan_of, options)
    spec = container_spec(options, "NAME", None if link.relayed else Path("/HOSTDIR"),
                          options.workdir_volume or "VOLUME", {}, engine_here=link.here, plan=plan)
    spec = use_image(spec, link.run_image, link.kernelspec, relayed=link.relayed)
    image_id = await run_blocking(image_identity, client, link.run_image)
    return pool.key_of({"spec": spec, "image_id": image_id, "transport": link.transport, "uid": uid_gid(options.user),
                        "launcher": LAUNCHER, "relay": RELAY_SOURCE, "ttl": options.pool_ttl,
                        "keeper": KEEPER_SOURCE if runs_keeper(options) else None,
                        "workspace_copy": options.workspace if link.relayed else "off"})  # its volume's owner


async def launch(options: Any, link: Any, orphans: Any) -> tuple[str, dict[str, Any]]:
    """A container that waits, its kernel started, for a session to attach; returns its name and
    record. Blocking parts run in threads."""
    from ...runtime import lock
    from ..checkpoint.keeper import SOURCE as KEEPER_SOURCE
    from ..kernel_client.launcher import READY_VARIABLE
    from . import quota
    from .container import SandboxContainer
    from .inside import KERNEL_DIR as INSIDE_DIR
    from .inside import pooled_environment
    from .prepare import use_image
    from .spec import LAUNCHER, POOL_TTL_VARIABLE, container_spec, launcher_argv, prepare_hostdir, runs_keeper, uid_gid
    from .watch import run_blocking

    client = await link.connect(options)
    key = await key_of(options, link)
    await run_blocking(quota.check, client, options.memory_limit, lock.load())
    hostdir = None if link.relayed else Path(tempfile.mkdtemp(prefix=HOSTDIR_PREFIX, dir=hostdir_root()))
    name = f"{NAME_PREFIX}{secrets.token_hex(6)}"
    volume = options.workdir_volume or f"{name}-work"
    made = {**labels(key, hostdir), **quota.labels(options.memory_limit)}
    record: dict[str, Any] = {"key": key, "transport": link.transport, "hostdir": str(hostdir or ""),
                              "volume": volume, "created": int(time.time())}
    box = SandboxContainer(options, link, orphans, volume=volume, hostdir=hostdir)
    try:
        info = {} if link.relayed else prepare_hostdir(hostdir, uid_gid(options.user)[0])
        plan = None if link.relayed else await run_blocking(plan_of, options)
        spec = container_spec(options, name, hostdir, volume, made, engine_here=link.here, plan=plan)
        spec = use_image(spec, link.run_image, link.kernelspec, relayed=link.relayed)
        if link.relayed:
            secret = secrets.token_hex(32)
            spec["environment"] = {**spec["environment"], **pooled_environment(
                {"key": secret, "argv": launcher_argv(INSIDE_DIR, "{connection_file}", options.history_file,
                                                      keeper=runs_keeper(options)),
                 "launcher": LAUNCHER, "keeper": KEEPER_SOURCE if runs_keeper(options) else None,
                 "ttl": options.pool_ttl})}
            record["connection_key"] = secret
        else:
            spec["environment"] = {**spec["environment"], POOL_TTL_VARIABLE: str(options.pool_ttl)}
            record["info"] = info
        spec["environment"] = {**spec["environment"], READY_VARIABLE: "1"}
        await run_blocking(box.create, spec, made, False)
        record["id"] = box.container.id
        await box.pooled_ready()
    except BaseException:  # a created one is removed, running or not
        await run_blocking(orphans.remove, client, record.get("id"), None if options.workdir_volume else volume)
        remove_hostdir(hostdir)
        raise
    return name, record
