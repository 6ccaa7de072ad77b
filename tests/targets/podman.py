"""The docker backend against Podman's Docker-compatible API: Debian's ``podman`` (``.ci/podman-setup.sh``
installs it and loads the sandbox image), whose ``podman system service`` the test session starts
on a socket of its own and stops at the end. Joins the contract suite only (``CONTRACT_NAMES``).

The service reads a ``containers.conf`` of its own (``CONTAINERS_CONF``) with two settings this
host needs, both measured with Debian 12's podman 4.3.1 (docs/explanation/docker-backend.md, "Podman"):
- ``init_path``: podman looks for its init at /usr/libexec/podman/catatonit, which no Debian
  package ships; Debian's ``catatonit`` installs /usr/bin/catatonit.
- ``default_ulimits``: rootful podman gives every container nofile and nproc limits of about a
  million, which runc cannot set without CAP_SYS_RESOURCE ("error setting rlimit type 7"), and
  machines like these (a container themselves) lack it. The service's own hard limits can be
  set, but podman changes them when it starts (nproc 96365 became 32768 here), so the session
  starts it once to read them from /proc, then again with them.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from . import Prepared, Target
from .docker import IMAGE
from .gateway import die_with_parent, stop_process

INIT = Path("/usr/bin/catatonit")
SETUP = "run `bash .ci/podman-setup.sh` as root"


def unavailable() -> str | None:
    if shutil.which("podman") is None:
        return f"podman is not installed; {SETUP}"
    if not INIT.exists():
        return f"catatonit (podman's init) is not installed; {SETUP}"
    try:
        import docker  # noqa: F401
    except ImportError:
        return "docker-py is not installed (pip install 'sandbox-kernel[docker]')"
    if subprocess.run(["podman", "image", "exists", IMAGE], capture_output=True).returncode != 0:
        return f"podman has no image {IMAGE}; {SETUP}"
    return None


def containers_conf(path: Path, limits: dict[str, int]) -> Path:
    """Write the service's ``containers.conf`` (see the module docstring) to ``path``, with
    ``limits`` (``{"nofile": hard, ...}``) as every container's ulimits."""
    ulimits = ", ".join(f'"{name}={hard}:{hard}"' for name, hard in limits.items())
    path.write_text(f'[containers]\ninit_path = "{INIT}"\ndefault_ulimits = [{ulimits}]\n')
    return path


def hard_limits(pid: int) -> dict[str, int]:
    """The hard nofile and nproc limits of process ``pid`` (/proc/PID/limits)."""
    rows = {"Max open files": "nofile", "Max processes": "nproc"}
    limits = {}
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        for label, name in rows.items():
            if line.startswith(label) and line.split()[-2].isdigit():
                limits[name] = int(line.split()[-2])
    return limits


def wait_socket(socket: str, service: subprocess.Popen, timeout: float = 30) -> None:
    """Wait until the service at ``socket`` answers a ping."""
    import docker

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if service.poll() is not None:
            raise RuntimeError(f"podman system service exited with code {service.returncode}")
        with contextlib.suppress(Exception), contextlib.closing(docker.DockerClient(f"unix://{socket}", timeout=5)) as client:
            client.ping()
            return
        time.sleep(0.1)
    raise RuntimeError(f"podman system service did not answer at {socket} within {timeout:g} s")


@contextlib.contextmanager
def service(scratch: Path, limits: dict[str, int]) -> Iterator[tuple[str, subprocess.Popen]]:
    """``podman system service`` on ``scratch/podman.sock`` with its ``containers.conf``; stopped
    at the end of the block."""
    socket = f"{scratch}/podman.sock"
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "CONTAINERS_CONF": str(containers_conf(scratch / "containers.conf", limits))}
    with open(scratch / "service.log", "ab") as log:
        # cwd: conmon, the service's child, writes an empty file named `oom` into its working
        # directory when a container's process is OOM-killed (the empty `oom` at the clone's top
        # after each full run: the test session's cwd), so it works in the scratch folder
        process = subprocess.Popen(["podman", "system", "service", "--time=0", f"unix://{socket}"], env=env,
                                   stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent, cwd=scratch)
    try:
        wait_socket(socket, process)
        yield socket, process
    finally:
        stop_process(process, grace=10)


@contextlib.contextmanager
def prepare() -> Iterator[Prepared]:
    """Start ``podman system service`` for the session; stop it, with any sandboxes left, at the end."""
    import docker

    from sandbox_kernel.backends.docker import engine

    with tempfile.TemporaryDirectory(prefix="skp-") as scratch:
        with service(Path(scratch), {}) as (_, process):  # only to read the limits podman gives itself
            limits = hard_limits(process.pid)
        with service(Path(scratch), limits) as (socket, _):
            yield Prepared(kernel_env={"DOCKER_HOST": f"unix://{socket}"})
            with contextlib.suppress(Exception), contextlib.closing(docker.DockerClient(f"unix://{socket}", timeout=30)) as client:
                engine.remove_leftovers(client)


TARGET = Target("podman", unavailable=unavailable, prepare=prepare, backend="docker")
