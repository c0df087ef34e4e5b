"""Label and field selectors: upstream's grammar, matching, and the fields each kind can be selected by."""

from __future__ import annotations

import pytest

from multiqueue.api.selectors import (
    SelectorError,
    fields_of,
    label_selector_from_dict,
    parse_field_selector,
    parse_label_selector,
    unsupported_fields,
)

LABELS = {"app": "web", "tier": "front", "size": "4"}


@pytest.mark.parametrize(
    ("text", "matches"),
    [
        pytest.param("", True, id="empty-selects-all"),
        pytest.param("app=web", True, id="equals"),
        pytest.param("app==web", True, id="double-equals"),
        pytest.param("app!=web", False, id="not-equals"),
        pytest.param("app in (web, api)", True, id="in"),
        pytest.param("app notin (web)", False, id="notin"),
        pytest.param("tier", True, id="exists"),
        pytest.param("!tier", False, id="does-not-exist"),
        pytest.param("size>3,size<5", True, id="gt-lt"),
        pytest.param("app=web,tier=back", False, id="conjunction"),
        pytest.param("missing!=x", True, id="not-equals-absent-key"),
    ],
)
def test_label_selector_matching(text: str, matches: bool) -> None:
    assert parse_label_selector(text).matches(LABELS) is matches


@pytest.mark.parametrize(
    "text", ["app=web,", "app in web", "=web", "app web", "Bad_/x=y", "size>x", "app in (a"]
)
def test_label_selector_errors(text: str) -> None:
    with pytest.raises(SelectorError):
        parse_label_selector(text)


def test_label_selector_round_trips_to_text() -> None:
    selector = parse_label_selector("app=web,tier in (a,b),!gone")
    assert parse_label_selector(str(selector)) == selector


def test_label_selector_objects() -> None:
    selector = label_selector_from_dict(
        {
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]}],
        }
    )
    assert selector.matches(LABELS)
    assert not label_selector_from_dict(None).matches(LABELS)
    assert label_selector_from_dict({}).matches({})
    with pytest.raises(SelectorError):
        label_selector_from_dict({"matchExpressions": [{"key": "a", "operator": "Near"}]})


def test_field_selectors() -> None:
    pod = {
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"nodeName": "n1"},
        "status": {"phase": "Running"},
    }
    fields = fields_of("", "Pod", pod)
    assert parse_field_selector("metadata.name=p,status.phase!=Failed").matches(fields)
    assert not parse_field_selector("spec.nodeName=n2").matches(fields)
    assert parse_field_selector(r"metadata.name=a\,b").terms == (("metadata.name", "=", "a,b"),)
    assert unsupported_fields("batch", "Job", parse_field_selector("status.phase=x")) == ["status.phase"]
    assert unsupported_fields("batch", "Job", parse_field_selector("status.successful=1")) == []
    assert fields_of("batch", "Job", {"status": {"succeeded": 2}})["status.successful"] == "2"
    event = {
        "involvedObject": {"name": "j", "kind": "Job"},
        "reason": "Dispatched",
        "source": {"component": "mq"},
    }
    assert parse_field_selector("involvedObject.name=j,reason=Dispatched,source=mq").matches(
        fields_of("", "Event", event)
    )
    with pytest.raises(SelectorError):
        parse_field_selector("nonsense")
