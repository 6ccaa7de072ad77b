"""The output budget: how much output one cell (or one widget event, or a sandbox thread between
cells) may show, and the markers that say what was dropped."""

from __future__ import annotations

from ..core.events import Display, Event, Stream
from ..runtime.traits import format_bytes


def _size(event: Event) -> int:
    if isinstance(event, Stream):
        return len(event.text.encode("utf-8", "surrogatepass"))
    if isinstance(event, Display):
        return sum(len(v) if isinstance(v, str) else len(repr(v)) for v in event.data.values())
    return 0


class OutputBudget:
    """Cuts a cell's output at ``max_bytes`` (0: no limit) and says how much was dropped.
    ``scope`` names whose output the marker speaks of ("of this cell").

    ``admit(event)`` returns the events to publish: the event itself while under the budget,
    a one-line marker when the budget is first exceeded, nothing afterwards. Errors, comms and
    clear_output always pass. ``summary()`` gives the closing marker, if anything was dropped.
    """

    def __init__(self, max_bytes: int, setting: str = "SandboxKernel.max_output_bytes",
                 scope: str = "of this cell") -> None:
        self.max_bytes = max_bytes
        self.scope = scope
        self.setting = setting  # the option named in the closing marker
        self.used = 0
        self.dropped = 0

    def admit(self, event: Event) -> list[Event]:
        size = _size(event)
        if not self.max_bytes or not size:
            return [event]
        if self.dropped == 0 and self.used + size <= self.max_bytes:
            self.used += size
            return [event]
        if self.dropped:
            self.dropped += size
            return []
        admitted: list[Event] = []
        room = self.max_bytes - self.used
        if isinstance(event, Stream) and room > 0:  # show the part that fits
            head = event.text.encode("utf-8", "surrogatepass")[:room].decode("utf-8", "ignore")
            admitted.append(Stream(event.name, head))
            size -= len(head.encode("utf-8", "surrogatepass"))
        self.used = self.max_bytes
        self.dropped = size
        admitted.append(Stream("stderr", f"\n[output limit of {format_bytes(self.max_bytes)} reached: "
                                         f"further output {self.scope} is dropped]\n"))
        return admitted

    def summary(self) -> Stream | None:
        if not self.dropped:
            return None
        return Stream("stderr", f"[{format_bytes(self.dropped)} of output dropped "
                                f"({self.dropped} bytes); raise {self.setting} to see more]\n")
