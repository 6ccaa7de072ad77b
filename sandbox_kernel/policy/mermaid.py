"""Mermaid diagrams under the output policy: plain diagrams, or refused.

JupyterLab 4.6 draws ``text/vnd.mermaid`` outputs (and ```` ```mermaid ```` fences in its own
Markdown renderer) with mermaid 11.16 (``securityLevel: "strict"``). What a diagram can still
make the browser do: fetch images (``A@{ img: "https://..." }`` shapes, ``<img>`` in labels,
icon packs), load CSS (``%%{init: {"themeCSS": "...url()..."}}%%`` directives and YAML
front-matter ``config``, ``style``/``classDef`` statements), or act on a click (``click``,
``href``, ``callback``, and class and sequence diagrams' ``link``/``links`` statements, whose
targets may be ``_top``: a click replaces the Lab page). Mermaid's own entity codes (``#60;`` is ``<``) and Markdown strings
(```"`**b**`"```) turn label text into markup.

So a diagram passes only as :func:`mermaid` writes it back: comment and directive lines
(``%%``) and front-matter removed, and nothing else changed; it is refused (``None``) if it is
not one of the diagram types of :data:`DIAGRAMS`, or if any line holds what
:data:`_REFUSED` matches. A refused diagram is dropped with the policy's note.
"""

from __future__ import annotations

import re

DIAGRAMS = frozenset({"graph", "flowchart", "sequenceDiagram", "classDiagram", "classDiagram-v2", "stateDiagram",
                      "stateDiagram-v2", "erDiagram", "gantt", "pie", "journey", "gitGraph", "mindmap", "timeline",
                      "quadrantChart", "xychart-beta", "xychart", "sankey-beta", "sankey", "requirementDiagram",
                      "block-beta", "block", "packet-beta", "packet", "radar-beta", "treemap-beta"})
"""Diagram types kept (their first word). Not kept: ``architecture`` (icon packs),
``C4*`` (sprites, links), ``kanban`` (ticket links), ``zenuml``, and anything newer."""

_REFUSED = re.compile(
    r"<\s*[A-Za-z/!?]"           # an HTML tag in a label
    r"|@\{"                      # shape data: img/icon/label objects
    r"|%%"                       # a directive left inside a line
    r"|\bclick\b|\bhref\b|\bcallback\b|\bcall\s+\w+\("  # interaction
    r"|^[ \t]*links?\b|\b_(?:top|self|parent|blank)\b"  # class/sequence diagram links, their targets
    r"|[a-z][a-z0-9+.\-]*:[\t\n]*/"  # a URL: browsers read https:/host (and tabs in it) as https://host
    r"|#\w+;"                    # mermaid entity codes (#60; is "<")
    r"|`"                        # Markdown strings
    r"|url\s*\(|\\|javascript:|data:|//"  # URLs, CSS escapes
    r"|\bicon\b|::icon|\bimg\b|\bimage\b|fa:|fab:|fas:"  # icons and images
    r"|\b(?:style|classDef|linkStyle)\b[^\n]*[\"'{};]",  # CSS beyond plain "prop:value,..." pairs
    re.IGNORECASE | re.MULTILINE)


def mermaid(source: str) -> tuple[str | None, bool]:
    """``(diagram, changed)``: the diagram without comments, directives and front-matter, or
    ``(None, True)`` when it is refused (see the module docstring)."""
    lines = source.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    changed = False
    if lines and lines[0].strip() == "---":  # YAML front-matter: title and config
        end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() == "---"), None)
        if end is None:
            return None, True
        lines, changed = lines[end + 1:], True
    kept = []
    for line in lines:
        if line.lstrip().startswith("%%"):
            changed = True
            continue
        kept.append(line)
    body = "\n".join(kept).strip("\n")
    words = body.split(None, 1)
    if not words or words[0] not in DIAGRAMS or _REFUSED.search(body):
        return None, True
    return body, changed


__all__ = ["mermaid", "DIAGRAMS"]
