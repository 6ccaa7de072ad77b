"""The backend contract: one async class every sandbox implements.

A :class:`~sandbox_kernel.session.session.SandboxSession` drives a backend only through this API
and only consumes :mod:`sandbox_kernel.core.events`; every front door (the kernel, the ``%%sandbox``
magic, the Python API and the MCP server) owns such a session and never a backend.
Every option is a traitlets trait, so it is set as ``--DockerBackend.memory_limit=...`` on a
kernelspec's argv, in a Jupyter config file, or as a keyword argument.

Lifecycle, as the callers use it::

    async with backend:                    # start() ... shutdown()
        outcome = await backend.execute("1 + 1", emit)

All methods are called from one asyncio event loop (the kernel's main loop, the magic's loop
thread, or the API's shared loop thread).
What a backend can do beyond the five required methods is declared up front in its
:class:`Capabilities`; the front doors read that instead of calling and catching
:class:`~sandbox_kernel.core.errors.NotSupported`.
"""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

from traitlets import Unicode, default
from traitlets.config import LoggingConfigurable

from ..core.errors import NotSupported
from ..core.events import Emit, Event, Outcome
from ..runtime import lock
from .workspace.options import (
    env_trait,
    workspace_dir_default,
    workspace_dir_trait,
    workspace_max_bytes_trait,
    workspace_trait,
)

StdinHandler = Callable[[str, bool], Awaitable[str]]
"""``await stdin(prompt, password) -> str``: asks the notebook user for one line of input."""

request_msg_id: ContextVar[str | None] = ContextVar("sandbox_kernel_request_msg_id", default=None)
"""The msg_id of the frontend's request being served (``execute_request``, ``comm_msg``, ...),
set by the session around its backend calls (``SandboxSession.serving``). Backends that speak the
Jupyter protocol give the request they send into the sandbox the same msg_id, so the sandbox's
outputs name the frontend's request as their parent: ipywidgets routes ``echo_update`` and the capture of an
``Output`` widget (``interact``) by that msg_id."""

request_subshell_id: ContextVar[str | None] = ContextVar("sandbox_kernel_request_subshell_id", default=None)
"""The kernel subshell (JEP 91) the frontend's request being served came on, None for the main
shell; set with :data:`request_msg_id`. A backend with ``capabilities.subshells`` serves it on a
subshell of the sandbox's kernel that stands for this one, concurrently with its main shell."""


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do beyond the five required methods, declared by each backend class
    as its :attr:`Backend.capabilities`. A front door reads it before it calls; the optional
    methods of a backend that lacks one raise :class:`~sandbox_kernel.core.errors.NotSupported`.
    ``tests/test_contract.py`` checks every backend's declaration against its behaviour.
    """

    completion: bool = False
    """:meth:`Backend.complete` and :meth:`Backend.is_complete` answer from the sandbox."""
    inspection: bool = False
    """:meth:`Backend.inspect` answers from the sandbox."""
    stdin: bool = False
    """``input()``/``getpass()`` in the sandbox reach :meth:`Backend.execute`'s ``stdin``; without
    it they raise StdinNotImplementedError in the user's code."""
    comms: bool = False
    """Comm messages (ipywidgets) travel both ways: :meth:`Backend.send_comm`,
    :meth:`Backend.comm_info` and the comm handler."""
    display_updates: bool = False
    """Display ids, ``update_display_data``, ``clear_output`` and output metadata survive."""
    files: bool = False
    """:meth:`Backend.upload` and :meth:`Backend.download` copy files."""
    pause: bool = False
    """The sandbox can be paused and later resumed with its state; ``paused_sandboxes()`` lists
    a session's paused ones."""
    reattach: bool = False
    """A later kernel can attach to the running (or paused) sandbox by its id (an option of
    the backend: e2b's ``sandbox_id``, the gateway's ``kernel_id``)."""

    pool: bool = False
    """The backend keeps warm pools (its ``pool_size`` option: :mod:`~sandbox_kernel.backends.pool`),
    and its class answers ``sandbox-kernel pool``: classmethods ``pool_status(asked) -> [rows]``
    and ``pool_stop(asked) -> [names]``."""
    payloads: bool = False
    """:meth:`Backend.execute` honours ``silent``, ``store_history`` and ``user_expressions``, and
    its Outcome carries the ``execute_reply``'s payloads (the pager's ``page``, ``set_next_input``,
    ``edit``, ``ask_exit``) and evaluated ``user_expressions``."""
    history: bool = False
    """:meth:`Backend.history` answers a ``history_request`` from the sandbox's IPython."""
    subshells: bool = False
    """A request from a frontend's kernel subshell (:data:`request_subshell_id`) runs on a subshell of
    the sandbox's kernel, concurrently with its main shell (JEP 91); :meth:`Backend.delete_subshell`."""
    debugger: bool = False
    """:meth:`Backend.debug_request` reaches the sandbox kernel's debugger, whose events come to the
    comm handler as :class:`~sandbox_kernel.core.events.DebugEvent` (JupyterLab's visual debugger)."""

    egress_update: bool = False
    """The hosts a running sandbox may reach (its ``allow_hosts`` option) can be changed without
    losing its state, in force within a second: :meth:`Backend.set_allow_hosts`."""

    checkpoints: bool = False
    """The sandbox's whole state can be checkpointed between cells and restored, and a dead
    kernel's state comes back from its last checkpoint: :meth:`Backend.checkpoint`,
    :meth:`Backend.list_checkpoints`, :meth:`Backend.restore`, :meth:`Backend.drop_checkpoint`
    (docs/how-to/checkpoints.md)."""

    def names(self) -> list[str]:
        """The names of the capabilities this backend has, in declaration order."""
        return [name for name, has in asdict(self).items() if has]


class _BackendMeta(ABCMeta, type(LoggingConfigurable)):
    """Both metaclasses: traitlets' (configurable traits) and ABC's (abstract methods)."""


class Backend(LoggingConfigurable, metaclass=_BackendMeta):
    """Base class of sandbox backends.

    Subclasses implement :meth:`start`, :meth:`shutdown`, :meth:`execute`, :meth:`interrupt`
    and :meth:`restart` (abstract: a class missing one cannot be instantiated) and declare
    :attr:`capabilities`; the optional operations default to raising
    :class:`~sandbox_kernel.core.errors.NotSupported`.
    """

    name = "base"
    """The backend's registry name (entry point ``sandbox_kernel.backends``)."""

    capabilities: ClassVar[Capabilities] = Capabilities()
    """What this backend can do beyond the required methods (see :class:`Capabilities`)."""

    session = Unicode("default", help="Name of the session this sandbox belongs to (the magic's --name; in its "
                                      "labels or metadata, container names and logs).").tag(
        config=True
    )
    workspace = workspace_trait()
    workspace_dir = workspace_dir_trait()
    workspace_max_bytes = workspace_max_bytes_trait()
    env = env_trait()

    @default("workspace_dir")
    def _workspace_dir_default(self) -> str:
        return workspace_dir_default()

    workspace_view: Any = None
    """What the working directory shows of the host while started
    (:class:`~sandbox_kernel.backends.workspace.View`), or None (no workspace)."""

    # -- lifecycle -------------------------------------------------------------------------
    @abstractmethod
    async def start(self) -> None:
        """Create the sandbox and wait until it can run code. Idempotent.

        Raises:
            BackendUnavailable: a package, engine or credential is missing (the message says
                how to fix it).
            SandboxStartError: the sandbox could not be created or did not become ready.
        """

    @abstractmethod
    async def shutdown(self) -> None:
        """Stop the sandbox and release everything it holds. Idempotent; never raises for a
        sandbox that is already gone."""

    @classmethod
    def remove_leftovers(cls) -> list[str]:
        """Remove what this backend's sandboxes left on this host when their process was killed
        before it could remove them (its owner is gone); the names removed. Blocking. Called by
        a killed kernel's finisher (:mod:`sandbox_kernel.frontdoors.kernel.finisher`); a backend
        whose sandboxes leave nothing here keeps this default, which removes nothing."""
        return []

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
    @abstractmethod
    async def execute(
        self,
        code: str,
        emit: Emit,
        *,
        timeout: float | None = None,
        stdin: StdinHandler | None = None,
        silent: bool = False,
        store_history: bool = True,
        user_expressions: dict[str, str] | None = None,
    ) -> Outcome:
        """Run ``code`` in the sandbox, calling ``emit(event)`` for each output as it arrives.

        Args:
            code: the cell's source.
            emit: called with each :data:`~sandbox_kernel.core.events.Event`, in order, live.
            timeout: seconds the cell may run; past it the sandbox is interrupted. None: no limit.
            stdin: answers ``input()``/``getpass()`` prompts; None means the frontend does not
                accept input (the sandbox raises StdinNotImplementedError in the user's code).
            silent, store_history, user_expressions: as the ``execute_request`` of the messaging
                spec; honoured by a backend with ``capabilities.payloads``, else ignored.

        Returns:
            The :class:`~sandbox_kernel.core.events.Outcome`. An exception in the user's code is
            ``status="error"``, never a raised exception.

        Raises:
            ExecutionTimeout: the cell ran past ``timeout`` (the state is kept; ``restarted``
                when an interrupt could not stop it and the sandbox was restarted).
            SandboxDied: the sandbox stopped during the cell (the state is lost).
            SandboxError: any other infrastructure failure.
        """

    @abstractmethod
    async def interrupt(self) -> None:
        """Interrupt the running cell (like Ctrl-C); the session's state survives.
        Safe to call while :meth:`execute` is pending and when nothing runs."""

    @abstractmethod
    async def restart(self) -> None:
        """Replace the interpreter by a fresh one with the same settings; state is lost."""

    # -- optional operations ---------------------------------------------------------------
    def require(self, capability: str, what: str) -> None:
        """Raise before a call that needs ``capability`` (a :class:`Capabilities` field) when
        this backend does not declare it; ``what`` names the operation in the message.

        Raises:
            NotSupported: "The NAME backend does not support WHAT."
        """
        if not getattr(self.capabilities, capability):
            raise NotSupported(self.name, what)

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

    async def run_silently(self, code: str) -> dict[str, Any]:
        """Run ``code`` for the front door's own purposes, out of the user's sight: no outputs,
        no history entry, no new execution count. Returns the ``execute_reply`` content
        (``status``, ...).

        Raises:
            NotSupported: the backend cannot run code that way.
        """
        raise NotSupported(self.name, "silent execution")

    async def upload(self, local: str | Path, remote: str) -> str:
        """Copy the host file ``local`` to ``remote`` (relative paths: the sandbox's working
        directory). Returns the path inside the sandbox.

        Raises:
            FileNotFoundError: ``local`` does not exist.
            NotSupported: the backend has no file transfer.
        """
        raise NotSupported(self.name, "file upload")

    async def download(self, remote: str, local: str | Path, *, max_bytes: int = 0) -> Path:
        """Copy the sandbox file ``remote`` to the host path ``local``; returns that path.

        Args:
            max_bytes: the most bytes to read (0: no bound); a larger file is refused as it is
                read, and nothing is left at ``local``.

        Raises:
            FileNotFoundError: ``remote`` does not exist in the sandbox.
            FileTooLarge: ``remote`` holds more than ``max_bytes``.
            NotSupported: the backend has no file transfer.
        """
        raise NotSupported(self.name, "file download")

    async def set_allow_hosts(self, hosts: list[str]) -> list[str]:
        """Replace the hosts the sandbox may reach (``allow_hosts`` entries: names, ``*.domain``,
        addresses, networks, presets such as ``pypi``). A running sandbox keeps its state and the
        new list is in force when this returns; one not started yet uses it when it starts. An
        implementation calls :meth:`check_lock` before it changes anything.

        Returns:
            The entries now in force, presets expanded.

        Raises:
            EgressError: a bad entry, or a running sandbox that was started without any (it has
                no way out to change: the list applies after a restart, which loses the state).
            Locked: ``hosts`` are beyond the administrator's lock (nothing changed).
            NotSupported: the backend cannot change a running sandbox's hosts (``egress_update``).
        """
        raise NotSupported(self.name, "changing the allowed hosts of a running sandbox")

    # -- checkpoints (capabilities.checkpoints) -------------------------------------------------
    async def checkpoint(self, name: str | None = None, *, cell: int | None = None) -> Any:
        """Take a checkpoint of the sandbox's state now (between cells); returns the
        :class:`~sandbox_kernel.backends.checkpoint.Checkpoint`.

        Args:
            name: the checkpoint's name; an older one of that name is dropped.
            cell: the execution count of the cell that just ended (the table shows it).

        Raises:
            CheckpointError: it could not be taken (the reason).
            NotSupported: the backend keeps no checkpoints.
        """
        raise NotSupported(self.name, "checkpoints")

    async def list_checkpoints(self) -> list[Any]:
        """The checkpoints held, oldest first (:class:`~sandbox_kernel.backends.checkpoint.Checkpoint`,
        with the bytes each holds now); empty while the sandbox is not running.

        Raises:
            NotSupported: the backend keeps no checkpoints."""
        raise NotSupported(self.name, "checkpoints")

    async def restore(self, checkpoint: int) -> Any:
        """Replace the sandbox's state by checkpoint ``checkpoint`` (its ``id``), which stays for
        another restore; returns it. The next cell's number continues the session's.

        Raises:
            CheckpointError: no such checkpoint, or it could not be restored (the message says
                what runs now).
            NotSupported: the backend keeps no checkpoints."""
        raise NotSupported(self.name, "checkpoints")

    async def fork(self, count: int = 1) -> list[Backend]:
        """``count`` started backends, each running a copy of this sandbox's state now (a
        checkpoint made a kernel beside this one): try continuations side by side, then keep one
        (take a checkpoint in it and :meth:`restore` that here). Close each with ``shutdown``.

        Raises:
            CheckpointError: the copies could not be made.
            NotSupported: the backend keeps no checkpoints."""
        raise NotSupported(self.name, "checkpoints")

    async def drop_checkpoint(self, checkpoint: int) -> bool:
        """Drop checkpoint ``checkpoint`` (its ``id``); whether it was there.

        Raises:
            NotSupported: the backend keeps no checkpoints."""
        raise NotSupported(self.name, "checkpoints")

    def check_lock(self, **changes: Any) -> None:
        """Refuse ``changes`` to this backend's options (``allow_hosts=[...]``) that the
        administrator's lock does not allow, before they apply: ``make_backend``'s check, with
        these values in place of the current ones.

        Raises:
            Locked: one message naming each refused option (:mod:`sandbox_kernel.runtime.lock`).
        """
        lock.load().check_backend(self.name, self, changes)

    # -- what the front door answers -----------------------------------------------------
    warm_completion = False
    """Whether a Python sandbox answers one completion as soon as it starts, so a person's first
    Tab finds IPython's completer loaded (:meth:`KernelClientBackend._warm_completion`). Only the
    kernel front door answers completions (``make_backend(..., completions=True)``): elsewhere
    the warm-up would cost the sandbox 1.3-1.7 s of CPU for nothing, and a shutdown during it
    waits for its end (the kernel's process exits only once jedi's thread does)."""

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

    async def comm_settled(self, msg_id: str) -> bool:
        """Wait until the sandbox's kernel has answered the comm message ``msg_id``, which
        :meth:`send_comm` sent without waiting (a cell was running), with ``status: idle``; True
        then. False at once for any other message, and for a backend that cannot tell."""
        return False

    async def comm_info(self, target_name: str | None = None) -> dict[str, Any]:
        """The content of a ``comm_info_reply`` from the sandbox (``comms``: ``{comm_id: {target_name}}``)."""
        raise NotSupported(self.name, "comms (ipywidgets)")

    # -- what else a Jupyter frontend asks a kernel --------------------------------------------
    async def history(self, content: dict[str, Any]) -> dict[str, Any]:
        """The sandbox's ``history_reply`` content (``{"status", "history": [[session, line, input
        or [input, output]], ...]}``) for a ``history_request``'s ``content``."""
        raise NotSupported(self.name, "history")

    async def history_while_starting(self, content: dict[str, Any]) -> dict[str, Any] | None:
        """A ``history_reply`` content for a ``tail`` ``history_request`` that comes while the
        sandbox starts, read where the sandbox kernel's IPython keeps it, without that kernel; None
        (the default): the request waits for the start. jupyter-console asks for the tail as it
        starts and waits 1 s for it, since the kernel answers ``kernel_info`` before its sandbox
        is up (:meth:`SandboxKernel.kernel_info_request`)."""
        return None

    async def debug_request(self, content: dict[str, Any]) -> dict[str, Any]:
        """The sandbox kernel's ``debug_reply`` content for a ``debug_request``'s ``content`` (a
        Debug Adapter Protocol request, ``{"type": "request", "seq", "command", "arguments"}``)."""
        raise NotSupported(self.name, "the debugger")

    async def delete_subshell(self, subshell_id: str) -> None:
        """The frontend deleted its kernel subshell ``subshell_id``: release what stands for it."""
        raise NotSupported(self.name, "kernel subshells")

    # -- the sandbox's own kernel ------------------------------------------------------------
    kernel_info: dict[str, Any] | None = None
    """The content of the sandbox kernel's ``kernel_info_reply`` (``language_info``, ``banner``,
    ...) while the sandbox runs; None when unknown. The wrapper kernel reports its language."""

    @property
    def starts_at_launch(self) -> bool:
        """Whether the wrapper kernel starts this sandbox when it starts rather than at the first
        cell, unless ``SandboxKernel.start_sandbox_at_launch`` says otherwise: True when the
        backend keeps a warm pool (``pool_size`` > 0), since taking a pooled sandbox then overlaps
        the frontend's own start."""
        return getattr(self, "pool_size", 0) > 0

    @property
    def starts_quickly(self) -> bool:
        """Whether a start at launch is done well within JupyterLab's 1 s completer timeout of
        the frontend's first request (a child process, a take from a warm pool): the wrapper
        kernel then answers ``kernel_info`` without waiting for it (the frontend's own wait after
        that reply overlaps the start); otherwise it waits up to 2.5 s
        (:meth:`SandboxKernel.kernel_info_request`). True when the backend keeps a warm pool
        (``pool_size`` > 0)."""
        return getattr(self, "pool_size", 0) > 0

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

    async def usage(self) -> dict[str, Any] | None:
        """The sandbox's current resource use, for ``%sandbox status`` and ``usage_request``:
        ``{"memory_bytes": n}`` and, where known, ``"cpu_percent"`` (percent of one CPU, since the
        previous call), ``"cpu_count"``, and the figures of the machine the sandbox runs on as
        ipykernel gives them: ``"host_cpu_percent"`` (percent of its CPUs) and ``"host_memory"``
        (``psutil.virtual_memory()``'s fields in bytes: ``total``, ``available``, ``used``,
        ``active``, ...); None when the backend cannot tell or the sandbox is not running."""
        return None
