"""Warm pools (issue 20, :mod:`sandbox_kernel.backends.pool`): a new session takes a sandbox started
ahead of it, on local and docker (both transports), through the API and through the kernelspec.
Each pooled sandbox is used once, taken atomically, discarded when it died while it waited,
ends with the process of the session that took it, and ends by itself after ``pool_ttl``."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time

import pytest

from sandbox_kernel.backends import pool
from sandbox_kernel.frontdoors.api import AsyncSandbox
from tests.kernels import kernel, run, stdout

pytestmark = pytest.mark.kernel

TRANSPORTS = {"local": {}, "docker": {"transport": "ipc"}, "docker_api": {"transport": "api"}}
"""Case -> the API's options besides the pool's."""


def backend_of(name: str) -> str:
    return "local" if name == "local" else "docker"


def waiting(name: str) -> list[dict]:
    return [record for _, record in pool.waiting_records(backend_of(name))]


def wait_until(condition, timeout: float = 60.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def stop_pools() -> str:
    done = subprocess.run([sys.executable, "-m", "sandbox_kernel", "pool", "stop"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def fillers_done(timeout: float = 60.0) -> None:
    """Wait until no filler runs (each holds its key's lock), so none offers a sandbox after
    the pools were emptied."""
    import fcntl

    for lock in pool.pool_root().glob("*.lock"):
        deadline = time.monotonic() + timeout
        with open(lock) as file:
            while True:
                try:
                    fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    fcntl.flock(file, fcntl.LOCK_UN)
                    break
                except BlockingIOError:
                    assert time.monotonic() < deadline, f"a pool filler still runs ({lock.name})"
                    time.sleep(0.1)


@pytest.fixture(autouse=True)
def empty_pools():
    """No pooled sandbox before and after each test: its run's and worker's pools only (the
    registry is the worker's own, ``SANDBOX_KERNEL_POOL_ROOT``: tests/plugin/isolation.py)."""
    fillers_done()
    stop_pools()
    yield
    fillers_done()
    stop_pools()


def box(name: str, **options) -> AsyncSandbox:
    return AsyncSandbox(backend_of(name), **{**TRANSPORTS[name], "pool_size": 1, **options})


async def filled(name: str, **options) -> dict:
    """Start and close one session (a cold start, which starts the refill); return the record of
    the sandbox then waiting in the pool."""
    first = box(name, **options)
    await first.start()
    await first.close()
    wait_until(lambda: len(waiting(name)) == 1, what="the refill")
    return waiting(name)[0]


def sandbox_alive(name: str, record: dict) -> bool:
    if name == "local":
        from sandbox_kernel.backends.local.pooled import pooled_alive

        return pooled_alive(record)
    done = subprocess.run(["docker", "inspect", "-f", "{{.State.Running}}", record["id"]], capture_output=True,
                          text=True)
    return done.stdout.strip() == "true"


@pytest.mark.parametrize("name", list(TRANSPORTS))
async def test_a_session_takes_a_pooled_sandbox_once_and_the_pool_refills(name):
    first = box(name)
    await first.start()  # the pool was empty: a cold start, and the refill begins
    assert first.backend._pooled_name is None
    await first.close()
    wait_until(lambda: len(waiting(name)) == 1, what="the refill")
    offered = waiting(name)[0]
    second = box(name)
    await second.start()
    try:
        assert second.backend._pooled_name == offered["name"]
        result = await second.run("secret = 41\nsecret + 1")
        assert result.text == "42"
    finally:
        await second.close()
    assert not sandbox_alive(name, offered)  # used once: gone with its session, never back in the pool
    wait_until(lambda: len(waiting(name)) == 1, what="the second refill")
    assert waiting(name)[0]["name"] != offered["name"]
    third = box(name)
    await third.start()
    try:
        assert third.backend._pooled_name not in (None, offered["name"])
        result = await third.run("secret")
        assert result.error is not None and result.error.ename == "NameError"  # nothing of the last session
    finally:
        await third.close()


def _claim(root: str, key: str, results) -> None:
    record = pool.Registry("local", key, root=__import__("pathlib").Path(root)).claim()
    results.put(record and record["name"])


def test_concurrent_claims_never_get_the_same_sandbox(tmp_path):
    """12 processes claim at the same moment from a pool of 5: each entry goes to one only."""
    registry = pool.Registry("local", "k" * 16, root=tmp_path)
    for index in range(5):
        registry.offer(f"box-{index}", {"index": index})
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    workers = [context.Process(target=_claim, args=(str(tmp_path), "k" * 16, results)) for _ in range(12)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
    names = [results.get(timeout=5) for _ in workers]
    taken = [n for n in names if n]
    assert sorted(taken) == [f"box-{index}" for index in range(5)] and names.count(None) == 7
    assert registry.count() == 0


def test_a_registry_that_is_not_this_users_is_never_read(tmp_path):
    """The default registry is in the shared temporary folder: one another user made first, or a
    link, is never read (its planted records are neither adopted nor signalled by the sweep) and
    never written; the user's own, left open to others by an earlier version, is closed."""
    root, key = tmp_path / "pool", "k" * 16
    pool.Registry("local", key, root=root).offer("box", {"pid": 1})
    claimed = pool.Registry("local", key, root=root).claim()
    assert claimed["name"] == "box" and len(pool.claimed_records("local", root)) == 1
    pool.Registry("local", key, root=root).offer("box-2", {"pid": 1})

    def unread(where):
        registry = pool.Registry("local", key, root=where)
        assert registry.entries() == [] and registry.count() == 0 and registry.claim() is None
        assert pool.waiting_records("local", where) == [] and pool.claimed_records("local", where) == []
        with pytest.raises(PermissionError, match="no sandbox is pooled"):
            registry.offer("planted", {})

    root.chmod(0o755)  # this user's, open to others (as made before): closed, then read
    assert pool.Registry("local", key, root=root).count() == 1 and root.stat().st_mode & 0o777 == 0o700
    if os.getuid() == 0:  # another owner (as root the test can make one)
        os.chown(root, 65534, 65534)
        unread(root)
        os.chown(root, 0, 0)
    (tmp_path / "link").symlink_to(root)
    unread(tmp_path / "link")
    assert pool.Registry("local", key, root=root).count() == 1  # the user's own is read as before


@pytest.mark.parametrize("name", list(TRANSPORTS))
async def test_a_pooled_sandbox_that_died_is_skipped_without_a_word(name):
    dead = await filled(name)
    if name == "local":
        os.killpg(dead["pid"], signal.SIGKILL)
    else:
        subprocess.run(["docker", "kill", dead["id"]], check=True, capture_output=True)
    wait_until(lambda: not sandbox_alive(name, dead), what="the kill")
    session = box(name)
    await session.start()
    try:
        assert session.backend._pooled_name != dead["name"]
        result = await session.run("print('fine')")
        assert result.stdout == "fine\n" and result.stderr == "" and result.error is None
    finally:
        await session.close()


TAKER = """
import asyncio, json, sys
from sandbox_kernel.frontdoors.api import AsyncSandbox

async def main():
    box = AsyncSandbox(sys.argv[1], pool_size=1, **json.loads(sys.argv[2]))
    await box.start()
    print(box.backend._pooled_name, flush=True)
    await asyncio.sleep(600)
asyncio.run(main())
"""


@pytest.mark.parametrize("name", list(TRANSPORTS))
async def test_a_taken_sandbox_ends_with_the_process_that_took_it(name):
    await filled(name)
    offered = {record["name"]: record for record in waiting(name)}  # (a previous test's filler may add one)
    taker = subprocess.Popen([sys.executable, "-c", TAKER, backend_of(name), json.dumps(TRANSPORTS[name])],
                             stdout=subprocess.PIPE, text=True)
    try:
        record = offered[taker.stdout.readline().strip()]
        assert sandbox_alive(name, record)
    finally:
        taker.kill()
        taker.wait()
    killed = time.monotonic()
    wait_until(lambda: not sandbox_alive(name, record), timeout=30, what="the sandbox's end")
    assert time.monotonic() - killed < 15  # ends with its taker (no number promised; a loaded engine is slow)


@pytest.mark.parametrize("name", list(TRANSPORTS))
async def test_a_sandbox_nobody_takes_ends_after_pool_ttl(name):
    # pool_ttl counts from the sandbox's start: 15 s, since on CI's loaded machine a docker_api
    # refill once took over 4 s to be ready, ended as it was offered, and the refill never showed
    record = await filled(name, pool_ttl=15)
    assert sandbox_alive(name, record)
    wait_until(lambda: not sandbox_alive(name, record), timeout=60, what="the TTL")
    session = box(name, pool_ttl=15)  # its record is still listed: taken, found dead, skipped
    await session.start()
    try:
        assert (await session.run("1+1")).text == "2"
    finally:
        await session.close()


@pytest.mark.parametrize("name", ["local", "docker"])
async def test_the_pool_is_keyed_by_what_shapes_a_sandbox(name):
    limit = {"memory_limit": "1g"} if name == "docker" else {"memory_limit": "4g"}
    await filled(name, **limit)
    other = box(name, memory_limit="768m" if name == "docker" else "3g")
    await other.start()
    try:
        assert other.backend._pooled_name is None  # not made as it would make one: started cold
    finally:
        await other.close()
    same = box(name, **limit)
    await same.start()
    try:
        assert same.backend._pooled_name is not None
    finally:
        await same.close()


async def test_pool_status_gc_and_pool_stop_see_the_waiting_sandboxes():
    name = (await filled("docker"))["name"]
    status = subprocess.run([sys.executable, "-m", "sandbox_kernel", "pool", "status"], capture_output=True, text=True)
    assert name in status.stdout and "MiB" in status.stdout, status.stdout
    dry = subprocess.run([sys.executable, "-m", "sandbox_kernel", "gc", "--dry-run"], capture_output=True, text=True)
    assert f"would remove {name} (pooled, waiting)" in dry.stdout, dry.stdout
    assert sandbox_alive("docker", waiting("docker")[0])
    assert f"removed {name}" in stop_pools()
    assert waiting("docker") == []
    done = subprocess.run(["docker", "ps", "-aq", "--filter", f"name={name}"], capture_output=True, text=True)
    assert done.stdout.strip() == ""


def test_a_sweep_leaves_the_pooled_containers_of_another_registry(docker_client, tmp_path):
    """Two registries on one engine (two users of it, or a ``SANDBOX_KERNEL_POOL_ROOT`` each): a
    sweep (every start's, ``gc``'s, ``pool stop``'s) removes the pooled containers its own registry
    lost, never another registry's, whose sandboxes it cannot see waiting or claimed."""
    from sandbox_kernel.backends.docker import pooled
    from sandbox_kernel.backends.docker.engine import CREATED_LABEL

    made = {}
    for whose, root in (("mine", pool.pool_root()), ("other", tmp_path / "another-registry")):
        labels = {**pooled.labels("k" * 16, None), pooled.POOL_ROOT_LABEL: str(root), CREATED_LABEL: "0"}  # not young
        made[whose] = docker_client.api.create_container("sandbox-kernel:latest", entrypoint=["/nonexistent"],
                                                         command=[], labels=labels, network_disabled=True)["Id"]
    try:
        pooled.sweep(docker_client, waiting_too=True)
        assert not docker_client.api.containers(all=True, filters={"id": made["mine"]})  # lost by its registry: removed
        assert docker_client.api.containers(all=True, filters={"id": made["other"]})
    finally:
        for container in made.values():
            with contextlib.suppress(Exception):
                docker_client.api.remove_container(container, force=True)


def test_a_bad_pool_size_is_one_line():
    with pytest.raises(Exception) as caught:
        AsyncSandbox("docker", pool_size=-1)
    assert "pool_size" in str(caught.value) and "Traceback" not in str(caught.value)


@pytest.mark.parametrize("name", ["local", "docker"])
def test_through_the_kernelspec_a_new_kernel_takes_a_pooled_sandbox(name):
    option = f"--{'LocalBackend' if name == 'local' else 'DockerBackend'}.pool_size=1"
    with kernel(name, option) as (_, kc):  # fills the pool
        reply, _ = run(kc, "x = 1")
        assert reply["status"] == "ok"
    wait_until(lambda: len(waiting(name)) == 1, what="the refill")
    offered = waiting(name)[0]
    with kernel(name, option) as (km, kc):
        reply, outputs = run(kc, "import os\nprint('x' in globals(), os.getcwd())")
        assert reply["status"] == "ok"
        assert stdout(outputs).startswith("False ")
        assert not any(offered["name"] == record["name"] for record in waiting(name))  # taken
        msg_id = kc.execute("import time\ntime.sleep(30)")
        time.sleep(1)
        km.interrupt_kernel()  # the notebook's interrupt button reaches the pooled sandbox
        reply = kc.get_shell_msg(timeout=20)
        assert reply["parent_header"]["msg_id"] == msg_id and reply["content"]["ename"] == "KeyboardInterrupt"


@pytest.mark.parametrize("name", ["local", "docker"])
def test_through_the_magic_a_new_session_takes_a_pooled_sandbox(name):
    from tests.support.host import host_kernel

    with host_kernel(name) as (_, kc):
        cell = f"%%sandbox --backend {backend_of(name)} --name first --pool-size 1\nimport os\nprint(os.getpid())"
        reply, outputs = run(kc, cell, timeout=120)
        assert reply["status"] == "ok", outputs
        wait_until(lambda: len(waiting(name)) == 1, what="the refill")
        offered = waiting(name)[0]
        cell = f"%%sandbox --backend {backend_of(name)} --name second --pool-size 1\nprint('first' in dir())"
        reply, outputs = run(kc, cell, timeout=60)
        assert reply["status"] == "ok" and stdout(outputs) == "False\n", outputs
        assert offered["name"] not in [record["name"] for record in waiting(name)]  # the second session took it
