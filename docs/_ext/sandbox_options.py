"""The options reference is the traits: this extension makes the build fail when it drifts.

- ``{trait}`DockerBackend.memory_limit``` (``~`` first: only ``memory_limit`` is shown) links
  to the option's entry in the reference, which ``autoconfigurable`` (autodoc-traits) writes
  from the trait itself. An option that does not exist is a warning, hence an error under
  ``make docs`` (``-W``): renaming a trait fails the build until every page says the new name.
- So is an option a page spells out in code that does not exist (``--DockerBackend.memry_limit=1g``,
  ``c.LocalBackend.no_such = 1``, ``%config SandboxMagics.typo = ...``): :func:`unknown_options`
  checks every page's source (and ``tests/test_docs.py`` the README's).
- A sandbox-kernel option documented without help text is a warning: the help is the
  reference's text (``help="..."`` where the trait is defined).
- Every configurable class a user sets options on (the kernel, the magic, the API, and every
  backend registered under the ``sandbox_kernel.backends`` entry points) must be documented by
  ``autoconfigurable`` somewhere: a new backend without a reference page fails the build.
- The reference shows sandbox-kernel's own options only: the wrapper kernel's inherited
  ipykernel options (``Kernel.stop_on_error_timeout``, ...) are ipykernel's.
- A trait's help is plain text (it is what ``--help-all`` prints), so it is escaped before
  reStructuredText reads it (``*.DOMAIN`` is not emphasis, ``KERNEL_*`` not a reference).
"""

from __future__ import annotations

import difflib
import importlib
import re
import sys

from autodoc_traits import TraitDocumenter
from docutils import nodes
from sphinx.addnodes import pending_xref
from sphinx.util import logging
from traitlets import TraitType

logger = logging.getLogger(__name__)

DOORS = {
    "SandboxKernel": "sandbox_kernel.frontdoors.kernel.kernel",
    "SandboxMagics": "sandbox_kernel.frontdoors.magics.magic",
    "AsyncSandbox": "sandbox_kernel.frontdoors.api",
    "Backend": "sandbox_kernel.backends.base",
}
"""The configurable classes that are not backends, by the name pages use; backends come from
the entry-point registry (``LocalBackend``, ``DockerBackend``, ...)."""

NO_HELP = ("", "No help string is provided.")  # autodoc-traits writes the second for an empty help


def configurables() -> dict[str, type]:
    """Every class whose options the reference must list, by class name."""
    from sandbox_kernel.backends import backend_names, get_backend_class

    classes = {name: getattr(importlib.import_module(module), name) for name, module in DOORS.items()}
    for backend in backend_names():
        cls = get_backend_class(backend)
        classes[cls.__name__] = cls
    return classes


def full_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def ours(trait: TraitType) -> bool:
    """Whether a sandbox-kernel class defined the trait (not ipykernel or traitlets)."""
    owner = getattr(trait, "this_class", None)
    return owner is not None and owner.__module__.startswith("sandbox_kernel")


def trait_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """``{trait}`Class.option``` → a link to that option's reference entry (checked);
    ``{trait}`title <Class.option>``` shows ``title``."""
    titled = re.match(r"^(.+?)\s*<(.+)>$", text)
    title, text = titled.groups() if titled else (None, text)
    short = text.startswith("~")
    target = text.lstrip("~")
    cls_name, _, option = target.partition(".")
    classes = inliner.document.settings.env.app.sandbox_configurables
    cls = classes.get(cls_name)
    where = inliner.document.settings.env.docname
    if cls is None:
        logger.warning(f"{{trait}}`{text}`: no configurable class {cls_name!r} (one of {', '.join(sorted(classes))})",
                       location=(where, lineno))
        return [nodes.literal(rawtext, target)], []
    traits = cls.class_traits(config=True)
    if option not in traits:
        close = difflib.get_close_matches(option, list(traits), n=1)
        hint = f"; did you mean {cls_name}.{close[0]}?" if close else ""
        logger.warning(f"{{trait}}`{text}`: {cls_name} has no option {option!r}{hint}", location=(where, lineno))
        return [nodes.literal(rawtext, target)], []
    ref = pending_xref(rawtext, refdomain="py", reftype="attr", reftarget=f"{full_name(cls)}.{option}",
                       refexplicit=True, refwarn=True, refdoc=where)
    shown = title or (option if short else target)
    ref += nodes.literal(rawtext, shown, classes=["xref", "py", "py-attr"])
    return [ref], []


SPELLED = re.compile(r"(?:--|\bc\.|%config\s+)([A-Z]\w*)\.([a-z_]\w*)")
"""An option as a page spells it in code: ``--Class.name``, ``c.Class.name``, ``%config Class.name``."""


def unknown_options(text: str, classes: dict[str, type]) -> list[tuple[int, str]]:
    """``(line, message)`` for each option ``text`` spells (:data:`SPELLED`) that a class of
    ``classes`` does not have; names of other classes (``IdentityProvider.token``) are not ours."""
    found = []
    for match in SPELLED.finditer(text):
        cls = classes.get(match[1])
        if cls is None or match[2] in cls.class_traits(config=True):
            continue
        if text[:match.start()].endswith("unknown option "):  # a page quoting the error for a misspelt one
            continue
        close = difflib.get_close_matches(match[2], list(cls.class_traits(config=True)), n=1)
        hint = f"; did you mean {match[1]}.{close[0]}?" if close else ""
        found.append((text.count("\n", 0, match.start()) + 1, f"{match[1]} has no option {match[2]!r}{hint}"))
    return found


def check_source(app, docname, source):
    """Every option a page spells out exists (see :func:`unknown_options`)."""
    for line, message in unknown_options(source[0], app.sandbox_configurables):
        logger.warning(message, location=(docname, line), type="sandbox", subtype="option")


RST_SPECIAL = re.compile(r"([\\*`|_\[\]])")


def trait_docstring(app, what, name, obj, options, lines):
    """A trait's help as escaped plain text; an option of ours without help is a warning."""
    if not isinstance(obj, TraitType) or not obj.metadata.get("config"):
        return
    help_text = (obj.help or "").strip()
    if ours(obj) and help_text in NO_HELP:
        logger.warning(f"option {name.rsplit('.', 2)[-2]}.{obj.name} has no help text: give its trait help=\"...\" "
                       f"where it is defined ({obj.this_class.__module__})", type="sandbox", subtype="help")
    lines[:] = [RST_SPECIAL.sub(r"\\\1", line) for line in (help_text or "(no help)").splitlines()]


def record_class(app, what, name, obj, options, lines):
    if what in ("class", "configurable") and isinstance(obj, type):
        app.env.sandbox_documented.add(name)


def skip_inherited(app, what, name, obj, skip, options):
    """Leave out traits of a documented sandbox-kernel class that ipykernel or traitlets define."""
    if isinstance(obj, TraitType) and obj.metadata.get("config") and not ours(obj):
        return True
    return None


def check_coverage(app, env):
    """Every class of :func:`configurables` was documented with ``autoconfigurable``."""
    missing = [name for name, cls in app.sandbox_configurables.items()
               if full_name(cls) not in env.sandbox_documented]
    for name in sorted(missing):
        logger.warning(f"the options of {name} are in no reference page: add an autoconfigurable of "
                       f"{full_name(app.sandbox_configurables[name])} (docs/reference/)", type="sandbox",
                       subtype="coverage")


def init_env(app, env, docnames):
    if not hasattr(env, "sandbox_documented"):
        env.sandbox_documented = set()


def merge(app, env, docnames, other):
    env.sandbox_documented |= getattr(other, "sandbox_documented", set())


class OptionDocumenter(TraitDocumenter):
    """autodoc-traits' entry, with the default as one writes it (``'1g'``, ``['ALL']``: the
    trait's ``default_value_repr``, as ``--help-all`` shows it) instead of the raw value, and
    no path of the machine that built the docs (``sys.executable``)."""

    priority = TraitDocumenter.priority + 1

    def add_directive_header(self, sig):
        trait = self.object
        try:
            default = trait.default_value_repr()
        except Exception:  # noqa: BLE001 (a trait type that cannot say it)
            default = ""
        default = default.replace(sys.executable, "sys.executable")
        self.options.annotation = f"{type(trait).__name__}({default})"
        super(TraitDocumenter, self).add_directive_header(sig)


def setup(app):
    app.setup_extension("autodoc_traits")
    app.registry.add_documenter("trait", OptionDocumenter)  # autodoc-traits registered the directive
    app.sandbox_configurables = configurables()
    app.add_role("trait", trait_role)
    app.connect("source-read", check_source)
    app.connect("env-before-read-docs", init_env)
    app.connect("env-merge-info", merge)
    app.connect("autodoc-process-docstring", trait_docstring)
    app.connect("autodoc-process-docstring", record_class)
    app.connect("autodoc-skip-member", skip_inherited)
    app.connect("env-check-consistency", check_coverage)
    return {"parallel_read_safe": True, "env_version": 1}
