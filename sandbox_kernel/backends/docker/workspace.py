"""The persistent workspace (``workdir_volume``): a named Docker volume at the kernel's working
directory instead of the per-session tmpfs, kept when sandboxes stop, so files survive restarts
and new kernels that name the same volume. Engine calls; blocking (run them in a thread).

A workspace volume carries :data:`WORKSPACE_LABEL` and never the owner label, so leftover
removal (``sandbox-kernel gc``, a sandbox's start) never touches it: only ``sandbox-kernel gc
--volumes`` removes workspaces. Its size limit is the local driver's ``size`` option, which the
engine honours only where its volumes directory has project quota (XFS mounted with
``pquota``); elsewhere it refuses ("no quota support") and the volume is made without a limit.
"""

from __future__ import annotations

import re
import time
from typing import Any

from ...core.errors import Missing, Refused
from . import engine
from .boundary import engine_errors, load_docker
from .podman import workspace_size

WORKSPACE_LABEL = f"{engine.LABEL}.workspace"  # value: the volume's name
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]+")
"""The engine's rule for volume names."""


def ensure_volume(client: Any, name: str, size: int, podman: bool = False) -> tuple[bool, str | None]:
    """The workspace volume ``name``, created (labelled, ``size`` bytes at most where the engine
    can limit it; 0: no limit) unless it exists. ``podman``: the engine is Podman, whose local
    driver spells the limit differently (:func:`.podman.workspace_size`).

    Returns:
        ``(created, warning)``: whether it was made now, and why ``size`` is not applied, if so.

    Raises:
        SandboxError: the engine refused (mapped by :func:`.boundary.engine_errors`).
    """
    doing = f"use the workspace volume {name}"
    with engine_errors(doing):
        try:
            with engine_errors(doing):
                client.api.inspect_volume(name)
            return False, None
        except Missing:
            pass
        labels = {WORKSPACE_LABEL: name, engine.CREATED_LABEL: str(int(time.time()))}
        if size:
            try:
                with engine_errors(doing):
                    client.api.create_volume(name, driver="local", labels=labels,
                                             driver_opts=workspace_size(size) if podman else {"size": str(size)})
                return True, None
            except Refused as exc:
                if "quota" not in exc.explanation.lower():  # Podman: "... does not support Project Quota"
                    raise
        client.api.create_volume(name, driver="local", labels=labels)
    warning = (f"[the workspace volume {name} has no size limit: this Docker engine cannot limit a volume's size "
               "here (it needs its volumes directory on XFS with project quota)]") if size else None
    return True, warning


def give_to(client: Any, name: str, image: str, uid: int, gid: int) -> None:
    """Make the new volume ``name`` belong to the kernel's ``uid:gid`` (a new volume's root is
    root's, and the archive API does not change the owner of the directory it extracts into):
    a one-off container of ``image`` with only CAP_CHOWN and no network chowns it (≈ 0.3 s, once
    per workspace)."""
    code = f"import os; os.chown('/workspace', {uid}, {gid}); os.chmod('/workspace', 0o755)"
    docker = load_docker()
    with engine_errors(f"prepare the workspace volume {name} with {image}"):
        client.containers.run(image, ["-c", code], entrypoint=["python"], user="0:0", network_mode="none",
                              cap_drop=["ALL"], cap_add=["CHOWN", "FOWNER"], security_opt=["no-new-privileges"],
                              read_only=True, remove=True, labels={WORKSPACE_LABEL: name},
                              mounts=[docker.types.Mount("/workspace", name, type="volume")])


def workspaces(client: Any) -> list[dict[str, Any]]:
    """Every workspace volume: ``{"name", "created" (unix time), "in_use" (a container has it)}``."""
    with engine_errors("list workspace volumes"):
        volumes = client.api.volumes(filters={"label": WORKSPACE_LABEL}).get("Volumes") or []
        used = {m.get("Name") for c in client.api.containers(all=True) for m in c.get("Mounts") or []}
    return [{"name": v["Name"], "created": int((v.get("Labels") or {}).get(engine.CREATED_LABEL, 0)),
             "in_use": v["Name"] in used} for v in sorted(volumes, key=lambda v: v["Name"])]


def remove_workspaces(client: Any) -> tuple[list[str], list[str]]:
    """Remove every workspace volume no container uses. Returns ``(removed, in_use)`` names."""
    removed, in_use = [], []
    for volume in workspaces(client):
        if volume["in_use"]:
            in_use.append(volume["name"])
            continue
        try:
            with engine_errors(f"remove the workspace volume {volume['name']}"):
                client.api.remove_volume(volume["name"])
            removed.append(volume["name"])
        except Refused as exc:
            if exc.status_code != 409:  # 409: a container started meanwhile uses it
                raise
            in_use.append(volume["name"])
    return removed, in_use
