"""``isolate``'s frame: active content in an opaque origin.

``<iframe sandbox="allow-scripts">`` without ``allow-same-origin`` gives the document an
opaque origin: its scripts run, but cannot read the page, its cookies or storage, or call the
Jupyter server's API (measured in Chromium, ENVIRONMENT.md); without ``allow-top-navigation``,
``allow-popups`` and ``allow-forms`` it cannot navigate the page, open windows or submit forms.
A Content-Security-Policy in the document limits what it loads (images, scripts, styles,
``fetch``) to ``allowed_origins``. What neither can stop: a script navigating *its own frame*
to any URL, and WebRTC's STUN/TURN traffic (``RTCPeerConnection``), which CSP does not cover
in Chromium. Both can carry data out: see :data:`.core.ISOLATE_LEAK`.
"""

from __future__ import annotations

import html
import re

from .markup import escape_attribute

FRAME_HEIGHT = 420
"""Initial height of an isolated frame with script and no stated size, in CSS pixels (charts
draw themselves about this high); without script, :data:`FRAME_HEIGHT_STATIC`. The user can
drag the frame's corner."""
FRAME_HEIGHT_STATIC = 160
_STATED_HEIGHT = re.compile(r"""height\s*[:=]\s*["']?\s*(\d{2,4})(?:px)?\b""", re.IGNORECASE)


def frame_height(document: str) -> int:
    """CSS pixels for a frame showing ``document``: the largest height it states (``height="300"``,
    ``height: 300px``) plus a margin, within 60–800; else a default by whether it has script."""
    stated = [int(h) for h in _STATED_HEIGHT.findall(document[:200_000])]
    if stated:
        return max(60, min(800, max(stated) + 24))
    return FRAME_HEIGHT if "<script" in document.lower() else FRAME_HEIGHT_STATIC


def frame(document: str, allowed_origins: tuple[str, ...] = ()) -> str:
    """``document`` inside an opaque-origin frame (see the module docstring)."""
    sources = " ".join(allowed_origins)
    none = "'none'"
    csp = (f"default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval' blob: data: {sources}; "
           f"style-src 'unsafe-inline' data: {sources}; img-src data: blob: {sources}; "
           f"font-src data: {sources}; media-src data: blob: {sources}; connect-src {sources or none}; "
           f"form-action 'none'; base-uri 'none'")
    page = (f'<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" content="{csp}">'
            f'<meta charset="utf-8"><style>body{{margin:0;font-family:sans-serif}}</style></head>'
            f"<body>{document}</body></html>")
    return (f'<iframe sandbox="allow-scripts" srcdoc="{escape_attribute(page)}" '
            f'style="width:100%;height:{frame_height(document)}px;border:0;resize:vertical;overflow:auto" '
            f'title="Isolated sandbox output (no access to this page)"></iframe>')


_OWN = re.compile(r'<iframe sandbox="allow-scripts" srcdoc="([^"]*)" style="[^"]*" title="[^"]*"></iframe>')


def is_frame(markup: str, allowed_origins: tuple[str, ...] = ()) -> bool:
    """Whether ``markup`` is exactly what :func:`frame` writes for some document (so framing it
    again would change nothing that matters: policing stays idempotent)."""
    found = _OWN.fullmatch(markup)
    if found is None:
        return False
    page = html.unescape(found.group(1))
    start, end = page.find("<body>"), page.rfind("</body></html>")
    return start >= 0 and end >= 0 and frame(page[start + len("<body>"):end], allowed_origins) == markup
