"""Hostile cells in a docker sandbox, the backend answering the next cell: imported by
tests/test_docker.py (runc), tests/test_docker_runsc.py (gVisor), tests/test_docker_podman.py and
tests/test_docker_remote.py, whose ``make`` fixture gives ``make(**traits)`` (an unstarted
DockerBackend) and checks nothing is left behind. The cases that only probe what a cell may do
(connect, write outside its directories) run on ``sandbox``, the started one that a module's
read-only cases share (the plugin's; a module using them runs on its module's event loop)."""

from __future__ import annotations

import ipaddress
import os
import socket
import time

import pytest

from sandbox_kernel.core.errors import SandboxDied
from tests.support.recorder import Recorder


async def run(backend, code, **kwargs):
    rec = Recorder()
    outcome = await backend.execute(code, rec, **kwargs)
    return outcome, rec


@pytest.fixture
def host_listener():
    """``(address, port)`` of a TCP listener this test makes on the host, on the address the
    engine's default bridge gives containers as their gateway (docker0's, 172.17.0.1 here): the
    first host address a container with a network would reach. Yields, then asserts that no
    connection ever reached it. A test sends traffic only to listeners it made itself, so the
    sandbox's network is probed with this one and with route lookups, never an outside address."""
    import docker

    client = docker.from_env()
    try:
        ipam = client.networks.get("bridge").attrs["IPAM"]["Config"][0]
    finally:
        client.close()
    # an engine that found docker0 already made (a restarted daemon) lists only the Subnet; the
    # bridge driver's gateway is then the subnet's first address, which docker0 holds
    gateway = ipam.get("Gateway") or str(next(ipaddress.ip_network(ipam["Subnet"]).hosts()))
    with socket.create_server((gateway, 0)) as listener:
        listener.setblocking(False)
        yield listener.getsockname()[:2]
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing came


async def test_network_has_no_interface_no_route_and_reaches_no_listener(sandbox, host_listener):
    host, port = host_listener
    code = f"""
import errno, socket
print('interfaces', sorted(name for _, name in socket.if_nameindex()))
probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    probe.connect(({host!r}, {port}))  # a route lookup: a UDP connect sends nothing
    print('routed')
except OSError as exc:
    print('route', errno.errorcode.get(exc.errno, exc.errno))
try:
    socket.create_connection(({host!r}, {port}), timeout=3)
    print('connected')
except OSError as exc:
    print('connect', type(exc).__name__)
"""
    outcome, rec = await run(sandbox, code)
    assert (await run(sandbox, "1 + 1"))[1].result() == "2"
    lines = rec.text().splitlines()
    assert outcome.status == "ok", rec.text()
    assert lines[0] == "interfaces ['lo']", lines
    assert lines[1].startswith("route E"), lines  # ENETUNREACH: no route to any address but loopback
    assert lines[2].startswith("connect ") and "connected" not in lines, lines


async def test_root_is_read_only_tmp_and_workdir_are_writable(sandbox):
    code = """
import errno
for path in ['/probe', '/etc/probe', '/opt/probe', '/opt/venv/probe', '/home/sandbox/probe']:
    try:
        open(path, 'w').write('x')
        print(path, 'written')
    except OSError as exc:
        print(path, errno.errorcode[exc.errno])
open('/tmp/t', 'w').write('ok'); open('w', 'w').write('ok'); print('tmp and workdir ok')
"""
    _, rec = await run(sandbox, code)
    assert (await run(sandbox, "1 + 1"))[1].result() == "2"
    lines = rec.text().splitlines()
    assert all(line.split()[1] in ("EROFS", "EACCES") for line in lines[:-1]), lines
    assert lines[-1] == "tmp and workdir ok"
    assert not any(os.path.exists(p) for p in ("/probe", "/etc/probe", "/opt/probe"))  # the host's


async def test_workdir_has_a_size_limit(make):
    async with make(workdir_size="8m") as backend:
        outcome, _ = await run(backend, "open('big', 'wb').write(b'x' * 16 * 1024**2)")
        assert outcome.status == "error" and "No space left" in outcome.error.evalue
        assert (await run(backend, "1 + 1"))[1].result() == "2"


async def test_memory_bomb_is_reported_as_out_of_memory(make, client):
    async with make(memory_limit="256m") as backend:
        await run(backend, "kept = 1")
        old = backend._container.id
        started = time.monotonic()
        with pytest.raises(SandboxDied, match=r"it ran out of memory \(limit 256 MiB\)\. Its state is lost"):
            await run(backend, "hog = []\nwhile True: hog.append(bytearray(16 * 1024**2))")
        elapsed = time.monotonic() - started
        _, rec = await run(backend, "'kept' in globals()")
        assert rec.result() == "False"
        assert not client.api.containers(all=True, filters={"id": old})
    assert elapsed < 10, f"OOM noticed after {elapsed:.1f} s"
