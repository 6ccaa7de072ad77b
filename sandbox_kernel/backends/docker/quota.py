"""Per-user quotas of the docker backend: how many sandboxes one user runs at once, and how much
memory their limits add up to (the administrator's lock, ``per_user``: :mod:`sandbox_kernel.runtime.lock`).

Every container the backend makes carries the uid of the process that made it (:data:`USER_LABEL`)
and its memory limit (:data:`MEMORY_LABEL`); before it starts a sandbox (a cold start or a
pooled one), the backend counts the running ones of this uid on the engine. Two kernels starting
at the same moment may both pass: the count is a courtesy with one clear message, the hard bound
is the engine's (a cgroup per user's engine, docs/how-to/jupyterhub.md).
"""

from __future__ import annotations

import os
from typing import Any

from ...core.errors import QuotaReached
from ...runtime.lock import Lock
from ...runtime.traits import format_bytes
from .boundary import engine_errors
from .engine import LABEL

USER_LABEL = f"{LABEL}.user"  # the uid of the process that made the container
MEMORY_LABEL = f"{LABEL}.memory"  # its memory_limit, bytes (0: none)
CLOSE = "shut down the kernel of a notebook you no longer use (Kernel > Shut Down Kernel), then run the cell again"


def labels(memory_limit: int) -> dict[str, str]:
    """The quota labels of a container this process makes."""
    return {USER_LABEL: str(os.getuid()), MEMORY_LABEL: str(memory_limit)}


def check(client: Any, memory_limit: int, lock: Lock) -> None:
    """Refuse a new sandbox of ``memory_limit`` bytes beyond this user's quotas. Blocking.

    Raises:
        QuotaReached: the user runs as many sandboxes as allowed, or their memory limits and
            this one's would add up to more than allowed.
        BackendUnavailable: the engine is not answering.
    """
    sandboxes, memory = lock.per_user()
    if sandboxes is None and memory is None:
        return
    with engine_errors("count your running sandboxes"):
        running = client.api.containers(filters={"label": f"{USER_LABEL}={os.getuid()}", "status": "running"})
    where = f"per_user in {', '.join(lock.files)}"
    if sandboxes is not None and len(running) >= sandboxes:
        raise QuotaReached(f"You already run {len(running)} sandbox{'es' if len(running) != 1 else ''}, the most "
                           "your administrator allows per user "
                           f"({where}): {CLOSE}.")
    held = sum(int((c.get("Labels") or {}).get(MEMORY_LABEL) or 0) for c in running)
    if memory is not None and held + memory_limit > memory:
        raise QuotaReached(f"Your running sandboxes hold {format_bytes(held)} of memory and this one needs "
                           f"{format_bytes(memory_limit)} more, beyond the {format_bytes(memory)} your administrator "
                           f"allows per user ({where}): {CLOSE}.")
