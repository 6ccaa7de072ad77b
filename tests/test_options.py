"""Option parsing and backend construction, in process: the magic's line, the one construction
path every front door uses, and the suggestion for a misspelt name."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError
from traitlets.config import Config, Configurable

from sandbox_kernel.backends import make_backend
from sandbox_kernel.backends.docker import DockerBackend
from sandbox_kernel.backends.gateway import GatewayBackend
from sandbox_kernel.core.errors import BadValue, ConfigError
from sandbox_kernel.frontdoors.magics.options import backend_traits
from sandbox_kernel.runtime.config_check import closest

pytestmark = pytest.mark.unit


def test_the_magic_line_becomes_traits():
    traits = backend_traits(DockerBackend, ["--memory-limit", "1g", "--env-vars", "A", "--env-vars=B", "--read-only=False"])
    assert traits == {"memory_limit": 1024**3, "env_vars": ["A", "B"], "read_only": False}


@pytest.mark.parametrize("tokens, message", [
    (["--memory-limt", "1g"], "unknown option --memory-limt for the docker backend (did you mean --memory-limit?)"),
    (["--memory-limit"], "--memory-limit needs a value"),
    (["--cpus", "1", "--cpus", "2"], "--cpus is given more than once"),
    (["--memory-limit", "lots"], "bad value for --memory-limit"),
])
def test_a_bad_line_is_one_usage_message(tokens, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)").replace("?", r"\?")):
        backend_traits(DockerBackend, tokens)


def test_a_secret_never_goes_on_the_line():
    with pytest.raises(UsageError, match="--auth-token is a secret"):
        backend_traits(GatewayBackend, ["--auth-token", "k"])


def test_make_backend_checks_names_then_values_then_tells_the_budget():
    parent = Configurable(config=Config({"DockerBackend": {"cpus": 2.0}}))
    seen = []
    backend = make_backend("docker", parent=parent, output_budget=(123, "X.max_output_bytes"),
                           options=lambda cls: seen.append(cls) or {"memory_limit": "2g"})
    assert seen == [DockerBackend] and backend.cpus == 2.0 and backend.memory_limit == 2 * 1024**3
    assert backend.message_bound == (32 * 1024**2, "X.max_output_bytes")
    with pytest.raises(BadValue, match="Bad option for the docker backend: .*user must be a numeric") as caught:
        make_backend("docker", parent=parent, output_budget=(0, "x"), options=lambda cls: {"user": "root"})
    assert isinstance(caught.value, ConfigError) and caught.value.detail.startswith("user must be")
    with pytest.raises(ConfigError, match="Unknown sandbox backend 'dokcer'"):
        make_backend("dokcer", parent=parent, output_budget=(0, "x"))


def test_closest_suggests_only_near_names():
    assert closest("memory_limt", ["memory_limit", "cpus"]) == "memory_limit"
    assert closest("zzz", ["memory_limit", "cpus"]) is None
