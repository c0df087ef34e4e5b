"""OpenAPI v3 documents: upstream's names and shapes, the write parameters kubectl looks for, merge keys, caching."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from multiqueue.apiserver.openapi import (
    crd_definition_name,
    definition_name,
    openapi_v3_document,
    openapi_v3_index,
    openapi_v3_reply,
    rendered_document,
)
from multiqueue.apiserver.resources import BUILTIN, ResourceType
from multiqueue.apiserver.rules.patches import PRIMITIVE_SET, list_strategy

Obj = dict[str, Any]
NOW = datetime(2026, 1, 10, tzinfo=UTC)
META = "io.k8s.apimachinery.pkg.apis.meta.v1"
WIDGET_SCHEMA: Obj = {
    "type": "object",
    "description": "A widget.",
    "properties": {
        "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10}}},
        "spec": {"type": "object", "properties": {"size": {"type": "integer", "description": "How big."}}},
    },
}
WIDGETS = ResourceType("example.com", "v1", "Widget", "widgets", "widget", True, schema=WIDGET_SCHEMA)
TYPES = (*BUILTIN, WIDGETS)


def document(group: str, version: str = "v1") -> Obj:
    found = openapi_v3_document(TYPES, group, version)
    assert found is not None
    return found


BATCH = document("batch")
CORE = document("")
COORDINATION = document("coordination.k8s.io")
CUSTOM = document("example.com")


def schemas(doc: Obj) -> Obj:
    found: Obj = doc["components"]["schemas"]
    return found


def walk(node: Any) -> Iterator[Obj]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for item in node:
            yield from walk(item)


# --- names --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "name"),
    [
        pytest.param("V1Job", "io.k8s.api.batch.v1.Job", id="batch-kind"),
        pytest.param("V1PodFailurePolicyRule", "io.k8s.api.batch.v1.PodFailurePolicyRule", id="batch-part"),
        pytest.param("V1Pod", "io.k8s.api.core.v1.Pod", id="core-by-default"),
        pytest.param("CoreV1Event", "io.k8s.api.core.v1.Event", id="core-prefixed"),
        pytest.param("V1ObjectMeta", f"{META}.ObjectMeta", id="meta"),
        pytest.param("V1LabelSelector", f"{META}.LabelSelector", id="meta-selector"),
        pytest.param("V1Lease", "io.k8s.api.coordination.v1.Lease", id="coordination"),
        pytest.param(
            "V1JSONSchemaProps",
            "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps",
            id="apiextensions",
        ),
        pytest.param(
            "ApiextensionsV1ServiceReference",
            "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.ServiceReference",
            id="apiextensions-prefixed",
        ),
        pytest.param("V1Role", "io.k8s.api.rbac.v1.Role", id="rbac"),
        pytest.param("V1Deployment", "io.k8s.api.apps.v1.Deployment", id="apps"),
        pytest.param("V1PriorityClass", "io.k8s.api.scheduling.v1.PriorityClass", id="scheduling"),
        pytest.param("V1ShardInfo", f"{META}.ShardInfo", id="meta-shard-info"),
        pytest.param("V1alpha3WorkloadPodGroupSchedulingPolicy", "io.k8s.api.scheduling.v1alpha3.WorkloadPodGroupSchedulingPolicy", id="alpha"),
        pytest.param("StorageV1TokenRequest", "StorageV1TokenRequest", id="not-reached-keeps-its-name"),
    ],
)  # fmt: skip
def test_definition_names(model: str, name: str) -> None:
    assert definition_name(model) == name


def test_custom_definition_names_reverse_the_group() -> None:
    assert crd_definition_name("stable.example.com", "v1", "CronTab") == "com.example.stable.v1.CronTab"


# --- schemas ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "name", "kind"),
    [
        pytest.param(BATCH, "io.k8s.api.batch.v1.Job", ("batch", "v1", "Job"), id="job"),
        pytest.param(BATCH, "io.k8s.api.batch.v1.JobList", ("batch", "v1", "JobList"), id="job-list"),
        pytest.param(BATCH, "io.k8s.api.batch.v1.CronJob", ("batch", "v1", "CronJob"), id="cronjob"),
        pytest.param(CORE, "io.k8s.api.core.v1.Pod", ("", "v1", "Pod"), id="pod"),
        pytest.param(CORE, "io.k8s.api.core.v1.Event", ("", "v1", "Event"), id="event"),
        pytest.param(CORE, "io.k8s.api.core.v1.NamespaceList", ("", "v1", "NamespaceList"), id="namespace-list"),
        pytest.param(COORDINATION, "io.k8s.api.coordination.v1.Lease", ("coordination.k8s.io", "v1", "Lease"), id="lease"),
        pytest.param(CUSTOM, "com.example.v1.Widget", ("example.com", "v1", "Widget"), id="custom"),
        pytest.param(CUSTOM, "com.example.v1.WidgetList", ("example.com", "v1", "WidgetList"), id="custom-list"),
    ],
)  # fmt: skip
def test_top_level_kinds_carry_their_group_version_kind(
    doc: Obj, name: str, kind: tuple[str, str, str]
) -> None:
    group, version, kind_name = kind
    assert schemas(doc)[name]["x-kubernetes-group-version-kind"] == [
        {"group": group, "kind": kind_name, "version": version}
    ]


def test_only_kinds_carry_a_group_version_kind() -> None:
    tagged = {name for name, schema in schemas(BATCH).items() if "x-kubernetes-group-version-kind" in schema}
    kinds = {f"io.k8s.api.batch.v1.{k}" for k in ("Job", "JobList", "CronJob", "CronJobList")}
    assert tagged == kinds | {f"{META}.{k}" for k in ("DeleteOptions", "Status", "APIResourceList")}
    delete_options = schemas(BATCH)[f"{META}.DeleteOptions"]["x-kubernetes-group-version-kind"]
    assert delete_options == [
        {"group": "", "kind": "DeleteOptions", "version": "v1"},
        {"group": "batch", "kind": "DeleteOptions", "version": "v1"},
    ], "in the core version and in the document's own, as upstream"


@pytest.mark.parametrize(
    "doc", [BATCH, CORE, COORDINATION, CUSTOM], ids=["batch", "core", "coordination", "custom"]
)
def test_schemas_are_clean_and_self_contained(doc: Obj) -> None:
    for node in walk(schemas(doc)):
        assert not isinstance(node.get("title"), str), "pydantic's titles are dropped"
        assert node.get("additionalProperties") is not False
        assert {"type": "null"} not in node.get("anyOf", [])
        assert "Attributes:" not in str(node.get("description", ""))
    names = set(schemas(doc))
    for node in walk(doc):
        ref = node.get("$ref")
        if isinstance(ref, str):
            assert ref.removeprefix("#/components/schemas/") in names, ref


def test_descriptions_are_upstream_s() -> None:
    job_spec = schemas(BATCH)["io.k8s.api.batch.v1.JobSpec"]
    assert job_spec["description"] == "JobSpec describes how the job execution will look like."
    parallelism = job_spec["properties"]["parallelism"]
    assert parallelism["type"] == "integer"
    assert parallelism["description"].startswith("Specifies the maximum desired number of pods")
    assert job_spec["required"] == ["template"]


@pytest.mark.parametrize(
    ("doc", "definition", "field", "facts"),
    [
        pytest.param(BATCH, "io.k8s.api.batch.v1.JobSpec", "parallelism", {"format": "int32"}, id="int32"),
        pytest.param(BATCH, "io.k8s.api.batch.v1.JobSpec", "activeDeadlineSeconds", {"format": "int64"}, id="int64"),
        pytest.param(
            BATCH, "io.k8s.api.core.v1.Container", "ports",
            {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["containerPort", "protocol"]},
            id="list-map-keys",
        ),
        pytest.param(BATCH, "io.k8s.api.core.v1.PodSpec", "tolerations", {"x-kubernetes-list-type": "atomic"}, id="atomic"),
        pytest.param(
            BATCH, "io.k8s.api.core.v1.PodSpec", "volumes", {"x-kubernetes-patch-strategy": "merge,retainKeys"},
            id="retain-keys",
        ),
    ],
)  # fmt: skip
def test_upstream_facts_the_client_lacks_are_published(
    doc: Obj, definition: str, field: str, facts: Obj
) -> None:
    found = schemas(doc)[definition]["properties"][field]
    assert {k: found.get(k) for k in facts} == facts


def test_definition_level_facts() -> None:
    selector = schemas(BATCH)["io.k8s.api.core.v1.ConfigMapKeySelector"]
    assert selector["x-kubernetes-map-type"] == "atomic"
    service_port = schemas(CORE)["io.k8s.api.core.v1.ServicePort"]
    assert service_port["required"] == ["port"] and service_port["properties"]["port"]["format"] == "int32"


@pytest.mark.parametrize(
    ("doc", "definition", "field", "expected"),
    [
        pytest.param(
            BATCH, f"{META}.ObjectMeta", "creationTimestamp",
            {"allOf": [{"$ref": f"#/components/schemas/{META}.Time"}]}, id="time",
        ),
        pytest.param(
            COORDINATION, "io.k8s.api.coordination.v1.LeaseSpec", "renewTime",
            {"allOf": [{"$ref": f"#/components/schemas/{META}.MicroTime"}]}, id="micro-time",
        ),
        pytest.param(
            CORE, "io.k8s.api.core.v1.HTTPGetAction", "port",
            {"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.util.intstr.IntOrString"}]},
            id="int-or-string",
        ),
        pytest.param(
            BATCH, "io.k8s.api.core.v1.ResourceRequirements", "limits",
            {"type": "object",
             "additionalProperties": {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.api.resource.Quantity"}},
            id="quantity-map",
        ),
        pytest.param(
            CORE, "io.k8s.api.core.v1.EmptyDirVolumeSource", "sizeLimit",
            {"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.api.resource.Quantity"}]},
            id="quantity",
        ),
        pytest.param(
            CORE, "io.k8s.api.core.v1.Secret", "data",
            {"type": "object", "additionalProperties": {"type": "string", "format": "byte"}}, id="bytes",
        ),
        pytest.param(
            BATCH, "io.k8s.api.batch.v1.Job", "spec",
            {"$ref": "#/components/schemas/io.k8s.api.batch.v1.JobSpec"}, id="reference",
        ),
        pytest.param(
            BATCH, f"{META}.ManagedFieldsEntry", "fieldsV1",
            {"allOf": [{"$ref": f"#/components/schemas/{META}.FieldsV1"}]}, id="fields-v1",
        ),
    ],
)  # fmt: skip
def test_field_types(doc: Obj, definition: str, field: str, expected: Obj) -> None:
    found = schemas(doc)[definition]["properties"][field]
    assert {k: v for k, v in found.items() if k != "description"} == expected


@pytest.mark.parametrize(
    ("name", "schema"),
    [
        pytest.param(f"{META}.Time", {"type": "string", "format": "date-time"}, id="time"),
        pytest.param(
            "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
            {"format": "int-or-string", "oneOf": [{"type": "integer"}, {"type": "string"}]},
            id="int-or-string",
        ),
        pytest.param(
            "io.k8s.apimachinery.pkg.api.resource.Quantity",
            {"oneOf": [{"type": "string"}, {"type": "number"}]},
            id="quantity",
        ),
    ],
)
def test_scalar_definitions(name: str, schema: Obj) -> None:
    assert schemas(CORE)[name] == schema, "the client has no words for these types: none are made up"
    assert f"{META}.MicroTime" not in schemas(BATCH), "only referenced scalars are included"


def _keyed(keys: list[str], merge_key: str) -> dict[str, Any]:
    return {
        "x-kubernetes-list-map-keys": keys,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-patch-merge-key": merge_key,
        "x-kubernetes-patch-strategy": "merge",
    }


@pytest.mark.parametrize(
    ("doc", "definition", "field", "expected"),
    [
        pytest.param(BATCH, "io.k8s.api.core.v1.PodSpec", "containers", _keyed(["name"], "name"), id="containers"),
        pytest.param(BATCH, "io.k8s.api.core.v1.PodSpec", "volumes",
                     {**_keyed(["name"], "name"), "x-kubernetes-patch-strategy": "merge,retainKeys"}, id="volumes"),
        pytest.param(BATCH, "io.k8s.api.core.v1.Container", "env", _keyed(["name"], "name"), id="env"),
        pytest.param(BATCH, "io.k8s.api.core.v1.Container", "ports", _keyed(["containerPort", "protocol"],
                     "containerPort"), id="ports-keyed-by-port-and-protocol"),
        pytest.param(BATCH, "io.k8s.api.batch.v1.JobStatus", "conditions",
                     {"x-kubernetes-list-type": "atomic", "x-kubernetes-patch-merge-key": "type",
                      "x-kubernetes-patch-strategy": "merge"}, id="job-conditions-atomic-for-apply"),
        pytest.param(BATCH, "io.k8s.api.batch.v1.CronJobStatus", "active", {"x-kubernetes-list-type": "atomic"},
                     id="cronjob-active"),
        pytest.param(BATCH, f"{META}.ObjectMeta", "ownerReferences", _keyed(["uid"], "uid"), id="owner-references"),
        pytest.param(BATCH, f"{META}.ObjectMeta", "finalizers",
                     {"x-kubernetes-patch-strategy": "merge", "x-kubernetes-list-type": "set"}, id="finalizers"),
        pytest.param(CORE, "io.k8s.api.core.v1.NodeStatus", "addresses", _keyed(["type"], "type"),
                     id="node-addresses"),
        pytest.param(CORE, "io.k8s.api.core.v1.PodStatus", "podIPs", _keyed(["ip"], "ip"), id="pod-ips"),
        pytest.param(CORE, "io.k8s.api.core.v1.PodStatus", "hostIPs",
                     {"x-kubernetes-list-type": "atomic", "x-kubernetes-patch-merge-key": "ip",
                      "x-kubernetes-patch-strategy": "merge"}, id="host-ips-atomic-for-apply"),
        pytest.param(BATCH, "io.k8s.api.core.v1.PodSpec", "tolerations", {"x-kubernetes-list-type": "atomic"},
                     id="tolerations"),
        pytest.param(BATCH, "io.k8s.api.core.v1.Container", "args", {"x-kubernetes-list-type": "atomic"}, id="args"),
        pytest.param(BATCH, "io.k8s.api.batch.v1.UncountedTerminatedPods", "succeeded",
                     {"x-kubernetes-list-type": "set"}, id="uncounted-set"),
    ],
)  # fmt: skip
def test_lists_publish_their_merge_keys_and_list_types(
    doc: Obj, definition: str, field: str, expected: dict[str, Any]
) -> None:
    """Strategic merge keys (what kubectl's client-side apply reads) and the list types server-side apply uses,
    as upstream publishes them (openapi_facts.json)."""
    found = schemas(doc)[definition]["properties"][field]
    assert {k: v for k, v in found.items() if k.startswith("x-kubernetes-")} == expected


def test_atomic_structs_and_list_key_defaults_are_published() -> None:
    batch = schemas(BATCH)
    assert batch[f"{META}.LabelSelector"]["x-kubernetes-map-type"] == "atomic"
    assert (
        batch["io.k8s.api.core.v1.PodSpec"]["properties"]["nodeSelector"]["x-kubernetes-map-type"] == "atomic"
    )
    assert batch["io.k8s.api.core.v1.ContainerPort"]["properties"]["protocol"]["default"] == "TCP"
    assert batch["io.k8s.api.core.v1.EnvVar"]["properties"]["name"]["default"] == ""
    assert "x-kubernetes-map-type" not in batch["io.k8s.api.core.v1.PodSpec"]


@pytest.mark.parametrize(
    ("doc", "definition", "field", "kind", "path"),
    [
        pytest.param(BATCH, "io.k8s.api.core.v1.PodSpec", "containers", ("batch", "Job"),
                     "spec.template.spec.containers", id="containers"),
        pytest.param(BATCH, "io.k8s.api.core.v1.PodSpec", "volumes", ("batch", "Job"),
                     "spec.template.spec.volumes", id="volumes"),
        pytest.param(BATCH, "io.k8s.api.core.v1.Container", "env", ("batch", "Job"),
                     "spec.template.spec.containers[].env", id="env"),
        pytest.param(BATCH, "io.k8s.api.core.v1.Container", "ports", ("batch", "Job"),
                     "spec.template.spec.containers[].ports", id="ports"),
        pytest.param(BATCH, "io.k8s.api.batch.v1.JobStatus", "conditions", ("batch", "Job"),
                     "status.conditions", id="job-conditions"),
        pytest.param(BATCH, "io.k8s.api.batch.v1.CronJobStatus", "active", ("batch", "CronJob"),
                     "status.active", id="cronjob-active"),
        pytest.param(BATCH, f"{META}.ObjectMeta", "ownerReferences", ("batch", "Job"),
                     "metadata.ownerReferences", id="owner-references"),
        pytest.param(BATCH, f"{META}.ObjectMeta", "finalizers", ("batch", "Job"),
                     "metadata.finalizers", id="finalizers"),
        pytest.param(CORE, "io.k8s.api.core.v1.NodeStatus", "addresses", ("", "Node"),
                     "status.addresses", id="node-addresses"),
        pytest.param(CORE, "io.k8s.api.core.v1.PodStatus", "podIPs", ("", "Pod"), "status.podIPs", id="pod-ips"),
        pytest.param(BATCH, "io.k8s.api.core.v1.PodSpec", "tolerations", ("batch", "Job"),
                     "spec.template.spec.tolerations", id="tolerations"),
        pytest.param(BATCH, "io.k8s.api.core.v1.Container", "args", ("batch", "Job"),
                     "spec.template.spec.containers[].args", id="args"),
    ],
)  # fmt: skip
def test_published_merge_keys_are_the_ones_strategic_merge_uses(
    doc: Obj, definition: str, field: str, kind: tuple[str, str], path: str
) -> None:
    """The patch strategies published are upstream's (openapi_facts.json); the server's strategic merge
    (api/patches.py) must merge the same lists by the same keys, or kubectl apply's patches would go astray."""
    found = schemas(doc)[definition]["properties"][field]
    merges = "merge" in found.get("x-kubernetes-patch-strategy", "").split(",")
    strategy = list_strategy(*kind, path)
    if strategy is None:
        assert not merges
    elif strategy == PRIMITIVE_SET:
        assert merges and "x-kubernetes-patch-merge-key" not in found
    else:
        assert merges and found["x-kubernetes-patch-merge-key"] == strategy


def test_merge_keys_kubectl_apply_relies_on() -> None:
    pod_spec = schemas(BATCH)["io.k8s.api.core.v1.PodSpec"]["properties"]
    assert pod_spec["containers"]["x-kubernetes-patch-merge-key"] == "name"
    container = schemas(BATCH)["io.k8s.api.core.v1.Container"]["properties"]
    assert container["env"]["x-kubernetes-patch-merge-key"] == "name"
    meta = schemas(BATCH)[f"{META}.ObjectMeta"]["properties"]
    assert meta["finalizers"]["x-kubernetes-list-type"] == "set"
    assert "x-kubernetes-patch-strategy" not in pod_spec["tolerations"]


# --- custom resources ---------------------------------------------------------------------------------------


def test_custom_kind_uses_its_schema_with_object_meta() -> None:
    widget = schemas(CUSTOM)["com.example.v1.Widget"]
    assert widget["description"] == "A widget."
    assert widget["properties"]["spec"] == WIDGET_SCHEMA["properties"]["spec"]
    assert widget["properties"]["metadata"]["allOf"] == [{"$ref": f"#/components/schemas/{META}.ObjectMeta"}]
    assert set(widget["properties"]) == {"apiVersion", "kind", "metadata", "spec"}
    listing = schemas(CUSTOM)["com.example.v1.WidgetList"]
    assert listing["properties"]["items"]["items"] == {"$ref": "#/components/schemas/com.example.v1.Widget"}
    assert WIDGET_SCHEMA["properties"]["metadata"]["properties"]["name"]["maxLength"] == 10, "input untouched"


def test_custom_kind_without_schema_keeps_unknown_fields() -> None:
    bare = ResourceType("example.org", "v1", "Thing", "things", "thing", False)
    doc = openapi_v3_document([bare], "example.org", "v1")
    assert doc is not None
    thing = schemas(doc)["org.example.v1.Thing"]
    assert thing["x-kubernetes-preserve-unknown-fields"] is True and thing["type"] == "object"
    assert "/apis/example.org/v1/things/{name}" in doc["paths"]


# --- paths --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "paths"),
    [
        pytest.param(
            BATCH,
            {"/apis/batch/v1/", "/apis/batch/v1/jobs", "/apis/batch/v1/namespaces/{namespace}/jobs",
             "/apis/batch/v1/namespaces/{namespace}/jobs/{name}",
             "/apis/batch/v1/namespaces/{namespace}/jobs/{name}/status",
             "/apis/batch/v1/cronjobs", "/apis/batch/v1/namespaces/{namespace}/cronjobs",
             "/apis/batch/v1/namespaces/{namespace}/cronjobs/{name}",
             "/apis/batch/v1/namespaces/{namespace}/cronjobs/{name}/status"},
            id="batch",
        ),
        pytest.param(
            CUSTOM,
            {"/apis/example.com/v1/widgets", "/apis/example.com/v1/namespaces/{namespace}/widgets",
             "/apis/example.com/v1/namespaces/{namespace}/widgets/{name}"},
            id="custom",
        ),
    ],
)  # fmt: skip
def test_paths_of_a_group_version(doc: Obj, paths: set[str]) -> None:
    assert set(doc["paths"]) == paths


def _operations(doc: Obj) -> Iterator[tuple[str, str, Obj]]:
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            if method != "parameters":
                yield path, method, operation


@pytest.mark.parametrize(
    "doc", [BATCH, CORE, COORDINATION, CUSTOM], ids=["batch", "core", "coordination", "custom"]
)
def test_writes_declare_field_validation_dry_run_and_field_manager(doc: Obj) -> None:
    writes = [(path, m, op) for path, m, op in _operations(doc) if m in ("post", "put", "patch")]
    assert writes
    for path, method, operation in writes:
        # A path with one operation (a Namespace's finalize) holds them all at the path, as upstream lays it out.
        declared = [*operation.get("parameters", []), *doc["paths"][path].get("parameters", [])]
        names = {p["name"] for p in declared}
        assert {"fieldValidation", "dryRun", "fieldManager"} <= names, (path, method)
        assert set(operation["x-kubernetes-group-version-kind"]) == {"group", "kind", "version"}


def test_operations_are_named_and_tagged_as_upstream() -> None:
    item = BATCH["paths"]["/apis/batch/v1/namespaces/{namespace}/jobs/{name}"]
    assert {m: op["operationId"] for m, op in item.items() if m != "parameters"} == {
        "get": "readBatchV1NamespacedJob",
        "put": "replaceBatchV1NamespacedJob",
        "patch": "patchBatchV1NamespacedJob",
        "delete": "deleteBatchV1NamespacedJob",
    }
    assert item["patch"]["tags"] == ["batch_v1"] and item["patch"]["x-kubernetes-action"] == "patch"
    assert [p["name"] for p in item["parameters"]] == ["name", "namespace", "pretty"]
    everywhere = BATCH["paths"]["/apis/batch/v1/jobs"]["get"]
    assert everywhere["operationId"] == "listBatchV1JobForAllNamespaces"
    listed = everywhere["responses"]["200"]["content"]["application/json"]["schema"]
    assert listed == {"$ref": "#/components/schemas/io.k8s.api.batch.v1.JobList"}
    status = BATCH["paths"]["/apis/batch/v1/namespaces/{namespace}/jobs/{name}/status"]
    assert status["patch"]["operationId"] == "patchBatchV1NamespacedJobStatus" and "delete" not in status
    namespaces = CORE["paths"]["/api/v1/namespaces"]
    assert namespaces["post"]["operationId"] == "createCoreV1Namespace"
    assert [p["name"] for p in namespaces["parameters"]] == ["pretty"]
    assert CUSTOM["paths"]["/apis/example.com/v1/widgets"]["get"]["operationId"] == (
        "listExampleComV1WidgetForAllNamespaces"
    )


def test_pod_log_is_plain_text() -> None:
    log = CORE["paths"]["/api/v1/namespaces/{namespace}/pods/{name}/log"]
    assert set(log) == {"parameters", "get"}
    assert log["get"]["operationId"] == "readCoreV1NamespacedPodLog"
    assert log["get"]["responses"]["200"]["content"] == {"text/plain": {"schema": {"type": "string"}}}
    assert {"container", "follow", "tailLines", "previous"} <= {p["name"] for p in log["parameters"]}


def test_parameters_every_operation_takes_are_the_path_s() -> None:
    collection = CORE["paths"]["/api/v1/namespaces/{namespace}/pods"]
    assert [p["name"] for p in collection["parameters"]] == ["namespace", "pretty"]
    assert "watch" in {p["name"] for p in collection["get"]["parameters"]}
    assert {p["name"] for p in collection["delete"]["parameters"]} >= {"labelSelector", "gracePeriodSeconds"}
    assert not {"watch", "allowWatchBookmarks"} & {p["name"] for p in collection["delete"]["parameters"]}
    everywhere = CORE["paths"]["/api/v1/pods"]
    assert (
        "labelSelector" in {p["name"] for p in everywhere["parameters"]}
        and "parameters" not in everywhere["get"]
    )


def test_delete_collection_is_named_as_upstream_and_not_offered_for_namespaces() -> None:
    pods = CORE["paths"]["/api/v1/namespaces/{namespace}/pods"]
    assert pods["delete"]["operationId"] == "deleteCoreV1CollectionNamespacedPod"
    assert "delete" not in CORE["paths"]["/api/v1/namespaces"]


def test_custom_resources_are_laid_out_as_apiextensions_does() -> None:
    assert CUSTOM["info"] == {"title": "Kubernetes CRD Swagger", "version": "v0.1.0"}
    collection = CUSTOM["paths"]["/apis/example.com/v1/namespaces/{namespace}/widgets"]
    assert collection["delete"]["operationId"] == "deleteExampleComV1CollectionNamespacedWidget"
    assert "requestBody" not in collection["delete"] and "watch" in {
        p["name"] for p in collection["delete"]["parameters"]
    }
    assert list(collection["post"]["requestBody"]["content"]) == ["application/json", "application/yaml"]
    item = CUSTOM["paths"]["/apis/example.com/v1/namespaces/{namespace}/widgets/{name}"]
    assert [p["name"] for p in item["get"]["parameters"]] == ["resourceVersion"]


@pytest.mark.parametrize(
    ("path", "operation_id", "tag", "answer"),
    [
        pytest.param("api", "getCoreAPIVersions", "core", "APIVersions", id="core"),
        pytest.param("apis", "getAPIVersions", "apis", "APIGroupList", id="groups"),
        pytest.param("apis/batch", "getBatchAPIGroup", "batch", "APIGroup", id="group"),
        pytest.param(
            "apis/rbac.authorization.k8s.io",
            "getRbacAuthorizationAPIGroup",
            "rbacAuthorization",
            "APIGroup",
            id="dotted-group",
        ),
    ],
)
def test_roots_and_groups_have_their_discovery_documents(
    path: str, operation_id: str, tag: str, answer: str
) -> None:
    reply = openapi_v3_reply(TYPES, path, now=NOW)
    assert reply is not None and reply.status == 200
    document = json.loads(reply.body)
    operation = document["paths"][f"/{path}/"]["get"]
    assert (operation["operationId"], operation["tags"]) == (operation_id, [tag])
    schema = operation["responses"]["200"]["content"]["application/json"]["schema"]
    assert schema == {"$ref": f"#/components/schemas/{META}.{answer}"}
    assert f"{META}.{answer}" in document["components"]["schemas"]


def test_each_group_version_has_its_resource_list() -> None:
    root = BATCH["paths"]["/apis/batch/v1/"]["get"]
    assert root["operationId"] == "getBatchV1APIResources"
    schema = root["responses"]["200"]["content"]["application/json"]["schema"]
    assert schema == {"$ref": f"#/components/schemas/{META}.APIResourceList"}
    assert BATCH["info"]["version"] == "1.37"


@pytest.mark.parametrize(
    ("doc", "path", "types"),
    [
        pytest.param(
            BATCH, "/apis/batch/v1/namespaces/{namespace}/jobs/{name}",
            ["application/apply-patch+yaml", "application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json"],
            id="builtin",
        ),
        pytest.param(
            CUSTOM, "/apis/example.com/v1/namespaces/{namespace}/widgets/{name}",
            ["application/apply-patch+yaml", "application/json-patch+json", "application/merge-patch+json"], id="custom-has-no-strategic-merge",
        ),
    ],
)  # fmt: skip
def test_patch_content_types(doc: Obj, path: str, types: list[str]) -> None:
    assert list(doc["paths"][path]["patch"]["requestBody"]["content"]) == types


# --- index, cache and hashes --------------------------------------------------------------------------------


def test_index_points_at_each_group_version_by_its_hash() -> None:
    index = openapi_v3_index(TYPES)
    groups = ["apiextensions.k8s.io", "apps", "authentication.k8s.io", "authorization.k8s.io", "batch"]
    groups += ["coordination.k8s.io", "events.k8s.io", "rbac.authorization.k8s.io", "scheduling.k8s.io"]
    group_versions = [f"apis/{g}/v1" for g in [*groups, "example.com"]]
    discovery = ["api", "apis", *(f"apis/{g}" for g in groups)]
    assert list(index["paths"]) == sorted(["api/v1", *group_versions, *discovery]), (
        "group versions, and the discovery documents of the roots and of built-in groups (not of CRDs')"
    )
    rendered = rendered_document(TYPES, "batch", "v1")
    assert rendered is not None
    assert index["paths"]["apis/batch/v1"] == {
        "serverRelativeURL": f"/openapi/v3/apis/batch/v1?hash={rendered.etag}"
    }
    assert rendered.etag == hashlib.sha512(rendered.body).hexdigest().upper()
    assert json.loads(rendered.body) == BATCH


def test_documents_are_cached_per_set_of_types() -> None:
    first = rendered_document(TYPES, "batch", "v1")
    again = rendered_document(list(reversed(TYPES)), "batch", "v1")
    assert first is again
    with_other_group = rendered_document(
        (*TYPES, ResourceType("example.org", "v1", "T", "ts", "t", True)), "batch", "v1"
    )
    assert with_other_group is first


def test_hash_follows_the_types() -> None:
    before = openapi_v3_index(TYPES)["paths"]
    changed = dataclasses.replace(WIDGETS, schema={**WIDGET_SCHEMA, "description": "A better widget."})
    after = openapi_v3_index((*BUILTIN, changed))["paths"]
    assert after["apis/example.com/v1"] != before["apis/example.com/v1"]
    assert after["apis/batch/v1"] == before["apis/batch/v1"]
    added = openapi_v3_index((*TYPES, dataclasses.replace(WIDGETS, version="v2")))["paths"]
    assert "apis/example.com/v2" in added and added["apis/example.com/v1"] == before["apis/example.com/v1"]


def test_documents_are_fresh_copies() -> None:
    document("batch")["paths"].clear()
    assert document("batch")["paths"]


def test_unserved_group_versions() -> None:
    assert openapi_v3_document(TYPES, "policy", "v1") is None
    assert rendered_document(TYPES, "batch", "v2") is None


# --- serving ------------------------------------------------------------------------------------------------

BATCH_ETAG = hashlib.sha512(json.dumps(BATCH, separators=(",", ":")).encode()).hexdigest().upper()


@pytest.mark.parametrize(
    ("path", "options", "status", "headers"),
    [
        pytest.param("", {}, 200, {"Content-Type": "application/json"}, id="index"),
        pytest.param("apis/batch/v1", {}, 200, {"ETag": f'"{BATCH_ETAG}"', "Vary": "Accept"}, id="document"),
        pytest.param(
            "apis/batch/v1", {"hash_param": BATCH_ETAG}, 200,
            {"Cache-Control": "public, immutable", "Expires": "Sun, 10 Jan 2027 00:00:00 GMT"},
            id="document-by-hash-is-immutable",
        ),
        pytest.param(
            "apis/batch/v1", {"hash_param": "STALE"}, 301,
            {"Location": f"/openapi/v3/apis/batch/v1?hash={BATCH_ETAG}"}, id="stale-hash-redirects",
        ),
        pytest.param(
            "apis/batch/v1", {"if_none_match": f'"{BATCH_ETAG}"'}, 304, {"ETag": f'"{BATCH_ETAG}"'},
            id="not-modified",
        ),
        pytest.param(
            "/apis/batch/v1/", {"accept": "application/json, */*"}, 200, {"Content-Type": "application/json"},
            id="slashes-and-accept",
        ),
        pytest.param(
            "apis/batch/v1", {"accept": "application/com.github.proto-openapi.spec.v3.v1.0+protobuf"}, 406, {},
            id="protobuf-only",
        ),
    ],
)  # fmt: skip
def test_reply(path: str, options: dict[str, str], status: int, headers: dict[str, str]) -> None:
    reply = openapi_v3_reply(TYPES, path, now=NOW, **options)
    assert reply is not None
    assert reply.status == status
    assert headers.items() <= reply.headers.items(), reply.headers
    assert bool(reply.body) == (status == 200)
    if status == 200 and path.strip("/"):
        assert json.loads(reply.body) == BATCH


def test_reply_to_the_index_honours_its_etag() -> None:
    first = openapi_v3_reply(TYPES, "", now=NOW)
    assert first is not None
    assert json.loads(first.body) == openapi_v3_index(TYPES)
    again = openapi_v3_reply(TYPES, "", now=NOW, if_none_match=first.headers["ETag"])
    assert again is not None and (again.status, again.body) == (304, b"")


@pytest.mark.parametrize(
    "path", ["apis/policy/v1", "api/v2", "apis/policy", "apis/example.com", "openapi", "apis/batch/v1/jobs"]
)
def test_reply_to_unknown_paths(path: str) -> None:
    assert openapi_v3_reply(TYPES, path, now=NOW) is None
