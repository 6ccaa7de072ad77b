"""The egress proxy's program as the host sends it to the proxy's container, which holds nothing of
this project: the command it runs (:data:`BOOTSTRAP`), then on its stdin the modules' sources
(:func:`sources`: :mod:`.rules`, the pipe of :mod:`.forwarder`, :mod:`.proxy`) and its
configuration. Which container and engine run it is the backend's (the docker backend's
:mod:`~sandbox_kernel.backends.docker.proxy`)."""

from __future__ import annotations

from importlib import resources

from .forwarder import PIPE

BOOTSTRAP = r"""
import json, os, sys, types
def read(n):
    data = b""
    while len(data) < n:
        chunk = os.read(0, n - len(data))
        if not chunk:
            sys.exit(0)
        data += chunk
    return data
payload = json.loads(read(int(read(12))))
for name, source in payload["modules"]:
    module = sys.modules[name] = types.ModuleType(name)
    exec(compile(source, name + ".py", "exec"), module.__dict__)
import asyncio
asyncio.run(sys.modules["egress_proxy"].main(payload["config"]))
"""
"""The proxy container's command (``python -c``): reads a 12-digit length and that many bytes of
JSON from stdin (the modules' sources and the configuration), then runs the proxy."""


def sources() -> list[tuple[str, str]]:
    """``[(module name, source)]`` the proxy's container loads, in order."""
    rules = resources.files(__package__).joinpath("rules.py").read_text()
    heads = resources.files(__package__).joinpath("heads.py").read_text()
    proxy = resources.files(__package__).joinpath("proxy.py").read_text()
    return [("egress_rules", rules), ("egress_pipe", PIPE), ("egress_heads", heads), ("egress_proxy", proxy)]
