"""The documentation's examples run as they stand: every code block that README.md or a page of
docs/ marks runnable, on the backend its marker names, each in a fresh process; what a
``print(...)  # EXPECTED`` comment promises appears in the output. And the README stays a
two-minute read whose links lead somewhere.

A runnable block is a fenced block right after an HTML comment (invisible on GitHub and in the
site)::

    <!-- runnable docker -->
    ```python
    ...
    ```

The first word is the backend the block needs, which sets its tier: ``scripted`` (unit: no
sandbox), ``local`` (kernel), ``docker`` (docker). Languages: ``python`` (a program), ``bash``
(a shell in a temporary folder, with this environment's ``bin`` first on PATH), ``ipython``
(IPython cells, one per paragraph, as a notebook on the ``python3`` kernel runs them). Options
after the backend: ``kernel=NAME`` runs a ``python`` block as one cell of the installed kernelspec
``NAME``, ``options="--Class.option=VALUE ..."`` adds to its argv, and ``cwd=PATH`` (from the
repository's root) is the folder it starts in.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
TIERS = {"scripted": "unit", "local": "kernel", "docker": "docker"}
LANGUAGES = ("python", "bash", "ipython")
MARKER = re.compile(r"^<!-- runnable (?P<args>[^>]*?) -->\n+```(?P<lang>\w+)\n(?P<code>.*?)^```", re.S | re.M)
README_MAX_BYTES = 8 * 1024


@dataclass
class Block:
    """One runnable block: where it is, what it needs, and its code."""

    page: Path
    line: int
    backend: str
    language: str
    code: str
    options: dict[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def blocks() -> list[Block]:
    """Every runnable block of README.md and docs/, in page order."""
    found = []
    for page in PAGES:
        text = page.read_text()
        for match in MARKER.finditer(text):
            backend, *rest = shlex.split(match["args"])
            options = dict(word.split("=", 1) for word in rest)
            found.append(Block(page, text.count("\n", 0, match.start()) + 1, backend, match["lang"], match["code"],
                               options))
    return found


BLOCKS = blocks()


def expectations(code: str) -> list[str]:
    """The text each ``print(...)  # EXPECTED  (remark)`` comment promises."""
    found = []
    for comment in re.findall(r"print\(.*\)\s+# (.+)$", code, re.M):
        found.append(comment.split("  (")[0].removesuffix("...").strip())
    return found


@pytest.mark.unit
def test_the_markers_are_well_formed():
    """Every ``<!-- runnable`` comment is followed by a block this module can run."""
    for page in PAGES:
        text = page.read_text()
        markers = re.findall(r"^<!-- runnable ", text, re.M)  # (an indented one is an example of the syntax)
        assert len(markers) == len(MARKER.findall(text)), f"{page}: a runnable marker without its block"
    assert len(BLOCKS) >= 10
    for block in BLOCKS:
        assert block.backend in TIERS, f"{block.id}: unknown backend {block.backend!r} (one of {', '.join(TIERS)})"
        assert block.language in LANGUAGES, f"{block.id}: cannot run a {block.language} block"
        assert set(block.options) <= {"kernel", "options", "cwd"}, f"{block.id}: unknown option in {block.options}"


@pytest.mark.unit
def test_the_readme_is_a_two_minute_read():
    assert len((REPO / "README.md").read_bytes()) <= README_MAX_BYTES


@pytest.mark.unit
def test_the_readmes_links_lead_somewhere():
    """Every relative link of the README names a file of this tree (its pages are the site's
    sources; `make docs` checks the links between pages)."""
    readme = (REPO / "README.md").read_text()
    targets = [t for t in re.findall(r"\]\(([^)]+)\)", readme) if not re.match(r"\w+://|#|mailto:", t)]
    assert len(targets) >= 20
    for target in targets:
        assert (REPO / target.split("#")[0]).is_file(), f"README links to {target}, which is not there"


@pytest.mark.unit
def test_the_readmes_options_exist():
    """Every option the README spells out (``--DockerBackend.memory_limit=2g``) exists, as
    ``make docs`` checks for the site's pages (docs/_ext/sandbox_options.py)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("sandbox_options", REPO / "docs" / "_ext" / "sandbox_options.py")
    options = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(options)
    readme = (REPO / "README.md").read_text()
    assert options.SPELLED.search(readme), "the README names no option: the check checks nothing"
    assert options.unknown_options(readme, options.configurables()) == []


def run_python(block: Block, tmp_path: Path) -> str:
    return _run([sys.executable, "-c", block.code], block, tmp_path)


def run_bash(block: Block, tmp_path: Path) -> str:
    env = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", "HOME": str(tmp_path)}
    return _run(["bash", "-euo", "pipefail", "-c", block.code], block, tmp_path, env)


IPYTHON_DRIVER = textwrap.dedent("""
    import sys
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    for cell in sys.argv[1:]:
        result = shell.run_cell(cell)
        if not result.success:
            sys.exit(f"the cell failed: {cell.splitlines()[0]}: {result.error_in_exec or result.error_before_exec!r}")
    shell.run_cell("%sandbox stop --all")
""")


def run_ipython(block: Block, tmp_path: Path) -> str:
    """Each paragraph of the block is a cell, run in one IPython shell (a subprocess)."""
    cells = [cell.strip("\n") for cell in re.split(r"\n\s*\n", block.code) if cell.strip()]
    return _run([sys.executable, "-c", IPYTHON_DRIVER, *cells], block, tmp_path)


def run_kernel_cell(block: Block, tmp_path: Path) -> str:
    """The block as one cell of the installed kernelspec ``block.options["kernel"]``."""
    from tests.kernels import kernel, run, stdout

    name = block.options["kernel"].removeprefix("sandbox-")
    cwd = str(REPO / block.options["cwd"]) if "cwd" in block.options else str(tmp_path)
    with kernel(name, *shlex.split(block.options.get("options", "")), cwd=cwd) as (_, kc):
        reply, outputs = run(kc, block.code, timeout=300)
    assert reply["status"] == "ok", f"{block.id}: {reply.get('ename')}: {reply.get('evalue')}"
    results = [m["content"]["data"].get("text/plain", "") for m in outputs
               if m["header"]["msg_type"] in ("execute_result", "display_data")]
    return stdout(outputs) + "\n".join(results)


def _run(argv: list[str], block: Block, tmp_path: Path, env: dict[str, str] | None = None) -> str:
    cwd = REPO / block.options["cwd"] if "cwd" in block.options else tmp_path
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=600,
                          env={**os.environ, **(env or {})})
    assert done.returncode == 0, f"{block.id} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.mark.parametrize("block", [pytest.param(b, id=b.id, marks=getattr(pytest.mark, TIERS.get(b.backend, "unit")))
                                   for b in BLOCKS])
def test_the_block_runs(block: Block, tmp_path: Path):
    if block.backend != "scripted":
        from tests.support.backends import prepared

        prepared(block.backend)
    if "kernel" in block.options:
        shown = run_kernel_cell(block, tmp_path)
    else:
        shown = {"python": run_python, "bash": run_bash, "ipython": run_ipython}[block.language](block, tmp_path)
    for expected in expectations(block.code):
        assert expected in shown, f"{block.id}: {expected!r} not in the output:\n{shown}"


@pytest.mark.browser
def test_the_screenshot_script_still_runs(tmp_path: Path):
    """docs/screenshots.py (``make screenshots``, run by hand) takes the Launcher's screenshot in
    JupyterLab and Chromium, so a change of JupyterLab or of the script is found here, not at the
    next release's screenshots."""
    from tests.browser import CHROMIUM
    from tests.targets import skip_or_fail

    if not os.access(CHROMIUM, os.X_OK):
        skip_or_fail(f"no Chromium at {CHROMIUM} (run `bash .ci/browser-setup.sh` as root)")
    done = subprocess.run([sys.executable, str(REPO / "docs" / "screenshots.py"), "--out", str(tmp_path), "--only",
                           "launcher"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    from PIL import Image

    with Image.open(tmp_path / "launcher.png") as shot:
        assert shot.size == (1280, 860)
        assert len(shot.getcolors(256) or []) > 8  # a page, not a blank

