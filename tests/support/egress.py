"""The egress tests' rig: their own hosts, as containers on a network of the engine under test.

- ``index.test``: pypiserver with the test's wheels (the ``pypi`` preset is pointed at it);
- ``api.test``: an HTTPS API with a certificate of the test's own CA;
- ``attacker.test``: records every TCP connection and UDP datagram it gets (its log must stay empty);
- ``dns``: the proxy's only resolver (``egress_dns``), which records every query.

No test sends a packet anywhere else: names resolve through the rig's DNS only, and the proxy
reaches the rig's network only (``egress_network``). The rig's servers are tests/egress_rig/servers.py,
sent as each container's program; its image is tests/egress_rig/Dockerfile (``.ci/egress-setup.sh``).
"""

from __future__ import annotations

import contextlib
import datetime
import io
import ipaddress
import json
import secrets
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RIG_IMAGE = "sandbox-kernel-egress-rig:latest"
SERVERS = Path(__file__).parent.parent / "egress_rig" / "servers.py"
INDEX_PORT = 8080
ATTACKER_TCP = (80, 443, 53, 8080, 3128, 8443)
ATTACKER_UDP = (53, 443, 123)
SETUP = "run `bash .ci/egress-setup.sh` as root"


def make_wheel(name: str, version: str, modules: dict[str, str], requires: tuple[str, ...] = ()) -> tuple[str, bytes]:
    """A pure-Python wheel (PEP 427) made here, so the test index needs nothing from outside:
    ``(filename, bytes)``."""
    import base64
    import hashlib
    import zipfile

    dist = f"{name.replace('-', '_')}-{version}"
    files = {path: text.encode() for path, text in modules.items()}
    files[f"{dist}.dist-info/METADATA"] = ("Metadata-Version: 2.1\n" f"Name: {name}\nVersion: {version}\n"
                                           + "".join(f"Requires-Dist: {r}\n" for r in requires)).encode()
    files[f"{dist}.dist-info/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: sandbox-kernel-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = [f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}"
              for path, data in files.items()]
    files[f"{dist}.dist-info/RECORD"] = ("\n".join(record + [f"{dist}.dist-info/RECORD,,"]) + "\n").encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    return f"{dist}-py3-none-any.whl", buffer.getvalue()


@dataclass
class TestCA:
    """A CA made for one test session, and a server certificate for ``api.test`` signed by it."""

    ca_pem: str
    cert_pem: str
    key_pem: str


def make_ca(host: str = "api.test") -> TestCA:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def cert(subject: str, key: Any, issuer: str, signer: Any, ca: bool) -> Any:
        builder = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
                   .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if not ca:
            builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(subject)]), critical=False)
        return builder.sign(signer, hashes.SHA256())

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = cert("sandbox-kernel egress test CA", ca_key, "sandbox-kernel egress test CA", ca_key, True)
    server = cert(host, key, "sandbox-kernel egress test CA", ca_key, False)
    pem = serialization.Encoding.PEM
    return TestCA(ca.public_bytes(pem).decode(), server.public_bytes(pem).decode(),
                  key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode())


@dataclass
class Rig:
    """The rig's network and containers on one engine; addresses by role."""

    client: Any
    network: str
    ca: TestCA
    addresses: dict[str, str] = field(default_factory=dict)
    containers: dict[str, Any] = field(default_factory=dict)
    marks: dict[str, int] = field(default_factory=dict)

    @property
    def zone(self) -> dict[str, str]:
        return {"index.test": self.addresses["index"], "api.test": self.addresses["api"],
                "attacker.test": self.addresses["attacker"], "www.attacker.test": self.addresses["attacker"],
                "rebind.test": self.addresses["attacker"], "gateway.test": self.gateway,
                "mirror.test": self.addresses["index"], "plain.test": self.addresses["api"]}

    @property
    def gateway(self) -> str:
        config = self.client.api.inspect_network(self.network)["IPAM"]["Config"][0]
        return config.get("Gateway") or str(next(ipaddress.ip_network(config["Subnet"]).hosts()))

    @property
    def index_url(self) -> str:
        return f"http://index.test:{INDEX_PORT}/simple/"

    def options(self, *hosts: str) -> dict[str, Any]:
        """The docker backend's options for a sandbox on this rig: the proxy on the rig's network,
        resolving with the rig's DNS, the index and API allowed by name and by their (private)
        addresses, the pypi preset pointed at the index, the test CA trusted by the proxy."""
        return {"allow_hosts": ["pypi", self.addresses["index"] + f":{INDEX_PORT}", "api.test", self.addresses["api"],
                                *hosts],
                "pypi_index": self.index_url, "egress_network": self.network, "egress_dns": [self.addresses["dns"]]}

    def log(self, role: str) -> list[dict[str, Any]]:
        """What the ``role`` server recorded (its JSON lines) since :meth:`mark`, the ``ready`` line left out."""
        text = self.containers[role].logs(stdout=True, stderr=False).decode("utf-8", "replace")
        lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
        return [line for line in lines if "ready" not in line][self.marks.get(role, 0):]

    def mark(self) -> None:
        """Later :meth:`log` calls show only what the servers record from now on (one test's)."""
        self.marks = {}
        self.marks = {role: len(self.log(role)) for role in self.containers}

    def dns_queries(self) -> list[str]:
        return [entry["dns"] for entry in self.log("dns")]


def _put(container: Any, directory: str, files: dict[str, bytes]) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    container.put_archive(directory, buffer.getvalue())


def _run(rig: Rig, role: str, env: dict[str, str], command: list[str] | None = None,
         files: dict[str, bytes] | None = None) -> None:
    source = SERVERS.read_text()
    container = rig.client.containers.create(
        RIG_IMAGE, command or ["python", "-c", source], name=f"{rig.network}-{role}", network=rig.network,
        environment={"RIG_ROLE": role, **env}, labels={"org.sandbox-kernel.egress-rig": rig.network},
        working_dir="/srv", detach=True)
    rig.containers[role] = container
    if files:
        _put(container, "/srv", files)
    container.start()
    container.reload()
    rig.addresses[role] = container.attrs["NetworkSettings"]["Networks"][rig.network]["IPAddress"]


def _ready(rig: Rig, role: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        logs = rig.containers[role].logs().decode("utf-8", "replace")
        if '"ready"' in logs or (role == "index" and "Listening on" in logs):
            return
        rig.containers[role].reload()
        if rig.containers[role].status == "exited":
            break
        time.sleep(0.1)
    raise RuntimeError(f"the rig's {role} did not start: {rig.containers[role].logs()[-500:]!r}")


@contextlib.contextmanager
def rig(client: Any, wheels: dict[str, bytes]) -> Iterator[Rig]:
    """A rig on ``client``'s engine serving ``wheels`` (``{filename: bytes}``) from its index;
    removed at the end."""
    name = f"egress-rig-{secrets.token_hex(3)}"
    # internal: the engine gives the rig no route out, so even a proxy that let a request through
    # could only reach the rig's own containers. Not on Podman: on its internal networks the proxy
    # did not reach the rig's index (measured with Debian's podman), so there it is a plain bridge.
    podman = any("podman" in c.get("Name", "").lower() for c in client.version().get("Components") or [])
    client.networks.create(name, driver="bridge", internal=not podman, labels={"org.sandbox-kernel.egress-rig": name})
    made = Rig(client, name, make_ca())
    try:
        _run(made, "index", {}, ["pypi-server", "run", "-p", str(INDEX_PORT), "--disable-fallback", "-a", ".",
                                 "-P", ".", "/srv"], wheels)
        _run(made, "api", {"RIG_CERT": made.ca.cert_pem, "RIG_KEY": made.ca.key_pem})
        _run(made, "attacker", {"RIG_TCP": " ".join(map(str, ATTACKER_TCP)), "RIG_UDP": " ".join(map(str, ATTACKER_UDP))})
        _run(made, "dns", {"RIG_ZONE": json.dumps({**made.zone})})
        for role in made.containers:
            _ready(made, role)
        yield made
    finally:
        for container in made.containers.values():
            with contextlib.suppress(Exception):
                container.remove(force=True)
        with contextlib.suppress(Exception):
            client.networks.get(name).remove()
