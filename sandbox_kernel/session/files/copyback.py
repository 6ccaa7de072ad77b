"""Copying a session's artifacts into the host's folder (``%sandbox download --artifacts``,
``Sandbox.download_artifacts``): only inside the folder, never a dotfile, never through a
symlink, never over a file there unless asked, at most ``max_files`` files and ``max_bytes``
bytes, each download bounded as it is read (a file written to a temporary name beside its
place, renamed when whole)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from ...core.errors import FileTooLarge
from ...runtime.traits import format_bytes
from .artifacts import Ledger

Download = Callable[[str, Path, int], Awaitable[Path]]
"""``await download(remote, local, max_bytes)``: the session's bounded download."""


@dataclass
class Copied:
    """What one copy did: ``copied`` (host paths), ``kept`` (the host's file was left: no
    overwrite), ``refused`` (dotfiles, symlinks, over the size bound), ``missing`` (gone from the
    sandbox), ``left`` (past the bounds), ``untracked`` (written but never listed), ``bytes``."""

    folder: Path
    copied: list[Path] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    left: int = 0
    untracked: int = 0
    bytes: int = 0

    def lines(self) -> list[str]:
        """The report, one line per kind, names cut short."""
        def names(items: list, most: int = 5) -> str:
            return ", ".join(str(i) for i in items[:most]) + (", ..." if len(items) > most else "")

        count = len(self.copied)
        lines = [f"Copied {count:,} file{'s' if count != 1 else ''} ({format_bytes(self.bytes)}) to {self.folder}"
                 + (": " + names([p.relative_to(self.folder) for p in self.copied], 10) if count else ".")]
        if self.kept:
            lines.append(f"Kept {len(self.kept):,} file{'s' if len(self.kept) != 1 else ''} of yours that the sandbox "
                         f"also wrote ({names(self.kept)}): add --overwrite to replace them.")
        if self.refused:
            lines.append(f"Not copied: {names(self.refused)} (dotfiles, symlinks and places outside the folder are "
                         "never written; sizes are bounded).")
        if self.missing:
            lines.append(f"Gone from the sandbox: {names(self.missing)}.")
        if self.left:
            lines.append(f"{self.left:,} more not copied: past the bounds of one copy; run it again, or copy single "
                         "files with %sandbox download PATH.")
        if self.untracked:
            lines.append(f"{self.untracked:,} more files were written than were listed; copy them with "
                         "%sandbox download PATH.")
        return lines


def _target(folder: Path, path: str) -> Path | None:
    """Where ``path`` goes in ``folder``: None for a dotfile anywhere in it, or for a place
    that is (or whose folders are) a symlink or not a folder."""
    if any(part.startswith(".") for part in path.split("/")):
        return None
    target = folder / path
    parent = folder
    for part in path.split("/")[:-1]:
        parent = parent / part
        if parent.is_symlink() or (parent.exists() and not parent.is_dir()):
            return None
    return None if target.is_symlink() or target.is_dir() else target


async def download_all(ledger: Ledger, folder: Path, download: Download, *, overwrite: bool, max_files: int,
                       max_bytes: int) -> Copied:
    """Copy the ledger's artifacts into ``folder`` (same relative paths)."""
    done = Copied(folder, untracked=ledger.untracked)
    paths = sorted(ledger.files)
    for index, path in enumerate(paths):
        target = _target(folder, path)
        if target is None:
            done.refused.append(path)
            continue
        if target.exists() and not overwrite:
            done.kept.append(path)
            continue
        if len(done.copied) >= max_files or done.bytes >= max_bytes:
            done.left = len(paths) - index
            break
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, part = tempfile.mkstemp(prefix=".sandbox-artifact-", dir=target.parent)
        os.close(fd)
        try:
            await download(path, Path(part), max_bytes - done.bytes)
            size = os.path.getsize(part)
            os.replace(part, target)
        except FileNotFoundError:
            done.missing.append(path)
            continue
        except FileTooLarge:
            done.refused.append(f"{path} (over the {format_bytes(max_bytes)} bound)")
            continue
        finally:
            if os.path.exists(part):
                os.unlink(part)
        done.copied.append(target)
        done.bytes += size
    return done
