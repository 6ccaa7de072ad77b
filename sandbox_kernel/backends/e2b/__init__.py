"""The ``e2b`` backend: cells run in an E2B sandbox through the ``e2b-code-interpreter`` SDK.

One sandbox per backend (created, or attached to by id) and one code context in it (the
session's state; ``restart`` restarts it). Works with E2B-compatible services (``domain``,
``api_url``), e.g. ``tests/e2b_server.py``. The SDK is imported at start, not at import.

E2B endpoints used: ``POST /v2/sandboxes`` (create, with the ``lifecycle`` of ``on_timeout``),
``POST /v2/sandboxes/{id}/connect`` (attach; resumes a paused sandbox), ``POST
/sandboxes/{id}/timeout`` (lifetime renewal), ``POST /sandboxes/{id}/pause`` (``keep_alive='pause'``),
``GET /v2/sandboxes?state=paused`` (:meth:`E2BBackend.paused_sandboxes`), ``DELETE /sandboxes/{id}``
(kill); in the sandbox ``POST /contexts``, ``POST /contexts/{id}/restart``, ``POST /execute``
(streamed), and envd's ``GET|POST /files``.
What E2B cannot carry (stdin, completion, display updates, clear_output, metadata, comms) and
what we do instead: ``docs/how-to/e2b.md``. How a cell never waits forever on E2B's server:
:mod:`.execution`; how host memory stays bounded: :mod:`.stream`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from pathlib import Path
from typing import Any

from traitlets import Bool, Dict, Enum, Float, Integer, TraitError, Unicode, Union

from ...core.errors import EgressError, NotSupported, SandboxError, SandboxStartError, WorkspaceError
from ...core.events import Emit, Outcome, SandboxReplaced
from ...runtime.traits import ByteSize, HostVariables, host_variables
from .. import workspace
from ..base import Backend, Capabilities, StdinHandler
from ..bounded import write_stream
from ..egress import allow_hosts_trait, pypi_index_trait, secrets_trait
from .boundary import ENV, Connection, SandboxGone, sdk, translate
from .execution import Cells, Limits
from .network import ALL_TRAFFIC, egress_environment, network_of

SESSION_KEY = "sandbox-kernel-session"
"""Metadata key of the sandboxes this package creates: the session name (``%sandbox status``
lists a session's paused sandboxes by it)."""
CONTEXT_RECORD = ".sandbox-kernel/context-{language}"
"""File in the sandbox (relative to its home) naming the code context a later kernel
re-attaches to, so the state survives ``keep_alive`` + ``sandbox_id``."""


UNCOUNTED = """\
try:
    exec({code!r}, globals())
finally:
    def _sk_uncount(ip):  # give back the execution count and the history line this cell took
        history = ip.history_manager
        n = len(history.input_hist_parsed) - 1  # this cell's line (IPython 9 counts the next one already)
        ip.execution_count -= 1
        try:
            history.writeout_cache()
            with history.db:  # a transaction of its own, committed: the saving thread writes next
                history.db.execute("DELETE FROM history WHERE session=? AND line=?", (history.session_number, n))
            del history.input_hist_parsed[n:], history.input_hist_raw[n:]
        except Exception:
            pass
    _sk_uncount(get_ipython())
    del _sk_uncount
"""
"""An IPython cell that runs ``code`` as if it had not been a cell: E2B's ``/execute`` has no silent
mode, and a cell that took a count would number the user's next cells one higher (and one whose
history line stayed would make IPython print that its history database moved)."""


class E2BBackend(Backend):
    """An E2B cloud sandbox (or one of an E2B-compatible service), driven by the async SDK."""

    name = "e2b"
    capabilities = Capabilities(files=True, pause=True, reattach=True, egress_update=True)

    template = Unicode("", help="E2B template (name or id) of new sandboxes; empty: the SDK's "
                                "code-interpreter template.").tag(config=True)
    api_key = Unicode("", help="E2B API key; empty: the E2B_API_KEY environment variable. Prefer the "
                               "variable: an option may end up in a kernelspec's argv.").tag(config=True)
    domain = Unicode("", help="E2B domain, for E2B-compatible services; empty: E2B_DOMAIN, else e2b.app.").tag(
        config=True)
    api_url = Unicode("", help="URL of the E2B API; empty: E2B_API_URL, else https://api.<domain>.").tag(config=True)
    lifetime = Integer(300, min=1, help="Seconds the sandbox lives unused; renewed while the kernel is in "
                                         "use (E2B's sandbox timeout).").tag(config=True)
    request_timeout = Float(60.0, help="Seconds to wait for E2B to answer a request (connecting, "
                                       "creating the sandbox, files, the start of a cell); how long a cell may "
                                       "run is the door's own timeout (SandboxKernel.cell_timeout).").tag(config=True)
    env_vars = HostVariables(help="Names of host environment variables to pass to the sandbox (never "
                                  "JupyterHub's).").tag(config=True)
    envs = Dict(value_trait=Unicode(), help="Environment variables of the sandbox, NAME=value (as E2B's SDK names "
                                            "them; the same as env, which every backend has).").tag(config=True)
    sandbox_id = Unicode("", help="Attach to this running sandbox instead of creating one.").tag(config=True)
    on_lost = Enum(["recreate", "fail"], "recreate", help="When the sandbox is found gone (expired, killed, "
                   "or the sandbox_id to attach to does not exist): 'recreate' starts a fresh one and says "
                   "in the cell that the state is lost; 'fail' reports an error and makes none.").tag(config=True)
    keep_alive = Union([Bool(), Enum(["pause"])], default_value=False,
                       help="At shutdown: False kills the sandbox; True leaves it running; 'pause' pauses it "
                            "(E2B keeps its files and memory, and nothing runs or is billed as running). A later "
                            "kernel attaches with sandbox_id and resumes it.").tag(config=True)
    on_timeout = Enum(["kill", "pause"], "kill", help="What E2B does with the sandbox when it has been unused for "
                      "'lifetime' seconds: 'kill' (E2B's default) or 'pause', resumed by the next request "
                      "(E2B's lifecycle on_timeout='pause', auto_resume=True).").tag(config=True)
    start_timeout = Float(10.0, min=0, help="Seconds a cell may be answered by nothing but keepalives (the sandbox's "
                          "kernel never took it: lost while the context restarted, or aborted behind an "
                          "interrupted cell) before it is sent once more; 0: wait forever.").tag(config=True)
    settle_timeout = Float(30.0, min=0, help="Seconds to wait, after an interrupt, a cell timeout or the kernel's "
                           "death, for the code context to take code again before the next cell is "
                           "sent.").tag(config=True)
    interrupt_grace = Float(0.5, min=0, help="Seconds nothing is sent after an /execute stream was closed (an "
                            "interrupt, a cell timeout): E2B's server interrupts the kernel in that time, "
                            "measured 20-120 ms after the close, and would hit whatever ran "
                            "first.").tag(config=True)
    max_message_bytes = ByteSize(16 * 1024**2, help="Largest message (one line of E2B's /execute stream) the "
                                 "host holds, e.g. '16m'; longer ones are skipped while they stream, with a "
                                 "note. 0: no bound.").tag(config=True)
    language = Unicode("python", help="Language of the code context: python, bash, or any the template "
                                      "supports (javascript, r, java, ...).").tag(config=True)
    allow_hosts = allow_hosts_trait("Hosts the sandbox may reach, as for docker (NAME[:PORT], *.DOMAIN, addresses, "
                                    "CIDR networks, 'pypi'): sent as E2B's network settings (allow_out, deny_out "
                                    "0.0.0.0/0), which E2B enforces; a name with a port other than 80 or 443 is "
                                    "refused (E2B cannot filter it). Sandbox.allow(HOST) calls E2B's update_network "
                                    "on the running sandbox. Empty: E2B's default, the internet.")
    host_secrets = secrets_trait("Headers E2B's egress proxy adds to requests for a host, 'HOST Header: value "
                                 "{env:NAME}' (a rule of E2B's network settings): the value reaches E2B's API, never "
                                 "the sandbox, which gets a placeholder for NAME.")
    pypi_index = pypi_index_trait()

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._env = {name: os.environ.get(name, "") for name in ENV}
        self._host_env = host_variables(self.env_vars)
        self._sandbox: Any = None  # e2b_code_interpreter.AsyncSandbox
        self._context: Any = None  # e2b_code_interpreter.Context
        self._attach_to = self.sandbox_id
        self._attached = False
        self._gone: str | None = None  # set when on_lost='fail' refused to replace a lost sandbox
        self._notices: list[str] = []
        self._renewed = 0.0
        self._cells: Cells | None = None  # the cell path of the started sandbox's context
        self._paused: list[str] = []  # of paused_sandboxes()
        self._lock = asyncio.Lock()

    # -- connection ----------------------------------------------------------------------------
    @property
    def _connection(self) -> Connection:
        return Connection.resolve(self._env, api_key=self.api_key, domain=self.domain, api_url=self.api_url,
                                  request_timeout=self.request_timeout)

    def _boundary(self, failure: type[SandboxError] = SandboxError):
        """The SDK-exception boundary (:meth:`Connection.boundary`) for this sandbox."""
        sandbox_id = self._sandbox.sandbox_id if self._sandbox is not None else self._attach_to or None
        return self._connection.boundary(sandbox_id, failure)

    # -- lifecycle -----------------------------------------------------------------------------
    @property
    def started(self) -> bool:
        return self._sandbox is not None

    async def start(self) -> None:
        """Create the sandbox (or attach to ``sandbox_id``) and its code context. Idempotent.

        Raises:
            BackendUnavailable: the SDK is not installed, no API key, or E2B rejected the key.
            SandboxStartError: E2B cannot be reached, or the sandbox is gone and ``on_lost``
                is 'fail'.
        """
        async with self._lock:
            if self._sandbox is not None:
                return
            if self._gone is not None:
                raise SandboxStartError(self._gone)
            plan = self._workspace_plan()
            module = sdk()
            from .stream import sandbox_class  # needs httpx, which the SDK brings

            cls = sandbox_class(module.AsyncSandbox, lambda: self.max_message_bytes)
            options = self._connection.sdk_options()
            sandbox, self._attached, asked = None, False, time.monotonic()
            try:
                with self._boundary(SandboxStartError):
                    if self._attach_to:
                        sandbox = await self._attach(cls, options)
                        if sandbox is not None and (network := network_of(self)):  # it keeps the network it
                            await sandbox.update_network(network)  # was made with: this session's applies
                    if sandbox is None:
                        sandbox = await cls.create(template=self.template or None, timeout=self.lifetime,
                                                   envs={**self._host_env, **self.envs, **self.env,
                                                         **egress_environment(self)} or None,
                                                   metadata={SESSION_KEY: self.session}, network=network_of(self),
                                                   lifecycle=self._lifecycle(), **options)
                    self._context = await self._open_context(sandbox)
            except BaseException:
                if sandbox is not None and not self._attached:
                    with contextlib.suppress(Exception):
                        await sandbox.kill()
                raise
            self._sandbox, self._renewed = sandbox, asked  # its lifetime counts from the request
            self._cells = Cells(sandbox, self._context, self._connection, self._limits())
            self.log.info("e2b: %s sandbox %s at %s", "attached to" if self._attached else "created",
                          sandbox.sandbox_id, self._connection.service)
            self.workspace_view = None
        if plan is not None and not self._attached:  # an attached sandbox kept its copy
            await self._copy_workspace(plan)  # upload and execute start the sandbox: outside the lock

    async def _copy_workspace(self, plan: workspace.Plan) -> None:
        """Copy the workspace into the new sandbox; a failure leaves no sandbox behind."""
        try:
            self.workspace_view = await workspace.copy_in(self, plan, fresh=False)
        except BaseException:
            await self.shutdown()
            raise

    def _workspace_plan(self) -> workspace.Plan | None:
        """The workspace to copy into a new sandbox (checked before it is made), or None.

        Raises:
            WorkspaceError: the folder cannot be copied (the message says why), or the code
                context is not Python (the copy is unpacked by Python).
        """
        plan = workspace.plan_of(self)
        if plan is not None:
            if self.language != "python":
                raise WorkspaceError(f"the workspace is copied in by Python, and this sandbox's code context runs "
                                     f"{self.language}: use language=python, or %sandbox upload")
            workspace.check_size(plan, self.workspace_max_bytes, "E2BBackend.workspace_max_bytes")
        return plan

    async def set_allow_hosts(self, hosts: list[str]) -> list[str]:
        """E2B's ``PUT /sandboxes/{id}/network`` on the running sandbox (it keeps its state); an empty
        list without secrets denies all (``deny_out: 0.0.0.0/0``)."""
        self.check_lock(allow_hosts=list(hosts))
        try:
            self.allow_hosts = list(hosts)
        except TraitError as exc:
            raise EgressError(str(exc)) from None
        network = network_of(self) or {"allow_out": [], "deny_out": [ALL_TRAFFIC]}
        if self._sandbox is not None:
            with self._boundary():
                await self._sandbox.update_network(network)
        return network["allow_out"]

    def _limits(self) -> Limits:
        return Limits(language=self.language, start_timeout=self.start_timeout,
                      settle_timeout=self.settle_timeout, interrupt_grace=self.interrupt_grace,
                      request_timeout=self.request_timeout, max_message_bytes=self.max_message_bytes)

    def _drop(self) -> None:
        """Forget the sandbox (gone, dead or shut down): the next cell starts a fresh one."""
        self._sandbox = self._context = self._cells = self.workspace_view = None

    def _lifecycle(self) -> dict[str, Any] | None:
        """The SDK's ``lifecycle`` argument of ``create`` (None: E2B's default, kill on timeout)."""
        return {"on_timeout": "pause", "auto_resume": True} if self.on_timeout == "pause" else None

    async def _attach(self, cls: Any, options: dict[str, Any]) -> Any:
        """Connect to ``sandbox_id`` (``POST /v2/sandboxes/{id}/connect``, which resumes a paused
        sandbox); None when it is gone and ``on_lost`` is 'recreate'."""
        try:
            sandbox = await cls.connect(self._attach_to, timeout=self.lifetime, **options)
        except Exception as exc:
            if not isinstance(translate(exc, self._connection), SandboxGone):
                raise
            gone, self._attach_to = self._attach_to, ""
            self._lost(f"The E2B sandbox {gone} to attach to does not exist (it expired or was killed)",
                       "attach to a running sandbox (E2BBackend.sandbox_id), or leave sandbox_id empty to create one")
            return None
        self._attached, self._attach_to = True, ""  # a later loss makes a fresh sandbox
        return sandbox

    def _lost(self, what: str, fix: str = "restart to start a fresh sandbox") -> None:
        """Say that the sandbox is gone: a notice for the next cell ('recreate'), or raise ('fail')."""
        if self.on_lost == "fail":
            self._gone = f"{what}; its state is lost. With on_lost='fail' no new sandbox is made: {fix}, or set " \
                         "E2BBackend.on_lost='recreate'."
            raise SandboxStartError(self._gone)
        self._notices.append(f"{what}; its state is lost. Starting a fresh sandbox.\n")

    async def _open_context(self, sandbox: Any) -> Any:
        """The code context of this backend: the recorded one of an attached sandbox (its state
        lives on), else a new one (recorded when a later kernel may attach)."""
        record = CONTEXT_RECORD.format(language=self.language)
        if self._attached:
            with contextlib.suppress(Exception):
                recorded = (await sandbox.files.read(record)).strip()
                for context in await sandbox.list_code_contexts():
                    if context.id == recorded:
                        return context
        context = await sandbox.create_code_context(language=self.language)
        if self.keep_alive or self._attached:
            await sandbox.files.write(record, context.id)
        return context

    async def shutdown(self) -> None:
        """Cancel a running cell; kill the sandbox, or with ``keep_alive`` leave it running (its
        lifetime renewed so a later kernel has ``lifetime`` seconds to attach) or pause it
        (``POST /sandboxes/{id}/pause``). Never raises."""
        async with self._lock:
            await self.interrupt()
            sandbox = self._sandbox
            self._drop()
            if sandbox is None:
                return
            try:
                if self.keep_alive == "pause":
                    await sandbox.pause()
                elif self.keep_alive:
                    await sandbox.set_timeout(self.lifetime)
                else:
                    await sandbox.kill()
            except Exception as exc:  # noqa: BLE001 - shutdown never raises
                self.log.warning("e2b: shutting down sandbox %s: %s", sandbox.sandbox_id,
                                 self._connection.scrub(str(exc)))

    async def restart(self) -> None:
        """Restart the code context (``POST /contexts/{id}/restart``): a fresh interpreter in
        the same sandbox; files stay. A sandbox found gone is replaced."""
        self._gone = None
        if self._sandbox is None:
            await self.start()
        else:
            await self._use(lambda: self._cells.restart_context())

    async def _use(self, operation: Any) -> Any:
        """``await operation()`` on a started sandbox whose lifetime is renewed when due; if the
        sandbox turns out to be gone before the operation ran, replace it once (per ``on_lost``)."""
        await self.start()
        try:
            if time.monotonic() - self._renewed > self.lifetime / 2:
                await self._renew()
            return await operation()
        except SandboxGone:
            gone = self._sandbox.sandbox_id
            self._drop()
            self._lost(f"The E2B sandbox {gone} is gone (unused for over {self.lifetime} s, or killed)")
            await self.start()
            return await operation()

    async def _renew(self) -> None:
        """Extend the sandbox's lifetime to ``lifetime`` seconds from now (``set_timeout``; with
        ``on_timeout='pause'`` ``connect``, which also resumes a sandbox paused meanwhile)."""
        sandbox = self._sandbox
        if sandbox is not None:  # None: shut down meanwhile
            with self._boundary():
                if self.on_timeout == "pause":
                    await sandbox.connect(timeout=self.lifetime)
                else:
                    await sandbox.set_timeout(self.lifetime)
            self._renewed = time.monotonic()

    async def _renew_while_running(self) -> None:
        """Keep a long cell's sandbox alive: renew every ``lifetime / 2`` seconds."""
        while True:
            await asyncio.sleep(self.lifetime / 2)
            with contextlib.suppress(SandboxError):  # a dead sandbox shows in the cell's own request
                await self._renew()

    # -- running code --------------------------------------------------------------------------
    async def execute(self, code: str, emit: Emit, *, timeout: float | None = None,
                      stdin: StdinHandler | None = None, silent: bool = False, store_history: bool = True,
                      user_expressions: dict[str, str] | None = None) -> Outcome:
        """Run ``code`` in the session's code context (``POST /execute``), emitting its output live.

        ``stdin`` is not used: E2B runs code without stdin, so ``input()`` raises
        StdinNotImplementedError in the sandbox. ``/execute`` takes neither ``silent``,
        ``store_history`` nor ``user_expressions``, and returns no payloads: they are ignored
        (``capabilities.payloads`` is False). An :meth:`interrupt` makes the outcome an
        error ``KeyboardInterrupt``. The cell ``timeout`` is enforced here (the SDK's own fires
        late): past it the request is cancelled, the sandbox interrupts its kernel, and
        ExecutionTimeout is raised.
        """
        return await self._use(lambda: self._run(code, emit, timeout))

    async def _run(self, code: str, emit: Emit, timeout: float | None) -> Outcome:
        while self._notices:
            emit(SandboxReplaced("stderr", self._notices.pop(0)))
        cells = self._cells
        renewal = asyncio.ensure_future(self._renew_while_running())  # a long cell keeps its sandbox
        try:
            return await cells.run(code, emit, timeout)
        finally:
            renewal.cancel()
            await asyncio.wait([renewal])  # a renewal under way ends before the cell does
            if cells.sandbox_died and self._cells is cells:  # the next cell makes a new one
                self._drop()

    async def run_silently(self, code: str) -> dict[str, Any]:
        """``code`` as an ordinary execution (E2B's ``/execute`` has no silent mode) whose outputs
        are dropped, that gives back the execution count it took (an IPython context)."""
        if self.language != "python":
            raise NotSupported(self.name, f"silent execution in a {self.language} context")
        outcome = await self.execute(UNCOUNTED.format(code=code), lambda event: None)
        error = {"ename": outcome.error.ename, "evalue": outcome.error.evalue} if outcome.error else {}
        return {"status": outcome.status, **error}

    async def interrupt(self) -> None:
        """Cancel the running execution: the SDK closes its ``/execute`` connection and the
        sandbox interrupts its kernel (best effort: E2B has no interrupt endpoint). The state
        survives; the next cell waits until the context takes code again. Does nothing when no
        cell runs."""
        if self._cells is not None:
            self._cells.interrupt()

    # -- files ---------------------------------------------------------------------------------
    async def upload(self, local: str | Path, remote: str) -> str:
        """Copy ``local`` to ``remote`` in the sandbox (envd ``POST /files``; relative paths:
        the sandbox user's home, the code context's working directory)."""
        if not Path(local).is_file():
            raise FileNotFoundError(f"No such file: {local}")

        async def write() -> str:
            with open(local, "rb") as data, self._boundary():
                return (await self._sandbox.files.write(remote, data)).path

        return await self._use(write)

    async def download(self, remote: str, local: str | Path, *, max_bytes: int = 0) -> Path:
        """Copy the sandbox's ``remote`` to ``local`` (envd ``GET /files``, streamed: at most
        ``max_bytes``, 0: no bound)."""

        async def read() -> Path:
            with self._boundary():
                return await write_stream(await self._sandbox.files.read(remote, format="stream"), local, max_bytes,
                                          remote)

        return await self._use(read)

    async def paused_sandboxes(self) -> list[str]:
        """Ids of this session's paused sandboxes (``GET /v2/sandboxes?state=paused&metadata=...``,
        by the :data:`SESSION_KEY` metadata), e.g. for ``%sandbox status``; a later kernel resumes
        one with ``sandbox_id``. Also remembered for :meth:`describe`.

        Raises:
            SandboxError: E2B could not be asked (the message says why).
        """
        module = sdk()
        query = module.SandboxQuery(state=[module.SandboxState.PAUSED], metadata={SESSION_KEY: self.session})
        with self._boundary():
            paginator = module.AsyncSandbox.list(query=query, **self._connection.sdk_options())
            found = []
            while paginator.has_next:
                found += [info.sandbox_id for info in await paginator.next_items()]
        self._paused = found
        return found

    # -- description ---------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """Backend, session, sandbox id, template, service, language, lifetime; never the key."""
        sandbox = self._sandbox
        return {**super().describe(), "sandbox_id": sandbox.sandbox_id if sandbox is not None else None,
                "template": self.template or "code-interpreter-v1", "service": self._connection.service,
                "language": self.language, "context_id": self._context.id if self._context is not None else None,
                "attached": self._attached, "keep_alive": self.keep_alive, "on_timeout": self.on_timeout,
                "paused_sandboxes": self._paused or None,
                "env_vars": sorted({*self._host_env, *self.envs, *self.env}) or None,
                "allow_hosts": list(self.allow_hosts) or None,
                "limits": {"lifetime_s": self.lifetime}}
