"""Which process made something (a sandbox container, a pooled kernel's claim): an owner label
``HOST/PID/STARTTIME``, and whether that process still runs. Standard library only."""

from __future__ import annotations

import os
import socket
from pathlib import Path

PROC = Path("/proc")


def start_time(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks since boot, /proc/PID/stat field 22),
    which tells a live owner from a new process that reuses its pid; None when it does not run
    (or is a zombie, not yet reaped by its parent).
    Without /proc (macOS, Windows) a running process is ``"alive"``: a reused pid goes unnoticed."""
    if not (PROC / "self").exists():
        return _alive(pid)
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] == "Z" else fields[19]  # a zombie has ended


def _alive(pid: int) -> str | None:
    """``"alive"`` when process ``pid`` runs, else None, without /proc. On Windows every pid is
    taken as alive (its ``os.kill`` would end the process, not probe it)."""
    if os.name == "nt":
        return "alive"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:  # runs, as another user
        pass
    return "alive"


def owner() -> str:
    """This process as an owner label: ``HOST/PID/STARTTIME``."""
    return f"{socket.gethostname()}/{os.getpid()}/{start_time(os.getpid())}"


def owned_here(label: str) -> bool:
    """True when the owner ``label`` names a process of this host (on a shared engine, other
    hosts' sandboxes are theirs to remove)."""
    return label.partition("/")[0] == socket.gethostname()


def owner_is_gone(label: str) -> bool:
    """True when ``label`` names a process of this host that no longer runs. Owners on other
    hosts (an engine shared over TCP) are never judged gone."""
    host, _, rest = label.partition("/")
    pid, _, started = rest.partition("/")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    return start_time(int(pid)) != started
