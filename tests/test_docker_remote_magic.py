"""The ``%%sandbox`` magic (the notebook scenario of tests/support/magic.py and its jupyter_client tests)
and the Python API on the docker backend on an engine that does not share this host's filesystem:
the rig of tests/targets/remote_engine.py over TCP with TLS, transport=api. (The kernel's own
features on the rig, over TCP and ssh: tests/test_docker_remote.py and
tests/test_docker_remote_kernel.py.)"""

from __future__ import annotations

import pytest

from sandbox_kernel.frontdoors.api import Sandbox
from tests.support.backends import prepared
from tests.support.magic import (  # noqa: F401 - its tests, collected here for the rig
    test_clear_output_and_display_updates,
    test_error_fails_the_cell_with_the_sandbox_traceback,
    test_help_and_the_pager_show_as_in_the_host,
    test_input_reaches_the_notebook_user,
    test_interrupt_reaches_the_sandbox_and_the_session_survives,
    test_list_and_status,
    test_matplotlib_figure_is_a_png,
    test_restart_and_stop,
    test_state_persists_per_session_and_host_is_untouched,
    test_stdout_is_live,
    test_streams_reach_the_cell,
    test_timeout_gives_one_short_message_and_keeps_state,
    test_upload_and_download,
)
from tests.targets import env_vars

pytestmark = [pytest.mark.docker, pytest.mark.timeout(300)]


@pytest.fixture(scope="module", params=["docker_tcp"])
def backend_name(request) -> str:
    prepared(request.param)
    return request.param


def test_the_api_runs_cells_and_moves_files_on_the_rig(backend_name, tmp_path):
    (tmp_path / "in.txt").write_text("from the host")
    with env_vars(prepared(backend_name).kernel_env):
        with Sandbox("docker", **prepared(backend_name).traits) as sandbox:
            assert sandbox.run("x = 41").status == "ok"
            assert sandbox.run("x + 1").text == "42"
            sandbox.upload(tmp_path / "in.txt", "in.txt")
            assert sandbox.run("open('in.txt').read().upper()").text == "'FROM THE HOST'"
            sandbox.run("open('out.txt', 'w').write('made on the rig')")
            assert sandbox.download("out.txt", tmp_path / "out.txt").read_text() == "made on the rig"
