"""The docker backend on a user's own rootless Podman engine, as the JupyterHub recipe starts it
(``sandbox-kernel user-engine start``; the rig user hub-alice of .ci/hub-setup.sh): the api transport
is chosen, limits the engine would drop are refused, the engine's cgroup bounds all of the user's
sandboxes together. And the messages a user meets: no permission on the machine's engine (the
docker group is root), the per-user quota of memory (on the session's rootful Podman service,
where containers do get memory limits)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types

import pytest

from sandbox_kernel.backends.docker import DockerBackend, quota
from sandbox_kernel.core.errors import QuotaReached, SandboxDied, SandboxStartError
from sandbox_kernel.core.events import SandboxReplaced
from sandbox_kernel.runtime import lock
from tests.hub import ENGINE_LIMITS, USERS, VENV, as_user, sandboxes, unavailable
from tests.plugin.locks import HUB_USERS
from tests.support.backends import backends
from tests.support.hostile import run
from tests.targets import env_vars, skip_or_fail

pytestmark = [pytest.mark.docker, pytest.mark.timeout(300),
              pytest.mark.machine_lock(HUB_USERS, exclusive=True)]  # the hub rig's users and engines, which it stops

USER = USERS[0]
NO_LIMITS = {"memory_limit": 0, "pids_limit": 0, "cpus": 0}


@pytest.fixture(scope="module")
def engine():
    """The rig user's engine (started again if it stopped: the command is idempotent); its DOCKER_HOST."""
    if (reason := unavailable()) is not None:
        skip_or_fail(reason)
    started = subprocess.run([str(VENV / "bin" / "sandbox-kernel"), "user-engine", "start", USER, "--memory",
                              str(ENGINE_LIMITS["memory"]), "--pids", str(ENGINE_LIMITS["pids"]), "--cpus",
                              str(ENGINE_LIMITS["cpus"])], capture_output=True, text=True, timeout=300, cwd="/")
    assert started.returncode == 0, started.stderr
    assert started.stdout.startswith("DOCKER_HOST=unix:///run/user/")
    return started.stdout.strip().removeprefix("DOCKER_HOST=")


@pytest.fixture
async def make(engine):
    """``make(**traits)`` → an unstarted DockerBackend on the user's engine; none of its sandboxes stays."""
    made = []
    before = set(sandboxes(USER))

    def make(**traits):
        made.append(DockerBackend(**traits))
        return made[-1]
    with env_vars({"DOCKER_HOST": engine}):
        yield make
        for backend in made:
            await backend.shutdown()
    assert set(sandboxes(USER)) <= before


async def test_a_rootless_engine_runs_the_sandbox_over_the_api_transport(make):
    async with make(**NO_LIMITS) as backend:
        outcome, rec = await run(backend, "import os\nprint(os.getuid(), open('/proc/self/status').read()"
                                          ".split('CapEff:')[1].split()[0])")
        assert outcome.status == "ok" and rec.text() == "1000 0000000000000000\n"  # uid 1000: run by root here
        assert backend._transport == "api"  # ipc cannot cross the engine's uid mapping


async def test_limits_the_engine_would_drop_are_refused_and_nothing_runs(make, engine):
    before = set(sandboxes(USER))
    with pytest.raises(SandboxStartError, match=rf"^The sandbox did not start: the engine at {engine} accepted "
                                                r"memory_limit=1 GiB, pids_limit=256, cpus=1 and would have run the "
                                                r"sandbox without them: rootless engines cannot limit a container on "
                                                r"cgroup v1 .*--DockerBackend.cpus=0 to run without per-sandbox limits"):
        await make().execute("print('ran')", lambda event: None)
    assert set(sandboxes(USER)) == before


@pytest.mark.slow
async def test_the_users_engine_cgroup_bounds_all_of_their_sandboxes(make):
    async with make(**NO_LIMITS) as hog, make(**NO_LIMITS) as neighbour:
        await run(neighbour, "kept = 'state'")
        forks = ("import subprocess\nps = []\ntry:\n    for _ in range(2000):\n"
                 "        ps.append(subprocess.Popen(['sleep', '60']))\nexcept OSError as e:\n"
                 "    print(len(ps) < 1024, type(e).__name__)\nfor p in ps:\n    p.kill()\n    p.wait()")
        assert (await run(hog, forks))[1].text() == "True BlockingIOError\n"
        with pytest.raises(SandboxDied, match="killed by SIGKILL"):
            await run(hog, "hog = []\nfor _ in range(96):\n    hog.append(bytearray(64 * 1024**2))")  # 6 GiB at most: past 3 GiB together
        outcome, rec = await run(neighbour, "kept")
        replaced = [e.text for e in rec.of(SandboxReplaced)]
        if replaced:  # the OOM killer took it too while the hog's memory was freed (docs/how-to/jupyterhub.md)
            assert "killed by SIGKILL" in replaced[0] and outcome.error.ename == "NameError", replaced
        else:  # as a rule, the user's other sandbox lives on
            assert rec.result() == "'state'"
        assert (await run(neighbour, "1 + 1"))[1].result() == "2"  # and the engine does


def test_no_permission_on_the_machines_engine_says_to_use_ones_own_not_the_docker_group(engine):
    """A hub user without an engine of their own meets the machine's socket (root:docker 0660)."""
    code = ("import asyncio\nfrom sandbox_kernel.backends.docker import DockerBackend\n"
            "try:\n    asyncio.run(DockerBackend().execute('1', print))\nexcept Exception as e:\n    print(e)")
    done = as_user(USERS[1], str(VENV / "bin" / "python"), "-c", code, timeout=120, cwd="/")
    assert done.stdout.startswith("No permission to use the Docker engine's socket (unix:///var/run/docker.sock). "
                                  "Fix: use an engine of your own: rootless Podman"), done.stdout + done.stderr
    assert "do not join the 'docker' group for this: its members are root on the machine" in done.stdout


async def test_the_per_user_memory_quota_says_so(tmp_path, monkeypatch):
    (tmp_path / lock.LOCK_NAME).write_text(json.dumps({"per_user": {"memory": "1536m"}}))
    monkeypatch.setattr(lock, "LOCK_DIRS", (tmp_path,))
    # A uid of this test's own on the quota's label and in its count: every test worker runs as
    # root, and the count took another worker's Podman sandbox for this user's (at 3 workers).
    # The labels, the engine's filter and the count are the real ones.
    uid = 3_000_000 + os.getpid() % 1_000_000
    monkeypatch.setattr(quota, "os", types.SimpleNamespace(getuid=lambda: uid))
    async with backends("podman") as make:  # rootful: memory limits are real there
        async with make(memory_limit="1g") as first:
            assert (await run(first, "1 + 1"))[1].result() == "2"
            with pytest.raises(QuotaReached, match=r"^Your running sandboxes hold 1 GiB of memory and this one needs "
                                                   r"1 GiB more, beyond the 1.5 GiB your administrator allows per user "
                                                   rf"\(per_user in {tmp_path}/sandbox_kernel_lock.json\): shut down"):
                await make(memory_limit="1g").execute("1", lambda event: None)
            assert (await run(make(memory_limit="512m"), "2 + 2"))[1].result() == "4"


def test_the_user_engine_command_is_idempotent_stops_and_refuses_a_user_without_subordinate_ids(engine):
    def command(*args):
        return subprocess.run([str(VENV / "bin" / "sandbox-kernel"), "user-engine", *args], capture_output=True,
                              text=True, timeout=120, cwd="/")
    again = command("start", USER)
    assert again.returncode == 0 and again.stdout.strip() == f"DOCKER_HOST={engine}"
    assert command("stop", USER).stdout == f"stopped the engine of {USER}\n"
    ping = ["curl", "-s", "--unix-socket", engine.removeprefix("unix://"), "http://d/_ping"]
    assert as_user(USER, *ping, timeout=30).returncode != 0  # nothing answers there any more
    assert command("stop", USER).stdout == f"no engine of {USER} runs\n"
    limits = ["--memory", str(ENGINE_LIMITS["memory"]), "--pids", str(ENGINE_LIMITS["pids"]), "--cpus", "1"]
    assert command("start", USER, *limits).stdout.strip() == f"DOCKER_HOST={engine}"
    assert as_user(USER, *ping, timeout=30).stdout == "OK"
    nobody = subprocess.run([sys.executable, "-m", "sandbox_kernel", "user-engine", "start", "nobody"],
                            capture_output=True, text=True, timeout=60)
    assert nobody.returncode == 1
    assert nobody.stderr.startswith("sandbox-kernel: nobody has no subordinate ids in /etc/subuid, which rootless "
                                    "Podman needs. Fix: usermod --add-subuids")
