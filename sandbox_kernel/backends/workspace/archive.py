"""A workspace plan as a tar archive: what a copy sends into a sandbox."""

from __future__ import annotations

import contextlib
import os
import stat
import tarfile
import time
from collections.abc import Iterator
from typing import BinaryIO

from ...core.errors import WorkspaceError
from ...runtime.traits import format_bytes
from .plan import Entry, Plan


def check_size(plan: Plan, max_bytes: int, setting: str) -> None:
    """Raise :class:`WorkspaceError` (size, limit, ``setting``) when ``plan`` holds more than
    ``max_bytes`` to copy (0: no bound)."""
    if max_bytes and plan.size > max_bytes:
        raise WorkspaceError(f"the workspace folder {plan.root} holds {format_bytes(plan.size)} to copy, over the "
                             f"limit of {format_bytes(max_bytes)} ({setting}): leave big files out in "
                             f".sandboxignore, or raise {setting}")


def _file_mode(entry: Entry, read_only: bool) -> int:
    return (entry.mode | 0o444) & ~(0o222 if read_only else 0)


def _dir_mode(entry: Entry, read_only: bool) -> int:
    return (entry.mode | 0o755) & ~(0o222 if read_only else 0)


@contextlib.contextmanager
def _opened(plan: Plan, entry: Entry) -> Iterator[_Exact | None]:
    """The kept file's bytes as the walk saw its size (None: it is no longer a regular file
    there, e.g. swapped for a symlink since the walk: never followed)."""
    try:
        fd = os.open(os.path.join(plan.root, entry.path), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        yield None
        return
    with os.fdopen(fd, "rb") as source:
        now = os.fstat(fd)
        yield _Exact(source, min(now.st_size, entry.size)) if stat.S_ISREG(now.st_mode) else None


def write_tar(plan: Plan, out: BinaryIO, *, read_only: bool, uid: int = 0, gid: int = 0,
              max_bytes: int = 0, setting: str = "workspace_max_bytes") -> int:
    """Write ``plan``'s entries to ``out`` as an uncompressed tar (paths relative to the folder);
    returns the bytes of file content written. Files keep their execute bits; ``read_only``
    takes every write bit away. Files are opened without following symlinks, and one that
    changed into something else since the walk is skipped.

    Raises:
        WorkspaceError: the kept files total more than ``max_bytes`` (0: no bound), naming the
            size, the limit and ``setting``.
    """
    check_size(plan, max_bytes, setting)
    now, written = int(time.time()), 0
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for entry in plan.entries:
            info = tarfile.TarInfo(entry.path)
            info.uid, info.gid, info.mtime = uid, gid, now
            if entry.kind == "dir":
                info.type, info.mode = tarfile.DIRTYPE, _dir_mode(entry, read_only)
                tar.addfile(info)
            elif entry.kind == "link":
                info.type, info.linkname, info.mode = tarfile.SYMTYPE, entry.target, 0o777
                tar.addfile(info)
            else:
                with _opened(plan, entry) as data:
                    if data is not None:
                        info.size, info.mode = data.left, _file_mode(entry, read_only)
                        written += data.left
                        tar.addfile(info, data)
    return written


class _Exact:
    """``size`` bytes of ``source``, zero-padded if it shrank meanwhile (tar needs the size given)."""

    def __init__(self, source: BinaryIO, size: int) -> None:
        self.source, self.left = source, size

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        data = self.source.read(n)
        data += b"\0" * (n - len(data))
        self.left -= n
        return data


def copy_tree(plan: Plan, target: str, *, read_only: bool, max_bytes: int = 0,
              setting: str = "workspace_max_bytes") -> int:
    """Copy ``plan``'s entries into the existing folder ``target`` on this machine (the local
    backend without bubblewrap), as :func:`write_tar` would archive them; returns the bytes copied.

    Raises:
        WorkspaceError: over ``max_bytes``, naming the size, the limit and ``setting``.
    """
    check_size(plan, max_bytes, setting)
    written, folders = 0, []
    for entry in plan.entries:
        path = os.path.join(target, entry.path)
        if entry.kind == "dir":
            os.mkdir(path, 0o700)
            folders.append((path, _dir_mode(entry, read_only)))
        elif entry.kind == "link":
            os.symlink(entry.target, path)
        else:
            with _opened(plan, entry) as data, open(path, "wb") as sink:
                while data is not None and (chunk := data.read(1024 * 1024)):
                    sink.write(chunk)
                    written += len(chunk)
            os.chmod(path, _file_mode(entry, read_only))
    for path, mode in reversed(folders):  # children first: a read-only folder takes no new entries
        os.chmod(path, mode)
    return written
