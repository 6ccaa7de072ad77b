"""The comm side of JupyterLab's widget manager, for tests that drive ipywidgets through a kernel.

:class:`WidgetFrontend` sends and reads comm messages as JupyterLab's widget manager
(jupyterlab_widgets 3, ipywidgets 8) does: widget models by comm_id from ``comm_open`` and
``comm_msg`` ``update``/``echo_update`` with binary buffers put back at their ``buffer_paths``;
user changes as ``comm_msg`` ``update`` (binary values as buffers), clicks as ``custom`` messages.
"""

from __future__ import annotations

import time
from typing import Any

from tests.kernels import run, stdout

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
"""The MIME type of a widget's view in a display_data bundle."""


def put_buffers(state: dict, paths: list, buffers: list) -> None:
    """ipywidgets' ``put_buffers``: the binary values back into the JSON state."""
    for path, buffer in zip(paths, buffers):
        target = state
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = bytes(buffer)


class WidgetFrontend:
    """The comm side of JupyterLab's widget manager, over a blocking jupyter_client client."""

    def __init__(self, kc: Any) -> None:
        self.kc = kc
        self.models: dict[str, dict] = {}  # comm_id -> state
        self.requests: set[str] = set()  # msg_ids of every request this frontend sent
        self.elsewhere: list[dict] = []  # IOPub messages of no request we were waiting for

    def take(self, msg: dict) -> None:
        kind, content = msg["header"]["msg_type"], msg["content"]
        comm_id, data = content.get("comm_id"), content.get("data", {})
        if kind == "comm_open" and content.get("target_name") == "jupyter.widget":
            self.models[comm_id] = state = dict(data["state"])
            put_buffers(state, data.get("buffer_paths", []), msg["buffers"])
        elif kind == "comm_msg" and data.get("method") in ("update", "echo_update") and comm_id in self.models:
            state = dict(data["state"])
            put_buffers(state, data.get("buffer_paths", []), msg["buffers"])
            self.models[comm_id].update(state)
        elif kind == "comm_close":
            self.models.pop(comm_id, None)

    def execute(self, code: str) -> tuple[dict, list[dict]]:
        reply, outputs = run(self.kc, code)
        self.requests.add(outputs[0]["parent_header"]["msg_id"])
        for msg in outputs:
            self.take(msg)
        return reply, outputs

    def send(self, msg_type: str, content: dict, buffers: list[bytes] = (), metadata: dict | None = None) -> list[dict]:
        """Send a comm message; return the IOPub messages it caused, up to its ``status: idle``."""
        msg = self.kc.session.msg(msg_type, content, metadata=metadata or {})
        self.kc.session.send(self.kc.shell_channel.socket, msg, buffers=list(buffers))
        self.requests.add(msg["header"]["msg_id"])
        return self.until_idle(msg["header"]["msg_id"])

    def until_idle(self, msg_id: str, timeout: float = 60) -> list[dict]:
        caused, deadline = [], time.monotonic() + timeout
        while True:
            msg = self.kc.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
            self.take(msg)
            if msg["parent_header"].get("msg_id") != msg_id:
                self.elsewhere.append(msg)
            elif msg["header"]["msg_type"] == "status":
                if msg["content"]["execution_state"] == "idle":
                    return caused
            else:
                caused.append(msg)

    def update(self, comm_id: str, state: dict, buffers: dict[str, bytes] | None = None) -> list[dict]:
        """A user's change, as the widget manager sends it: binary values as buffers."""
        buffers = buffers or {}
        return self.send("comm_msg", {"comm_id": comm_id, "data": {
            "method": "update", "state": state, "buffer_paths": [[key] for key in buffers]}}, list(buffers.values()))

    def find(self, model: str, **match: Any) -> str:
        [comm_id] = [cid for cid, state in self.models.items() if state.get("_model_name") == model
                     and all(state.get(k) == v for k, v in match.items())]
        return comm_id


def comm_msgs(msgs: list[dict], comm_id: str, method: str) -> list[dict]:
    return [m for m in msgs if m["header"]["msg_type"] == "comm_msg" and m["content"]["comm_id"] == comm_id
            and m["content"]["data"].get("method") == method]


def result(outputs: list[dict]) -> dict:
    return next(m["content"]["data"] for m in outputs if m["header"]["msg_type"] == "execute_result")


def e2b_widget_notes(frontend: WidgetFrontend, code: str) -> list[str]:
    """Run ``code`` (which shows an ``IntSlider(value=3)``) twice on e2b, where widgets cannot
    work: each time the cell succeeds and shows only the slider's text; returns each run's
    stderr (the one-line note, then nothing)."""
    notes = []
    for _ in range(2):
        reply, outputs = frontend.execute(code)
        assert reply["status"] == "ok"
        assert result(outputs) == {"text/plain": "IntSlider(value=3)"}  # no view of a model that cannot come
        notes.append(stdout(outputs, "stderr"))
    return notes


INTERACT = "from ipywidgets import interact\ndef double(x):\n    print('double:', 2 * x)\nshown = interact(double, x=3)"
"""A cell that shows ``interact`` on a slider ``x``, printing ``double: 2x`` into its Output widget."""


def check_interact(frontend: WidgetFrontend, code: str) -> list[dict]:
    """Run ``code`` (:data:`INTERACT`, maybe behind a magic line), move the slider to 5, and
    check that each time the Output widget captured what the request caused (its ``msg_id`` is
    the request's: the cell's, then the frontend's update). Returns the update's messages."""
    _, outputs = frontend.execute(code)
    request = outputs[0]["parent_header"]["msg_id"]
    slider, out = frontend.find("IntSliderModel", description="x"), frontend.find("OutputModel")
    assert [m["content"]["data"]["state"]["msg_id"] for m in comm_msgs(outputs, out, "update")] == [request, ""]
    assert stdout(outputs) == "double: 6\n"
    caused = frontend.update(slider, {"value": 5})
    event = caused[0]["parent_header"]["msg_id"]
    assert [m["content"]["data"]["state"]["msg_id"] for m in comm_msgs(caused, out, "update")] == [event, ""]
    assert stdout(caused) == "double: 10\n"
    return caused
