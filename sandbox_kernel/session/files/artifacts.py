"""Artifacts: the files a cell created or changed in the sandbox's working directory, as the
sandbox reports them (:mod:`.inside`), checked and bounded here, listed compactly under the cell,
and copied into the host's folder on request.

The sandbox is not trusted: a report is only names and sizes (and small PNG/JPEG thumbnails),
each name a plain relative path; the listing is HTML this module writes (names escaped) and the
output policy still checks. Copying them back: :mod:`.copyback`.
"""

from __future__ import annotations

import base64
import html
import posixpath
import re
from dataclasses import dataclass, field

from ...runtime.traits import format_bytes
from .inside import MAX_NAMES, THUMB_BYTES, THUMBS

LISTED = 20
"""Names a cell's listing shows; the rest are counted."""
TRACKED = 10_000
"""Paths a session remembers for ``download --artifacts``; past it the oldest are forgotten."""
DOWNLOAD_COMMAND = "%sandbox download --artifacts"
MAX_FILES = 1000
"""Files one ``download --artifacts`` copies at most."""
MAX_BYTES = 1024**3
"""Bytes one download copies at most (1 GiB): each file is bounded as it is read."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_MAGIC = {b"\x89PNG\r\n\x1a\n": "image/png", b"\xff\xd8\xff": "image/jpeg"}


@dataclass(frozen=True)
class Artifact:
    """``path`` (relative to the working directory, POSIX), ``size`` (bytes), ``new`` (created,
    not changed)."""

    path: str
    size: int
    new: bool


@dataclass(frozen=True)
class Report:
    """One cell's artifacts: the first ``files``, how many in all (``count``, ``bytes``),
    ``truncated`` (the scan stopped at its bound), ``thumbs`` (path → (MIME type, base64))."""

    files: tuple[Artifact, ...]
    count: int
    bytes: int
    truncated: bool
    thumbs: dict[str, tuple[str, str]] = field(default_factory=dict)

    def without(self, paths: set[str]) -> Report:
        """This report less the files at ``paths``."""
        gone = [a for a in self.files if a.path in paths]
        if not gone:
            return self
        return Report(tuple(a for a in self.files if a.path not in paths), self.count - len(gone),
                      self.bytes - sum(a.size for a in gone), self.truncated,
                      {p: t for p, t in self.thumbs.items() if p not in paths})


def safe_path(path: object) -> str | None:
    """``path`` when it is a plain relative POSIX path (normalised, no ``..``, no control
    characters, at most 1024 characters), else None."""
    if not isinstance(path, str) or not path or len(path) > 1024 or _CONTROL.search(path):
        return None
    if posixpath.normpath(path) != path or path.startswith("/") or path == ".." or path.startswith("../"):
        return None
    return path


def _amount(value: object) -> int | None:
    return value if type(value) is int and 0 <= value < 2**63 else None


def _thumbs(raw: object, listed: set[str]) -> dict[str, tuple[str, str]]:
    thumbs: dict[str, tuple[str, str]] = {}
    for path, encoded in list(raw.items())[:THUMBS] if isinstance(raw, dict) else []:
        if path not in listed or not isinstance(encoded, str) or len(encoded) > -(-THUMB_BYTES // 3) * 4:
            continue
        try:
            head = base64.b64decode(encoded, validate=True)[:8]
        except ValueError:
            continue
        if mime := next((m for magic, m in _MAGIC.items() if head.startswith(magic)), None):
            thumbs[path] = (mime, encoded)
    return thumbs


def parse(data: object) -> Report | None:
    """The sandbox's report, checked: None when it is not one; malformed entries dropped; at
    most :data:`~.inside.MAX_NAMES` names and :data:`~.inside.THUMBS` thumbnails kept."""
    if not isinstance(data, dict) or not isinstance(data.get("files"), list):
        return None
    files = []
    for item in data["files"][:MAX_NAMES]:
        if (isinstance(item, list) and len(item) == 3 and (path := safe_path(item[0])) is not None
                and _amount(item[1]) is not None and isinstance(item[2], bool)):
            files.append(Artifact(path, item[1], item[2]))
    count = max(_amount(data.get("count")) or 0, len(files))
    total = _amount(data.get("bytes"))
    total = sum(f.size for f in files) if total is None else total
    return Report(tuple(files), count, total, data.get("truncated") is True,
                  _thumbs(data.get("thumbs"), {f.path for f in files}))


def render(report: Report, command: str = DOWNLOAD_COMMAND, bound: bool = False) -> dict[str, str]:
    """The cell's listing as a MIME bundle (``text/plain``, ``text/html``): at most
    :data:`LISTED` names with their sizes (and thumbnails), then a count of the rest, then the
    command that copies them (``bound``: a read-write bound workspace, where they are on the
    host already)."""
    shown = report.files[:LISTED]
    more = report.count - len(shown)
    head = f"{report.count:,} file{'s' if report.count != 1 else ''} written" + \
        (f" ({format_bytes(report.bytes)})" if report.count > 1 else "")
    tail = ("They are in your folder (the workspace is read-write)." if bound else
            f"Copy {'it' if report.count == 1 else 'them'} to this folder: {command}")
    changed = [" (changed)" if not a.new else "" for a in shown]
    lines = [head + ":", *(f"  {a.path}  {format_bytes(a.size)}{c}" for a, c in zip(shown, changed))]
    if more > 0:
        lines.append(f"  ... and {more:,} more")
    if report.truncated:
        lines.append("  (the working directory holds more entries than are looked at after a cell: some may be missing)")
    lines.append(tail)
    rows = []
    for a, c in zip(shown, changed):
        thumb = report.thumbs.get(a.path)
        picture = f'<img src="data:{thumb[0]};base64,{thumb[1]}" alt="" style="max-height: 64px; max-width: 128px">' if thumb else ""
        rows.append(f"<tr><td><code>{html.escape(a.path)}</code></td><td>{format_bytes(a.size)}{c}</td>"
                    f"<td>{picture}</td></tr>")
    if more > 0:
        rows.append(f'<tr><td colspan="3">... and {more:,} more</td></tr>')
    body = (f"<p>{html.escape(head)}:</p><table>{''.join(rows)}</table>"
            + ("<p>(some may be missing: the working directory holds more entries than are looked at)</p>"
               if report.truncated else "")
            + f"<p>{html.escape(tail.removesuffix(command))}{f'<code>{html.escape(command)}</code>' if not bound else ''}</p>")
    return {"text/plain": "\n".join(lines) + "\n", "text/html": body}


class Ledger:
    """The artifacts of a session so far, by path (the latest report wins), at most
    :data:`TRACKED`; ``untracked`` counts names a report did not list (past its bound)."""

    def __init__(self) -> None:
        self.files: dict[str, Artifact] = {}
        self.untracked = 0

    def add(self, report: Report) -> None:
        for artifact in report.files:
            self.files.pop(artifact.path, None)
            self.files[artifact.path] = artifact
        while len(self.files) > TRACKED:
            self.files.pop(next(iter(self.files)))
        self.untracked += report.count - len(report.files)

    def forget(self) -> None:
        """A fresh sandbox: its files are gone."""
        self.files.clear()
        self.untracked = 0


__all__ = ["Artifact", "DOWNLOAD_COMMAND", "Ledger", "MAX_BYTES", "MAX_FILES", "Report", "parse", "render",
           "safe_path"]
