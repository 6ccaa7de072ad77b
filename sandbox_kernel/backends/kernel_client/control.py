"""The sandbox kernel's control channel: requests answered by their reply (``interrupt_request``,
``debug_request``, the kernel-subshell requests of JEP 91), and the subshells made there for the
frontend's own.

One reader routes every control reply to the request it answers by the parent header's msg_id,
so an interrupt, a debugger step and a subshell request may be in flight together (the kernel
serves control messages one at a time, in order).
Spec: https://jupyter-client.readthedocs.io/en/latest/messaging.html#kernel-subshells
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from ...core.errors import SandboxError
from .message_bound import Request
from .messages import receive


async def route_replies(channel: Any, requests: dict[str, Request]) -> None:
    """Give each reply on ``channel`` (shell or control) to the request it answers, by the parent
    header's msg_id; runs until cancelled."""
    while True:
        msg = await receive(channel)
        request = requests.get(msg["parent_header"].get("msg_id"))
        if request is not None and not request.reply.done():
            request.reply.set_result(msg)


Wait = Callable[[asyncio.Future, "float | None"], Awaitable[None]]
"""``await wait(future, timeout)``: returns when ``future`` is done or ``timeout`` seconds passed;
raises SandboxDied when the kernel dies first."""


class ControlChannel:
    """Requests on one connection's control channel.

    Args:
        client: the connection's ``AsyncKernelClient``.
        requests: the backend's requests in flight by msg_id (shared with its other readers and
            its drop recovery, which ends them when a connection is lost).
        wait: see :data:`Wait`.
    """

    def __init__(self, client: Any, requests: dict[str, Request], wait: Wait) -> None:
        self._client, self._requests, self._wait = client, requests, wait

    async def read(self) -> None:
        """Route each control reply to its request; runs until cancelled."""
        await route_replies(self._client.control_channel, self._requests)

    async def request(self, msg_type: str, content: dict[str, Any], timeout: float | None) -> dict[str, Any]:
        """Send ``msg_type`` with ``content``; the content of its reply.

        Raises:
            SandboxError: no reply within ``timeout`` seconds (None: no limit).
            SandboxDied: the kernel died meanwhile."""
        msg = self._client.session.msg(msg_type, content)
        msg_id = msg["header"]["msg_id"]
        request = self._requests[msg_id] = Request()
        try:
            self._client.control_channel.send(msg)
            reply = asyncio.ensure_future(asyncio.shield(request.reply))
            await self._wait(reply, timeout)
            if not reply.done():
                reply.cancel()
                raise SandboxError(f"The sandbox did not answer a {msg_type} within {timeout:g} s.")
            return reply.result()["content"]
        finally:
            request.iopub.close()
            self._requests.pop(msg_id, None)


class Subshells:
    """The sandbox kernel's subshells standing for the frontend's, made at the first request of
    each (``create_subshell_request``) and deleted with it; None stands for the main shell.

    Args:
        control: the connection's control channel.
        available: the sandbox's kernel lists ``"kernel subshells"`` in its ``supported_features``
            (else every request goes to its main shell).
        timeout: seconds a subshell request may take.
    """

    def __init__(self, control: ControlChannel, available: bool, timeout: float) -> None:
        self._control, self.available, self._timeout = control, available, timeout
        self._made: dict[str, asyncio.Future] = {}

    async def inner(self, outer: str | None) -> str | None:
        """The sandbox kernel's subshell id for the frontend's subshell ``outer``.

        Raises:
            SandboxError: the kernel refused or did not answer."""
        if outer is None or not self.available:
            return None
        if outer not in self._made:
            self._made[outer] = asyncio.ensure_future(self._control.request("create_subshell_request", {},
                                                                            self._timeout))
        made = self._made[outer]
        try:
            reply = await asyncio.shield(made)
        except SandboxError:
            if self._made.get(outer) is made:
                del self._made[outer]
            raise
        if reply.get("status") != "ok" or not isinstance(reply.get("subshell_id"), str):
            if self._made.get(outer) is made:  # a concurrent waiter may have removed it
                del self._made[outer]
            raise SandboxError(f"The sandbox's kernel made no subshell: {reply.get('evalue', reply.get('status'))}.")
        return reply["subshell_id"]

    async def delete(self, outer: str) -> None:
        """Delete the subshell standing for ``outer``, if one was made."""
        made = self._made.pop(outer, None)
        if made is None:
            return
        try:
            reply = await made
        except SandboxError:
            return
        if isinstance(reply.get("subshell_id"), str):
            await self._control.request("delete_subshell_request", {"subshell_id": reply["subshell_id"]},
                                        self._timeout)
