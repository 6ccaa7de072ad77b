"""The administrator's lock (sandbox_kernel/runtime/lock.py), in process: the rules, the one
message that names each refused option, and a lock file that cannot be applied refusing everything.
Through real kernels, a magic and a hub: tests/test_lock_kernel.py and tests/test_hub.py."""

from __future__ import annotations

import json

import pytest
from traitlets.config import Config, Configurable

from sandbox_kernel.backends import make_backend
from sandbox_kernel.backends.docker import DockerBackend
from sandbox_kernel.backends.local import LocalBackend
from sandbox_kernel.core.errors import ConfigError, Locked
from sandbox_kernel.policy import OutputOptions
from sandbox_kernel.runtime import lock

pytestmark = pytest.mark.unit

LOCK = {"backends": ["local", "docker"], "output_policy": "isolate",
        "Backend": {"pool_size": {"max": 1}},
        "DockerBackend": {"network": "none", "mounts": [], "memory_limit": {"max": "2g"},
                          "env_vars": {"subset_of": ["LANG"]}, "image": {"one_of": ["sandbox-kernel:latest"]}},
        "OutputOptions": {"allowed_origins": []},
        "per_user": {"sandboxes": 3, "memory": "4g"}}


@pytest.fixture
def locked(tmp_path, monkeypatch):
    """``locked(document)`` writes it as the only lock file (LOCK_DIRS is the test's folder)."""
    monkeypatch.setattr(lock, "LOCK_DIRS", (tmp_path,))

    def write(document):
        (tmp_path / lock.LOCK_NAME).write_text(document if isinstance(document, str) else json.dumps(document))
        return tmp_path / lock.LOCK_NAME
    return write


def made(name, **traits):
    """Backend ``name`` made the front doors' one way, with ``traits`` as its config."""
    cls = {"docker": "DockerBackend", "local": "LocalBackend"}.get(name, "E2BBackend")
    parent = Configurable(config=Config({cls: traits}))
    return make_backend(name, parent=parent, output_budget=(0, "max_output_bytes"))


def test_without_a_lock_file_nothing_is_locked(tmp_path):
    assert lock.load((tmp_path,)).rules == ()
    lock.load((tmp_path,)).check_output({"output_policy": "trust"})


def test_options_within_the_lock_make_a_backend(locked):
    locked(LOCK)
    backend = made("docker", memory_limit="1g", env_vars=["LANG"], pool_size=1)
    assert backend.memory_limit == 1024**3


def test_every_option_a_user_loosened_is_named_in_one_message(locked):
    path = locked(LOCK)
    with pytest.raises(Locked) as refused:
        made("docker", network="bridge", mounts=["/data:/home/sandbox/data"], memory_limit=0,
             env_vars=["LANG", "AWS_SECRET"], image="mine:latest", pool_size=4)
    assert str(refused.value) == (
        f"Refused by the administrator's lock ({path}): "
        "DockerBackend.network must be 'none', not 'bridge'; "
        "DockerBackend.mounts must be [], not ['/data:/home/sandbox/data']; "
        "DockerBackend.memory_limit must be at most 2 GiB, not unlimited (0); "
        "DockerBackend.env_vars may only hold ['LANG'], not ['AWS_SECRET']; "
        "DockerBackend.image must be one of ['sandbox-kernel:latest'], not 'mine:latest'; "
        "Backend.pool_size must be at most 1, not 4.")
    assert isinstance(refused.value, ConfigError)  # every front door already shows a ConfigError in one line


def test_a_backend_the_lock_does_not_list_is_refused(locked):
    locked(LOCK)
    with pytest.raises(Locked, match=r"the e2b backend is not allowed \(allowed: local, docker\)"):
        made("e2b")


def test_a_ceiling_above_the_default_and_a_section_for_all_backends(locked):
    locked({"LocalBackend": {"memory_limit": {"max": "2g"}}, "Backend": {"pool_size": {"max": 0}}})
    with pytest.raises(Locked, match=r"LocalBackend.memory_limit must be at most 2 GiB, not unlimited \(0\)\.$"):
        made("local")  # the default (0: none) is beyond it too: the admin's config sets one
    with pytest.raises(Locked, match=r"LocalBackend.memory_limit must be at most 2 GiB, not 3 GiB; "
                                     r"Backend.pool_size must be at most 0, not 2"):
        made("local", memory_limit="3g", pool_size=2)
    assert made("local", memory_limit="512m").memory_limit == 512 * 1024**2


def test_output_policy_has_a_ceiling_wherever_the_policy_is_built(locked):
    path = locked(LOCK)
    assert OutputOptions(output_policy="isolate").make_policy().mode == "isolate"
    with pytest.raises(Locked) as refused:
        OutputOptions(output_policy="trust", allowed_origins=["https://cdn.example.org"]).make_policy()
    assert str(refused.value) == (f"Refused by the administrator's lock ({path}): output_policy may be at most "
                                  "'isolate' (sanitize < isolate < trust), not 'trust'; OutputOptions.allowed_origins "
                                  "must be [], not ['https://cdn.example.org'].")
    with pytest.raises(Locked, match="not 'trust'"):
        OutputOptions().make_policy(mode="TRUST")  # a magic line's --output-policy


def test_a_misspelt_output_option_refuses_instead_of_locking_nothing(locked):
    locked({"OutputOptions": {"allowed_origin": []}})  # allowed_origins, misspelt
    with pytest.raises(Locked, match=r"OutputOptions.allowed_origin is no output option \(they are allowed_comm"):
        OutputOptions(allowed_origins=["https://evil.example"]).make_policy()


def test_per_user_quotas_take_the_tightest_file(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / lock.LOCK_NAME).write_text(json.dumps({"per_user": {"sandboxes": 3, "memory": "4g"}}))
    (tmp_path / "b" / lock.LOCK_NAME).write_text(json.dumps({"per_user": {"sandboxes": 5}}))
    assert lock.load((tmp_path / "a", tmp_path / "b")).per_user() == (3, 4 * 1024**3)
    assert lock.load((tmp_path / "b",)).per_user() == (5, None)


@pytest.mark.parametrize("document, why", [
    ("{not json", r"cannot be read \(Expecting property name"),
    ([1], "is not a JSON object"),
    ({"backend": ["docker"]}, "has an unknown setting 'backend' \\(settings: Backend, DockerBackend, E2BBackend"),
    ({"DockerBakend": {"network": "none"}}, "has an unknown setting 'DockerBakend'"),
    ({"output_policy": "strict"}, "has output_policy 'strict', not one of sanitize, isolate, trust"),
    ({"per_user": {"containers": 2}}, r"has per_user keys other than \['memory', 'sandboxes'\]"),
])
def test_a_lock_file_that_cannot_be_applied_refuses_every_sandbox(locked, document, why):
    path = locked(document)
    with pytest.raises(Locked, match=rf"^The administrator's lock {path} {why}.*: no sandbox starts until it is fixed"
                       if "cannot be read" in why else rf"^The administrator's lock {path} {why}"):
        made("local")


def test_an_option_the_class_does_not_have_is_refused_not_ignored(locked):
    locked({"DockerBackend": {"memory_limt": {"max": "2g"}}, "Backend": {"pool_size": {"max": 1}}})
    with pytest.raises(Locked, match=r": DockerBackend.memory_limt is not an option of the docker backend \(the lock "
                                     r"cannot apply it\)\.$"):
        made("docker")
    made("e2b")  # Backend's pool_size: e2b has no pool, nothing to lock


def test_the_egress_allowlist_and_secrets_are_locked_like_any_option(locked):
    path = locked({"DockerBackend": {"allow_hosts": {"subset_of": ["pypi.org", "files.pythonhosted.org"]},
                                     "host_secrets": []}})
    assert made("docker", allow_hosts=["pypi.org"]).allow_hosts == ["pypi.org"]
    with pytest.raises(Locked) as refused:
        made("docker", allow_hosts=["pypi.org", "example.org"])
    assert str(refused.value) == (f"Refused by the administrator's lock ({path}): DockerBackend.allow_hosts may only "
                                  "hold ['pypi.org', 'files.pythonhosted.org'], not ['example.org'].")


def test_a_misspelt_rule_is_a_value_no_option_has_so_every_sandbox_is_refused(locked):
    locked({"DockerBackend": {"memory_limit": {"maximum": "2g"}}})
    with pytest.raises(Locked, match=r"DockerBackend.memory_limit must be \{'maximum': '2g'\}, not 1073741824"):
        made("docker")


def test_lock_folders_are_system_ones_found_without_user_variables(monkeypatch, tmp_path):
    monkeypatch.setenv("JUPYTER_CONFIG_PATH", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_DIRS", str(tmp_path))
    import importlib
    import sys

    fresh = importlib.reload(lock)
    try:
        assert fresh.LOCK_DIRS[:2] == (lock.Path("/etc/jupyter"), lock.Path("/usr/local/etc/jupyter"))
        assert fresh.LOCK_DIRS[2] == lock.Path(sys.prefix, "etc", "jupyter")
    finally:
        importlib.reload(lock)


def test_docker_backend_class_has_every_locked_example_option():
    """The docs' example names real options (a typo there would lock nothing)."""
    names = set(DockerBackend.class_trait_names(config=True)) | set(LocalBackend.class_trait_names(config=True))
    assert set(LOCK["DockerBackend"]) | set(LOCK["Backend"]) <= names


@pytest.mark.parametrize("document, why", [
    ({"backends": "docker"}, 'has backends = "docker", not a list of backend names such as ["docker"]'),
    ({"backends": ["docker", 1]}, 'has backends = ["docker", 1], not a list of backend names'),
    ({"DockerBackend": {"memory_limit": {"max": "2 gigs"}}},
     'has DockerBackend.memory_limit = {"max": "2 gigs"}, whose max is neither a number nor a size such as "2g"'),
    ({"Backend": {"pool_size": {"max": True}}}, 'has Backend.pool_size = {"max": true}, whose max is neither'),
    ({"DockerBackend": {"image": {"one_of": "sandbox-kernel:latest"}}},
     'has DockerBackend.image = {"one_of": "sandbox-kernel:latest"}, whose one_of is not a list'),
    ({"DockerBackend": {"env_vars": {"subset_of": "LANG"}}},
     'has DockerBackend.env_vars = {"subset_of": "LANG"}, whose subset_of is not a list'),
    ({"per_user": {"memory": "4x"}}, 'has per_user.memory = "4x", not a size such as "4g"'),
    ({"per_user": {"sandboxes": "3"}}, 'has per_user.sandboxes = "3", not a whole number of sandboxes'),
])
def test_a_rule_that_cannot_be_applied_as_written_refuses_every_sandbox(locked, document, why):
    """Checked when the lock is read, not when a value meets it: a rule that does not parse was a
    ValueError (a traceback) at check time, and a string for ``backends`` a substring test."""
    path = locked(document)
    for name in ("docker", "local"):
        with pytest.raises(Locked) as refused:
            made(name)
        assert str(refused.value).startswith(f"The administrator's lock {path} {why}")
        assert str(refused.value).endswith(": no sandbox starts until it is fixed.")


def test_a_rule_of_the_wrong_kind_for_its_option_is_a_refusal_not_a_crash(locked):
    locked({"DockerBackend": {"network": {"max": 2}, "image": {"subset_of": ["sandbox-kernel:latest"]}}})
    with pytest.raises(Locked, match=r"DockerBackend.network has 'none', not a number: a max cannot apply to it; "
                                     r"DockerBackend.image has 'sandbox-kernel:latest', not a list: a subset_of "
                                     r"cannot apply to it\.$"):
        made("docker")


@pytest.mark.parametrize("name", ["docker", "e2b"])
async def test_allowing_a_host_at_runtime_is_checked_against_the_lock_before_it_applies(locked, name):
    """``set_allow_hosts`` (``%sandbox allow``, ``Sandbox.allow``, the MCP server's allow) cannot
    loosen a locked allowlist: refused with the lock's message, the list in force unchanged."""
    section = {"docker": "DockerBackend", "e2b": "E2BBackend"}[name]
    path = locked({section: {"allow_hosts": {"subset_of": ["pypi.org", "files.pythonhosted.org"]}}})
    backend = made(name, allow_hosts=["pypi.org"])
    with pytest.raises(Locked) as refused:
        await backend.set_allow_hosts(["pypi.org", "evil.example"])
    assert str(refused.value) == (f"Refused by the administrator's lock ({path}): {section}.allow_hosts may only "
                                  "hold ['pypi.org', 'files.pythonhosted.org'], not ['evil.example'].")
    assert backend.allow_hosts == ["pypi.org"]
    assert await backend.set_allow_hosts(["pypi.org", "files.pythonhosted.org"]) == ["pypi.org",
                                                                                      "files.pythonhosted.org"]


async def test_the_python_apis_allow_is_refused_by_the_lock(locked):
    """``AsyncSandbox.allow`` goes through ``SandboxSession.allow``, as the kernel's and the magic's
    ``%sandbox allow`` and the MCP server's do; a ``Backend`` section binds every backend."""
    from sandbox_kernel.frontdoors.api import AsyncSandbox

    locked({"Backend": {"allow_hosts": {"subset_of": ["pypi.org"]}}})
    sandbox = AsyncSandbox("docker", allow_hosts=["pypi.org"])
    with pytest.raises(Locked, match=r"Backend.allow_hosts may only hold \['pypi.org'\], not \['evil.example'\]"):
        await sandbox.allow("evil.example")
    assert sandbox.backend.allow_hosts == ["pypi.org"]


@pytest.mark.parametrize("name", ["docker", "e2b"])
def test_a_locked_allowlist_locks_the_index_the_pypi_preset_reaches(locked, name):
    """The ``pypi`` preset allows ``pypi_index``'s host: with allow_hosts locked, pypi_index is
    locked to its default unless the lock names it, so the preset cannot reach another host."""
    section = {"docker": "DockerBackend", "e2b": "E2BBackend"}[name]
    path = locked({"Backend": {"allow_hosts": {"subset_of": ["pypi"]}}})
    assert made(name, allow_hosts=["pypi"], pypi_index="https://pypi.org/simple/").allow_hosts == ["pypi"]
    with pytest.raises(Locked) as refused:
        made(name, allow_hosts=["pypi"], pypi_index="https://evil.example/simple")
    assert str(refused.value) == (
        f"Refused by the administrator's lock ({path}): {section}.pypi_index must be 'https://pypi.org/simple' "
        "while the lock restricts allow_hosts and does not name pypi_index (the pypi preset reaches its host), "
        "not 'https://evil.example/simple'.")
    locked({"Backend": {"allow_hosts": {"subset_of": ["pypi"]}},
            section: {"pypi_index": {"one_of": ["https://mirror.example/simple"]}}})
    assert made(name, allow_hosts=["pypi"], pypi_index="https://mirror.example/simple").allow_hosts == ["pypi"]
    with pytest.raises(Locked, match=rf"{section}.pypi_index must be one of"):
        made(name, allow_hosts=["pypi"])


def test_without_an_allow_hosts_rule_the_index_is_the_users(locked):
    locked({"DockerBackend": {"network": "none"}})
    assert made("docker", pypi_index="https://mirror.example/simple").pypi_index == "https://mirror.example/simple"
