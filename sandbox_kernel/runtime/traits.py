"""Traits shared by backends' options."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Any

from traitlets import Integer, List, TraitError, Unicode

_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)


def parse_bytes(value: Any) -> int:
    """Bytes from an int or a size such as ``"512m"``, ``"1g"``, ``"1GiB"``, ``"300MB"``
    (binary units: k = 1024). Raises ValueError for anything else."""
    if isinstance(value, bool):
        raise ValueError(f"not a size: {value!r}")
    if isinstance(value, int):
        return value
    match = _SIZE.match(str(value))
    if not match:
        raise ValueError(f"not a size: {value!r} (use bytes or a number with k, m, g, e.g. '512m')")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def format_bytes(n: int) -> str:
    """``1073741824`` → ``"1 GiB"``; ``536870912`` → ``"512 MiB"``."""
    for unit, size in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} bytes"


class ByteSize(Integer):
    """A size in bytes, also settable as ``"512m"``/``"1g"`` from the command line or config.
    0 means no limit."""

    info_text = "a size in bytes, or a number with a unit such as '512m' or '1g'"

    def validate(self, obj: Any, value: Any) -> int:
        try:
            value = parse_bytes(value)
        except ValueError as exc:
            raise TraitError(f"{self.name}: {exc}") from None
        if value < 0:
            raise TraitError(f"{self.name}: a size cannot be negative ({value})")
        return value

    def from_string(self, s: str) -> int:
        return parse_bytes(s)

    def default_value_repr(self) -> str:
        """The default as one would write it (``'1g'``, ``'256m'``, ``0``): what ``--help-all``
        and the options reference show."""
        value = self.default_value
        if not isinstance(value, int) or isinstance(value, bool) or value == 0:
            return repr(value)
        for unit, size in (("t", 1024**4), ("g", 1024**3), ("m", 1024**2), ("k", 1024)):
            if value % size == 0:
                return repr(f"{value // size}{unit}")
        return repr(value)


HUB_VARIABLES = ("JUPYTERHUB_", "JPY_API_TOKEN")
"""Prefixes of what JupyterHub gives a single-user server (``JUPYTERHUB_API_TOKEN``, its OAuth
client, URLs; ``JPY_API_TOKEN`` is the token's old name): the user's hub credentials, which no
sandbox may hold. Source: jupyterhub/spawner.py, ``Spawner.get_env``."""


def is_hub_variable(name: str) -> bool:
    """True for a JupyterHub variable of :data:`HUB_VARIABLES`."""
    return name.upper().startswith(HUB_VARIABLES)


class HostVariables(List):
    """The ``env_vars`` option: names of host environment variables passed into a sandbox,
    never those of :data:`HUB_VARIABLES` (refused with the reason)."""

    def __init__(self, help: str) -> None:
        super().__init__(Unicode(), help=help)

    def validate(self, obj: Any, value: Any) -> list[str]:
        value = super().validate(obj, value)
        if refused := [name for name in value if is_hub_variable(name)]:
            raise TraitError(f"env_vars cannot name {', '.join(refused)}: JupyterHub's credentials and settings of "
                             "this server never enter a sandbox")
        return value


def host_variables(names: Iterable[str]) -> dict[str, str]:
    """``{name: value}`` of the host environment variables ``names`` that are set, never a
    JupyterHub variable (whatever the caller's list says)."""
    return {name: os.environ[name] for name in names if name in os.environ and not is_hub_variable(name)}


def without_hub_variables() -> None:
    """Remove JupyterHub's variables from this process's environment (the kernel does it at
    launch: nothing it starts, no backend, can then pass them on)."""
    for name in [name for name in os.environ if is_hub_variable(name)]:
        del os.environ[name]
