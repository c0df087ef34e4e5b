"""Discovery documents in both shapes, and which shape each kubectl gets."""

from __future__ import annotations

from typing import Any

import pytest

from multiqueue.apiserver.discovery import (
    LEGACY_CONTENT_TYPE,
    aggregated_content_type,
    aggregated_discovery,
    api_group,
    api_group_list,
    api_resource_list,
    api_versions,
    discovery_root,
    negotiate_discovery,
    version_info,
    version_priority,
)
from multiqueue.apiserver.resources import BUILTIN, ResourceType

Obj = dict[str, Any]


def widgets(version: str) -> ResourceType:
    return ResourceType(
        "example.com", version, "Widget", "widgets", "widget", True, ("wd",), ("all",), ("status",)
    )


TYPES = (*BUILTIN, widgets("v1beta1"), widgets("v1"), widgets("v2alpha1"))
V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
V2BETA1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"


def test_version_info() -> None:
    info = version_info()
    assert (info["major"], info["minor"], info["gitVersion"]) == ("1", "37", "v1.37.2+multiqueue"), (
        "the pinned release"
    )
    assert (info["emulationMajor"], info["emulationMinor"]) == ("1", "37")
    assert (info["minCompatibilityMajor"], info["minCompatibilityMinor"]) == ("1", "36")
    os_name, _, arch = info["platform"].partition("/")
    assert os_name and arch and arch != "x86_64"


def test_api_versions() -> None:
    assert api_versions("127.0.0.1:6443") == {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:6443"}],
    }


@pytest.mark.parametrize(
    ("versions", "preferred_first"),
    [
        pytest.param(["v1beta1", "v1"], ["v1", "v1beta1"], id="ga-before-beta"),
        pytest.param(["v1alpha1", "v1beta1"], ["v1beta1", "v1alpha1"], id="beta-before-alpha"),
        pytest.param(["v1", "v2"], ["v2", "v1"], id="higher-major-first"),
        pytest.param(["v1beta1", "v1beta2"], ["v1beta2", "v1beta1"], id="higher-beta-first"),
        pytest.param(["v2alpha1", "v1beta1"], ["v1beta1", "v2alpha1"], id="stage-before-number"),
        pytest.param(["foo", "v1", "bar"], ["v1", "bar", "foo"], id="non-kube-versions-last-by-name"),
    ],
)
def test_version_priority(versions: list[str], preferred_first: list[str]) -> None:
    assert sorted(versions, key=version_priority) == preferred_first


def test_api_group_list_names_preferred_versions() -> None:
    groups = {g["name"]: g for g in api_group_list(TYPES)["groups"]}
    assert list(groups) == [
        "apiextensions.k8s.io",
        "apps",
        "authentication.k8s.io",
        "authorization.k8s.io",
        "batch",
        "coordination.k8s.io",
        "events.k8s.io",
        "example.com",
        "rbac.authorization.k8s.io",
        "scheduling.k8s.io",
    ]
    assert groups["batch"] == {
        "name": "batch",
        "versions": [{"groupVersion": "batch/v1", "version": "v1"}],
        "preferredVersion": {"groupVersion": "batch/v1", "version": "v1"},
    }
    assert [v["version"] for v in groups["example.com"]["versions"]] == ["v1", "v1beta1", "v2alpha1"]
    assert groups["example.com"]["preferredVersion"]["version"] == "v1"


def test_api_group_is_the_list_s_entry_for_one_group() -> None:
    assert api_group(TYPES, "example.com") == {
        "kind": "APIGroup",
        "apiVersion": "v1",
        **next(g for g in api_group_list(TYPES)["groups"] if g["name"] == "example.com"),
    }
    assert api_group(TYPES, "policy") is None, "a group not served"
    assert api_group(TYPES, "") is None, "the core group has no APIGroup"


def _resources(group: str, version: str) -> dict[str, Obj]:
    listing = api_resource_list(TYPES, group, version)
    assert listing is not None
    return {r["name"]: r for r in listing["resources"]}


@pytest.mark.parametrize(
    ("group", "name", "expected"),
    [
        pytest.param(
            "batch",
            "jobs",
            {"name": "jobs", "singularName": "job", "namespaced": True, "kind": "Job",
             "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
             "categories": ["all"]},
            id="jobs",
        ),
        pytest.param(
            "batch",
            "jobs/status",
            {"name": "jobs/status", "singularName": "", "namespaced": True, "kind": "Job",
             "verbs": ["get", "patch", "update"]},
            id="jobs-status",
        ),
        pytest.param(
            "batch",
            "cronjobs",
            {"name": "cronjobs", "singularName": "cronjob", "namespaced": True, "kind": "CronJob",
             "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
             "shortNames": ["cj"], "categories": ["all"]},
            id="cronjobs",
        ),
        pytest.param(
            "",
            "pods/log",
            {"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod", "verbs": ["get"]},
            id="pods-log",
        ),
        pytest.param(
            "",
            "pods/eviction",
            {"name": "pods/eviction", "singularName": "", "namespaced": True, "group": "policy", "version": "v1",
             "kind": "Eviction", "verbs": ["create"]},
            id="pods-eviction-another-kind",
        ),
        pytest.param(
            "",
            "namespaces",
            {"name": "namespaces", "singularName": "namespace", "namespaced": False, "kind": "Namespace",
             "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
             "shortNames": ["ns"]},
            id="cluster-scoped",
        ),
    ],
)  # fmt: skip
def test_api_resource_list_entries(group: str, name: str, expected: Obj) -> None:
    assert _resources(group, "v1")[name] == expected


def test_api_resource_list_shape() -> None:
    core = api_resource_list(TYPES, "", "v1")
    batch = api_resource_list(TYPES, "batch", "v1")
    assert core is not None and batch is not None
    assert (core["kind"], core["apiVersion"], core["groupVersion"]) == ("APIResourceList", "v1", "v1")
    assert batch["groupVersion"] == "batch/v1"
    assert [r["name"] for r in batch["resources"]] == ["cronjobs", "cronjobs/status", "jobs", "jobs/status"]
    assert api_resource_list(TYPES, "batch", "v2") is None
    assert api_resource_list(TYPES, "policy", "v1") is None


def test_aggregated_core_discovery() -> None:
    document = aggregated_discovery(TYPES, legacy_core=True)
    assert (document["kind"], document["apiVersion"]) == ("APIGroupDiscoveryList", "apidiscovery.k8s.io/v2")
    [core] = document["items"]
    assert core["metadata"] == {}
    [v1] = core["versions"]
    assert (v1["version"], v1["freshness"]) == ("v1", "Current")
    pods = next(r for r in v1["resources"] if r["resource"] == "pods")
    assert pods == {
        "resource": "pods",
        "responseKind": {"group": "", "version": "v1", "kind": "Pod"},
        "scope": "Namespaced",
        "singularResource": "pod",
        "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
        "shortNames": ["po"],
        "categories": ["all"],
        "subresources": [
            {
                "subresource": "eviction",
                "responseKind": {"group": "policy", "version": "v1", "kind": "Eviction"},
                "verbs": ["create"],
            },
            {
                "subresource": "log",
                "responseKind": {"group": "", "version": "v1", "kind": "Pod"},
                "verbs": ["get"],
            },
            {
                "subresource": "status",
                "responseKind": {"group": "", "version": "v1", "kind": "Pod"},
                "verbs": ["get", "patch", "update"],
            },
        ],
    }
    nodes = next(r for r in v1["resources"] if r["resource"] == "nodes")
    assert nodes["scope"] == "Cluster"


def test_aggregated_group_discovery() -> None:
    document = aggregated_discovery(TYPES, legacy_core=False, version="v2beta1")
    assert document["apiVersion"] == "apidiscovery.k8s.io/v2beta1"
    groups = {item["metadata"]["name"]: item for item in document["items"]}
    assert list(groups) == [
        "apiextensions.k8s.io",
        "apps",
        "authentication.k8s.io",
        "authorization.k8s.io",
        "batch",
        "coordination.k8s.io",
        "events.k8s.io",
        "example.com",
        "rbac.authorization.k8s.io",
        "scheduling.k8s.io",
    ]
    assert [v["version"] for v in groups["example.com"]["versions"]] == ["v1", "v1beta1", "v2alpha1"]
    [batch] = groups["batch"]["versions"]
    assert [r["resource"] for r in batch["resources"]] == ["cronjobs", "jobs"]
    leases = groups["coordination.k8s.io"]["versions"][0]["resources"][0]
    assert "shortNames" not in leases and "subresources" not in leases


def test_aggregated_discovery_has_two_versions_only() -> None:
    with pytest.raises(ValueError, match="v3"):
        aggregated_discovery(TYPES, legacy_core=False, version="v3")


KUBECTL_1_27 = f"{V2BETA1},application/json"
KUBECTL_1_33 = f"{V2},{V2BETA1},application/json"


@pytest.mark.parametrize(
    ("accept", "content_type"),
    [
        pytest.param(KUBECTL_1_33, V2, id="kubectl-1.30-to-1.33"),
        pytest.param(KUBECTL_1_27, V2BETA1, id="kubectl-1.27-to-1.29"),
        pytest.param("application/json", LEGACY_CONTENT_TYPE, id="python-client"),
        pytest.param("", LEGACY_CONTENT_TYPE, id="no-accept"),
        pytest.param("*/*", LEGACY_CONTENT_TYPE, id="anything"),
        pytest.param(f"{V2};q=0.5,application/json", LEGACY_CONTENT_TYPE, id="quality-decides"),
        pytest.param(f"application/json;q=0.1,{V2BETA1}", V2BETA1, id="quality-over-order"),
        pytest.param(f"{V2};q=0,application/json", LEGACY_CONTENT_TYPE, id="q-zero-refuses"),
        pytest.param(
            "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
            "application/json",
            LEGACY_CONTENT_TYPE,
            id="protobuf-skipped",
        ),
        pytest.param(
            "application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList,application/json",
            LEGACY_CONTENT_TYPE,
            id="unknown-aggregated-version",
        ),
        pytest.param("application/json;as=Table;v=v1;g=meta.k8s.io", LEGACY_CONTENT_TYPE, id="other-kind"),
        pytest.param(
            "Application/JSON; g=apidiscovery.k8s.io ; v=v2 ; as=APIGroupDiscoveryList",
            V2,
            id="spacing-and-case",
        ),
        pytest.param("application/vnd.kubernetes.protobuf", LEGACY_CONTENT_TYPE, id="nothing-usable"),
    ],
)
def test_negotiate_discovery(accept: str, content_type: str) -> None:
    assert negotiate_discovery(accept) == content_type


@pytest.mark.parametrize(
    ("legacy_core", "accept", "kind", "api_version"),
    [
        pytest.param(
            True, KUBECTL_1_33, "APIGroupDiscoveryList", "apidiscovery.k8s.io/v2", id="api-aggregated"
        ),
        pytest.param(
            False, KUBECTL_1_27, "APIGroupDiscoveryList", "apidiscovery.k8s.io/v2beta1", id="apis-v2beta1"
        ),
        pytest.param(True, "application/json", "APIVersions", None, id="api-legacy"),
        pytest.param(False, "application/json", "APIGroupList", "v1", id="apis-legacy"),
    ],
)
def test_discovery_root(legacy_core: bool, accept: str, kind: str, api_version: str | None) -> None:
    content_type, body = discovery_root(TYPES, legacy_core, accept)
    assert content_type == negotiate_discovery(accept)
    assert (body["kind"], body.get("apiVersion")) == (kind, api_version)


def test_aggregated_content_type() -> None:
    assert aggregated_content_type("v2") == V2
