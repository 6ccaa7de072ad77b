"""A sandbox ends with its kernel, however the kernel is ended the ordinary way: a Jupyter server
stopped with SIGTERM (it sends each kernel a ``shutdown_request``, then SIGTERM to one still
busy 2.5 s later, then SIGKILL), or SIGTERM straight to the kernel (``systemctl stop``, ``kill``).

Before, the wrapper died at the SIGTERM in the middle of removing its sandbox: a real server
stopped with 9 sandbox-docker kernels left every sandbox's ``-work`` volume and ``/tmp/skd-*``
directory and one exited container, and sandbox-local scratch directories stayed. Here the
leftovers are looked for the moment the server and the kernels' finishers have ended (other
tests' sandbox starts remove a gone kernel's leftovers too, later).
"""

from __future__ import annotations

import os
import signal
import tempfile
import time
from pathlib import Path

import pytest

from sandbox_kernel.backends.docker import engine
from sandbox_kernel.backends.docker.engine import OWNER_LABEL
from tests.browser import JupyterLab
from tests.kernels import kernel, run
from tests.targets import skip_or_fail

pytestmark = [pytest.mark.docker, pytest.mark.timeout(300)]
FINISHER = "sandbox_kernel.frontdoors.kernel.finisher"


def processes() -> dict[int, tuple[int, str]]:
    """Every process of this machine: ``{pid: (parent pid, command line)}``."""
    found = {}
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError):
            continue
        if entry.name.isdigit():
            found[int(entry.name)] = (int(stat.rsplit(")", 1)[1].split()[1]), cmdline)
    return found


def finishers(pids: list[int]) -> list[int]:
    """The running finishers of the kernels ``pids``."""
    return [pid for pid, (_, cmdline) in processes().items()
            if FINISHER in cmdline and any(f"--kernel-pid={kernel} " in cmdline + " " for kernel in pids)]


def leftovers(docker, pids: list[int]) -> list[str]:
    """The containers, volumes and host directories of the kernels ``pids`` that still exist."""
    def ours(labels: dict[str, str] | None) -> bool:
        parts = (labels or {}).get(OWNER_LABEL, "").split("/")
        return len(parts) == 3 and parts[1].isdigit() and int(parts[1]) in pids

    found = [f"container {c['Names'][0]} ({c['State']})" for c in docker.api.containers(
        all=True, filters={"label": OWNER_LABEL}) if ours(c.get("Labels"))]
    found += [f"volume {v['Name']}" for v in docker.api.volumes(filters={"label": OWNER_LABEL}).get("Volumes") or []
              if ours(v.get("Labels"))]
    for pid in pids:
        for pattern in (f"{engine.hostdir_root()}/{engine.HOSTDIR_PREFIX}{pid}-*", f"{tempfile.gettempdir()}/sandbox-local-{pid}-*",
                        f"{tempfile.gettempdir()}/sandbox-local-conn-{pid}-*"):
            found += [f"directory {path}" for path in Path("/").glob(pattern.lstrip("/"))]
    return found


def settled(docker, pids: list[int], timeout: float = 60) -> list[str]:
    """Once the kernels ``pids`` and their finishers have ended (within ``timeout`` seconds),
    what they left."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and (finishers(pids) or any(Path(f"/proc/{pid}").exists()
                                                                  and _running(pid) for pid in pids)):
        time.sleep(0.05)
    return leftovers(docker, pids)


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def specs() -> tuple[dict, dict[str, str]]:
    """The kernelspecs ``sandbox-docker`` (the docker tests' set-up) and ``sandbox-local``, and the
    environment a server needs for them."""
    from sandbox_kernel.frontdoors.kernel.kernelspec import kernel_json
    from tests.support.backends import prepared

    setup = prepared("docker")
    options = [*setup.kernel_options, *(f"--DockerBackend.{k}={v}" for k, v in setup.traits.items())]
    return {"sandbox-docker": kernel_json("docker", options), "sandbox-local": kernel_json("local", [])}, setup.kernel_env


def test_a_server_stopped_with_sigterm_leaves_no_sandbox(docker_client):
    """Two sandbox-docker kernels and a sandbox-local one, each having run a cell; the server gets
    SIGTERM. Its kernels get 1 s (``shutdown_wait_time``; jupyter_client's default is 5 s): each
    is SIGTERMed at 0.5 s and SIGKILLed at 1 s, in the middle of its removal, which its finisher
    completes. (With the default, each removes its sandbox itself after the SIGTERM: measured
    with 9 docker and 2 local kernels; the test below shows that part.)"""
    try:
        import jupyterlab  # noqa: F401
    except ImportError:
        skip_or_fail("jupyterlab is not installed (pip install 'sandbox-kernel[test]')")
    kernelspecs, env = specs()
    lab = JupyterLab(kernelspecs, env, options=("--KernelManager.shutdown_wait_time=1",))
    try:
        lab.start_server()
        started = [lab.post("kernels", {"name": name})["id"] for name in ("sandbox-docker", "sandbox-docker",
                                                                            "sandbox-local")]
        for ident in started:
            assert lab.run(ident, "import os; print(os.getcwd())") == "ok"
        wrappers = [pid for pid, (parent, cmdline) in processes().items()
                    if parent == lab.process.pid and "sandbox_kernel" in cmdline]
        assert len(wrappers) == 3, processes()
        assert len(leftovers(docker_client, wrappers)) >= 8  # what is looked for exists while they run: 2 containers, 2 volumes, 2 host directories, 2 local directories
        lab.process.send_signal(signal.SIGTERM)
        assert lab.process.wait(60) == 0
        assert settled(docker_client, wrappers) == []
        assert finishers(wrappers) == []
    finally:
        lab.stop()


@pytest.mark.parametrize("backend", ["docker", "local"])
def test_a_kernel_given_sigterm_removes_its_sandbox_then_ends(docker_client, backend):
    """SIGTERM straight to a sandbox kernel (no shutdown_request first, as ``systemctl stop`` or
    ``kill`` sends it): it removes its sandbox and exits with status 0; its finisher was told so."""
    with kernel(backend) as (km, kc):
        assert run(kc, "1")[0]["status"] == "ok"
        process = km.provisioner.process
        assert leftovers(docker_client, [process.pid])
        os.kill(process.pid, signal.SIGTERM)
        assert process.wait(30) == 0
        assert settled(docker_client, [process.pid]) == []
