"""The docker backend's workspace: the folder bound into the container (``ipc`` transport: the
engine shares this host's files), or copied in through the engine's archive API (``api``
transport: Docker Desktop, Podman machines, remote engines, where a host path means nothing to the
engine). Pure functions; the copy's engine call is :func:`.engine.put_tree`.

- bound ``ro``: the working directory stays the sandbox's own volume (what a cell writes there is
  an artifact); each kept entry is a read-only bind (non-recursive, as ``mounts`` are) at its place
  in it, made by the engine (folders it makes for them are root's: nothing new can be put there).
- bound ``rw``: the folder itself is the working directory, read-write; each left-out entry is
  covered by an empty read-only one (a tmpfs for a folder, :data:`EMPTY` for a file). Symlinks
  resolve inside the container, never to the host's files.
- copied: the kept files in an archive, unpacked by the engine into the working directory at
  start; ``ro``: owned by root and without write bits, in a working directory that is root's and
  sticky (mode 1777), so the kernel can add files but change or remove none of the copy's
  (measured: EACCES).
"""

from __future__ import annotations

import os
import posixpath
from typing import Any

from ...core.errors import MountError, WorkspaceError
from .. import workspace
from ..workspace import Plan, binds, masks
from .mounts import BindMount, check_access

EMPTY = "empty"
"""The empty read-only file in the session's host directory that covers a left-out file."""


def _tmpfs(target: str) -> dict[str, Any]:
    return {"Type": "tmpfs", "Target": target, "ReadOnly": True}


def _bind(source: str, target: str, read_only: bool) -> dict[str, Any]:
    mount: dict[str, Any] = {"Type": "bind", "Source": source, "Target": target, "ReadOnly": read_only}
    if read_only:
        mount["BindOptions"] = {"NonRecursive": True}
    return mount


def bound(plan: Plan, mode: str, workdir: str, empty_file: str) -> list[dict[str, Any]]:
    """The engine's ``HostConfig.Mounts`` entries that show ``plan`` at ``workdir`` (for ``rw``
    they replace the working directory's volume).

    Raises:
        WorkspaceError: too many mounts for ``ro``.
    """
    if mode == "ro":
        return [_bind(posixpath.join(plan.root, path), posixpath.join(workdir, path), True) if how == "bind"
                else _tmpfs(posixpath.join(workdir, path)) for path, how in binds(plan)]
    covers = [_tmpfs(posixpath.join(workdir, path)) if kind == "dir" else
              _bind(empty_file, posixpath.join(workdir, path), True) for path, kind in masks(plan)]
    return [_bind(plan.root, workdir, False), *covers]


def workdir_mounts(plan: Plan | None, mode: str, workdir: str, volume: Any, hostdir: Any) -> list[Any]:
    """The mounts at and below the working directory: its volume (``volume``, a docker-py
    ``Mount``) and, for a workspace bound on the ``ipc`` transport (``hostdir`` given), the
    folder's: ``rw`` replaces the volume by the folder itself."""
    if plan is None or hostdir is None:
        return [volume]
    mounts = bound(plan, mode, workdir, posixpath.join(str(hostdir), EMPTY))
    return mounts if mode == "rw" else [volume, *mounts]


def check_readable(plan: Plan, mode: str, uid: int, gid: int) -> None:
    """The kernel's ``uid:gid`` must be able to read the bound folder (and write it, ``rw``).

    Raises:
        WorkspaceError: it cannot, with the fix.
    """
    try:
        check_access([BindMount(plan.root, "/", read_only=mode == "ro")], uid, gid)
    except MountError as exc:
        raise WorkspaceError(str(exc).replace(f"mount {plan.root}:/:{mode}", f"the workspace {plan.root} ({mode})")) \
            from None


def prepare(backend: Any, bound: bool, uid: int, gid: int) -> tuple[Plan | None, Any]:
    """The workspace's plan for a start (None: off), checked before any container is made: a
    bound folder the kernel's uid can use, or a copy within ``workspace_max_bytes``; and its
    :class:`~sandbox_kernel.backends.workspace.View` when bound (a copy's comes with the copy).

    Raises:
        WorkspaceError: what stops it, with the fix.
    """
    plan = workspace.plan_of(backend)
    if plan is None:
        return None, None
    if bound:
        check_readable(plan, backend.workspace, uid, gid)
        if backend.workspace == "ro":
            binds(plan)  # raises when past the bound on mounts
        return plan, workspace.View.of(plan, backend.workspace, "bound")
    workspace.check_size(plan, backend.workspace_max_bytes, f"{type(backend).__name__}.workspace_max_bytes")
    return plan, None


def copy_in(container: Any, plan: Plan, backend: Any, workdir: str, uid: int, gid: int) -> Any:
    """Copy ``plan`` into the running container's working directory through the engine's archive
    API (read-only: root's, without write bits); returns its View. Blocking.

    Raises:
        WorkspaceError: over ``workspace_max_bytes``. SandboxError: the engine refused.
    """
    from .engine import put_tree

    read_only = backend.workspace == "ro"
    path = workspace.archive(plan, backend, uid=0 if read_only else uid, gid=0 if read_only else gid)
    try:
        put_tree(container, path, workdir)
    finally:
        os.unlink(path)
    return workspace.View.of(plan, backend.workspace, "copied")
