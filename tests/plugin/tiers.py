"""Every test's tier, its xdist group, the order of the work, and the nbval notebooks' kernels.

Tiers are the markers of pyproject.toml: a case parametrized with a backend's name gets that
backend's tier (``-m "not docker"`` leaves out the docker case of a contract test); every other
test has the tier its module declares (``pytestmark``) or its own; a test with none is a
collection error.

xdist groups (``--dist loadgroup``; a group runs on one worker, in order): a test module is one
group, so its module-scoped fixtures (a JupyterLab, a shared sandbox) start once. Exceptions:
the in-process tiers (``unit``, ``corpus``) are spread test by test; the contract suite is one
group per target (each target's shared sandbox starts once); an nbval notebook is one group (its
cells share one kernel); tests that hold a machine lock exclusively (:mod:`.locks`) are the group
``machine``. Groups are handed out heaviest first (:data:`WEIGHTS`, seconds measured on the
2-core CI machine; ``make test`` passes ``--no-loadscope-reorder`` so that xdist keeps this order).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.plugin.locks import locks_of
from tests.targets import NAMES

TIERS = ("unit", "corpus", "kernel", "docker", "e2b", "gateway", "browser")
"""Markers of the test tiers (pyproject.toml describes them); ``pytest -m unit`` is the fast one."""
IN_PROCESS = ("unit", "corpus")

BACKEND_TIERS = {"local": "kernel", "docker": "docker", "docker_api": "docker", "podman": "docker",
                 "podman_api": "docker", "e2b": "e2b", "gateway": "gateway", "docker_tcp": "docker", "docker_ssh": "docker"}
"""The tier of a test case parametrized with a backend's name."""

BACKEND_PARAMS = ("backend_name", "name", "kind")
"""Parameter names whose value is a backend's name."""

SPLIT_BY_BACKEND = {"tests/test_contract.py"}
"""Modules whose cases form one group per backend (their shared sandbox is per backend)."""
RIG_GROUPS = {"podman": "podman", "podman_api": "podman", "tests/test_docker_podman.py": "podman",
              **dict.fromkeys(["tests/test_docker_remote.py", "tests/test_docker_remote_kernel.py",
                               "tests/test_docker_remote_magic.py", "tests/test_remote_engine.py",
                               "tests/test_egress_engines.py"], "remote-engine"),
              **dict.fromkeys(["tests/test_browser.py", "tests/test_browser_files.py", "tests/test_browser_findings.py",
                               "tests/test_browser_frontends.py", "tests/test_browser_magic.py",
                               "tests/test_browser_usage.py", "tests/test_voila.py", "tests/test_newcomer.py",
                               "tests/test_browser_checkpoints.py", "tests/test_browser_main_shell.py"], "browser")}
"""Backends and modules whose tests share a rig that is costly to start or to run twice at once:
one group, so one worker and one rig. The Podman service of tests/targets/podman.py (Podman slowed
down until a cell timed out with one service per worker on its one storage); the remote engine of
tests/targets/remote_engine.py (a second one loads the 700 MB sandbox image into a tmpfs); the
browser modules' JupyterLab and Chromium (four at once, one per worker, held both cores for
minutes: load average 58, and screenshots timed out)."""

WEIGHTS: dict[str, float] = {}
"""Seconds a group took (``group name: seconds``), heaviest handed out first; a group not
listed weighs its tier's default (:data:`TIER_WEIGHTS`)."""
TIER_WEIGHTS = {"browser": 300.0, "gateway": 60.0, "docker": 60.0, "e2b": 30.0, "kernel": 30.0, "corpus": 1.0, "unit": 0.1}


def _notebook(item: pytest.Item):
    return getattr(item.parent, "nb", None)  # an nbval cell: its notebook


def _backend_params(item: pytest.Item) -> dict:
    notebook = _notebook(item)
    if notebook is not None:  # its kernel says
        return {"name": notebook.metadata.get("kernelspec", {}).get("name", "").removeprefix("sandbox-")}
    return getattr(getattr(item, "callspec", None), "params", {})


def _mark_tier(item: pytest.Item) -> str | None:
    params = _backend_params(item)
    for key in BACKEND_PARAMS:
        if params.get(key) in BACKEND_TIERS:
            item.add_marker(BACKEND_TIERS[params[key]])
    if _notebook(item) is not None and not any(item.get_closest_marker(tier) for tier in TIERS):
        item.add_marker("kernel")  # a notebook on python3: nbval starts a kernel
    return next((tier for tier in reversed(TIERS) if item.get_closest_marker(tier)), None)


def group_of(item: pytest.Item, tier: str) -> str | None:
    """The xdist group of ``item`` (None: a group of its own)."""
    if (marker := item.get_closest_marker("xdist_group")) is not None:
        return marker.args[0] if marker.args else marker.kwargs.get("name")
    if any(exclusive for _, exclusive in locks_of(item)):
        return "machine"
    path = Path(str(item.fspath)).relative_to(item.config.rootpath).as_posix()
    if _notebook(item) is not None:
        return f"notebook:{path}"
    if tier in IN_PROCESS:
        return None
    if path in RIG_GROUPS:
        return RIG_GROUPS[path]
    if path in SPLIT_BY_BACKEND:
        params = _backend_params(item)
        name = next((params[k] for k in BACKEND_PARAMS if k in params), "")
        return RIG_GROUPS.get(name, f"{path}:{name}")
    return path


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]):
    untiered, weights = [], {}
    for item in items:
        tier = _mark_tier(item)
        if tier is None:
            untiered.append(item.nodeid)
            continue
        group = group_of(item, tier)
        if group is not None and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group))
        key = group or item.nodeid
        weights[key] = WEIGHTS.get(key, weights.get(key, 0.0) + TIER_WEIGHTS[tier])
        item.stash[_GROUP] = key
    if untiered:
        raise pytest.UsageError(f"{len(untiered)} test(s) have no tier marker ({', '.join(TIERS)}): declare it "
                                f"with `pytest.mark.TIER` in the module's pytestmark, e.g. {untiered[0]}")
    result = yield
    if getattr(config, "workerinput", None) is not None and config.getvalue("loadgroup") and (
            lost := [item.nodeid for item in items if item.get_closest_marker("xdist_group") and "@" not in item.nodeid]):
        raise pytest.UsageError(f"pytest-xdist did not group {lost[0]} (its node id has no @GROUP): pytest 9.2's node ids "
                                "defeat --dist loadgroup (pytest-dev/pytest-xdist#1386); install the test extra's pytest<9.2")
    items.sort(key=lambda item: -weights[item.stash[_GROUP]])  # stable: each group keeps its order
    return result


_GROUP = pytest.StashKey[str]()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item: pytest.Item):
    """nbval cells of a notebook whose kernel is ``sandbox-NAME``: make sure backend NAME can run
    here (skip, or fail in CI) and start the kernel nbval starts (at the notebook's first cell)
    with the backend's test environment (e.g. the local E2B server's address)."""
    notebook = _notebook(item)
    name = notebook.metadata.get("kernelspec", {}).get("name", "").removeprefix("sandbox-") if notebook else ""
    if name not in NAMES:
        return (yield)
    from tests.support.backends import prepared

    with pytest.MonkeyPatch.context() as patch:
        for key, value in prepared(name).kernel_env.items():
            patch.setenv(key, value)
        return (yield)


# -- minutes per tier, at the end of a run with --durations (.ci/run) -----------------------------
class TierMinutes:
    """Adds each phase's seconds to its test's tier (on xdist's controller, from the workers'
    reports) and prints the minutes at the end; every test's seconds go to build/test-seconds.json
    (``node id: seconds``, heaviest first)."""

    MODULES = 15
    """How many of the heaviest modules the summary names."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.modules: dict[str, float] = {}
        self.tests: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        tier = next((tier for tier in reversed(TIERS) if tier in report.keywords), "untiered")
        self.seconds[tier] = self.seconds.get(tier, 0.0) + report.duration
        module = report.nodeid.split("::")[0].split("@")[0]
        self.modules[module] = self.modules.get(module, 0.0) + report.duration
        self.tests[report.nodeid] = round(self.tests.get(report.nodeid, 0.0) + report.duration, 2)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        parts = ", ".join(f"{tier} {self.seconds[tier] / 60:.1f}" for tier in (*TIERS, "untiered") if tier in self.seconds)
        terminalreporter.write_line(f"minutes per tier (set-up, call and teardown, summed over the workers): {parts}")
        heaviest = sorted(self.modules.items(), key=lambda item: -item[1])[:self.MODULES]
        terminalreporter.write_line(f"minutes of the {len(heaviest)} heaviest modules: " + ", ".join(
            f"{Path(module).name} {seconds / 60:.1f}" for module, seconds in heaviest))
        path = terminalreporter.config.rootpath / "build" / "test-seconds.json"
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(dict(sorted(self.tests.items(), key=lambda item: -item[1])), indent=0))
        terminalreporter.write_line(f"seconds of every test (set-up, call and teardown): {path}")


def pytest_configure(config: pytest.Config) -> None:
    if config.option.durations is not None and getattr(config, "workerinput", None) is None:
        config.pluginmanager.register(TierMinutes(), "sandbox-kernel-tier-minutes")
