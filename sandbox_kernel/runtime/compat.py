"""Every private attribute of another project that sandbox-kernel reads, calls or overrides, in
one list, with the upstream versions it was checked against.

A private name can change in any upstream release without notice. Listing them here says what
an upgrade can break and where; :func:`missing` (run by ``tests/test_compat.py``) says which of
them an installed version no longer has, naming the file that uses each. When you add a use of
a private upstream name, add it here; when an upgrade removes one, that test names it.
"""

from __future__ import annotations

import asyncio
import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Private:
    """One private upstream name the project depends on."""

    module: str
    """The module that defines it, e.g. ``"ipykernel.kernelbase"``."""
    owner: str
    """The class that has it, or ``""`` for a module attribute."""
    name: str
    """The attribute, e.g. ``"_parent_ident"``."""
    checked: str
    """The upstream distribution and the versions it was checked against."""
    used_in: str
    """Where and why the project uses it."""

    @property
    def qualname(self) -> str:
        return ".".join(part for part in (self.module, self.owner, self.name) if part)


# One line each: module | class ("" for a module attribute) | name | versions checked | where and why.
_TABLE = """
ipykernel.kernelbase | Kernel | _parent_ident | ipykernel 6.29, 7.4 | frontdoors/kernel/kernel.py do_execute: the routing identity an input_request is sent to
ipykernel.kernelbase | Kernel | _supports_kernel_subshells | ipykernel 7.4 (6.29 has no subshells: read with a default) | frontdoors/kernel/kernel.py kernel_info: whether the reply lists kernel subshells
ipykernel._version |  | kernel_protocol_version | ipykernel 6.29, 7.4 | frontdoors/kernel/kernel.py kernel_info: the reply's protocol_version
ipykernel.kernelbase | Kernel | _topic | ipykernel 6.29, 7.4 | frontdoors/kernel/kernel.py _publish: the IOPub topic of each published message
ipykernel.kernelbase | Kernel | _publish_status | ipykernel 7.4 (called only where 7.4 dispatches beside) | frontdoors/kernel/kernel.py _relay_in_turn and _relay_at_once: the busy and idle of a relayed comm message, as ipykernel publishes its own
ipykernel.kernelbase | Kernel | _main_asyncio_lock | ipykernel 7.4 (6.29 dispatches nothing beside: never read there) | frontdoors/kernel/kernel.py _forward_comm: a comm message dispatched beside another request is answered in its turn, as python3 answers it
ipykernel.kernelbase | Kernel | _execute_sleep | ipykernel 6.29, 7.4 | frontdoors/kernel/kernel.py (class attribute) and kernel_client KERNEL_ARGS: no 0.5 ms sleep per reply
ipykernel.kernelbase | Kernel | _allow_stdin | ipykernel 6.29, 7.4 | frontdoors/magics/run.py host_allows_stdin: whether the host's frontend takes input() now
IPython.core.interactiveshell | InteractiveShell | _showtraceback | ipython 8, 9.18 | frontdoors/magics/display.py: the sandbox's traceback shown as the host cell's error
traitlets.config.configurable | Configurable | _load_config | traitlets 5.9, 5.16 | frontdoors/kernel/kernel.py SandboxKernel._load_config: a bad option value does not kill the kernel
jupyter_client.client | KernelClient | _create_connected_socket | jupyter_client 8.10 | backends/kernel_client/client.py SandboxKernelClient: socket options (reconnect interval, frame bound, stdin monitor) set before connect
jupyter_client.client | KernelClient | _make_url | jupyter_client 8.10 | backends/kernel_client/client.py SandboxKernelClient._create_connected_socket: the address of a channel
jupyter_client.client | KernelClient | _iopub_channel | jupyter_client 8.10 | backends/kernel_client/client.py SandboxKernelClient.start_channels: the IOPub channel made, to give it the byte counter
jupyter_client.client | KernelClient | _stdin_channel | jupyter_client 8.10 | backends/kernel_client/client.py SandboxKernelClient._close_monitor: the stdin socket whose monitor is closed
jupyter_client.channels | AsyncZMQSocketChannel | _recv | jupyter_client 8.10 | backends/kernel_client/client.py IOPubChannel: counts each message's bytes as it is read
jupyter_client.asynchronous.client | AsyncKernelClient | _async_is_alive | jupyter_client 8.10 | backends/gateway/ws.py GatewayKernelClient: alive while its websocket is open
e2b_code_interpreter.code_interpreter_async | AsyncSandbox | _client | e2b-code-interpreter 2.11, e2b 2.63 | backends/e2b/stream.py sandbox_class: code-interpreter requests through a bounded transport
e2b.api.client_async |  | get_transport | e2b 2.63 | backends/e2b/stream.py sandbox_class: the SDK's own transport under the bounded one
tornado.websocket | WebSocketProtocol | close | tornado 6.4, 6.6 | backends/gateway/ws.py _on_local_close: wraps conn.protocol.close to learn close code 1009
threading |  | _register_atexit | CPython 3.10-3.13 | runtime/loop_thread.py: the loop thread stops before the interpreter's executors refuse work
mitmproxy.proxy.layers.http._http1 |  | make_error_response | mitmproxy 12.3.1 (in the egress proxy's image only: not importable here, so tests/test_egress.py checks it there) | backends/egress/heads.py own_bad_requests: the project's refusal for a request head mitmproxy cannot read
docker.api.client | APIClient | _retrieve_server_version | docker 7.2 | backends/docker/engine.py _client_class: the constructor's API version probe, overridden to ask GET /_ping (its Api-Version and Libpod-Api-Version headers), not GET /version
docker.api.client | APIClient | _url | docker 7.2 | backends/docker/engine.py _client_class: the unversioned /_ping address in that probe
docker.api.client | APIClient | _get | docker 7.2 | backends/docker/engine.py _client_class: that probe's request, with the client's timeout
docker.api.client | APIClient | _raise_for_status | docker 7.2 | backends/docker/engine.py _client_class: that probe's HTTP error as docker-py's own
docker.api.client |  | SSHHTTPAdapter | docker 7.2 (paramiko 5.1) | backends/docker/boundary.py load_docker: docker-py imported with paramiko held back; the name APIClient reads for an ssh:// base_url is set to _ssh_adapter, which imports the real adapter then
signal | Signals | _value2member_map_ | CPython 3.10-3.13 | backends/docker/engine.py death_reason: a signal number's name, if it has one
"""

PRIVATE: tuple[Private, ...] = tuple(Private(*(cell.strip() for cell in row.split(" | ")))
                                     for row in _TABLE.strip().splitlines())
"""The private upstream names used, grouped by project."""


def _has(owner: object, name: str) -> bool:
    """Whether ``owner`` (a module or class) has ``name``, also as an instance attribute that a
    class only declares (``_parent_ident: Mapping[...]``)."""
    if hasattr(owner, name):
        return True
    return any(name in getattr(cls, "__annotations__", {}) for cls in getattr(owner, "__mro__", ()))


def missing() -> list[str]:
    """The entries of :data:`PRIVATE` that the installed packages no longer have, each as one
    line ("QUALNAME (checked: ...; used in ...)"). Entries of an optional package that is not
    installed (docker-py, the E2B SDK) are not checked."""
    gone = []
    for entry in PRIVATE:
        try:
            owner = importlib.import_module(entry.module)
        except ImportError:
            continue
        if entry.owner:
            owner = getattr(owner, entry.owner, None)
        if owner is None or not _has(owner, entry.name):
            gone.append(f"{entry.qualname} (checked: {entry.checked}; used in {entry.used_in})")
    return gone


def parent_ident(kernel: object, channel: str = "shell") -> object:
    """The routing identity of the request ``kernel`` (an ipykernel ``Kernel``) is serving on
    ``channel``: where an ``input_request`` for it must go (``Kernel._parent_ident``)."""
    return kernel._parent_ident[channel]


def iopub_topic(kernel: object, msg_type: str) -> bytes:
    """The IOPub topic ``kernel`` (an ipykernel ``Kernel``) gives a ``msg_type`` message
    (``Kernel._topic``)."""
    return kernel._topic(msg_type)


def publish_status(kernel: object, state: str, parent: dict) -> None:
    """Publish ``status`` ``state`` (busy, idle) on IOPub for the shell request ``parent``, as
    ``kernel`` (an ipykernel ``Kernel``) publishes its own (``Kernel._publish_status``)."""
    kernel._publish_status(state, "shell", parent)


def main_shell_lock(kernel: object) -> asyncio.Lock:
    """The lock ``kernel`` (an ipykernel 7 ``Kernel``) holds on its main shell while it serves a
    request there: the next request waits for it, but a comm message arriving meanwhile is
    dispatched beside that request (``Kernel._main_asyncio_lock``, ``Kernel.shell_main``)."""
    return kernel._main_asyncio_lock


def supports_subshells(kernel: object) -> bool:
    """Whether ``kernel`` (an ipykernel ``Kernel``) serves JEP 91 kernel subshells
    (``Kernel._supports_kernel_subshells``; ipykernel 6 has none)."""
    return bool(getattr(kernel, "_supports_kernel_subshells", False))
