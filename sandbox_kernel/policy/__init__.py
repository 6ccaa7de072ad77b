"""The output policy: what of a sandbox's outputs may act in the user's page.

- :mod:`.core`: :class:`OutputPolicy` (MIME bundles, HTML strings, widget state pieces);
- :mod:`.renderers`: the closed list of MIME types JupyterLab renders, each with its rule and
  the rule's police function;
- :mod:`.markup` (HTML, SVG, Markdown: :mod:`.allowlists`, then :mod:`.passes` over nh3's
  output, to a fixed point), :mod:`.css` and :mod:`.stylesheet` (styles scoped to their
  output), :mod:`.tex` and :mod:`.tex_arguments` (MathJax), :mod:`.mermaid`, :mod:`.charts`
  (Vega, Vega-Lite, Plotly): the rules that rewrite;
- :mod:`.widgets`: the widget rules (typed state, links, media values);
- :mod:`.frame`: ``isolate``'s opaque-origin frame;
- :mod:`.options`: the traitlets options every front door shares.
"""

from .core import ISOLATE_LEAK, POLICIES, STANDARD_WIDGET_MODULES, OutputPolicy, Policed, kernel_hint
from .frame import FRAME_HEIGHT, FRAME_HEIGHT_STATIC, frame_height
from .options import OutputOptions
from .renderers import RENDERERS, SCRIPT_MIME

__all__ = ["OutputPolicy", "OutputOptions", "Policed", "POLICIES", "STANDARD_WIDGET_MODULES", "kernel_hint",
           "RENDERERS", "SCRIPT_MIME", "ISOLATE_LEAK", "FRAME_HEIGHT", "FRAME_HEIGHT_STATIC", "frame_height"]
