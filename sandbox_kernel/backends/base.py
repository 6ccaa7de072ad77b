"""The backend contract: one async class every sandbox implements.

Both front doors (the kernel in :mod:`sandbox_kernel.kernel` and the ``%%sandbox`` magic)
drive a backend only through this API and only consume :mod:`sandbox_kernel.events`.
Every option is a traitlets trait, so it is set as ``--DockerBackend.memory_limit=...`` on a
kernelspec's argv, in a Jupyter config file, or as a keyword argument.

Lifecycle, as the callers use it::

    async with backend:                    # start() ... shutdown()
        outcome = await backend.execute("1 + 1", emit)

All methods are called from one asyncio event loop (the kernel's, or the magic's loop thread).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from traitlets import Unicode
from traitlets.config import LoggingConfigurable

from ..errors import NotSupported
from ..events import Emit, Event, Outcome

StdinHandler = Callable[[str, bool], Awaitable[str]]
"""``await stdin(prompt, password) -> str``: asks the notebook user for one line of input."""

request_msg_id: ContextVar[str | None] = ContextVar("sandbox_kernel_request_msg_id", default=None)
"""The msg_id of the frontend's request being served (``execute_request``, ``comm_msg``, ...),
set by the kernel around its backend calls. Backends that speak the Jupyter protocol give the
request they send into the sandbox the same msg_id, so the sandbox's outputs name the
frontend's request as their parent: ipywidgets routes ``echo_update`` and the capture of an
``Output`` widget (``interact``) by that msg_id."""


class Backend(LoggingConfigurable):
    """Base class of sandbox backends.

    Subclasses implement :meth:`start`, :meth:`shutdown`, :meth:`execute`, :meth:`interrupt`
    and :meth:`restart`; the optional operations default to raising
    :class:`~sandbox_kernel.errors.NotSupported`.
    """

    name = "base"
    """The backend's registry name (entry point ``sandbox_kernel.backends``)."""

    session = Unicode("default", help="Name of the session this sandbox belongs to (labels, logs).").tag(
        config=True
    )

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        """Create the sandbox and wait until it can run code. Idempotent.

        Raises:
            BackendUnavailable: a package, engine or credential is missing (the message says
                how to fix it).
            SandboxStartError: the sandbox could not be created or did not become ready.
        """
        raise NotImplementedError("The 'start' method must be implemented.")

    async def shutdown(self) -> None:
        """Stop the sandbox and release everything it holds. Idempotent; never raises for a
        sandbox that is already gone."""
        raise NotImplementedError("The 'shutdown' method must be implemented.")

    async def __aenter__(self) -> Backend:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.shutdown()

    @property
    def started(self) -> bool:
        """True between a successful :meth:`start` and :meth:`shutdown`."""
        return False

    # -- running code ----------------------------------------------------------------------
    async def execute(
        self,
        code: str,
        emit: Emit,
        *,
        timeout: float | None = None,
        stdin: StdinHandler | None = None,
    ) -> Outcome:
        """Run ``code`` in the sandbox, calling ``emit(event)`` for each output as it arrives.

        Args:
            code: the cell's source.
            emit: called with each :data:`~sandbox_kernel.events.Event`, in order, live.
            timeout: seconds the cell may run; past it the sandbox is interrupted. None: no limit.
            stdin: answers ``input()``/``getpass()`` prompts; None means the frontend does not
                accept input (the sandbox raises StdinNotImplementedError in the user's code).

        Returns:
            The :class:`~sandbox_kernel.events.Outcome`. An exception in the user's code is
            ``status="error"``, never a raised exception.

        Raises:
            ExecutionTimeout: the cell ran past ``timeout`` (the state is kept).
            SandboxDied: the sandbox stopped during the cell (the state is lost).
            SandboxError: any other infrastructure failure.
        """
        raise NotImplementedError("The 'execute' method must be implemented.")

    async def interrupt(self) -> None:
        """Interrupt the running cell (like Ctrl-C); the session's state survives.
        Safe to call while :meth:`execute` is pending and when nothing runs."""
        raise NotImplementedError("The 'interrupt' method must be implemented.")

    async def restart(self) -> None:
        """Replace the interpreter by a fresh one with the same settings; state is lost."""
        await self.shutdown()
        await self.start()

    # -- optional operations ---------------------------------------------------------------
    async def complete(self, code: str, cursor_pos: int) -> dict[str, Any]:
        """Completions at ``cursor_pos`` (characters): the content of a ``complete_reply``
        (``matches``, ``cursor_start``, ``cursor_end``, ``metadata``, ``status``)."""
        raise NotSupported(self.name, "completion")

    async def inspect(self, code: str, cursor_pos: int, detail_level: int = 0) -> dict[str, Any]:
        """Help on the object at ``cursor_pos``: the content of an ``inspect_reply``."""
        raise NotSupported(self.name, "inspection")

    async def is_complete(self, code: str) -> dict[str, Any]:
        """Whether ``code`` is a complete statement: the content of an ``is_complete_reply``
        (``status``: complete, incomplete, invalid or unknown; ``indent``)."""
        raise NotSupported(self.name, "is_complete")

    async def upload(self, local: str | Path, remote: str) -> str:
        """Copy the host file ``local`` to ``remote`` (relative paths: the sandbox's working
        directory). Returns the path inside the sandbox.

        Raises:
            FileNotFoundError: ``local`` does not exist.
            NotSupported: the backend has no file transfer.
        """
        raise NotSupported(self.name, "file upload")

    async def download(self, remote: str, local: str | Path) -> Path:
        """Copy the sandbox file ``remote`` to the host path ``local``; returns that path.

        Raises:
            FileNotFoundError: ``remote`` does not exist in the sandbox.
            NotSupported: the backend has no file transfer.
        """
        raise NotSupported(self.name, "file download")

    # -- the front door's output budget ----------------------------------------------------
    _output_budget: tuple[int, str] | None = None

    def set_output_budget(self, max_bytes: int, setting: str) -> None:
        """Tell the backend the output budget of the front door that created it (bytes one
        cell may show, 0: none) and the option that sets it (``"SandboxKernel.max_output_bytes"``),
        so it can refuse single messages far over the budget before holding them in host
        memory (:attr:`KernelClientBackend.max_message_bytes`), and name that option when it
        does. Call before :meth:`start`; a backend that has no use for it ignores it."""
        self._output_budget = (max_bytes, setting)

    # -- progress of the sandbox's own set-up ------------------------------------------------
    _progress_handler: Emit | None = None

    def set_progress_handler(self, handler: Emit | None) -> None:
        """Receive the events a backend reports while it prepares a sandbox outside
        :meth:`execute` (the docker backend's image build during :meth:`start`), so the front
        door shows them in the cell that caused the start. None: they are only logged."""
        self._progress_handler = handler

    # -- comms (ipywidgets) ----------------------------------------------------------------
    supports_comms = False
    """True when :meth:`send_comm` works and comm traffic is reported to the comm handler."""

    def set_comm_handler(self, handler: Callable[[Event, str | None], None] | None) -> None:
        """Receive ``handler(event, parent_msg_id)`` for what arrives outside any request: comm
        messages (a widget changed by a sandbox thread) and outputs of the sandbox's threads.
        ``parent_msg_id`` is the msg_id of the request the sandbox names as the parent (see
        :data:`request_msg_id`), or None. During a request its events go to its ``emit``."""

    async def send_comm(self, msg_type: str, content: dict[str, Any], metadata: dict[str, Any] | None = None,
                        buffers: list[bytes] | None = None, emit: Emit | None = None) -> None:
        """Send a frontend's ``comm_open``/``comm_msg``/``comm_close`` into the sandbox.

        With ``emit``, return once the sandbox has handled it, calling ``emit`` with what the
        handling produced (an ``echo_update``, an ``interact`` callback's output).

        Raises:
            NotSupported: the backend cannot carry comms.
        """
        raise NotSupported(self.name, "comms (ipywidgets)")

    async def comm_info(self, target_name: str | None = None) -> dict[str, Any]:
        """The content of a ``comm_info_reply`` from the sandbox (``comms``: ``{comm_id: {target_name}}``)."""
        raise NotSupported(self.name, "comms (ipywidgets)")

    # -- the sandbox's own kernel ------------------------------------------------------------
    kernel_info: dict[str, Any] | None = None
    """The content of the sandbox kernel's ``kernel_info_reply`` (``language_info``, ``banner``,
    ...) while the sandbox runs; None when unknown. The wrapper kernel reports its language."""

    @property
    def runs_other_language(self) -> bool:
        """True when the sandbox is configured to run a kernel whose language may not be Python
        (the docker backend's ``kernel_name``): the wrapper starts it before answering
        ``kernel_info_request``, so frontends learn the language when they connect."""
        return False

    # -- description -------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """A short description for banners and ``%sandbox status``: ``{"backend", "sandbox_id",
        "limits", ...}``; values are JSON-able and never hold secrets."""
        return {"backend": self.name, "session": self.session}

    async def usage(self) -> dict[str, int] | None:
        """The sandbox's current resource use, for ``%sandbox status``: ``{"memory_bytes": n}``;
        None when the backend cannot tell or the sandbox is not running."""
        return None
