"""The ``%%sandbox`` IPython extension: run chosen cells of an ordinary Python kernel in a sandbox.

``%load_ext magics`` (or ``%load_ext sandbox_kernel``) registers ``%%sandbox`` and ``%sandbox``
(:class:`~sandbox_kernel.frontdoors.magics.magic.SandboxMagics`). The magic drives the same backend API and consumes the
same events as the wrapper kernel:

- :mod:`sandbox_kernel.frontdoors.magics.session`: named sessions and the one loop thread their coroutines run on;
- :mod:`sandbox_kernel.frontdoors.magics.run`: one cell, with outputs drained on the main thread, Ctrl-C and ``input()``;
- :mod:`sandbox_kernel.frontdoors.magics.display`: events shown with IPython's display machinery, errors as failures;
- :mod:`sandbox_kernel.frontdoors.magics.options`: the magic's line, and backend options as traits;
- :mod:`sandbox_kernel.frontdoors.magics.status`: ``%sandbox status`` / ``list`` data and its text/HTML views;
- :mod:`sandbox_kernel.frontdoors.magics.widgets`: the live ``%sandbox status`` panel and the start-up progress (ipywidgets).
"""

from __future__ import annotations

from .magic import SandboxMagics
from .session import registry

__all__ = ["SandboxMagics", "load_ipython_extension", "unload_ipython_extension"]


def load_ipython_extension(ipython) -> None:
    """Register ``%%sandbox`` and ``%sandbox`` with the IPython shell ``ipython``, and stop the
    sessions when the shell is told to exit (a kernel's ``shutdown_request`` sets
    ``exit_now``, before ipykernel signals its child processes)."""
    ipython.register_magics(SandboxMagics(shell=ipython))
    if "exit_now" in ipython.trait_names():
        ipython.observe(_on_exit_now, names="exit_now")
    _lossless_iopub(getattr(ipython, "kernel", None))


def _lossless_iopub(kernel) -> None:
    """Make the host kernel's IOPub (ipykernel 7's XPUB socket) wait for a slow frontend instead
    of dropping: ``XPUB_NODROP`` makes its IO thread's send block while a subscriber's queue is
    full (libzmq's default silently drops past 1000 queued messages, a burst's ``status: idle``
    included). Applies to the frontends already connected too, unlike a high-water mark, which
    libzmq fixes per connection. Set on the IOPub thread, which owns the socket; no-op outside
    ipykernel or for a plain PUB socket."""
    thread = getattr(kernel, "iopub_thread", None)
    socket = getattr(thread, "socket", None)
    if socket is None or not hasattr(thread, "schedule"):
        return

    def no_drop() -> None:
        import zmq

        if socket.getsockopt(zmq.TYPE) == zmq.XPUB:
            socket.setsockopt(zmq.XPUB_NODROP, 1)

    thread.schedule(no_drop)


def unload_ipython_extension(ipython) -> None:
    """``%unload_ext magics``: shut every sandbox session down (the magics stay registered
    until the shell exits, as IPython cannot unregister them)."""
    if "exit_now" in ipython.trait_names():
        ipython.unobserve(_on_exit_now, names="exit_now")
    registry.shutdown_all()


def _on_exit_now(change) -> None:
    if change["new"]:
        registry.shutdown_all()
