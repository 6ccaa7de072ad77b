"""This project's own families of hostile markup through the output policy, in process (the
``corpus`` tier).

:mod:`tests.support.xss_families` generates about 1,500 payloads from short lists written here
(elements x event handlers, URL schemes x URL attributes, SVG animation, mXSS containers, CSS
loaders and overlays, Markdown links, obfuscated spellings, attribute tricks). Every payload goes
into each of the seven places a sandbox can put markup (:data:`TARGETS`: HTML, Markdown, an SVG
document, the ``HTML``, ``HTMLMath`` and ``Output`` widgets, an HTML description) under
``sanitize`` and ``isolate``, and:

- what comes out has nothing that can act in the page (:mod:`tests.policy_oracle`, which knows
  nothing of the policy's code);
- policing it again gives the same bytes (the fixed point);
- a payload the oracle flags never comes out as it went in;
- nothing raises (a payload that did would fail its family's test).

The real-browser sample, with ``trust`` as the control, is in tests/test_browser_findings.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from sandbox_kernel.core.events import Comm
from sandbox_kernel.policy import OutputPolicy
from sandbox_kernel.policy.widgets.rules import WidgetRules
from tests.policy_oracle import html_violations, violations
from tests.support.policy import opening
from tests.support.xss_families import families

pytestmark = pytest.mark.corpus

FAMILIES = families()


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
@pytest.mark.parametrize("family", list(FAMILIES))
def test_no_payload_can_act_and_policing_twice_changes_nothing(family, target, mode):
    policy, police = OutputPolicy(mode), TARGETS[target]
    acted, moved = [], []
    for name, payload in FAMILIES[family].items():
        found, shown, again = police(policy, payload)
        if found:
            acted.append((name, found[:3]))
        if again != shown:
            moved.append(name)
    assert acted == [], f"{len(acted)} payloads of {family} can act in {target} under {mode}: {acted[:5]}"
    assert moved == [], f"{len(moved)} payloads of {family} changed when policed twice in {target}: {moved[:5]}"


def test_the_families_are_hostile_and_their_own():
    """(a guard: payloads the oracle finds harmless as they are would make the checks above vacuous)
    Most payloads can act as they are, each family has some that can, and every name is unique.
    The rest are so by design: mXSS markup that is text until a second parse, Markdown links the
    Markdown renderer itself refuses, decoys that only look like handlers, overlays."""
    names = [name for family in FAMILIES.values() for name in family]
    assert len(names) == len(set(names)) and 1000 < len(names) < 2000
    hostile = {family: sum(bool(violations({"text/html": p}) or violations({"text/markdown": p}))
                           for p in payloads.values()) for family, payloads in FAMILIES.items()}
    assert all(hostile.values()) and sum(hostile.values()) >= 0.85 * len(names), hostile


def test_a_hostile_payload_never_comes_out_as_it_went_in():
    policy = OutputPolicy()
    for family in FAMILIES.values():
        for name, payload in family.items():
            if violations({"text/html": payload}):
                assert policy.bundle({"text/html": payload}).data["text/html"] != payload, name


def test_the_comm_messages_are_the_rules_own():
    """(a guard for the widget targets: a refused model would make every check vacuous)"""
    event, _, _ = WidgetRules(OutputPolicy()).from_sandbox(opening("w", "HTMLModel", value="<b>x</b>"))
    assert isinstance(event, Comm) and event.content["data"]["state"]["value"] == "<b>x</b>"
