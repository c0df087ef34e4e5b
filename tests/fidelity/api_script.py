"""The differential API script: the requests sent, in order, to an embedded and an upstream cluster.

Data only: each :class:`Step` is one HTTP request (its id names it in differences.yaml); a :class:`Wait` is a sync
point that is not compared (an upstream controller that acts asynchronously, such as the token controller making
a namespace's ``default`` ServiceAccount or a CRD becoming Established). The repetitive part, the same verbs on every
served kind, comes from :data:`KINDS` through :func:`kind_steps`. Text in ``{braces}`` is filled in per side when the
step runs: ``{ns}`` is the group's namespace, any other name a value an earlier step captured.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Final

JSON: Final = "application/json"
MERGE: Final = "application/merge-patch+json"
JSON_PATCH: Final = "application/json-patch+json"
STRATEGIC: Final = "application/strategic-merge-patch+json"
APPLY: Final = "application/apply-patch+yaml"
PREFIX: Final = "fid-"  # every namespace and cluster-scoped object the script makes
NOWHERE: Final = "fid-nowhere"  # a node no kubelet runs: pods bound there stay as written
EVENT_TIME: Final = "2026-01-02T03:04:05.123456Z"


@dataclasses.dataclass(frozen=True)
class Step:
    """One request. ``capture`` maps a variable to a dotted path in the answer's body (``metadata.uid``)."""

    id: str
    method: str
    path: str
    query: Mapping[str, str] = dataclasses.field(default_factory=dict)
    body: Any = None
    content_type: str = JSON
    capture: Mapping[str, str] = dataclasses.field(default_factory=dict)
    watch: bool = False
    raw_path: bool = False  # sent byte for byte, %-escapes and dot segments as written
    # Dotted paths (list indexes as numbers) in the answer's body that differ by environment, not by behaviour (a
    # server's own port): left out of the comparison.
    volatile: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Wait:
    """Poll ``path`` (not compared) until it answers 200 and, if given, the condition type is True."""

    path: str
    condition: str = ""


Action = Step | Wait


@dataclasses.dataclass(frozen=True)
class Kind:
    """A served kind and how to build one of its objects for the generic verbs."""

    name: str  # short id used in step ids
    group_version: str  # "v1", "batch/v1"
    plural: str
    kind: str
    namespaced: bool
    make: Callable[[str, dict[str, str]], dict[str, Any]]  # (name, labels) -> body without metadata
    mutate: dict[str, Any]  # a merge patch that changes the spec or data
    unknown_path: tuple[str, ...]  # where an unknown field goes (under it: "fidelityUnknown")
    invalid: dict[str, Any]  # a body part upstream refuses with 422 (merged into a valid one)
    field_selector: str = ""  # a kind-specific selectable field, "" when there is none beyond metadata
    strategic: bool = True  # custom resources answer 415 to a strategic merge patch
    status: dict[str, Any] | None = None  # a status subresource write, None when there is none

    def base(self, namespace: str = "{ns}") -> str:
        root = (
            f"/api/{self.group_version}" if "/" not in self.group_version else f"/apis/{self.group_version}"
        )
        if self.namespaced:
            return f"{root}/namespaces/{namespace}/{self.plural}"
        return f"{root}/{self.plural}"

    def body(self, name: str, labels: dict[str, str]) -> dict[str, Any]:
        return {
            "apiVersion": self.group_version,
            "kind": self.kind,
            "metadata": {"name": name, "labels": labels},
            **self.make(name, labels),
        }


def _pod_spec() -> dict[str, Any]:
    return {
        "nodeName": NOWHERE,
        "automountServiceAccountToken": False,
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "busybox", "command": ["true"]}],
    }


def _job(_name: str, _labels: dict[str, str]) -> dict[str, Any]:
    # A foreign managedBy: no Job controller touches it, so what reads back is what the server wrote.
    pod = _pod_spec()
    pod.pop("nodeName")
    return {"spec": {"managedBy": "example.com/fidelity", "template": {"spec": pod}}}


def _cronjob(_name: str, _labels: dict[str, str]) -> dict[str, Any]:
    pod = _pod_spec()
    pod.pop("nodeName")
    return {
        "spec": {
            "schedule": "0 0 1 1 *",
            "suspend": True,
            "jobTemplate": {"spec": {"template": {"spec": pod}}},
        }
    }


GROUP: Final = "fidelity.example.com"
CRD_NAME: Final = f"widgets.{GROUP}"

KINDS: Final[tuple[Kind, ...]] = (
    Kind(
        "configmap",
        "v1",
        "configmaps",
        "ConfigMap",
        True,
        lambda n, _l: {"data": {"key": n}},
        {"data": {"more": "x"}},
        (),
        {"data": {"bad key!": "x"}},
    ),
    Kind(
        "secret",
        "v1",
        "secrets",
        "Secret",
        True,
        lambda n, _l: {"type": "Opaque", "data": {"key": "dmFsdWU="}, "stringData": {"plain": n}},
        {"stringData": {"more": "x"}},
        (),
        {"data": {"bad key!": "eA=="}},
        field_selector="type=Opaque",
    ),
    Kind(
        "serviceaccount",
        "v1",
        "serviceaccounts",
        "ServiceAccount",
        True,
        lambda _n, _l: {"automountServiceAccountToken": False},
        {"automountServiceAccountToken": True},
        (),
        {"metadata": {"labels": {"bad label!": "x"}}},
    ),
    Kind(
        "event",
        "v1",
        "events",
        "Event",
        True,
        lambda n, _l: {
            "involvedObject": {"kind": "ConfigMap", "name": n, "namespace": "{ns}", "apiVersion": "v1"},
            "reason": "Checked",
            "message": "checked by the fidelity script",
            "type": "Normal",
            "source": {"component": "fidelity"},
            "count": 1,
        },
        {"count": 2},
        (),
        {"involvedObject": {"namespace": "other-namespace"}},
        field_selector="reason=Checked",
    ),
    Kind(
        "eventv1",
        "events.k8s.io/v1",
        "events",
        "Event",
        True,
        lambda n, _l: {
            "eventTime": EVENT_TIME,
            "reportingController": "fidelity.example.com/script",
            "reportingInstance": "fidelity-1",
            "action": "Check",
            "reason": "Checked",
            "note": "checked by the fidelity script",
            "type": "Normal",
            "regarding": {"kind": "ConfigMap", "name": n, "namespace": "{ns}", "apiVersion": "v1"},
        },
        {"series": {"count": 2, "lastObservedTime": "2026-01-02T03:05:06.000000Z"}},
        (),
        {"type": "Sometimes"},
        field_selector="regarding.kind=ConfigMap,reportingController=fidelity.example.com/script",
    ),
    Kind(
        "lease",
        "coordination.k8s.io/v1",
        "leases",
        "Lease",
        True,
        lambda n, _l: {"spec": {"holderIdentity": n, "leaseDurationSeconds": 30}},
        {"spec": {"leaseDurationSeconds": 60}},
        ("spec",),
        {"spec": {"leaseDurationSeconds": -1}},
    ),
    Kind(
        "service",
        "v1",
        "services",
        "Service",
        True,
        lambda _n, _l: {
            "spec": {
                "clusterIP": "None",
                "selector": {"app": "fidelity"},
                "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}],
            }
        },
        {"spec": {"selector": {"app": "other"}}},
        ("spec",),
        {"spec": {"ports": [{"name": "http", "port": 0}]}},
    ),
    Kind(
        "pod",
        "v1",
        "pods",
        "Pod",
        True,
        lambda _n, _l: {"spec": _pod_spec()},
        {"spec": {"activeDeadlineSeconds": 600}},
        ("spec",),
        {"spec": {"restartPolicy": "Sometimes"}},
        field_selector=f"spec.nodeName={NOWHERE}",
        status={"status": {"conditions": [{"type": "FidelityChecked", "status": "True"}]}},
    ),
    Kind(
        "job",
        "batch/v1",
        "jobs",
        "Job",
        True,
        _job,
        {"spec": {"activeDeadlineSeconds": 600}},
        ("spec",),
        {"spec": {"parallelism": -1}},
        field_selector="status.successful=0",
        status={"status": {"active": 1, "ready": 0, "startTime": "2026-01-01T00:00:00Z"}},
    ),
    Kind(
        "cronjob",
        "batch/v1",
        "cronjobs",
        "CronJob",
        True,
        _cronjob,
        {"spec": {"schedule": "0 0 2 1 *"}},
        ("spec",),
        {"spec": {"schedule": "not a schedule"}},
        status={"status": {"lastScheduleTime": "2026-01-01T00:00:00Z"}},
    ),
    Kind(
        "priorityclass",
        "scheduling.k8s.io/v1",
        "priorityclasses",
        "PriorityClass",
        False,
        lambda _n, _l: {"value": 1000, "description": "fidelity"},
        {"description": "changed"},
        (),
        {"value": 2000000000},
    ),
    Kind(
        "widget",
        f"{GROUP}/v1",
        "widgets",
        "Widget",
        True,
        lambda n, _l: {"spec": {"size": 1, "color": n}},
        {"spec": {"size": 2}},
        ("spec",),
        {"spec": {"size": "large"}},
        strategic=False,
        status={"status": {"phase": "Checked"}},
    ),
)


def _name(kind: Kind, suffix: str) -> str:
    """Names of cluster-scoped objects carry the prefix so they cannot meet anything else on the cluster."""
    return f"{PREFIX}{kind.name}-{suffix}" if not kind.namespaced else suffix


def _with_unknown(kind: Kind, body: dict[str, Any]) -> dict[str, Any]:
    target = body
    for key in kind.unknown_path:
        target = target.setdefault(key, {})
    target["fidelityUnknown"] = "x"
    return body


def _merged(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merged(out[key], value)
        else:
            out[key] = value
    return out


def kind_steps(kind: Kind) -> list[Action]:
    """The generic verbs on one kind: create, read, list, watch, write, patch, status, dry run, validation, delete."""
    k = kind.name
    base = kind.base()
    a, b, c = (_name(kind, s) for s in ("alpha", "beta", "gamma"))
    labels_a = {"app": "fidelity", "tier": "front"}
    labels_b = {"app": "fidelity", "tier": "back"}
    steps: list[Action] = [
        Step(
            f"{k}/create",
            "POST",
            base,
            body=kind.body(a, labels_a),
            capture={"rv0": "metadata.resourceVersion", "uid": "metadata.uid"},
        ),
        Step(f"{k}/create-second", "POST", base, body=kind.body(b, labels_b)),
        Step(
            f"{k}/create-generate-name",
            "POST",
            base,
            body=_merged(
                kind.body("", labels_a), {"metadata": {"name": None, "generateName": _name(kind, "g-")}}
            ),
        ),
        Step(f"{k}/create-exists", "POST", base, body=kind.body(a, labels_a)),
        Step(f"{k}/create-invalid-name", "POST", base, body=kind.body("Not_A_Name", labels_a)),
        Step(
            f"{k}/create-invalid",
            "POST",
            base,
            body=_merged(kind.body(_name(kind, "invalid"), labels_a), kind.invalid),
        ),
        Step(
            f"{k}/create-wrong-kind",
            "POST",
            base,
            body={**kind.body(_name(kind, "wrong"), labels_a), "kind": "Wrong"},
        ),
        Step(f"{k}/create-not-json", "POST", base, body="name: x", content_type="text/plain"),
        Step(f"{k}/create-dry-run", "POST", base, query={"dryRun": "All"}, body=kind.body(c, labels_a)),
        Step(f"{k}/get-after-dry-run", "GET", f"{base}/{c}"),
        Step(
            f"{k}/create-strict",
            "POST",
            base,
            query={"fieldValidation": "Strict"},
            body=_with_unknown(kind, kind.body(_name(kind, "strict"), labels_a)),
        ),
        Step(
            f"{k}/create-warn",
            "POST",
            base,
            query={"fieldValidation": "Warn", "dryRun": "All"},
            body=_with_unknown(kind, kind.body(c, labels_a)),
        ),
        Step(
            f"{k}/create-ignore",
            "POST",
            base,
            query={"fieldValidation": "Ignore", "dryRun": "All"},
            body=_with_unknown(kind, kind.body(c, labels_a)),
        ),
        Step(f"{k}/get", "GET", f"{base}/{a}", capture={"rv1": "metadata.resourceVersion"}),
        Step(f"{k}/get-missing", "GET", f"{base}/{_name(kind, 'missing')}"),
        Step(f"{k}/list-label", "GET", base, query={"labelSelector": "app=fidelity"}),
        Step(f"{k}/list-label-equals", "GET", base, query={"labelSelector": "tier=front"}),
        Step(f"{k}/list-label-not", "GET", base, query={"labelSelector": "app=fidelity,tier!=front"}),
        Step(f"{k}/list-label-in", "GET", base, query={"labelSelector": "tier in (back,side)"}),
        Step(f"{k}/list-label-bad", "GET", base, query={"labelSelector": "tier in in"}),
        Step(f"{k}/list-field-name", "GET", base, query={"fieldSelector": f"metadata.name={b}"}),
        Step(f"{k}/list-field-unknown", "GET", base, query={"fieldSelector": "spec.fidelityUnknown=x"}),
        Step(
            f"{k}/list-limit",
            "GET",
            base,
            query={"labelSelector": "app=fidelity", "limit": "1"},
            capture={"continue": "metadata.continue"},
        ),
        Step(
            f"{k}/list-continue",
            "GET",
            base,
            query={"labelSelector": "app=fidelity", "limit": "1", "continue": "{continue}"},
        ),
        Step(f"{k}/list-continue-bad", "GET", base, query={"limit": "1", "continue": "not-a-token"}),
        Step(
            f"{k}/update",
            "PUT",
            f"{base}/{a}",
            body=_merged(
                kind.body(a, {**labels_a, "step": "update"}), {"metadata": {"resourceVersion": "{rv1}"}}
            ),
        ),
        Step(
            f"{k}/update-stale",
            "PUT",
            f"{base}/{a}",
            body=_merged(kind.body(a, labels_a), {"metadata": {"resourceVersion": "{rv1}"}}),
        ),
        Step(
            f"{k}/update-missing",
            "PUT",
            f"{base}/{_name(kind, 'missing')}",
            body=kind.body(_name(kind, "missing"), labels_a),
        ),
        Step(f"{k}/update-name-mismatch", "PUT", f"{base}/{a}", body=kind.body(b, labels_a)),
        Step(f"{k}/patch-merge", "PATCH", f"{base}/{a}", body=kind.mutate, content_type=MERGE),
        Step(
            f"{k}/patch-json",
            "PATCH",
            f"{base}/{a}",
            body=[{"op": "add", "path": "/metadata/labels/patched", "value": "json"}],
            content_type=JSON_PATCH,
        ),
        Step(
            f"{k}/patch-json-test-fails",
            "PATCH",
            f"{base}/{a}",
            body=[{"op": "test", "path": "/metadata/labels/app", "value": "other"}],
            content_type=JSON_PATCH,
        ),
        Step(
            f"{k}/patch-strategic",
            "PATCH",
            f"{base}/{a}",
            body={"metadata": {"labels": {"patched": "strategic"}}},
            content_type=STRATEGIC,
        ),
        Step(
            f"{k}/patch-apply",
            "PATCH",
            f"{base}/{b}",
            query={"fieldManager": "fidelity"},
            body=kind.body(b, {**labels_b, "applied": "yes"}),
            content_type=APPLY,
        ),
        Step(
            f"{k}/patch-bad-type",
            "PATCH",
            f"{base}/{a}",
            body={"x": 1},
            content_type="application/x-fidelity",
        ),
        Step(f"{k}/patch-missing", "PATCH", f"{base}/{_name(kind, 'missing')}", body={}, content_type=MERGE),
        Step(f"{k}/put-collection", "PUT", base, body=kind.body(a, labels_a)),
        Step(
            f"{k}/watch",
            "GET",
            base,
            query={
                "watch": "true",
                "resourceVersion": "{rv0}",
                "allowWatchBookmarks": "true",
                "timeoutSeconds": "1",
            },
            watch=True,
        ),
        # alpha leaves this selector at patch-json (a DELETED showing it as it last matched) and comes back at
        # patch-strategic (ADDED).
        Step(
            f"{k}/watch-label",
            "GET",
            base,
            query={
                "watch": "true",
                "resourceVersion": "{rv0}",
                "labelSelector": "app=fidelity,patched!=json",
                "timeoutSeconds": "1",
            },
            watch=True,
        ),
    ]
    if kind.field_selector:
        steps.insert(
            22, Step(f"{k}/list-field-kind", "GET", base, query={"fieldSelector": kind.field_selector})
        )
    if kind.status is not None:
        steps += [
            Step(f"{k}/status-get", "GET", f"{base}/{a}/status"),
            Step(f"{k}/status-patch", "PATCH", f"{base}/{a}/status", body=kind.status, content_type=MERGE),
            Step(
                f"{k}/status-patch-spec-ignored",
                "PATCH",
                f"{base}/{a}/status",
                body={"metadata": {"labels": {"via": "status"}}},
                content_type=MERGE,
            ),
        ]
    steps += [
        Step(
            f"{k}/delete-precondition-uid", "DELETE", f"{base}/{a}", body={"preconditions": {"uid": "0000"}}
        ),
        Step(
            f"{k}/delete-precondition-rv",
            "DELETE",
            f"{base}/{a}",
            body={"preconditions": {"resourceVersion": "1"}},
        ),
        Step(f"{k}/delete-dry-run-query", "DELETE", f"{base}/{a}", query={"dryRun": "All"}),
        Step(f"{k}/delete-dry-run-body", "DELETE", f"{base}/{a}", body={"dryRun": ["All"]}),
        Step(f"{k}/get-after-dry-run-delete", "GET", f"{base}/{a}", capture={"uid1": "metadata.uid"}),
        Step(f"{k}/delete-bad-policy", "DELETE", f"{base}/{a}", body={"propagationPolicy": "Sometimes"}),
        Step(
            f"{k}/delete-background",
            "DELETE",
            f"{base}/{a}",
            body={"propagationPolicy": "Background", "preconditions": {"uid": "{uid1}"}},
        ),
        Step(f"{k}/get-deleted", "GET", f"{base}/{a}"),
        Step(f"{k}/delete-missing", "DELETE", f"{base}/{a}"),
    ]
    return steps


def _namespace_steps() -> list[Action]:
    base = "/api/v1/namespaces"
    return [
        Step("namespace/get", "GET", f"{base}/{{ns}}"),
        Step("namespace/get-missing", "GET", f"{base}/{PREFIX}missing"),
        Step("namespace/create-exists", "POST", base, body={"metadata": {"name": "{ns}"}}),
        Step("namespace/create-invalid", "POST", base, body={"metadata": {"name": "Bad_Name"}}),
        Step(
            "namespace/create-dry-run",
            "POST",
            base,
            query={"dryRun": "All"},
            body={"metadata": {"name": f"{PREFIX}dry"}},
        ),
        Step("namespace/get-after-dry-run", "GET", f"{base}/{PREFIX}dry"),
        Step("namespace/list-field-name", "GET", base, query={"fieldSelector": "metadata.name={ns}"}),
        Step(
            "namespace/list-label", "GET", base, query={"labelSelector": "kubernetes.io/metadata.name={ns}"}
        ),
        Step(
            "namespace/patch-label",
            "PATCH",
            f"{base}/{{ns}}",
            body={"metadata": {"labels": {"checked": "yes"}}},
            content_type=MERGE,
        ),
        Step("namespace/status-get", "GET", f"{base}/{{ns}}/status"),
        # Both are made by a controller after the namespace appears, on either side: wait for them, then compare.
        Wait(f"{base}/{{ns}}/serviceaccounts/default"),
        Step("namespace/serviceaccount-default", "GET", f"{base}/{{ns}}/serviceaccounts/default"),
        Wait(f"{base}/{{ns}}/configmaps/kube-root-ca.crt"),
        Step("namespace/configmap-root-ca", "GET", f"{base}/{{ns}}/configmaps/kube-root-ca.crt", capture={}),
        Step(
            "namespace/create-in-missing",
            "POST",
            f"{base}/{PREFIX}missing/configmaps",
            body={"metadata": {"name": "x"}},
        ),
        # The namespaces kube-apiserver never lets go: 403, dry run or not, whether they exist or not.
        Step("namespace/delete-default-dry-run", "DELETE", f"{base}/default", query={"dryRun": "All"}),
        Step(
            "namespace/delete-kube-system-dry-run", "DELETE", f"{base}/kube-system", query={"dryRun": "All"}
        ),
        Step("namespace/delete-kube-public", "DELETE", f"{base}/kube-public"),
        Step("namespace/path-unknown-kind", "GET", "/api/v1/namespaces/{ns}/fidelitythings"),
        Step("namespace/path-unknown-group", "GET", "/apis/fidelity.invalid/v1/things"),
    ]


def _path_steps() -> list[Action]:
    """What reaches the server before any object is involved: GET /, paths no client would tidy, a body too big."""
    base = "/api/v1/namespaces/{ns}/configmaps"
    too_big = {"metadata": {"name": "too-big"}, "data": {"big": "x" * (3 * 1024 * 1024)}}
    return [
        Step("paths/root", "GET", "/"),
        Step("paths/name-newline", "GET", f"{base}/a%0Ab", raw_path=True),
        Step("paths/name-nul", "GET", f"{base}/a%00b", raw_path=True),
        Step("paths/name-dot-dot", "GET", f"{base}/%2E%2E", raw_path=True),
        Step("paths/name-dot", "PUT", f"{base}/.", body={"metadata": {"name": "."}}, raw_path=True),
        Step("paths/name-percent", "DELETE", f"{base}/a%25b", raw_path=True),
        Step("paths/bad-escape", "GET", f"{base}/%zz", raw_path=True),
        Step("paths/dot-segments", "GET", "/api/v1/namespaces/../namespaces/{ns}", raw_path=True),
        Step("paths/unknown-newline", "GET", "/fidelity%0A", raw_path=True),
        Step("paths/long-name", "GET", f"{base}/{'a' * 20000}"),
        Step("paths/body-too-large", "POST", base, body=too_big),
        Step("paths/body-too-large-nothing-stored", "GET", f"{base}/too-big"),
        Step("paths/timeout", "GET", base, query={"timeout": "32s", "labelSelector": "fidelity=none"}),
        Step("paths/timeout-invalid", "GET", base, query={"timeout": "soon"}),
    ]


def _malformed_steps() -> list[Action]:
    """Bodies Go's decoder or ObjectMeta validation refuses, patches past kube-apiserver's bounds, deep nesting."""
    cms = "/api/v1/namespaces/{ns}/configmaps"
    jobs = "/apis/batch/v1/namespaces/{ns}/jobs"

    def configmap(name: str, **meta: Any) -> dict[str, Any]:
        return {"metadata": {"name": name, **meta}, "data": {"k": "v"}}

    owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "u1", "controller": True}
    doubling = [{"op": "add", "path": "/data/big", "value": "x" * 4096}]
    doubling += [{"op": "copy", "from": "/data/big", "path": f"/data/copy{i}"} for i in range(800)]
    job = {"apiVersion": "batch/v1", "kind": "Job", **_job("", {})}
    return [
        Step("malformed/data-number", "POST", cms, body={"metadata": {"name": "n"}, "data": {"k": 1}}),
        Step("malformed/owners-string", "POST", cms, body=configmap("o1", ownerReferences="x")),
        Step("malformed/owners-empty-entry", "POST", cms, body=configmap("o2", ownerReferences=[{"x": 1}])),
        Step(
            "malformed/owners-two-controllers",
            "POST",
            cms,
            body=configmap("o3", ownerReferences=[owner, {**owner, "name": "p", "uid": "u2"}]),
        ),
        Step("malformed/finalizer-name", "POST", cms, body=configmap("f1", finalizers=["not a name"])),
        Step("malformed/finalizers-number", "POST", cms, body=configmap("f2", finalizers=[1])),
        Step("malformed/nan", "POST", cms, body='{"metadata": {"name": "nan"}, "data": {"k": NaN}}'),
        Step("malformed/deep-150", "POST", cms, body={**configmap("deep"), "x": _nested(150)}),
        Step("malformed/deep-250", "POST", cms, body={**configmap("deeper"), "x": _nested(250)}),
        Step(
            "malformed/job-parallelism-fraction",
            "POST",
            jobs,
            body=_merged(job, {"metadata": {"name": "j1"}, "spec": {"parallelism": 1.5}}),
        ),
        Step(
            "malformed/job-parallelism-string",
            "POST",
            jobs,
            body=_merged(job, {"metadata": {"name": "j2"}, "spec": {"parallelism": "2"}}),
        ),
        Step(
            "malformed/job-status-string",
            "PUT",
            f"{jobs}/j3/status",
            body=_merged(job, {"metadata": {"name": "j3"}, "status": "Running"}),
        ),
        Step(
            "malformed/namespace-status-string",
            "PUT",
            "/api/v1/namespaces/{ns}/status",
            body={"metadata": {"name": "{ns}"}, "status": "x"},
        ),
        Step("malformed/patch-base", "POST", cms, body=configmap("base")),
        Step(
            "malformed/patch-data-number", "PATCH", f"{cms}/base", body={"data": {"k": 2}}, content_type=MERGE
        ),
        Step(
            "malformed/patch-too-many-ops",
            "PATCH",
            f"{cms}/base",
            body=[{"op": "test", "path": "/data/k", "value": "v"}] * 10001,
            content_type=JSON_PATCH,
        ),
        Step(
            "malformed/patch-copies-too-big", "PATCH", f"{cms}/base", body=doubling, content_type=JSON_PATCH
        ),
        Step("malformed/patch-nothing-stored", "GET", f"{cms}/base"),
        Step(
            "malformed/object-over-etcd-limit",
            "POST",
            "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
            body=_huge_role(),
        ),
        Step(
            "malformed/object-over-etcd-limit-nothing-stored",
            "GET",
            "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles/huge",
        ),
        Step(
            "malformed/apply-unknown-field",
            "PATCH",
            f"{cms}/base",
            query={"fieldManager": "fidelity"},
            body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "base"}, "bogus": 1},
            content_type=APPLY,
        ),
    ]


def _finalize_steps() -> list[Action]:
    """A Namespace's spec.finalizers change through /finalize only: an update keeps them, finalize sets them."""
    base = "/api/v1/namespaces"

    def finalizers(*names: str) -> dict[str, Any]:
        return {"metadata": {"name": "{ns}"}, "spec": {"finalizers": list(names)}}

    return [
        Step("finalize/update-keeps-finalizers", "PUT", f"{base}/{{ns}}", body=finalizers()),
        Step("finalize/get", "GET", f"{base}/{{ns}}/finalize"),
        Step("finalize/bad-name", "PUT", f"{base}/{{ns}}/finalize", body=finalizers("not a name")),
        Step(
            "finalize/hold",
            "PUT",
            f"{base}/{{ns}}/finalize",
            body=finalizers("kubernetes", "example.com/hold"),
        ),
        Step("finalize/release", "PUT", f"{base}/{{ns}}/finalize", body=finalizers()),
    ]


def _huge_role() -> dict[str, Any]:
    """A Role of about 2.2 MB, in JSON and in protobuf alike (long names): past etcd's 1.5 MiB request limit, in a
    body under kube-apiserver's 3 MiB."""
    names = [f"{'n' * 60}-{i:06d}" for i in range(30_000)]
    rule = {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"], "resourceNames": names}
    return {"metadata": {"name": "huge"}, "rules": [rule]}


def _nested(depth: int) -> Any:
    """A value whose arrays nest ``depth`` deep."""
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


def _node_steps() -> list[Action]:
    base = "/api/v1/nodes"
    return [
        Step("node/list-field-name", "GET", base, query={"fieldSelector": "metadata.name=fidelity"}),
        Step("node/get-missing", "GET", f"{base}/{PREFIX}missing"),
        Step("node/list-label", "GET", base, query={"labelSelector": "kubernetes.io/hostname=fidelity"}),
        Step("node/list-label-none", "GET", base, query={"labelSelector": "fidelity=none"}),
    ]


def _job_steps() -> list[Action]:
    """What users of Jobs rely on beyond the generic verbs."""
    base = "/apis/batch/v1/namespaces/{ns}/jobs"
    job = _job("", {})
    body = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "extra"}, **job}
    return [
        Step("job-extra/create", "POST", base, body=body),
        Step("job-extra/status-reads-empty", "GET", f"{base}/extra/status"),
        Step(
            "job-extra/template-immutable",
            "PATCH",
            f"{base}/extra",
            body={"spec": {"template": {"spec": {"restartPolicy": "OnFailure"}}}},
            content_type=STRATEGIC,
        ),
        Step(
            "job-extra/managed-by-immutable",
            "PATCH",
            f"{base}/extra",
            body={"spec": {"managedBy": "example.com/other"}},
            content_type=MERGE,
        ),
        Step(
            "job-extra/status-invalid",
            "PATCH",
            f"{base}/extra/status",
            body={"status": {"succeeded": -1}},
            content_type=MERGE,
        ),
        Step(
            "job-extra/suspend",
            "PATCH",
            f"{base}/extra",
            body={"spec": {"suspend": True}},
            content_type=MERGE,
        ),
        Step("job-extra/delete-orphan", "DELETE", f"{base}/extra", body={"propagationPolicy": "Orphan"}),
        Step(
            "job-extra/create-bad-completion-mode",
            "POST",
            base,
            body=_merged(body, {"metadata": {"name": "bad-mode"}, "spec": {"completionMode": "Sometimes"}}),
        ),
    ]


def _resized_job() -> dict[str, Any]:
    """A suspended Job no controller touches (a foreign managedBy): its status is only what a step writes, so the
    update rules see the same state on both sides."""
    pod = _pod_spec()
    pod.pop("nodeName")
    cpu = {"requests": {"cpu": "10m"}, "limits": {"cpu": "100m"}}
    pod["containers"][0]["resources"] = cpu
    pod["initContainers"] = [{"name": "init", "image": "busybox", "command": ["true"], "resources": cpu}]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "resized"},
        "spec": {"managedBy": "example.com/fidelity", "suspend": True, "template": {"spec": pod}},
    }


def _cpu(cpu: str) -> dict[str, Any]:
    requests = {"resources": {"requests": {"cpu": cpu}}}
    return {
        "spec": {
            "template": {
                "spec": {
                    "containers": [{"name": "main", **requests}],
                    "initContainers": [{"name": "init", **requests}],
                }
            }
        }
    }


def _suspended_job_steps() -> list[Action]:
    """A suspended Job's pod template: requests and limits may change while it has no active pods, before it
    started or once suspended again after it ran (its Suspended condition); other changes, and any change while
    pods are active or the Job runs, are refused."""
    base = "/apis/batch/v1/namespaces/{ns}/jobs"
    suspended = {
        "type": "Suspended",
        "status": "True",
        "reason": "JobSuspended",
        "message": "Job suspended",
        "lastProbeTime": EVENT_TIME,
        "lastTransitionTime": EVENT_TIME,
    }

    def resize(step: str, cpu: str) -> Step:
        return Step(f"job-resize/{step}", "PATCH", f"{base}/resized", body=_cpu(cpu), content_type=STRATEGIC)

    def status(step: str, body: dict[str, Any]) -> Step:
        return Step(f"job-resize/{step}", "PATCH", f"{base}/resized/status", body=body, content_type=MERGE)

    image = {"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}}}}
    return [
        Step("job-resize/create", "POST", base, body=_resized_job()),
        resize("resources-never-started", "20m"),
        Step("job-resize/image-refused", "PATCH", f"{base}/resized", body=image, content_type=STRATEGIC),
        status("started-with-active-pods", {"status": {"startTime": EVENT_TIME, "active": 1}}),
        resize("resources-active-pods-refused", "30m"),
        Step(
            "job-resize/suspended-again",
            "PATCH",
            f"{base}/resized/status",
            body=[
                {"op": "remove", "path": "/status/active"},
                {"op": "add", "path": "/status/conditions", "value": [suspended]},
            ],
            content_type=JSON_PATCH,
        ),
        resize("resources-suspended-again", "40m"),
        Step(
            "job-resize/resume",
            "PATCH",
            f"{base}/resized",
            body={"spec": {"suspend": False}},
            content_type=MERGE,
        ),
        resize("resources-running-refused", "50m"),
        Step("job-resize/delete", "DELETE", f"{base}/resized"),
    ]


def _api_surface_steps() -> list[Action]:
    """What tools look for first: the kubernetes Service, the Eviction API, a privileged pod."""
    pods = "/api/v1/namespaces/{ns}/pods"

    def pod(name: str, **container: Any) -> dict[str, Any]:
        spec = _pod_spec()
        spec["containers"][0].update(container)
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}

    def evict(step: str, name: str, path_name: str = "evictee", **query: str) -> Step:
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}}
        return Step(f"surface/{step}", "POST", f"{pods}/{path_name}/eviction", query=query, body=body)

    return [
        Step(
            "surface/kubernetes-service",
            "GET",
            "/api/v1/namespaces/default/services/kubernetes",
            volatile=("spec.ports.0.targetPort",),
        ),
        # Upstream's ServiceAccount admission refuses pods until the token controller made this one.
        Wait("/api/v1/namespaces/{ns}/serviceaccounts/default"),
        Step(
            "surface/privileged-pod",
            "POST",
            pods,
            body=pod("privileged", securityContext={"privileged": True}),
        ),
        Step("surface/evictee-create", "POST", pods, body=pod("evictee")),
        evict("evict-name-mismatch", "other"),
        evict("evict-missing", "missing", path_name="missing"),
        evict("evict-dry-run", "evictee", dryRun="All"),
        Step("surface/evictee-after-dry-run", "GET", f"{pods}/evictee"),
        evict("evict", "evictee"),
        Step("surface/evictee-evicted", "GET", f"{pods}/evictee"),
        evict("evict-terminating", "evictee"),
        Step("surface/evict-get", "GET", f"{pods}/evictee/eviction"),
    ]


def _events_v1_steps() -> list[Action]:
    """What client-go's events recorder (controller-runtime's, the JobSet controller's) does through
    events.k8s.io/v1, and the one Event storage read through both groups."""
    v1 = "/apis/events.k8s.io/v1/namespaces/{ns}/events"
    core = "/api/v1/namespaces/{ns}/events"
    regarding = {
        "kind": "JobSet",
        "name": "sweep",
        "namespace": "{ns}",
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
    }
    recorded = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "sweep.18ec3701d1769bcf"},
        "eventTime": EVENT_TIME,
        "reportingController": "jobset",
        "reportingInstance": "jobset-controller-7d9f",
        "action": "Create",
        "reason": "SuccessfulCreate",
        "note": "created Job sweep-workers-0",
        "type": "Normal",
        "regarding": regarding,
    }
    legacy = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "legacy.1"},
        "involvedObject": {**regarding, "uid": "0f0e0d0c-0000-4000-8000-000000000001"},
        "reason": "Started",
        "message": "written through the core API",
        "type": "Warning",
        "source": {"component": "kubelet", "host": "node-1"},
        "count": 3,
        "firstTimestamp": "2026-01-02T03:04:05Z",
        "lastTimestamp": "2026-01-02T03:14:05Z",
    }
    return [
        Step("eventv1-extra/create-recorded", "POST", v1, body=recorded),
        Step("eventv1-extra/read-as-core", "GET", f"{core}/sweep.18ec3701d1769bcf"),
        Step(
            "eventv1-extra/patch-series",
            "PATCH",
            f"{v1}/sweep.18ec3701d1769bcf",
            body={"series": {"count": 2, "lastObservedTime": "2026-01-02T03:09:05.654321Z"}},
            content_type=STRATEGIC,
        ),
        Step("eventv1-extra/read-series-as-core", "GET", f"{core}/sweep.18ec3701d1769bcf"),
        Step("eventv1-extra/create-core", "POST", core, body=legacy),
        Step("eventv1-extra/read-core-as-v1", "GET", f"{v1}/legacy.1"),
        Step("eventv1-extra/list-v1", "GET", v1),
        Step("eventv1-extra/list-core", "GET", core),
        Step("eventv1-extra/list-regarding", "GET", v1, query={"fieldSelector": "regarding.name=sweep"}),
        Step("eventv1-extra/list-type", "GET", v1, query={"fieldSelector": "type=Warning"}),
        Step(
            "eventv1-extra/list-core-label-unsupported",
            "GET",
            v1,
            query={"fieldSelector": "involvedObject.name=sweep"},
        ),
        Step("eventv1-extra/list-core-source", "GET", core, query={"fieldSelector": "source=jobset"}),
        Step(
            "eventv1-extra/list-core-reporting",
            "GET",
            core,
            query={"fieldSelector": "reportingComponent=jobset"},
        ),
        Step(
            "eventv1-extra/create-deprecated-set",
            "POST",
            v1,
            body=_merged(
                recorded,
                {
                    "metadata": {"name": "deprecated"},
                    "deprecatedCount": 2,
                    "deprecatedSource": {"component": "x"},
                    "deprecatedFirstTimestamp": "2026-01-02T03:04:05Z",
                    "deprecatedLastTimestamp": "2026-01-02T03:04:05Z",
                },
            ),
        ),
        Step(
            "eventv1-extra/create-bare",
            "POST",
            v1,
            body={"metadata": {"name": "bare"}, "regarding": regarding, "note": "n" * 1025},
        ),
        Step(
            "eventv1-extra/create-no-reporter",
            "POST",
            v1,
            body=_merged(
                recorded,
                {"metadata": {"name": "no-reporter"}, "reportingController": "", "action": "", "reason": ""},
            ),
        ),
        Step(
            "eventv1-extra/create-bad-series",
            "POST",
            v1,
            body=_merged(recorded, {"metadata": {"name": "bad-series"}, "series": {"count": 1}}),
        ),
        Step(
            "eventv1-extra/create-core-new-style",
            "POST",
            core,
            body={
                "metadata": {"name": "new-style"},
                "involvedObject": regarding,
                "eventTime": EVENT_TIME,
                "reason": "Checked",
                "type": "Sometimes",
            },
        ),
        Step(
            "eventv1-extra/patch-immutable",
            "PATCH",
            f"{v1}/sweep.18ec3701d1769bcf",
            body={"note": "changed", "action": "Delete", "reportingInstance": "other"},
            content_type=MERGE,
        ),
        Step(
            "eventv1-extra/patch-immutable-regarding",
            "PATCH",
            f"{v1}/sweep.18ec3701d1769bcf",
            body={"regarding": {"name": "other"}},
            content_type=MERGE,
        ),
        Step(
            "eventv1-extra/core-update-through-core",
            "PATCH",
            f"{core}/sweep.18ec3701d1769bcf",
            body={"message": "changed through the core API", "count": 4},
            content_type=MERGE,
        ),
        Step("eventv1-extra/read-changed-as-v1", "GET", f"{v1}/sweep.18ec3701d1769bcf"),
        Step(
            "eventv1-extra/patch-core-made-through-v1",
            "PATCH",
            f"{v1}/legacy.1",
            body={"metadata": {"labels": {"seen": "v1"}}},
            content_type=STRATEGIC,
        ),
        Step("eventv1-extra/delete-through-core", "DELETE", f"{core}/legacy.1"),
        Step("eventv1-extra/get-deleted-as-v1", "GET", f"{v1}/legacy.1"),
    ]


def _crd_steps() -> list[Action]:
    body = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME},
        "spec": {
            "group": GROUP,
            "names": {"kind": "Widget", "listKind": "WidgetList", "plural": "widgets", "singular": "widget"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "properties": {"size": {"type": "integer"}, "color": {"type": "string"}},
                                },
                                "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
                            },
                        }
                    },
                }
            ],
        },
    }
    base = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    return [
        Step("crd/create", "POST", base, body=body),
        Wait(f"{base}/{CRD_NAME}", "Established"),
        Wait(f"/apis/{GROUP}/v1/namespaces/{{ns}}/widgets"),
        Step("crd/create-exists", "POST", base, body=body),
        Step(
            "crd/create-bad-name",
            "POST",
            base,
            body=_merged(body, {"metadata": {"name": "widgets.other.example.com"}}),
        ),
        Step("crd/list-field-name", "GET", base, query={"fieldSelector": f"metadata.name={CRD_NAME}"}),
    ]


def _crd_cleanup() -> list[Action]:
    base = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    return [Step("crd/delete", "DELETE", f"{base}/{CRD_NAME}")]


@dataclasses.dataclass(frozen=True)
class Group:
    """A run of steps in a namespace of its own (``fid-<name>``, the same on both sides)."""

    name: str
    actions: tuple[Action, ...]

    @property
    def namespace(self) -> str:
        return f"{PREFIX}{self.name}"


def _paging_steps() -> list[Action]:
    """List paging and freshness on a kind no controller adds to: limits upstream pages nothing for, and
    resourceVersions the server has not reached (answered after upstream's 3 s wait)."""
    base = "/api/v1/namespaces/{ns}/secrets"
    future = "999999999"
    made = [
        Step(f"paging/create-{i}", "POST", base, body={"metadata": {"name": f"s{i}"}, "data": {"k": "dg=="}})
        for i in range(3)
    ]
    return [
        *made,
        Step("paging/list-limit-negative", "GET", base, query={"limit": "-1"}),
        Step("paging/list-limit-zero", "GET", base, query={"limit": "0"}),
        Step("paging/list-limit-at-0", "GET", base, query={"limit": "1", "resourceVersion": "0"}),
        Step(
            "paging/list-limit", "GET", base, query={"limit": "2"}, capture={"continue": "metadata.continue"}
        ),
        Step("paging/list-continue", "GET", base, query={"limit": "2", "continue": "{continue}"}),
        Step(
            "paging/list-continue-with-version",
            "GET",
            base,
            query={"limit": "2", "continue": "{continue}", "resourceVersion": "1"},
        ),
        Step("paging/list-future", "GET", base, query={"resourceVersion": future}),
        Step(
            "paging/list-future-exact",
            "GET",
            base,
            query={"resourceVersion": future, "resourceVersionMatch": "Exact"},
        ),
        Step(
            "paging/watch-future-initial",
            "GET",
            base,
            query={
                "watch": "true",
                "resourceVersion": future,
                "sendInitialEvents": "true",
                "resourceVersionMatch": "NotOlderThan",
                "allowWatchBookmarks": "true",
                "timeoutSeconds": "10",
            },
            watch=True,
        ),
    ]


def _namespace_create(group: str) -> Step:
    return Step(
        f"{group}/namespace-create", "POST", "/api/v1/namespaces", body={"metadata": {"name": "{ns}"}}
    )


def groups() -> list[Group]:
    """The whole script, in order; each group starts by making its namespace."""
    out: list[Group] = [
        Group("namespace", tuple(_namespace_steps())),
        Group("paths", tuple(_path_steps())),
        Group("node", tuple(_node_steps())),
        Group("paging", tuple(_paging_steps())),
        Group("malformed", tuple(_malformed_steps())),
        Group("finalize", tuple(_finalize_steps())),
        Group("resize", tuple(_suspended_job_steps())),
        Group("surface", tuple(_api_surface_steps())),
    ]
    for kind in KINDS:
        actions: list[Action] = []
        if kind.name == "pod":
            # Upstream's ServiceAccount admission refuses pods until the token controller made this one.
            actions.append(Wait("/api/v1/namespaces/{ns}/serviceaccounts/default"))
        if kind.name == "widget":
            actions += _crd_steps()
        actions += kind_steps(kind)
        if kind.name == "job":
            actions += _job_steps()
        if kind.name == "eventv1":
            actions += _events_v1_steps()
        if kind.name == "widget":
            actions += _crd_cleanup()
        out.append(Group(kind.name, tuple(actions)))
    return [Group(g.name, (_namespace_create(g.name), *g.actions)) for g in out]


def steps() -> list[Step]:
    return [a for g in groups() for a in g.actions if isinstance(a, Step)]
