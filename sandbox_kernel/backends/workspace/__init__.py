"""The workspace: a host folder (the notebook's) shown as a sandbox's working directory.

Every backend has the options (:class:`~sandbox_kernel.backends.base.Backend`'s ``workspace``,
``workspace_dir``, ``workspace_max_bytes``); what the folder shows is decided once by
:func:`.plan.make_plan`, and a backend honours it in one of two ways:

- bound (``local`` with bubblewrap, ``docker`` on the ``ipc`` transport): the host's files
  themselves, mounted read-only entry by entry (``ro``) or as a whole, read-write, with what is
  left out covered (``rw``) — see ``local/view.py`` and ``docker/view.py``;
- copied (``docker`` on the ``api`` transport, ``e2b``, ``gateway``, ``local`` without
  bubblewrap): an archive of the kept files (:func:`.archive.write_tar`, bounded by
  ``workspace_max_bytes``) sent once per sandbox at its start: :func:`copy_in`.

A copy never changes the host; what a cell writes into it comes back only as artifacts.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from typing import Any

from ...core.errors import SandboxError, WorkspaceError
from ...runtime.traits import format_bytes
from .archive import check_size, copy_tree, write_tar
from .inside import unpack
from .plan import IGNORE_FILE, Plan, binds, make_plan, masks

MODES = ("off", "ro", "rw")


@dataclass(frozen=True)
class View:
    """What a started sandbox's working directory shows of the host, for the cell's one line and
    ``%sandbox status``: ``folder`` (host path), ``mode`` ("ro"/"rw"), ``how`` ("bound"/"copied"),
    ``files`` and ``size`` (bytes) kept, ``left_out`` (how many entries were left out)."""

    folder: str
    mode: str
    how: str
    files: int
    size: int
    left_out: int
    plan: Plan | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, plan: Plan, mode: str, how: str) -> View:
        files = sum(1 for e in plan.entries if e.kind == "file")
        return cls(plan.root, mode, how, files, plan.size, len(plan.left_out), plan)

    def reason(self, path: str) -> str | None:
        """Why the relative ``path`` of the folder is not in the workspace, if it was left out."""
        return self.plan.reason(path) if self.plan is not None else None

    def refuse_upload(self, path: str, *, in_folder: bool = False) -> None:
        """Refuse an upload to ``path`` (relative to the working directory, or to the folder when
        ``in_folder``: named by its own path) that a read-only workspace shows: it would change the
        folder's file (bound: yours) where a cell cannot, as docker's read-only binds refuse it.

        Raises:
            WorkspaceError: it does, with what to do instead.
        """
        if self.mode == "ro" and (in_folder or (self.plan is not None and self.plan.shows(path))):
            raise WorkspaceError(f"{path} is in the read-only workspace ({self.folder}): its files cannot be changed "
                                 "from the sandbox, also not by an upload. Upload it under another name (it stays in "
                                 "the sandbox), or use workspace=rw")

    def note(self) -> str:
        """``[the sandbox's working directory shows /home/u/proj: read-only, bound; 3 entries left
        out (dotfiles, .sandboxignore, links leaving it or to what is left out)]``."""
        access = "read-only" if self.mode == "ro" else "read-write"
        how = "bound" if self.how == "bound" else f"a copy of {self.files} files ({format_bytes(self.size)})"
        writes = {("ro", "bound"): "new files stay in the sandbox",
                  ("rw", "bound"): "what it writes changes your folder",
                  }.get((self.mode, self.how), "what it writes stays in the sandbox")
        left = (f"; {self.left_out} entr{'y' if self.left_out == 1 else 'ies'} left out (dotfiles, {IGNORE_FILE}, "
                "links leaving it or to what is left out)") if self.left_out else ""
        return f"[the sandbox's working directory shows {self.folder}: {access}, {how}; {writes}{left}]\n"


def plan_of(backend: Any) -> Plan | None:
    """The plan of ``backend``'s workspace options, None when ``workspace`` is off.

    Raises:
        WorkspaceError: the folder is missing, is ``/``, holds too many entries.
    """
    if backend.workspace == "off":
        return None
    folder = os.path.realpath(os.path.expanduser(backend.workspace_dir or os.getcwd()))
    if folder == os.path.sep:
        raise WorkspaceError("the workspace cannot be the whole file system (/): start the notebook in its own "
                             "folder, or set workspace_dir")
    return make_plan(folder)


def archive(plan: Plan, backend: Any, *, uid: int = 0, gid: int = 0) -> str:
    """A temporary tar file of ``plan`` (the caller removes it); bounded by ``workspace_max_bytes``.

    Raises:
        WorkspaceError: over the bound, naming the size, the limit and the option.
    """
    setting = f"{type(backend).__name__}.workspace_max_bytes"
    fd, path = tempfile.mkstemp(prefix="sandbox-workspace-", suffix=".tar")
    try:
        with os.fdopen(fd, "wb") as out:
            write_tar(plan, out, read_only=backend.workspace == "ro", uid=uid, gid=gid,
                      max_bytes=backend.workspace_max_bytes, setting=setting)
    except BaseException:
        os.unlink(path)
        raise
    return path


async def copy_in(backend: Any, plan: Plan, *, fresh: bool) -> View:
    """Copy ``plan`` into the started sandbox through the backend's files (``upload``) and a
    snippet that unpacks it (:mod:`.inside`, run silently): into the kernel's working directory,
    or into a new folder that becomes it (``fresh``: a gateway kernel's working directory may be
    shared).

    Raises:
        WorkspaceError: over ``workspace_max_bytes``. SandboxError: the copy failed.
    """
    local = archive(plan, backend)
    try:
        remote = await backend.upload(local, f".sandbox-workspace-{os.getpid()}.tar")
    finally:
        os.unlink(local)
    reply = await backend.run_silently(unpack(remote, fresh))  # no count, no history: the user's cells are theirs
    if reply.get("status") != "ok":
        raise SandboxError(f"Could not copy the workspace {plan.root} into the sandbox ({reply.get('ename', 'Error')}: "
                           f"{reply.get('evalue', 'no answer')}).")
    return View.of(plan, backend.workspace, "copied")


__all__ = ["IGNORE_FILE", "MODES", "Plan", "View", "WorkspaceError", "archive", "binds", "check_size", "copy_in", "copy_tree",
           "make_plan", "masks", "plan_of"]
