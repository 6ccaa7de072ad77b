"""Shell commands in a sandbox, and the caller's allowlist for them.

A command runs through the sandbox's own interpreter (one execution whose Python starts
``/bin/sh -c COMMAND`` with :mod:`subprocess` in the sandbox's working directory), so it
works on every backend that runs Python, with the sandbox's limits, and needs no second
channel into the sandbox. The execution runs in a namespace of its own: the user's
variables are untouched.

``allowed_commands`` (regular expressions, each matched against the WHOLE command line with
:func:`re.fullmatch`) limits what a caller of the API or an MCP client may ask for. It does
not limit what code inside the sandbox can do: code can start any process the sandbox
allows. Containing that is the sandbox's job.
"""

from __future__ import annotations

import json
import re

from ..core.errors import CommandRefused, ConfigError, SandboxError
from .results import CommandResult

MARKER = "\x00sandbox-kernel-command\x00"

_RUNNER = r'''
import json, os, signal, subprocess
proc = subprocess.Popen(COMMAND, shell=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, start_new_session=True)
try:
    out, err = proc.communicate(timeout=TIMEOUT)
    result = {"exit_code": proc.returncode}
except subprocess.TimeoutExpired:
    os.killpg(proc.pid, signal.SIGKILL)
    out, err = proc.communicate()
    result = {"timeout": True}
for name, data in (("stdout", out), ("stderr", err)):
    result[name] = data[:LIMIT].decode("utf-8", "replace") if LIMIT else data.decode("utf-8", "replace")
    result[name + "_dropped"] = max(0, len(data) - LIMIT) if LIMIT else 0
print(MARKER + json.dumps(result))
'''


def compile_allowlist(patterns: list[str] | None) -> list[re.Pattern[str]] | None:
    """The patterns compiled (None: any command is allowed).

    Raises:
        ConfigError: a pattern is not a valid regular expression.
    """
    if patterns is None:
        return None
    compiled = []
    for pattern in patterns:
        try:
            compiled.append(re.compile(pattern))
        except re.error as exc:
            raise ConfigError(f"allowed_commands: {pattern!r} is not a regular expression ({exc}).") from None
    return compiled


def check(command: str, allowlist: list[re.Pattern[str]] | None) -> None:
    """Raise :class:`CommandRefused` unless ``command`` fully matches a pattern of ``allowlist``."""
    if allowlist is not None and not any(p.fullmatch(command) for p in allowlist):
        raise CommandRefused(command)


def runner_code(command: str, timeout: float | None, limit: int) -> str:
    """Python source that runs ``command`` in the sandbox and prints its result after
    :data:`MARKER`; ``limit`` bytes of each stream are kept (0: all)."""
    source = (_RUNNER.replace("COMMAND", repr(command)).replace("TIMEOUT", repr(timeout))
              .replace("LIMIT", repr(limit)).replace("MARKER", repr(MARKER)))
    return f"exec({source!r}, {{}})"


def parse(stdout: str, error: str | None, timeout: float | None) -> CommandResult:
    """The :class:`CommandResult` from the runner's output.

    Raises:
        ExecutionTimeout: the command ran past ``timeout`` (it was killed).
        SandboxError: the sandbox could not run the runner (e.g. a non-Python context).
    """
    from ..core.errors import ExecutionTimeout

    _, found, payload = stdout.rpartition(MARKER)
    if not found:
        raise SandboxError(f"The sandbox could not run the command: {error or 'no result came back'}.")
    result = json.loads(payload)
    if result.get("timeout"):
        raise ExecutionTimeout(timeout or 0)
    streams = {}
    for name in ("stdout", "stderr"):
        text, dropped = result[name], result[f"{name}_dropped"]
        streams[name] = text + (f"\n[{dropped} more bytes of {name} dropped; raise max_output_bytes to see more]\n"
                                if dropped else "")
    return CommandResult(result["exit_code"], streams["stdout"], streams["stderr"])
