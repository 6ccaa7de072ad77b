"""HTTP/1.1 plumbing for ``tests/e2b_server.py`` on the standard library's ``http.server``.

Request bodies (Content-Length or chunked), JSON and byte responses, chunked
streaming that flushes every chunk, client-disconnect detection, and a small
``multipart/form-data`` reader. Routing is a list of ``(method, regex, name)``.
"""

from __future__ import annotations

import json
import re
import select
import socket
import sys
from email.message import Message
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit


class HTTPError(Exception):
    """Answer the request with ``status`` and a JSON ``{"code", "message", **extra}`` body, or
    with the message alone as text/plain when ``plain``."""

    def __init__(self, status: int, message: str, *, plain: bool = False, **extra: object) -> None:
        super().__init__(message)
        self.status = status
        self.plain = plain
        self.body = {"code": status, "message": message, **extra}


class HandlerBase(BaseHTTPRequestHandler):
    """Keep-alive HTTP/1.1 handler; subclasses implement :meth:`route`.

    Handlers raise :class:`HTTPError` to answer with a JSON error; any other exception
    answers 500.
    """

    protocol_version = "HTTP/1.1"
    server_version = "e2b-test-server"

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def route(self, method: str, path: str) -> None:
        raise NotImplementedError("The 'route' method must be implemented.")

    def _handle(self, method: str) -> None:
        url = urlsplit(self.path)
        self.query = {k: v[0] for k, v in parse_qs(url.query).items()}
        self._body: bytes | None = None
        self._responded = False
        try:
            self.route(method, url.path)
        except Exception as exc:  # noqa: BLE001 - every failure becomes an HTTP answer
            if not isinstance(exc, HTTPError):
                exc = HTTPError(500, f"{type(exc).__name__}: {exc}")
            if self._responded:  # too late for a status line: cut the connection
                self.close_connection = True
                return
            self.body()  # keep the connection in sync
            if exc.plain:
                self.send_bytes(exc.status, str(exc).encode(), "text/plain; charset=utf-8")
            else:
                self.send_json(exc.status, exc.body)

    def dispatch(self, routes: list[tuple[str, str, str]], method: str, path: str) -> None:
        """Call the handler method whose pattern matches ``path`` with the captured groups."""
        allowed = False
        for route_method, pattern, name in routes:
            match = re.fullmatch(pattern, path)
            if match and route_method == method:
                return getattr(self, name)(*match.groups())
            allowed = allowed or bool(match)
        raise HTTPError(405 if allowed else 404, f"no route for {method} {path}")

    # -- request body ----------------------------------------------------------------------
    def body(self) -> bytes:
        """The whole request body (Content-Length or chunked), read once."""
        if self._body is None:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                chunks = []
                while size := int(self.rfile.readline().split(b";")[0], 16):
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                self._body = b"".join(chunks)
            else:
                self._body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        return self._body

    def json_body(self) -> dict:
        raw = self.body()
        return json.loads(raw) if raw.strip() else {}

    def multipart_files(self, content_type: str) -> list[tuple[str | None, bytes]]:
        """``(filename, data)`` of every ``file`` field of a multipart/form-data body."""
        header = Message()
        header["Content-Type"] = content_type
        boundary = header.get_param("boundary")
        files = []
        for part in self.body().split(b"--" + boundary.encode())[1:]:
            if part.startswith(b"--"):
                break
            head, _, data = part.partition(b"\r\n\r\n")
            part_headers = Message()
            for line in head.decode("utf-8", "replace").strip().splitlines():
                key, _, value = line.partition(":")
                part_headers[key.strip()] = value.strip()
            if part_headers.get_param("name", header="content-disposition") == "file":
                files.append((part_headers.get_filename(), data.removesuffix(b"\r\n")))
        return files

    # -- responses -------------------------------------------------------------------------
    def send_json(self, status: int, data: object) -> None:
        self.send_bytes(status, json.dumps(data, separators=(",", ":")).encode(), "application/json")

    def send_bytes(self, status: int, data: bytes, content_type: str | None = None) -> None:
        self._responded = True
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        if status != 204:
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def start_stream(self, content_type: str | None) -> None:
        """Send a 200 with chunked transfer encoding; then :meth:`write_chunk`, :meth:`end_stream`."""
        self._responded = True
        self.send_response(200)
        if content_type:
            self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def write_chunk(self, data: bytes) -> None:
        """Write one chunk; ``wfile`` is unbuffered, so it leaves at once."""
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")

    def abort_connection(self) -> None:
        """Cut the connection mid-response, so the client sees a broken stream."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def client_gone(self) -> bool:
        """Whether the client closed its side of the connection (peeks, consumes nothing)."""
        readable, _, _ = select.select([self.connection], [], [], 0)
        if not readable:
            return False
        try:
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib name
        if getattr(self.server, "app", None) is not None and self.server.app.verbose:
            sys.stderr.write(f"{self.address_string()} - {format % args}\n")
