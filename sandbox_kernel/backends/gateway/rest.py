"""A Jupyter server's kernel REST API, from the client side: tornado's async HTTP client.

Endpoints (Jupyter Server REST API, also served by Kernel Gateway and Enterprise Gateway):
``POST /api/kernels``, ``GET``/``DELETE /api/kernels/{id}``, ``POST /api/kernels/{id}/interrupt``
and ``/restart``. Spec: https://jupyter-server.readthedocs.io/en/latest/developers/rest-api.html

Third-party errors (tornado, ssl, OS) become :mod:`sandbox_kernel.errors` here, in
:func:`http_errors`, and nowhere else (the websocket's connect goes through it too).
"""

from __future__ import annotations

import contextlib
import json
import ssl
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

from ...errors import BackendUnavailable, SandboxError, SandboxStartError


class KernelGone(SandboxError):
    """The gateway answered 404 for the kernel: it was deleted, culled, or never existed."""


class GatewayUnreachable(SandboxStartError):
    """No answer from the gateway: refused, timed out, or the connection dropped."""


@dataclass
class Endpoint:
    """Where the gateway is and how to talk to it. ``token`` is sent as ``Authorization:
    token ...`` and is never part of ``repr``, logs or messages."""

    url: str
    token: str = field(default="", repr=False)
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    validate_cert: bool = True
    ca_certs: str | None = None
    client_cert: str | None = None
    client_key: str | None = None
    request_timeout: float = 30.0

    def request(self, path: str, method: str = "GET", body: Any = None, timeout: float | None = None,
                websocket: bool = False) -> HTTPRequest:
        base = self.url.rstrip("/")
        if websocket:
            base = "ws" + base[4:] if base.startswith("http") else base
        headers = dict(self.headers)
        if self.token:
            headers["Authorization"] = f"token {self.token}"
        if body is not None:
            headers["Content-Type"] = "application/json"
        timeout = timeout or self.request_timeout
        return HTTPRequest(f"{base}{path}", method=method, headers=headers,
                           body=None if body is None else json.dumps(body),
                           allow_nonstandard_methods=method == "POST" and body is None,
                           connect_timeout=timeout, request_timeout=timeout,
                           validate_cert=self.validate_cert, ca_certs=self.ca_certs or None,
                           client_cert=self.client_cert or None, client_key=self.client_key or None)


@contextlib.contextmanager
def http_errors(endpoint: Endpoint, doing: str) -> Iterator[None]:
    """Map tornado/ssl/OS errors while ``doing`` something at the gateway to SandboxError."""
    where = f"the gateway at {endpoint.url}"
    try:
        yield
    except HTTPClientError as exc:
        if exc.code == 401 or (exc.code == 403 and "start" not in doing):
            raise BackendUnavailable(
                f"{where} refused the credentials (HTTP {exc.code}) while trying to {doing}.",
                fix="set the gateway's token in JUPYTER_GATEWAY_AUTH_TOKEN or --GatewayBackend.auth_token "
                    "(and any other headers it needs in --GatewayBackend.headers)") from None
        if exc.code == 403:  # Kernel Gateway: a bad token; Enterprise Gateway: also a refused user or limit
            raise BackendUnavailable(
                f"{where} refused to {doing} (HTTP 403: {_reason(exc)}).",
                fix="check the token (JUPYTER_GATEWAY_AUTH_TOKEN or --GatewayBackend.auth_token) and, for "
                    "Enterprise Gateway, the user in --GatewayBackend.env KERNEL_USERNAME=NAME") from None
        if exc.code == 404 and "kernel" in doing and "start" not in doing:
            raise KernelGone(f"{where} has no such kernel") from None
        if exc.code == 599:  # tornado's code for timeouts and lost connections
            raise GatewayUnreachable(f"{where} did not answer in time while trying to {doing} "
                                    f"({exc.message}).") from None
        raise SandboxStartError(f"{where} could not {doing}: HTTP {exc.code} {_reason(exc)}.") from None
    except ssl.SSLError as exc:
        raise SandboxStartError(
            f"TLS with {where} failed ({exc.reason or exc}); give its CA bundle in --GatewayBackend.ca_certs "
            "(or, for a test gateway only, --GatewayBackend.validate_cert=False).") from None
    except OSError as exc:
        raise GatewayUnreachable(f"Cannot reach {where} ({exc.strerror or exc}): is it running, and is "
                                "--GatewayBackend.url (JUPYTER_GATEWAY_URL) right?") from None


def _reason(exc: HTTPClientError) -> str:
    """The server's own ``message``/``reason`` from a JSON error body, else the HTTP reason."""
    body = exc.response.body if exc.response is not None else b""
    with contextlib.suppress(ValueError, TypeError, AttributeError):
        data = json.loads(body)
        text = data.get("message") or data.get("reason")
        if text:
            return str(text).strip().splitlines()[-1][:300]
    return exc.message or ""


async def call(endpoint: Endpoint, path: str, doing: str, method: str = "GET", body: Any = None,
               timeout: float | None = None) -> Any:
    """One REST call; returns the decoded JSON body (None when empty).

    Raises:
        BackendUnavailable (401/403), KernelGone (404 for a kernel), SandboxStartError."""
    client = AsyncHTTPClient(force_instance=True)
    try:
        with http_errors(endpoint, doing):
            response = await client.fetch(endpoint.request(path, method, body, timeout))
    finally:
        client.close()
    return json.loads(response.body) if response.body else None


def kernel_path(kernel_id: str, *rest: str) -> str:
    return "/".join(["/api/kernels", quote(kernel_id, safe=""), *rest])
