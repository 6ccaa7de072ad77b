"""Execute a notebook through its sandbox kernel with nbclient; write the executed notebook and
an HTML rendering; print one line per cell with the output types it produced. The kernel's own
log (e.g. ipykernel's notice that the frontend reaches it over local TCP) goes to OUT/NAME.log.

    python scripts/demo.py notebooks/quickstart.ipynb build/
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbconvert import HTMLExporter


def describe(output: dict) -> str:
    kind = output["output_type"]
    if kind == "stream":
        return f"stream:{output['name']}"
    if kind in ("display_data", "execute_result"):
        return f"{kind}[{','.join(sorted(output['data']))}]"
    if kind == "error":
        return f"error:{output['ename']}"
    return kind


def main(source: str, out_dir: str) -> int:
    nb = nbformat.read(source, as_version=4)
    kernel = nb.metadata.kernelspec.name
    print(f"executing {source} on kernel {kernel} ...")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = Path(source).stem
    with open(out / f"{stem}.log", "wb") as log:
        client = NotebookClient(nb, timeout=300, kernel_name=kernel, resources={"metadata": {"path": "."}})
        client.execute(stdout=log, stderr=log)
    nbformat.write(nb, out / f"{stem}.ipynb")
    html, _ = HTMLExporter().from_notebook_node(nb)
    (out / f"{stem}.html").write_text(html)
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    for number, cell in enumerate(code_cells, 1):
        kinds = ", ".join(describe(o) for o in cell.outputs) or "(no output)"
        print(f"cell {number:2d} [{cell.execution_count}]: {kinds}")
    print(f"wrote {out / (stem + '.ipynb')} and {out / (stem + '.html')}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
