"""CPU use as a percentage, from two samples of a counter, as ``docker stats`` and psutil's
``cpu_percent(interval=None)`` compute it: the first sample gives no figure."""

from __future__ import annotations


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
