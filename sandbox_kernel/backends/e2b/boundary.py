"""The e2b backend's boundary with the E2B SDK: import, connection settings, exceptions.

:func:`sdk` imports ``e2b_code_interpreter`` lazily (``import sandbox_kernel`` never needs
it). :class:`Connection` holds how to reach E2B (options first, then the ``E2B_*`` environment
variables) and gives the SDK's keyword arguments. :func:`translate` maps an exception of the
SDK, or of httpx (which the SDK lets through for network failures), to the
:class:`~sandbox_kernel.core.errors.SandboxError` tree with one short, user-facing message;
:meth:`Connection.boundary` applies it to a block. No message ever carries the API key.

What the SDK raises (e2b 2.x, measured against the local E2B-compatible test server):

==================================================  ============================================
``AuthenticationException`` (the API answered 401)  :class:`BackendUnavailable` (fix: the key)
``SandboxNotFoundException`` (connect, set_timeout:  :class:`SandboxGone`: the sandbox no longer
404), ``SandboxNotRunningException`` (envd: 502),    exists and nothing ran; the backend replaces
``TimeoutException`` "... was not found" (502 on     it or fails (``on_lost``)
``/execute``)
``TimeoutException`` "... was killed while the       :class:`SandboxDied` (it died during a cell)
request was in progress"
any other ``TimeoutException``, httpx timeouts      no answer within ``request_timeout``
``httpx.TransportError`` (refused, DNS, reset)      E2B cannot be reached
``FileNotFoundException``                           :class:`FileNotFoundError`
``InvalidArgumentException``                        :class:`ConfigError`
429, 503, any other ``SandboxException``            a short message
==================================================  ============================================
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

from ...core.errors import BackendUnavailable, ConfigError, SandboxDied, SandboxError

ENV = ("E2B_API_KEY", "E2B_DOMAIN", "E2B_API_URL", "E2B_SANDBOX_URL", "E2B_DEBUG")
"""The SDK's environment variables; read once, when the backend is made."""
INSTALL_FIX = "pip install 'sandbox-kernel[e2b]'"
KEY_FIX = "set the environment variable E2B_API_KEY (or the option E2BBackend.api_key)"
KEYS_PAGE = "https://e2b.dev/dashboard?tab=keys"


class SandboxGone(SandboxDied):
    """The E2B sandbox no longer exists (it expired or was killed), found at the start of a
    request: nothing of the request ran."""


def sdk() -> ModuleType:
    """The ``e2b_code_interpreter`` module.

    Raises:
        BackendUnavailable: the SDK is not installed (the fix names the extra).
    """
    try:
        import e2b_code_interpreter
    except ImportError as exc:
        raise BackendUnavailable(f"The e2b backend needs the Python package {exc.name or 'e2b_code_interpreter'!r}, "
                                 "which is not installed.", fix=INSTALL_FIX) from exc
    return e2b_code_interpreter


@dataclass(frozen=True)
class Connection:
    """How to reach E2B. Each setting is the backend's option, else its environment variable.

    Attributes:
        api_key: ``E2B_API_KEY``; never shown (not in ``repr``, scrubbed from messages).
        domain, api_url, sandbox_url, debug: ``E2B_DOMAIN``, ``E2B_API_URL``,
            ``E2B_SANDBOX_URL`` (the test server's address), ``E2B_DEBUG``.
        request_timeout: seconds to wait for E2B to answer a request.
    """

    api_key: str = field(repr=False)
    domain: str = ""
    api_url: str = ""
    sandbox_url: str = ""
    debug: str = ""
    request_timeout: float = 60.0

    @classmethod
    def resolve(cls, env: Mapping[str, str], *, api_key: str, domain: str, api_url: str,
                request_timeout: float) -> Connection:
        return cls(api_key or env.get("E2B_API_KEY", ""), domain or env.get("E2B_DOMAIN", ""),
                   api_url or env.get("E2B_API_URL", ""), env.get("E2B_SANDBOX_URL", ""), env.get("E2B_DEBUG", ""),
                   request_timeout)

    @property
    def service(self) -> str:
        """Where E2B is reached, for messages: the API URL's origin (no credentials) or the domain."""
        if self.api_url:
            parts = urlsplit(self.api_url)
            return f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")
        return self.domain or "e2b.app"

    def sdk_options(self) -> dict[str, Any]:
        """Keyword arguments (the SDK's ``ApiParams``) for ``AsyncSandbox.create``/``connect``.

        Raises:
            BackendUnavailable: there is no API key.
        """
        if not self.api_key:
            raise BackendUnavailable("The e2b backend needs an E2B API key, and none is set.", fix=KEY_FIX)
        options: dict[str, Any] = {"api_key": self.api_key, "request_timeout": self.request_timeout}
        options.update({k: v for k, v in (("domain", self.domain), ("api_url", self.api_url),
                                          ("sandbox_url", self.sandbox_url)) if v})
        if self.debug:
            options["debug"] = self.debug.lower() == "true"
        return options

    def scrub(self, text: str) -> str:
        """``text`` with the API key replaced by ``***``."""
        return text.replace(self.api_key, "***") if self.api_key else text

    @contextlib.contextmanager
    def boundary(self, sandbox_id: str | None = None, failure: type[SandboxError] = SandboxError) -> Iterator[None]:
        """Run the block; raise :func:`translate`'s exception for any SDK or httpx one (``from``
        it). Our own exceptions and cancellation pass unchanged."""
        try:
            yield
        except SandboxError:
            raise
        except Exception as exc:
            mapped = translate(exc, self, sandbox_id, failure)
            if mapped is None:
                raise
            raise mapped from exc


def _short(text: str, limit: int = 200) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "unknown error"
    return line if len(line) <= limit else line[: limit - 1] + "…"


def translate(exc: BaseException, connection: Connection, sandbox_id: str | None = None,
              failure: type[SandboxError] = SandboxError) -> BaseException | None:
    """The sandbox-kernel exception for ``exc``, or None when it is neither the SDK's nor
    httpx's. ``failure`` is the class of a generic failure (SandboxStartError when starting)."""
    import e2b
    import httpx

    sandbox = f"E2B sandbox {sandbox_id}" if sandbox_id else "E2B sandbox"
    message = connection.scrub(str(exc))
    if isinstance(exc, e2b.AuthenticationException):
        if "API key is required" in message:
            return BackendUnavailable("The e2b backend needs an E2B API key, and none is set.", fix=KEY_FIX)
        return BackendUnavailable("E2B rejected the API key (401 Unauthorized).",
                                  fix=f"set E2B_API_KEY to a valid key from {KEYS_PAGE}")
    if isinstance(exc, e2b.FileNotFoundException):
        return FileNotFoundError(_short(message))
    if isinstance(exc, (e2b.SandboxNotFoundException, e2b.SandboxNotRunningException)) or (
            isinstance(exc, e2b.TimeoutException) and "was not found" in message):
        return SandboxGone(f"the {sandbox} no longer exists (it expired or was killed)")
    if isinstance(exc, e2b.TimeoutException) and "was killed" in message:
        return SandboxDied(f"the {sandbox} was killed or reached the end of its lifetime during the cell")
    if isinstance(exc, (e2b.TimeoutException, httpx.TimeoutException)):
        return failure(f"E2B ({connection.service}) did not answer within {connection.request_timeout:g} s "
                       "(raise E2BBackend.request_timeout).")
    if isinstance(exc, httpx.TransportError):
        reason = re.sub(r"\s*\(os error \d+\)$", "", _short(message, 400).rsplit(": ", 1)[-1])
        return failure(f"Could not reach E2B at {connection.service}: {reason}. "
                       "Check the network connection and the E2BBackend.domain / api_url options.")
    if isinstance(exc, e2b.InvalidArgumentException):
        return ConfigError(f"Bad option for the e2b backend: {_short(message)}")
    if isinstance(exc, e2b.RateLimitException):
        return failure("E2B refused the request: rate limit reached (429). Wait a moment and try again.")
    if isinstance(exc, e2b.ServiceBusyException):
        return failure("E2B is busy (503): no capacity for this request right now. Try again shortly.")
    if isinstance(exc, e2b.SandboxException):
        return failure(f"E2B error: {_short(message)}")
    return None
