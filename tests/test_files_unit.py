"""The session's files side in process (issue 30): the sandbox's artifact report checked and bounded,
its listing, copying back (dotfiles, symlinks, overwrites, bounds), the FileNotFoundError hint's
reading of error texts, and the leading ``%sandbox`` lines."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

import pytest

from sandbox_kernel.core.errors import FileTooLarge
from sandbox_kernel.session.files import hints
from sandbox_kernel.session.files.artifacts import Ledger, parse, render
from sandbox_kernel.session.files.copyback import download_all
from sandbox_kernel.session.lines import leading

pytestmark = pytest.mark.unit

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 16


def report(files, **extra):
    return {"files": files, "count": extra.pop("count", len(files)), "bytes": extra.pop("bytes", 0),
            "truncated": extra.pop("truncated", False), "thumbs": extra.pop("thumbs", {})}


def test_a_report_keeps_only_plain_relative_paths_and_bounded_thumbnails():
    got = parse(report([["fig.png", 20, True], ["../etc/passwd", 1, True], ["/abs", 1, True], ["a/./b", 1, True],
                        ["ok\x1b[31m", 1, True], ["out/r.csv", 5, False], ["x", -1, True], ["y", "7", True]],
                       thumbs={"fig.png": base64.b64encode(PNG).decode(), "out/r.csv": "bm90IGFuIGltYWdl",
                               "elsewhere.png": base64.b64encode(PNG).decode()}))
    assert [(a.path, a.size, a.new) for a in got.files] == [("fig.png", 20, True), ("out/r.csv", 5, False)]
    assert list(got.thumbs) == ["fig.png"] and got.thumbs["fig.png"][0] == "image/png"
    assert parse("not a report") is None and parse({"files": "x"}) is None


def test_the_listing_is_compact_and_escapes_names():
    files = [[f"out/<b>{i}</b>.csv", 1000, True] for i in range(10_000)]
    bundle = render(parse(report(files, count=10_000, bytes=10_000_000)))
    text = bundle["text/plain"]
    assert text.startswith("10,000 files written (9.54 MiB):\n") and "... and 9,980 more\n" in text
    assert text.count("\n") == 23 and text.endswith("Copy them to this folder: %sandbox download --artifacts\n")
    assert "<b>" not in bundle["text/html"] and "&lt;b&gt;" in bundle["text/html"]
    assert len(bundle["text/html"]) < 5000  # bounded whatever the count


def test_the_listing_passes_the_output_policy_unchanged():
    from sandbox_kernel.core.events import Display
    from sandbox_kernel.policy import OutputPolicy

    bundle = render(parse(report([["fig.png", 24, True]], thumbs={"fig.png": base64.b64encode(PNG).decode()})))
    shown, policed = OutputPolicy("sanitize").display(Display(bundle, {}))
    assert not policed.changed and 'src="data:image/png;base64,' in shown.data["text/html"]


class Sandbox:
    """Files a fake download serves (a test of the host side only)."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files

    async def download(self, remote: str, local: Path, max_bytes: int) -> Path:
        if remote not in self.files:
            raise FileNotFoundError(remote)
        if max_bytes and len(self.files[remote]) > max_bytes:
            raise FileTooLarge(remote, max_bytes)
        local.write_bytes(self.files[remote])
        return local


def ledger_of(files: dict[str, bytes]) -> Ledger:
    ledger = Ledger()
    ledger.add(parse(report([[p, len(d), True] for p, d in files.items()])))
    return ledger


def test_copying_back_writes_only_inside_the_folder_and_keeps_the_host_s_files(tmp_path):
    folder = tmp_path / "nb"
    folder.mkdir()
    (folder / "helper.py").write_text("mine")
    (folder / "linked").symlink_to(tmp_path)
    files = {"fig.png": PNG, "out/r.csv": b"r\n", "helper.py": b"theirs", ".bashrc": b"x", "sub/.git/hooks/pre": b"x",
             "linked/escape.txt": b"x", "gone.txt": b"x"}
    sandbox = Sandbox({k: v for k, v in files.items() if k != "gone.txt"})
    done = asyncio.run(download_all(ledger_of(files), folder, sandbox.download, overwrite=False, max_files=1000,
                                    max_bytes=1024))
    assert sorted(p.relative_to(folder).as_posix() for p in done.copied) == ["fig.png", "out/r.csv"]
    assert (folder / "fig.png").read_bytes() == PNG and (folder / "helper.py").read_text() == "mine"
    assert done.kept == ["helper.py"] and done.missing == ["gone.txt"]
    assert set(done.refused) == {".bashrc", "sub/.git/hooks/pre", "linked/escape.txt"}
    assert not (tmp_path / "escape.txt").exists() and not any(p.name.startswith(".sandbox-artifact")
                                                               for p in folder.rglob("*"))
    lines = done.lines()
    assert lines[0].startswith("Copied 2 files (") and "add --overwrite to replace them" in lines[1]
    again = asyncio.run(download_all(ledger_of(files), folder, sandbox.download, overwrite=True, max_files=1000,
                                     max_bytes=1024))
    assert (folder / "helper.py").read_text() == "theirs" and not again.kept


def test_copying_back_is_bounded_in_files_and_bytes(tmp_path):
    files = {f"f{i:02}.txt": b"x" * 10 for i in range(30)} | {"big.bin": b"0" * 5000}
    done = asyncio.run(download_all(ledger_of(files), tmp_path, Sandbox(files).download, overwrite=False,
                                    max_files=5, max_bytes=1000))
    assert len(done.copied) == 5 and done.left == 25 and done.refused == ["big.bin (over the 1000 bytes bound)"]
    assert not (tmp_path / "big.bin").exists()


@pytest.mark.parametrize("ename, evalue, expected", [
    ("FileNotFoundError", "[Errno 2] No such file or directory: 'data/births.csv'", ["data/births.csv"]),
    ("FileNotFoundError", "'data/x.parquet'", ["data/x.parquet"]),
    ("FileNotFoundError", "data/x.txt not found.", ["data/x.txt"]),
    ("FileNotFoundError", "[Errno 2] No such file or directory: '/home/sandbox/work/data/x.csv'", ["data/x.csv"]),
    ("FileNotFoundError", "[Errno 2] No such file or directory: '../secret'", []),
    ("FileNotFoundError", "[Errno 2] No such file or directory: '/etc/x'", []),
    ("ModuleNotFoundError", "No module named 'helper'", ["helper.py", "helper"]),
    ("ModuleNotFoundError", "No module named 'helper.sub'", ["helper.py", "helper"]),
    ("PermissionError", "[Errno 13] Permission denied: 'data/x.csv'", ["data/x.csv"]),
    ("OSError", "[Errno 30] Read-only file system: 'data/x.csv'", ["data/x.csv"]),
    ("ValueError", "'data/x.csv'", []),
])
def test_the_hint_reads_the_paths_an_error_names(ename, evalue, expected):
    assert hints.candidates(ename, evalue, "/home/sandbox/work") == expected


def test_the_hint_only_looks_a_path_up_in_the_folder(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "x.csv").write_text("a")
    (tmp_path / "helper.py").write_text("")
    assert hints.on_host(str(tmp_path), "FileNotFoundError", "[Errno 2] No such file or directory: 'data/x.csv'") == \
        "data/x.csv"
    assert hints.on_host(str(tmp_path), "ModuleNotFoundError", "No module named 'helper'") == "helper.py"
    assert hints.on_host(str(tmp_path), "FileNotFoundError", "'data/y.csv'") is None


def test_leading_sandbox_lines_are_split_from_the_code():
    assert leading("%sandbox status\n\n%sandbox artifacts\nx = 1\n%sandbox stop") == \
        (["%sandbox status", "%sandbox artifacts"], "x = 1\n%sandbox stop")
    assert leading("x = 1") == ([], "x = 1")
    assert leading("%sandboxes = 1") == ([], "%sandboxes = 1")
    assert leading("  %sandbox  status  ") == (["%sandbox  status"], "")
    # what is not one of the session's commands as written runs in the sandbox (its own magic's)
    assert leading("%sandbox status demo\n%sandbox stop demo") == ([], "%sandbox status demo\n%sandbox stop demo")
    assert leading("%sandbox upload a.csv --name s") == ([], "%sandbox upload a.csv --name s")
    assert leading("%sandbox download --artifacts --overwrite\n%sandbox frobnicate") == \
        (["%sandbox download --artifacts --overwrite"], "%sandbox frobnicate")


def test_an_mcp_client_is_told_which_files_the_code_wrote():
    from sandbox_kernel.frontdoors.mcp.server import result_content
    from sandbox_kernel.session.files.artifacts import Artifact
    from sandbox_kernel.session.results import ExecutionResult

    files = tuple(Artifact(f"out/{i}.csv", 10, True) for i in range(25))
    texts = [block.text for block in result_content(ExecutionResult("ok", artifacts=files))]
    assert texts == ["[files written] " + ", ".join(f"out/{i}.csv (10 bytes)" for i in range(20)) + " and 5 more"]
