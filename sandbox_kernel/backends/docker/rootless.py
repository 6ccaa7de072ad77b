"""Engines that run as a user, not root: rootless Podman (``podman system service`` started by the
user) and rootless Docker. On a shared machine such as a JupyterHub they are how a user gets
containers without root-equivalent access (docs/how-to/jupyterhub.md). What they change for the backend:

- The user's uid is root in the engine's user namespace and the container's uids are the user's
  subordinate ones, so a container's kernel cannot use a host folder of the user: the ``ipc``
  transport fails ("python: can't open file '/kernel/launch.py': [Errno 13] Permission denied",
  measured with Podman 4.3.1). ``transport="auto"`` takes ``api`` on such an engine.
- On cgroup v1, a rootless engine cannot limit a container: Podman accepts ``Memory``,
  ``PidsLimit`` and ``NanoCpus``, answers no warning through its API, and runs the container
  without them (``podman run`` prints "Resource limits are not supported and ignored on cgroups
  V1 rootless systems"; its ``/info`` still says ``MemoryLimit: true``). Measured: 600 MB
  allocated under memory_limit=256m, 100 processes under pids_limit=64. The backend reads the
  created container back and refuses to run it with limits the engine dropped
  (:func:`dropped_limits`); a hub bounds all of a user's sandboxes together instead, with a cgroup
  of the user's engine (:mod:`.user_engine`), and sets the per-sandbox limits to 0.
"""

from __future__ import annotations

from typing import Any

from ...runtime.traits import format_bytes


def is_rootless(info: dict[str, Any]) -> bool:
    """True when the engine runs as a user: Podman's ``/info`` (``info``: :func:`.engine.engine_info`)
    says ``Rootless``, Docker's lists ``name=rootless`` in ``SecurityOptions``."""
    return bool(info.get("Rootless")) or any("name=rootless" in option for option in info.get("SecurityOptions") or [])


ASKED = (("memory_limit", "Memory", format_bytes), ("pids_limit", "PidsLimit", str),
         ("cpus", "NanoCpus", lambda nano: f"{nano / 1e9:g}"))
"""Each limit: the backend's option, the field of the container's ``HostConfig``, how to show it."""


def dropped_limits(backend: Any, host_config: dict[str, Any]) -> list[str]:
    """The limits ``backend`` asked for that the created container does not have, as
    ``"memory_limit=1 GiB"`` ...; ``host_config`` is the engine's ``HostConfig`` of the container
    (``GET /containers/{id}/json``)."""
    asked = {"memory_limit": backend.memory_limit, "pids_limit": backend.pids_limit,
             "cpus": int(backend.cpus * 1e9)}
    return [f"{option}={show(asked[option])}" for option, field, show in ASKED
            if asked[option] > 0 and not host_config.get(field)]


def dropped_message(dropped: list[str], host: str, rootless: bool) -> str:
    """The refusal of a container whose engine dropped the ``dropped`` limits."""
    why = ("rootless engines cannot limit a container on cgroup v1 (Podman: \"Resource limits are not supported "
           "and ignored on cgroups V1 rootless systems\")" if rootless else "the engine cannot apply them")
    return (f"The sandbox did not start: the engine at {host} accepted {', '.join(dropped)} and would have run the "
            f"sandbox without {'them' if len(dropped) > 1 else 'it'}: {why}. Fix: run the engine under cgroup v2 "
            "with systemd's delegation; or, where the administrator bounds each user's engine with a cgroup of its "
            "own (docs/how-to/jupyterhub.md), set --DockerBackend.memory_limit=0 --DockerBackend.pids_limit=0 "
            "--DockerBackend.cpus=0 to run without per-sandbox limits.")
