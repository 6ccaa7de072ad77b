"""The docker backend's boundary with docker-py (``backends/docker/boundary.py``): what a user is
told when the engine named by DOCKER_HOST cannot be reached, through docker-py's real failures
(a real ImportError, a real refused connection; no engine is needed)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

pytestmark = pytest.mark.unit

GC = "import runpy, sys; sys.argv = ['sandbox-kernel', 'gc']; runpy.run_module('sandbox_kernel', run_name='__main__')"
HIDE_PARAMIKO = "import sys; sys.modules['paramiko'] = None; "  # `import paramiko` -> ImportError


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def gc(code: str, docker_host: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "DOCKER_HOST": docker_host})


def test_an_ssh_engine_without_paramiko_names_paramiko_not_the_engine():
    host = f"ssh://root@127.0.0.1:{closed_port()}"
    done = gc(HIDE_PARAMIKO + GC, host)
    assert done.returncode != 0
    assert (f"The Docker engine at {host} is reached over ssh, which docker-py does with the Python package "
            "'paramiko'; it is not installed. Fix: pip install 'sandbox-kernel[docker]' (it brings paramiko)") in done.stderr
    assert "not answering" not in done.stderr and "dockerd" not in done.stderr


def test_an_ssh_engine_that_does_not_answer_is_not_blamed_on_paramiko():
    host = f"ssh://root@127.0.0.1:{closed_port()}"
    done = gc(GC, host)
    assert done.returncode != 0
    assert f"The Docker engine is not answering at {host}." in done.stderr and "paramiko" not in done.stderr


LOAD_THEN_SSH = """
import os, sys
from sandbox_kernel.backends.docker import boundary, engine
docker = boundary.load_docker()
print("paramiko after a unix engine:", "paramiko" in sys.modules)
try:
    docker.DockerClient(base_url=sys.argv[1], timeout=5)  # as a test rig makes one, past load_docker
except Exception as exc:
    print("direct:", type(exc).__name__, exc)
print("paramiko after an ssh client:", "paramiko" in sys.modules)
os.environ["DOCKER_HOST"] = sys.argv[1]
try:
    engine.connect()
except Exception as exc:
    print("connect:", exc)
"""


def test_docker_py_is_loaded_without_paramiko_and_an_ssh_client_made_later_gets_its_transport():
    """paramiko (0.08-0.10 s of a docker sandbox's start) is held back as docker-py is loaded;
    a client of an ssh:// engine made later in the same process, by the backend or directly with
    docker-py, goes over the ssh transport: it is told the engine does not answer (the port is
    closed), not to install paramiko."""
    host = f"ssh://root@127.0.0.1:{closed_port()}"
    done = subprocess.run([sys.executable, "-c", LOAD_THEN_SSH, host], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "DOCKER_HOST": "unix:///nonexistent/docker.sock"})
    assert "paramiko after a unix engine: False" in done.stdout, done.stdout + done.stderr
    assert "paramiko after an ssh client: True" in done.stdout, done.stdout + done.stderr
    assert f"connect: The Docker engine is not answering at {host}." in done.stdout, done.stdout
    assert "Install paramiko" not in done.stdout, done.stdout


def test_a_users_own_engine_that_does_not_answer_names_who_starts_it_not_sudo():
    """A hub user's engine is rootless Podman at /run/user/UID/podman/podman.sock: they have no
    sudo, and the machine's engine is not theirs to use (docs/how-to/jupyterhub.md, section 4)."""
    import pwd

    host = f"unix:///run/user/{os.getuid()}/podman/podman.sock"  # looked up only if absent: nothing is created
    if os.path.exists(host.removeprefix("unix://")):
        pytest.skip(f"{host} exists here")
    done = gc(GC, host)
    name = pwd.getpwuid(os.getuid()).pw_name
    assert done.returncode != 0
    assert (f"Your own engine (rootless Podman, at {host}) is not answering. Fix: this engine is not the machine's "
            "Docker engine: on a shared machine (JupyterHub) the administrator starts it (`sandbox-kernel "
            f"user-engine start {name}`, docs/how-to/jupyterhub.md)") in done.stderr, done.stderr
    assert "sudo" not in done.stderr and "systemctl" not in done.stderr


def test_the_image_builder_reaches_the_engine_as_the_backend_does():
    host = f"tcp://127.0.0.1:{closed_port()}"
    done = subprocess.run([sys.executable, "-m", "sandbox_kernel.backends.docker.images", "check", "any:image"],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "DOCKER_HOST": host})
    assert done.returncode == 1
    assert f"error: The Docker engine is not answering at {host}. Fix: start the Docker engine" in done.stderr


def test_the_engines_own_ca_wins_over_requests_ca_bundle_and_proxies_still_come_from_the_environment(
        monkeypatch, tmp_path):
    """requests lets REQUESTS_CA_BUNDLE replace a session's own ``verify`` (psf/requests#3829);
    engine.connect's client keeps docker-py's CA, and changes nothing else (docker-py 7's
    DockerClient, whose constructor it repeats, still holds only ``api``)."""
    import docker

    from sandbox_kernel.backends.docker import engine

    ca = tmp_path / "ca.pem"
    ca.write_text("the engine's CA")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    tls = docker.tls.TLSConfig(ca_cert=str(ca), verify=True)
    ours = engine._client_class()(base_url="tcp://127.0.0.1:9", version="1.41", tls=tls)
    settings = ours.api.merge_environment_settings("https://127.0.0.1:9/v1.41/_ping", {}, None, None, None)
    assert settings["verify"] == str(ca)
    assert settings["proxies"]["https"] == "http://proxy.invalid:3128"
    plain = docker.DockerClient(base_url="tcp://127.0.0.1:9", version="1.41", tls=tls)
    assert plain.api.merge_environment_settings("https://127.0.0.1:9/", {}, None, None, None)["verify"] == \
        "/etc/ssl/certs/ca-certificates.crt"  # requests' behaviour, which the fix is for
    assert set(vars(ours)) == set(vars(plain)) == {"api"}


def test_without_proc_a_live_owner_is_not_judged_gone(monkeypatch, tmp_path):
    """On macOS (no /proc) a live kernel's sandbox must survive another sandbox's leftover sweep."""
    from sandbox_kernel.backends.docker import engine
    from sandbox_kernel.runtime import owners

    monkeypatch.setattr(owners, "PROC", tmp_path)  # a machine without /proc
    me = engine.owner()
    assert me.endswith(f"/{os.getpid()}/alive")
    assert not engine.owner_is_gone(me)
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    assert engine.owner_is_gone(f"{socket.gethostname()}/{done.stdout.strip()}/alive")
