"""The output policy: what of a sandbox's rich outputs may act in the user's page.

JupyterLab marks every output of a cell the user ran as trusted: ``text/html`` runs its
scripts and event handlers, ``application/javascript`` is evaluated, Markdown goes through the
same HTML path, MathJax, Mermaid and vega-embed fetch what they are told to, all with the
page's Jupyter credentials (which can write files and open terminals on the host). Only the
kernel can decide, so every MIME bundle from a sandbox passes :meth:`OutputPolicy.bundle`
before any front door shows it. What reaches the page is always what the policy wrote, for
the MIME types of the closed list in :mod:`.renderers`:

``sanitize`` (the default)
    each known type by its rule (data only, or rewritten: :mod:`.markup`, :mod:`.tex`,
    :mod:`.mermaid`, :mod:`.charts`); script types and unknown types are dropped, with a note
    naming the option that shows them; the output's metadata is the policy's own.
``isolate``
    as ``sanitize``, except that HTML, Markdown and JavaScript whose active content the
    sanitizer would remove are shown whole inside ``<iframe sandbox="allow-scripts">`` (an
    opaque origin: no access to the page, its cookies or the server's API). Its scripts can
    still send what they show out, by navigating their own frame or over WebRTC, which no
    frame attribute or Content-Security-Policy can stop: :data:`ISOLATE_LEAK`.
``trust``
    outputs pass unchanged: sandboxed code gets the user's Jupyter rights. An explicit opt-in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ..core.events import Display
from . import css, renderers
from .charts import plotly_figure
from .frame import frame, is_frame
from .markup import Sanitizer, render_markdown
from .tex import police_tex, typeset

ISOLATE_LEAK = ("its scripts can still send what they show to any website, by navigating their own frame or over "
                "WebRTC")
"""What ``isolate`` cannot stop, said in its note, its option's help and docs/explanation/security.md."""

PLOTLY = "application/vnd.plotly.v1+json"
POLICIES = ("sanitize", "isolate", "trust")
STANDARD_WIDGET_MODULES = ("@jupyter-widgets/base", "@jupyter-widgets/controls", "@jupyter-widgets/output")

Hint = Callable[[str, str], str] | None
"""``hint(option, value)``: how the user sets an option at one front door (for notes)."""


def kernel_hint(option: str, value: str) -> str:
    """How a kernel user sets an option: ``--SandboxKernel.output_policy=isolate``."""
    return f"--SandboxKernel.{option}={value}"


@dataclass
class Policed:
    """A MIME bundle as the policy lets it reach the page.

    Attributes:
        data: ``{mime: value}``, written by the policy (the input itself under ``trust``).
        metadata: the output's metadata, the policy's own.
        changed: whether the policy removed or rewrote anything active (the cell says so once).
        notes: one-line notes on types dropped (each to be said once per session).
    """

    data: dict[str, Any]
    metadata: dict[str, Any]
    changed: bool = False
    notes: list[str] = field(default_factory=list)


class OutputPolicy:
    """Applies one policy to MIME bundles (:meth:`bundle`), HTML strings (:meth:`html`) and the
    pieces of widget state views render (:meth:`tex_text`, :meth:`css_value`, :meth:`url_ok`).

    Args:
        mode: ``sanitize``, ``isolate`` or ``trust``.
        allowed_origins: see :class:`~.options.OutputOptions`.
        hint: ``hint(option, value)`` → how to set an option at this front door; default:
            ``--SandboxKernel.OPTION=VALUE``.
        widget_modules, comm_targets, mime_types: see :class:`~.options.OutputOptions`.
    Raises:
        ValueError: for an unknown mode.
    """

    def __init__(self, mode: str = "sanitize", allowed_origins: list[str] | tuple[str, ...] = (), *,
                 hint: Hint = None,
                 widget_modules: list[str] | tuple[str, ...] = STANDARD_WIDGET_MODULES,
                 comm_targets: list[str] | tuple[str, ...] = ("jupyter.widget",),
                 mime_types: list[str] | tuple[str, ...] = ()) -> None:
        if mode not in POLICIES:
            raise ValueError(f"unknown output policy {mode!r} (one of: {', '.join(POLICIES)})")
        self.mode = mode
        self.allowed_origins = tuple(allowed_origins)
        self.widget_modules = frozenset(widget_modules)
        self.comm_targets = frozenset(comm_targets)
        self.mime_types = frozenset(mime_types)
        self.hint = hint or kernel_hint
        self.sanitizer = Sanitizer.shared(self.allowed_origins)

    @property
    def trusts(self) -> bool:
        return self.mode == "trust"

    def option(self, option: str, value: str) -> str:
        """How the user sets ``option`` to ``value`` here, e.g. ``--SandboxKernel.output_policy=isolate``."""
        return self.hint(option, value)

    def note(self) -> str:
        """The one line a cell shows the first time the policy changed its output."""
        if self.mode == "isolate":
            return (f"[output policy 'isolate': active content of this cell runs in isolated frames without access to "
                    f"this page or your Jupyter server, but {ISOLATE_LEAK}; "
                    f"{self.option('output_policy', 'sanitize')} removes it]\n")
        return (f"[output policy 'sanitize': scripts, event handlers and external resources were removed from this "
                f"cell's output; {self.option('output_policy', 'isolate')} shows them in an isolated frame]\n")

    # -- strings that views put into the page ----------------------------------------------------
    def html(self, source: str) -> tuple[str, bool]:
        """``(html, changed)``: an HTML string (``text/html``, a widget's innerHTML) as this
        policy lets it reach the page; under ``isolate``, framed whole when active content
        was removed."""
        if self.trusts or (self.mode == "isolate" and is_frame(source, self.allowed_origins)):
            return source, False
        clean, changed = self.sanitizer.html(source)
        if changed and self.mode == "isolate":
            return frame(source, self.allowed_origins), True
        return clean, changed

    def markdown(self, source: str) -> tuple[str, bool]:
        """``(html, changed)``: Markdown rendered and sanitized as HTML (:meth:`.markup.Sanitizer.markdown`);
        under ``isolate``, the rendered Markdown framed whole when active content was removed."""
        if self.trusts:
            return render_markdown(source), False
        html, changed = self.sanitizer.markdown(source)
        if changed and self.mode == "isolate":
            return frame(render_markdown(source), self.allowed_origins), True
        return html, changed

    def sanitize_html(self, source: str) -> tuple[str, bool]:
        """``(html, changed)`` as :meth:`html`, never framed (widget descriptions)."""
        return (source, False) if self.trusts else self.sanitizer.html(source)

    def tex_text(self, text: str) -> tuple[str, bool]:
        """``(text, changed)`` for plain text that MathJax typesets (a ``Label``'s value, widget
        descriptions): when it holds maths, its unsafe macros neutralised (:mod:`.tex`)."""
        if self.trusts or not typeset(text):
            return text, False
        return police_tex(text)

    def css_value(self, prop: str, value: str) -> str | None:
        """One CSS property's value, canonical, or None when it loads or runs anything or does
        not parse (widget style traits; :func:`.css.clean_value`)."""
        return value if self.trusts else css.clean_value(prop, value)

    def url_ok(self, tag: str, attr: str, url: str) -> bool:
        """Whether the browser may be given ``url`` in ``attr`` of ``tag`` (:meth:`.markup.Sanitizer.url_ok`)."""
        return self.trusts or self.sanitizer.url_ok(tag, attr, url)

    # -- MIME bundles --------------------------------------------------------------------------------
    def bundle(self, data: dict[str, Any], metadata: dict[str, Any] | None = None) -> Policed:
        """A MIME bundle (``{mime: value}``) and its output metadata under this policy."""
        metadata = metadata if isinstance(metadata, dict) else {}
        if self.trusts:
            return Policed(data, metadata)
        out = Policed({}, {})
        scripts: list[str] = []
        for mime, value in data.items():
            rule = renderers.rule(mime)
            if rule is None or rule.kind == "refused":
                self._unknown(mime, value, metadata.get(mime), rule, out)
            elif rule.kind == "script":
                scripts.append(mime)
                out.changed = True
                if self.mode == "isolate" and "javascript" in mime.lower():
                    out.data.setdefault("text/html", frame(f"<script>{renderers.text(value)}</script>",
                                                           self.allowed_origins))
            else:
                self._known(mime, value, metadata.get(mime), rule, out, data)
        if scripts:
            self._scripts(scripts, out)
        if not out.data and data:
            out.data["text/plain"] = " ".join(out.notes).strip() or "[output not shown by the output policy]"
        return out

    def display(self, event: Display) -> tuple[Display, Policed]:
        """``(event, policed)``: a :class:`~sandbox_kernel.core.events.Display` with its bundle and
        metadata under this policy (the same event under ``trust``), and what the policy did."""
        policed = self.bundle(event.data, event.metadata)
        if self.trusts:
            return event, policed
        return replace(event, data=policed.data, metadata=policed.metadata), policed

    def _known(self, mime: str, value: Any, given: Any, rule, out: Policed, data: dict[str, Any]) -> None:
        try:
            policed, changed = rule.police(self, value)
        except Exception as exc:  # noqa: BLE001 - input that breaks a parser (nesting past Python's
            return _unreadable(mime, exc, out)  # recursion limit in tinycss2): refused, never raised
        out.changed |= changed
        if rule.shown_as is not None:  # Markdown: shown as the policy's HTML, unless the bundle has its own
            if rule.shown_as not in data:
                out.data[rule.shown_as] = policed
            return
        if policed is None:
            why = rule.refusal(value) if rule.refusal else None
            fix = f"{self.option('output_policy', 'isolate' if mime == 'text/html' else 'trust')} shows it"
            why = why or f"the output policy could not make it safe to render; {fix}"
            out.notes.append(f"[a {mime} output was not shown: {why}]")
            return
        out.data[mime] = policed
        meta = renderers.metadata(mime, given)
        if meta is not None:
            out.metadata[mime] = meta
        out.changed |= bool(given) and given != meta  # the sandbox's metadata said more than ours keeps

    def _unknown(self, mime: str, value: Any, given: Any, rule, out: Policed) -> None:
        if mime in self.mime_types:
            if mime == PLOTLY:
                try:
                    value, changed = plotly_figure(value)
                except Exception as exc:  # noqa: BLE001 - as in _known: refused, never raised
                    return _unreadable(mime, exc, out)
                out.changed |= changed
            out.data[mime] = value
            if given is not None:
                out.metadata[mime] = given
            return
        why = "runs its own code in the page" if rule is not None else "is not one JupyterLab renders itself"
        out.notes.append(f"[{mime} output not shown: the output policy '{self.mode}' drops what {why}; "
                         f"{self.option('allowed_mime_types', mime)} allows it]")

    def _scripts(self, scripts: list[str], out: Policed) -> None:
        if not any(m in out.data for m in ("text/html", "image/png", "image/svg+xml", "image/jpeg")):
            kinds = ", ".join(scripts)
            out.data["text/plain"] = (f"[{kinds} output not shown: the output policy '{self.mode}' runs no scripts "
                                      f"from the sandbox in this page; "
                                      f"{self.option('output_policy', 'isolate' if self.mode == 'sanitize' else 'trust')} "
                                      "allows it]")


def _unreadable(mime: str, exc: Exception, out: Policed) -> None:
    """Refuse a ``mime`` output whose rule raised ``exc`` on it, with a note saying so."""
    out.changed = True
    out.notes.append(f"[a {mime} output was not shown: the output policy could not read it ({type(exc).__name__})]")
