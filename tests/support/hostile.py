"""Hostile cells in a docker sandbox, the backend answering the next cell: imported by
tests/test_docker.py (runc), tests/test_docker_runsc.py (gVisor), tests/test_docker_podman.py and
tests/test_docker_remote.py, whose ``make`` fixture gives ``make(**traits)`` (an unstarted
DockerBackend) and checks nothing is left behind. The cases that only probe what a cell may do
(connect, write outside its directories) run on ``sandbox``, the started one that a module's
read-only cases share (the plugin's; a module using them runs on its module's event loop)."""

from __future__ import annotations

import os
import time

import pytest

from sandbox_kernel.core.errors import SandboxDied
from tests.support.recorder import Recorder


async def run(backend, code, **kwargs):
    rec = Recorder()
    outcome = await backend.execute(code, rec, **kwargs)
    return outcome, rec


async def test_network_connect_and_dns_fail(sandbox):
    code = """
import socket
for target in [('1.1.1.1', 53), ('10.0.0.1', 80)]:
    try:
        socket.create_connection(target, timeout=3)
        print('connected')
    except OSError as exc:
        print(type(exc).__name__)
try:
    socket.getaddrinfo('pypi.org', 443)
    print('resolved')
except socket.gaierror:
    print('gaierror')
"""
    outcome, rec = await run(sandbox, code)
    assert (await run(sandbox, "1 + 1"))[1].result() == "2"
    assert outcome.status == "ok" and "connected" not in rec.text() and "resolved" not in rec.text()
    assert rec.text().splitlines()[-1] == "gaierror"


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
