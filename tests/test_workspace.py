"""The workspace (issue 30) through the installed kernelspecs, started in a notebook's folder as
Jupyter starts them, on every backend: local (bubblewrap), docker on ipc (bound) and on the api
transport (a copy through the archive API), the remote-engine rig (a copy on an engine that does
not share this host's files), e2b (its test server) and a Kernel Gateway (copies through their
files). The folder holds data, a helper module, dotfiles, a symlink to /etc/passwd and a socket.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat

import pytest

from tests.kernels import kernel, run, stdout
from tests.targets import skip_or_fail

pytestmark = pytest.mark.timeout(300)

TARGETS = ["local", "docker", "docker_api", "docker_tcp", "e2b", "gateway"]
CLASSES = {"local": "LocalBackend", "docker": "DockerBackend", "e2b": "E2BBackend", "gateway": "GatewayBackend"}
BOUND = {"local", "docker"}
"""Targets where the folder is bound (the host's files themselves: local, docker on ipc); the others
get a copy."""
ROOT_COPIES = {"e2b", "gateway"}
"""Targets whose test servers run their kernels as root on this machine: root writes through the
mode bits of a read-only copy (a real E2B sandbox runs code as 'user'); the host is unchanged
either way, which is what is checked there."""
CSV = "a,b\n1,2\n"


def option(target: str, name: str, value: str) -> str:
    from tests.targets import backend_of

    return f"--{CLASSES[backend_of(target)]}.{name}={value}"


@pytest.fixture(autouse=True)
def bubblewrap(request):
    """The local cases bind with bubblewrap (bash .ci/bubblewrap-setup.sh); without it local copies."""
    if "[local]" in request.node.name and shutil.which("bwrap") is None:
        skip_or_fail("bubblewrap is not installed: bash .ci/bubblewrap-setup.sh")


@pytest.fixture
def folder(tmp_path, request):
    """A notebook's folder: what a notebook reads, and what must not reach the sandbox."""
    root = tmp_path / "notebook"
    (root / "data").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "data" / "x.csv").write_text(CSV)
    (root / "helper.py").write_text("def plot():\n    return 42\n")
    (root / ".env").write_text("SECRET=do-not-copy\n")
    (root / "data" / ".env").write_text("SECRET=nested\n")
    (root / "data" / "pw").symlink_to("/etc/passwd")
    (root / "run.log").write_text("ignored\n")
    (root / ".sandboxignore").write_text("*.log\n")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(root / "agent.sock"))
    docker = "docker" in request.node.name
    if docker and os.geteuid() == 0:  # docker's kernel runs as 1000:1000 when this process is root: let it write
        for path in (root, root / "data"):
            os.chown(path, 1000, 1000)
    yield root
    sock.close()


def ok(kc, code: str) -> str:
    reply, outputs = run(kc, code, timeout=120)
    assert reply["status"] == "ok", (reply, [m["content"] for m in outputs])
    return stdout(outputs)


def snapshot(root) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in root.rglob("*")
            if not stat.S_ISSOCK(p.lstat().st_mode)}


@pytest.mark.parametrize("backend_name", TARGETS)
def test_read_only_workspace_shows_the_folder_and_nothing_else(backend_name, folder):
    target = backend_name
    before = snapshot(folder)
    with kernel(target, option(target, "workspace", "ro"), cwd=str(folder)) as (_, kc):
        reply, outputs = run(kc, "import pandas as pd, helper\nprint(pd.read_csv('data/x.csv').shape, helper.plot())",
                             timeout=120)
        assert reply["status"] == "ok" and stdout(outputs) == "(1, 2) 42\n"
        assert reply["execution_count"] == 1  # the copy, the artifact hook: no count of the user's taken
        how = "bound" if target in BOUND else "a copy of 2 files (34 bytes)"
        assert stdout(outputs, "stderr").startswith(f"[the sandbox's working directory shows {folder}: read-only, {how}; ")
        assert ok(kc, "import os\nprint([os.path.exists(p) for p in ('.env', 'data/.env', '.git', 'run.log', "
                      "'agent.sock', '.sandboxignore')])") == "[False, False, False, False, False, False]\n"
        passwd = ok(kc, "try:\n    print(open('data/pw').read(), end='')\nexcept OSError as e:\n"
                        "    print(type(e).__name__)")
        assert passwd != open("/etc/passwd").read()
        written = ok(kc, "try:\n    open('data/x.csv', 'a').write('changed')\n    print('written')\n"
                         "except OSError as e:\n    print(type(e).__name__, e.errno)")
        if target not in ROOT_COPIES:
            assert written.split()[0] in ("PermissionError", "OSError"), written  # EACCES or EROFS
            reply, _ = run(kc, "open('data/x.csv', 'w')")
            assert reply["status"] == "error" and reply["traceback"][-1].startswith(
                f"data/x.csv is in the read-only workspace ({folder}): its files cannot be changed from the sandbox.")
        assert ok(kc, "open('fig.png', 'wb').write(b'png')\nprint(sorted(set(os.listdir('.')) - {'__pycache__'}))") \
            == "['data', 'fig.png', 'helper.py']\n"
    assert snapshot(folder) == before  # nothing written on the host, by the write or the new file


@pytest.mark.parametrize("backend_name", TARGETS)
def test_read_write_workspace_writes_the_folder_where_it_is_bound(backend_name, folder):
    target = backend_name
    with kernel(target, option(target, "workspace", "rw"), cwd=str(folder)) as (_, kc):
        reply, outputs = run(kc, "open('out.csv', 'w').write('r\\n1\\n')\nprint(open('data/x.csv').read(), end='')",
                             timeout=120)
        assert reply["status"] == "ok" and stdout(outputs) == CSV
        listing = [m["content"]["data"]["text/plain"] for m in outputs if m["header"]["msg_type"] == "display_data"]
        where = ("They are in your folder (the workspace is read-write)." if target in BOUND else
                 "Copy it to this folder: %sandbox download --artifacts")
        assert listing == [f"1 file written:\n  out.csv  4 bytes\n{where}\n"]
        assert ok(kc, "import os\nprint(os.path.exists('.env') and open('.env').read())") in ("False\n", "\n")
    assert (folder / "out.csv").exists() == (target in BOUND)
    assert (folder / ".env").read_text() == "SECRET=do-not-copy\n"


@pytest.mark.parametrize("backend_name", ["local", "docker"])
def test_an_upload_over_what_a_read_only_workspace_shows_is_refused_and_the_folder_unchanged(backend_name, folder,
                                                                                            tmp_path):
    """local copied an upload onto the folder's own file (%sandbox upload a.txt overwrote the host's
    a.txt under workspace=ro); docker's read-only binds refuse it: both say so in the same line."""
    new = tmp_path / "new.txt"
    new.write_text("from the host")
    before = snapshot(folder)
    remotes = ["helper.py", "data/x.csv", "data/y.csv"] + ([str(folder / ".env")] if backend_name == "local" else [])
    with kernel(backend_name, option(backend_name, "workspace", "ro"), "--SandboxKernel.file_commands=allow",
                cwd=str(folder)) as (_, kc):
        for remote in remotes:
            reply, _ = run(kc, f"%sandbox upload {new} {remote}", timeout=120)
            name = os.path.relpath(remote, folder) if os.path.isabs(remote) else remote
            assert reply["status"] == "error" and reply["ename"] == "WorkspaceError", reply
            assert reply["evalue"] == (f"{name} is in the read-only workspace ({folder}): its files cannot be changed "
                                       "from the sandbox, also not by an upload. Upload it under another name (it stays "
                                       "in the sandbox), or use workspace=rw")
        assert ok(kc, f"%sandbox upload {new} fresh.txt\nprint(open('fresh.txt').read())").endswith("from the host\n")
    assert snapshot(folder) == before


@pytest.mark.docker
def test_a_copy_over_its_bound_is_one_line_naming_the_size_the_limit_and_the_option(folder):
    with kernel("docker_api", option("docker_api", "workspace", "ro"),
                option("docker_api", "workspace_max_bytes", "10"), cwd=str(folder)) as (_, kc):
        reply, _ = run(kc, "1", timeout=120)
    assert reply["status"] == "error"
    assert reply["evalue"] == (f"the workspace folder {folder} holds 34 bytes to copy, over the limit of 10 bytes "
                               "(DockerBackend.workspace_max_bytes): leave big files out in .sandboxignore, or raise "
                               "DockerBackend.workspace_max_bytes")


@pytest.mark.kernel
def test_local_without_bubblewrap_copies_the_folder(folder, tmp_path):
    """A machine without bubblewrap (macOS, a bare Linux): the same view, as a copy."""
    bare = tmp_path / "bin"  # a PATH without bwrap (the kernelspec names its Python by full path)
    bare.mkdir()
    with kernel("local", option("local", "workspace", "ro"), cwd=str(folder), PATH=str(bare)) as (_, kc):
        reply, outputs = run(kc, "import helper, os\nprint(helper.plot(), sorted(set(os.listdir('.')) - {'__pycache__'}))",
                             timeout=120)
        assert reply["status"] == "ok" and stdout(outputs) == "42 ['data', 'helper.py']\n"
        assert "read-only, a copy of 2 files (34 bytes)" in stdout(outputs, "stderr")
