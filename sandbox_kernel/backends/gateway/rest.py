"""A Jupyter server's kernel REST API, from the client side: tornado's async HTTP client.

Endpoints (Jupyter Server REST API, also served by Kernel Gateway and Enterprise Gateway):
``POST /api/kernels``, ``GET``/``DELETE /api/kernels/{id}``, ``POST /api/kernels/{id}/interrupt``
and ``/restart``. Spec: https://jupyter-server.readthedocs.io/en/latest/developers/rest-api.html

Third-party errors (tornado, ssl, OS) become :mod:`sandbox_kernel.core.errors` in
:func:`.boundary.http_errors` and nowhere else (the websocket's connect goes through it too).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from .boundary import http_errors


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


async def call(endpoint: Endpoint, path: str, doing: str, method: str = "GET", body: Any = None,
               timeout: float | None = None) -> Any:
    """One REST call; returns the decoded JSON body (None when empty).

    Raises:
        BackendUnavailable (401/403), KernelGone (404 for a kernel), SandboxStartError."""
    client = AsyncHTTPClient(force_instance=True)
    try:
        with http_errors(endpoint.url, doing):
            response = await client.fetch(endpoint.request(path, method, body, timeout))
    finally:
        client.close()
    return json.loads(response.body) if response.body else None


def kernel_path(kernel_id: str, *rest: str) -> str:
    return "/".join(["/api/kernels", quote(kernel_id, safe=""), *rest])
