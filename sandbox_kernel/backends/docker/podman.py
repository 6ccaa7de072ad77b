"""Podman's Docker-compatible API (``podman system service``), as the docker backend uses it:
how to tell it from Docker's engine, the options it cannot honour, and what it does differently.

Measured with Debian 12's podman 4.3.1, rootful, cgroup v1, runc (docs/explanation/docker-backend.md, "Podman"):
- ``HostConfig.Runtime`` and ``DeviceRequests`` are accepted and ignored: a container asked to
  run under ``runsc`` (or a runtime that does not exist) ran under runc, one asking for GPUs
  started without any. Silently weaker isolation is worse than none, so they are refused.
- Out-of-memory kills are not reported (``State.OOMKilled`` stays false, no ``oom`` event):
  the container just exits with 137.
- ``kill`` events carry no ``signal`` attribute, and the events endpoint answers nothing when
  ``until`` is not in the future.
- The local volume driver takes ``size`` in ``o`` as a project quota, also for tmpfs (fixed in
  podman 4.8, containers/podman#20449): :func:`.spec.volume_options` gives tmpfs ``nr_blocks``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from ...core.errors import ConfigError
from .boundary import engine_errors, load_docker

LIBPOD_HEADER = "Libpod-Api-Version"
"""The header Podman adds to its answer to ``GET /_ping`` (its API reference, SystemPing)."""
ENGINE_NAME = "Podman Engine"
"""The name of the engine's component in ``GET /version`` (Docker's is "Engine")."""

IGNORED = {"runtime": "an OCI runtime", "gpus": "GPUs"}
"""Options of the docker backend that Podman's Docker-compatible API accepts and ignores."""

WAIT_INTERVAL = "250ms"
"""How often Podman's own wait endpoint checks the container's state (:func:`wait`)."""

EVENTS_WAIT_S = 0.2
"""How far in the future ``until`` is set when reading Podman's events (it must not be past)."""


def is_podman(client: Any) -> bool:
    """True when ``client`` talks to Podman: its ping's headers carry ``Libpod-Api-Version``
    (``client.api.ping_headers``: :func:`.engine.connect`); for a client made otherwise, ``GET /version`` lists the
    component "Podman Engine". Blocking.

    Raises:
        BackendUnavailable: the engine stopped answering (only where ``/version`` is asked).
    """
    headers = getattr(client.api, "ping_headers", None)
    if headers is not None:
        return LIBPOD_HEADER in headers
    with engine_errors("ask the engine its version"):
        components = client.version().get("Components") or []
    return any(c.get("Name") == ENGINE_NAME for c in components)


def libpod_version(client: Any) -> str | None:
    """Podman's own API version (``4.3.1``) from the ping's headers of :func:`.engine.connect`'s
    client, or None: Docker's engine, or a client made otherwise."""
    headers = getattr(client.api, "ping_headers", None)
    return None if headers is None else headers.get(LIBPOD_HEADER)


def wait(client: Any, container_id: str, version: str, timeout: float) -> None:
    """Block until the container stops, with Podman's own wait endpoint
    (``POST /v{version}/libpod/containers/{id}/wait``, conditions ``stopped`` and ``exited``,
    checked every :data:`WAIT_INTERVAL`), at most ``timeout`` seconds.

    Not the Docker-compatible ``POST /containers/{id}/wait``: Podman before 4.5 answers it by
    checking the container's state with no pause between checks (containers/podman#18150), so
    the service held a core (92 % measured here, Podman 4.3.1) for as long as the container ran:
    one core per open sandbox, on a hub user's own engine too. Its own endpoint waits with an
    interval: 0 % measured, and a stop is seen within about 0.3 s.

    Raises:
        docker.errors.NotFound: the container is gone. docker.errors.APIError: another refusal.
        requests.exceptions.RequestException: the engine did not answer within ``timeout``.
    """
    import requests

    api = client.api
    url = f"{api.base_url}/v{version}/libpod/containers/{quote(container_id, safe='')}/wait"
    response = api.post(url, params=[("condition", "stopped"), ("condition", "exited"), ("interval", WAIT_INTERVAL)],
                        timeout=timeout)
    try:
        response.raise_for_status()
    except requests.exceptions.HTTPError as exc:  # as docker-py maps its own answers (docker.errors)
        raise load_docker().errors.create_api_error_from_http_exception(exc) from exc


def refuse_ignored(backend: Any) -> None:
    """Refuse, in one message, every option of ``backend`` that Podman would ignore.

    Raises:
        ConfigError: ``runtime`` or ``gpus`` is set.
    """
    if given := [name for name in IGNORED if getattr(backend, name)]:
        options = " and ".join(f"{name}={getattr(backend, name)!r}" for name in given)
        what = " or ".join(IGNORED[name] for name in given)
        raise ConfigError(f"The docker backend cannot use {options} on Podman: Podman's Docker-compatible API "
                          f"accepts {'them' if len(given) > 1 else 'it'} and runs the sandbox without {what}. "
                          f"Fix: leave {' and '.join(given)} empty, or point DOCKER_HOST at a Docker engine.")


def workspace_size(size: int) -> dict[str, str]:
    """``driver_opts`` of a workspace volume limited to ``size`` bytes: Podman's ``size`` in
    ``o`` (a project quota where its volumes directory has one; refused elsewhere, with
    "Project Quota" in the message). Docker's plain ``size`` option makes Podman's mount fail."""
    return {"o": f"size={size}"}


START_FAILURES = {
    "container-init binary not found": "Podman has no init binary where it looks for one (init=True). Fix: install "
                                       "catatonit and set init_path = \"/usr/bin/catatonit\" under [containers] in "
                                       "containers.conf (Debian's package installs it there, not where podman 4.3 "
                                       "looks), or --DockerBackend.init=False.",
    "error setting rlimit": "runc could not set the open-file and process limits Podman gives every container "
                            "(about a million; it lacks CAP_SYS_RESOURCE, as in a container or a VM sandbox). "
                            "Fix: set default_ulimits = [\"nofile=N:N\", \"nproc=N:N\"] under [containers] in "
                            "containers.conf, with N no higher than podman's own limits (/proc/PID/limits).",
}
"""Podman's messages for a container that could not start, by a part of them, with the fix."""


def start_failure(explanation: str) -> str | None:
    """The reason and fix for a container Podman could not start, when it is a known one."""
    return next((fix for part, fix in START_FAILURES.items() if part in explanation), None)
