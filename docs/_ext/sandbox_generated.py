"""Reference pages written from the code: the ``%sandbox`` commands and the MCP tools.

Both write MyST Markdown, parsed in the page. ``{sandbox-commands}`` renders the commands each door answers (``kernel``: the ``%sandbox``
lines a sandbox kernel's cell may start with; ``magic``: the magic's line commands; ``cell``:
the ``%%sandbox`` line and the backend options it takes). ``{mcp-tools}`` renders the tools of
``sandbox-kernel mcp`` from the schemas the server announces (``tools/list``).

The commands come from :func:`command_table`: the doors' one table of verbs
(``sandbox_kernel/session/verbs.py``, its ``reference(door)``); a command without a line of help
is a warning, so the build fails.
"""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import dataclass

from docutils.parsers.rst import Directive
from docutils.statemachine import StringList
from sphinx.util import logging

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Command:
    name: str
    usage: str
    help: str


def command_table(door: str) -> list[Command]:
    """The commands ``door`` (``kernel`` or ``magic``) answers, with their usage and help, from
    the doors' one table (``sandbox_kernel.session.verbs``); a command without help is a warning."""
    from sandbox_kernel.session import verbs

    rows = verbs.reference(door)
    for usage, text in rows:
        if not text:
            logger.warning(f"the {door}'s {usage} has no help in sandbox_kernel/session/verbs.py: write one",
                           type="sandbox", subtype="commands")
    return [Command(usage.split()[1], usage, text) for usage, text in rows]


def _code(text: str) -> str:
    """``text`` as Markdown inline code inside a table cell."""
    return "`" + text.replace("`", "").replace("|", "\\|") + "`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def commands_md(door: str) -> list[str]:
    """The commands of ``door`` as a MyST table (``cell``: :func:`cell_md`)."""
    if door == "cell":
        return cell_md()
    out = ["| command | what it does |", "|---|---|"]
    out += [f"| {_code(c.usage)} | {_cell(c.help)} |" for c in command_table(door)]
    return out


def cell_md() -> list[str]:
    """The ``%%sandbox`` line: its usage, the magic's own options, and every backend's."""
    from sandbox_kernel.backends import backend_names, get_backend_class
    from sandbox_kernel.frontdoors.magics import options

    own = {"--backend": "the session's backend, when the session is made (default: "
                        "{trait}`SandboxMagics.default_backend`)",
           "--name": "the session (default `default`); each name is its own sandbox",
           "--timeout": "seconds the cell may run (default: {trait}`SandboxMagics.default_timeout`)",
           "--output-policy": "this cell's output policy (default: {trait}`SandboxMagics.output_policy`)",
           "--input": "host variables copied into the sandbox before the cell (comma lists too)",
           "--output": "sandbox variables copied back after the cell succeeded"}
    flags = {**options._OWN, "--input": "inputs", "-i": "inputs", "--output": "outputs", "-o": "outputs"}
    out = ["```text", options.CELL_USAGE, "```", "", "| option | what it does |", "|---|---|"]
    for flag, text in own.items():
        short = [f for f, key in flags.items() if key == flags[flag] and f != flag]
        out.append(f"| {_code(', '.join([flag, *short]))} | {text} |")
    out += ["", "Every other `--option VALUE` is an option of the session's backend: its trait's name with "
                "dashes, converted as on a kernelspec's argv (`--memory-limit 1g` is "
                "`--DockerBackend.memory_limit=1g`). Each backend's, linked to its entry in the options:", ""]
    for backend in backend_names():
        cls = get_backend_class(backend)
        links = ", ".join(f"{{trait}}`{opt} <{cls.__name__}.{opt[2:].replace('-', '_')}>`"
                          for opt in options.option_names(cls))
        out += [f"`--backend {backend}`", f": {links}", ""]
    aliases = ", ".join(f"`--{alias.replace('_', '-')}` for `--{name.replace('_', '-')}`"
                        for alias, name in options.ALIASES.items())
    return out + [f"Friendlier spellings: {aliases}.", ""] if aliases else out


class SandboxCommands(Directive):
    """``{sandbox-commands} kernel|magic|cell``"""

    required_arguments = 1
    option_spec = {}

    def run(self):
        door = self.arguments[0]
        if door not in ("kernel", "magic", "cell"):
            raise self.error(f"sandbox-commands: kernel, magic or cell, not {door!r}")
        return _parse(self, commands_md(door))


def tools() -> list:
    """The MCP tools as ``tools/list`` announces them (name, description, input schema)."""
    from sandbox_kernel.frontdoors.mcp.server import build_server

    class Sessions:  # the server reads only the backend's name before a call
        backend = "docker"

    return asyncio.run(build_server(Sessions()).list_tools())


def _type(schema: dict) -> str:
    if "enum" in schema:
        return " | ".join(repr(v) for v in schema["enum"])
    if "anyOf" in schema:
        return " or ".join(_type(s) for s in schema["anyOf"])
    return schema.get("type", "any")


def tools_md() -> list[str]:
    """Each tool: its name, its description, and a table of its arguments (MyST)."""
    out = []
    for tool in tools():
        description = inspect.cleandoc(tool.description or "")
        if not description:
            logger.warning(f"the MCP tool {tool.name} has no description (its docstring)", type="sandbox",
                           subtype="mcp")
        out += [f"## `{tool.name}`", "", *description.splitlines(), ""]
        properties = tool.input_schema.get("properties", {})
        required = set(tool.input_schema.get("required", []))
        if not properties:
            out += ["No arguments.", ""]
            continue
        out += ["| argument | type | default |", "|---|---|---|"]
        for name, schema in properties.items():
            default = "required" if name in required else f"`{schema.get('default')!r}`"
            out.append(f"| `{name}` | {_cell(_type(schema))} | {default} |")
        out.append("")
    return out


class McpTools(Directive):
    """``{mcp-tools}``"""

    def run(self):
        return _parse(self, tools_md())


def _parse(directive: Directive, markdown: list[str]) -> list:
    """Parse generated MyST Markdown in the page's place (the pages are MyST)."""
    from docutils import nodes

    container = nodes.container()
    directive.state.nested_parse(StringList(markdown, source="(generated)"), directive.content_offset, container)
    return container.children


def setup(app):
    app.add_directive("sandbox-commands", SandboxCommands)
    app.add_directive("mcp-tools", McpTools)
    return {"parallel_read_safe": True}
