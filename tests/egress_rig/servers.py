"""The egress tests' own servers, one role per container of the rig (tests/support/egress.py sends
this file as the container's ``python -c`` program; its image is tests/egress_rig/Dockerfile).

Every server writes one JSON line to stdout for everything it receives, which the tests read
from the container's log:

- ``dns``: a DNS server (dnslib) on UDP and TCP 53, the proxy's only resolver: it answers the
  names of ``RIG_ZONE`` (JSON ``{"name": "address"}``) and NXDOMAIN for anything else, and records
  every query (``{"dns": "name", "type": "A"}``). It stands for the outside resolver.
- ``api``: HTTPS on 443 with ``RIG_CERT``/``RIG_KEY`` (PEM, signed by the test's own CA); records
  each request's headers and answers ``{"role", "path", "authorized"}`` (never a header's value:
  a secret the proxy added must not come back into the sandbox); ``/redirect?to=URL`` answers 302.
  The same on plain HTTP, port 80; and a server that speaks first (an SMTP-like banner) on 2525.
- ``attacker``: records every TCP connection on ``RIG_TCP`` ports and every UDP datagram on
  ``RIG_UDP`` ports (``{"tcp": port, "data": first bytes}``), answers a plain HTTP 200 on TCP; a
  probe that reaches it is a leak.
"""

import json
import os
import socket
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


def record(**event):
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        url = urlsplit(self.path)
        record(role=ROLE, path=self.path, headers=dict(self.headers))
        if url.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", parse_qs(url.query)["to"][0])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = json.dumps({"role": ROLE, "path": self.path, "authorized": "Authorization" in self.headers}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET

    def log_message(self, *args):
        pass


def api():
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    for name in ("cert", "key"):
        with open(f"/tmp/{name}.pem", "w") as out:
            out.write(os.environ[f"RIG_{name.upper()}"])
    context.load_cert_chain("/tmp/cert.pem", "/tmp/key.pem")
    plain = ThreadingHTTPServer(("0.0.0.0", 80), Handler)
    threading.Thread(target=plain.serve_forever, daemon=True).start()
    threading.Thread(target=_banner, args=(2525,), daemon=True).start()
    server = ThreadingHTTPServer(("0.0.0.0", 443), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    record(ready=ROLE)
    server.serve_forever()


def _banner(port):
    listener = socket.create_server(("0.0.0.0", port), reuse_port=True)
    while True:
        conn, _ = listener.accept()
        try:
            conn.sendall(b"220 api.test ESMTP rig\r\n")
            conn.settimeout(5)
            conn.recv(100)
        except OSError:
            pass
        conn.close()


def _tcp(port):
    listener = socket.create_server(("0.0.0.0", port), reuse_port=True)
    while True:
        conn, peer = listener.accept()
        conn.settimeout(2)
        try:
            data = conn.recv(4096)
        except OSError:
            data = b""
        record(tcp=port, peer=peer[0], data=data[:200].decode("latin-1"))
        try:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\nleaked")
        except OSError:
            pass
        conn.close()


def _udp(port):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("0.0.0.0", port))
    while True:
        data, peer = sock.recvfrom(65536)
        record(udp=port, peer=peer[0], data=data[:200].decode("latin-1"))


def attacker():
    ports = [(_tcp, int(p)) for p in os.environ["RIG_TCP"].split()] + [(_udp, int(p)) for p in os.environ["RIG_UDP"].split()]
    for serve, port in ports:
        threading.Thread(target=serve, args=(port,), daemon=True).start()
    record(ready=ROLE)
    threading.Event().wait()


def dns():
    from dnslib import QTYPE, RCODE, RR, A
    from dnslib.server import BaseResolver, DNSServer

    zone = {name.rstrip(".").lower(): address for name, address in json.loads(os.environ["RIG_ZONE"]).items()}

    class Resolver(BaseResolver):
        def resolve(self, request, handler):
            reply = request.reply()
            name = str(request.q.qname).rstrip(".").lower()
            record(dns=name, type=QTYPE[request.q.qtype], peer=handler.client_address[0])
            if name in zone and request.q.qtype in (QTYPE.A, QTYPE.ANY):
                reply.add_answer(RR(request.q.qname, QTYPE.A, rdata=A(zone[name]), ttl=5))
            elif name not in zone:
                reply.header.rcode = RCODE.NXDOMAIN
            return reply

    class Quiet:
        def __getattr__(self, name):
            return lambda *args: None

    for tcp in (False, True):
        DNSServer(Resolver(), port=53, address="0.0.0.0", tcp=tcp, logger=Quiet()).start_thread()
    record(ready=ROLE)
    threading.Event().wait()


ROLE = os.environ["RIG_ROLE"]
{"api": api, "attacker": attacker, "dns": dns}[ROLE]()
