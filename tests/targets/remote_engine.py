"""A Docker engine that does not share this host's filesystem, for the tests: Debian's docker.io
(20.10) and an sshd in a container of the image ``.ci/remote-engine-setup.sh`` builds from
``tests/remote_engine/``, on the local engine. Its API is published on 127.0.0.1 only, over TCP
with TLS (``DOCKER_TLS_VERIFY=1``, a CA, server and client certificates made with ``openssl`` at
start) and as ``ssh://root@127.0.0.1:PORT`` (keys made with ``ssh-keygen`` at start; docker-py
reaches it with paramiko, which reads ``$HOME/.ssh``). A bind mount on it names a path in the
rig's own filesystem, never one of this host: what Docker Desktop, Colima or a remote engine do.

What makes the nested engine work here (measured 2026-11-24, ENVIRONMENT.md): every capability
the local engine can give (``--privileged`` fails: its dockerd lacks CAP_SYS_RESOURCE), seccomp,
AppArmor and the masked /proc paths off, every device allowed, and /sys plus each cgroup v1
hierarchy remounted read-write inside (``entrypoint.sh``). The inner ``/var/lib/docker`` cannot
be on the container's overlay: it is a volume (ext4 here; overlay2 works on it), kept between
sessions so that the sandbox image is loaded only when it changed (~15 s for 550 MB; ~1 s to an
answering engine when it is there). One session at a time holds the volume (a ``flock``); a
concurrent session gets a tmpfs and loads the image itself.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox_kernel.backends.docker import engine

from . import Prepared, Target, env_vars

IMAGE = os.environ.get("SANDBOX_REMOTE_ENGINE_IMAGE", "sandbox-kernel-remote-engine:latest")
SANDBOX_IMAGE = "sandbox-kernel:latest"
VOLUME = "sandbox-kernel-remote-engine-data"
LOCK = Path("/var/tmp/sandbox-kernel-remote-engine.lock")
LABEL = "org.sandbox-kernel.remote-engine-test"
"""Label of the rig container and volume; the container's value is its owner (``engine.owner()``)."""
READY_TIMEOUT = 60.0
NO_CA_BUNDLE = {"REQUESTS_CA_BUNDLE": "", "CURL_CA_BUNDLE": ""}
"""requests lets these variables (set on these machines for their TLS interception) replace the CA
that docker-py gives its session (``DOCKER_CERT_PATH/ca.pem``; psf/requests#3829): with them, a
plain docker-py client cannot reach a TLS engine with its own CA ("certificate verify failed").
Empty, requests ignores them. The tests' own clients (:meth:`Rig.client`) empty them; the backend
needs nothing (``engine.connect`` keeps the engine's CA), so :attr:`Rig.tcp_env` leaves them set."""

# Linux capabilities by bit (linux/capability.h): the rig gets "ALL" minus those this host's
# bounding set lacks (asked for, they stop the container from starting). Not the list of those
# it has: engine 20.10 refuses the names it does not know (PERFMON, BPF, CHECKPOINT_RESTORE).
CAPABILITIES = (
    "CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID SETPCAP LINUX_IMMUTABLE "
    "NET_BIND_SERVICE NET_BROADCAST NET_ADMIN NET_RAW IPC_LOCK IPC_OWNER SYS_MODULE SYS_RAWIO SYS_CHROOT "
    "SYS_PTRACE SYS_PACCT SYS_ADMIN SYS_BOOT SYS_NICE SYS_RESOURCE SYS_TIME SYS_TTY_CONFIG MKNOD LEASE "
    "AUDIT_WRITE AUDIT_CONTROL SETFCAP MAC_OVERRIDE MAC_ADMIN SYSLOG WAKE_ALARM BLOCK_SUSPEND AUDIT_READ "
    "PERFMON BPF CHECKPOINT_RESTORE").split()


@functools.cache
def unavailable(ssh: bool = False) -> str | None:
    """Why the rig cannot run here, or None. Asked once a session: the tests ask again while
    DOCKER_HOST names the rig's engine, and the answer is about the local one."""
    from .docker import missing_image
    from .docker import unavailable as docker_unavailable

    if (reason := docker_unavailable()) is not None:
        return reason
    for tool in ("openssl", "ssh-keygen"):
        if shutil.which(tool) is None:
            return f"{tool} is missing; run `bash .ci/remote-engine-setup.sh` as root"
    if ssh:
        try:
            import paramiko  # noqa: F401 - docker-py's ssh:// transport
        except ImportError:
            return "paramiko is not installed (pip install 'sandbox-kernel[docker]')"
    import docker

    return missing_image(docker.from_env(timeout=10), IMAGE, "remote-engine-setup.sh")


def _run(*argv: str | Path) -> None:
    subprocess.run([str(a) for a in argv], check=True, capture_output=True)


def make_credentials(root: Path) -> None:
    """Write the rig's TLS and SSH material under ``root``: ``tls/`` (the CA, and the server's
    certificate for IP 127.0.0.1, mounted into the rig), ``client/`` (``ca.pem``, ``cert.pem``,
    ``key.pem``: a ``DOCKER_CERT_PATH``), ``ssh/`` (the host key and ``authorized_keys``, mounted
    into the rig) and ``home/.ssh`` (the client key, ``config``; ``known_hosts`` once the port is known)."""
    tls, client, ssh, dot_ssh = (root / "tls", root / "client", root / "ssh", root / "home" / ".ssh")
    for folder in (tls, client, ssh, dot_ssh):
        folder.mkdir(parents=True, mode=0o700)
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _run("openssl", "req", "-x509", *ec, "-days", "2", "-subj", "/CN=sandbox-kernel test rig CA",
         "-keyout", tls / "ca-key.pem", "-out", tls / "ca.pem")
    for name, subject, usage, key, cert in (
            ("server", "/CN=127.0.0.1", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
             tls / "server-key.pem", tls / "server-cert.pem"),
            ("client", "/CN=sandbox-kernel tests", "extendedKeyUsage=clientAuth\n", client / "key.pem",
             client / "cert.pem")):
        (root / f"{name}.ext").write_text(usage)
        _run("openssl", "req", *ec, "-subj", subject, "-keyout", key, "-out", root / f"{name}.csr")
        _run("openssl", "x509", "-req", "-in", root / f"{name}.csr", "-CA", tls / "ca.pem", "-CAkey",
             tls / "ca-key.pem", "-CAcreateserial", "-days", "2", "-extfile", root / f"{name}.ext", "-out", cert)
    shutil.copy(tls / "ca.pem", client / "ca.pem")
    (tls / "ca-key.pem").unlink()
    _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "rig host", "-f", ssh / "host_key")
    _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "sandbox-kernel tests", "-f", dot_ssh / "id_ed25519")
    shutil.copy(dot_ssh / "id_ed25519.pub", ssh / "authorized_keys")
    for path in list(tls.iterdir()) + list(ssh.iterdir()):
        path.chmod(0o644)  # read by root in the rig, whatever the bind mount's owner


def _missing_capabilities() -> list[str]:
    """The capabilities this host's bounding set lacks (the local engine cannot give them)."""
    status = Path("/proc/self/status").read_text()
    bounding = int(next(line.split()[1] for line in status.splitlines() if line.startswith("CapBnd:")), 16)
    return [name for bit, name in enumerate(CAPABILITIES) if not bounding >> bit & 1]


@dataclass
class Rig:
    """A running rig: its container on the local engine and the ways to reach its engine."""

    container: Any
    root: Path
    tcp_port: int
    ssh_port: int
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds the start took: ``engine`` (container start to an answering engine), ``load``
    (the sandbox image into it, 0 when it was there)."""

    @property
    def tcp_env(self) -> dict[str, str]:
        """The environment that sends the backend (and the docker CLI) to the rig over TCP and TLS.
        REQUESTS_CA_BUNDLE stays as this machine sets it: the backend must cope (see NO_CA_BUNDLE)."""
        return {"DOCKER_HOST": f"tcp://127.0.0.1:{self.tcp_port}", "DOCKER_TLS_VERIFY": "1",
                "DOCKER_CERT_PATH": str(self.root / "client")}

    @property
    def ssh_env(self) -> dict[str, str]:
        """The environment that sends docker-py to the rig over ssh. paramiko reads the key, the
        ``known_hosts`` and the ``config`` in ``$HOME/.ssh``, so HOME is a folder of the rig's.
        (OpenSSH, which docker-py's ``use_ssh_client`` runs, ignores $HOME: it would need ``-F``.)"""
        return {"DOCKER_HOST": f"ssh://root@127.0.0.1:{self.ssh_port}", "HOME": str(self.root / "home")}

    def client(self, env: dict[str, str] | None = None, timeout: int = 60) -> Any:
        """A docker-py client of the rig's engine (over TCP by default, or with ``env``)."""
        import docker

        with env_vars({**(env or self.tcp_env), **NO_CA_BUNDLE}):  # paramiko reads HOME when the client is made
            client = docker.from_env(environment=env or self.tcp_env, timeout=timeout)
        client.api.trust_env = False  # see NO_CA_BUNDLE: requests reads it at every request
        return client


def _publish(container: Any, port: str) -> int:
    return int(container.attrs["NetworkSettings"]["Ports"][port][0]["HostPort"])


def _start_container(local: Any, root: Path, volume: str | None) -> Any:
    """Start the rig container: the inner /var/lib/docker on ``volume``, or a tmpfs when None."""
    from docker.types import Mount

    mounts = [Mount("/rig/tls", str(root / "tls"), type="bind", read_only=True),
              Mount("/rig/ssh", str(root / "ssh"), type="bind", read_only=True),
              Mount("/var/lib/docker", volume, type="volume") if volume else
              Mount("/var/lib/docker", None, type="tmpfs", tmpfs_size=8 * 1024**3)]
    host_config = local.api.create_host_config(
        init=True, cap_add=["ALL"], cap_drop=_missing_capabilities(),
        security_opt=["seccomp=unconfined", "apparmor=unconfined"], device_cgroup_rules=["a *:* rwm"],
        mounts=mounts, port_bindings={2376: ("127.0.0.1", None), 22: ("127.0.0.1", None)})
    # `docker run --security-opt systempaths=unconfined` is the CLI's name for these two: the
    # inner engine writes /proc/sys (ip_forward for its bridge), which is read-only otherwise.
    host_config.update(MaskedPaths=[], ReadonlyPaths=[])
    if not volume:  # a tmpfs mount is noexec,nodev,nosuid unless told; overlay2 needs all three
        host_config["Mounts"][-1]["TmpfsOptions"]["Options"] = [["exec"], ["dev"], ["suid"]]
    created = local.api.create_container(IMAGE, host_config=host_config, ports=[2376, 22],
                                         labels={LABEL: engine.owner()}, name=f"sandbox-kernel-rig-{os.getpid()}")
    container = local.containers.get(created["Id"])
    container.start()
    container.reload()
    return container


def _wait_until_ready(rig: Rig) -> Any:
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        rig.container.reload()
        if rig.container.status != "running":
            raise RuntimeError(f"the rig's engine exited: {rig.container.logs(tail=20).decode(errors='replace')}")
        try:
            with contextlib.closing(rig.client(timeout=5)) as probe:
                probe.ping()
            return rig.client(timeout=300)  # loading the sandbox image takes ~15 s
        except Exception as exc:  # not up yet: refused, reset, or TLS before dockerd listens
            if time.monotonic() > deadline:
                raise RuntimeError(f"the rig's engine did not answer in {READY_TIMEOUT:.0f} s ({exc}); its log: "
                                   f"{rig.container.logs(tail=20).decode(errors='replace')}") from exc
            time.sleep(0.2)


def ensure_image(local: Any, inner: Any, name: str = SANDBOX_IMAGE) -> bool:
    """Load image ``name`` from the local engine into the rig's (``docker save | docker load``,
    streamed) unless the rig has the same image id; returns True when it loaded."""
    import docker

    wanted = local.images.get(name).id
    with contextlib.suppress(docker.errors.ImageNotFound):
        if inner.images.get(name).id == wanted:
            return False
    for line in inner.api.load_image(local.api.get_image(name)):
        if "error" in line:
            raise RuntimeError(f"loading {name} into the rig failed: {line['error']}")
    inner.images.prune(filters={"dangling": True})
    return True


def _lock_volume() -> Any | None:
    """The open lock file when this session may use the shared volume, else None."""
    lock = open(LOCK, "a")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        return None
    return lock


def _remove_stale(local: Any) -> None:
    """Remove rig containers of test sessions that are gone (killed before they could)."""
    for container in local.containers.list(all=True, filters={"label": LABEL}):
        if engine.owner_is_gone(container.labels[LABEL]):
            with contextlib.suppress(Exception):
                container.remove(force=True, v=True)


@contextlib.contextmanager
def running() -> Iterator[Rig]:
    """A running rig with the sandbox image in its engine and no other containers there;
    afterwards its container and credentials are gone (the volume stays, for the next session)."""
    import docker

    local = docker.from_env(timeout=60)
    root = Path(tempfile.mkdtemp(prefix="sandbox-kernel-rig-"))
    lock = _lock_volume()
    container = None
    try:
        _remove_stale(local)
        if lock is not None:
            try:
                local.volumes.get(VOLUME)
            except docker.errors.NotFound:
                local.volumes.create(VOLUME, labels={LABEL: "inner /var/lib/docker"})
        make_credentials(root)
        started = time.monotonic()
        container = _start_container(local, root, VOLUME if lock is not None else None)
        rig = Rig(container, root, _publish(container, "2376/tcp"), _publish(container, "22/tcp"))
        host_key = (root / "ssh" / "host_key.pub").read_text().split()[:2]
        (root / "home" / ".ssh" / "known_hosts").write_text(f"[127.0.0.1]:{rig.ssh_port} {' '.join(host_key)}\n")
        (root / "home" / ".ssh" / "config").write_text(
            f"Host 127.0.0.1\n  User root\n  Port {rig.ssh_port}\n  IdentityFile {root / 'home' / '.ssh' / 'id_ed25519'}\n"
            f"  UserKnownHostsFile {root / 'home' / '.ssh' / 'known_hosts'}\n  StrictHostKeyChecking yes\n")
        inner = _wait_until_ready(rig)
        rig.timings["engine"] = time.monotonic() - started
        for leftover in inner.containers.list(all=True):  # of an earlier session on the volume
            leftover.remove(force=True, v=True)
        inner.volumes.prune()
        started = time.monotonic()
        rig.timings["load"] = time.monotonic() - started if ensure_image(local, inner) else 0.0
        inner.close()
        yield rig
    finally:
        if container is not None:
            with contextlib.suppress(Exception):
                container.remove(force=True, v=True)
        if lock is not None:
            lock.close()
        shutil.rmtree(root, ignore_errors=True)
        local.close()


@contextlib.contextmanager
def prepare() -> Iterator[Prepared]:
    """The session's rig; the remote targets (:mod:`.docker_tcp`, :mod:`.docker_ssh`) share it
    through ``prepared("remote_engine")``, so it starts once and stops at the session's end."""
    with running() as rig:
        yield Prepared(kernel_env=rig.tcp_env, rig=rig)


def session_rig() -> Rig:
    """The running rig of this test session (the ``remote_engine`` fixture; skips, or fails in
    CI, when it cannot run)."""
    from tests.support.backends import prepared

    return prepared("remote_engine").rig


TARGET = Target("remote_engine", backend="docker", unavailable=unavailable, prepare=prepare)
