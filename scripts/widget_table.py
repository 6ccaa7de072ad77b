"""Write ``sandbox_kernel/policy/widgets/models.json``: every standard widget model's synced traits and types.

The table the widget rules check state against (:mod:`sandbox_kernel.policy.widgets.types`), derived
from the installed ipywidgets' Python classes: each ``Widget`` subclass in ``ipywidgets`` gives
its model (``_model_module``, ``_model_name``), its view (``_view_module``, ``_view_name``) and
its traits tagged ``sync=True``; traits of classes sharing a model are merged. Where a view puts
a trait into the page other than as text (innerHTML, MathJax, CSS, classes, a URL), the trait
carries a ``sink``, read off the views of @jupyter-widgets/controls 2.0 / base 2.0 / output 1.0
(ipywidgets 8.1, ``packages/*/src``), cited at each entry of :data:`SINKS` below.

    .venv/bin/python scripts/widget_table.py            # rewrite the table
    .venv/bin/python scripts/widget_table.py --check    # exit 1 if it differs from ipywidgets

``tests/test_widget_types.py`` runs :func:`build` against the installed ipywidgets, so drift
fails loudly.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

TABLE = Path(__file__).resolve().parent.parent / "sandbox_kernel" / "policy" / "widgets" / "models.json"
STANDARD = ("@jupyter-widgets/base", "@jupyter-widgets/controls", "@jupyter-widgets/output")

# Style traits → the CSS property the style model sets (``styleProperties`` in
# controls/src/widget_{description,string,button,int,selection,bool}.ts; ``StyleView.handleChange``
# in base/src/widget_style.ts calls ``style.setProperty(attribute, value)``).
STYLE_CSS = {
    "description_width": "width", "background": "background", "font_size": "font-size", "text_color": "color",
    "font_family": "font-family", "font_style": "font-style", "font_variant": "font-variant",
    "font_weight": "font-weight", "text_decoration": "text-decoration", "button_color": "background-color",
    "handle_color": "background-color", "bar_color": "background-color", "button_width": "width",
}

# (model, trait) → how its view puts it into the page, when not as text.
SINKS = {
    # widget_string.ts HTMLView.update: content.innerHTML = value
    ("HTMLModel", "value"): "html",
    # widget_string.ts HTMLMathView.update: content.innerHTML = value; typeset(content)
    ("HTMLMathModel", "value"): "html",
    # widget_string.ts LabelView.update: typeset(el, value) (textContent, then MathJax)
    ("LabelModel", "value"): "tex",
    # widget_button.ts ButtonView.update: classList.add(...icon.split(/\s+/).map(v => `fa-${v}`))
    ("ButtonModel", "icon"): "icon",
    # widget_selection.ts ToggleButtonsView.update: icon.className = 'fa fa-' + icons[i]
    ("ToggleButtonsModel", "icons"): "fa_icon",
    # widget_tagsinput.ts ColorsInputView.createTag: tag.style.backgroundColor = color
    ("ColorsInputModel", "value"): "css:background-color",
    # widget_image.ts/widget_video.ts/widget_audio.ts: format 'url' makes value a URL to load
    ("ImageModel", "format"): "media_format",
    ("VideoModel", "format"): "media_format",
    ("AudioModel", "format"): "media_format",
    # output/src/output.ts: outputs rendered by a trusted OutputAreaModel
    ("OutputModel", "outputs"): "outputs",
    # widget_link.ts DirectionalLinkModel.updateValue: target.set(attr, source.get(attr))
    ("LinkModel", "source"): "link", ("LinkModel", "target"): "link",
    ("DirectionalLinkModel", "source"): "link", ("DirectionalLinkModel", "target"): "link",
}
# Every model's: widget_description.ts / widget_bool.ts updateDescription: innerHTML =
# inline_sanitize(description) when description_allow_html, else textContent; then typeset.
TRAIT_SINKS = {"description": "description", "_dom_classes": "classes"}

# Traits whose Python type says less than the JSON the kernel sends.
TYPES = {
    ("SelectionRangeSliderModel", "index"): {"tuple": ["int", "int"]},  # Tuple((0, 0)), widget_selection.py
    ("OutputModel", "outputs"): {"list": "output"},  # nbformat output dicts, widget_output.py
    ("FileUploadModel", "value"): {"list": "file"},  # _serialize_value, widget_upload.py
}


def _widget_classes():
    import ipywidgets
    from ipywidgets.widgets.widget import Widget

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    return ipywidgets, sorted({c for c in subclasses(Widget) if c.__module__.startswith("ipywidgets.")},
                              key=lambda c: (c.__module__, c.__qualname__))


def _models_of(klass, classes) -> list[str] | None:
    """Model names a widget reference to ``klass`` may name; None: any widget."""
    if klass.__name__ in ("Widget", "DOMWidget", "CoreWidget"):
        return None
    return sorted({c._model_name.default_value for c in classes if issubclass(c, klass)})


def _type(trait, classes):
    """A traitlets trait as the table's type (see ``sandbox_kernel/policy/widgets/types.py``)."""
    import traitlets
    from ipywidgets.widgets import trait_types

    name = type(trait).__name__
    if isinstance(trait, trait_types.Color):
        out = "color"
    elif isinstance(trait, traitlets.Enum):
        out = {"enum": list(trait.values)}
    elif isinstance(trait, (traitlets.Unicode, traitlets.CUnicode)):
        out = "str"
    elif isinstance(trait, traitlets.Bool):
        out = "bool"
    elif isinstance(trait, (traitlets.Int, traitlets.CInt)):
        out = "int"
    elif isinstance(trait, (traitlets.Float, traitlets.CFloat)):
        out = "float"
    elif isinstance(trait, trait_types.CByteMemoryView):
        out = "bytes"
    elif name in ("Date", "Datetime", "Time"):
        out = name.lower()
    elif isinstance(trait, traitlets.Instance) and hasattr(trait.klass, "_model_name"):  # InstanceDict too
        models = _models_of(trait.klass, classes)
        out = "ref" if models is None else {"ref": models}
    elif name == "WidgetTraitTuple":
        out = {"tuple": ["ref", "str"]}
    elif isinstance(trait, traitlets.Union):
        out = {"union": [_type(t, classes) for t in trait.trait_types]}
    elif isinstance(trait, traitlets.Tuple) and trait._traits:
        out = {"tuple": [_type(t, classes) for t in trait._traits]}
    elif isinstance(trait, (traitlets.List, traitlets.Tuple, trait_types.TypedTuple)):
        inner = getattr(trait, "_trait", None)
        out = {"list": _type(inner, classes) if inner is not None else "scalar"}
    else:
        raise TypeError(f"no table type for the trait {trait!r} ({name}): extend scripts/widget_table.py")
    return {"null": out} if trait.allow_none else out


def _sink(model: str, trait: str) -> str | None:
    if (model, trait) in SINKS:
        return SINKS[model, trait]
    if trait in TRAIT_SINKS:
        return TRAIT_SINKS[trait]
    if trait.startswith("_"):
        return None
    if model == "LayoutModel":  # widget_layout.ts: style.setProperty(trait.replace(/_/g, '-'), value)
        return "css:" + trait.replace("_", "-")
    if model.endswith("StyleModel"):
        if trait not in STYLE_CSS:
            raise KeyError(f"{model}.{trait}: which CSS property does its view set? extend STYLE_CSS")
        return "css:" + STYLE_CSS[trait]
    return None


def build() -> dict:
    """The table: ``{"source": ..., "models": {"module:name": {...}}}``."""
    ipywidgets, classes = _widget_classes()
    models: dict[str, dict] = {}
    for cls in classes:
        module, name = cls._model_module.default_value, cls._model_name.default_value
        if module not in STANDARD:
            continue
        entry = models.setdefault(f"{module}:{name}", {
            "module": module, "name": name, "version": cls._model_module_version.default_value,
            "views": [], "traits": {}})
        view = [cls._view_module.default_value, cls._view_module_version.default_value, cls._view_name.default_value]
        if view not in entry["views"]:
            entry["views"].append(view)
        for trait_name, trait in sorted(cls.class_traits(sync=True).items()):
            spec = {"type": TYPES.get((name, trait_name)) or _type(trait, classes)}
            if (sink := _sink(name, trait_name)) is not None:
                spec["sink"] = sink
            old = entry["traits"].setdefault(trait_name, spec)
            if old.get("sink") != spec.get("sink"):
                raise ValueError(f"{name}.{trait_name}: {old} in one class, {spec} in {cls.__qualname__}")
            if old["type"] != spec["type"]:  # abstract bases (DescriptionModel): any of their subclasses' types
                kinds = old["type"]["union"] if isinstance(old["type"], dict) and "union" in old["type"] \
                    else [old["type"]]
                old["type"] = {"union": kinds + [spec["type"]] if spec["type"] not in kinds else kinds}
    for entry in models.values():
        entry["views"].sort(key=lambda v: [str(x) for x in v])
    return {"source": f"ipywidgets {ipywidgets.__version__} (scripts/widget_table.py)",
            "models": dict(sorted(models.items()))}


def dumps(table: dict) -> str:
    """One model a line, so a change to the table reads as a small diff."""
    lines = [f"  {json.dumps(key)}: {json.dumps(entry, sort_keys=True)}" for key, entry in table["models"].items()]
    return '{\n  "source": ' + json.dumps(table["source"]) + ',\n  "models": {\n' + ",\n".join(
        "  " + line for line in lines) + "\n  }\n}\n"


def main() -> int:
    text = dumps(build())
    if "--check" in sys.argv[1:]:
        same = TABLE.exists() and json.loads(TABLE.read_text())["models"] == json.loads(text)["models"]
        print("the widget table matches ipywidgets" if same else f"{TABLE} differs from the installed ipywidgets")
        return 0 if same else 1
    TABLE.write_text(text)
    print(f"wrote {TABLE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
