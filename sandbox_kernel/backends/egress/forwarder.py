"""What the sandbox's kernel runs first (the start of :data:`..docker.spec.LAUNCHER`): pip's writable
site-packages, and the egress forwarder.

- ``PIP_PREFIX`` set (always, :func:`~sandbox_kernel.backends.egress.options.packages_environment`):
  the root filesystem is read-only, so ``pip install`` (and ``%pip install``) installs under that
  prefix in ``/tmp``. Its ``site-packages`` is made before the first import looks at ``sys.path``
  (Python caches a folder that did not exist as "nothing here", measured: the import failed until
  ``importlib.invalidate_caches()``), put first on ``sys.path`` and in ``PYTHONPATH`` for the
  kernel's subprocesses (``!python``), so a package installed in a cell imports in the next.
- ``SANDBOX_KERNEL_EGRESS`` (``"PORT SOCKET"``, with ``allow_hosts``): a thread of the kernel's
  process accepts connections on ``127.0.0.1:PORT`` and pipes each to the proxy's unix socket,
  the sandbox's one way out (its network is ``none``). The proxy starts once the kernel is ready
  (beside it when there are ``host_secrets``) and the session does not wait for it: a connection made before it listens waits for it (30 s at most). A thread, not a process: it survives the
  fork-bomb reaper (which spares the kernel), a restart starts it again, and it holds no pid.
"""

PIPE = r"""
async def _pipe(reader, writer):
    # copies one direction of a connection until it ends, then closes the other side's writer
    try:
        while True:
            data = await reader.read(262144)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.close()
"""
"""Python source of ``_pipe(reader, writer)``, used by the sandbox's forwarder (:data:`PRELUDE`) and
by the proxy's own socket (:mod:`.proxy`, which gets it as the module ``egress_pipe``)."""

PRELUDE = PIPE + r"""
import os
import sys


def _sandbox_packages():
    prefix = os.environ.get("PIP_PREFIX")
    if not prefix:
        return
    site = "%s/lib/python%d.%d/site-packages" % (prefix, sys.version_info[0], sys.version_info[1])
    try:
        os.makedirs(site, exist_ok=True)
    except OSError:
        return
    sys.path.insert(0, site)
    os.environ["PYTHONPATH"] = os.pathsep.join([site] + [p for p in [os.environ.get("PYTHONPATH")] if p])


def _egress_forwarder():
    spec = os.environ.get("SANDBOX_KERNEL_EGRESS")
    if not spec:
        return
    port, path = spec.split(" ", 1)
    import asyncio
    import threading

    async def handle(reader, writer):
        for _ in range(1500):  # 30 s: the proxy may not listen yet (it starts after the kernel)
            try:
                upstream_reader, upstream_writer = await asyncio.open_unix_connection(path)
                break
            except OSError:
                await asyncio.sleep(0.02)
        else:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))

    async def serve():
        server = await asyncio.start_server(handle, "127.0.0.1", int(port))
        await server.serve_forever()

    threading.Thread(target=lambda: asyncio.run(serve()), name="sandbox-kernel-egress", daemon=True).start()


_sandbox_packages()
_egress_forwarder()
del _sandbox_packages, _egress_forwarder
"""
"""Python source, run by the kernel's process before anything else (see the module docstring)."""
