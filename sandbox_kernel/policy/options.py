"""The output policy's options, shared by every front door (traitlets)."""

from __future__ import annotations

from traitlets import CaselessStrEnum, HasTraits, List, Unicode

from ..runtime import lock
from .core import POLICIES, STANDARD_WIDGET_MODULES, Hint, OutputPolicy


class OutputOptions(HasTraits):
    """The output policy's options, shared by the kernel (``--SandboxKernel.output_policy``),
    the magic (``SandboxMagics.output_policy``, ``%%sandbox --output-policy``) and the API."""

    output_policy = CaselessStrEnum(
        POLICIES, default_value="sanitize",
        help="What sandbox outputs may do in the page: 'sanitize' (default: every output rewritten by the policy, "
             "scripts and unknown MIME types dropped, no fetches from other origins), 'isolate' (active content in "
             "opaque-origin frames: no access to the page, but their scripts can still send what they show to any "
             "website) or 'trust' (unchanged: sandboxed code gets your Jupyter rights in the browser)."
    ).tag(config=True)
    allowed_origins = List(Unicode(), help="Origins (e.g. 'https://cdn.example.org') whose images may load "
                                           "in sanitized output and whose resources isolated frames may load."
                           ).tag(config=True)
    allowed_mime_types = List(Unicode(), help="MIME types JupyterLab does not render itself that may reach the "
                                              "page unchanged (under 'sanitize' and 'isolate'), for a frontend "
                                              "extension you trust, e.g. 'application/vnd.plotly.v1+json' "
                                              "(Plotly figures still lose their URLs)."
                              ).tag(config=True)
    allowed_widget_modules = List(Unicode(), default_value=list(STANDARD_WIDGET_MODULES),
                                  help="Widget model/view modules the sandbox may open (under 'sanitize' and "
                                       "'isolate'); add e.g. 'bqplot' for a trusted extension.").tag(config=True)
    allowed_comm_targets = List(Unicode(), default_value=["jupyter.widget"],
                                help="Comm targets the sandbox may open (under 'sanitize' and 'isolate').").tag(
        config=True)

    def make_policy(self, hint: Hint = None, mode: str | None = None) -> OutputPolicy:
        """The :class:`OutputPolicy` these options describe (with ``mode`` instead of
        ``output_policy`` if given, e.g. a magic line's); ``hint(option, value)`` says how the
        user sets an option at this front door.

        Raises:
            Locked: an option beyond the administrator's lock (:mod:`sandbox_kernel.runtime.lock`).
        """
        options = {"output_policy": (mode or self.output_policy).lower(), "allowed_origins": list(self.allowed_origins),
                   "allowed_mime_types": list(self.allowed_mime_types),
                   "allowed_widget_modules": list(self.allowed_widget_modules),
                   "allowed_comm_targets": list(self.allowed_comm_targets)}
        lock.load().check_output(options)
        return OutputPolicy(options["output_policy"], self.allowed_origins, hint=hint,
                            widget_modules=self.allowed_widget_modules, comm_targets=self.allowed_comm_targets,
                            mime_types=self.allowed_mime_types)
