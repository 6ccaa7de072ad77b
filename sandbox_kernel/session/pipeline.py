"""The cell pipeline: from a backend's events to what a front door may show.

Every front door (the kernel, the ``%%sandbox`` magic, the Python API) runs cells through
this one path and differs only in its *sink*, the function that shows an event (IOPub
messages, IPython's display machinery, an execution result)::

    backend.execute(code, cell.emit) ─► Cell.emit ─► widgets where comms cannot go
                                                  ─► output policy (bundles) / widget rules (comms)
                                                  ─► output budget ─► sink(event)

:class:`OutputPipeline` holds what lasts for a sandbox session (the policy, the widget rules,
notes said once); :meth:`OutputPipeline.cell` makes the :class:`Cell` of one execution, which
owns the budget and maps infrastructure failures (:class:`~sandbox_kernel.core.errors.SandboxError`)
to one short ``Error`` output (:meth:`Cell.run`). What the sandbox sends outside any cell (a
thread's output, a widget it changes) passes :meth:`OutputPipeline.outside_cell`: the same
policy and rules, and a budget of its own, renewed at each cell.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from ..core.errors import SandboxError
from ..core.events import Comm, DebugEvent, Display, Emit, Event, Outcome, SandboxReplaced, Stream
from ..core.iopub import WIDGET_VIEW, error_event
from ..policy import OutputPolicy
from ..policy.widgets.rules import WidgetRules
from . import replies
from .budget import OutputBudget

OUTSIDE_SCOPE = "from outside a cell (a sandbox thread's) before the next cell"
"""Whose output the marker of the outside-cell budget speaks of."""

NO_COMMS_NOTE = ("[ipywidgets cannot work with the {backend} backend: it does not carry comms, so widgets are "
                 "shown as text. Use the local or docker backend for widgets.]\n")


NOT_A_BUNDLE = "[an output was not shown: its MIME bundle is not a JSON object]"
"""What a ``display_data`` whose ``data`` is a string, a list or null shows instead, under every
policy (the page's output model expects an object)."""


def without_widget_view(event: Display) -> Display | None:
    """``event`` without its widget view, for a frontend that cannot reach the widget's model
    (the comm stays in the sandbox); None when nothing else is left to show."""
    data = {mime: value for mime, value in event.data.items() if mime != WIDGET_VIEW}
    if not data:
        return None
    return Display(data, event.metadata, event.display_id, event.update, event.execution_count)


class OutputPipeline:
    """One sandbox session's output path, for one front door.

    Args:
        policy: the output policy (:class:`~sandbox_kernel.policy.OutputPolicy`).
        comms: whether the sandbox's comms reach the page; without them widget views lose
            their ``application/vnd.jupyter.widget-view+json`` and comm messages are dropped,
            with :attr:`no_comms_note` said once.
        no_comms_note: that note (``{backend}`` is replaced by :attr:`backend`).
        budget_setting: the option named when the output budget cuts a cell's output.
    """

    def __init__(self, policy: OutputPolicy, *, comms: bool = True, no_comms_note: str = NO_COMMS_NOTE,
                 budget_setting: str = "SandboxKernel.max_output_bytes") -> None:
        self.policy = policy
        self.comms = comms
        self.backend = "this"
        self.no_comms_note = no_comms_note
        self.budget_setting = budget_setting
        self.widgets = WidgetRules(policy)
        self._said: set[str] = set()
        self._outside = OutputBudget(0, budget_setting, OUTSIDE_SCOPE)

    def cell(self, sink: Emit, max_output_bytes: int = 0, policy: OutputPolicy | None = None,
             scope: str = "of this cell", say_changes: bool = True) -> Cell:
        """The :class:`Cell` for one execution: its events go to ``sink`` under ``policy``
        (default: the session's), at most ``max_output_bytes`` (0: no limit); the budget's
        marker names ``scope``. For what a widget event's handling shows (``scope="of this
        widget event"``), ``say_changes=False`` leaves out the policy's one-line note, which
        would otherwise repeat at every move of a slider."""
        return Cell(self, sink, OutputBudget(max_output_bytes, self.budget_setting, scope), policy or self.policy,
                    say_changes)

    def outside_cell(self, event: Event, sink: Emit) -> None:
        """Show ``event``, which the sandbox sent outside any cell, under the session's policy
        and the outside-cell budget (see :meth:`renew_outside_budget`)."""
        for shown in self.police(event):
            for admitted in self._outside.admit(shown):
                sink(admitted)

    def renew_outside_budget(self, max_output_bytes: int) -> None:
        """From now until the next call, output sent outside any cell may total
        ``max_output_bytes`` (0: no limit); past it, one marker, then nothing. Call when a cell
        starts, so a sandbox thread that keeps printing cannot flood the page between cells."""
        self._outside = OutputBudget(max_output_bytes, self.budget_setting, OUTSIDE_SCOPE)

    def from_frontend(self, msg_type: str, content: dict[str, Any]) -> None:
        """A ``comm_open``/``comm_close`` the page sends into the sandbox: its replies may pass."""
        self.widgets.from_frontend(msg_type, content)

    def police(self, event: Event, policy: OutputPolicy | None = None, cell: Cell | None = None) -> list[Event]:
        """``event`` under the policy and widget rules: the events to show in its place (none,
        itself changed or not, or preceded by a one-line note). Used for a cell's events and
        for what the sandbox sends outside any cell (widget changes from a thread)."""
        policy = policy or self.policy
        shown: list[Event] = []
        if isinstance(event, Display) and not isinstance(event.data, dict):
            event = replace(event, data={"text/plain": NOT_A_BUNDLE}, metadata={})
        elif isinstance(event, Display) and not isinstance(event.metadata, dict):
            event = replace(event, metadata={})
        if isinstance(event, Display):
            if WIDGET_VIEW in event.data and not self.comms:
                self._say_once(self.no_comms_note.format(backend=self.backend), shown)
                event = without_widget_view(event)
                if event is None:
                    return shown
            event, policed = policy.display(event)
            for note in policed.notes:
                self._say_once(note + "\n", shown)
            if policed.changed and cell is not None:
                cell.note_change(shown)
        elif isinstance(event, Comm):
            if not self.comms:
                self._say_once(self.no_comms_note.format(backend=self.backend), shown)
                return shown
            try:
                event, changed, refusal = self.widgets.from_sandbox(event)
            except Exception as exc:  # noqa: BLE001 - a message that breaks a rule's parser is dropped, never raised
                event, changed = None, True
                refusal = f"[a widget message was not shown: the output policy could not read it ({type(exc).__name__})]\n"
            if refusal is not None:
                self._say_once(refusal, shown)
            if changed and cell is not None:
                cell.note_change(shown)
            if event is None:
                return shown
        elif isinstance(event, DebugEvent):
            content = replies.debug_event(event.content)
            return shown if content is None else [DebugEvent(content)]
        shown.append(event)
        return shown

    def _say_once(self, note: str, shown: list[Event]) -> None:
        if note not in self._said:
            self._said.add(note)
            shown.append(Stream("stderr", note))


class Cell:
    """One execution's path to its sink: policy, widget rules, then the output budget.

    ``emit`` is what the backend calls; :meth:`run` wraps the backend call.
    """

    def __init__(self, pipeline: OutputPipeline, sink: Emit, budget: OutputBudget, policy: OutputPolicy,
                 say_changes: bool = True) -> None:
        self.pipeline, self.sink, self.budget, self.policy = pipeline, sink, budget, policy
        self.say_changes = say_changes  # the policy's one-line note, once, when it changes an output
        self.noted = False  # that note was said
        self.on_replaced: Callable[[], None] | None = None  # told when the backend replaced the sandbox

    def emit(self, event: Event) -> None:
        """Take one event from the backend (in order, live) and show what may be shown."""
        if isinstance(event, SandboxReplaced) and self.on_replaced is not None:
            self.on_replaced()
        for shown in self.pipeline.police(event, self.policy, self):
            for admitted in self.budget.admit(shown):
                self.sink(admitted)

    def note_change(self, shown: list[Event]) -> None:
        """The policy changed an output: the first time in this cell, say so in one line."""
        if self.say_changes and not self.noted:
            self.noted = True
            shown.append(Stream("stderr", self.policy.note()))

    def finish(self) -> None:
        """Show the budget's closing marker, if output was dropped."""
        if (marker := self.budget.summary()) is not None:
            self.sink(marker)

    async def run(self, work: Callable[[Emit], Awaitable[Outcome]]) -> Outcome:
        """``await work(self.emit)`` (a backend's execute); an infrastructure failure becomes
        one short ``Error`` output and an ``error`` outcome, never a traceback of ours.

        Returns:
            The backend's :class:`~sandbox_kernel.core.events.Outcome`, or ``Outcome("error",
            None, error)`` for a :class:`~sandbox_kernel.core.errors.SandboxError`.
        """
        try:
            return await work(self.emit)
        except SandboxError as exc:
            error = error_event(exc)
            self.emit(error)
            return Outcome("error", None, error)
        finally:
            self.finish()
