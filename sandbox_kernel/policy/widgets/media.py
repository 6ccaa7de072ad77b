"""``Image``, ``Video`` and ``Audio`` widgets: their values are outputs too.

ipywidgets 8.1's views (controls 2.0 ``ImageView``/``VideoView``/``AudioView``) show a value
that is not a URL through ``URL.createObjectURL(new Blob([value], {type: `image/${format}`}))``
(``video/``, ``audio/``). Inert inside the ``<img>``, but the blob URL belongs to the Lab's
origin, and "Open image in new tab" (or dragging the image to the tab strip) renders it as a
document: with ``format="svg+xml"`` the SVG's script runs with the page's rights (measured in
Chromium 156: also for ``"svg+xml "``, whose trailing space the MIME parser trims, and after an
``update`` that switches a harmless PNG's ``format``).

So, unless the policy is ``trust``, a media widget's ``format`` must be one of :data:`FORMATS`
for its model, written in lower case (any other value is dropped: the view keeps its previous
format, or its default ``png``/``mp4``/``mp3``); an ``Image`` whose format is ``svg+xml`` gets
its value through the SVG rule (:meth:`~sandbox_kernel.policy.markup.Sanitizer.svg`: no
script, well-formed), on ``comm_open``, on every ``update``, in ``update_states``, and whenever
``format`` changes: the rules remember each media model's last value to police it again.
"""

from __future__ import annotations

from typing import Any

FORMATS = {
    "ImageModel": frozenset({"png", "jpeg", "jpg", "gif", "webp", "bmp", "avif", "apng", "x-icon", "svg+xml"}),
    "VideoModel": frozenset({"mp4", "webm", "ogg", "mpeg", "quicktime", "x-matroska", "3gpp"}),
    "AudioModel": frozenset({"mp3", "mpeg", "wav", "x-wav", "wave", "ogg", "webm", "aac", "flac", "mp4", "x-m4a",
                             "opus"}),
}
"""Formats (the second half of the blob's MIME type) a media view may be given: images the
browser only ever draws, and sounds and videos it only plays. ``svg+xml``: through the SVG rule."""
DEFAULTS = {"ImageModel": "png", "VideoModel": "mp4", "AudioModel": "mp3"}
"""The views' own format when the state names none (controls 2.0 model defaults)."""
VALUE = ["value"]


def police_media(policy: Any, model: Any, state: dict[str, Any], paths: list,
                 buffers: tuple) -> tuple[list, tuple, bool]:
    """``(paths, buffers, changed)`` for one message's state of a media model (``state`` is
    changed in place: its ``format`` checked); other models pass as they are. ``policy``: the
    :class:`~sandbox_kernel.policy.OutputPolicy`; ``model``: the rules'
    :class:`~.state.WidgetModel` (its ``media`` remembers the format and the last value)."""
    name = model.type.name if model.type is not None else None
    if name not in FORMATS or policy.trusts:
        return paths, buffers, False
    changed, switched = False, False
    if "format" in state:
        wanted = state.pop("format")
        fmt = wanted.lower() if isinstance(wanted, str) else None
        if fmt in FORMATS[name]:
            switched = fmt != model.media.get("format", DEFAULTS[name])
            state["format"] = model.media["format"] = fmt
        changed = fmt not in FORMATS[name] or fmt != wanted
    index = next((i for i, path in enumerate(paths) if path == VALUE), None)
    if index is not None:
        model.media["value"] = bytes(buffers[index])
    if model.media.get("format") != "svg+xml" or (index is None and not switched) or "value" not in model.media:
        return paths, buffers, changed
    clean, did = _svg(policy, model.media["value"])
    if index is None:
        return [*paths, list(VALUE)], (*buffers, clean), True
    return paths, (*buffers[:index], clean, *buffers[index + 1:]), changed or did


def _svg(policy: Any, value: bytes) -> tuple[bytes, bool]:
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        return b"", True
    clean, changed = policy.sanitizer.svg(text)
    return clean.encode("utf-8"), changed or clean != text


def police_states_media(policy: Any, models: dict[str, Any], states: dict[str, Any], paths: list,
                        buffers: tuple) -> tuple[list, tuple, bool]:
    """:func:`police_media` for each entry of an ``update_states`` reply, whose buffer paths are
    ``[model_id, "state", *path]``."""
    out_paths, out_buffers, changed = [], [], False
    for model_id, entry in states.items():
        mine = [i for i, path in enumerate(paths) if path[0] == model_id]
        new_paths, new_buffers, did = police_media(policy, models[model_id], entry["state"],
                                                   [paths[i][2:] for i in mine], tuple(buffers[i] for i in mine))
        out_paths += [[model_id, "state", *path] for path in new_paths]
        out_buffers += list(new_buffers)
        changed |= did
    return out_paths, tuple(out_buffers), changed


__all__ = ["police_media", "police_states_media", "FORMATS", "DEFAULTS"]
