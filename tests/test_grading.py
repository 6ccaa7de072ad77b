"""Grading in sandboxes: nbgrader's ``autograde`` of a small course on sandbox-docker (each student's
notebook in its own sandbox), one submission hostile, and a papermill run on the same kernel.
The batch at class size, against python3: benchmarks/grading.py."""

from __future__ import annotations

import shutil

import pytest

from tests.support.grading import (
    ENDLESS,
    HOSTILE,
    SOLVED,
    WRONG,
    grades,
    make_course,
    nbgrader,
    outputs,
    release,
    submit,
)
from tests.targets import skip_or_fail

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture(autouse=True)
def needs_docker():
    from tests.support.backends import prepared

    prepared("docker")
    if shutil.which("nbgrader") is None and not _importable("nbgrader"):
        skip_or_fail("nbgrader is not installed (the test extra has it)")


def _importable(name):
    import importlib.util

    return importlib.util.find_spec(name) is not None


def test_autograde_runs_each_student_in_a_sandbox_and_a_hostile_one_harms_only_itself(tmp_path):
    # nbgrader's cell timeout at 60 s, not 20: the fork bomb ends by running out of memory after 13 s
    # here and 29 s under two busy loops; past the timeout nbclient interrupts, which does not stop
    # the bomb's forks, and then waits only 4 s for the cell's idle ("Timeout waiting for IOPub
    # output": the whole submission failed, as it did once in a loaded run)
    make_course(tmp_path, "sandbox-docker", timeout=60)
    release(tmp_path, ["ada", "bob", "eve"])
    submit(tmp_path, "ada", SOLVED)
    submit(tmp_path, "bob", WRONG)
    # eve also asks for python3 in her notebook: nbgrader runs the source's kernelspec anyway
    submit(tmp_path, "eve", SOLVED, extra=HOSTILE, kernel="python3")
    log = nbgrader(tmp_path, "autograde", "ps1")
    assert grades(tmp_path) == {"ada": 2.0, "bob": 1.0, "eve": 2.0}
    fork_bomb, endless, huge, read_others, *answers = outputs(tmp_path, "eve")
    assert fork_bomb.startswith("SandboxDied: The sandbox stopped: it ran out of memory (limit 1 GiB)") or \
        "BlockingIOError" in fork_bomb  # its forks copy the kernel: memory or the pids limit ends it
    assert "Timeout waiting for execute reply (60s)" in log and "Interrupting kernel" in log  # the endless loop
    assert huge.endswith("[37.7 MiB of output dropped (39514241 bytes); raise SandboxKernel.max_output_bytes to "
                         "see more]\n") and len(huge) < 11 * 1024**2
    assert read_others == "FileNotFoundError: [Errno 2] No such file or directory: '../../ada/ps1/problem.ipynb'"
    assert answers == ["", "", "", ""]  # both answers defined and both tests passed, in a fresh sandbox
    import nbformat

    graded = nbformat.read(tmp_path / "autograded" / "eve" / "ps1" / "problem.ipynb", as_version=4)
    assert graded.metadata.kernelspec.name == "sandbox-docker" and graded.cells[1].source == ENDLESS


def test_papermill_runs_a_parameterized_notebook_on_a_sandbox_kernel(tmp_path):
    import nbformat
    import papermill

    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("student = 'nobody'", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell("import os\nprint(student, os.getuid(), os.path.exists('/.dockerenv'))")])
    notebook.metadata["kernelspec"] = {"name": "sandbox-docker", "display_name": "sandbox-docker", "language": "python"}
    nbformat.write(notebook, tmp_path / "in.ipynb")
    papermill.execute_notebook(str(tmp_path / "in.ipynb"), str(tmp_path / "out.ipynb"), parameters={"student": "ada"},
                               kernel_name="sandbox-docker", progress_bar=False)
    ran = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    assert [out["text"] for out in ran.cells[-1].outputs] == ["ada 1000 True\n"]  # in the container
