"""Egress by name on the other engines the docker backend runs on: Podman's Docker-compatible API
(both transports) and a remote engine over TCP with TLS (the rig of tests/targets/remote_engine.py,
which does not share this host's filesystem). On each, the tests' own rig runs on that engine
(tests/support/egress.py), ``%pip install`` then ``import`` work through the proxy, every probe of
tests/egress_rig/probes.py is refused at once, and the attacker and the resolver record nothing
they should not."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

from sandbox_kernel.backends.docker.images.build import EGRESS_TAG
from tests.support import egress
from tests.support.backends import backends, prepared
from tests.support.recorder import Recorder
from tests.targets import env_vars, remote_engine, skip_or_fail
from tests.test_egress import IMPORT, INSTALL, PROBED, PROBES, VALUE, WHEELS

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(900)]

ENGINES = ["podman", "podman_api", "docker_tcp"]


@pytest.fixture(scope="module", params=ENGINES)
def engine_name(request) -> str:
    prepared(request.param)
    return request.param


@pytest.fixture(scope="module")
def engine_client(engine_name):
    """A docker-py client of the engine under test; on the remote rig, with the egress images loaded."""
    import docker

    if engine_name == "docker_tcp":
        rig = remote_engine.session_rig()
        inner = rig.client()
        with contextlib.closing(docker.from_env(timeout=300)) as local:
            for image in (EGRESS_TAG, egress.RIG_IMAGE):
                remote_engine.ensure_image(local, inner, image)
        yield inner
        inner.close()
        return
    with env_vars(prepared(engine_name).kernel_env), contextlib.closing(docker.from_env()) as client:
        for image in (EGRESS_TAG, egress.RIG_IMAGE):
            if not client.images.list(name=image):
                skip_or_fail(f"the image {image} is missing on {engine_name}; run .ci/egress-setup.sh, then "
                             ".ci/podman-setup.sh")
        yield client


@pytest.fixture(scope="module")
def rig(engine_client):
    with egress.rig(engine_client, WHEELS) as made:
        yield made


async def run(backend, code: str) -> Recorder:
    rec = Recorder()
    await backend.execute(code, rec)
    return rec


async def test_pip_install_and_the_probes(engine_name, rig, tmp_path):
    (tmp_path / "rig-ca.pem").write_text(rig.ca.ca_pem)
    with env_vars(prepared(engine_name).kernel_env):
        async with backends(engine_name) as make:
            async with make(**rig.options(*PROBED)) as backend:
                installed = await run(backend, INSTALL)
                assert "Successfully installed egress-demo-1.0 egress-helper-1.0" in installed.text(), installed.text()
                assert (await run(backend, IMPORT)).result() == VALUE
                await backend.upload(tmp_path / "rig-ca.pem", "rig-ca.pem")
                proxy = rig.client.containers.get(backend.describe()["egress_proxy"])
                addresses = {**rig.addresses, "gateway": rig.gateway,
                             "proxy": proxy.attrs["NetworkSettings"]["Networks"][rig.network]["IPAddress"]}
                probed = await run(backend, f"RIG = {addresses!r}\n" + Path(PROBES).read_text())
    outcomes = json.loads(probed.text("stdout").strip().splitlines()[-1])
    leaks = {name: o for name, o in outcomes.items() if o[0].startswith("reached") != name.startswith("control")}
    assert not leaks and len(outcomes) >= 40, leaks
    assert not {name: o for name, o in outcomes.items() if o[1] > 5.5 or "timed out" in o[0] or "Timeout" in o[0]}
    assert "egress: refused attacker.test:80 (not allowed)" in probed.text("stderr")
    assert rig.log("attacker") == []
    assert set(rig.dns_queries()) <= {"index.test", "api.test", "rebind.test", "plain.test"}
