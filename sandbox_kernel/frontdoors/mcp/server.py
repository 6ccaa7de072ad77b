"""The MCP server's tools, built with the official ``mcp`` SDK (``MCPServer``); the command
and its transports are :mod:`sandbox_kernel.frontdoors.mcp.cli`.

Each tool drives the :class:`~sandbox_kernel.frontdoors.api.AsyncSandbox` of the calling MCP session
(https://modelcontextprotocol.io/specification, "tools"):

``run_code``      code → stdout, stderr and results as text, images as image content; an
                  exception, a timeout or a dead sandbox is a tool error. State is kept.
``run_command``   a shell command line, under ``--allowed-command`` → exit code, stdout, stderr.
``upload_file`` / ``download_file``   file content to/from a path inside the sandbox's working
                  directory (absolute paths and ``..`` are refused).
``restart``, ``status``.
``checkpoint`` / ``list_checkpoints`` / ``restore`` / ``undo``   the sandbox's whole state saved
                  and brought back (docs/how-to/checkpoints.md): try several continuations from one
                  state, keep the best.

Outputs pass the same cell pipeline as the kernel's: under the default ``sanitize`` policy an
HTML result arrives as sanitized HTML text, never with scripts.
"""

import base64
import contextlib
import json
import os
import posixpath
import re
from typing import Any, Literal

from ...core.errors import FileTooLarge, PathRefused, SandboxError
from ...runtime.paths import within
from ...session.results import ExecutionResult
from ..api import AsyncSandbox

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
TEXT_TYPES = ("text/plain", "text/markdown", "text/html", "image/svg+xml", "application/json", "text/latex")
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")

INSTRUCTIONS = ("Runs Python in an isolated {backend} sandbox that keeps its state (variables, imports, files) "
                "between run_code calls. Files live in the sandbox's working directory.")


_ANY_WORKDIR = "/workdir"  # the server does not know the backend's: only climbing out of it counts


def inside_workdir(path: str) -> str:
    """``path`` normalised, if it is relative and stays inside the working directory.

    Raises:
        PathRefused: an absolute path, an empty one, or one that climbs out with ``..``.
    """
    relative = path.replace("\\", "/")
    if not relative or posixpath.isabs(relative) or within(_ANY_WORKDIR, relative) in (None, _ANY_WORKDIR):
        raise PathRefused(path)
    return posixpath.normpath(relative)


def mcp_hint(option: str, value: str) -> str:
    """How the server's user sets an output option: ``--output-policy isolate``."""
    return f"--{option.replace('_', '-')} {value}"


class MCPSandbox(AsyncSandbox):
    """The server's sandbox: notes name the server's command-line options."""

    option_hint = staticmethod(mcp_hint)


OBJECT_REPR = re.compile(r"^<[\w.]+ object( at 0x[0-9a-f]+)?>$")


def best_text(data: dict[str, Any]) -> str | None:
    """A display's text for a model: ``text/plain``, unless it is a bare object repr
    (``<IPython.core.display.HTML object>``), then Markdown, (sanitized) HTML, SVG, JSON."""
    plain = data.get("text/plain")
    if isinstance(plain, str) and not OBJECT_REPR.match(plain.strip()):
        return plain
    for mime in TEXT_TYPES[1:]:
        if mime in data:
            return data[mime] if isinstance(data[mime], str) else json.dumps(data[mime])
    return plain


def result_content(result: ExecutionResult) -> list[Any]:
    """MCP content blocks for an execution: stdout, stderr, each display (images as image
    content, else its best text form), the error's traceback without colours, and the files it
    wrote in the working directory (``[files written] ...``, 20 at most)."""
    from mcp_types import ImageContent, TextContent

    blocks: list[Any] = []
    if result.stdout:
        blocks.append(TextContent(type="text", text=result.stdout))
    if result.stderr:
        blocks.append(TextContent(type="text", text=f"[stderr]\n{result.stderr}"))
    for display in result.displays:
        image = next((m for m in IMAGE_TYPES if m in display.data), None)
        if image is not None:
            blocks.append(ImageContent(type="image", data=display.data[image], mime_type=image))
            continue
        if (text := best_text(display.data)) is not None:
            blocks.append(TextContent(type="text", text=text))
    if result.error is not None:
        trace = ANSI.sub("", "\n".join(result.error.traceback)) or f"{result.error.ename}: {result.error.evalue}"
        blocks.append(TextContent(type="text", text=trace))
    if result.artifacts:  # what the code wrote, for download_file
        names = ", ".join(f"{a.path} ({a.size} bytes)" for a in result.artifacts[:20])
        more = len(result.artifacts) - 20
        blocks.append(TextContent(type="text", text=f"[files written] {names}" + (f" and {more} more" if more > 0 else "")))
    return blocks or [TextContent(type="text", text="[no output]")]


def build_server(sessions: Any) -> Any:
    """The ``MCPServer`` whose tools drive the sandbox of the calling session
    (``sessions.get(ctx)``, see :class:`sandbox_kernel.frontdoors.mcp.cli.Sessions`)."""
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp_types import CallToolResult, TextContent

    server = MCPServer("sandbox-kernel", instructions=INSTRUCTIONS.format(backend=sessions.backend),
                       log_level="WARNING")

    def failed(exc: BaseException) -> CallToolResult:
        partial = getattr(exc, "result", None)
        shown = isinstance(partial, ExecutionResult) and (partial.stdout or partial.stderr)
        blocks = result_content(partial) if shown else []
        return CallToolResult(content=[*blocks, TextContent(type="text", text=f"{type(exc).__name__}: {exc}")],
                              is_error=True)

    @server.tool(structured_output=False)
    async def run_code(ctx: Context, code: str, timeout: float | None = None):
        """Run Python code in the sandbox. Variables, imports and files persist between calls.
        Returns stdout, stderr (after [stderr]), the last expression's value and each display as
        text (HTML sanitized), plots and images as image content, then '[files written] NAME
        (SIZE bytes), ...' for the files the code created or changed in the working directory (20
        at most; download_file fetches one). An exception, a timeout or a dead sandbox is a tool
        error, with the traceback or one line. timeout: seconds before the code is interrupted
        (default: the server's)."""
        try:
            result = await sessions.get(ctx).run(code, timeout=timeout)
        except SandboxError as exc:
            return failed(exc)
        return CallToolResult(content=result_content(result), is_error=result.error is not None)

    @server.tool(structured_output=False)
    async def run_command(ctx: Context, command: str, timeout: float | None = None):
        """Run a shell command line (/bin/sh -c) in the sandbox's working directory.
        Returns 'exit code N', its stdout and stderr; a command the server's --allowed-command
        patterns refuse, and a non-zero exit, are tool errors."""
        try:
            done = await sessions.get(ctx).run_command(command, timeout=timeout)
        except SandboxError as exc:
            return failed(exc)
        text = f"exit code {done.exit_code}\n[stdout]\n{done.stdout}\n[stderr]\n{done.stderr}"
        return CallToolResult(content=[TextContent(type="text", text=text)], is_error=done.exit_code != 0)

    @server.tool()
    async def upload_file(ctx: Context, path: str, content: str,
                          encoding: Literal["utf-8", "base64"] = "utf-8") -> str:
        """Write a file in the sandbox's working directory; returns where it was written.
        path: relative, e.g. 'data/in.csv' (absolute paths and '..' are refused); content: the
        text, or base64 when encoding='base64'."""
        try:
            data = base64.b64decode(content, validate=True) if encoding == "base64" else content.encode()
            return f"wrote {len(data)} bytes to {await sessions.get(ctx).write_file(inside_workdir(path), data)}"
        except (SandboxError, OSError, ValueError) as exc:
            raise ToolError(str(exc)) from None

    @server.tool()
    async def download_file(ctx: Context, path: str, encoding: Literal["utf-8", "base64"] = "utf-8") -> str:
        """Read a file from the sandbox's working directory (path relative to it); as text, or
        base64 when encoding='base64' (binary files). A file over the server's
        --max-output-bytes is a tool error, refused as it is read."""
        limit = sessions.get(ctx).max_output_bytes
        try:  # a larger file is refused as it is read, never held whole on the host
            data = await sessions.get(ctx).read_file(inside_workdir(path), max_bytes=limit)
        except FileTooLarge:
            raise ToolError(f"{path} has more than {limit:,} bytes, the server's --max-output-bytes.") from None
        except (SandboxError, OSError) as exc:
            raise ToolError(str(exc) or f"No such file in the sandbox: {path}") from None
        if encoding == "base64":
            return base64.b64encode(data).decode()
        try:
            return data.decode()
        except UnicodeDecodeError:
            raise ToolError(f"{path} is not UTF-8 text; ask for encoding='base64'.") from None

    @server.tool()
    async def restart(ctx: Context) -> str:
        """Restart the sandbox's interpreter: all variables are lost."""
        try:
            await sessions.get(ctx).restart()
        except SandboxError as exc:
            raise ToolError(str(exc)) from None
        return "The sandbox restarted with a fresh interpreter."

    @server.tool()
    async def checkpoint(ctx: Context, name: str | None = None) -> str:
        """Save the sandbox's whole state now (variables, open files, models, data frames), to
        come back to with restore. name: optional, letters/digits/_.- (a later one of the same
        name replaces it). One is also taken automatically after each long run_code."""
        try:
            taken = await sessions.get(ctx).checkpoint(name)
        except SandboxError as exc:
            raise ToolError(str(exc)) from None
        return f"Checkpoint taken: {taken.what()}."

    @server.tool()
    async def list_checkpoints(ctx: Context) -> str:
        """The saved states: the run (execution count) each follows, its name, age and size."""
        sandbox = sessions.get(ctx)
        try:
            return sandbox.session.checkpoints.table(await sandbox.checkpoints())
        except SandboxError as exc:
            raise ToolError(str(exc)) from None

    @server.tool()
    async def restore(ctx: Context, checkpoint: str) -> str:
        """Put the sandbox back in a saved state: checkpoint is a name, or the number of the run
        it follows (see list_checkpoints). The saved state stays, to restore again. Files in the
        working directory are not restored."""
        try:
            restored = await sessions.get(ctx).restore(int(checkpoint) if checkpoint.isdigit() else checkpoint)
        except SandboxError as exc:
            raise ToolError(str(exc)) from None
        return f"Restored: the sandbox runs on {restored.phrase()}."

    @server.tool()
    async def undo(ctx: Context) -> str:
        """Put the sandbox back in the state it had before the last run_code (files excepted)."""
        try:
            restored = await sessions.get(ctx).undo()
        except SandboxError as exc:
            raise ToolError(str(exc)) from None
        return f"Undone: the sandbox runs on {restored.phrase()}."

    @server.tool()
    async def status(ctx: Context) -> str:
        """The sandbox's backend, id, limits, working directory, output policy, the allowed
        commands, memory use and this server's process id (JSON)."""
        sandbox = sessions.get(ctx)
        info = {**sandbox.describe(), "server_pid": os.getpid()}
        with contextlib.suppress(SandboxError):
            info["usage"] = await sandbox.usage()
        return json.dumps(info, default=str)

    return server
