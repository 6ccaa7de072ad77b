"""The Jupyter project's own kernel conformance suite, ``jupyter_kernel_test`` 0.7, with the samples
of its ``test_ipykernel.py`` (what ``python3`` passes), run on each sandbox kernelspec as a
frontend starts it: local, docker on both transports, a Jupyter gateway. test_ipykernel.py tests
history with tail and search (``unique``, ``n``), not range: ipykernel answers a range of the
current session by its number with rows numbered 0, which the suite's range check refuses, so
``python3`` skips it too; :meth:`IPyKernelSamples.test_history_range` checks range as ipykernel
answers it.

e2b runs the same suite; where E2B's ``/execute`` cannot carry a feature (completion, inspection,
the pager's payload, history: docs/how-to/e2b.md's table), its test asserts the kernel's documented answer
instead (no matches, nothing found, no payload, no rows), so a change either way fails.
"""

from __future__ import annotations

import tempfile

import jupyter_kernel_test as jkt
import pytest

from tests.kernels import kernel

pytestmark = [pytest.mark.kernel, pytest.mark.slow]


class IPyKernelSamples(jkt.KernelTests):
    """test_ipykernel.py's samples; :attr:`target` names the test target whose kernelspec runs."""

    __test__ = False  # a base: its subclasses name the target
    target = ""
    language_name = "python"
    file_extension = ".py"
    code_hello_world = "print('hello, world')"
    code_stderr = "import sys; print('test', file=sys.stderr)"
    completion_samples = [{"text": "zi", "matches": {"zip"}}]
    complete_code_samples = ["1", "print('hello, world')", "def f(x):\n  return x*2\n\n\n"]
    incomplete_code_samples = ["print('''hello", "def f(x):\n  x*2"]
    invalid_code_samples = ["import = 7q"]
    code_page_something = "zip?"
    code_generate_error = "raise"
    code_execute_result = [{"code": "1+2+3", "result": "6"}, {"code": "[n*n for n in range(1, 4)]", "result": "[1, 4, 9]"}]
    code_display_data = [
        {"code": "from IPython.display import HTML, display; display(HTML('<b>test</b>'))", "mime": "text/html"},
        {"code": "from IPython.display import Math, display; display(Math('\\\\frac{1}{2}'))", "mime": "text/latex"},
    ]
    code_history_pattern = "1?2*"
    supported_history_operations = ("tail", "search")
    code_inspect_sample = "zip"
    code_clear_output = "from IPython.display import clear_output; clear_output()"

    @classmethod
    def setUpClass(cls) -> None:
        # the installed kernelspec, with the target's set-up; a Jupyter data folder of its own
        # holds a fresh local history file, as ipykernel's tests give each kernel a fresh
        # IPYTHONDIR: test_history's unique search expects one match, and the user's history file
        # (kept across sessions, like python3's) held every earlier run's "1+2+3" and "1?2 + 1"
        cls._data_dir = tempfile.TemporaryDirectory(prefix="conformance-data-")
        cls._kernel = kernel(cls.target, JUPYTER_DATA_DIR=cls._data_dir.name)
        cls.km, cls.kc = cls._kernel.__enter__()
        # jupyter_client's wait_for_ready sends kernel_info_request again after each second without
        # a reply, which a loaded machine can take: the extra requests' busy/idle could reach IOPub
        # after the first test's flush_channels (seen on a loaded machine: test_clear_output's
        # first status was 'idle'). A cell run here reads them all, since IOPub keeps its order.
        cls.kc.execute_interactive("pass", timeout=120, output_hook=lambda msg: None)

    @classmethod
    def tearDownClass(cls) -> None:
        cls._kernel.__exit__(None, None, None)
        cls._data_dir.cleanup()

    def test_history_range(self) -> None:
        """``range`` as ipykernel answers it: lines ``start`` to ``stop`` of a session, the current
        one (0, or its number from a tail) as session 0."""
        reply = self.history_helper(["range_marker = 1", "range_marker + 1"], output=False, raw=True,
                                    hist_access_type="tail", n=2)
        (number, first, _), _ = reply["content"]["history"]
        for session in (0, number):
            rows = self.history_helper([], output=False, raw=True, hist_access_type="range", session=session,
                                       start=first, stop=first + 2)["content"]["history"]
            assert rows == [[0, first, "range_marker = 1"], [0, first + 1, "range_marker + 1"]]


for _target in ("local", "docker", "docker_api", "gateway"):  # TestLocal, TestDocker, TestDockerApi, TestGateway
    _name = "Test" + "".join(part.title() for part in _target.split("_"))
    globals()[_name] = type(_name, (IPyKernelSamples,), {"__test__": True, "target": _target})


class TestE2B(IPyKernelSamples):
    """What E2B can carry passes as on python3; the rest gets the kernel's documented answer."""

    __test__ = True
    target = "e2b"

    def test_completion(self) -> None:  # no completion in E2B: no matches, at once
        self.kc.complete("zi")
        reply = self.get_non_kernel_info_reply(timeout=30)
        assert reply["content"]["status"] == "ok" and reply["content"]["matches"] == []

    def test_inspect(self) -> None:  # no inspection in E2B: nothing found
        self.kc.inspect("zip")
        reply = self.get_non_kernel_info_reply(timeout=30)
        assert reply["content"]["status"] == "ok" and reply["content"]["found"] is False

    def test_pager(self) -> None:  # E2B's /execute returns no payloads: zip? pages nothing
        self.flush_channels()
        reply, _ = self.execute_helper(self.code_page_something)
        assert reply["content"]["status"] == "ok" and reply["content"]["payload"] == []

    def test_history(self) -> None:  # E2B has no history_request: no rows
        reply = self.history_helper(["1+2+3"], output=False, raw=True, hist_access_type="tail", n=1)
        assert reply["content"] == {"status": "ok", "history": []}

    test_history_range = test_history

    def test_clear_output(self) -> None:  # E2B's /execute drops clear_output (capabilities.display_updates)
        self.flush_channels()
        reply, outputs = self.execute_helper(self.code_clear_output)
        assert reply["content"]["status"] == "ok" and outputs == []
