"""Bursts of small outputs through the wrapper kernel, started from its kernelspec as a
frontend starts it: every message arrives, in order, and the cell ends (issue 20).

Before the sandbox's IOPub socket had no high-water mark, libzmq dropped what the host had not
read yet past 1000 messages: 4489 of 5000 displays arrived, the cell's ``status: idle`` was
lost with them, and no later cell of the session ever ended."""

from __future__ import annotations

import pytest

from tests.kernels import kernel, run, stdout

ROUNDS = 3
DISPLAYS = "from IPython.display import display\nfor i in range(5000):\n    display(i)"
UPDATES = "from IPython.display import display\nh = display(-1, display_id=True)\nfor i in range(5000):\n    h.update(i)"


def shown(outputs: list[dict], msg_type: str) -> list[str]:
    return [m["content"]["data"]["text/plain"] for m in outputs if m["header"]["msg_type"] == msg_type]


@pytest.mark.parametrize("name", ["local", "docker", "docker_api"])
def test_bursts_of_displays_and_updates_arrive_whole_and_in_order_and_cells_end(name):
    with kernel(name) as (_, kc):
        for _ in range(ROUNDS):
            reply, outputs = run(kc, DISPLAYS, timeout=60)
            assert reply["status"] == "ok"
            assert shown(outputs, "display_data") == [str(i) for i in range(5000)]
            reply, outputs = run(kc, UPDATES, timeout=60)
            assert reply["status"] == "ok"
            assert shown(outputs, "update_display_data") == [str(i) for i in range(5000)]
            assert stdout(outputs, "stderr") == ""
        reply, outputs = run(kc, "print(i)")  # the next cell sees the state
        assert reply["status"] == "ok" and stdout(outputs) == "4999\n"
