"""One sandbox of the E2B test server: work dir, access token, lifetime, code contexts."""

from __future__ import annotations

import os
import secrets
import shutil
import threading
import time
from pathlib import Path

try:
    from .e2b_server_kernels import BashContext, Context, KernelFactory, KernelLoop, PythonContext
    from .e2b_server_wire import Timings
except ImportError:  # tests/ itself is on sys.path
    from e2b_server_kernels import BashContext, Context, KernelFactory, KernelLoop, PythonContext
    from e2b_server_wire import Timings


class ContextError(Exception):
    """A context request the code interpreter rejects with HTTP ``status``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Sandbox:
    """A sandbox: a scratch work dir (its home and default cwd) and its code contexts.

    Args:
        root: Directory under which the work dir ``root/<id>`` is created.
        loop: The loop that owns every kernel.
        kernels: Starts the ipykernels of Python contexts.
        template_id: ``templateID`` asked for; recorded, not interpreted.
        timeout: Lifetime in seconds from now (``end_at``).
        envs: Environment variables of every context (``envVars`` of the create request).
        metadata: ``metadata`` of the create request, returned by ``get_info``/``list``.
        timings: When its code interpreter does what (interrupts, restarts).
    """

    def __init__(self, root: Path, loop: KernelLoop, kernels: KernelFactory, *,
                 template_id: str, timeout: float, envs: dict[str, str], metadata: dict,
                 auto_pause: bool = False, auto_resume: bool = False, timings: Timings | None = None) -> None:
        self.id = secrets.token_hex(10)
        self.workdir = root / self.id
        self.workdir.mkdir(parents=True)
        self.template_id = template_id
        self.envs = envs
        self.metadata = metadata
        self.network: dict | None = None  # ``network`` of the create request, or of the last update
        self.access_token = secrets.token_urlsafe(16)
        self.started_at = time.time()
        self.end_at = self.started_at + timeout
        self.renewals: list[float] = []  # time.time() of each set_timeout or connect that set end_at
        self.killed = False
        self.paused = False
        self.timeout = timeout
        self.auto_pause = auto_pause  # lifecycle on_timeout='pause'
        self.auto_resume = auto_resume  # a request to a paused sandbox resumes it
        self._loop = loop
        self._kernels = kernels
        self._timings = timings or Timings()
        self._contexts: dict[str, Context] = {}
        self._defaults: dict[str, str] = {}  # language -> id of its default context
        self._lock = threading.Lock()

    @property
    def expired(self) -> bool:
        return not self.paused and time.time() >= self.end_at

    @property
    def state(self) -> str:
        return "paused" if self.paused else "running"

    def pause(self) -> None:
        """``POST /sandboxes/{id}/pause``: E2B snapshots memory and files; here the kernels
        simply keep their state, and requests into the sandbox fail until it is resumed."""
        self.paused = True

    def resume(self, timeout: float | None = None) -> None:
        """``connect`` (or a request with auto-resume): running again for ``timeout`` seconds."""
        self.paused = False
        self.end_at = max(self.end_at, time.time() + (timeout or self.timeout))
        self.renewals.append(time.time())

    def create_context(self, language: str | None, cwd: str | None) -> Context:
        """``POST /contexts``: a new context; a Python kernel is ready when this returns.

        Raises:
            ContextError: 400 for an unsupported language or a cwd that is not a directory.
        """
        ctx = self._new_context(language, cwd)
        self._loop.call(ctx.start())
        with self._lock:
            self._contexts[ctx.id] = ctx
        return ctx

    def contexts(self) -> list[Context]:
        """``GET /contexts``: every context, default ones included."""
        with self._lock:
            return list(self._contexts.values())

    def context(self, context_id: str | None, language: str | None) -> Context:
        """The context of ``POST /execute``: by id, else the language's default one (created lazily).

        Raises:
            ContextError: 404 for an unknown id, 400 for an unsupported language.
        """
        with self._lock:
            if context_id:
                if context_id not in self._contexts:
                    raise ContextError(404, f"Context {context_id} not found")
                return self._contexts[context_id]
            language = language or "python"
            if language not in self._defaults:
                ctx = self._new_context(language, None)
                self._contexts[ctx.id] = ctx
                self._defaults[language] = ctx.id
            return self._contexts[self._defaults[language]]

    def restart_context(self, context_id: str) -> None:
        """``POST /contexts/{id}/restart``: stop any running execution, start a fresh kernel."""
        ctx = self.context(context_id, None)
        self._loop.call(ctx.restart())

    def remove_context(self, context_id: str) -> None:
        """``DELETE /contexts/{id}``: stop the context and forget it."""
        ctx = self.context(context_id, None)
        with self._lock:
            self._contexts.pop(context_id, None)
            self._defaults = {k: v for k, v in self._defaults.items() if v != context_id}
        self._loop.call(ctx.stop("The context was removed."))

    def kill(self) -> None:
        """Stop every context and delete the work dir; later requests find the sandbox gone."""
        self.killed = True
        with self._lock:
            contexts, self._contexts = list(self._contexts.values()), {}
        for ctx in contexts:
            try:
                self._loop.call(ctx.stop("The sandbox was killed."), timeout=30)
            except Exception:  # noqa: BLE001 - keep stopping the others
                pass
        shutil.rmtree(self.workdir, ignore_errors=True)

    def _new_context(self, language: str | None, cwd: str | None) -> Context:
        language = language or "python"
        path = self.workdir / (cwd or ".")  # an absolute cwd replaces the work dir
        if not path.is_dir():
            raise ContextError(400, f"cwd {str(path)!r} is not a directory")
        # E2B's sandboxes never see the client's environment: this server's inherit the test process's, less
        # inline figures' MPLBACKEND and the JupyterHub variables the tests set to check that the backend
        # passes none (only env_vars and envs reach a sandbox through the backend)
        env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND" and not k.startswith(("JUPYTERHUB_", "JPY_"))}
        env.update(self.envs, PWD=str(path))
        if language == "python":
            return PythonContext(path, env, self._kernels, self._timings,
                                 {"E2B_SANDBOX": "true", "E2B_SANDBOX_ID": self.id, **self.envs})
        if language == "bash":
            return BashContext(path, env)
        raise ContextError(400, f"Language {language!r} is not supported by the E2B test server")
