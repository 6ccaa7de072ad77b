"""A real Jupyter Enterprise Gateway (3.3, in its own venv: it pins jupyter_client<7 and
jupyter_server<2) on 127.0.0.1 that launches each kernel as a Docker container through its
``DockerProcessProxy`` on the real engine: the same remote-kernel path as its Kubernetes one
(tests/gateway_eg/start_container.py starts the container; kernel_launcher.py in it sends the
kernel's connection info back, encrypted, to the gateway's response address; the gateway then
speaks ZMQ to the container).

Networking: EG's DockerProcessProxy reads the kernel's address from the container's entry in
``EG_DOCKER_NETWORK``, which host networking does not have, so the session creates its own
internal bridge network (no route out) and binds EG's response socket to that bridge's gateway
address on the host (``EG_RESPONSE_IP``). ``.ci/gateway-setup.sh`` makes the venv and wheels.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

from .gateway import die_with_parent, free_port, stop_process, wait_http

ROOT = Path(__file__).resolve().parents[2]
EG_VENV = Path(os.environ.get("SANDBOX_EG_VENV", ROOT / "build" / "eg-venv"))
WHEELS = Path(os.environ.get("SANDBOX_EG_WHEELS", ROOT / "build" / "eg-wheels"))
RECIPE = ROOT / "tests" / "gateway_eg"
IMAGE = "sandbox-kernel-eg:test"
BASE = "sandbox-kernel:latest"
KERNEL_NAME = "sandbox_docker"
LABEL = "org.sandbox-kernel.eg-test"


def unavailable() -> str | None:
    from .docker import unavailable as docker_unavailable

    if (reason := docker_unavailable()) is not None:
        return reason
    if not (EG_VENV / "bin" / "jupyter-enterprisegateway").exists() or not list(WHEELS.glob("pycryptodomex-*.whl")):
        return f"Enterprise Gateway's venv ({EG_VENV}) or wheels ({WHEELS}) are missing; run `bash .ci/gateway-setup.sh`"
    return None


def _recipe_id() -> str:
    import hashlib

    digest = hashlib.sha256()
    for path in sorted(RECIPE.iterdir()):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def ensure_image(client) -> None:
    """Build ``IMAGE`` from ``BASE`` unless an image of the same recipe exists (~10 s)."""
    import docker

    with contextlib.suppress(docker.errors.ImageNotFound):
        if client.images.get(IMAGE).labels.get(LABEL) == _recipe_id():
            return
    with tempfile.TemporaryDirectory() as tmp:
        context = Path(tmp) / "context.tar"
        with tarfile.open(context, "w") as tar:
            for path in RECIPE.iterdir():
                tar.add(path, arcname=path.name)
            for wheel in WHEELS.glob("pycryptodomex-*.whl"):
                tar.add(wheel, arcname=f"wheels/{wheel.name}")
        with open(context, "rb") as stream:
            lines = list(client.api.build(fileobj=stream, custom_context=True, tag=IMAGE, rm=True, forcerm=True,
                                          buildargs={"BASE": BASE}, labels={LABEL: _recipe_id()}, decode=True))
    if errors := [line["error"] for line in lines if "error" in line]:
        raise RuntimeError(f"building {IMAGE} failed: {errors[-1]}")


def _kernelspec(share: Path) -> None:
    spec = share / "kernels" / KERNEL_NAME
    (spec / "scripts").mkdir(parents=True)
    shutil.copy(RECIPE / "start_container.py", spec / "scripts" / "start_container.py")
    (spec / "kernel.json").write_text(json.dumps({
        "language": "python", "display_name": "Python in a Docker container (sandbox-kernel tests)",
        "metadata": {"process_proxy": {
            "class_name": "enterprise_gateway.services.processproxies.docker_swarm.DockerProcessProxy",
            "config": {"image_name": IMAGE}}},
        # start_container.py drops PATH (the image's own applies) and names the container KERNEL_USERNAME-id.
        "env": {"PATH": "/usr/bin:/bin", "KERNEL_UID": "1000", "KERNEL_GID": "1000", "KERNEL_USERNAME": "sandbox"},
        "argv": [str(EG_VENV / "bin" / "python"), str(spec / "scripts" / "start_container.py"),
                 "--RemoteProcessProxy.kernel-id", "{kernel_id}", "--RemoteProcessProxy.port-range", "{port_range}",
                 "--RemoteProcessProxy.response-address", "{response_address}",
                 "--RemoteProcessProxy.public-key", "{public_key}"]}, indent=1))


class EnterpriseGateway:
    """EG on a free port of 127.0.0.1 with a token, its kernels on a network of its own."""

    def __init__(self, client) -> None:
        self.client = client
        self.token = secrets.token_hex(16)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.workdir = Path(tempfile.mkdtemp(prefix="sandbox-eg-test-"))
        self.network = client.networks.create(f"sandbox-eg-test-{secrets.token_hex(4)}", driver="bridge",
                                              internal=True, labels={LABEL: "network"})
        self.network.reload()
        self.gateway_ip = self.network.attrs["IPAM"]["Config"][0]["Gateway"]
        self.process: subprocess.Popen | None = None

    def start(self) -> EnterpriseGateway:
        _kernelspec(self.workdir / "share")
        # A minimal environment: start_container.py copies its own environment into each container.
        env = {"PATH": f"{EG_VENV / 'bin'}:/usr/bin:/bin", "LANG": "C.UTF-8",
               "JUPYTER_PATH": str(self.workdir / "share"), "JUPYTER_RUNTIME_DIR": "/tmp/jupyter-eg-runtime",
               "EG_DOCKER_NETWORK": self.network.name, "EG_RESPONSE_IP": self.gateway_ip,
               "EG_RESPONSE_PORT": str(free_port(self.gateway_ip)), "EG_RESPONSE_PORT_RETRIES": "0",
               "EG_KERNEL_LAUNCH_TIMEOUT": "90", "EG_POLL_INTERVAL": "0.2"}
        log = open(self.workdir / "gateway.log", "ab")
        self.process = subprocess.Popen(
            [str(EG_VENV / "bin" / "jupyter-enterprisegateway"), "--ip=127.0.0.1", f"--port={self.port}",
             "--port_retries=0", f"--EnterpriseGatewayApp.auth_token={self.token}",
             f"--EnterpriseGatewayApp.default_kernel_name={KERNEL_NAME}",
             # Its restarter looks for dead kernels every time_to_dead seconds (3 by default), each
             # look a call to the engine; 1 s keeps a dead kernel's report quick under CI load.
             "--KernelRestarter.time_to_dead=1"],
            cwd=self.workdir, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent)
        log.close()
        wait_http(f"{self.url}/api", 60, self.process)
        return self

    def containers(self) -> list:
        """The kernel containers EG started on this gateway's network."""
        return self.client.containers.list(all=True, filters={"network": self.network.name})

    def log(self) -> str:
        return (self.workdir / "gateway.log").read_text(errors="replace")

    def close(self) -> None:
        stop_process(self.process, 30)
        for container in self.containers():
            with contextlib.suppress(Exception):
                container.remove(force=True)
        with contextlib.suppress(Exception):
            self.network.remove()
        shutil.rmtree(self.workdir, ignore_errors=True)


@contextlib.contextmanager
def running() -> Iterator[EnterpriseGateway]:
    import docker

    client = docker.from_env()
    ensure_image(client)
    server = EnterpriseGateway(client)
    try:
        yield server.start()
    finally:
        server.close()
        client.close()
