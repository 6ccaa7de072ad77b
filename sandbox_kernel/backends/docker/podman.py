"""Podman's Docker-compatible API (``podman system service``), as the docker backend uses it:
how to tell it from Docker's engine, and what it does differently.

Measured with Debian 12's podman 4.3.1, rootful, cgroup v1, runc (docs/docker.md, "Podman").
"""

from __future__ import annotations

from typing import Any

from .boundary import engine_errors

ENGINE_NAME = "Podman Engine"
"""The name of the engine's component in ``GET /version`` (Docker's is "Engine")."""


def is_podman(client: Any) -> bool:
    """True when ``client`` talks to Podman (``GET /version``). Blocking."""
    with engine_errors("ask the engine its version"):
        components = client.version().get("Components") or []
    return any(c.get("Name") == ENGINE_NAME for c in components)
