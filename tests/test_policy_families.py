"""The public XSS and mXSS corpora through the output policy, in process (the ``corpus`` tier).

``tests/corpora/*.json`` hold payload strings only, each file with its source repository,
commit, paths and licence: DOMPurify's fixtures and test suite, the html5sec vectors, the mXSS
cheat sheet's examples, and one payload of this project's own per element and event handler of
PortSwigger's cheat sheet table. Every payload goes into each of the seven places a sandbox can
put markup (:data:`TARGETS`: HTML, Markdown, an SVG document, the ``HTML``, ``HTMLMath`` and
``Output`` widgets, an HTML description) under ``sanitize`` and ``isolate``, and:

- what comes out has nothing that can act in the page (:mod:`tests.policy_oracle`, which knows
  nothing of the policy's code);
- policing it again gives the same bytes (the fixed point);
- a payload the oracle flags never comes out as it went in.

The real-browser sample, with ``trust`` as the control, is in tests/test_browser_findings.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sandbox_kernel.core.events import Comm
from sandbox_kernel.policy import OutputPolicy
from sandbox_kernel.policy.widgets.rules import WidgetRules
from tests.policy_oracle import html_violations, violations
from tests.support.policy import opening

pytestmark = pytest.mark.corpus

CORPORA = Path(__file__).with_name("corpora")


def corpus(name: str) -> list[str]:
    """The payloads of ``tests/corpora/NAME.json``."""
    return json.loads((CORPORA / f"{name}.json").read_text())["payloads"]


NAMES = sorted(path.stem for path in CORPORA.glob("*.json"))


def bundle_target(mime: str, wrap=lambda payload: payload):
    def police(policy: OutputPolicy, payload: str) -> tuple[list[str], Any, Any]:
        out = policy.bundle({mime: wrap(payload)})
        again = policy.bundle(out.data, out.metadata)
        return violations(out.data, out.metadata, isolate=policy.mode == "isolate"), out.data, again.data
    return police


def widget_target(model: str, key: str, **state):
    def police(policy: OutputPolicy, payload: str) -> tuple[list[str], Any, Any]:
        event, _, _ = WidgetRules(policy).from_sandbox(opening("w", model, **state, **{key: payload}))
        value = event.content["data"]["state"].get(key, "") if event is not None else ""
        again = policy.sanitize_html(value)[0] if key == "description" else policy.html(value)[0]
        return html_violations(value, isolate=policy.mode == "isolate" and key == "value"), value, again
    return police


def output_widget(policy: OutputPolicy, payload: str) -> tuple[list[str], Any, Any]:
    output = {"output_type": "display_data", "data": {"text/html": payload}, "metadata": {}}
    event, _, _ = WidgetRules(policy).from_sandbox(opening("o", "OutputModel", module="@jupyter-widgets/output",
                                                          outputs=[output]))
    [shown] = event.content["data"]["state"]["outputs"]
    again = policy.bundle(shown["data"], shown["metadata"])
    return violations(shown["data"], shown["metadata"], isolate=policy.mode == "isolate"), shown["data"], again.data


TARGETS = {
    "html": bundle_target("text/html"),
    "markdown": bundle_target("text/markdown"),
    "svg": bundle_target("image/svg+xml", lambda p: f'<svg xmlns="http://www.w3.org/2000/svg">{p}</svg>'),
    "html-widget": widget_target("HTMLModel", "value"),
    "htmlmath-widget": widget_target("HTMLMathModel", "value"),
    "output-widget": output_widget,
    "html-description": widget_target("CheckboxModel", "description", description_allow_html=True),
}


@pytest.mark.parametrize("mode", ["sanitize", "isolate"])
@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("name", NAMES)
def test_no_public_payload_can_act_and_policing_twice_changes_nothing(name, target, mode):
    policy, police = OutputPolicy(mode), TARGETS[target]
    acted, moved = [], []
    for payload in corpus(name):
        found, shown, again = police(policy, payload)
        if found:
            acted.append((payload[:80], found[:3]))
        if again != shown:
            moved.append(payload[:80])
    assert acted == [], f"{len(acted)} payloads of {name} can act in {target} under {mode}: {acted[:5]}"
    assert moved == [], f"{len(moved)} payloads of {name} changed when policed twice in {target}: {moved[:5]}"


@pytest.mark.parametrize("name", NAMES)
def test_every_corpus_says_where_it_comes_from(name):
    """Payload strings only, with their source, commit and licence (no fetched code)."""
    data = json.loads((CORPORA / f"{name}.json").read_text())
    assert data["source"].startswith("https://github.com/") and len(data["commit"]) == 40 and data["license"]
    assert data["count"] == len(data["payloads"]) > 50 and all(isinstance(p, str) for p in data["payloads"])


def test_a_hostile_payload_never_comes_out_as_it_went_in():
    policy = OutputPolicy()
    for name in NAMES:
        for payload in corpus(name):
            if violations({"text/html": payload}):
                assert policy.bundle({"text/html": payload}).data["text/html"] != payload, payload


def test_the_comm_messages_are_the_rules_own():
    """(a guard for the widget targets: a refused model would make every check vacuous)"""
    event, _, _ = WidgetRules(OutputPolicy()).from_sandbox(opening("w", "HTMLModel", value="<b>x</b>"))
    assert isinstance(event, Comm) and event.content["data"]["state"]["value"] == "<b>x</b>"
