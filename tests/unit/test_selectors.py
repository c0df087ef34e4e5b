"""Label and field selectors: upstream's grammar and messages, matching, and the fields each kind is selected by.

The parse-error messages were checked against kubectl, which runs upstream's own parser.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from multiqueue.api.errors import SelectorError
from multiqueue.api.fieldselectors import (
    FieldSelector,
    FieldTerm,
    fields_of,
    parse_field_selector,
    unsupported_field_message,
    unsupported_fields,
)
from multiqueue.api.labelselectors import (
    EVERYTHING,
    NOTHING,
    LabelSelector,
    Operator,
    label_selector_from_dict,
    requirement,
)
from multiqueue.api.labelsyntax import parse_label_selector

LABELS = {"app": "web", "tier": "front", "size": "4", "empty": ""}

_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
    "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
_NAME_PART_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)


# --- label selectors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "matches"),
    [
        pytest.param("", True, id="empty-selects-all"),
        pytest.param("app=web", True, id="equals"),
        pytest.param("app==web", True, id="double-equals"),
        pytest.param("app!=web", False, id="not-equals"),
        pytest.param("missing!=x", True, id="not-equals-absent-key"),
        pytest.param("missing=x", False, id="equals-absent-key"),
        pytest.param("empty=", True, id="equals-empty-value"),
        pytest.param("app in (web, api)", True, id="in"),
        pytest.param("app in (api)", False, id="in-miss"),
        pytest.param("app notin (web)", False, id="notin"),
        pytest.param("missing notin (web)", True, id="notin-absent-key"),
        pytest.param("empty in ()", True, id="empty-set-means-empty-value"),
        pytest.param("tier", True, id="exists"),
        pytest.param("missing", False, id="exists-absent"),
        pytest.param("!tier", False, id="does-not-exist"),
        pytest.param("!missing", True, id="does-not-exist-absent"),
        pytest.param("size>3,size<5", True, id="gt-lt"),
        pytest.param("size>4", False, id="gt-is-strict"),
        pytest.param("app>1", False, id="gt-on-non-integer-label"),
        pytest.param("missing<9", False, id="lt-absent-key"),
        pytest.param("app=web,tier=back", False, id="conjunction"),
        pytest.param(" app = web ,\ttier\n", True, id="whitespace"),
        pytest.param("in in (in), notin notin (x)", False, id="keywords-as-keys-and-values"),
    ],
)
def test_label_selector_matching(text: str, matches: bool) -> None:
    assert parse_label_selector(text).matches(LABELS) is matches


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("app=web,", "found '', expected: identifier after ','", id="trailing-comma"),
        pytest.param("a,,b", "found ',', expected: identifier after ','", id="double-comma"),
        pytest.param("=web", "found '=', expected: !, identifier, or 'end of string'", id="no-key"),
        pytest.param("(", "found '(', expected: !, identifier, or 'end of string'", id="open-paren"),
        pytest.param(
            "app in web", "unable to parse requirement: found 'web' expected: '('", id="in-without-parens"
        ),
        pytest.param(
            "app web",
            "unable to parse requirement: found 'web', expected: in, notin, =, ==, !=, gt, lt",
            id="no-operator",
        ),
        pytest.param(
            "a!",
            "unable to parse requirement: found '!', expected: in, notin, =, ==, !=, gt, lt",
            id="bang-after-key",
        ),
        pytest.param(
            "app in (a", "unable to parse requirement: found '', expected: ',' or ')'", id="unclosed-set"
        ),
        pytest.param(
            "a in (b c)",
            "unable to parse requirement: found 'c', expected: ',' or ')'",
            id="set-missing-comma",
        ),
        pytest.param(
            "a in (b=)", "unable to parse requirement: found '=', expected: ',' or ')'", id="operator-in-set"
        ),
        pytest.param(
            "a in (=)",
            "unable to parse requirement: found '=', expected: ',', ')' or identifier",
            id="set-starts-badly",
        ),
        pytest.param("a=b=c", "found '=', expected: ',' or 'end of string'", id="two-operators"),
        pytest.param("!a=b", "found '=', expected: ',' or 'end of string'", id="negation-takes-no-value"),
        pytest.param(
            "a=(", "unable to parse requirement: found '(', expected: identifier", id="paren-as-value"
        ),
        pytest.param("!", "unable to parse requirement: found '', expected: identifier", id="bang-alone"),
        pytest.param("!!a", "unable to parse requirement: found '!', expected: identifier", id="double-bang"),
        pytest.param(
            "size>x",
            "unable to parse requirement: values[0]: Invalid value: \"x\": for 'Gt', 'Lt' operators, the value "
            "must be an integer",
            id="gt-not-integer",
        ),
        pytest.param(
            "a>9223372036854775808",
            "unable to parse requirement: values[0]: Invalid value: \"9223372036854775808\": for 'Gt', 'Lt' "
            "operators, the value must be an integer",
            id="gt-out-of-int64",
        ),
        pytest.param(
            "a>-5",
            f'unable to parse requirement: values[0][a]: Invalid value: "-5": {_LABEL_VALUE_MSG}',
            id="gt-negative-is-no-label-value",
        ),
        pytest.param(
            "Bad_/x=y",
            'unable to parse requirement: <nil>: Invalid value: "Bad_/x": prefix part a lowercase RFC 1123 '
            "subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end "
            "with an alphanumeric character (e.g. 'example.com', regex used for validation is "
            "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            id="invalid-key-prefix",
        ),
        pytest.param(
            "a" * 64,
            f'unable to parse requirement: <nil>: Invalid value: "{"a" * 64}": name part must be no more than 63 '
            "bytes",
            id="key-too-long",
        ),
        pytest.param(
            "a=" + "b" * 64,
            f'unable to parse requirement: values[0][a]: Invalid value: "{"b" * 64}": must be no more than 63 '
            "bytes",
            id="value-too-long",
        ),
        pytest.param(
            "a=-x",
            f'unable to parse requirement: values[0][a]: Invalid value: "-x": {_LABEL_VALUE_MSG}',
            id="invalid-value",
        ),
    ],
)
def test_label_selector_errors(text: str, message: str) -> None:
    with pytest.raises(SelectorError) as caught:
        parse_label_selector(text)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        pytest.param("tier in (b, a,a), app=web", "app=web,tier in (a,b)", id="sorted-by-key-values-sorted"),
        pytest.param("a==b", "a==b", id="double-equals-kept"),
        pytest.param("!gone,here", "!gone,here", id="exists-and-not"),
        pytest.param("a in (,b)", "a in (,b)", id="empty-value-in-set"),
        pytest.param("n>3,m<10", "m<10,n>3", id="numeric"),
        pytest.param("a=", "a=", id="empty-exact-value"),
        pytest.param("  ", "", id="blank"),
    ],
)
def test_label_selector_string_form(text: str, canonical: str) -> None:
    selector = parse_label_selector(text)
    assert str(selector) == canonical
    assert parse_label_selector(str(selector)) == selector


@pytest.mark.parametrize(
    ("selector", "empty", "matches_no_labels"),
    [
        pytest.param(EVERYTHING, True, True, id="everything"),
        pytest.param(NOTHING, False, False, id="nothing"),
        pytest.param(parse_label_selector("!a"), False, True, id="restricting"),
    ],
)
def test_empty_and_nothing(selector: LabelSelector, empty: bool, matches_no_labels: bool) -> None:
    assert selector.empty is empty
    assert selector.matches({}) is matches_no_labels
    assert selector.matches(None) is matches_no_labels


@pytest.mark.parametrize(
    ("selector", "labels", "matches"),
    [
        pytest.param(None, LABELS, False, id="none-selects-nothing"),
        pytest.param({}, LABELS, True, id="empty-selects-everything"),
        pytest.param({"matchLabels": {}, "matchExpressions": []}, {}, True, id="no-terms-selects-everything"),
        pytest.param({"matchLabels": {"app": "web"}}, LABELS, True, id="match-labels"),
        pytest.param({"matchLabels": {"app": "api"}}, LABELS, False, id="match-labels-miss"),
        pytest.param(
            {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "back"]}]},
            LABELS,
            True,
            id="in",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["front"]}]},
            LABELS,
            False,
            id="not-in",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "size", "operator": "Exists"}]}, LABELS, True, id="exists"
        ),
        pytest.param(
            {"matchExpressions": [{"key": "size", "operator": "DoesNotExist"}]},
            LABELS,
            False,
            id="does-not-exist",
        ),
        pytest.param(
            {
                "matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "gone", "operator": "DoesNotExist"}],
            },
            LABELS,
            True,
            id="labels-and-expressions",
        ),
    ],
)
def test_label_selector_from_dict(selector: Any, labels: dict[str, str], matches: bool) -> None:
    assert label_selector_from_dict(selector).matches(labels) is matches


def test_label_selector_from_dict_reads_like_its_string_form() -> None:
    selector = label_selector_from_dict(
        {
            "matchLabels": {"b": "1"},
            "matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["y", "x"]}],
        }
    )
    assert str(selector) == "a notin (x,y),b=1"
    assert parse_label_selector(str(selector)) == selector


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        pytest.param(
            {"matchExpressions": [{"key": "a", "operator": "Near"}]},
            '"Near" is not a valid label selector operator',
            id="unknown-operator",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "a", "operator": "In", "values": []}]},
            "values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty",
            id="in-without-values",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
            'values: Invalid value: ["x"]: values set must be empty for exists and does not exist',
            id="exists-with-values",
        ),
        pytest.param(
            {"matchLabels": {"a_": "x"}},
            f'key: Invalid value: "a_": {_NAME_PART_MSG}',
            id="invalid-key",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "", "operator": "In", "values": ["-x", "ok"]}]},
            # Go checks an empty name part against the pattern too, and joins what it finds with "; ".
            f'[key: Invalid value: "": name part must be non-empty; {_NAME_PART_MSG}, values[0][]: Invalid value: '
            f'"-x": {_LABEL_VALUE_MSG}]',
            id="every-problem-reported",
        ),
        pytest.param("app=web", "a label selector must be an object, not str", id="not-an-object"),
    ],
)
def test_label_selector_from_dict_errors(selector: Any, message: str) -> None:
    with pytest.raises(SelectorError) as caught:
        label_selector_from_dict(selector)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("operator", "values", "message"),
    [
        pytest.param(
            Operator.EQUALS,
            ["a", "b"],
            "exact-match compatibility requires one single value",
            id="equals-two",
        ),
        pytest.param(
            Operator.GREATER_THAN, [], "for 'Gt', 'Lt' operators, exactly one value is required", id="gt-none"
        ),
    ],
)
def test_requirement_value_counts(operator: Operator, values: list[str], message: str) -> None:
    with pytest.raises(SelectorError, match=message):
        requirement("k", operator, values)


# --- field selectors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "terms", "canonical"),
    [
        pytest.param("", (), "", id="empty"),
        pytest.param("metadata.name=a", (FieldTerm("metadata.name", "a"),), "metadata.name=a", id="equals"),
        pytest.param(
            "metadata.name==a", (FieldTerm("metadata.name", "a"),), "metadata.name=a", id="double-equals"
        ),
        pytest.param(
            "status.phase!=Failed",
            (FieldTerm("status.phase", "Failed", negated=True),),
            "status.phase!=Failed",
            id="not-equals",
        ),
        pytest.param(
            "b=2,a=1", (FieldTerm("a", "1"), FieldTerm("b", "2")), "a=1,b=2", id="terms-sorted-as-upstream"
        ),
        pytest.param(r"a=x\,y", (FieldTerm("a", "x,y"),), r"a=x\,y", id="escaped-comma"),
        pytest.param(r"a=x\=y", (FieldTerm("a", "x=y"),), r"a=x\=y", id="escaped-equals"),
        pytest.param(r"a=x\\y", (FieldTerm("a", "x\\y"),), r"a=x\\y", id="escaped-backslash"),
        pytest.param("a=", (FieldTerm("a", ""),), "a=", id="empty-value"),
        pytest.param(
            "a=1,,b=2", (FieldTerm("a", "1"), FieldTerm("b", "2")), "a=1,b=2", id="empty-term-skipped"
        ),
    ],
)
def test_field_selector_parsing(text: str, terms: tuple[FieldTerm, ...], canonical: str) -> None:
    selector = parse_field_selector(text)
    assert selector.terms == terms
    assert str(selector) == canonical
    assert parse_field_selector(str(selector)) == selector


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "nonsense", "invalid selector: 'nonsense'; can't understand 'nonsense'", id="no-operator"
        ),
        pytest.param("a=1,b", "invalid selector: 'a=1,b'; can't understand 'b'", id="second-term-bad"),
        pytest.param(
            "a=b=c", "invalid field selector: unescaped character in value: =", id="unescaped-equals"
        ),
        pytest.param(r"a=b\c", "invalid field selector: invalid escape sequence: \\c", id="unknown-escape"),
        pytest.param("a=b\\", "invalid field selector: invalid escape sequence: \\", id="trailing-backslash"),
    ],
)
def test_field_selector_errors(text: str, message: str) -> None:
    with pytest.raises(SelectorError) as caught:
        parse_field_selector(text)
    assert str(caught.value) == message


POD: dict[str, Any] = {
    "metadata": {"name": "p", "namespace": "ns"},
    "spec": {"nodeName": "n1", "restartPolicy": "Never", "schedulerName": "default-scheduler"},
    "status": {"phase": "Running", "podIPs": [{"ip": "10.0.0.7"}], "podIP": "10.0.0.7"},
}
EVENT: dict[str, Any] = {
    "metadata": {"name": "e", "namespace": "ns"},
    "involvedObject": {"kind": "Job", "name": "j", "namespace": "ns", "uid": "u", "apiVersion": "batch/v1"},
    "reason": "Dispatched",
    "type": "Normal",
    "reportingComponent": "multiqueue",
}


@pytest.mark.parametrize(
    ("group", "kind", "obj", "text", "matches"),
    [
        pytest.param("", "Pod", POD, "metadata.name=p,metadata.namespace=ns", True, id="pod-name-namespace"),
        pytest.param("", "Pod", POD, "spec.nodeName=n1,status.phase!=Failed", True, id="pod-node-phase"),
        pytest.param("", "Pod", POD, "spec.nodeName=n2", False, id="pod-other-node"),
        pytest.param("", "Pod", POD, "spec.nodeName=", False, id="pod-unscheduled-filter"),
        pytest.param("", "Pod", POD, "spec.host=n1", True, id="pod-spec-host-alias"),
        pytest.param("", "Pod", POD, "spec.hostNetwork=false", True, id="pod-host-network-default"),
        pytest.param("", "Pod", POD, "status.podIP=10.0.0.7", True, id="pod-ip"),
        pytest.param("", "Pod", POD, "status.nominatedNodeName=", True, id="pod-absent-field-is-empty"),
        pytest.param(
            "", "Event", EVENT, "involvedObject.kind=Job,involvedObject.name=j", True, id="event-object"
        ),
        pytest.param("", "Event", EVENT, "reason=Dispatched,type=Normal", True, id="event-reason-type"),
        pytest.param("", "Event", EVENT, "source=multiqueue", True, id="event-source-falls-back"),
        pytest.param(
            "", "Event", EVENT, "reportingComponent=multiqueue", True, id="event-reporting-component"
        ),
        pytest.param(
            "batch", "Job", {"status": {"succeeded": 2}}, "status.successful=2", True, id="job-successful"
        ),
        pytest.param(
            "batch", "Job", {"status": {}}, "status.successful=0", True, id="job-successful-default"
        ),
        pytest.param("", "Secret", {"type": "Opaque"}, "type=Opaque", True, id="secret-type"),
        pytest.param(
            "", "Namespace", {"status": {"phase": "Active"}}, "status.phase=Active", True, id="ns-phase"
        ),
        pytest.param(
            "", "Node", {"spec": {"unschedulable": True}}, "spec.unschedulable=true", True, id="node-cordoned"
        ),
        pytest.param(
            "", "Node", {"spec": {}}, "spec.unschedulable=false", True, id="node-schedulable-default"
        ),
        pytest.param(
            "", "ConfigMap", {"metadata": {"name": "c"}}, "metadata.name=c", True, id="default-kind"
        ),
    ],
)
def test_field_selectors_per_kind(
    group: str, kind: str, obj: dict[str, Any], text: str, matches: bool
) -> None:
    selector = parse_field_selector(text)
    assert unsupported_fields(group, kind, selector) == []
    assert selector.matches(fields_of(group, kind, obj)) is matches


def test_fields_of_a_pod() -> None:
    assert fields_of("", "Pod", POD) == {
        "metadata.name": "p",
        "metadata.namespace": "ns",
        "spec.nodeName": "n1",
        "spec.host": "n1",
        "spec.restartPolicy": "Never",
        "spec.schedulerName": "default-scheduler",
        "spec.serviceAccountName": "",
        "spec.hostNetwork": "false",
        "status.phase": "Running",
        "status.podIP": "10.0.0.7",
        "status.podIPs": "",
        "status.nominatedNodeName": "",
    }


@pytest.mark.parametrize(
    ("group", "kind", "text", "unsupported"),
    [
        pytest.param("batch", "Job", "status.phase=x,metadata.name=j", ["status.phase"], id="job-phase"),
        pytest.param("batch", "Job", "status.successful=1", [], id="job-successful"),
        pytest.param("", "Node", "metadata.namespace=x", ["metadata.namespace"], id="node-has-no-namespace"),
        pytest.param("", "Namespace", "status.phase=Active", [], id="namespace-phase"),
        pytest.param("", "ConfigMap", "data.x=1", ["data.x"], id="configmap-data"),
        pytest.param("batch", "CronJob", "metadata.namespace=ns", [], id="cronjob-namespace"),
        pytest.param("", "Pod", "status.podIPs=10.0.0.7", [], id="pod-ips-accepted"),
        pytest.param("", "Pod", "metadata.name =p", ["metadata.name "], id="no-trimming-as-upstream"),
    ],
)
def test_unsupported_fields(group: str, kind: str, text: str, unsupported: list[str]) -> None:
    assert unsupported_fields(group, kind, parse_field_selector(text)) == unsupported


@pytest.mark.parametrize(
    ("group", "kind", "custom", "message"),
    [
        pytest.param("", "Pod", False, "field label not supported: x.y", id="pod-own-conversion"),
        pytest.param("", "Service", False, "field label not supported: x.y", id="service-own-conversion"),
        pytest.param("batch", "Job", False, 'field label "x.y" not supported for Job', id="job"),
        pytest.param(
            "",
            "ConfigMap",
            False,
            '"x.y" is not a known field selector: only "metadata.name", "metadata.namespace"',
            id="generic",
        ),
        pytest.param("example.com", "Widget", True, "field label not supported: x.y", id="custom-resource"),
    ],
)
def test_unsupported_field_message(group: str, kind: str, custom: bool, message: str) -> None:
    assert unsupported_field_message(group, kind, "x.y", custom) == message


def test_everything_field_selector() -> None:
    assert FieldSelector().empty and FieldSelector().matches({})


# --- garbage in, documented errors out ----------------------------------------------------------------------

SELECTOR_PIECES = [*"ab9=!(),<>\\ \t-_./", "in", "notin", "x/y"]
SELECTOR_TEXT = st.lists(st.sampled_from(SELECTOR_PIECES), max_size=12).map("".join)


@given(SELECTOR_TEXT | st.text(max_size=20))
def test_label_selector_parsing_raises_only_selector_errors(text: str) -> None:
    try:
        selector = parse_label_selector(text)
    except SelectorError:
        return
    assert parse_label_selector(str(selector)) == selector


@given(SELECTOR_TEXT | st.text(max_size=20))
@example("==,=9")  # "==" prints as "=": the terms' order must not hang on how each was written
def test_field_selector_parsing_raises_only_selector_errors(text: str) -> None:
    try:
        selector = parse_field_selector(text)
    except SelectorError:
        return
    assert parse_field_selector(str(selector)) == selector


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=4),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=10,
)


@given(
    st.none()
    | JSON_VALUES
    | st.fixed_dictionaries(
        {},
        optional={
            "matchLabels": st.dictionaries(st.text(max_size=4), JSON_VALUES, max_size=2) | JSON_VALUES,
            "matchExpressions": st.lists(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "key": st.text(max_size=4) | JSON_VALUES,
                        "operator": st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt"])
                        | JSON_VALUES,
                        "values": st.lists(st.text(max_size=3), max_size=2) | JSON_VALUES,
                    },
                ),
                max_size=2,
            )
            | JSON_VALUES,
        },
    ),
    st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=3),
)
def test_label_selector_objects_raise_only_selector_errors(selector: Any, labels: dict[str, str]) -> None:
    try:
        parsed = label_selector_from_dict(selector)
    except SelectorError:
        return
    assert isinstance(parsed.matches(labels), bool)


@given(
    st.sampled_from([("", "Pod"), ("", "Event"), ("batch", "Job"), ("", "Node"), ("", "Secret")]), JSON_VALUES
)
def test_fields_of_garbage_objects(kind: tuple[str, str], obj: Any) -> None:
    assert all(isinstance(value, str) for value in fields_of(*kind, obj).values())
