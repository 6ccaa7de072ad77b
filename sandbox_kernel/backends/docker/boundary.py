"""The docker backend's boundary with docker-py: the one module of the backend that imports
docker-py and catches its exceptions (and those of ``requests`` under it), mapping each to the
:class:`~sandbox_kernel.core.errors.SandboxError` tree with what to do about it.

Code that talks to the engine runs in :func:`engine_errors`; a caller that treats one answer
as normal catches the mapped error: :class:`Missing` (404: gone already, no such file or
image), :class:`Refused` (any other refusal; ``status_code`` says which). docker-py is imported
lazily (:func:`load_docker`): importing this module never needs it.
Engine API: https://docs.docker.com/engine/api/v1.41/
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterator
from typing import Any

from ...core.errors import BackendUnavailable, Missing, Refused, SandboxError, SandboxStartError

INSTALL_FIX = "pip install 'sandbox-kernel[docker]'"
ENGINE_FIX = ("start the Docker engine (`sudo systemctl start docker`, or `sudo dockerd &`), "
              "or point DOCKER_HOST at one")
PERMISSION_FIX = ("use an engine of your own: rootless Podman (`podman system service`, then "
                  "DOCKER_HOST=unix:///run/user/$UID/podman/podman.sock; on a shared machine ask its administrator, "
                  "docs/how-to/jupyterhub.md); do not join the 'docker' group for this: its members are root on the machine "
                  "(`docker run --user 0 -v /:/host` reads and changes every user's files)")
SSH_INSTALL_FIX = "pip install 'sandbox-kernel[docker]' (it brings paramiko), or pip install paramiko"
TLS_FIX = ("DOCKER_CERT_PATH must hold the engine's CA (ca.pem) and a client certificate it trusts (cert.pem, "
           "key.pem); `docker --tlsverify version` checks the same files")
SSH_FIX = ("make `ssh USER@HOST` work without a prompt: the engine host's key in ~/.ssh/known_hosts "
           "(`ssh-keyscan -p PORT HOST >> ~/.ssh/known_hosts`) and a key it accepts (~/.ssh/config IdentityFile)")


def load_docker() -> Any:
    """The ``docker`` module (docker-py).

    docker-py imports paramiko, for its ssh transport, as it is imported itself: 0.08-0.10 s on a
    quiet machine, more than the rest of docker-py, on the path of every docker sandbox's start
    (docs/explanation/benchmarks.md, "What a start costs"). So it is imported with paramiko held
    back, and its ssh transport is made to import paramiko when a client of an ``ssh://`` engine
    is made (:func:`_ssh_adapter`), whoever makes it.

    Raises:
        BackendUnavailable: docker-py is not installed (the fix is the pip command).
    """
    held_back = "docker" not in sys.modules and "paramiko" not in sys.modules
    if held_back:
        sys.modules["paramiko"] = None  # `import paramiko` raises ImportError: docker-py leaves ssh out
    try:
        import docker
        import docker.errors
    except ImportError as exc:
        raise BackendUnavailable("The docker backend needs the Python package 'docker' (docker-py), "
                                 "which is not installed.", fix=INSTALL_FIX) from exc
    finally:
        if held_back and sys.modules.get("paramiko", False) is None:
            del sys.modules["paramiko"]
    from docker.api import client as api_client

    if getattr(api_client, "SSHHTTPAdapter", None) is None:
        api_client.SSHHTTPAdapter = _ssh_adapter
    return docker


def _ssh_adapter(*args: Any, **kwargs: Any) -> Any:
    """docker-py's ``SSHHTTPAdapter(*args, **kwargs)``, imported (with paramiko) at the first
    client of an ``ssh://`` engine: :func:`load_docker` sets this where docker-py's ``APIClient``
    looks the adapter up. Without paramiko it raises NameError, as docker-py's own name does when
    paramiko is missing, so docker-py says "Install paramiko" (mapped to :data:`SSH_INSTALL_FIX`)."""
    try:
        from docker.transport.sshconn import SSHHTTPAdapter
    except ImportError:
        raise NameError("SSHHTTPAdapter") from None
    return SSHHTTPAdapter(*args, **kwargs)


def host() -> str:
    """The engine's address as the environment names it."""
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


@contextlib.contextmanager
def engine_errors(doing: str) -> Iterator[None]:
    """Map docker-py and transport errors raised in the block to the SandboxError tree; a
    SandboxError raised in the block (also by a nested ``engine_errors``) passes unchanged.

    Args:
        doing: what the block does, for the message ("create the sandbox container").

    Raises:
        Missing: no such image ("Could not DOING: ...") or other object ("The Docker engine
            refused to DOING: ...").
        Refused: the engine refused the request (a bad option, a conflict).
        SandboxStartError: a one-off container failed ("Could not DOING: its last stderr line").
        BackendUnavailable: no engine answers, no permission to use its socket, an ``ssh://``
            engine without paramiko (docker-py needs it for any ssh host), or ssh refused.
    """
    docker = load_docker()
    import requests.exceptions

    try:
        yield
    except SandboxError:
        raise
    except _ssh_errors() as exc:  # paramiko's (read now: imported in the block), not an OSError: host key unknown, key refused
        raise BackendUnavailable(f"Could not reach the Docker engine at {host()} over ssh: {exc}.", fix=SSH_FIX) from exc
    except docker.errors.APIError as exc:
        raise _refusal(docker, exc, doing) from exc
    except docker.errors.ContainerError as exc:
        stderr = (exc.stderr or b"").decode("utf-8", "replace").strip().splitlines()
        raise SandboxStartError(f"Could not {doing}: {stderr[-1] if stderr else exc}") from exc
    except (docker.errors.DockerException, requests.exceptions.RequestException, OSError) as exc:
        if host().startswith("ssh://") and not _has_paramiko():
            raise BackendUnavailable(f"The Docker engine at {host()} is reached over ssh, which docker-py does with "
                                     "the Python package 'paramiko'; it is not installed.", fix=SSH_INSTALL_FIX) from exc
        if reason := _tls_failure(exc):
            raise BackendUnavailable(f"The TLS handshake with the Docker engine at {host()} failed: {reason}.",
                                     fix=TLS_FIX) from exc
        if isinstance(exc, PermissionError) or "Permission denied" in str(exc):
            raise BackendUnavailable(f"No permission to use the Docker engine's socket ({host()}).",
                                     fix=PERMISSION_FIX) from exc
        raise not_answering() from exc


USER_ENGINE = re.compile(r"unix:///run/user/(\d+)/podman/podman\.sock")
"""DOCKER_HOST of a user's own engine: rootless Podman's socket in the user's runtime folder
(what ``sandbox-kernel user-engine start`` and the JupyterHub recipe give each user)."""


def not_answering() -> BackendUnavailable:
    """The error for an engine that does not answer at :func:`host`. The machine's engine is
    started with root's rights; a user's own rootless Podman (:data:`USER_ENGINE`) by whoever runs
    it: the administrator, on a hub (the user has no sudo, and must not use the machine's engine)."""
    address = host()
    match = USER_ENGINE.fullmatch(address)
    if match is None:
        return BackendUnavailable(f"The Docker engine is not answering at {address}.", fix=ENGINE_FIX)
    uid = int(match.group(1))
    try:
        import pwd

        name = pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        name = str(uid)
    whose = "Your own engine" if uid == os.getuid() else f"The engine of the user {name}"
    return BackendUnavailable(
        f"{whose} (rootless Podman, at {address}) is not answering.",
        fix=f"this engine is not the machine's Docker engine: on a shared machine (JupyterHub) the administrator "
            f"starts it (`sandbox-kernel user-engine start {name}`, docs/how-to/jupyterhub.md); on your own machine, "
            f"`podman system service --time=0 {address} &`")


def _tls_failure(exc: BaseException) -> str | None:
    """OpenSSL's reason when ``exc`` (docker-py wraps the version probe's error in its own) is a
    failed TLS handshake, e.g. "certificate verify failed: self-signed certificate in certificate
    chain" or "sslv3 alert bad certificate" (the engine refused our client certificate)."""
    if match := re.search(r"\[SSL: [A-Z0-9_]+\] ([^(')\]]+)", str(exc)):
        return match.group(1).strip()
    return None


def _has_paramiko() -> bool:
    try:
        import paramiko  # noqa: F401 - docker-py's transport for ssh:// hosts
    except ImportError:
        return False
    return True


def _ssh_errors() -> tuple[type[BaseException], ...]:
    """paramiko's root exception once it is loaded (by docker-py's ssh adapter, for an ssh://
    host: :func:`_ssh_adapter`), else none."""
    paramiko = sys.modules.get("paramiko")
    return (paramiko.SSHException,) if paramiko is not None else ()


def _refusal(docker: Any, exc: Any, doing: str) -> Refused:
    explanation = str(exc.explanation or exc)
    if isinstance(exc, docker.errors.ImageNotFound):
        return Missing(f"Could not {doing}: {exc.explanation}.", exc.status_code, explanation)
    kind = Missing if isinstance(exc, docker.errors.NotFound) else Refused
    return kind(f"The Docker engine refused to {doing}: {explanation}.", exc.status_code, explanation)


def local_image(client: Any, name: str) -> dict[str, Any] | None:
    """The engine's inspection of the local image ``name`` (``GET /images/{name}/json``), or
    None when it is not present locally (never pulled). Blocking.

    Raises:
        SandboxError: the engine failed (mapped by :func:`engine_errors`).
    """
    try:
        with engine_errors(f"inspect the image {name}"):
            return client.api.inspect_image(name)
    except Missing:
        return None


def remove_image_if_unused(client: Any, image: str) -> bool:
    """Remove ``image`` (``DELETE /images/{id}``) unless the engine refuses: a container or
    another tag uses it, or a build running now. Blocking.

    Returns:
        True when it was removed.

    Raises:
        BackendUnavailable: the engine is not answering.
    """
    try:
        with engine_errors(f"remove the image {image}"):
            client.api.remove_image(image)
    except Refused:
        return False
    return True


def wait_exited(container: Any, timeout: float) -> dict[str, Any] | None:
    """The exit status of ``container`` (``POST /containers/{id}/wait``: ``{"StatusCode": N}``),
    or None when it has not exited within ``timeout`` seconds. Blocking.

    Raises:
        SandboxError: the engine failed (mapped by :func:`engine_errors`).
    """
    import requests.exceptions

    with engine_errors("wait for a container to exit"):
        try:
            return container.wait(timeout=timeout)
        except (requests.exceptions.Timeout, requests.exceptions.ConnectionError):
            # docker-py 7.2 raises ConnectionError on timeout here, not the documented ReadTimeout
            return None


def stats(container: Any) -> dict[str, Any]:
    """The engine's one-shot stats of ``container`` (``GET /containers/{id}/stats``: ``memory_stats``,
    ``pids_stats``, ...). Blocking.

    Raises:
        SandboxError: the container or the engine is gone (mapped by :func:`engine_errors`).
    """
    with engine_errors("read the sandbox's resource use"):
        return container.stats(stream=False, one_shot=True)


def memory_used(figures: dict[str, Any]) -> int | None:
    """Bytes of memory a container uses in its :func:`stats` ``figures``, as ``docker stats``
    counts it (usage less the inactive file cache); None when the engine gave no figure."""
    memory = figures.get("memory_stats") or {}
    if "usage" not in memory:
        return None
    return memory["usage"] - (memory.get("stats") or {}).get("inactive_file", 0)


def box_memory(figures: dict[str, Any]) -> dict[str, int]:
    """The container's memory as the machine it runs on, in bytes, with ``psutil.virtual_memory()``'s
    field names (what ipykernel's ``usage_reply`` gives as ``host_virtual_memory``), from its
    :func:`stats` ``figures``: ``total`` is its limit (the engine gives the host's memory when it
    has none), ``used`` as ``docker stats`` counts it, ``active`` and ``inactive`` from its memory
    cgroup's counters (the cgroup's ``memory.stat``, v1 and v2 alike); {} when the engine gave no figure."""
    memory, used = figures.get("memory_stats") or {}, memory_used(figures)
    if used is None or not memory.get("limit"):
        return {}
    counters, total = memory.get("stats") or {}, memory["limit"]
    return {"total": total, "available": max(0, total - used), "percent": round(100 * used / total, 1), "used": used,
            "free": max(0, total - memory["usage"]),
            "active": counters.get("active_anon", 0) + counters.get("active_file", 0),
            "inactive": counters.get("inactive_anon", 0) + counters.get("inactive_file", 0),
            "cached": counters.get("cache", counters.get("file", 0))}


def image_identity(client: Any, name: str) -> str:
    """The local image ``name``'s id (``GET /images/{name}/json``), "" when it is missing. Blocking.

    Raises:
        SandboxError: the engine failed (mapped by :func:`engine_errors`).
    """
    return (local_image(client, name) or {}).get("Id", "")


def running_container(client: Any, container_id: str) -> Any:
    """The container ``container_id`` (docker-py's ``Container``) when it is running, else None
    (stopped, removed, or the engine refused). Blocking.

    Raises:
        BackendUnavailable: the engine is not answering.
    """
    try:
        with engine_errors("inspect a pooled sandbox"):
            container = client.containers.get(container_id)
    except (Missing, Refused):
        return None
    return container if container.status == "running" else None


def container_log(client: Any, container_id: str) -> tuple[str, str]:
    """The container's state (``running``, ``exited``, ...; ``removed`` when gone) and the last
    lines of its stderr (``GET /containers/{id}/logs``). Blocking.

    Raises:
        BackendUnavailable: the engine is not answering.
    """
    try:
        with engine_errors("read a sandbox's log"):
            state = client.api.inspect_container(container_id)["State"]["Status"]
            log = client.api.logs(container_id, stdout=False, stderr=True, tail=20)
    except (Missing, Refused):
        return "removed", ""
    return state, log.decode("utf-8", "replace")
