"""The suite's one event recorder: an ``emit`` callback that keeps what a backend or a session
sends, with the arrival time of each event."""

from __future__ import annotations

import time

from sandbox_kernel.core.events import Display, Stream


class Recorder:
    """An ``emit`` that keeps the events (:attr:`events`, also by iteration and index) and their
    arrival times (:attr:`times`, seconds since it was made)."""

    def __init__(self):
        self.events = []
        self.times = []
        self.start = time.monotonic()

    def __call__(self, event):
        self.events.append(event)
        self.times.append(time.monotonic() - self.start)

    def __iter__(self):
        return iter(self.events)

    def __len__(self):
        return len(self.events)

    def __getitem__(self, index):
        return self.events[index]

    def of(self, kind):
        """The events of class ``kind``."""
        return [e for e in self.events if isinstance(e, kind)]

    def text(self, name="stdout"):
        """What arrived on the stream ``name``, joined."""
        return "".join(e.text for e in self.events if isinstance(e, Stream) and e.name == name)

    def result(self):
        """The cell's ``execute_result`` as text."""
        return next(e.data["text/plain"] for e in self.events if isinstance(e, Display) and e.execution_count)
