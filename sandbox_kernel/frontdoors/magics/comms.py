"""Comms (ipywidgets) between the host kernel's page and a ``%%sandbox`` session's sandbox.

The host is a plain ipykernel: the page talks to *its* comm manager. A comm the sandbox opens
is published on the host's IOPub as it is, and a :class:`CommProxy` with the same comm id is
registered in the host's comm manager, so the page's ``comm_msg``/``comm_close`` for it reach
:class:`CommRelay`, which sends them into that session's sandbox. Both ways pass the session's
cell pipeline (:mod:`sandbox_kernel.session.pipeline`): the widget rules of the output policy apply
exactly as on the sandbox kernel.

Threads: cell events are shown on the main thread (:mod:`sandbox_kernel.frontdoors.magics.run`); a page's message is
handled on the main thread, which waits for the sandbox to go idle for it (as a plain kernel
runs a widget callback) and shows what it produced; what the sandbox sends outside any request
(a sandbox thread moving a widget) is published from the loop thread (ipykernel's IOPub socket
is thread-safe: it hands messages to its IO thread).
"""

from __future__ import annotations

import contextlib
import queue
from collections.abc import Callable
from typing import Any

from sandbox_kernel.backends.base import Backend, request_msg_id
from sandbox_kernel.core.errors import SandboxError
from sandbox_kernel.core.events import Comm, Event
from sandbox_kernel.core.iopub import to_iopub
from sandbox_kernel.session.pipeline import OutputPipeline


def host_kernel() -> Any:
    """The host's ipykernel (with a comm manager), or None (terminal IPython)."""
    from IPython import get_ipython

    kernel = getattr(get_ipython(), "kernel", None)
    return kernel if getattr(kernel, "comm_manager", None) is not None else None


def host_parent() -> dict:
    """The host kernel's request being served now (main thread: the cell's ``execute_request``),
    or ``{}``."""
    from IPython import get_ipython

    kernel = getattr(get_ipython(), "kernel", None)
    return (kernel.get_parent("shell") if kernel is not None else None) or {}


class CommProxy:
    """The host's stand-in for one sandbox comm, registered in the host kernel's comm manager
    under the sandbox comm's id (the manager calls :meth:`handle_msg` / :meth:`handle_close`
    for the page's ``comm_msg`` / ``comm_close``; ``comm_info_request`` lists it)."""

    def __init__(self, relay: CommRelay, comm_id: str, target_name: str) -> None:
        self.relay, self.comm_id, self.target_name = relay, comm_id, target_name
        self._closed = False

    def handle_msg(self, msg: dict) -> None:
        self.relay.from_page("comm_msg", msg)

    def handle_close(self, msg: dict) -> None:
        self._closed = True
        self.relay.proxies.pop(self.comm_id, None)
        self.relay.from_page("comm_close", msg)


class CommRelay:
    """One session's comms between the host kernel's page and its sandbox.

    Args:
        kernel: the host ipykernel (its ``comm_manager``, ``session`` and ``iopub_socket``).
        backend: the session's backend (it must declare ``capabilities.comms``).
        pipeline: the session's output pipeline (policy, widget rules, outside-cell budget).
        wait: ``wait(coro, inbox, handle)``, :func:`sandbox_kernel.frontdoors.magics.run.wait` bound to the loop thread:
            runs ``coro`` there and hands what it puts on ``inbox`` to ``handle`` on this thread.
        max_output_bytes: ``() -> int``, the output budget of one widget event (0: no limit).
    """

    def __init__(self, kernel: Any, backend: Backend, pipeline: OutputPipeline,
                 wait: Callable[..., Any], max_output_bytes: Callable[[], int]) -> None:
        self.kernel, self.backend, self.pipeline = kernel, backend, pipeline
        self._wait, self._max_output_bytes = wait, max_output_bytes
        self.proxies: dict[str, CommProxy] = {}
        self.parent: dict = {}  # the latest host request: the parent of what comes outside any request
        backend.set_comm_handler(self._unsolicited)

    # -- sandbox -> page ---------------------------------------------------------------------
    def publish(self, event: Event, parent: dict | None = None) -> None:
        """Publish one policed event on the host's IOPub (parent: the latest host request);
        a ``comm_open``/``comm_close`` also registers/unregisters its proxy."""
        if isinstance(event, Comm):
            self._track(event)
        msg_type, content = to_iopub(event)
        comm = isinstance(event, Comm)
        self.kernel.session.send(self.kernel.iopub_socket, msg_type, content, parent or self.parent,
                                 metadata=event.metadata if comm else None,
                                 buffers=list(event.buffers) if comm else None)

    def serving(self, parent: dict) -> None:
        """The host is now serving ``parent`` (a cell): it parents later unsolicited output."""
        self.parent = parent or {}

    def _track(self, event: Comm) -> None:
        comm_id = event.content.get("comm_id")
        manager = self.kernel.comm_manager
        if event.msg_type == "comm_open" and comm_id:
            proxy = self.proxies[comm_id] = CommProxy(self, comm_id, event.content.get("target_name", ""))
            manager.register_comm(proxy)
        elif event.msg_type == "comm_close" and (proxy := self.proxies.pop(comm_id, None)) is not None:
            proxy._closed = True
            if manager.comms.get(comm_id) is proxy:
                del manager.comms[comm_id]

    def _unsolicited(self, event: Event, parent_id: str | None) -> None:
        """What the sandbox sends outside any request (loop thread): policed, then published."""
        self.pipeline.outside_cell(event, self.publish)

    # -- page -> sandbox ---------------------------------------------------------------------
    def from_page(self, msg_type: str, msg: dict) -> None:
        """Send the page's ``comm_msg``/``comm_close`` into the sandbox and show what handling
        it produced (an ``echo_update``, ``interact``'s output) under its own output budget,
        parented by the page's message (an ``Output`` widget captures by that msg_id)."""
        if not self.backend.started:
            return
        content = msg["content"]
        self.pipeline.from_frontend(msg_type, content)
        inbox: queue.Queue = queue.Queue()
        outputs = self.pipeline.cell(inbox.put, self._max_output_bytes(), scope="of this widget event",
                                     say_changes=False)
        buffers = [bytes(b) for b in msg.get("buffers") or []]
        msg_id = msg.get("header", {}).get("msg_id")

        async def send() -> None:
            token = request_msg_id.set(msg_id)
            try:
                await self.backend.send_comm(msg_type, content, msg.get("metadata"), buffers, emit=outputs.emit)
            finally:
                request_msg_id.reset(token)
                outputs.finish()

        with contextlib.suppress(SandboxError):
            self._wait(send(), inbox=inbox, handle=lambda event: self.publish(event, msg))
        while True:  # the closing marker, put after the wait ended
            try:
                self.publish(inbox.get_nowait(), msg)
            except queue.Empty:
                break

    # -- the session ends ----------------------------------------------------------------------
    def close_all(self) -> None:
        """The sandbox's comms are gone (stop, restart): close them in the page and forget them
        (the closes are parented by the host request being served: the ``%sandbox`` line)."""
        for comm_id in list(self.proxies):
            self.publish(Comm("comm_close", {"comm_id": comm_id, "data": {}}), host_parent() or None)

    def detach(self) -> None:
        self.close_all()
        self.backend.set_comm_handler(None)
