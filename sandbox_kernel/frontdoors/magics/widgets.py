"""ipywidgets views of the magic: the live ``%sandbox status`` panel and the start-up progress.

Each is shown as one MIME bundle holding a widget view and text: where widgets render
(JupyterLab, Notebook 7, VS Code) the widget shows; where they cannot (nbconvert, a notebook
saved without widget state) the ``text/html`` or ``text/plain`` does. Outside a kernel (a
terminal) or without ipywidgets there is only the text.

The panel is refreshed by a daemon thread (ipykernel publishes widget changes from any
thread); its buttons call back into the magic on the kernel's main thread.
"""

from __future__ import annotations

import html
import re
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from IPython import get_ipython
from IPython.display import clear_output, display, update_display

from sandbox_kernel.core.events import Display, Event, Stream
from sandbox_kernel.core.iopub import WIDGET_VIEW
from sandbox_kernel.runtime.traits import format_bytes

from .session import Registry, Session
from .status import StatusView, format_uptime, paused_note, refresh_paused, status_info

COLUMNS = (("session", "session"), ("backend", "backend"), ("sandbox_id", "sandbox id"), ("state", "state"),
           ("uptime_s", "uptime"), ("memory", "memory"), ("cells", "cells"))
"""The panel's columns: (key of :func:`row_values`, heading)."""


def widgets_available() -> bool:
    """True when widgets can be shown: ipywidgets is installed and a kernel (with comms) runs
    this shell, not a terminal."""
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return getattr(get_ipython(), "kernel", None) is not None


def _view(widget: Any) -> dict[str, Any]:
    return {"version_major": 2, "version_minor": 0, "model_id": widget.model_id}


def row_values(session: Session, usage: dict[str, int] | None) -> dict[str, str]:
    """The panel's texts for one session: :func:`status_info` plus memory in use."""
    info = status_info(session)
    memory = (usage or {}).get("memory_bytes")
    values = {key: "-" if info.get(key) is None else str(info[key]) for key, _ in COLUMNS}
    values.update(uptime_s=format_uptime(info["uptime_s"]), memory=format_bytes(memory) if memory else "-")
    return values


class StatusPanel:
    """``%sandbox status`` as a live table: one row per session (backend, sandbox id, state,
    uptime, memory where the backend reports it, cells) with Restart and Stop buttons, refreshed
    every :attr:`REFRESH_S` seconds (memory every :attr:`MEMORY_EVERY` refreshes) until its
    sessions are stopped. Its text is the :class:`~sandbox_kernel.frontdoors.magics.status.StatusView` of the same sessions.

    Args:
        sessions: the sessions shown.
        registry: where they live (its loop thread asks the backends for their usage).
        restart, stop: ``action(name) -> message``, the magic's own commands.
    """

    REFRESH_S = 1.0
    MEMORY_EVERY = 5

    def __init__(self, sessions: list[Session], registry: Registry, restart: Callable[[str], str],
                 stop: Callable[[str], str]) -> None:
        self.sessions, self.registry = list(sessions), registry
        self.actions = {"Restart": restart, "Stop": stop}
        for session in self.sessions:
            refresh_paused(session, registry.loop.submit)
        self.text = StatusView([status_info(s) for s in self.sessions])
        self.usage: dict[str, dict[str, int] | None] = {}
        self.widget = self._build() if widgets_available() else None
        if self.widget is not None:
            threading.Thread(target=self._refresh_loop, name="sandbox-status-panel", daemon=True).start()

    def _build(self) -> Any:
        import ipywidgets as w

        self.cells: dict[str, dict[str, Any]] = {}
        self.buttons: dict[str, list[Any]] = {}
        children = [w.HTML(f"<b>{heading}</b>") for _, heading in COLUMNS] + [w.HTML("")]
        for session in self.sessions:
            values = row_values(session, None)
            self.cells[session.name] = {key: w.HTML(html.escape(values[key], quote=False)) for key, _ in COLUMNS}
            self.buttons[session.name] = [self._button(label, session.name) for label in self.actions]
            children += [*self.cells[session.name].values(), w.HBox(self.buttons[session.name])]
        grid = w.GridBox(children, layout=w.Layout(grid_template_columns=f"repeat({len(COLUMNS) + 1}, max-content)",
                                                     grid_gap="2px 18px", align_items="center"))
        self.message = w.HTML("")
        paused = [w.HTML(html.escape(note, quote=False)) for s in self.sessions if (note := paused_note(s))]
        return w.VBox([grid, *paused, self.message])

    def _button(self, label: str, name: str) -> Any:
        import ipywidgets as w

        button = w.Button(description=label, tooltip=f"{label} session {name!r}", layout=w.Layout(width="auto"),
                          button_style="warning" if label == "Restart" else "danger")
        button.on_click(lambda _: self._act(label, name))
        return button

    def _act(self, label: str, name: str) -> None:
        """A button's click, on the kernel's main thread: the magic's command, its message shown."""
        for button in self.buttons[name]:
            button.disabled = True
        self.message.value = html.escape(f"{label.replace('Stop', 'Stopp')}ing session {name!r}...", quote=False)
        try:
            text = self.actions[label](name)
        except Exception as exc:  # noqa: BLE001 - shown, not raised into the comm handler
            text = f"{label} {name!r} failed: {exc}"
        self.message.value = html.escape(text, quote=False)
        self.refresh(memory=True)

    def live(self, session: Session) -> bool:
        return self.registry.get(session.name) is session

    def refresh(self, memory: bool = False) -> None:
        """Update every row; with ``memory``, ask the running backends for their usage (up to 5 s)."""
        for session in self.sessions:
            live = self.live(session)
            if memory:
                self.usage[session.name] = self._usage(session) if live else None
            values = row_values(session, self.usage.get(session.name))
            if not live:
                values.update(state="stopped", uptime_s="-", memory="-")
            for key, cell in self.cells[session.name].items():
                cell.value = html.escape(values[key], quote=False)
            for button in self.buttons[session.name]:
                button.disabled = not live

    def _usage(self, session: Session) -> dict[str, int] | None:
        if not session.sandbox.started:
            return None
        try:
            return self.registry.loop.submit(session.sandbox.usage()).result(timeout=5)
        except Exception:  # noqa: BLE001 - no figure this time
            return None

    def _refresh_loop(self) -> None:
        tick = 0
        while self.widget.comm is not None and any(self.live(s) for s in self.sessions):
            try:
                self.refresh(memory=tick % self.MEMORY_EVERY == 0)
            except Exception:  # noqa: BLE001 - the kernel is shutting down
                return
            tick += 1
            time.sleep(self.REFRESH_S)
        if self.widget.comm is not None:
            self.refresh()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        data = {"text/plain": self.text.text(), "text/html": self.text._repr_html_()}
        if self.widget is not None:
            data[WIDGET_VIEW] = _view(self.widget)
        return data

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.text.text())


STEP = re.compile(r"\bStep (\d+)/(\d+)\b")
"""A build step in progress text (Docker's build log: ``Step 3/9 : RUN ...``)."""


class StartProgress:
    """While a session's sandbox starts: a progress bar, the elapsed time, and the latest
    progress text the backend reports (the docker backend's image build). It appears only when
    the start is slow (:attr:`SHOW_AFTER_S`) or the backend reports progress, and is removed
    when the start ends (``clear_output``: it comes before any output of the cell), so a
    notebook keeps only the cell's own outputs. In a terminal: lines on stderr.

    Use as a context manager; :meth:`take` is the ``handle`` of :func:`sandbox_kernel.frontdoors.magics.run.wait`.
    """

    SHOW_AFTER_S = 2.0

    def __init__(self, session: str, backend: str) -> None:
        self.title = f"Starting a {backend} sandbox for session {session!r}"
        self.detail = ""
        self.started = time.monotonic()
        self.in_kernel = getattr(get_ipython(), "kernel", None) is not None
        self.use_widgets = widgets_available()
        self.widget: Any = None
        self.display_id = f"sandbox-start-{id(self):x}"
        self._done, self._lock, self._shown = threading.Event(), threading.Lock(), False

    def __enter__(self) -> StartProgress:
        threading.Thread(target=self._tick, name="sandbox-start-progress", daemon=True).start()
        return self

    def _tick(self) -> None:
        if not self._done.wait(self.SHOW_AFTER_S):
            self._appear()
        while not self._done.wait(0.5):
            self._show()

    def _appear(self) -> None:
        with self._lock:
            if self._shown or self._done.is_set():
                return
            self._shown = True
            if self.use_widgets:
                import ipywidgets as w

                self.bar = w.IntProgress(value=1, min=0, max=1, bar_style="info", layout=w.Layout(width="240px"))
                self.label = w.HTML(html.escape(self.title + "...", quote=False))
                self.widget = w.HBox([self.bar, self.label])
                display({"text/plain": self.title + "...", WIDGET_VIEW: _view(self.widget)}, raw=True,
                        display_id=self.display_id)
            elif self.in_kernel:
                display({"text/plain": self.title + "..."}, raw=True, display_id=self.display_id)
            else:
                print(self.title + "...", file=sys.stderr)

    def _text(self) -> str:
        elapsed = f"{self.title}... {time.monotonic() - self.started:.0f} s"
        return elapsed + (f"\n{self.detail}" if self.detail else "")

    def _show(self) -> None:
        if not self._shown:
            return
        if self.widget is not None:
            self.label.value = "<br>".join(html.escape(line, quote=False) for line in self._text().splitlines())
        elif self.in_kernel:
            update_display({"text/plain": self._text()}, raw=True, display_id=self.display_id)

    def take(self, event: Event) -> None:
        """A progress event from the backend (an updating display, or a stream line)."""
        if isinstance(event, Display):
            self.detail = str(event.data.get("text/plain", "")).strip()
        elif isinstance(event, Stream):
            self.detail = event.text.strip()
        else:
            return
        self._appear()
        if self.widget is not None and (step := STEP.search(self.detail)):
            self.bar.max, self.bar.value = int(step.group(2)), int(step.group(1))
        if not self.in_kernel:
            print(self.detail, file=sys.stderr)
        self._show()

    def __exit__(self, *exc_info: object) -> None:
        with self._lock:
            self._done.set()
        if self.widget is not None:
            for widget in (self.widget, self.bar, self.label):
                widget.close()
        if self._shown and self.in_kernel:
            clear_output()
