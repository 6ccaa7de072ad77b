"""What of a host folder a sandbox's workspace shows: a walk that decides, entry by entry, what is
kept and what is left out, and why. Pure: reads the folder, changes nothing, follows no symlink.

Left out, at any depth: dotfiles and dot-folders (``.env``, ``.git``, ``.ssh``) unless the ignore
file re-includes them by name (``!.streamlit/``), whatever the ignore file names (gitignore
syntax, :data:`IGNORE_FILE` in the folder, read with PyPI ``pathspec``), symlinks that leave the
folder or lead nowhere, and special files (sockets, FIFOs, devices: a bound unix socket would let
the sandbox connect to a host service). A symlink that stays inside is kept as a link, unless it
leads to what is left out (``env -> .env``, ``s -> secret/s`` with ``secret/`` ignored) or to a
folder with something left out below it (a bound link is resolved on the host, and would show the
target whole): such links are left out too, after the walk.
"""

from __future__ import annotations

import os
import posixpath
import stat
from dataclasses import dataclass, field
from pathlib import Path

from ...core.errors import WorkspaceError

IGNORE_FILE = ".sandboxignore"
DEFAULT_IGNORED = (".*",)
"""Patterns that come before the ignore file's own: every dotfile and dot-folder."""
LINK_TO_LEFT_OUT = "link to a left-out entry"
"""Why a symlink inside the folder is left out when its target is (or is below) a left-out entry."""
LINK_TO_SPLIT = "link to a folder with entries left out"
"""Why a symlink inside the folder is left out when its target is a folder with something left out
below it (shown entry by entry, never whole: a link to it would show it whole)."""


@dataclass(frozen=True)
class Entry:
    """One kept entry: ``path`` relative (POSIX), ``kind`` "file" | "dir" | "link", ``size``
    (bytes, files), ``mode`` (permission bits), ``target`` (links: relative to the link's folder)."""

    path: str
    kind: str
    size: int = 0
    mode: int = 0o644
    target: str = ""


@dataclass(frozen=True)
class Plan:
    """The walk's result: ``root`` (absolute, resolved), ``entries`` (parents before children),
    ``left_out`` (``(path, reason)``: "dotfile", "ignored", "symlink outside", "special file",
    :data:`LINK_TO_LEFT_OUT`, :data:`LINK_TO_SPLIT`),
    ``expanded`` (folders with something left out below them: shown entry by entry, never whole)."""

    root: str
    entries: tuple[Entry, ...]
    left_out: tuple[tuple[str, str], ...]
    expanded: frozenset[str] = field(default_factory=frozenset)

    @property
    def size(self) -> int:
        """Bytes of the kept files."""
        return sum(e.size for e in self.entries if e.kind == "file")

    def shows(self, path: str) -> bool:
        """Whether the relative ``path`` is in what the workspace shows (kept, or below a kept
        folder; whether it exists is not looked at)."""
        path = posixpath.normpath(path)
        top = path.split("/")[0]
        return (not path.startswith("..") and self.reason(path) is None
                and any(e.path == top for e in self.entries))

    def reason(self, path: str) -> str | None:
        """Why ``path`` (relative) is not shown, if it or a parent was left out; else None."""
        for left, why in self.left_out:
            if path == left or path.startswith(left + "/"):
                return why
        return None


def _spec(root: Path):
    import pathspec

    lines = list(DEFAULT_IGNORED)
    ignore = root / IGNORE_FILE
    if ignore.is_file() and not ignore.is_symlink():
        lines += ignore.read_text(encoding="utf-8", errors="replace").splitlines()
    return pathspec.GitIgnoreSpec.from_lines(lines)


def _inside(root: str, link: str) -> str | None:
    """The target of the symlink ``link`` relative to the link's folder, when it resolves to an
    existing entry inside ``root``; else None."""
    resolved = os.path.realpath(link)
    if not os.path.exists(resolved) or os.path.commonpath([resolved, root]) != root or resolved == root:
        return None
    return os.path.relpath(resolved, os.path.dirname(link)).replace(os.sep, "/")


class _Walk:
    """One walk of ``root`` (see :func:`make_plan`): what it kept and left out so far."""

    def __init__(self, root: str, max_entries: int) -> None:
        self.root, self.max_entries, self.spec = root, max_entries, _spec(Path(root))
        self.entries: list[Entry] = []
        self.left_out: list[tuple[str, str]] = []
        self.expanded: set[str] = set()
        self.seen = 0

    def leave(self, path: str, why: str) -> None:
        self.left_out.append((path, why))
        parts = path.split("/")
        self.expanded.update("/".join(parts[:i]) for i in range(1, len(parts)))

    def folder(self, rel: str) -> None:
        with os.scandir(os.path.join(self.root, rel) if rel else self.root) as listing:
            children = sorted(listing, key=lambda e: e.name)
        for child in children:
            self.seen += 1
            if self.seen > self.max_entries:
                raise WorkspaceError(f"the workspace folder {self.root} holds more than {self.max_entries:,} entries: "
                                     f"leave big folders out in {IGNORE_FILE} (gitignore syntax)")
            self.entry(f"{rel}/{child.name}" if rel else child.name, child)

    def entry(self, path: str, child: os.DirEntry) -> None:
        info = child.stat(follow_symlinks=False)
        is_dir = stat.S_ISDIR(info.st_mode)
        if self.spec.match_file(path + "/" if is_dir else path):
            self.leave(path, "dotfile" if child.name.startswith(".") else "ignored")
        elif stat.S_ISLNK(info.st_mode):
            target = _inside(self.root, child.path)
            if target is None:
                self.leave(path, "symlink outside")
            else:
                self.entries.append(Entry(path, "link", target=target))
        elif is_dir:
            self.entries.append(Entry(path, "dir", mode=stat.S_IMODE(info.st_mode)))
            self.folder(path)
        elif stat.S_ISREG(info.st_mode):
            self.entries.append(Entry(path, "file", info.st_size, stat.S_IMODE(info.st_mode)))
        else:
            self.leave(path, "special file")

    def drop_links(self) -> None:
        """Leave out each kept link whose target is left out, or is a folder with something left
        out below it; one left out splits its own folders, so again until none is."""
        while True:
            left, kept = dict(self.left_out), {e.path for e in self.entries if e.kind != "link"}
            dropped = {}
            for entry in self.entries:
                if entry.kind == "link":
                    target = posixpath.normpath(posixpath.join(posixpath.dirname(entry.path), entry.target))
                    parts = target.split("/")
                    if any("/".join(parts[:i]) in left for i in range(1, len(parts) + 1)) or target not in kept:
                        dropped[entry.path] = LINK_TO_LEFT_OUT
                    elif target in self.expanded:
                        dropped[entry.path] = LINK_TO_SPLIT
            if not dropped:
                return
            self.entries = [e for e in self.entries if e.path not in dropped]
            for path, why in dropped.items():
                self.leave(path, why)


def make_plan(folder: str | os.PathLike, max_entries: int = 100_000) -> Plan:
    """Walk ``folder`` (see the module docstring).

    Raises:
        WorkspaceError: the folder is missing or not a folder, or holds more than
            ``max_entries`` entries (the message names the ignore file).
    """
    root = os.path.realpath(os.path.expanduser(str(folder)))
    if not os.path.isdir(root):
        raise WorkspaceError(f"the workspace folder {folder} does not exist or is not a folder")
    walk = _Walk(root, max_entries)
    walk.folder("")
    walk.drop_links()
    return Plan(root, tuple(walk.entries), tuple(walk.left_out), frozenset(walk.expanded))


def binds(plan: Plan, limit: int = 256) -> list[tuple[str, str]]:
    """What to mount read-only, one by one, so that nothing left out is shown: ``(path, how)``,
    ``how`` "bind" (the host's ``root/path``: a file, a folder, or a kept symlink, which the
    mount resolves on the host to its target inside the folder: a kept link's target is shown
    whole, see :meth:`_Walk.drop_links`) or "empty" (an empty read-only
    folder: an expanded folder none of whose entries is kept). Every kept top-level entry is
    taken whole, except expanded folders, whose kept entries are taken the same way.

    Raises:
        WorkspaceError: more than ``limit`` mounts would be needed.
    """
    chosen: list[tuple[str, str]] = []
    by_parent: dict[str, list[Entry]] = {}
    for entry in plan.entries:
        by_parent.setdefault(posixpath.dirname(entry.path), []).append(entry)

    def take(parent: str) -> None:
        for entry in by_parent.get(parent, []):
            if entry.path not in plan.expanded:
                chosen.append((entry.path, "bind"))
            elif by_parent.get(entry.path):
                take(entry.path)
            else:
                chosen.append((entry.path, "empty"))
    take("")
    if len(chosen) > limit:
        raise WorkspaceError(f"showing {plan.root} read-only takes {len(chosen)} mounts (what is left out splits the "
                             f"folders around it), over the limit of {limit}: leave more out in {IGNORE_FILE}, or "
                             "use workspace=rw")
    return chosen


def masks(plan: Plan) -> list[tuple[str, str]]:
    """For a read-write bind of the whole folder: ``(path, "dir" | "file")``, each left-out entry
    to cover with an empty read-only one (a left-out folder's own entries need none). Symlinks
    are not in it: a mount on a symlink follows it (inside a container they resolve inside it)."""
    covered = []
    for path, _ in plan.left_out:
        info = os.lstat(os.path.join(plan.root, path))
        if not stat.S_ISLNK(info.st_mode):
            covered.append((path, "dir" if stat.S_ISDIR(info.st_mode) else "file"))
    return covered
