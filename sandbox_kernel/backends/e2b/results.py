"""From the E2B SDK's ``run_code`` callbacks and models to events.

The code interpreter's ``POST /execute`` streams newline-delimited JSON; the SDK parses each
line and calls ``on_stdout``/``on_stderr`` (``OutputMessage``), ``on_result`` (``Result``) and
``on_error`` (``ExecutionError``) as the line arrives. :class:`Relay` turns those calls into
events in the same order, and the finished ``Execution`` into an
:class:`~sandbox_kernel.core.events.Outcome`.

A ``Result`` is a Jupyter MIME bundle that E2B split into fields; :func:`mime_bundle` puts it
back together (:data:`FIELDS`), keeping every unknown MIME type from ``extra``.
What E2B's stream does not carry at all (so no event can be made of it): display ids and
``update_display_data``, ``clear_output``, the bundle's ``metadata``, and comms.
"""

from __future__ import annotations

from typing import Any

from ...core.events import Display, Emit, Error, Outcome, Stream

FIELDS = {
    "text": "text/plain",
    "html": "text/html",
    "markdown": "text/markdown",
    "svg": "image/svg+xml",
    "png": "image/png",  # base64, as in Jupyter
    "jpeg": "image/jpeg",  # base64
    "pdf": "application/pdf",  # base64
    "latex": "text/latex",
    "json": "application/json",
    "javascript": "application/javascript",
    "data": "application/vnd.e2b.data+json",  # E2B's own "e2b/data" (e.g. a DataFrame's data)
}
"""``Result`` field → the MIME type it came from in the sandbox's kernel."""

CHART_MIME = "application/vnd.e2b.chart+json"
"""E2B's chart extraction (``Result.chart``, a parsed matplotlib figure), kept as JSON."""

KERNEL_DIED = frozenset({"DeadKernelError", "ContextRestarting"})
"""``ExecutionError.name`` values that mean the interpreter itself died (E2B's code interpreter,
and the local test server, say ``ContextRestarting`` when Jupyter restarts a dead kernel;
``DeadKernelError`` is kept for E2B-compatible servers that say so): reported as SandboxDied, not
as an error of the user's code."""


def mime_bundle(result: Any) -> dict[str, Any]:
    """The Jupyter MIME bundle of an E2B ``Result``: known fields under their MIME types,
    then ``extra`` (any other MIME type, unchanged)."""
    bundle: dict[str, Any] = dict(getattr(result, "extra", None) or {})
    for name, mime in FIELDS.items():
        value = getattr(result, name, None)
        if value is not None:
            bundle[mime] = value
    chart = getattr(result, "chart", None)
    if chart is not None and hasattr(chart, "to_dict"):
        bundle[CHART_MIME] = chart.to_dict()
    return bundle


def error_event(error: Any) -> Error:
    """An :class:`Error` from an E2B ``ExecutionError``, whose ``traceback`` is one
    ``"\\n"``-joined string (with ANSI colours); an empty one becomes ``"name: value"``."""
    lines = error.traceback.split("\n") if error.traceback else [f"{error.name}: {error.value}"]
    return Error(error.name, error.value, lines)


class Relay:
    """The ``on_*`` callbacks of one ``run_code`` call, emitting events live and in order.

    The cell's main result (``is_main_result``, its ``execute_result``) is held back until the
    execution ends: only then does the SDK know the execution count to give it. IPython sends
    it last anyway.
    """

    def __init__(self, emit: Emit) -> None:
        self.emit = emit
        self.main: Any = None
        self.error: Error | None = None
        self.died: Any = None
        """The ``ExecutionError`` that said the interpreter died, if one came."""

    def on_stdout(self, message: Any) -> None:
        self.emit(Stream("stdout", message.line))

    def on_stderr(self, message: Any) -> None:
        self.emit(Stream("stderr", message.line))

    def on_result(self, result: Any) -> None:
        if result.is_main_result:
            self.main = result
        else:
            self.emit(Display(mime_bundle(result)))

    def on_error(self, error: Any) -> None:
        if error.name in KERNEL_DIED:
            self.died = error
            return
        self.error = error_event(error)
        self.emit(self.error)

    def callbacks(self) -> dict[str, Any]:
        """Keyword arguments for ``AsyncSandbox.run_code``."""
        return {"on_stdout": self.on_stdout, "on_stderr": self.on_stderr, "on_result": self.on_result,
                "on_error": self.on_error}

    def flush(self, execution_count: int | None = None) -> None:
        """Emit the held main result: an ``execute_result`` when the count is known, else a
        plain display (the execution was cut short)."""
        if self.main is not None:
            main, self.main = self.main, None
            self.emit(Display(mime_bundle(main), execution_count=execution_count))

    def outcome(self, execution: Any) -> Outcome:
        """Flush, then the :class:`Outcome` of a finished ``Execution``."""
        self.flush(execution.execution_count)
        if self.error is not None:
            return Outcome("error", execution.execution_count, self.error)
        return Outcome("ok", execution.execution_count)

    def interrupted(self) -> Outcome:
        """The outcome of an execution we cancelled (:meth:`E2BBackend.interrupt`): an error
        ``KeyboardInterrupt``, as a Jupyter kernel reports an interrupted cell."""
        self.flush()
        error = Error("KeyboardInterrupt", "the execution was interrupted (E2B: the request was cancelled, "
                      "and the sandbox interrupted its kernel)",
                      ["\x1b[0;31mKeyboardInterrupt\x1b[0m: the E2B execution was interrupted"])
        self.emit(error)
        return Outcome("error", None, error)
