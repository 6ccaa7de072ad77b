"""``-i``/``-o`` and ``%sandbox push``/``pull``: variables between the host's namespace and a
session's sandbox, as data only (:mod:`sandbox_kernel.session.transfer`)."""

from __future__ import annotations

import sys
from typing import Any

from sandbox_kernel.core.errors import TransferError
from sandbox_kernel.session import transfer

from .run import wait
from .session import LoopThread, Session

SETTING = "SandboxMagics.max_transfer_bytes"


def push(loop: LoopThread, session: Session, names: list[str], namespace: dict[str, Any], max_bytes: int) -> None:
    """Copy the host variables ``names`` into ``session``'s sandbox (all names are checked first).

    Raises:
        TransferError: a name that is not an identifier or not defined on the host, or what
            :func:`sandbox_kernel.session.transfer.put` raises.
    """
    for name in names:
        transfer.check_name(name)
        if name not in namespace:
            raise TransferError(f"{name!r} is not defined on the host.")
    for name in names:
        wait(loop, session.sandbox.put(name, namespace[name], max_bytes=max_bytes, setting=SETTING),
             session=session.name)


def pull(loop: LoopThread, session: Session, names: list[str], namespace: dict[str, Any], max_bytes: int) -> None:
    """Copy the sandbox variables ``names`` into the host's namespace; nothing is set on the
    host unless every one of them arrived.

    Raises:
        TransferError: what :func:`sandbox_kernel.session.transfer.get` raises.
    """
    for name in names:
        transfer.check_name(name)
    values = {name: wait(loop, session.sandbox.get(name, max_bytes=max_bytes, setting=SETTING),
                         session=session.name) for name in names}
    namespace.update(values)


def say_nothing_came_back(names: list[str]) -> None:
    """``-o`` after a failed cell: one line."""
    if names:
        print(f"[-o {', '.join(names)}: the cell failed, so nothing was brought back]", file=sys.stderr)
