"""What the docker backend gives a container of the host: bind mounts (``mounts``) and GPUs
(``gpus``), checked before anything reaches the engine. Pure functions: no engine calls.

A mount is ``HOST:CONTAINER[:ro|rw]``, read-only unless ``:rw``. ``HOST`` is an existing
absolute path after ``~`` expansion; ``CONTAINER`` an absolute path inside the sandbox's home
(``/home/sandbox``), not the working directory itself (inside it is fine). A read-only mount is made
non-recursive (``BindOptions.NonRecursive``): on engines before 25.0 a read-only bind leaves
the file systems mounted below ``HOST`` writable, so they are left out instead.
"""

from __future__ import annotations

import os
import posixpath
import stat
from dataclasses import dataclass
from typing import Any

from ...core.errors import MountError

SANDBOX_HOME = "/home/sandbox"
"""The sandbox user's home in the image; mounts go below it."""
ENGINE_SOCKETS = ("/var/run/docker.sock", "/run/docker.sock")


@dataclass(frozen=True)
class BindMount:
    """One checked ``mounts`` entry: ``source`` on the host (absolute, resolved), ``target`` in
    the container, ``read_only``."""

    source: str
    target: str
    read_only: bool

    def to_docker(self) -> dict[str, Any]:
        """The engine's ``HostConfig.Mounts`` entry (docker-py's ``Mount`` is this dict)."""
        mount: dict[str, Any] = {"Type": "bind", "Source": self.source, "Target": self.target,
                                 "ReadOnly": self.read_only}
        if self.read_only:
            mount["BindOptions"] = {"NonRecursive": True}
        return mount


def parse_mount(entry: str, *, workdir: str = "", kernel_dir: str = "/kernel", here: bool = True) -> BindMount:
    """``"~/data:/home/sandbox/data"`` → a :class:`BindMount` (read-only unless ``:rw``).

    Args:
        entry: ``HOST:CONTAINER[:ro|rw]``.
        workdir: the kernel's working directory (a mount may go inside it, not replace it).
        kernel_dir: where the kernel's connection and sockets are (nothing may go there).
        here: the engine runs on this machine, so the host path is checked here (exists; not
            the engine's socket); else it names a path on the engine's host, checked there.

    Raises:
        MountError: a malformed entry, a relative or missing host path, the engine's socket,
            or a container path outside the sandbox's home or over the root, ``/kernel`` or the
            working directory.
    """
    parts = entry.split(":")
    mode = "ro"
    if len(parts) == 3:
        *parts, mode = parts
    if len(parts) != 2 or mode not in ("ro", "rw") or not all(parts):
        raise MountError(f"mount {entry!r} is not HOST:CONTAINER[:ro|rw]")
    host, target = os.path.expanduser(parts[0]), parts[1]
    if not os.path.isabs(host):
        raise MountError(f"mount {entry!r}: the host path must be absolute (or start with ~), not {parts[0]!r}")
    if here and not os.path.exists(host):
        raise MountError(f"mount {entry!r}: {host} does not exist on the host")
    source = os.path.realpath(host) if here else posixpath.normpath(host)
    sockets = [*ENGINE_SOCKETS, os.environ.get("DOCKER_HOST", "").removeprefix("unix://")]
    if any(os.path.realpath(sock) == source or os.path.realpath(sock).startswith(source.rstrip("/") + "/")
           for sock in sockets if sock.startswith("/") and (os.path.exists(sock) or not here)):
        raise MountError(f"mount {entry!r}: {source} holds the Docker engine's socket, which never enters a sandbox")
    if not posixpath.isabs(target):
        raise MountError(f"mount {entry!r}: the container path must be absolute, e.g. {SANDBOX_HOME}/data")
    target = posixpath.normpath(target)
    if target == "/" or posixpath.commonpath([target, kernel_dir]) == kernel_dir or target == workdir:
        what = {"/": "the root", workdir: "the working directory"}.get(target, kernel_dir)
        raise MountError(f"mount {entry!r}: a mount over {what} is not allowed (the sandbox needs it)")
    if posixpath.commonpath([target, SANDBOX_HOME]) != SANDBOX_HOME or target == SANDBOX_HOME:
        raise MountError(f"mount {entry!r}: the container path must be inside the sandbox's home, "
                         f"e.g. {SANDBOX_HOME}/{posixpath.basename(target) or 'data'}")
    return BindMount(source, target, read_only=mode == "ro")


def parse_mounts(entries: list[str], *, workdir: str = "", kernel_dir: str = "/kernel",
                 here: bool = True) -> list[BindMount]:
    """Every entry checked (see :func:`parse_mount`), and no two at the same container path.

    Raises:
        MountError: the first bad entry.
    """
    mounts = [parse_mount(entry, workdir=workdir, kernel_dir=kernel_dir, here=here) for entry in entries]
    targets = [m.target for m in mounts]
    if dupes := sorted({t for t in targets if targets.count(t) > 1}):
        raise MountError(f"two mounts at {dupes[0]}")
    return mounts


def allowed(path: str, uid: int, gid: int, write: bool) -> bool:
    """Whether ``uid:gid`` may read (and list, for a directory), or also write, ``path`` by its
    mode bits (uid 0 always may). A path with a POSIX ACL counts as allowed: the kernel decides."""
    if uid == 0:
        return True
    try:
        if "system.posix_acl_access" in os.listxattr(path):
            return True
    except OSError:
        pass
    info = os.stat(path)
    need = 4 | (2 if write else 0) | (1 if stat.S_ISDIR(info.st_mode) else 0)  # r, w, x
    shift = 6 if info.st_uid == uid else 3 if info.st_gid == gid else 0
    return (info.st_mode >> shift) & need == need


def check_access(mounts: list[BindMount], uid: int, gid: int) -> None:
    """The kernel's ``uid:gid`` must be able to read every mount and write every ``rw`` one.

    Raises:
        MountError: it cannot, with the ways to fix it.
    """
    for mount in mounts:
        if not allowed(mount.source, uid, gid, write=not mount.read_only):
            info = os.stat(mount.source)
            verb, fix = ("read", f"chmod o+rX {mount.source}") if mount.read_only else \
                ("write", f"chown {uid}:{gid} {mount.source}")
            raise MountError(f"mount {mount.source}:{mount.target}:{'ro' if mount.read_only else 'rw'}: the sandbox "
                             f"runs as {uid}:{gid}, which cannot {verb} {mount.source} (owner {info.st_uid}:"
                             f"{info.st_gid}, mode {stat.S_IMODE(info.st_mode):o}). Fix: `{fix}`, or "
                             "--DockerBackend.user=UID:GID of a user who may")


def parse_gpus(value: str) -> int | None:
    """``gpus`` → the ``Count`` of the engine's GPU device request (``docker run --gpus``):
    ``"all"`` → -1 (every GPU), ``"2"`` → 2, ``""`` → None (no GPU).

    Raises:
        ValueError: anything else.
    """
    value = value.strip().lower()
    if not value:
        return None
    if value != "all" and not (value.isdigit() and int(value) > 0):
        raise ValueError(f"gpus must be 'all' or a number of GPUs, not {value!r}")
    return -1 if value == "all" else int(value)


__all__ = ["BindMount", "MountError", "SANDBOX_HOME", "check_access", "parse_gpus", "parse_mount",
           "parse_mounts", "allowed"]
