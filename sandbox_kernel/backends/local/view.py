"""The ``local`` backend's workspace, bound with bubblewrap (Debian's ``bubblewrap``): the kernel
runs in a mount namespace of its own in which only its view of the folder differs from yours.

``local`` is not a security boundary (the kernel is your process and reads your files), but a
read-only view must still refuse writes, also from code that tries to undo it: as root the kernel
gets no capabilities (``--cap-drop ALL``; with them ``mount -o remount,rw`` undoes a read-only
bind, measured), and as any other user bubblewrap runs it in a user namespace where it has none.

- ``ro``: the working directory is ``SCRATCH/work`` (writable: what a cell writes there stays in
  the sandbox, an artifact); the folder's kept entries are bound read-only into it one by one
  (:func:`~sandbox_kernel.backends.workspace.binds`), and the folder's own path is read-only too.
- ``rw``: the working directory is the folder itself, read-write; each left-out entry is covered
  by an empty read-only one. Symlinks leaving the folder cannot be covered (a mount on a symlink
  follows it) and are followed, as anything of yours is reachable from a local kernel.

Without bubblewrap (macOS, or a Linux without it) the workspace is a copy instead.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from ...core.errors import WorkspaceError
from ..workspace import Plan, binds, masks

BWRAP = "bwrap"


def available() -> str | None:
    """The path of bubblewrap's ``bwrap``, or None."""
    return shutil.which(BWRAP)


def check_folder(plan: Plan) -> None:
    """The folder must not hold the kernel's scratch and socket directories (they would turn
    read-only with it).

    Raises:
        WorkspaceError: it holds the temporary directory.
    """
    temp = os.path.realpath(tempfile.gettempdir())
    if os.path.commonpath([temp, plan.root]) == plan.root:
        raise WorkspaceError(f"the workspace folder {plan.root} holds the sandbox's scratch directory ({temp}): "
                             "start the notebook in a folder below it, or set workspace_dir")


def argv(plan: Plan, mode: str, workdir: str, empty_file: str, bwrap: str) -> tuple[list[str], str]:
    """The bubblewrap command that runs the kernel's command (appended after it) with the view,
    and the kernel's working directory.

    Args:
        plan: the folder's plan. mode: "ro" or "rw".
        workdir: ``ro``: the scratch working directory the entries are bound into.
        empty_file: an empty file (``rw``: what covers a left-out file).
        bwrap: the ``bwrap`` executable.

    Raises:
        WorkspaceError: too many mounts (``ro``), or the folder holds the scratch directory.
    """
    check_folder(plan)
    command = [bwrap, "--bind", "/", "/", "--dev-bind", "/dev", "/dev"]
    if os.geteuid() == 0:
        command += ["--cap-drop", "ALL"]
    root = plan.root
    if mode == "ro":
        command += ["--ro-bind", root, root]
        for path, how in binds(plan):
            target = os.path.join(workdir, path)
            command += ["--ro-bind", os.path.join(root, path), target] if how == "bind" else \
                ["--tmpfs", target, "--remount-ro", target]
        cwd = workdir
    else:
        for path, kind in masks(plan):
            target = os.path.join(root, path)
            command += ["--tmpfs", target, "--remount-ro", target] if kind == "dir" else \
                ["--ro-bind", empty_file, target]
        cwd = root
    return [*command, "--chdir", cwd, "--"], cwd


def innermost(pid: int) -> int:
    """The last descendant of ``pid`` along its first children (bwrap → its child → the kernel,
    which the rlimits script, if any, became by exec): the kernel's pid, for its memory. Linux."""
    for _ in range(8):
        try:
            children = open(f"/proc/{pid}/task/{pid}/children").read().split()
        except OSError:
            break
        if not children:
            break
        pid = int(children[0])
    return pid


def death_code(code: int | None) -> int | None:
    """The kernel's exit status as ``subprocess`` gives it from bwrap's: bwrap exits with
    128 + N when its child was killed by signal N (measured: SIGXCPU → 152)."""
    if code is not None and code > 128:
        return -(code - 128)
    return code


__all__ = ["WorkspaceError", "argv", "available", "check_folder", "death_code", "innermost"]
