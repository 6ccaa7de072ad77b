"""What runs in the sandbox to notice the files a cell creates or changes in the working directory
(sent as code; the sandbox needs nothing of this project). The sandbox is not trusted: the host
checks and bounds what it reports (:func:`.artifacts.parse`).

:func:`install` is run (silently) once per sandbox start: it records the working directory as it
is, then registers an IPython ``post_run_cell`` hook. After each cell (``post_run_cell`` fires for
non-silent executions only) the hook scans the directory again and, when something was created or
changed, publishes one ``display_data`` of :data:`MIME` in that cell, which the session takes out
of the cell's outputs before anything else sees it.

The scan follows no symlink, skips dotfiles, dot-folders and ``__pycache__`` (caches; dotfiles are
never copied back anyway), skips folders the kernel cannot write (read-only binds and copies of
the workspace), stops after ``MAX_SCANNED`` entries, and does not list again a folder of more than ``PRUNE``
files whose modification time did not change (no name was added, removed or renamed in it): a
file rewritten in place there is not noticed.
"""

from __future__ import annotations

import json

MIME = "application/vnd.sandbox-kernel.artifacts+json"
MAX_SCANNED = 20_000
PRUNE = 500
MAX_NAMES = 1000
THUMB_BYTES = 256 * 1024
THUMBS = 4

_CODE = r'''
def _sandbox_kernel_artifacts(mime, max_scanned, prune, max_names, thumb_bytes, thumbs):
    import base64, os, stat, sys, types
    name = "_sandbox_kernel_artifacts"
    ip = get_ipython()
    old = sys.modules.get(name)
    if old is not None:
        try:
            ip.events.unregister("post_run_cell", old.hook)
        except ValueError:
            pass
    state = types.ModuleType(name)
    state.files, state.dirs = {}, {}

    def scan():
        root = os.getcwd()
        files, dirs, changed, scanned, truncated = {}, {}, [], 0, False
        stack = [""]
        while stack and not truncated:
            rel = stack.pop()
            where = os.path.join(root, rel) if rel else root
            try:
                mtime = os.stat(where).st_mtime_ns
            except OSError:
                continue
            known = state.dirs.get(rel)
            if known is not None and known[0] == mtime and len(known[1]) > prune:
                dirs[rel] = known  # a big folder whose names did not change: its files as they were
                files.update((p, state.files[p]) for p in known[1] if p in state.files)
                stack.extend(known[2])
                continue
            try:
                listing = list(os.scandir(where))
            except OSError:
                continue
            mine, inner = [], []
            for entry in listing:
                scanned += 1
                if scanned > max_scanned:
                    truncated = True
                    break
                if entry.name.startswith(".") or entry.name == "__pycache__":
                    continue  # caches and dotfiles (a HOME below it keeps .cache): never copied back
                path = rel + "/" + entry.name if rel else entry.name
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if os.access(entry.path, os.W_OK):
                            inner.append(path)
                        continue
                    if not entry.is_file(follow_symlinks=False):
                        continue
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                mine.append(path)
                files[path] = (st.st_size, st.st_mtime_ns)
                if state.files.get(path) != files[path]:
                    changed.append((path, st.st_size, path not in state.files))
            dirs[rel] = (mtime, mine, inner)
            stack.extend(inner)
        if truncated:  # what was not looked at is kept as it was
            for path, sig in state.files.items():
                files.setdefault(path, sig)
        state.files, state.dirs = files, dirs
        return changed, truncated

    def hook(result=None):
        changed, truncated = scan()
        if not changed and not truncated:
            return
        changed.sort()
        shown, pictures = [], {}
        for path, size, new in changed[:max_names]:
            shown.append([path, size, new])
            low = path.lower()
            if len(pictures) < thumbs and size <= thumb_bytes and low.endswith((".png", ".jpg", ".jpeg")):
                try:
                    with open(path, "rb") as f:
                        pictures[path] = base64.b64encode(f.read(thumb_bytes + 1)).decode()
                except OSError:
                    pass
        report = {"files": shown, "count": len(changed), "bytes": sum(c[1] for c in changed),
                  "truncated": truncated, "thumbs": pictures}
        from IPython.display import publish_display_data
        publish_display_data({mime: report})

    state.scan, state.hook = scan, hook
    sys.modules[name] = state
    scan()
    ip.events.register("post_run_cell", hook)
'''


def install() -> str:
    """The code that (re)installs the hook in the sandbox's IPython, run silently at each start."""
    args = ", ".join(json.dumps(a) for a in (MIME, MAX_SCANNED, PRUNE, MAX_NAMES, THUMB_BYTES, THUMBS))
    return f"{_CODE}\ntry:\n    _sandbox_kernel_artifacts({args})\nfinally:\n    del _sandbox_kernel_artifacts\n"
