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

from sandbox_kernel.core.errors import SandboxError
from sandbox_kernel.core.events import Comm, Event
from sandbox_kernel.core.iopub import publish
from sandbox_kernel.session.session import SandboxSession


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
        sandbox: the session's :class:`~sandbox_kernel.session.session.SandboxSession` (its
            backend carries comms; its pipeline holds the policy and widget rules).
        wait: ``wait(coro, inbox, handle)``, :func:`sandbox_kernel.frontdoors.magics.run.wait`
            bound to the loop thread: runs ``coro`` there and hands what it puts on ``inbox`` to
            ``handle`` on this thread.
    """

    def __init__(self, kernel: Any, sandbox: SandboxSession, wait: Callable[..., Any]) -> None:
        self.kernel, self.sandbox, self._wait = kernel, sandbox, wait
        self.proxies: dict[str, CommProxy] = {}
        sandbox.set_outside_sink(self._unsolicited)

    # -- sandbox -> page ---------------------------------------------------------------------
    def publish(self, event: Event, parent: dict | None = None) -> None:
        """Publish one policed event on the host's IOPub (parent: the latest host request);
        a ``comm_open``/``comm_close`` also registers/unregisters its proxy."""
        if isinstance(event, Comm):
            self._track(event)
        publish(self.kernel.session, self.kernel.iopub_socket, event, parent or host_parent())

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

    def _unsolicited(self, event: Event, request: dict | None) -> None:
        """What the sandbox sends outside any request (loop thread), policed: published with the
        host request it belongs to (the latest the session served)."""
        self.publish(event, request or {})

    # -- page -> sandbox ---------------------------------------------------------------------
    def from_page(self, msg_type: str, msg: dict) -> None:
        """Send the page's ``comm_msg``/``comm_close`` into the sandbox and show what handling
        it produced (an ``echo_update``, ``interact``'s output) under its own output budget,
        parented by the page's message (an ``Output`` widget captures by that msg_id)."""
        inbox: queue.Queue = queue.Queue()
        send = self.sandbox.comm(msg_type, msg["content"], inbox.put, request=msg, metadata=msg.get("metadata"),
                                 buffers=[bytes(b) for b in msg.get("buffers") or []])
        with contextlib.suppress(SandboxError):
            self._wait(send, inbox=inbox, handle=lambda event: self.publish(event, msg))
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
        self.sandbox.set_outside_sink(None)
