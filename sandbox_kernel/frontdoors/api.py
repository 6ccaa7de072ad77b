"""The Python API: sandboxes for programs and agents, on the same backends and cell pipeline.

::

    from sandbox_kernel import Sandbox

    with Sandbox("docker", memory_limit="512m") as sb:
        sb.run("x = 21")
        print(sb.run("x * 2").text)             # 42

:class:`AsyncSandbox` is the API (``async with AsyncSandbox(...) as sb``); :class:`Sandbox`
runs it on one background event loop (:func:`~sandbox_kernel.runtime.loop_thread.shared_loop`), the
way the ``%%sandbox`` magic runs its backends. Every execution goes through the same
:class:`~sandbox_kernel.session.pipeline.OutputPipeline` as the kernel's and the magic's cells (output
policy, output budget, error mapping); only the sink differs: a
:class:`~sandbox_kernel.session.results.Collector` that builds the :class:`ExecutionResult`.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import tempfile
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from traitlets import Bool, Float, List, TraitError, Unicode
from traitlets.config import LoggingConfigurable

from ..backends.base import Backend, Capabilities
from ..backends.checkpoint import Checkpoint
from ..core.errors import BadValue, ConfigError, SandboxError
from ..core.events import Emit, Event, Outcome
from ..policy import OutputOptions
from ..runtime.config_check import option_names, unknown_names
from ..runtime.loop_thread import at_exit, shared_loop
from ..runtime.traits import ByteSize
from ..session import commands
from ..session.checkpoints import check_name
from ..session.files import Copied, FileOptions
from ..session.pipeline import OutputPipeline
from ..session.results import Collector, CommandResult, ExecutionResult
from ..session.session import SandboxSession

OnOutput = Callable[[Event], None]

NO_COMMS_NOTE = ("[ipywidgets cannot work through the Python API or MCP (no page holds their views): "
                 "widgets are shown as text]\n")


def api_hint(option: str, value: str) -> str:
    """How an API user sets an output option: ``Sandbox(..., output_policy='isolate')``."""
    return f"{option}={value!r}"


class AsyncSandbox(LoggingConfigurable, OutputOptions):
    """One sandbox (a backend by name) and its output pipeline, for asyncio programs.

    Args:
        backend: the backend's name (``local``, ``docker``, ``e2b`` or any registered one).
        config: a traitlets ``Config`` (e.g. ``{"DockerBackend": {"memory_limit": "1g"}}``).
        **options: this class's traits (``timeout``, ``max_output_bytes``, ``allowed_commands``,
            ``output_policy``, ``allowed_origins``, ...) and the backend's traits by name
            (``memory_limit="512m"``, ``mounts=[...]``).

    Raises:
        ConfigError: an unknown backend or option (the message names the closest option), or
            a bad value.
        BackendUnavailable: the backend's package is not installed.
    """

    option_hint = staticmethod(api_hint)
    """How a note names an option (``output_policy='isolate'``); front doors built on this
    class (the MCP server) say it their way."""

    timeout = Float(None, allow_none=True, help="Seconds an execution may run before it is interrupted "
                                                "(None: no limit); run(timeout=...) overrides it.").tag(config=True)
    max_output_bytes = ByteSize(10 * 1024**2, help="Output one execution may return, e.g. '10m'; the rest is "
                                                   "dropped with a note on stderr. 0: no limit.").tag(config=True)
    max_transfer_bytes = ByteSize(256 * 1024**2, help="Encoded size one value moved by put/get may have, e.g. "
                                                      "'1g'; a larger one is refused before it is read. 0: no "
                                                      "limit.").tag(config=True)
    artifacts = Bool(True, help="Notice the files each run creates or changes in the sandbox's working directory "
                                "(ExecutionResult.artifacts; download_artifacts copies them).").tag(config=True)
    allowed_commands = List(Unicode(), default_value=None, allow_none=True,
                            help="Regular expressions; run_command refuses a command line that fully matches "
                                 "none. None: any command. Limits the caller, not code in the sandbox."
                            ).tag(config=True)

    def __init__(self, backend: str = "local", *, config: Any = None, **options: Any) -> None:
        own = {k: options.pop(k) for k in list(options) if self.has_trait(k)}

        def traits(cls: type[Backend]) -> dict[str, Any]:
            _check_options(backend, cls, options, config)
            return options

        try:
            super().__init__(config=config, **own)
            self.session = self._session(backend, traits)
        except BadValue as exc:
            raise ConfigError(f"Bad option for the {backend} sandbox: {exc.detail}") from None
        except (TraitError, ValueError) as exc:
            raise ConfigError(f"Bad option for the {backend} sandbox: {exc}") from None
        self._allowlist = commands.compile_allowlist(self.allowed_commands)

    def _session(self, backend: str | Backend, traits: Any = lambda cls: {}) -> SandboxSession:
        return SandboxSession(backend, parent=self, policy=self.make_policy(hint=type(self).option_hint),
                              options=traits, output_budget=(self.max_output_bytes, "max_output_bytes"),
                              page_comms=False, no_comms_note=NO_COMMS_NOTE,
                              files=FileOptions(artifacts=self.artifacts, listing=False,
                                                hint=lambda option, value: f"{option}={value!r}"))

    @property
    def backend(self) -> Backend:
        """The session's backend."""
        return self.session.backend

    @property
    def pipeline(self) -> OutputPipeline:
        """The session's output pipeline."""
        return self.session.pipeline

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> AsyncSandbox:
        """Create the sandbox and wait until it runs code (idempotent; other calls start it
        too). Raises what :meth:`Backend.start` raises (``BackendUnavailable``, ``SandboxStartError``)."""
        await self.session.start()
        return self

    async def close(self) -> None:
        """Remove the sandbox and everything it holds (idempotent)."""
        await self.session.shutdown()

    async def __aenter__(self) -> AsyncSandbox:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def restart(self) -> None:
        """A fresh interpreter with the same settings; variables and files in memory are lost."""
        await self.session.restart()

    async def interrupt(self) -> None:
        """Interrupt the running execution (like Ctrl-C); the state survives."""
        await self.session.interrupt()

    def describe(self) -> dict[str, Any]:
        """The session's status (the backend's description: ``backend``, ``sandbox_id``, ``limits``,
        ``workdir``, ...; ``started``, ``capabilities``) with this API's ``output_policy`` and
        ``allowed_commands``; JSON-able, no secrets."""
        return {**self.session.status(), "output_policy": self.output_policy,
                "allowed_commands": self.allowed_commands}

    @property
    def capabilities(self) -> Capabilities:
        """What the backend can do beyond running code (files, completion, pause, ...)."""
        return self.session.capabilities

    async def usage(self) -> dict[str, Any] | None:
        """The sandbox's resource use (``memory_bytes``, ``cpu_percent`` of one CPU, ``cpu_count``),
        or None (not running, or the backend cannot tell)."""
        return await self.session.usage()

    # -- running code ------------------------------------------------------------------------
    async def run(self, code: str, *, timeout: float | None = None, language: str | None = None,
                  on_output: OnOutput | None = None) -> ExecutionResult:
        """Run ``code`` in the sandbox; the state (variables, imports, files) is kept.

        Args:
            code: source in the sandbox's language.
            timeout: seconds before the execution is interrupted (default: :attr:`timeout`).
            language: the language ``code`` is in; must be the sandbox's (``python``, or the
                e2b backend's ``language``).
            on_output: called with each output event (Stream, Display, ClearOutput, Error) as it
                arrives, after the output policy and budget; for :class:`Sandbox`, on its loop thread.

        Returns:
            The :class:`ExecutionResult`; an exception in ``code`` is its ``error``.

        Raises:
            ExecutionTimeout: the code ran past ``timeout`` (state kept, unless ``exc.restarted``); ``exc.result`` holds
                the outputs until then. SandboxDied, SandboxError: the sandbox failed.
        """
        if language is not None and language != (mine := self.session.language):
            raise ConfigError(f"This {self.session.name} sandbox runs {mine}, not {language}.")
        collector = Collector()
        sink: Emit = collector if on_output is None else (lambda e: (collector(e), on_output(e)))
        outcome = await self._execute(code, sink, collector, self.timeout if timeout is None else timeout)
        last = self.session.files.last
        return dataclasses.replace(collector.result(outcome), artifacts=last.files if last else ())

    async def _execute(self, code: str, sink: Emit, collector: Collector, timeout: float | None) -> Outcome:
        """``code`` through the session into ``sink``; a SandboxError is raised again after the
        pipeline has shown it (with the collected outputs as ``exc.result``)."""
        try:
            return await self.session.run(code, sink, timeout=timeout, raise_failures=True)
        except SandboxError as exc:
            exc.result = collector.result(exc.outcome)
            raise

    async def run_command(self, command: str, *, timeout: float | None = None) -> CommandResult:
        """Run the shell command line ``command`` (``/bin/sh -c``) in the sandbox's working directory.

        Returns:
            Its :class:`CommandResult` (``exit_code``, ``stdout``, ``stderr``).

        Raises:
            CommandRefused: ``command`` fully matches none of :attr:`allowed_commands`.
            ExecutionTimeout: it ran past ``timeout`` seconds (default :attr:`timeout`) and was killed.
            SandboxError: the sandbox failed, or cannot run Python (e.g. an e2b bash context).
        """
        return await self.session.run_command(command, timeout=self.timeout if timeout is None else timeout,
                                              max_output_bytes=self.max_output_bytes, allowlist=self._allowlist)

    # -- checkpoints (docs/how-to/checkpoints.md) --------------------------------------------------
    async def checkpoint(self, name: str | None = None) -> Checkpoint:
        """Take a checkpoint of the sandbox's whole state now (its kernel process: variables,
        open files, generators, C-extension objects); one is also taken after each run of at
        least the backend's ``checkpoint_min_seconds``. ``name``: letters, digits, ``_.-``;
        an older checkpoint of that name is dropped.

        Returns:
            The :class:`~sandbox_kernel.backends.checkpoint.Checkpoint` (``id``, ``cell``: the
            execution count of the last run, ``name``, ``time``).

        Raises:
            CheckpointError: it could not be taken, or checkpoints are turned off.
            NotSupported: the backend keeps no checkpoints (``capabilities.checkpoints``).
        """
        return await self.session.checkpoints.take(check_name(name) if name is not None else None)

    async def checkpoints(self) -> list[Checkpoint]:
        """The checkpoints kept, oldest first, each with ``bytes``: the memory only it holds."""
        return await self.session.checkpoints.list()

    async def restore(self, checkpoint: Checkpoint | int | str) -> Checkpoint:
        """Put the sandbox back in the state of ``checkpoint``: a :class:`Checkpoint`, the
        execution count of a run (the checkpoint after it), or a name. The checkpoint stays
        (restore it again to try another continuation); files are not restored.

        Raises:
            CheckpointError: no such checkpoint (the message lists those kept), or it could not
                be restored (the sandbox then runs a fresh interpreter, which the message says).
            NotSupported: the backend keeps no checkpoints.
        """
        return await self.session.checkpoints.restore(checkpoint)

    async def fork(self, n: int = 1) -> list[AsyncSandbox]:
        """``n`` sandboxes, each running a copy of this one's state now, beside it: try
        continuations side by side, keep the best (``best.checkpoint()``, then
        ``self.restore(that)``), close the others. Each is a kernel of its own in this sandbox:
        its memory is copy-on-write (what one changes, no other sees), its limits and files are
        this sandbox's, and it ends with it. Close each (``async with`` or :meth:`close`).

        Raises:
            CheckpointError: the copies could not be made.
            NotSupported: the backend keeps no checkpoints.
        """
        self.backend.require("checkpoints", "checkpoints")
        forks = []
        for backend in await self.backend.fork(n):
            sibling = type(self).__new__(type(self))
            LoggingConfigurable.__init__(sibling, config=self.config,
                                         **{name: getattr(self, name) for name in self.class_trait_names(config=True)})
            sibling.session, sibling._allowlist = sibling._session(backend), self._allowlist
            forks.append(sibling)
        return forks

    async def undo(self) -> Checkpoint:
        """Put the sandbox back in the state it had before its last run (the newest checkpoint
        taken before it); returns that checkpoint. Raises as :meth:`restore`."""
        return (await self.session.checkpoints.undo())[0]

    # -- network ---------------------------------------------------------------------------
    async def allow(self, *hosts: str) -> list[str]:
        """Let the sandbox reach ``hosts`` as well, its state kept; returns the entries now in
        force. Entries, errors and timing: :meth:`SandboxSession.allow
        <sandbox_kernel.session.session.SandboxSession.allow>` (EgressError, NotSupported)."""
        return await self.session.allow(*hosts)

    # -- files -------------------------------------------------------------------------------
    async def upload(self, local: str | Path, remote: str) -> str:
        """Copy the host file ``local`` into the sandbox at ``remote`` (relative: its working
        directory); returns the path inside the sandbox. Raises FileNotFoundError,
        NotSupported (the backend's ``capabilities.files`` is false), SandboxError."""
        return await self.session.upload(local, remote)

    async def download(self, remote: str, local: str | Path, *, max_bytes: int = 0) -> Path:
        """Copy the sandbox's file ``remote`` to the host path ``local``; returns that path.
        ``max_bytes``: the most bytes read (0: no bound); a larger file is refused as it is read,
        and nothing is left at ``local``. Raises FileNotFoundError, FileTooLarge, NotSupported
        (no ``capabilities.files``), SandboxError."""
        return await self.session.download(remote, local, max_bytes=max_bytes)

    async def download_artifacts(self, folder: str | Path | None = None, *, overwrite: bool = False) -> Copied:
        """Copy the files the runs so far created or changed in the sandbox's working directory
        into ``folder`` (default: the workspace's, else this process's working directory), at the
        same relative paths: never a dotfile, never through a symlink or outside ``folder``, never
        over an existing file unless ``overwrite``; at most 1000 files and 1 GiB per call.

        Returns:
            :class:`~sandbox_kernel.session.files.Copied` (``copied`` host paths, ``kept``,
            ``refused``, ``missing``, ``left``; ``lines()`` says it in words).
        """
        target = Path(folder).expanduser().resolve() if folder is not None else self.session.files.folder
        return await self.session.files.download_all(target, overwrite=overwrite)

    # -- variables ---------------------------------------------------------------------------
    async def put(self, name: str, value: Any, *, max_bytes: int | None = None) -> int:
        """Set the sandbox's variable ``name`` to a copy of ``value``, as data only (JSON,
        bytes, ``.npy``, Arrow IPC: the table in docs/how-to/agents.md); returns the encoded size in bytes.

        Raises:
            TransferError: a bad name, a type that does not travel, a value over ``max_bytes``
                (default :attr:`max_transfer_bytes`), a failure in the sandbox.
            NotSupported: the backend cannot copy files.
        """
        limit = self.max_transfer_bytes if max_bytes is None else max_bytes
        return await self.session.put(name, value, max_bytes=limit, setting="max_transfer_bytes")

    async def get(self, name: str, *, max_bytes: int | None = None) -> Any:
        """A host copy of the sandbox's variable ``name``, built from data only (never pickle);
        over ``max_bytes`` (default :attr:`max_transfer_bytes`) it is refused before it is read.

        Raises:
            TransferError: a bad or unknown name, a type that does not travel, a value over the
                bound, data that is not what it claims.
            NotSupported: the backend cannot copy files.
        """
        limit = self.max_transfer_bytes if max_bytes is None else max_bytes
        return await self.session.get(name, max_bytes=limit, setting="max_transfer_bytes")

    async def read_file(self, remote: str, *, max_bytes: int = 0) -> bytes:
        """The bytes of the sandbox's file ``remote`` (through :meth:`download`, ``max_bytes``
        as there)."""
        with tempfile.TemporaryDirectory(prefix="sandbox-kernel-") as tmp:
            return (await self.download(remote, Path(tmp) / "file", max_bytes=max_bytes)).read_bytes()

    async def write_file(self, remote: str, data: bytes) -> str:
        """Write ``data`` to the sandbox's file ``remote`` (through :meth:`upload`); returns its path."""
        with tempfile.TemporaryDirectory(prefix="sandbox-kernel-") as tmp:
            (local := Path(tmp) / "file").write_bytes(data)
            return await self.upload(local, remote)


def _check_options(backend: str, cls: type[Backend], options: dict[str, Any], config: Any) -> None:
    """Raise ConfigError for an option (keyword or ``config``) that neither this API's class nor the
    backend's takes, or a config section of neither, naming the closest (the one check every door
    makes: :func:`~sandbox_kernel.runtime.config_check.unknown_names`)."""
    _refuse_unknown(backend, options, option_names(cls) | option_names(AsyncSandbox))
    classes = {c.__name__: c for c in (AsyncSandbox, *cls.mro()) if hasattr(c, "class_trait_names")}
    for section in unknown_names(config or {}, classes):
        raise ConfigError(f"Options for {section.name!r} do not apply to the {backend} sandbox"
                          + (f"; did you mean {section.closest!r}?" if section.closest else "."))
    for section, values in (config or {}).items():  # a section reaches the whole instance (Backend: cls's options)
        _refuse_unknown(backend, values, option_names(AsyncSandbox if section == "AsyncSandbox" else cls))


def _refuse_unknown(backend: str, given: Any, known: set[str]) -> None:
    for unknown in unknown_names(given, known):
        hint = f" Did you mean {unknown.closest!r}?" if unknown.closest else ""
        raise ConfigError(f"Unknown option {unknown.name!r} for the {backend} sandbox.{hint} "
                          f"Options: {', '.join(sorted(known))}.")


class Sandbox:
    """The synchronous :class:`AsyncSandbox`: the same arguments, methods and results.

    Every coroutine method of :class:`AsyncSandbox` is available here as a blocking call,
    run on one background event loop shared by all sandboxes of the process (no copy of
    each method: calls are delegated). A Ctrl-C while waiting interrupts the sandbox and
    raises KeyboardInterrupt. Open sandboxes are removed when the interpreter exits.
    """

    def __init__(self, backend: str = "local", **options: Any) -> None:
        self._loop = shared_loop()
        self._sandbox = AsyncSandbox(backend, **options)
        _open.add(self)

    @property
    def aio(self) -> AsyncSandbox:
        """The underlying :class:`AsyncSandbox`."""
        return self._sandbox

    def _wait(self, coro: Any) -> Any:
        if self._loop.in_loop():
            coro.close()
            raise RuntimeError("Sandbox is blocking; from its own loop thread (an on_output callback) "
                               "use AsyncSandbox")
        future = self._loop.submit(coro)
        try:
            return future.result()
        except KeyboardInterrupt:
            self._loop.submit(self._sandbox.interrupt()).result(timeout=30)
            raise

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # ours are set in __init__; never delegate private names
            raise AttributeError(name)
        attr = getattr(self._sandbox, name)
        if not inspect.iscoroutinefunction(attr):
            return attr

        @functools.wraps(attr)
        def blocking(*args: Any, **kwargs: Any) -> Any:
            return self._wait(attr(*args, **kwargs))

        return blocking

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *(n for n in dir(self._sandbox) if not n.startswith("_"))})

    def start(self) -> Sandbox:
        self._wait(self._sandbox.start())
        return self

    def fork(self, n: int = 1) -> list[Sandbox]:
        """:meth:`AsyncSandbox.fork`, each copy a :class:`Sandbox`."""
        forks = []
        for aio in self._wait(self._sandbox.fork(n)):
            sandbox = type(self).__new__(type(self))
            sandbox._loop, sandbox._sandbox = self._loop, aio
            _open.add(sandbox)
            forks.append(sandbox)
        return forks

    def __enter__(self) -> Sandbox:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self._wait(self._sandbox.close())


_open: weakref.WeakSet[Sandbox] = weakref.WeakSet()


def _close_all() -> None:
    for sandbox in list(_open):
        try:
            sandbox._loop.submit(sandbox._sandbox.close()).result(timeout=30)
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


at_exit(_close_all)
