"""Artifacts, the hint and ``%sandbox`` lines (issue 30) through real kernels, a real host kernel
with the magic, and the Python API: a figure a cell saves is listed after it (a thumbnail through
the output policy) and copied into the notebook's folder by the command; a missing file the
folder has gets the line that names the workspace option; ``%sandbox status`` and ``download``
in a sandbox-kernel notebook, asking the notebook user first; the bounds, for a cell that writes
10 000 files or a 2 GB file."""

from __future__ import annotations

import pytest

from tests.kernels import kernel, run, stdout

pytestmark = pytest.mark.timeout(300)

NAMES = ["local", "docker", "docker_api", "e2b", "gateway"]
CLASSES = {"local": "LocalBackend", "docker": "DockerBackend", "docker_api": "DockerBackend", "e2b": "E2BBackend",
           "gateway": "GatewayBackend"}
FIGURE = ("import matplotlib\nmatplotlib.use('agg')\nimport matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\n"
          "plt.savefig('fig.png')\nprint('saved')")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def displays(outputs: list[dict]) -> list[dict]:
    return [m["content"]["data"] for m in outputs if m["header"]["msg_type"] == "display_data"]


def answering(kc, answer: str, prompts: list[str]):
    """A stdin hook that records each prompt and answers ``answer``."""
    def hook(msg: dict) -> None:
        prompts.append(msg["content"]["prompt"])
        kc.input(answer)
    return hook


@pytest.fixture
def notebook(tmp_path):
    """A notebook's folder with data the sandbox does not see unless asked."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "x.csv").write_text("a,b\n1,2\n")
    (tmp_path / "helper.py").write_text("def plot():\n    return 42\n")
    return tmp_path


@pytest.mark.parametrize("backend_name", NAMES)
def test_a_saved_figure_is_listed_and_copied_back_by_the_command(backend_name, notebook):
    with kernel(backend_name, cwd=str(notebook)) as (_, kc):
        reply, outputs = run(kc, "import pandas as pd\npd.read_csv('data/x.csv')", timeout=120)
        assert reply["status"] == "error" and reply["ename"] == "FileNotFoundError"
        assert reply["traceback"][-1] == (
            f"data/x.csv is in {notebook} on this computer, but the sandbox does not see that folder. Let it see "
            f"the folder: --{CLASSES[backend_name]}.workspace=ro on the kernelspec (sandbox-kernel install --backend "
            f"{backend_name.split('_')[0]} -- --{CLASSES[backend_name]}.workspace=ro); or copy the file in: "
            "%sandbox upload data/x.csv")
        reply, outputs = run(kc, "import helper", timeout=120)
        assert "helper.py is in" in reply["traceback"][-1]
        reply, outputs = run(kc, FIGURE, timeout=120)
        assert reply["status"] == "ok" and stdout(outputs) == "saved\n"
        listing = displays(outputs)[-1]
        assert listing["text/plain"].startswith("1 file written:\n  fig.png  ")
        assert listing["text/plain"].endswith("Copy it to this folder: %sandbox download --artifacts\n")
        assert '<img src="data:image/png;base64,' in listing["text/html"]  # the thumbnail, as the policy left it
        reply, outputs = run(kc, "%sandbox status", timeout=60)
        assert reply["status"] == "ok" and f"backend: {backend_name.split('_')[0]}" in stdout(outputs)
        assert "artifacts: 1 files written so far" in stdout(outputs)
        prompts: list[str] = []
        reply, outputs = run(kc, "%sandbox download --artifacts", timeout=120, allow_stdin=True,
                             stdin_hook=answering(kc, "y", prompts))
        assert reply["status"] == "ok", outputs
        assert prompts == [f"Copy 1 file (fig.png) from the sandbox into {notebook}? [y/N] "]
        assert stdout(outputs).startswith("Copied 1 file (") and stdout(outputs).rstrip().endswith(": fig.png")
    assert (notebook / "fig.png").read_bytes().startswith(PNG_MAGIC)


@pytest.mark.kernel
def test_sandbox_lines_that_touch_this_computer_s_files_ask_first_and_refuse_without_stdin(notebook):
    with kernel("local", cwd=str(notebook)) as (_, kc):
        assert run(kc, "open('out.txt', 'w').write('made in the sandbox')", timeout=60)[0]["status"] == "ok"
        reply, _ = run(kc, "%sandbox download out.txt", allow_stdin=False)  # as nbclient and papermill send it
        assert reply["status"] == "error" and reply["evalue"].startswith(
            "%sandbox upload/download touch this computer's files, and this run has no way to ask you (no stdin: "
            "nbclient, papermill): allow them with --SandboxKernel.file_commands=allow")
        prompts: list[str] = []
        reply, _ = run(kc, "%sandbox download out.txt\nprint('after')", allow_stdin=True,
                       stdin_hook=answering(kc, "n", prompts))
        assert reply["status"] == "error" and reply["evalue"] == "Not copied: you said no."
        assert not (notebook / "out.txt").exists()
        reply, outputs = run(kc, "%sandbox upload data/x.csv copied.csv\nprint(open('copied.csv').read())",
                             allow_stdin=True, stdin_hook=answering(kc, "yes", prompts))
        assert reply["status"] == "ok" and stdout(outputs).endswith("a,b\n1,2\n\n")
        assert prompts[-1].startswith(f"Copy {notebook}/data/x.csv (8 bytes) into the sandbox as copied.csv?")
        reply, outputs = run(kc, "%sandbox frobnicate")  # not the kernel's: the sandbox's IPython answers
        assert reply["status"] == "error" and reply["evalue"] == "Line magic function `%sandbox` not found."
    # file_commands=allow and deny: test_frontdoors_lines.py, in process


@pytest.mark.kernel
def test_a_cell_writing_10_000_files_or_2_gb_is_reported_within_bounds(notebook):
    with kernel("local", "--SandboxKernel.file_commands=allow", cwd=str(notebook)) as (_, kc):
        reply, outputs = run(kc, "import os\nos.makedirs('out')\nfor i in range(10_000):\n"
                                 "    open(f'out/f{i:05}.txt', 'w').write('x')\n"
                                 "with open('big.bin', 'wb') as f:\n    f.truncate(2 * 1024**3)", timeout=240)
        assert reply["status"] == "ok"
        text = displays(outputs)[-1]["text/plain"]
        assert text.startswith("10,001 files written (2 GiB):\n  big.bin  2 GiB\n  out/f00000.txt  1 bytes\n")
        assert "  ... and 9,981 more\n" in text and len(text) < 2000
        assert sum(len(str(m["content"])) for m in outputs) < 20_000  # the page is not flooded
        reply, outputs = run(kc, "%sandbox download --artifacts", timeout=240)
        report = stdout(outputs)
    assert reply["status"] == "ok"
    # a cell's report names 1000 files at most (big.bin and 999 others); the rest is counted
    assert report.startswith(f"Copied 999 files (999 bytes) to {notebook}: out/f00000.txt")
    assert "Not copied: big.bin (over the 1 GiB bound)" in report
    assert "9,001 more files were written than were listed; copy them with %sandbox download PATH." in report
    assert not (notebook / "big.bin").exists() and len(list((notebook / "out").iterdir())) == 999


@pytest.mark.parametrize("backend_name", ["local", "docker"])
def test_the_magic_lists_and_copies_back_a_figure(backend_name, tmp_path):
    from tests.support.host import host_kernel

    (tmp_path / "notes.txt").write_text("on the host")
    with host_kernel(backend_name, cwd=tmp_path) as (_, kc):
        reply, outputs = run(kc, f"%%sandbox --backend {backend_name} --name art\n{FIGURE}", timeout=300)
        assert reply["status"] == "ok", outputs
        reply, _ = run(kc, "%%sandbox --name art\nopen('notes.txt')")
        assert reply["traceback"][-1] == (f"notes.txt is in {tmp_path} on this computer, but the sandbox does not see "
                                          "that folder. Let it see the folder: %sandbox stop art, then %%sandbox "
                                          "--name art --workspace ro; or copy the file in: %sandbox upload notes.txt")
        assert displays(outputs)[-1]["text/plain"].startswith("1 file written:\n  fig.png  ")
        reply, outputs = run(kc, "%sandbox artifacts --name art")
        assert stdout(outputs).startswith("1 file written:\n  fig.png")
        reply, outputs = run(kc, "%sandbox download --artifacts --name art", timeout=120)
        assert reply["status"] == "ok" and stdout(outputs).rstrip().endswith(": fig.png")
        (tmp_path / "fig.png").write_bytes(b"yours")
        reply, _ = run(kc, "%sandbox download fig.png --name art")  # never over a file of yours, as the kernel's
        assert reply["status"] == "error" and "fig.png exists: add --overwrite to replace it." in reply["evalue"]
        assert (tmp_path / "fig.png").read_bytes() == b"yours"
        reply, outputs = run(kc, "%sandbox download fig.png --overwrite --name art")
        assert reply["status"] == "ok" and stdout(outputs).startswith("Downloaded fig.png from session 'art'")
        run(kc, "%sandbox stop art")
    assert (tmp_path / "fig.png").read_bytes().startswith(PNG_MAGIC)


@pytest.mark.kernel
def test_the_api_returns_artifacts_and_copies_them(tmp_path):
    from sandbox_kernel import Sandbox

    (tmp_path / "notes.txt").write_text("on the host")
    with Sandbox("local", workspace_dir=str(tmp_path)) as sandbox:  # the workspace itself stays off
        hinted = sandbox.run("open('notes.txt')").error.traceback[-1]
        assert "Let it see the folder: workspace='ro';" in hinted
        result = sandbox.run(FIGURE)
        assert [(a.path, a.new) for a in result.artifacts] == [("fig.png", True)] and not result.displays
        assert sandbox.run("1").artifacts == ()
        done = sandbox.download_artifacts(tmp_path / "out")
    assert done.copied == [tmp_path / "out" / "fig.png"]
    assert (tmp_path / "out" / "fig.png").read_bytes().startswith(PNG_MAGIC)
