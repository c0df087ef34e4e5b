"""Bodies held against their kind's Go type: Go's own error for the first value that does not fit, None when all fit.
The messages of the cases the differential script also sends (tests/fidelity/api_script.py, group malformed) are
kube-apiserver's word for word."""

from __future__ import annotations

from typing import Any

import pytest

from multiqueue.apiserver.gotypes import QUANTITY_PATTERN, type_error

POD_SPEC: dict[str, Any] = {"containers": [{"name": "c", "image": "i"}]}


@pytest.mark.parametrize(
    ("api_version", "kind", "body", "error"),
    [
        pytest.param("v1", "ConfigMap", {"data": {"k": 1}},
                     "json: cannot unmarshal number into Go struct field ConfigMap.data of type string", id="map-value"),
        pytest.param("v1", "ConfigMap", {"metadata": {"ownerReferences": "x"}},
                     "json: cannot unmarshal string into Go struct field ObjectMeta.metadata.ownerReferences of type "
                     "[]v1.OwnerReference", id="list-of-structs"),
        pytest.param("v1", "ConfigMap", {"metadata": {"finalizers": [1]}},
                     "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.finalizers of type string",
                     id="list-item"),
        pytest.param("v1", "Namespace", {"status": "x"},
                     "json: cannot unmarshal string into Go struct field Namespace.status of type v1.NamespaceStatus",
                     id="struct"),
        pytest.param("batch/v1", "Job", {"spec": {"parallelism": 1.5}},
                     "json: cannot unmarshal number 1.5 into Go struct field JobSpec.spec.parallelism of type int32",
                     id="fraction"),
        pytest.param("batch/v1", "Job", {"spec": {"parallelism": 2**31}},
                     "json: cannot unmarshal number 2147483648 into Go struct field JobSpec.spec.parallelism of type "
                     "int32", id="overflow"),
        pytest.param("batch/v1", "Job", {"spec": {"suspend": "true"}},
                     "json: cannot unmarshal string into Go struct field JobSpec.spec.suspend of type bool", id="bool"),
        pytest.param("v1", "Pod", {"metadata": {"creationTimestamp": 5}},
                     "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.creationTimestamp of type "
                     "string", id="time"),
        pytest.param("v1", "Pod", {"spec": {**POD_SPEC, "overhead": {"cpu": {}}}},
                     f"quantities must match the regular expression '{QUANTITY_PATTERN}'", id="quantity"),
        pytest.param("v1", "Secret", {"data": {"k": "!!!"}}, "illegal base64 data at input byte 0", id="base64"),
        pytest.param("v1", "Secret", {"data": {"k": 1}},
                     "json: cannot unmarshal number into Go struct field Secret.data of type []uint8", id="bytes"),
        pytest.param("v1", "ConfigMap", {"data": 1, "binaryData": {"k": "!"}},
                     "json: cannot unmarshal number into Go struct field ConfigMap.data of type map[string]string",
                     id="first-in-document-order"),
    ],
)  # fmt: skip
def test_the_first_value_that_does_not_fit_is_named_as_go_names_it(
    api_version: str, kind: str, body: Any, error: str
) -> None:
    assert type_error(api_version, kind, body) == error


@pytest.mark.parametrize(
    ("api_version", "kind", "body"),
    [
        pytest.param("batch/v1", "Job", {"metadata": {"name": "j"}, "spec": {"parallelism": 2, "template": {"spec": POD_SPEC}}}, id="job"),
        pytest.param("v1", "Pod", {"spec": {**POD_SPEC, "overhead": {"cpu": "1", "memory": 10}}}, id="quantities"),
        pytest.param("v1", "Service", {"spec": {"ports": [{"port": 80, "targetPort": "http"}]}}, id="int-or-string"),
        pytest.param("v1", "ConfigMap", {"data": None, "metadata": {"labels": None}}, id="null-is-left-alone"),
        pytest.param("v1", "ConfigMap", {"unknown": {"any": ["thing"]}}, id="unknown-fields-are-not-types"),
        pytest.param("v1", "Secret", {"data": {"k": "YWJj\n"}}, id="base64-with-a-newline"),
        pytest.param("example.com/v1", "Widget", {"spec": 1}, id="kind-without-a-go-type"),
    ],
)  # fmt: skip
def test_what_fits_its_go_type_passes(api_version: str, kind: str, body: Any) -> None:
    assert type_error(api_version, kind, body) is None
