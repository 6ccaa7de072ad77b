"""Showing events in the host's cell with IPython's display machinery (main thread only).

The kernel turns events into IOPub messages itself (:func:`sandbox_kernel.core.iopub.to_iopub`);
the magic runs inside an ordinary IPython kernel, so it hands each event to the host's
display machinery instead, which publishes the same IOPub message with the calling cell as
parent:

=============================  ==============================================================
event                          shown with
=============================  ==============================================================
``Stream``                     ``sys.stdout``/``sys.stderr`` (written and flushed: live)
``Display``                    ``IPython.display.publish_display_data`` (``display_id`` in
                               ``transient``; ``update=True`` for ``update_display_data``)
``Display`` (execute_result)   returned as :class:`SandboxResult`, which IPython's
                               displayhook makes the cell's ``execute_result``
``ClearOutput``                ``IPython.display.clear_output``
``Error``                      raised at the end as :class:`SandboxCellError`, whose
                               ``_render_traceback_`` gives the sandbox's traceback
``Comm`` (ipywidgets)          published on the host's IOPub by the session's
                               :class:`~sandbox_kernel.frontdoors.magics.comms.CommRelay` (which makes the host's comm
                               manager route the page's answers into the sandbox); without one
                               (e2b, no host kernel) the pipeline drops comms and widget views
                               and says so once
=============================  ==============================================================

Events reach :class:`CellOutputs` through the session's cell pipeline
(:mod:`sandbox_kernel.session.pipeline`), so the output policy has already been applied. Of the
sandbox's execute_reply payloads, the pager's ``page`` (``zip?``, ``%prun``) is shown with
IPython's own pager (:func:`show_pages`).
"""

from __future__ import annotations

import sys
from typing import Any

from IPython import get_ipython
from IPython.display import clear_output, publish_display_data

from sandbox_kernel.core.errors import SandboxCellError
from sandbox_kernel.core.events import ClearOutput, Comm, Display, Error, Event, Outcome, Stream
from sandbox_kernel.core.iopub import error_event


def show(event: Event) -> None:
    """Show one output event in the current cell. ``Error``, ``Comm`` and execute results are
    not shown here (see :class:`CellOutputs`)."""
    if isinstance(event, Stream):
        stream = sys.stderr if event.name == "stderr" else sys.stdout
        stream.write(event.text)
        stream.flush()
    elif isinstance(event, Display):
        transient = {"display_id": event.display_id} if event.display_id is not None else None
        publish_display_data(event.data, event.metadata, transient=transient, update=event.update)
    elif isinstance(event, ClearOutput):
        clear_output(wait=event.wait)


class SandboxResult:
    """The sandboxed cell's last expression, as a MIME bundle.

    The magic returns it, so IPython shows it as the host cell's ``execute_result`` (and keeps
    it in ``Out``/``_``): the object itself stays in the sandbox.
    """

    def __init__(self, data: dict[str, Any], metadata: dict[str, Any] | None = None) -> None:
        self.data = data
        self.metadata = metadata or {}

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> tuple[dict, dict]:
        return dict(self.data), dict(self.metadata)

    def __repr__(self) -> str:
        return str(self.data.get("text/plain", "<sandbox result>"))


_error_classes: dict[str, type[SandboxCellError]] = {}


def cell_error(error: Error) -> SandboxCellError:
    """The exception that shows ``error`` (the sandbox's ``ename``, ``evalue``, traceback)."""
    cls = _error_classes.get(error.ename)
    if cls is None:
        cls = _error_classes[error.ename] = type(error.ename, (SandboxCellError,), {"__module__": "sandbox"})
    return cls(error.evalue, error.traceback or [f"{error.ename}: {error.evalue}"])


def infrastructure_error(exc: BaseException) -> SandboxCellError:
    """One short message for a failure of the sandbox itself (dead, timed out, unavailable)."""
    return cell_error(error_event(exc))


class CellOutputs:
    """Sorts one cell's events: shows outputs live, keeps the execute_result and errors.

    Attributes:
        result: the cell's execute_result, if any.
        errors: the ``Error`` events, in order (shown at the end, once).
    """

    def __init__(self, comms: Any = None) -> None:
        self.result: SandboxResult | None = None
        self.errors: list[Error] = []
        self.comms = comms  # the session's CommRelay, or None

    def take(self, event: Event) -> None:
        if isinstance(event, Comm):
            if self.comms is not None:
                self.comms.publish(event)
        elif isinstance(event, Display) and event.execution_count is not None and not event.update:
            self.result = SandboxResult(event.data, event.metadata)
        elif isinstance(event, Error):
            self.errors.append(event)
        else:
            show(event)

    def finish(self, outcome: Outcome) -> SandboxCellError | None:
        """Show the errors that did not end the cell (e.g. from a post-execute hook) and return
        the exception that shows the one that did and fails the host cell, or None."""
        own = None
        if outcome.status == "error":
            own = outcome.error or (self.errors[-1] if self.errors else Error("SandboxError", "the cell failed"))
        elif outcome.status == "aborted":
            own = Error("Aborted", "the sandbox aborted the cell")
        shell = get_ipython()
        for other in self.errors:
            if other != own and shell is not None:
                shell._showtraceback(type(cell_error(other)), other.evalue, other.traceback)
        return cell_error(own) if own is not None else None


def show_pages(payload: tuple[dict[str, Any], ...]) -> None:
    """Show the sandbox's ``page`` payloads (help such as ``zip?``, a profile) with the host's
    pager, as IPython shows its own: in a notebook the host kernel makes them its own ``page``
    payload, in a terminal they are paged. Only ``page``: ``set_next_input`` would put code the
    sandbox chose into a host cell (one that runs outside the sandbox), and ``ask_exit``/``edit``
    speak of the sandbox's session, not the host's."""
    from IPython.core import page

    for item in payload:
        if item.get("source") == "page":
            page.page(item["data"], start=item.get("start", 0))
