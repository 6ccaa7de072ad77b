"""The gateway backend's boundary with tornado's HTTP client (and ssl, and the OS): the one
place their exceptions are caught and mapped to the :class:`~sandbox_kernel.core.errors.SandboxError`
tree, each with what to do about it. The REST calls (:mod:`.rest`) and the websocket's connect
(:mod:`.ws`) run in :func:`http_errors`."""

from __future__ import annotations

import contextlib
import json
import ssl
from collections.abc import Iterator

from tornado.httpclient import HTTPClientError

from ...core.errors import BackendUnavailable, GatewayUnreachable, KernelGone, SandboxStartError


@contextlib.contextmanager
def http_errors(url: str, doing: str) -> Iterator[None]:
    """Map tornado/ssl/OS errors while ``doing`` something at the gateway at ``url`` to SandboxError.

    Raises:
        BackendUnavailable: the gateway refused the credentials (401, 403).
        KernelGone: 404 for a kernel.
        GatewayUnreachable: no answer in time, or no connection.
        SandboxStartError: any other HTTP error, or TLS failed.
    """
    where = f"the gateway at {url}"
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
