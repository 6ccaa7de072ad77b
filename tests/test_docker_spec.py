"""The docker backend's container settings, in-process and without an engine: mounts, GPUs,
the workspace volume (``docker.mounts``, ``container_spec``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sandbox_kernel.backends.docker import DockerBackend
from sandbox_kernel.backends.docker.mounts import check_access, parse_gpus, parse_mount, parse_mounts
from sandbox_kernel.backends.docker.spec import container_spec
from sandbox_kernel.core.errors import ConfigError, MountError

pytestmark = pytest.mark.unit

pytest.importorskip("docker")


def spec(tmp_path: Path, **traits) -> dict:
    backend = DockerBackend(**traits)
    return container_spec(backend, "name", tmp_path, "vol", {"l": "v"})


def test_mounts_are_read_only_unless_rw(tmp_path):
    (tmp_path / "f.csv").write_text("x")
    ro, rw, file_ = parse_mounts([f"{tmp_path}:/home/sandbox/data", f"{tmp_path}:/home/sandbox/out:rw",
                                  f"{tmp_path}/f.csv:/home/sandbox/work/f.csv:ro"], workdir="/home/sandbox/work")
    assert (ro.source, ro.target, ro.read_only) == (str(tmp_path), "/home/sandbox/data", True)
    assert ro.to_docker() == {"Type": "bind", "Source": str(tmp_path), "Target": "/home/sandbox/data",
                              "ReadOnly": True, "BindOptions": {"NonRecursive": True}}
    assert not rw.read_only and "BindOptions" not in rw.to_docker()
    assert file_.read_only and file_.target == "/home/sandbox/work/f.csv"


def test_tilde_expands_to_the_host_users_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "data").mkdir()
    assert parse_mount("~/data:/home/sandbox/data").source == str(tmp_path / "data")


@pytest.mark.parametrize("entry, message", [
    ("{tmp}", "is not HOST:CONTAINER[:ro|rw]"),
    ("{tmp}:/home/sandbox/d:rx", "is not HOST:CONTAINER[:ro|rw]"),
    ("data:/home/sandbox/data", "the host path must be absolute (or start with ~), not 'data'"),
    ("{tmp}/missing:/home/sandbox/data", "/missing does not exist on the host"),
    ("{tmp}:home/sandbox/data", "the container path must be absolute"),
    ("{tmp}:/", "a mount over the root is not allowed"),
    ("{tmp}:/kernel", "a mount over /kernel is not allowed"),
    ("{tmp}:/kernel/k-1", "a mount over /kernel is not allowed"),
    ("{tmp}:/home/sandbox/work", "a mount over the working directory is not allowed"),
    ("{tmp}:/etc", "the container path must be inside the sandbox's home, e.g. /home/sandbox/etc"),
    ("{tmp}:/home/sandbox/../../etc", "must be inside the sandbox's home"),
    ("{tmp}:/home/sandbox", "must be inside the sandbox's home"),
    ("/var/run:/home/sandbox/run", "holds the Docker engine's socket, which never enters a sandbox"),
])
def test_bad_mounts_say_what_is_wrong(tmp_path, entry, message):
    if "/var/run" in entry and not os.path.exists("/var/run/docker.sock"):
        pytest.skip("no engine socket on this host")
    with pytest.raises(MountError) as info:
        parse_mounts([entry.format(tmp=tmp_path)], workdir="/home/sandbox/work")
    assert message in str(info.value)


def test_two_mounts_at_one_path_are_refused(tmp_path):
    with pytest.raises(MountError, match="two mounts at /home/sandbox/d"):
        parse_mounts([f"{tmp_path}:/home/sandbox/d", f"{tmp_path}:/home/sandbox/d/"])


def test_mounts_must_be_readable_and_rw_ones_writable_by_the_kernels_uid(tmp_path):
    tmp_path.chmod(0o755)
    [rw] = parse_mounts([f"{tmp_path}:/home/sandbox/out:rw"])
    [ro] = parse_mounts([f"{tmp_path}:/home/sandbox/in"])
    owner = tmp_path.stat()
    check_access([rw], owner.st_uid, owner.st_gid)  # the owner may
    check_access([ro], 4321, 4321)
    with pytest.raises(MountError, match=r"the sandbox runs as 4321:4321, which cannot write .* Fix: `chown 4321:4321"):
        check_access([rw], 4321, 4321)
    tmp_path.chmod(0o700)
    with pytest.raises(MountError, match=r":ro: the sandbox runs as 4321:4321, which cannot read .*mode 700\)\. "
                                         r"Fix: `chmod o\+rX "):
        check_access([ro], 4321, 4321)
    tmp_path.chmod(0o777)
    check_access([rw], 4321, 4321)


def test_container_spec_carries_the_mounts_and_refuses_bad_ones(tmp_path):
    tmp_path.chmod(0o755)
    mounts = spec(tmp_path, mounts=[f"{tmp_path}:/home/sandbox/data"])["mounts"]
    assert [m["Target"] for m in mounts] == ["/kernel", "/home/sandbox/work", "/home/sandbox/data"]
    assert mounts[2]["ReadOnly"] is True
    with pytest.raises(ConfigError, match=r"^Bad option for the docker backend: mount '/nope:/home/sandbox/d': "
                                          r"/nope does not exist on the host\.$"):
        spec(tmp_path, mounts=["/nope:/home/sandbox/d"])


def test_workdir_volume_is_the_working_directorys_volume(tmp_path):
    mounts = spec(tmp_path, workdir_volume="my-work")["mounts"]
    assert mounts[1]["Target"] == "/home/sandbox/work" and mounts[1]["Type"] == "volume"
    with pytest.raises(Exception, match="workdir_volume must be a volume name"):
        DockerBackend(workdir_volume="../etc")


@pytest.mark.parametrize("value, count", [("all", -1), ("ALL", -1), ("2", 2), ("", None)])
def test_gpus_become_a_device_request(tmp_path, value, count):
    assert parse_gpus(value) == count
    requests = spec(tmp_path, gpus=value).get("device_requests")
    if count is None:
        assert requests is None
    else:
        [request] = requests
        assert request["Count"] == count and request["Capabilities"] == [["gpu"]] and request["Driver"] == ""


@pytest.mark.parametrize("value", ["0", "-1", "some", "1.5"])
def test_bad_gpus_are_a_bad_option(value):
    with pytest.raises(ValueError, match="gpus must be 'all' or a number of GPUs"):
        DockerBackend(gpus=value)


def test_podman_gets_the_workdir_limit_as_tmpfs_blocks():
    """Podman (before 4.8) takes ``size`` in ``o`` as a project quota; ``nr_blocks`` is tmpfs's own."""
    from sandbox_kernel.backends.docker.spec import volume_options

    assert volume_options(512 * 1024**2, 1000, 1000)["o"] == "size=536870912,uid=1000,gid=1000,mode=0755"
    assert volume_options(512 * 1024**2, 1000, 1000, podman=True)["o"] == "nr_blocks=131072,uid=1000,gid=1000,mode=0755"
    assert volume_options(4097, 1, 1, podman=True)["o"].startswith("nr_blocks=2,")
    assert volume_options(0, 1, 1, podman=True)["o"] == "uid=1,gid=1,mode=0755"


@pytest.mark.parametrize("traits, named", [
    ({"runtime": "runsc"}, "runtime='runsc'"),
    ({"gpus": "all"}, "gpus='all'"),
    ({"runtime": "runsc", "gpus": "1"}, "runtime='runsc' and gpus='1'"),
])
def test_options_podman_ignores_are_refused_in_one_message(traits, named):
    from sandbox_kernel.backends.docker.podman import refuse_ignored

    with pytest.raises(ConfigError, match=f"cannot use {named} on Podman: .* Fix: leave"):
        refuse_ignored(DockerBackend(**traits))
    refuse_ignored(DockerBackend())  # nothing set: nothing refused
