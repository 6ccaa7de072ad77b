"""The rule for file paths inside a sandbox: uploads and file tools stay in its working
directory. The docker backend (whose root filesystem is read-only) and the MCP server (whose
callers are programs) both apply it through :func:`within`."""

from __future__ import annotations

import posixpath


def within(workdir: str, path: str) -> str | None:
    """``path`` in the sandbox (relative paths: to ``workdir``) as a normalised absolute POSIX
    path, when it is ``workdir`` or below it; None when it leaves it (``..``, or an absolute
    path elsewhere).

    Args:
        workdir: the sandbox's working directory, an absolute POSIX path.
        path: the path as given ("data/x.csv", "/home/sandbox/work/x", "../x").
    """
    target = posixpath.normpath(posixpath.join(workdir, path))
    return target if posixpath.commonpath([target, workdir]) == workdir else None
