"""Variables between the host and a sandbox, as data only (issue 18).

:func:`put` and :func:`get` move one variable through the backend's files (``upload``/
``download``) and its kernel channel (a snippet the sandbox runs, :mod:`.inside`); never
through a network the sandbox does not have, and never with pickle. The formats and the
host's checks are in :mod:`.codec`.
"""

from __future__ import annotations

import json
import keyword
import os
import tempfile
import uuid
from pathlib import Path
from typing import Any

from ...backends.base import Backend
from ...core.errors import TransferError
from ...core.events import Error, Event, Stream
from .codec import TYPES, decode, encode
from .inside import MARKER, cleanup, snippet

__all__ = ["DEFAULT_MAX_TRANSFER_BYTES", "TYPES", "TransferError", "check_name", "get", "put"]

DEFAULT_MAX_TRANSFER_BYTES = 256 * 1024**2
"""The bound on one value's encoded size, each way (256 MiB)."""


def check_name(name: str) -> str:
    """``name`` if it is a Python identifier, else one line (:class:`TransferError`)."""
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise TransferError(f"{name!r} is not a variable name (a Python identifier).")
    return name


def _too_big(name: str, size: int, limit: int, setting: str) -> TransferError:
    return TransferError(f"{name!r} is {size:,} bytes encoded, over the transfer bound of {limit:,} bytes; "
                         f"raise {setting} to move it.")


async def _run(backend: Backend, code: str, name: str) -> dict[str, Any]:
    """Run a transfer snippet; its marker line's JSON."""
    lines: list[str] = []
    errors: list[Error] = []

    def collect(event: Event) -> None:
        if isinstance(event, Stream) and event.name == "stdout":
            lines.append(event.text)
        elif isinstance(event, Error):
            errors.append(event)

    outcome = await backend.execute(code, collect)
    answers = [line[len(MARKER):] for line in "".join(lines).split("\n") if line.startswith(MARKER)]
    if outcome.status != "ok" or not answers:
        error = outcome.error or (errors[-1] if errors else None)
        detail = f"{error.ename}: {error.evalue}" if error else "no answer"
        raise TransferError(f"Moving {name!r} failed in the sandbox ({detail}).")
    try:
        answer = json.loads(answers[-1])
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        raise TransferError(f"Moving {name!r}: the sandbox's answer was not understood; nothing was set.")
    if answer.get("error") == "pyarrow":
        raise TransferError(f"{name!r}: DataFrames and Series travel as Arrow IPC, and the sandbox has no pyarrow "
                            "(docker: --packages pyarrow, or an image with it).")
    return answer


async def put(backend: Backend, name: str, value: Any, *, max_bytes: int = DEFAULT_MAX_TRANSFER_BYTES,
              setting: str = "max_transfer_bytes") -> int:
    """Set ``name`` in the sandbox's namespace to a copy of ``value``.

    Returns:
        The encoded size in bytes.

    Raises:
        TransferError: a bad name, a type that does not travel, a value over ``max_bytes``
            (``setting`` names the option), or a failure in the sandbox.
        SandboxError: the backend failed (files not supported, sandbox died, ...).
    """
    check_name(name)
    backend.require("files", "moving variables")
    kind, data = encode(value, name)
    if max_bytes and len(data) > max_bytes:
        raise _too_big(name, len(data), max_bytes, setting)
    remote = f".sandbox-transfer-{uuid.uuid4().hex}"
    with tempfile.TemporaryDirectory(prefix="sandbox-transfer-") as tmp:
        local = Path(tmp) / "value"
        local.write_bytes(data)
        await backend.upload(local, remote)
    await _run(backend, snippet(name, remote, "in", kind), name)
    return len(data)


async def get(backend: Backend, name: str, *, max_bytes: int = DEFAULT_MAX_TRANSFER_BYTES,
              setting: str = "max_transfer_bytes") -> Any:
    """A host copy of the sandbox's variable ``name``, built from data only.

    The sandbox says the encoded size first; over ``max_bytes`` it is refused before anything
    is copied, and the copied file is checked again before it is read.

    Raises:
        TransferError: a bad or unknown name, a type that does not travel, a value over the
            bound, or data that is not what it claims (see :func:`.codec.decode`).
        SandboxError: the backend failed.
    """
    check_name(name)
    backend.require("files", "moving variables")
    remote = f".sandbox-transfer-{uuid.uuid4().hex}"
    try:
        answer = await _run(backend, snippet(name, remote, "out"), name)
        if answer.get("error") == "missing":
            raise TransferError(f"{name!r} is not defined in the sandbox.")
        if answer.get("error") == "type":
            raise TransferError(f"{name!r} has type {answer.get('type')}, which does not travel between host and "
                                f"sandbox; what travels: {TYPES}.")
        size = answer.get("size")
        if type(size) is not int or size < 0:
            raise TransferError(f"Moving {name!r}: the sandbox's answer was not understood; nothing was set.")
        if max_bytes and size > max_bytes:
            raise _too_big(name, size, max_bytes, setting)
        with tempfile.TemporaryDirectory(prefix="sandbox-transfer-") as tmp:
            local = Path(tmp) / "value"
            await backend.download(remote, local)
            actual = os.stat(local).st_size
            if (max_bytes and actual > max_bytes) or actual != size:
                raise _too_big(name, actual, max_bytes, setting) if max_bytes and actual > max_bytes else \
                    TransferError(f"{name!r} changed size while it was copied; nothing was set.")
            data = local.read_bytes()
        return decode(str(answer.get("kind")), data, name)
    finally:
        await backend.execute(cleanup(remote), lambda event: None)
