"""A small nbgrader course, as a teacher makes one: an assignment ``ps1`` of two graded answers (1
point each), the students' submissions, and ``nbgrader autograde`` run on a kernelspec (the
source notebook's, which nbgrader also imposes on every submission). Used by tests/test_grading.py
and benchmarks/grading.py.

nbgrader 0.9 runs ``alembic`` from PATH: the commands here put this Python's bin folder first.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import nbformat

SOLVED = ("return x * x", "return sum(xs)")
WRONG = ("return x * x", "return 0")
FORK_BOMB = "import os\nfor _ in range(100000):\n    os.fork()"
ENDLESS = "while True:\n    pass"
HUGE_OUTPUT = "print('x' * 50_000_000)"
READ_OTHERS = "print(open('../../ada/ps1/problem.ipynb').read()[:60])"
HOSTILE = [FORK_BOMB, ENDLESS, HUGE_OUTPUT, READ_OTHERS]
"""What a hostile submission adds before its answers: a fork bomb, an endless loop, 50 MB of
output and a read of another student's submission (the notebook's folder is the kernel's cwd)."""
CONFIG = """c = get_config()
c.CourseDirectory.root = {root!r}
c.CourseDirectory.course_id = "sandbox101"
c.Execute.timeout = {timeout}
c.Execute.interrupt_on_timeout = True
"""


def _cell(source: str, **nbgrader: object) -> nbformat.NotebookNode:
    meta = {"nbgrader": {"schema_version": 3, "locked": False, "solution": False, "grade": False, **nbgrader}}
    return nbformat.v4.new_code_cell(source, metadata=meta)


def make_course(root: Path, kernel: str, timeout: int = 20) -> None:
    """The course folder: its config and ``source/ps1/problem.ipynb`` on ``kernel``."""
    cells = [_cell("def square(x):\n    ### BEGIN SOLUTION\n    return x * x\n    ### END SOLUTION", solution=True,
                   grade_id="square"),
             _cell("assert square(3) == 9", grade=True, grade_id="test_square", points=1, locked=True),
             _cell("def total(xs):\n    ### BEGIN SOLUTION\n    return sum(xs)\n    ### END SOLUTION", solution=True,
                   grade_id="total"),
             _cell("assert total([1, 2, 3]) == 6", grade=True, grade_id="test_total", points=1, locked=True)]
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": kernel, "display_name": kernel, "language": "python"}
    (root / "source" / "ps1").mkdir(parents=True)
    nbformat.write(notebook, root / "source" / "ps1" / "problem.ipynb")
    (root / "nbgrader_config.py").write_text(CONFIG.format(root=str(root), timeout=timeout))


def nbgrader(root: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 1800) -> str:
    """Run ``nbgrader ARGS`` in the course; returns its output (raises with it on failure)."""
    bin_dir = str(Path(sys.executable).parent)
    environ = {**os.environ, **(env or {}), "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=root, env=environ, capture_output=True,
                          text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done.stdout + done.stderr


def release(root: Path, students: list[str]) -> None:
    """Release ``ps1`` and enrol ``students`` (one ``nbgrader db student import``)."""
    nbgrader(root, "generate_assignment", "ps1", "--force")
    (root / "students.csv").write_text("id\n" + "".join(f"{student}\n" for student in students))
    nbgrader(root, "db", "student", "import", "students.csv")


def submit(root: Path, student: str, answers: tuple[str, str], extra: list[str] = (), kernel: str | None = None) -> None:
    """``submitted/STUDENT/ps1/problem.ipynb``: the released notebook with ``answers`` and the
    cells ``extra`` before them; ``kernel``: a kernelspec the student put in its metadata."""
    notebook = nbformat.read(root / "release" / "ps1" / "problem.ipynb", as_version=4)
    stub = "# YOUR CODE HERE\n    raise NotImplementedError()"
    notebook.cells[0].source = notebook.cells[0].source.replace(stub, answers[0])
    notebook.cells[2].source = notebook.cells[2].source.replace(stub, answers[1])
    notebook.cells[0:0] = [nbformat.v4.new_code_cell(source) for source in extra]
    if kernel is not None:
        notebook.metadata["kernelspec"] = {"name": kernel, "display_name": kernel, "language": "python"}
    folder = root / "submitted" / student / "ps1"
    folder.mkdir(parents=True)
    nbformat.write(notebook, folder / "problem.ipynb")


def grades(root: Path) -> dict[str, float]:
    """``{student: score}`` from ``nbgrader export``."""
    nbgrader(root, "export")
    with open(root / "grades.csv") as table:
        return {row["student_id"]: float(row["score"]) for row in csv.DictReader(table)}


def outputs(root: Path, student: str) -> list[str]:
    """The text of each cell's outputs in ``autograded/STUDENT/ps1/problem.ipynb``, cell by cell."""
    notebook = nbformat.read(root / "autograded" / student / "ps1" / "problem.ipynb", as_version=4)
    return ["".join(out.get("text", "") or f"{out.get('ename', '')}: {out.get('evalue', '')}"
                    for out in cell.get("outputs", [])) for cell in notebook.cells]
