"""One extra line for an error about a file of the host's folder: one the sandbox does not see
(FileNotFoundError, ModuleNotFoundError), or one a read-only workspace shows and a cell tried to
change (PermissionError, or OSError ``Read-only file system``)."""

from __future__ import annotations

import ast
import os
import posixpath
import re

_QUOTED = re.compile(r"""(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""")
_NOT_FOUND = re.compile(r"^(\S+) not found\.?$")
_MODULE = re.compile(r"^No module named '([A-Za-z_][A-Za-z0-9_]*)(?:\.[^']*)?'$")
WRITES = ("PermissionError", "OSError", "IsADirectoryError")
"""The ``ename`` of a refused write (EACCES, EROFS, EBUSY)."""


def candidates(ename: str, evalue: str, workdir: str = "") -> list[str]:
    """Relative paths an error's text names: the quoted strings of a FileNotFoundError or of a
    refused write (``[Errno 2] No such file or directory: 'data/x.csv'``, ``'data/x.parquet'``,
    ``[Errno 30] Read-only file system: 'data/x.csv'``), ``X not found.`` (numpy), an absolute
    path below the sandbox's ``workdir`` made relative; for a ModuleNotFoundError the module's
    file or package (``helper.py``, ``helper``)."""
    if ename == "ModuleNotFoundError":
        match = _MODULE.match(evalue.strip())
        return [f"{match.group(1)}.py", match.group(1)] if match else []
    if ename not in ("FileNotFoundError", *WRITES):
        return []
    found = []
    for quoted in _QUOTED.findall(evalue):
        try:
            value = ast.literal_eval(quoted)
        except (ValueError, SyntaxError):
            continue
        if isinstance(value, str):
            found.append(value)
    if match := _NOT_FOUND.match(evalue.strip()):
        found.append(match.group(1))
    paths = []
    for path in found:
        if workdir and path.startswith(workdir.rstrip("/") + "/"):
            path = path[len(workdir.rstrip("/")) + 1:]
        norm = posixpath.normpath(path)
        if path and not posixpath.isabs(norm) and norm != ".." and not norm.startswith("../") and norm not in paths:
            paths.append(norm)
    return paths


def on_host(folder: str, ename: str, evalue: str, workdir: str = "") -> str | None:
    """The first path the error names that exists in the host's ``folder`` (never read, only
    looked up), else None."""
    for path in candidates(ename, evalue, workdir):
        if os.path.lexists(os.path.join(folder, path)):
            return path
    return None
