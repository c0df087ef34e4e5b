"""Protobuf request bodies read as the JSON Go marshals the same object to: real kubectl bodies, Go's rendering
rules one by one, and the 400 messages kube-apiserver answers for bodies it cannot read."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from multiqueue.apiserver import protowire
from multiqueue.apiserver.protobuf import DecodeError, read_delete_options, read_object
from multiqueue.apiserver.protowire import len_field as m
from multiqueue.apiserver.protowire import string_field as s
from multiqueue.apiserver.protowire import varint_field as v


def body(api_version: str, kind: str, raw: bytes) -> bytes:
    """A body as client-go sends it: the magic, then a runtime.Unknown (typeMeta 1, raw 2)."""
    type_meta = (s(1, api_version) if api_version else b"") + (s(2, kind) if kind else b"")
    return b"k8s\x00" + m(1, type_meta) + m(2, raw)


def fixed64(number: int, value: float) -> bytes:
    return protowire.tag(number, protowire.FIXED64) + struct.pack("<d", value)


# Bodies kubectl 1.32 sent to a local API server, byte for byte, and the JSON kubectl 1.31 sent for the same
# commands (less creationTimestamp: null, which Go no longer writes for a zero time: omitzero).
KUBECTL_BODIES = [
    pytest.param(
        "v1", "Namespace",
        "6b3873000a0f0a02763112094e616d657370616365121c0a140a046d61646512001a0022002a0032003800420012001a020a001a002200",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "made"}, "spec": {}, "status": {}},
        id="create-namespace",
    ),
    pytest.param(
        "authorization.k8s.io/v1", "SelfSubjectAccessReview",
        "6b3873000a320a17617574686f72697a6174696f6e2e6b38732e696f2f7631121753656c665375626a656374416363657373526576"
        "69657712440a100a0012001a0022002a0032003800420012260a240a0764656661756c7412066372656174651a05626174636822"
        "002a046a6f627332003a001a08080012001a0020001a002200",
        {
            "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "metadata": {},
            "spec": {"resourceAttributes": {"namespace": "default", "verb": "create", "group": "batch", "resource": "jobs"}},
            "status": {"allowed": False},
        },
        id="auth-can-i",
    ),
    pytest.param(
        "v1", "Secret",
        "6b3873000a0c0a027631120653656372657412360a1e0a076c69746572616c12001a0764656661756c7422002a003200380042001212"
        "0a0870617373776f726412067333637265741a001a002200",
        {
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "literal", "namespace": "default"},
            "data": {"password": "czNjcmV0"},
        },
        id="create-secret",
    ),
    pytest.param(
        "batch/v1", "Job",
        "6b3873000a0f0a0862617463682f763112034a6f6212c8020a8f010a066d616e75616c12001a0764656661756c7422002a00320038"
        "004200622b0a2163726f6e6a6f622e6b756265726e657465732e696f2f696e7374616e746961746512066d616e75616c6a430a0743"
        "726f6e4a6f621a06686f75726c79222463653732396265352d666539372d346237392d393738612d3834323336393539343136362a"
        "0862617463682f7631300112a90132a6010a100a0012001a0022002a0032003800420012910112490a06686f75726c79120762757379"
        "626f781a04747275652a0042006a142f6465762f7465726d696e6174696f6e2d6c6f677206416c77617973800100880100900100a2"
        "010446696c651a094f6e4661696c757265201e320c436c7573746572466972737442004a00520058006000680072008201008a0100"
        "9a011164656661756c742d7363686564756c6572c201001a082000280030003a001a002200",
        {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {
                "name": "manual", "namespace": "default",
                "annotations": {"cronjob.kubernetes.io/instantiate": "manual"},
                "ownerReferences": [{
                    "apiVersion": "batch/v1", "kind": "CronJob", "name": "hourly",
                    "uid": "ce729be5-fe97-4b79-978a-842369594166", "controller": True,
                }],
            },
            "spec": {"template": {"metadata": {}, "spec": {
                "containers": [{
                    "name": "hourly", "image": "busybox", "command": ["true"], "resources": {},
                    "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                    "imagePullPolicy": "Always",
                }],
                "restartPolicy": "OnFailure", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
                "securityContext": {}, "schedulerName": "default-scheduler",
            }}},
            "status": {},
        },
        id="create-job-from-cronjob",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("api_version", "kind", "encoded", "expected"), KUBECTL_BODIES)
def test_kubectl_bodies_read_as_the_json_it_sends(
    api_version: str, kind: str, encoded: str, expected: dict[str, Any]
) -> None:
    decoded = read_object(bytes.fromhex(encoded), api_version, kind)
    assert decoded == expected
    assert list(decoded["metadata"]) == list(expected["metadata"]), "keys in the Go struct's order"


OBJECT_META = m(1, s(1, "x"))
CONTAINER = s(1, "main")


def job(spec: bytes) -> bytes:
    return body("batch/v1", "Job", OBJECT_META + m(2, spec))


def pod_spec(*fields: bytes) -> bytes:
    return m(6, m(2, b"".join(fields)))  # JobSpec.template.spec


# Go's encoding/json on the decoded struct, rule by rule. Field numbers are those of the generated.proto files.
JOB = "batch/v1", "Job"
CM = "v1", "ConfigMap"
EVENT = "v1", "Event"
SERVICE = "v1", "Service"
WHOAMI = "authentication.k8s.io/v1", "SelfSubjectReview"
RENDERED = [
    pytest.param(JOB, job(b""), ["spec"], {"template": {"metadata": {}, "spec": {"containers": None}}},
                 id="absent-structs-are-zero-structs-and-a-nil-slice-without-omitempty-is-null"),
    pytest.param(JOB, job(v(1, 0) + v(10, 0)), ["spec", "parallelism"], 0, id="a-pointer-to-zero-is-kept"),
    pytest.param(JOB, job(v(10, 1)), ["spec", "suspend"], True, id="bool-pointer"),
    pytest.param(JOB, job(v(7, (1 << 64) - 1)), ["spec", "backoffLimit"], -1, id="negative-int32-in-ten-bytes"),
    pytest.param(JOB, job(v(3, 1 << 40)), ["spec", "activeDeadlineSeconds"], 1 << 40, id="int64"),
    pytest.param(JOB, job(v(1, 2) + v(1, 3)), ["spec", "parallelism"], 3, id="the-last-scalar-wins"),
    pytest.param(JOB, job(pod_spec(m(2, s(1, "")))), ["spec", "template", "spec", "containers"],
                 [{"name": "", "resources": {}}], id="zero-scalar-without-omitempty-is-written"),
    pytest.param(JOB, job(pod_spec(m(2, CONTAINER + s(3, "sh") + s(3, "-c")))),
                 ["spec", "template", "spec", "containers", 0, "command"], ["sh", "-c"], id="repeated-string"),
    pytest.param(JOB, job(pod_spec(m(2, CONTAINER + m(8, m(1, s(1, "cpu") + m(2, s(1, "500m"))) + m(1, s(1, "a") + m(2, b"")))))),
                 ["spec", "template", "spec", "containers", 0, "resources"],
                 {"limits": {"a": "0", "cpu": "500m"}}, id="quantities-in-a-map-sorted-by-key"),
    pytest.param(JOB, job(pod_spec(m(2, CONTAINER + m(10, m(1, m(1, s(1, "true"))) + v(4, 5))))),
                 ["spec", "template", "spec", "containers", 0, "livenessProbe"],
                 {"exec": {"command": ["true"]}, "periodSeconds": 5}, id="an-embedded-struct-is-inlined"),
    pytest.param(JOB, job(m(11, m(1, s(1, "FailJob") + m(2, s(2, "In") + v(3, 1) + m(3, protowire.varint(2) + protowire.varint(3)))))),
                 ["spec", "podFailurePolicy", "rules", 0, "onExitCodes", "values"], [1, 2, 3],
                 id="repeated-int32-packed-or-not"),
    pytest.param(JOB, job(m(6, m(1, s(1, "a"))) + m(6, m(1, s(3, "b")))), ["spec", "template", "metadata"],
                 {"name": "a", "namespace": "b"}, id="a-message-given-twice-is-merged"),
    pytest.param(CM, body("v1", "ConfigMap", m(1, s(1, "x") + m(8, v(1, 1700000000) + v(2, 5)) + m(9, b""))),
                 ["metadata"], {"name": "x", "creationTimestamp": "2023-11-14T22:13:20Z", "deletionTimestamp": None},
                 id="times-to-the-second-and-the-zero-time-is-null"),
    pytest.param(CM, body("v1", "ConfigMap", m(1, s(1, "x") + m(8, b""))), ["metadata"], {"name": "x"},
                 id="a-zero-creation-timestamp-is-left-out-omitzero"),
    pytest.param(EVENT, body("v1", "Event", m(10, v(1, 1700000000) + v(2, 123456789))), ["eventTime"],
                 "2023-11-14T22:13:20.123456Z", id="micro-time"),
    pytest.param(EVENT, body("v1", "Event", b""), ["eventTime"], None, id="zero-micro-time"),
    pytest.param(CM, body("v1", "ConfigMap", m(1, m(17, s(1, "kubectl") + m(7, m(1, b'{"f:data":{}}'))))),
                 ["metadata", "managedFields"], [{"manager": "kubectl", "fieldsV1": {"f:data": {}}}],
                 id="fields-v1-is-raw-json"),
    pytest.param(CM, body("v1", "ConfigMap", m(3, s(1, "blob") + m(2, b"\x00\xff"))), ["binaryData"], {"blob": "AP8="},
                 id="bytes-are-base64"),
    pytest.param(SERVICE, body("v1", "Service", m(2, m(1, v(3, 80) + m(4, v(2, 8080))) + m(1, v(3, 81) + m(4, v(1, 1) + s(3, "http"))))),
                 ["spec", "ports"], [{"port": 80, "targetPort": 8080}, {"port": 81, "targetPort": "http"}],
                 id="int-or-string"),
    pytest.param(SERVICE, body("v1", "Service", m(2, m(1, b""))), ["spec", "ports"], [{"port": 0, "targetPort": 0}],
                 id="a-zero-int-or-string-is-zero"),
    pytest.param(WHOAMI, body("authentication.k8s.io/v1", "SelfSubjectReview", m(2, m(1, s(1, "me") + m(4, s(1, "scopes") + m(2, s(1, "a") + s(1, "b"))) + m(4, s(1, "none"))))),
                 ["status", "userInfo"], {"username": "me", "extra": {"none": None, "scopes": ["a", "b"]}},
                 id="a-named-slice-is-its-items"),
    pytest.param(CM, body("v1", "ConfigMap", v(99, 1) + m(98, b"?") + fixed64(97, 1.0) + protowire.tag(96, protowire.FIXED32) + b"abcd"
                      + protowire.tag(95, protowire.START_GROUP) + v(1, 1) + protowire.tag(95, protowire.END_GROUP) + m(2, s(1, "k") + s(2, "v"))),
                 ["data"], {"k": "v"}, id="unknown-fields-are-skipped"),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "encoded", "path", "expected"), RENDERED)
def test_fields_render_as_go_marshals_them(
    kind: tuple[str, str], encoded: bytes, path: list[str | int], expected: Any
) -> None:
    found: Any = read_object(encoded, *kind)
    for step in path:
        found = found[step]
    assert found == expected


CRD = "apiextensions.k8s.io/v1", "CustomResourceDefinition"


def crd_schema(props: bytes) -> bytes:
    """A CRD whose first version's openAPIV3Schema is ``props`` (spec 2, versions 7, schema 4, openAPIV3Schema 1)."""
    return body(*CRD, m(2, m(7, s(1, "v1") + m(4, m(1, props)))))


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        pytest.param(s(5, "object") + m(29, s(1, "size") + m(2, s(5, "integer") + fixed64(9, 10.0) + fixed64(11, 0.5))),
                     {"type": "object", "properties": {"size": {"type": "integer", "maximum": 10, "minimum": 0.5}}},
                     id="doubles-whole-ones-as-integers"),
        pytest.param(m(30, v(1, 1)), {"additionalProperties": True}, id="or-bool-true"),
        pytest.param(m(30, b""), {"additionalProperties": False}, id="or-bool-false"),
        pytest.param(m(30, m(2, s(5, "string"))), {"additionalProperties": {"type": "string"}}, id="or-bool-schema"),
        pytest.param(m(24, m(1, s(5, "string"))), {"items": {"type": "string"}}, id="or-array-schema"),
        pytest.param(m(24, m(2, s(5, "string")) + m(2, s(5, "integer"))), {"items": [{"type": "string"}, {"type": "integer"}]},
                     id="or-array-array"),
        pytest.param(m(32, s(1, "a") + m(2, s(2, "b"))), {"dependencies": {"a": ["b"]}}, id="or-strings"),
        pytest.param(m(8, m(1, b'{"x":[1]}')) + v(38, 1) + s(3, "#/r"), {"$ref": "#/r", "default": {"x": [1]}, "x-kubernetes-preserve-unknown-fields": True},
                     id="json-and-json-names"),
    ],
)  # fmt: skip
def test_crd_schemas_render_their_own_types(props: bytes, expected: dict[str, Any]) -> None:
    decoded = read_object(crd_schema(props), *CRD)
    assert decoded["spec"]["versions"][0]["schema"]["openAPIV3Schema"] == expected


# kube-apiserver v1.37.2's answers (400 BadRequest) to the same bodies posted to /api/v1/namespaces/default/configmaps.
CONFIGMAP = s(1, "v1") + s(2, "ConfigMap")
REFUSED = [
    pytest.param(b"", "the object provided is unrecognized (must be of type ConfigMap): empty data (<empty>)", id="empty"),
    pytest.param(b"k8s\x00", "the object provided is unrecognized (must be of type ConfigMap): empty body (6b387300)",
                 id="magic-only"),
    pytest.param(b'{"metadata":{"name":"x"}}',
                 "the object provided is unrecognized (must be of type ConfigMap): provided data does not appear to be a "
                 'protobuf message, expected prefix [107 56 115 0] ({"metadata":{"name":"x"}})', id="json-as-protobuf"),
    pytest.param(b"k8s\x00\x00\x01",
                 "the object provided is unrecognized (must be of type ConfigMap): proto: Unknown: illegal tag 0 "
                 "(wire type 0) (6b3873000001)", id="bad-envelope"),
    pytest.param(b"k8s\x00\x0a\x05\x0a", "the object provided is unrecognized (must be of type ConfigMap): unexpected EOF "
                 "(6b3873000a050a)", id="truncated"),
    pytest.param(b"k8s\x00" + m(1, CONFIGMAP) + m(2, v(1, 5)),
                 'ConfigMap in version "v1" cannot be handled as a ConfigMap: proto: wrong wireType = 0 for field ObjectMeta',
                 id="wrong-wire-type"),
    pytest.param(b"k8s\x00" + m(1, CONFIGMAP) + m(2, v(0, 5)),
                 'ConfigMap in version "v1" cannot be handled as a ConfigMap: proto: ConfigMap: illegal tag 0 (wire type 0)',
                 id="illegal-tag"),
    pytest.param(b"k8s\x00" + m(1, CONFIGMAP) + m(2, b"\x08" + b"\xff" * 10 + b"\x01"),
                 'ConfigMap in version "v1" cannot be handled as a ConfigMap: proto: integer overflow', id="varint-overflow"),
    pytest.param(body("v1", "Secret", m(1, s(1, "sec"))),
                 'Secret in version "v1" cannot be handled as a ConfigMap: converting (v1.Secret) to (core.ConfigMap): '
                 "unknown conversion", id="another-kind"),
    pytest.param(body("v1", "Foo", b""),
                 'Foo in version "v1" cannot be handled as a ConfigMap: no kind "Foo" is registered for version "v1" in '
                 'scheme "pkg/runtime/scheme.go:111"', id="unknown-kind"),
    pytest.param(body("batch/v1", "ConfigMap", b""),
                 'ConfigMap in version "v1" cannot be handled as a ConfigMap: no kind "ConfigMap" is registered for '
                 'version "batch/v1" in scheme "pkg/runtime/scheme.go:111"', id="another-group"),
]  # fmt: skip


@pytest.mark.parametrize(("encoded", "message"), REFUSED)
def test_unreadable_bodies_are_refused_as_upstream_refuses_them(encoded: bytes, message: str) -> None:
    with pytest.raises(DecodeError) as refused:
        read_object(encoded, "v1", "ConfigMap")
    assert str(refused.value) == message


def test_a_body_without_type_meta_is_the_resources_kind() -> None:
    # As upstream: {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "nokind"}} is created.
    decoded = read_object(body("", "", m(1, s(1, "nokind"))), "v1", "ConfigMap")
    assert decoded == {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "nokind"}}


@pytest.mark.parametrize(
    ("encoded", "expected"),
    [
        pytest.param(body("v1", "DeleteOptions", s(4, "Background") + v(1, 0) + s(5, "All")),
                     {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0, "propagationPolicy": "Background", "dryRun": ["All"]},
                     id="core-group"),
        pytest.param(body("", "", v(3, 1)), {"apiVersion": "meta.k8s.io/v1", "kind": "DeleteOptions", "orphanDependents": True},
                     id="no-type-meta"),
    ],
)  # fmt: skip
def test_delete_options(encoded: bytes, expected: dict[str, Any]) -> None:
    assert read_delete_options(encoded) == expected


@pytest.mark.parametrize(
    ("encoded", "message"),
    [
        pytest.param(b"k8s\x00\x0a", "unexpected EOF", id="truncated"),
        pytest.param(body("v1", "ConfigMap", b""), "decoded object cannot be converted to DeleteOptions", id="another-kind"),
    ],
)  # fmt: skip
def test_unreadable_delete_options_are_refused(encoded: bytes, message: str) -> None:
    with pytest.raises(DecodeError) as refused:
        read_delete_options(encoded)
    assert str(refused.value) == message


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (1, b"\x01"),
        (300, b"\xac\x02"),
        (-1, b"\xff" * 9 + b"\x01"),
        ((1 << 64) - 1, b"\xff" * 9 + b"\x01"),
    ],
)
def test_varints_round_trip(value: int, encoded: bytes) -> None:
    assert protowire.varint(value) == encoded
    assert protowire.read_varint(encoded, 0) == (value & ((1 << 64) - 1), len(encoded))


@pytest.mark.parametrize(
    ("value", "bits", "expected"),
    [
        (5, 32, 5),
        ((1 << 64) - 1, 32, -1),
        ((1 << 64) - 1, 64, -1),
        (1 << 31, 32, -(1 << 31)),
        (1 << 32, 32, 0),
    ],
)
def test_signed_reads_the_low_bits_as_go_does(value: int, bits: int, expected: int) -> None:
    assert protowire.signed(value, bits) == expected
