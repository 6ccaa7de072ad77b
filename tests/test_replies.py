"""What the sandbox puts in replies, as the page may see it (sandbox_kernel/session/replies.py):
a closed world, in process. The sandbox wrote every field; only the spec's shapes survive, and every
MIME bundle passes the output policy."""

from __future__ import annotations

import pytest

from sandbox_kernel.core.events import DebugEvent, Stream
from sandbox_kernel.policy import OutputPolicy
from sandbox_kernel.session import replies
from sandbox_kernel.session.pipeline import OutputPipeline

pytestmark = pytest.mark.unit

HOSTILE = "<b>kept</b><img src=x onerror=alert(1)><script>alert(2)</script>"


def test_payloads_keep_their_own_typed_fields_and_police_the_pager():
    kept = replies.payload((
        {"source": "page", "data": {"text/html": HOSTILE, "text/plain": "\x1b[31mhelp\x1b[39m"}, "start": 3, "x": 1},
        {"source": "set_next_input", "text": "# %load f.py\n1", "replace": "yes"},
        {"source": "edit", "filename": "f.py", "line_number": 2},
        {"source": "ask_exit", "keepkernel": True},
        {"source": "javascript", "code": "alert(1)"},  # not a payload of the spec: dropped
        {"source": "set_next_input", "text": ["not", "text"]},
        {"source": "edit", "filename": "f.py", "line_number": True},
        {"source": "page", "data": "not a bundle"},
        "not an object",
    ), OutputPolicy())
    page, load, edit, ask = kept
    assert len(kept) == 4
    assert "<b>kept</b>" in page["data"]["text/html"] and "onerror" not in page["data"]["text/html"]
    assert "script" not in page["data"]["text/html"]
    assert page["data"]["text/plain"] == "\x1b[31mhelp\x1b[39m" and page["start"] == 3 and "x" not in page
    assert load == {"source": "set_next_input", "text": "# %load f.py\n1", "replace": False}
    assert edit == {"source": "edit", "filename": "f.py", "line_number": 2}
    assert ask == {"source": "ask_exit", "keepkernel": True}


def test_user_expressions_answer_only_what_was_asked_and_police_bundles():
    values = {"h": {"status": "ok", "data": {"text/html": HOSTILE}, "metadata": {}},
              "e": {"status": "error", "ename": "ZeroDivisionError", "evalue": 1, "traceback": ["x", 2]},
              "planted": {"status": "ok", "data": {"text/plain": "not asked"}, "metadata": {}}}
    kept = replies.user_expressions(values, {"h": "HTML(...)", "e": "1/0", "missing": "x"}, OutputPolicy())
    assert set(kept) == {"h", "e"}
    assert "onerror" not in kept["h"]["data"]["text/html"]
    assert kept["e"] == {"status": "error", "ename": "ZeroDivisionError", "evalue": "", "traceback": ["x"]}


def test_history_keeps_only_well_formed_rows():
    reply = {"status": "ok", "history": [[1, 2, "a = 1"], [1, 3, ["b", "2"]], [1, 4, ["c", None]], [1, "5", "x"],
                                         [1, 6, {"html": "<b>"}], "row", [True, 1, "x"], [1, 7, ["d"]]]}
    assert replies.history(reply) == {"status": "ok", "history": [[1, 2, "a = 1"], [1, 3, ["b", "2"]],
                                                                  [1, 4, ["c", None]]]}
    assert replies.history({"status": "error"}) == {"status": "ok", "history": []}


def test_debug_events_are_only_those_a_frontend_acts_on():
    pipeline = OutputPipeline(OutputPolicy())
    stopped = {"type": "event", "seq": 3, "event": "stopped", "body": {"threadId": 1, "reason": "breakpoint"}}
    assert pipeline.police(DebugEvent(stopped)) == [DebugEvent(stopped)]
    for dropped in ({"type": "event", "event": "output", "body": {"output": HOSTILE}},
                    {"type": "event", "event": "debugpySockets", "body": {}},
                    {"type": "response", "event": "stopped"}):
        assert pipeline.police(DebugEvent(dropped)) == []
    assert pipeline.police(Stream("stdout", "x")) == [Stream("stdout", "x")]


def test_a_rich_variable_view_is_policed_and_other_replies_stay_data():
    rich = replies.debug_reply({"command": "richInspectVariables"},
                               {"success": True, "command": "evaluate", "body": {"data": {"text/html": HOSTILE},
                                                                                 "metadata": {"text/html": {}}}},
                               OutputPolicy())
    assert "onerror" not in rich["body"]["data"]["text/html"] and "<b>kept</b>" in rich["body"]["data"]["text/html"]
    source = replies.debug_reply({"command": "source"}, {"success": True, "body": {"content": HOSTILE}}, OutputPolicy())
    assert source["body"]["content"] == HOSTILE  # shown as text in a read-only editor, never rendered
