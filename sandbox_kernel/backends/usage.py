"""A sandbox's resource use: CPU use as a percentage, from two samples of a counter, as ``docker
stats`` and psutil's ``cpu_percent(interval=None)`` compute it (the first sample gives no figure),
and this machine's figures for a sandbox that shares it."""

from __future__ import annotations

from typing import Any


class CpuMeter:
    """Percent of one CPU a sandbox used between the previous :meth:`sample` and this one."""

    def __init__(self) -> None:
        self._last: tuple[float, float] | None = None

    def sample(self, used: float, span: float, cpus: float = 1.0) -> float | None:
        """``used``: the sandbox's CPU time so far; ``span``: the time it could have used so far,
        in the same unit (wall seconds for one CPU; the engine's system CPU time, summed over
        ``cpus`` CPUs). None at the first sample, or when no time passed."""
        last, self._last = self._last, (used, span)
        if last is None or span <= last[1]:
            return None
        return max(0.0, (used - last[0]) / (span - last[1]) * cpus * 100.0)


def this_machine() -> dict[str, Any]:
    """This machine's CPU and memory, read by psutil as ipykernel's ``usage_reply`` reads them
    (``host_cpu_percent``: percent of all CPUs since the previous call, 0.0 at the first;
    ``host_memory``: ``psutil.virtual_memory()``'s fields in bytes), for a sandbox that runs on
    this machine and shares it (``local``); {} where psutil is not installed."""
    try:
        import psutil
    except ImportError:
        return {}
    return {"host_cpu_percent": psutil.cpu_percent(), "host_memory": dict(psutil.virtual_memory()._asdict())}
