"""The egress proxy's first look at a connection, and at an allowed ``CONNECT`` tunnel: an
HTTP/1.x request head that mitmproxy can read, or a refusal said at once. Runs in the proxy
container beside :mod:`.proxy` (sent as the module ``egress_heads``).

mitmproxy waits for a request head's blank line, and answers a head it cannot read with a bare
``400`` of its own: a SOCKS greeting, HTTP/0.9 or binary bytes waited until the client gave up,
and a malformed target got no reason and the cell no line. :func:`read_head` decides from the
first bytes instead, with mitmproxy's own parser for a complete head, so what it passes
mitmproxy reads the same way.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from mitmproxy import http
from mitmproxy.net.http import http1
from mitmproxy.net.tls import starts_like_tls_record

HEAD_LIMIT = 65536
"""Bytes of a request head (request line and headers) the proxy reads before refusing it."""
LINE_LIMIT = 8192
"""Bytes of a request line the proxy reads before refusing it."""
_LINE = re.compile(rb"([A-Z]{3,12}) ([\x21-\x7e]+) HTTP/1\.[01]\r?\n")
_VERSIONLESS = re.compile(rb"([A-Z]{3,12}) ([\x21-\x7e]+)\r?\n")
_LINE_START = re.compile(  # what a request line can begin with: a method, a target, "HTTP/1.0" or "HTTP/1.1"
    rb"[A-Z]{1,12}(?: [\x21-\x7e]*(?: (?:H(?:T(?:T(?:P(?:/(?:1(?:\.(?:[01]\r?)?)?)?)?)?)?)?)?)?)?")
_BLANK_LINE = re.compile(rb"\n\r?\n")  # where a head ends, as h11's buffer (mitmproxy's HTTP/1 server's) finds it
_TLS_START = (b"\x16", b"\x16\x03")
SPEAKS_HTTP = "the proxy speaks HTTP only: HTTP_PROXY and HTTPS_PROXY name it"
SOCKS4_REFUSED = b"\x00\x5b" + bytes(6)
"""SOCKS4's reply "request rejected or failed" (its greeting starts with the byte 4)."""
SOCKS5_REFUSED = b"\x05\xff"
"""SOCKS5's reply "no acceptable methods" to its greeting (which starts with the byte 5)."""


@dataclass(frozen=True)
class Refusal:
    """What the proxy refuses (``what``: a target as written, or a kind of connection), why, and
    the bytes the client gets before the connection closes (``answer``, maybe none)."""

    what: str
    reason: str
    answer: bytes = b""


def bad_request(text: str) -> bytes:
    """An HTTP/1.1 ``400`` whose body is ``text``, the connection closing after it."""
    response = http.Response.make(400, text + "\n", {"Content-Type": "text/plain", "Connection": "close"})
    return http1.assemble_response(response)


def read_head(data: bytes, *, tunnel: bool) -> Refusal | None | bool:
    """Decide on the first bytes a client sent: to the proxy itself (``tunnel`` False) or inside
    an allowed tunnel (True; the caller looked for TLS first).

    Returns:
        True: a complete HTTP/1.0 or 1.1 request head that mitmproxy reads (a proxy request, or
        an origin-form one inside a tunnel); None: the start of one (or of a TLS record), more
        bytes are needed; a :class:`Refusal` otherwise, decided as soon as the bytes cannot
        become one.
    """
    if data in _TLS_START:
        return None
    if not tunnel and (refused := _not_http(data)):
        return refused
    end = data.find(b"\n")
    line = data if end < 0 else data[:end + 1]
    if end < 0:
        return None if _LINE_START.fullmatch(line) and len(line) < LINE_LIMIT else _unknown(data, tunnel)
    found = _LINE.fullmatch(line)
    if found is None:
        if versionless := _VERSIONLESS.fullmatch(line):
            return _refusal(versionless, "a request line without HTTP/1.0 or 1.1: HTTP/0.9, or a line break in "
                                         "the target")
        return _unknown(data, tunnel)
    if why := _target_problem(found.group(1), found.group(2), tunnel):
        return _refusal(found, why)
    return _head(data, found)


def _not_http(data: bytes) -> Refusal | None:
    """What a client that speaks another protocol to the proxy gets: SOCKS is answered in SOCKS."""
    if data[:1] == b"\x05":
        return Refusal("a SOCKS5 connection", SPEAKS_HTTP, SOCKS5_REFUSED)
    if data[:1] == b"\x04":
        return Refusal("a SOCKS4 connection", SPEAKS_HTTP, SOCKS4_REFUSED)
    if starts_like_tls_record(data):
        return Refusal("TLS to the proxy itself", "it speaks plain HTTP: HTTPS_PROXY is an http:// address")
    return None


def _target_problem(method: bytes, target: bytes, tunnel: bool) -> str | None:
    """Why a request line's target is refused before mitmproxy parses it, in words of our own
    (mitmproxy would refuse these too, with a bare ``400``)."""
    if method == b"CONNECT" and tunnel:
        return "a proxy request (CONNECT) inside a tunnel"
    if method == b"CONNECT" or b"://" in target:
        authority = target if method == b"CONNECT" else target.split(b"://", 1)[1].split(b"/", 1)[0]
        if b"@" in authority:
            return "a target with user information, USER@HOST"
        if b"%" in authority:
            return "a percent-encoded host name"
    elif not tunnel:
        return "not a proxy request: GET http://HOST/PATH or CONNECT HOST:PORT"
    return None


def _head(data: bytes, line: re.Match) -> Refusal | None | bool:
    """A whole head, read by mitmproxy's parser; None until its blank line arrives."""
    end = _BLANK_LINE.search(data)
    if end is None:
        return None if len(data) < HEAD_LIMIT else _refusal(line, f"a request head over {HEAD_LIMIT} bytes")
    lines = [x[:-1] if x.endswith(b"\r") else x for x in data[:end.start()].split(b"\n")]
    try:
        request = http1.read_request_head(lines)
        http1.expected_http_body_size(request)
    except ValueError as exc:
        if str(exc).startswith("Bad HTTP request line"):
            return _refusal(line, "a target the proxy cannot read: CONNECT HOST:PORT or GET http://HOST/PATH")
        return _refusal(line, f"a request the proxy cannot read: {exc}")
    return True


def _refusal(line: re.Match, reason: str) -> Refusal:
    what = f"{line.group(1).decode()} {line.group(2).decode()[:200]}"
    return Refusal(what, reason, bad_request(f"sandbox-kernel egress refused {what}: {reason}"))


def _unknown(data: bytes, tunnel: bool) -> Refusal:
    """Bytes that are no HTTP request. Inside a tunnel the client speaks to a server, not to the
    proxy: the connection closes without an HTTP answer."""
    reason = f"neither TLS nor HTTP: it began {data[:8]!r}"
    if tunnel:
        return Refusal("a tunnel", reason)
    return Refusal("a connection", reason, bad_request(f"sandbox-kernel egress refused a connection: {reason}"))


def own_bad_requests(report: Callable[[str, str], None]) -> None:
    """mitmproxy answers a request head it cannot read with a bare ``400`` of its own and tells no
    addon. A connection's first request is read by :func:`read_head` before mitmproxy sees it; a
    later one on a kept-alive connection gets the project's refusal from here, ``report``-ed
    (``what``, ``reason``) like every other. Replaces mitmproxy 12.3's
    ``_http1.make_error_response`` for status 400; tests/test_egress.py sends such a request."""
    from mitmproxy.proxy.layers.http import _http1

    bare = _http1.make_error_response

    def refusal(status_code: int, message: str = "") -> bytes:
        if status_code != 400:
            return bare(status_code, message)
        reason = f"a request the proxy cannot read: {message}"
        report("a request", reason)
        return bad_request(f"sandbox-kernel egress refused a request: {reason}")

    _http1.make_error_response = refusal
