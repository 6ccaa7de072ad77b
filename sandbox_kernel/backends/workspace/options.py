"""The options every backend has for the host's files and environment: ``workspace``,
``workspace_dir``, ``workspace_max_bytes`` and ``env`` (traits declared on
:class:`~sandbox_kernel.backends.base.Backend`)."""

from __future__ import annotations

import os
import re
from typing import Any

from traitlets import CaselessStrEnum, Dict, TraitError, Unicode

from ...runtime.traits import ByteSize

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def workspace_trait() -> CaselessStrEnum:
    return CaselessStrEnum(
        ["off", "ro", "rw"], "off",
        help="Show a host folder (workspace_dir: the notebook's) as the sandbox's working directory: 'ro' read-only "
             "(what cells write stays in the sandbox, listed as artifacts), 'rw' read-write (bound: cells change "
             "your folder; copied: they change the copy), 'off'. Dotfiles, what .sandboxignore names, symlinks "
             "leaving the folder and sockets are left out. Off by default: see docs/explanation/security.md.").tag(config=True)


def workspace_dir_trait() -> Unicode:
    return Unicode(help="The folder the workspace shows; default: the folder this process started in (Jupyter "
                        "starts a kernel in its notebook's folder).").tag(config=True)


def workspace_dir_default() -> str:
    """The folder the front door's process runs in, resolved when the backend is made (a pool's
    filler, started elsewhere, is given it)."""
    return os.getcwd()


def workspace_max_bytes_trait() -> ByteSize:
    return ByteSize(256 * 1024**2, help="Largest workspace copied into a sandbox that cannot bind it (docker's api "
                                        "transport, e2b, gateway, local without bubblewrap), e.g. '1g'; past it "
                                        "the sandbox does not start and says so. 0: no limit.").tag(config=True)


class EnvDict(Dict):
    """``NAME=value`` pairs for the sandbox's environment; names checked."""

    def validate(self, obj: Any, value: Any) -> Any:
        value = super().validate(obj, value)
        for name in value:
            if not ENV_NAME.fullmatch(name):
                raise TraitError(f"env: {name!r} is not an environment variable name (letters, digits, _)")
        return value


def env_trait() -> EnvDict:
    return EnvDict(value_trait=Unicode(), help="Environment variables set in the sandbox, NAME=value (repeat "
                                               "--X.env=NAME=value for more). Unlike env_vars (host variables "
                                               "copied by name); values never appear in outputs, status or "
                                               "logs.").tag(config=True)
