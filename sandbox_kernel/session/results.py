"""What the Python API and the MCP server give back: an execution's result, a command's result.

:class:`Collector` is the API's sink of the cell pipeline (:mod:`sandbox_kernel.session.pipeline`):
where the kernel turns each event into an IOPub message and the magic shows it, the collector
gathers the events of one execution into an :class:`ExecutionResult`, applying
``clear_output`` and ``update_display_data`` as a notebook would.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ..core.events import ClearOutput, Display, Error, Event, Outcome, Stream


@dataclass(frozen=True)
class ExecutionResult:
    """The outputs of one execution, after the output policy and the output budget.

    Attributes:
        status: ``"ok"``, ``"error"`` (the code raised) or ``"aborted"``.
        execution_count: the sandbox's execution counter after this code, or None.
        stdout, stderr: the text the code wrote to each stream (our one-line notes, e.g. the
            output policy's, are on ``stderr``).
        text: the ``text/plain`` of the last expression's value (``execute_result``), or None.
        displays: every rich output in order, MIME bundles whole (``display_data`` and the
            ``execute_result``, whose ``execution_count`` is set), updates applied.
        error: the exception the code raised (``ename``, ``evalue``, ``traceback``), or None.
        artifacts: the files the code created or changed in the sandbox's working directory
            (``path``, ``size`` in bytes, ``new``), at most 1000; ``Sandbox.download_artifacts``
            copies them to the host.
    """

    status: Literal["ok", "error", "aborted"]
    execution_count: int | None = None
    stdout: str = ""
    stderr: str = ""
    text: str | None = None
    displays: tuple[Display, ...] = ()
    error: Error | None = None
    artifacts: tuple[Any, ...] = ()

    @property
    def result(self) -> Display | None:
        """The last expression's value as a :class:`~sandbox_kernel.core.events.Display`, or None."""
        return next((d for d in reversed(self.displays) if d.execution_count is not None), None)


@dataclass(frozen=True)
class CommandResult:
    """A shell command's end: ``exit_code`` (negative: killed by that signal), its ``stdout``
    and ``stderr`` (UTF-8, undecodable bytes replaced; cut at the output budget, with a note)."""

    exit_code: int
    stdout: str = ""
    stderr: str = ""


@dataclass
class Collector:
    """A cell pipeline sink that builds an :class:`ExecutionResult` (call it with each event)."""

    streams: list[Stream] = field(default_factory=list)
    displays: list[Display] = field(default_factory=list)
    error: Error | None = None
    _clear_pending: bool = False

    def __call__(self, event: Event) -> None:
        if isinstance(event, ClearOutput):
            self._clear_pending = event.wait
            if not event.wait:
                self._clear()
            return
        if self._clear_pending and isinstance(event, (Stream, Display)) and not getattr(event, "update", False):
            self._clear()
        if isinstance(event, Stream):
            self.streams.append(event)
        elif isinstance(event, Display) and event.update:
            self.displays = [event if d.display_id == event.display_id else d for d in self.displays]
        elif isinstance(event, Display):
            self.displays.append(event)
        elif isinstance(event, Error):
            self.error = event

    def _clear(self) -> None:
        self.streams.clear()
        self.displays.clear()
        self._clear_pending = False

    def text(self, name: str) -> str:
        return "".join(s.text for s in self.streams if s.name == name)

    def result(self, outcome: Outcome) -> ExecutionResult:
        """The :class:`ExecutionResult` of what was collected, ending with ``outcome``."""
        last = next((d for d in reversed(self.displays) if d.execution_count is not None), None)
        text = last.data.get("text/plain") if last is not None else None
        return ExecutionResult(outcome.status, outcome.execution_count, self.text("stdout"), self.text("stderr"),
                               text, tuple(self.displays), outcome.error or self.error)
