"""The workspace's plan (what of a host folder a sandbox sees) and its archive, in process: dotfiles,
the ignore file, symlinks leaving the folder, special files, the bounds."""

from __future__ import annotations

import io
import os
import socket
import tarfile

import pytest

from sandbox_kernel.backends.workspace import IGNORE_FILE, WorkspaceError, binds, make_plan, masks
from sandbox_kernel.backends.workspace.archive import write_tar

pytestmark = pytest.mark.unit


@pytest.fixture()
def folder(tmp_path):
    """A notebook's folder: data, a helper module, secrets, a link out, a link in, a socket."""
    root = tmp_path / "notebook"
    (root / "data" / "sub").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "data" / "x.csv").write_text("a,b\n1,2\n")
    (root / "helper.py").write_text("def plot():\n    return 42\n")
    (root / ".env").write_text("SECRET=1\n")
    (root / "data" / ".env").write_text("SECRET=2\n")
    (root / "data" / "pw").symlink_to("/etc/passwd")
    (root / "data" / "up").symlink_to("../../")
    (root / "latest.csv").symlink_to("data/x.csv")
    (root / "data" / "sub" / "h.py").symlink_to("../../helper.py")
    (root / "gone").symlink_to("nowhere")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(root / "agent.sock"))
    yield root
    sock.close()


def test_dotfiles_links_out_and_sockets_are_left_out(folder):
    plan = make_plan(folder)
    kept = {e.path: e.kind for e in plan.entries}
    assert kept == {"data": "dir", "data/sub": "dir", "data/sub/h.py": "link", "data/x.csv": "file",
                    "helper.py": "file", "latest.csv": "link"}
    assert dict(plan.left_out) == {".env": "dotfile", ".git": "dotfile", "agent.sock": "special file",
                                   "data/.env": "dotfile", "data/pw": "symlink outside", "data/up": "symlink outside",
                                   "gone": "symlink outside"}
    assert plan.reason("data/.env") == "dotfile" and plan.reason(".git/config") == "dotfile"
    assert plan.reason("data/x.csv") is None
    assert plan.size == len("a,b\n1,2\n") + len("def plot():\n    return 42\n")


def test_the_ignore_file_leaves_out_and_names_dotfiles_back_in(folder):
    (folder / ".streamlit").mkdir()
    (folder / ".streamlit" / "config.toml").write_text("x")
    (folder / "big").mkdir()
    (folder / "big" / "huge.bin").write_bytes(b"0" * 10)
    (folder / "run.log").write_text("log")
    (folder / IGNORE_FILE).write_text("# comments are fine\nbig/\n*.log\n!.streamlit/\n")
    plan = make_plan(folder)
    kept = {e.path for e in plan.entries}
    assert ".streamlit/config.toml" in kept and "big" not in kept and "run.log" not in kept
    assert dict(plan.left_out)["big"] == "ignored" and dict(plan.left_out)[IGNORE_FILE] == "dotfile"


def test_binds_split_only_the_folders_with_something_left_out(folder):
    (folder / "empty-of-kept").mkdir()
    (folder / "empty-of-kept" / ".hidden").write_text("x")
    plan = make_plan(folder)
    assert binds(plan) == [("data/sub", "bind"), ("data/x.csv", "bind"), ("empty-of-kept", "empty"),
                           ("helper.py", "bind"), ("latest.csv", "bind")]
    with pytest.raises(WorkspaceError, match="takes 5 mounts .* over the limit of 4: leave more out in .sandboxignore"):
        binds(plan, limit=4)


def test_masks_cover_what_is_left_out_except_symlinks(folder):
    assert masks(make_plan(folder)) == [(".env", "file"), (".git", "dir"), ("agent.sock", "file"),
                                        ("data/.env", "file")]


def test_too_many_entries_is_one_line(folder):
    with pytest.raises(WorkspaceError, match=r"holds more than 3 entries: leave big folders out in \.sandboxignore"):
        make_plan(folder, max_entries=3)


def test_a_missing_folder_is_one_line(tmp_path):
    with pytest.raises(WorkspaceError, match="does not exist or is not a folder"):
        make_plan(tmp_path / "nope")


def test_the_archive_holds_the_kept_files_read_only_and_no_link_out(folder):
    out = io.BytesIO()
    written = write_tar(make_plan(folder), out, read_only=True)
    out.seek(0)
    with tarfile.open(fileobj=out) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert set(members) == {"data", "data/sub", "data/sub/h.py", "data/x.csv", "helper.py", "latest.csv"}
        assert tar.extractfile("data/x.csv").read() == b"a,b\n1,2\n"
        assert members["latest.csv"].issym() and members["latest.csv"].linkname == "data/x.csv"
        assert members["data/x.csv"].mode & 0o222 == 0 and members["data"].mode & 0o222 == 0
        assert all(m.uid == 0 for m in members.values())
    assert written == make_plan(folder).size


def test_the_archive_is_bounded_in_one_line(folder):
    with pytest.raises(WorkspaceError, match=r"holds 34 bytes to copy, over the limit of 10 bytes \(X.workspace_max_bytes\)"):
        write_tar(make_plan(folder), io.BytesIO(), read_only=False, max_bytes=10, setting="X.workspace_max_bytes")


def test_a_file_swapped_for_a_link_after_the_walk_is_not_followed(folder):
    plan = make_plan(folder)
    os.remove(folder / "helper.py")
    (folder / "helper.py").symlink_to("/etc/passwd")
    out = io.BytesIO()
    write_tar(plan, out, read_only=False)
    out.seek(0)
    with tarfile.open(fileobj=out) as tar:
        assert "helper.py" not in tar.getnames()


def test_a_copy_on_this_machine_is_the_archive_s_content(folder, tmp_path):
    from sandbox_kernel.backends.workspace.archive import copy_tree

    target = tmp_path / "copy"
    target.mkdir()
    copy_tree(make_plan(folder), str(target), read_only=True)
    assert (target / "data" / "x.csv").read_text() == "a,b\n1,2\n"
    assert os.readlink(target / "latest.csv") == "data/x.csv" and not (target / ".env").exists()
    assert not (target / "data" / "pw").exists() and not (target / "agent.sock").exists()
    assert (target / "helper.py").stat().st_mode & 0o222 == 0 and (target / "data").stat().st_mode & 0o222 == 0
    for path in (target / "data", target / "data" / "sub"):
        path.chmod(0o755)  # so tmp_path can be removed


@pytest.fixture()
def linked(folder):
    """The folder with links in it to what it leaves out: a dotfile, a dot-folder, a file of an
    ignored folder, a folder split by a left-out entry, a link to such a link; and a link to a
    folder with nothing left out, which stays."""
    (folder / ".ssh").mkdir()
    (folder / ".ssh" / "id_ed25519").write_text("KEY")
    (folder / "secretdir").mkdir()
    (folder / "secretdir" / "s").write_text("SECRET=3")
    (folder / "clean").mkdir()
    (folder / "clean" / "c.txt").write_text("c")
    (folder / IGNORE_FILE).write_text("secretdir/\n")
    (folder / "env_link").symlink_to(".env")
    (folder / "ssh_link").symlink_to(".ssh")
    (folder / "s_link").symlink_to("secretdir/s")
    (folder / "data_link").symlink_to("data")
    (folder / "via_link").symlink_to("env_link")
    (folder / "clean_link").symlink_to("clean")
    return folder


LINKS_OUT = {"env_link": "link to a left-out entry", "ssh_link": "link to a left-out entry",
             "s_link": "link to a left-out entry", "via_link": "link to a left-out entry",
             "data_link": "link to a folder with entries left out"}


def test_links_to_what_is_left_out_are_left_out_and_say_why(linked):
    plan = make_plan(linked)
    kept = {e.path: e.kind for e in plan.entries}
    assert not set(LINKS_OUT) & set(kept)
    assert kept["clean_link"] == "link" and kept["latest.csv"] == "link" and kept["data/sub/h.py"] == "link"
    assert {path: why for path, why in plan.left_out if path in LINKS_OUT} == LINKS_OUT
    assert plan.reason("env_link") == "link to a left-out entry" and not plan.shows("data_link/x.csv")


def test_no_bind_mount_or_copy_brings_in_what_a_link_leads_to(linked, tmp_path):
    from sandbox_kernel.backends.docker.view import bound
    from sandbox_kernel.backends.local.view import argv
    from sandbox_kernel.backends.workspace.archive import copy_tree

    plan = make_plan(linked)
    assert [path for path, _ in binds(plan)] == ["clean", "clean_link", "data/sub", "data/x.csv", "helper.py",
                                                 "latest.csv"]
    sources = {m.get("Source", "") for m in bound(plan, "ro", "/home/sandbox/work", "/x/empty")}
    command, _ = argv(plan, "ro", str(tmp_path / "work"), str(tmp_path / "empty"), "bwrap")
    for link in LINKS_OUT:
        assert f"{plan.root}/{link}" not in sources and f"{plan.root}/{link}" not in command
    out = io.BytesIO()
    write_tar(plan, out, read_only=True)
    out.seek(0)
    with tarfile.open(fileobj=out) as tar:
        assert not set(LINKS_OUT) & set(tar.getnames()) and "clean_link" in tar.getnames()
    target = tmp_path / "copy"
    target.mkdir()
    copy_tree(plan, str(target), read_only=False)
    assert not [link for link in LINKS_OUT if os.path.lexists(target / link)]


def test_a_link_left_out_splits_its_folder_and_then_a_link_to_that_folder_is_left_out_too(folder):
    (folder / "aaa").symlink_to("zzz")  # walked before the link that splits its target
    (folder / "zzz").mkdir()
    (folder / "zzz" / "ok.txt").write_text("ok")
    (folder / "zzz" / "env").symlink_to("../.env")
    plan = make_plan(folder)
    left = dict(plan.left_out)
    assert left["zzz/env"] == "link to a left-out entry" and left["aaa"] == "link to a folder with entries left out"
    assert ("zzz/ok.txt", "bind") in binds(plan) and not [p for p, _ in binds(plan) if p in ("aaa", "zzz")]
