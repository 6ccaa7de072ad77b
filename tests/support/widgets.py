"""The comm side of JupyterLab's widget manager, for tests that drive ipywidgets through a kernel.

:class:`WidgetFrontend` sends and reads comm messages as JupyterLab's widget manager
(jupyterlab_widgets 3, ipywidgets 8) does: widget models by comm_id from ``comm_open`` and
``comm_msg`` ``update``/``echo_update`` with binary buffers put back at their ``buffer_paths``;
user changes as ``comm_msg`` ``update`` (binary values as buffers), clicks as ``custom`` messages.
"""

from __future__ import annotations

import time
from typing import Any

from tests.kernels import run

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
