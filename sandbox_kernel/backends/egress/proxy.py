"""The egress proxy's program: it runs in the proxy container (the egress image, :data:`..docker.proxy_spec.IMAGE`),
never on the host. The host sends this source, :mod:`.heads` and :mod:`.rules` over the container's attach
stream (:data:`.bootstrap.BOOTSTRAP`), then one JSON line of configuration; later lines change the
allowlist. Every decision is written to standard output as one JSON line (:func:`say`).

mitmproxy (its proxy core, TLS and HTTP layers) does the protocols; this file decides:

- what a client sends the proxy must be an HTTP/1.x proxy request whose head mitmproxy reads
  (:mod:`.heads`): anything else (SOCKS, TLS, HTTP/0.9, other bytes, a malformed target) is
  refused as soon as its first bytes show it, with the reason;
- ``CONNECT host:port`` must be allowed (``http_connect``), else ``403`` with the reason;
- inside a tunnel (:class:`Tunnels`, mitmproxy's ``next_layer``): TLS whose ClientHello names
  the tunnel's host (SNI), passed through unread, or terminated when a secret is bound to that
  host; plain HTTP whose ``Host`` is the tunnel's host; nothing else, refused as soon as the
  first bytes (or those of a server that speaks first) show it;
- plain HTTP sent to the proxy (``GET http://host/``): the URL's host must be allowed and equal
  ``Host`` (``requestheaders``);
- every server connection (``server_connect``): the name is resolved here, each address is
  checked (:meth:`.rules.Allowlist.forbidden`) and the connection goes to the checked address,
  never to a second lookup's;
- a secret bound to a host is set on requests the proxy terminated for that host only, after
  mitmproxy verified the host's certificate.

The sandbox reaches the proxy only through a unix socket in a volume both containers mount
(:func:`serve_socket`); the sandbox has no network at all.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import json
import os
import re
import socket
import sys
import types

import egress_heads as heads  # the host sends these three with this file
import egress_rules as rules
from egress_pipe import _pipe

LISTEN_PORT = 3129
RESOLVE_TIMEOUT = 5.0
CONFDIR = "/tmp/mitmproxy"


def _quick_imports() -> None:
    """Import mitmproxy's ``addons`` package without its ``__init__``, which loads every addon
    (flask and the web app among them): half of the start (0.49 s -> 0.25 s measured)."""
    import mitmproxy

    package = types.ModuleType("mitmproxy.addons")
    package.__path__ = [os.path.join(mitmproxy.__path__[0], "addons")]
    sys.modules.setdefault("mitmproxy.addons", package)


_quick_imports()

from mitmproxy import http, options  # noqa: E402
from mitmproxy.addons import core, next_layer, proxyserver  # noqa: E402
from mitmproxy.master import Master  # noqa: E402
from mitmproxy.net.tls import starts_like_tls_record  # noqa: E402
from mitmproxy.proxy import commands, events, layer, layers  # noqa: E402
from mitmproxy.proxy.layers.http import HTTPMode, HttpStream  # noqa: E402
from mitmproxy.proxy.layers.tls import parse_client_hello  # noqa: E402


def say(**event: object) -> None:
    """One event for the host, as a JSON line on standard output."""
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def own_addresses() -> set:
    """This container's addresses and its gateways (``/proc/net/fib_trie``, ``/proc/net/route``)."""
    found = set()
    with open("/proc/net/fib_trie") as trie:
        last = None
        for line in trie:
            line = line.strip()
            if line.startswith("|--"):
                last = line[3:].strip()
            elif "/32 host LOCAL" in line and last:
                found.add(ipaddress.ip_address(last))
    with open("/proc/net/route") as routes:
        for line in list(routes)[1:]:
            gateway = line.split()[2]
            if gateway != "00000000":
                found.add(ipaddress.ip_address(socket.inet_ntoa(bytes.fromhex(gateway)[::-1])))
    return found


class Refuse(layer.Layer):
    """Sends the client ``answer`` (maybe nothing) and closes its connection: what a connection
    or a tunnel carrying anything but the allowed gets."""

    def __init__(self, context, answer: bytes = b"") -> None:
        super().__init__(context)
        self.answer = answer

    def _handle_event(self, event):
        if isinstance(event, events.Start):
            if self.answer:
                yield commands.SendData(self.context.client, self.answer)
            yield commands.CloseConnection(self.context.client)


def fail_closed(hook):
    """A hook that refuses what it could not check: mitmproxy logs an addon's exception and
    carries on, so a request whose check raised would go out unchecked (a Host header that
    ``normalize`` rejects, an address ``as_address`` cannot read)."""
    def refuse(self, arg, exc: Exception) -> None:
        reason = f"the proxy could not check it ({type(exc).__name__})"
        server = getattr(arg, "server", None)
        if server is not None:  # server_connect
            host, port = (tuple(server.address or ()) + ("?", 0))[:2]
            server.error = self.refuse(str(host), port, reason)
        else:
            host, port = getattr(arg.request, "host", "?"), getattr(arg.request, "port", 0)
            self._deny(arg, host, port, reason)

    if asyncio.iscoroutinefunction(hook):
        @functools.wraps(hook)
        async def checked(self, arg):
            try:
                await hook(self, arg)
            except Exception as exc:  # noqa: BLE001 - whatever went wrong, the request is refused
                refuse(self, arg, exc)
    else:
        @functools.wraps(hook)
        def checked(self, arg):
            try:
                hook(self, arg)
            except Exception as exc:  # noqa: BLE001 - whatever went wrong, the request is refused
                refuse(self, arg, exc)
    return checked


class Policy:
    """mitmproxy's hooks that decide (see the module docstring); each refuses what it could not
    check (:func:`fail_closed`)."""

    def __init__(self, config: dict) -> None:
        self.allowlist = rules.Allowlist(config["allow"])
        self.secrets = {rules.normalize(host): headers for host, headers in config.get("secrets", {}).items()}
        self.tunnels: dict[str, tuple[str, int]] = {}  # server connection id -> CONNECT's (host, port)
        self.own = own_addresses()

    def refuse(self, host: str, port: int, reason: str, allowable: bool = False) -> str:
        say(event="refused", host=host, port=port, reason=reason, allowable=allowable)
        return f"sandbox-kernel egress refused {host}:{port}: {reason}"

    def refuse_unread(self, what: str, reason: str) -> None:
        """A refusal of what names no host the proxy could read (another protocol, a malformed target)."""
        say(event="refused", what=what, reason=reason, allowable=False)

    def _deny(self, flow, host: str, port: int, reason: str, allowable: bool = False) -> None:
        flow.response = http.Response.make(403, self.refuse(host, port, reason, allowable) + "\n",
                                           {"Content-Type": "text/plain"})

    @fail_closed
    def http_connect(self, flow) -> None:
        host, port = flow.request.host, flow.request.port
        if not self.allowlist.allows(host, port):
            self._deny(flow, host, port, "not allowed", allowable=True)
        else:
            self.tunnels[flow.server_conn.id] = (rules.normalize(host), port)

    @fail_closed
    def requestheaders(self, flow) -> None:
        if flow.response is not None or flow.request.method == "CONNECT":
            return
        request = flow.request
        tunnel = self.tunnels.get(flow.server_conn.id)
        header = rules.normalize(re.sub(r":\d+$", "", request.host_header or ""))
        if tunnel is None:  # plain HTTP sent to the proxy: GET http://host/
            host, port = rules.normalize(request.host), request.port
            if not self.allowlist.allows(host, port):
                return self._deny(flow, host, port, "not allowed", allowable=True)
        else:
            (host, port), url_host = tunnel, request.first_line_format == "absolute"
            if url_host:
                return self._deny(flow, host, port, "a proxy request (absolute URL) inside a tunnel")
        if header != host:
            return self._deny(flow, host, port, f"the Host header names {request.host_header!r}")
        headers = self.secrets.get(host)
        if headers and tunnel is not None and flow.server_conn.tls_established:
            for name, value in headers:
                request.headers[name] = value

    @fail_closed
    async def server_connect(self, data) -> None:
        server = data.server
        host, port = server.address
        if not self.allowlist.allows(host, port):
            server.error = self.refuse(host, port, "not allowed", allowable=True)
            return
        address = rules.as_address(host)
        try:
            candidates = [address] if address else await self._resolve(rules.normalize(host), port)
        except OSError as exc:
            server.error = self.refuse(host, port, f"the name did not resolve ({exc})")
            return
        reasons = []
        for candidate in candidates:
            why = self.allowlist.forbidden(candidate, self.own)
            if why is None:
                server.address = (str(candidate), port)
                if address is None and server.sni is None:
                    server.sni = rules.normalize(host)
                return
            reasons.append(f"{candidate} is {why}")
        server.error = self.refuse(host, port, "it resolves to " + "; ".join(reasons))

    @staticmethod
    async def _resolve(name: str, port: int) -> list:
        loop = asyncio.get_running_loop()
        try:
            infos = await asyncio.wait_for(loop.getaddrinfo(name, port, type=socket.SOCK_STREAM), RESOLVE_TIMEOUT)
        except asyncio.TimeoutError:
            raise OSError(f"no answer within {RESOLVE_TIMEOUT:g} s") from None
        return [rules.as_address(info[4][0]) for info in infos]

    def server_disconnected(self, data) -> None:
        self.tunnels.pop(data.server.id, None)


class Tunnels(next_layer.NextLayer):
    """mitmproxy's layer choice, with the tunnel's content decided by :class:`Policy`'s rules."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy

    def _next_layer(self, context, data_client: bytes, data_server: bytes):
        stack = context.layers
        if len(stack) == 1:  # what the client sent the proxy itself
            verdict = heads.read_head(data_client, tunnel=False)
            if verdict is None:
                raise next_layer.NeedsMoreData
            if isinstance(verdict, heads.Refusal):
                self.policy.refuse_unread(verdict.what, verdict.reason)
                return Refuse(context, verdict.answer)
        if isinstance(stack[-1], HttpStream):
            return self._tunnel(context, data_client, data_server)
        if isinstance(stack[-1], layers.ClientTLSLayer):  # inside TLS terminated for a secret
            return layers.HttpLayer(context, HTTPMode.transparent)
        return super()._next_layer(context, data_client, data_server)

    def _tunnel(self, context, data: bytes, server_data: bytes):
        host, port = self.policy.tunnels.get(context.server.id, (None, 0))
        if host is None:
            return Refuse(context)
        if starts_like_tls_record(data):
            try:
                hello = parse_client_hello(data)
            except ValueError:
                self.policy.refuse(host, port, "a malformed TLS ClientHello")
                return Refuse(context)
            if hello is None:
                raise next_layer.NeedsMoreData
            sni = rules.normalize(hello.sni) if hello.sni else None
            if sni != (None if rules.as_address(host) else host):
                self.policy.refuse(host, port, f"the TLS server name (SNI) is {hello.sni!r}")
                return Refuse(context)
            if host in self.policy.secrets:
                context.server.sni = host
                tls = layers.ServerTLSLayer(context)
                tls.child_layer = layers.ClientTLSLayer(context)
                return tls
            return layers.TCPLayer(context, ignore=True)
        if server_data and not data:
            self.policy.refuse(host, port, "the server spoke first: neither TLS nor HTTP")
            return Refuse(context)
        verdict = heads.read_head(data, tunnel=True)
        if verdict is None:
            raise next_layer.NeedsMoreData
        if verdict is True:
            return layers.HttpLayer(context, HTTPMode.transparent)
        self.policy.refuse(host, port, verdict.reason)
        return Refuse(context, verdict.answer)


async def serve_socket(path: str) -> asyncio.AbstractServer:
    """The sandbox's way in: a unix socket at ``path`` (mode 0666; its volume is read-only in
    the sandbox), each connection piped to mitmproxy's listener on this container's loopback."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", LISTEN_PORT)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))

    server = await asyncio.start_unix_server(handle, path)
    os.chmod(path, 0o666)
    return server


def _trust_file(config: dict) -> str | None:
    """A CA file for the hosts the proxy terminates TLS for: the system's and ``upstream_ca``."""
    if not config.get("secrets"):
        return None
    import certifi

    with open(certifi.where()) as system:
        bundle = system.read()
    path = os.path.join(CONFDIR, "upstream-ca.pem")
    with open(path, "w") as out:
        out.write(bundle + "\n" + (config.get("upstream_ca") or ""))
    return path


async def _listening(port: int) -> None:
    for _ in range(500):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.01)
            continue
        writer.close()
        return
    raise RuntimeError("mitmproxy did not listen")


def _publish_ca(directory: str) -> None:
    """The sandbox's CA bundle: the system's CAs (certifi's, as mitmproxy uses them) and this
    session's CA (the proxy's, made at start in its private CONFDIR; its key never leaves it),
    written where the sandbox reads it."""
    import certifi

    with open(certifi.where()) as system, open(f"{CONFDIR}/mitmproxy-ca-cert.pem") as own:
        bundle = system.read() + "\n" + own.read()
    with open(os.path.join(directory, "ca-bundle.pem"), "w") as out:
        out.write(bundle)


async def control(policy: Policy, master: Master) -> None:
    """Later lines from the host: ``{"allow": [...], "id": N}`` replaces the allowlist (answered
    ``{"event": "allowed", "id": N}``); ``{"flush": true, "id": N}`` is answered ``{"event":
    "flushed", "id": N}`` after every event before it. The end of the stream ends the proxy."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := await reader.readline():
        message = json.loads(line)
        if "allow" in message:
            policy.allowlist = rules.Allowlist(message["allow"])
            say(event="allowed", id=message.get("id"))
        elif "flush" in message:
            say(event="flushed", id=message.get("id"))
    master.shutdown()


async def main(config: dict) -> None:
    os.makedirs(CONFDIR, exist_ok=True)
    policy = Policy(config)
    heads.own_bad_requests(policy.refuse_unread)
    opts = options.Options()
    master = Master(opts)
    addons = [core.Core(), proxyserver.Proxyserver(), Tunnels(policy)]
    if config.get("secrets"):
        from mitmproxy.addons import tlsconfig

        addons.append(tlsconfig.TlsConfig())
    master.addons.add(*addons, policy)
    opts.update(mode=[f"regular@127.0.0.1:{LISTEN_PORT}"], connection_strategy="eager", confdir=CONFDIR)
    if trust := _trust_file(config):
        opts.update(ssl_verify_upstream_trusted_ca=trust)
    running = asyncio.ensure_future(master.run())
    await _listening(LISTEN_PORT)
    directory = config["directory"]
    server = await serve_socket(os.path.join(directory, "proxy.sock"))
    if config.get("secrets"):
        _publish_ca(directory)
    say(event="ready")
    # Held here: the loop keeps only weak references to tasks, and a task nothing else holds can be
    # collected while it waits (measured: the control loop vanished mid-session, its lines unread).
    controlling = asyncio.ensure_future(control(policy, master))
    await running
    server.close()
    controlling.cancel()
