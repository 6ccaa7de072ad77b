"""The kernel application: ipykernel's ``IPKernelApp`` serving a :class:`SandboxKernel`.

Its name makes it read ``sandbox_kernel_config.py`` (or ``.json``) from the Jupyter config
path (``jupyter --paths``), so options can live in a config file as well as on the argv.
"""

from __future__ import annotations

import signal

import zmq
from ipykernel.kernelapp import IPKernelApp
from jupyter_core.paths import jupyter_config_path
from traitlets import DottedObjectName, List, Type, Unicode, default

from ...runtime.traits import without_hub_variables
from .kernel import SandboxKernel

CONTROL_JOIN_S = 5.0
"""Seconds :meth:`SandboxKernelApp.start` waits, once the shell has stopped, for the control
thread's last handler."""


class SandboxKernelApp(IPKernelApp):
    name = "sandbox-kernel"
    kernel_class = Type(SandboxKernel, klass="ipykernel.kernelbase.Kernel").tag(config=True)
    config_file_paths = List(Unicode())
    outstream_class = DottedObjectName("sandbox_kernel.runtime.outstream.PromptFlushOutStream",
                                       help="The class of sys.stdout and sys.stderr: ipykernel's, whose flush does not "
                                            "wait for the IOPub thread when it has nothing to send (the wrapper "
                                            "flushes four times a cell and seldom writes).").tag(config=True)

    def start(self) -> None:
        """Serve until the shell's loop stops, then let the control thread finish the message
        it is handling while the IOPub thread still runs (at exit, ipykernel's atexit handlers
        stop the IOPub thread before closing the app). After a ``shutdown_request`` the control
        thread still flushes stdout and publishes ``status: idle``; once the IOPub thread was
        gone, that flush waited out ipykernel's 10 s flush timeout, so about half of this
        kernel's shutdowns took 10 s (jupyter_client's default then SIGTERMs it after 2.5 s)."""
        super().start()
        if self.control_thread is not None and self.control_thread.is_alive():
            self.control_thread.stop()  # runs after the handler in progress, as after shutdown_request
            self.control_thread.join(CONTROL_JOIN_S)

    def init_signal(self) -> None:
        """ipykernel's (SIGINT ignored), and SIGTERM ends the sandbox before this process ends
        (:meth:`SandboxKernel.end_on_sigterm`). Python's default ended the process at once:
        jupyter_client sends SIGTERM to a kernel still busy 2.5 s after its ``shutdown_request``
        (half its ``shutdown_wait_time``), and a Jupyter server stopped with 9 sandbox-docker
        kernels left every sandbox's volume and host directory, and one container."""
        super().init_signal()
        signal.signal(signal.SIGTERM, lambda signum, frame: self.kernel.end_on_sigterm())

    def init_iopub(self, context: zmq.Context) -> None:
        """ipykernel's IOPub socket, with no high-water mark. libzmq's default (1000 messages)
        drops, silently, what a frontend busy for a moment has not read yet, the cell's
        ``status: idle`` included (measured: 6992 of 20000 displays, and the cell never ended
        for a client that read after 15 s; a plain ipykernel loses them too). What waits here
        is what the output budget let through (``max_output_bytes`` per cell and between
        cells), so it stays bounded unless the budget is off. The sandbox's own ipykernel gets
        the same from :data:`~sandbox_kernel.backends.kernel_client.launcher.IOPUB_APP` (source
        that runs without this package)."""
        context.setsockopt(zmq.SNDHWM, 0)
        try:
            super().init_iopub(context)
        finally:
            context.sockopts.pop(zmq.SNDHWM, None)

    @default("config_file_paths")
    def _config_file_paths_default(self) -> list[str]:
        # IPython's apps search only the IPython profile; look where Jupyter apps look too.
        return list(jupyter_config_path())


def launch(argv: list[str] | None = None) -> None:
    """Start the kernel with ``argv`` (``-f CONNECTION_FILE`` and traitlets options), without
    JupyterHub's variables in its environment (the single-user server's API token among them):
    nothing the kernel starts can pass them on."""
    without_hub_variables()
    SandboxKernelApp.launch_instance(argv=argv)
