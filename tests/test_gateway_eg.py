"""The gateway backend against a real Jupyter Enterprise Gateway whose kernels are Docker
containers (tests/targets/gateway_eg.py): the whole contract suite, the wrapper kernel from its
installed ``sandbox-gateway`` kernelspec, and notebooks/gateway.ipynb end to end."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
from pathlib import Path

import nbformat
import pytest
import pytest_asyncio
from nbclient import NotebookClient

from tests.kernels import interrupted_loop, kernel, run, stdout
from tests.support import contract
from tests.support.recorder import Recorder
from tests.targets import env_vars, gateway_eg, skip_or_fail

pytestmark = [pytest.mark.gateway, pytest.mark.docker, pytest.mark.timeout(240)]
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def eg():
    if (reason := gateway_eg.unavailable()) is not None:
        skip_or_fail(f"Enterprise Gateway with Docker kernels unavailable: {reason}")
    with gateway_eg.running() as server:
        yield server
    assert server.containers() == [], "a kernel container outlived the gateway"


def traits(eg) -> dict:
    return {"url": eg.url, "auth_token": eg.token, "heartbeat_interval": 1.0, "env": {"KERNEL_USERNAME": "sandbox-test"}}


def kernel_env(eg) -> dict:
    return {"JUPYTER_GATEWAY_URL": eg.url, "JUPYTER_GATEWAY_AUTH_TOKEN": eg.token}


# Enterprise Gateway refuses kernels for root (its unauthorized_users), the user these tests run
# as and GatewayBackend's default KERNEL_USERNAME: name another user, as a deployment would.
USER_OPTION = "--GatewayBackend.env=KERNEL_USERNAME=sandbox-test"


CASES = [f for name, f in inspect.getmembers(contract, inspect.iscoroutinefunction) if name.startswith("test_")]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared(eg):
    """A kernel on EG that the contract's read-only cases share (``sandbox``)."""
    from sandbox_kernel.backends.gateway import GatewayBackend

    async with GatewayBackend(**traits(eg)) as backend:
        yield backend


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("case", CASES, ids=lambda f: f.__name__.removeprefix("test_"))
async def test_contract_on_enterprise_gateway(eg, shared, case, tmp_path, monkeypatch):
    """Each contract test, its backend a kernel in a container that EG started (the read-only
    cases share one, on the module's event loop)."""
    from sandbox_kernel.backends.gateway import GatewayBackend

    made = []

    def make_backend(**more):
        made.append(GatewayBackend(**{**traits(eg), **more}))
        return made[-1]

    available = {"make_backend": make_backend, "sandbox": shared, "backend_name": "gateway", "tmp_path": tmp_path,
                 "monkeypatch": monkeypatch}
    try:
        await case(**{name: available[name] for name in inspect.signature(case).parameters})
    finally:
        for backend in made:
            await backend.shutdown()


async def test_each_kernel_is_a_container_on_the_gateways_network_and_goes_with_shutdown(eg):
    from sandbox_kernel.backends.gateway import GatewayBackend

    backend = GatewayBackend(**traits(eg))
    rec = Recorder()
    await backend.execute("import socket, os\nprint(socket.gethostname(), os.getuid())", rec)
    kernel_id = backend.describe()["sandbox_id"]
    [container] = [c for c in eg.containers() if c.labels.get("kernel_id") == kernel_id]
    assert container.image.tags == [gateway_eg.IMAGE]
    assert rec.text() == f"sandbox-test-{kernel_id} 1000\n"
    await backend.shutdown()
    for _ in range(50):
        if not any(c.labels.get("kernel_id") == kernel_id for c in eg.containers()):
            break
        await asyncio.sleep(0.2)
    else:
        pytest.fail("the kernel's container is still there after shutdown")


def test_kernelspec_interrupt_button_and_death_through_the_wrapper_kernel(eg):
    with kernel("gateway", USER_OPTION, **kernel_env(eg)) as (km, kc):
        run(kc, "survivor = 'alive'")
        reply, took = interrupted_loop(km, kc)
        assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt"
        assert took < 2.0
        _, outputs = run(kc, "print(survivor)")
        assert stdout(outputs) == "alive\n"
        reply, outputs = run(kc, "import os\nos._exit(3)", timeout=30)
        assert reply["status"] == "error" and reply["ename"] == "SandboxDied"
        _, outputs = run(kc, "print('survivor' in globals())")
        assert stdout(outputs) == "False\n"


def test_the_gateway_notebook_runs_end_to_end(eg):
    """notebooks/gateway.ipynb (nbval runs it on Kernel Gateway) on EG, outputs compared."""
    stored = nbformat.read(ROOT / "notebooks" / "gateway.ipynb", as_version=4)
    fresh = nbformat.read(ROOT / "notebooks" / "gateway.ipynb", as_version=4)
    with env_vars(kernel_env(eg)):
        NotebookClient(fresh, timeout=120, kernel_name="sandbox-gateway", allow_errors=True,
                       extra_arguments=[USER_OPTION]).execute()
    for old, new in zip(stored.cells, fresh.cells):
        if old.cell_type != "code":
            continue
        for cell in (old, new):  # the start-up progress shows only when the start is slow
            cell.outputs = _merged_streams([o for o in cell.outputs if not o.get("data", {}).get(
                "text/plain", "").startswith(("Starting a kernel on the gateway", "Started a kernel on the gateway"))])
        assert [o.output_type for o in new.outputs] == [o.output_type for o in old.outputs], old.source
        for o_old, o_new in zip(old.outputs, new.outputs):
            if o_old.output_type == "stream":
                assert o_new.text == o_old.text, old.source
            elif o_old.output_type in ("execute_result", "display_data"):
                assert set(o_new.data) == set(o_old.data), old.source
                if "text/plain" in o_old.data and "image/png" not in o_old.data:
                    assert o_new.data["text/plain"] == o_old.data["text/plain"], old.source
            elif o_old.output_type == "error":
                assert o_new.ename == o_old.ename, old.source
    assert json.dumps(fresh.metadata.kernelspec) == json.dumps(stored.metadata.kernelspec)
    assert os.environ.get("JUPYTER_GATEWAY_URL") != eg.url  # env_vars restored


def _merged_streams(outputs: list) -> list:
    """Consecutive stream outputs of one name as one: how text splits into messages depends on timing."""
    merged: list = []
    for output in outputs:
        if output.output_type == "stream" and merged and merged[-1].output_type == "stream" \
                and merged[-1].name == output.name:
            merged[-1] = nbformat.v4.new_output("stream", name=output.name, text=merged[-1].text + output.text)
        else:
            merged.append(output)
    return merged
