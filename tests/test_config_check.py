"""Unknown option names (``sandbox_kernel.runtime.config_check``): a pure function over traitlets
config, for the kernel's own options and every registered backend's."""

from __future__ import annotations

import pytest
from traitlets.config import Config

from sandbox_kernel.backends import backend_names, get_backend_class
from sandbox_kernel.frontdoors.kernel.kernel import SandboxKernel
from sandbox_kernel.runtime.config_check import unknown_options

pytestmark = pytest.mark.unit


def typo(name: str) -> str:
    """``memory_limit`` → ``memory_limt``: one letter dropped near the end."""
    return name[:-2] + name[-1]


@pytest.mark.parametrize("backend", backend_names())
def test_every_backend_option_typo_names_the_closest_option(backend):
    cls = get_backend_class(backend)
    for name in sorted(cls.class_traits(config=True)):
        if len(name) < 6:
            continue
        config = Config({cls.__name__: {typo(name): "1", name: "1"}})
        [message] = unknown_options(config, [SandboxKernel, cls])
        assert message.startswith(f"unknown option --{cls.__name__}.{typo(name)}; did you mean "), message
        assert message.endswith("?")
    assert unknown_options(Config({cls.__name__: {"session": "x"}}), [SandboxKernel, cls]) == []


def test_kernel_options_and_known_names_pass():
    config = Config({"SandboxKernel": {"backend": "docker", "cell_timeout": 3},
                     "DockerBackend": {"memory_limit": "2g"}, "LocalBackend": {"memory_limit": "1g"},
                     "Backend": {"memory_limit": "1g"}, "Session": {"key": b"k"}})
    assert unknown_options(config, [SandboxKernel, get_backend_class("docker")]) == []


def test_messages_for_a_wrong_option_and_a_wrong_class():
    docker = get_backend_class("docker")
    config = Config({"SandboxKernel": {"cell_timout": 3}, "DockerBakend": {"image": "x"},
                     "DockerBackend": {"zzzzzz": 1}})
    assert unknown_options(config, [SandboxKernel, docker]) == [
        "unknown option --DockerBackend.zzzzzz",
        "unknown option --DockerBakend.image: no class is named DockerBakend; did you mean DockerBackend?",
        "unknown option --SandboxKernel.cell_timout; did you mean --SandboxKernel.cell_timeout?",
    ]
    only_backend = unknown_options(config, [docker], sections=["DockerBackend", "Backend"], prefix="c.")
    assert only_backend == ["unknown option c.DockerBackend.zzzzzz"]


def test_other_programs_sections_are_left_alone():
    """The kernel also reads the IPython profile's ipython_config.py: its sections for other
    programs, and options of classes that are not ours, are traitlets' business."""
    config = Config({"TerminalInteractiveShell": {"confirm_exit": False}, "TerminalIPythonApp": {"display_banner": 0},
                     "InteractiveShell": {"no_such_option_here": 1}, "NotebookApp": {"token": ""}})
    assert unknown_options(config, [SandboxKernel, get_backend_class("docker")]) == []
