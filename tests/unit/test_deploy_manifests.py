"""The deploy/ manifests as a reviewer reads them: every object is a valid Kubernetes object, kubectl applies them,
the RBAC is least privilege, and the Deployment runs the manager the way the config says.

``kubectl apply --dry-run=client`` still talks to a server: it maps each kind to its resource through discovery and
GETs each object to choose between create and patch (``--validate=false`` only spares the OpenAPI download). A
kubeconfig pointing at an unreachable address therefore fails even with ``--validate=false``. The dry run here goes
to a stub that serves discovery for the kinds in deploy/ and answers 404 to every GET, so every object shows as
"created (dry run)"; schema checks are done by the official client's models instead (an unknown or misspelled
field does not survive their round trip).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import kubernetes.client
import pytest
import yaml
from kubernetes.client import ApiClient

from multiqueue.dispatch.config import ManagerConfig
from tests.e2e.kind import IMAGE

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
KUBECTL = shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(
    KUBECTL is None, reason="kubectl is not on PATH: deploy/ is rendered with kubectl kustomize"
)
pytestmark = needs_kubectl
Obj = dict[str, Any]

# kind -> (group, plural, namespaced): what the discovery stub serves.
RESOURCES = {
    "Namespace": ("", "namespaces", False),
    "ServiceAccount": ("", "serviceaccounts", True),
    "ConfigMap": ("", "configmaps", True),
    "Service": ("", "services", True),
    "Deployment": ("apps", "deployments", True),
    "Role": ("rbac.authorization.k8s.io", "roles", True),
    "RoleBinding": ("rbac.authorization.k8s.io", "rolebindings", True),
    "ClusterRole": ("rbac.authorization.k8s.io", "clusterroles", False),
    "ClusterRoleBinding": ("rbac.authorization.k8s.io", "clusterrolebindings", False),
}


def kubectl(*args: str, kubeconfig: Path | None = None) -> str:
    assert KUBECTL is not None
    command = [KUBECTL, *(["--kubeconfig", str(kubeconfig)] if kubeconfig else []), *args]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, f"kubectl {' '.join(args)}: {result.stderr}"
    return result.stdout


def render(folder: Path) -> list[Obj]:
    return [obj for obj in yaml.safe_load_all(kubectl("kustomize", str(folder))) if obj]


@pytest.fixture(scope="module")
def management() -> list[Obj]:
    return render(DEPLOY)


@pytest.fixture(scope="module")
def worker() -> list[Obj]:
    return render(DEPLOY / "worker")


def one(objects: list[Obj], kind: str, name: str | None = None) -> Obj:
    found = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def model_name(obj: Obj) -> str:
    version = str(obj["apiVersion"]).rpartition("/")[2]
    return f"{version.capitalize()}{obj['kind']}"


@pytest.mark.parametrize("folder", ["deploy", "deploy/worker"])
def test_every_object_round_trips_through_the_official_client_models(folder: str) -> None:
    client = ApiClient()
    objects = render(REPO / folder)
    assert objects
    for obj in objects:
        name = model_name(obj)
        assert hasattr(kubernetes.client, name), f"no model {name} for {obj['apiVersion']} {obj['kind']}"
        model = client.deserialize(json.dumps(obj), name, "application/json")
        back = client.sanitize_for_serialization(model)  # type: ignore[no-untyped-call]  # the client has no hints
        assert back == obj, f"{obj['kind']} {obj['metadata']['name']}"


class _Discovery(BaseHTTPRequestHandler):
    """Discovery for RESOURCES; 404 (a Kubernetes Status) for anything else, as for objects that do not exist."""

    documents: ClassVar[dict[str, Obj]] = {}

    def do_GET(self) -> None:
        path = self.path.partition("?")[0]
        body = self.documents.get(path)
        status = 200 if body is not None else 404
        if body is None:
            body = {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "reason": "NotFound",
                "code": 404,
            }
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def discovery_documents() -> dict[str, Obj]:
    by_group: dict[str, list[Obj]] = {}
    for kind, (group, plural, namespaced) in RESOURCES.items():
        verbs = ["create", "delete", "get", "list", "patch", "update", "watch"]
        entry = {
            "name": plural,
            "singularName": kind.lower(),
            "namespaced": namespaced,
            "kind": kind,
            "verbs": verbs,
        }
        by_group.setdefault(group, []).append(entry)
    documents: dict[str, Obj] = {
        "/api": {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []},
        "/api/v1": {"kind": "APIResourceList", "groupVersion": "v1", "resources": by_group.pop("")},
    }
    groups = []
    for group, resources in by_group.items():
        version = {"groupVersion": f"{group}/v1", "version": "v1"}
        groups.append({"name": group, "versions": [version], "preferredVersion": version})
        documents[f"/apis/{group}/v1"] = {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/v1",
            "resources": resources,
        }
    documents["/apis"] = {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}
    return documents


@pytest.fixture(scope="module")
def stub_kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    handler = type("Discovery", (_Discovery,), {"documents": discovery_documents()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    folder = tmp_path_factory.mktemp("stub")
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "stub", "cluster": {"server": f"http://127.0.0.1:{server.server_port}"}}],
        "users": [{"name": "stub", "user": {}}],
        "contexts": [{"name": "stub", "context": {"cluster": "stub", "user": "stub"}}],
        "current-context": "stub",
    }
    path = folder / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    try:
        yield path
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.mark.parametrize("folder", ["deploy", "deploy/worker"])
def test_kubectl_apply_dry_run_client_creates_every_object(stub_kubeconfig: Path, folder: str) -> None:
    objects = render(REPO / folder)
    assert {o["kind"] for o in objects} <= set(RESOURCES), "add the new kind to RESOURCES"
    out = kubectl(
        "apply", "--dry-run=client", "--validate=false", "-k", str(REPO / folder), kubeconfig=stub_kubeconfig
    )
    expected = set()
    for obj in objects:
        group = RESOURCES[obj["kind"]][0]
        expected.add(
            f"{obj['kind'].lower()}{'.' + group if group else ''}/{obj['metadata']['name']} created (dry run)"
        )
    assert set(out.splitlines()) == expected


def rules_of(role: Obj) -> set[tuple[str, str, frozenset[str]]]:
    return {
        (group, resource, frozenset(rule["verbs"]))
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }


def roles(objects: list[Obj]) -> list[Obj]:
    return [o for o in objects if o["kind"] in ("Role", "ClusterRole")]


def test_no_wildcards_and_no_aggregation(management: list[Obj], worker: list[Obj]) -> None:
    for role in roles(management + worker):
        assert "aggregationRule" not in role
        for rule in role["rules"]:
            for key in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule.get(key, []), f"{role['kind']} {role['metadata']['name']}: * in {key}"
            assert "nonResourceURLs" not in rule


def test_bindings_grant_only_our_roles_to_our_service_account(management: list[Obj]) -> None:
    defined = {(r["kind"], r["metadata"]["name"]) for r in roles(management)}
    account = one(management, "ServiceAccount")["metadata"]
    bindings = [o for o in management if o["kind"] in ("RoleBinding", "ClusterRoleBinding")]
    assert bindings
    for binding in bindings:
        ref = binding["roleRef"]
        assert ref["name"] not in ("cluster-admin", "admin", "edit")
        assert (ref["kind"], ref["name"]) in defined, (
            f"{binding['metadata']['name']} binds a role not in deploy/"
        )
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}
        ]


def test_management_cluster_role_is_exactly_what_the_manager_uses(management: list[Obj]) -> None:
    assert rules_of(one(management, "ClusterRole", "multiqueue-manager")) == {
        ("batch", "jobs", frozenset({"get", "list", "watch", "patch", "update"})),
        ("batch", "jobs/status", frozenset({"get", "patch", "update"})),
        ("jobset.x-k8s.io", "jobsets", frozenset({"get", "list", "watch", "patch", "update"})),
        ("jobset.x-k8s.io", "jobsets/status", frozenset({"get", "patch", "update"})),
        ("batch", "cronjobs", frozenset({"get", "list", "watch"})),
        ("scheduling.k8s.io", "priorityclasses", frozenset({"get", "list", "watch"})),
        ("", "events", frozenset({"create", "patch"})),
        ("events.k8s.io", "events", frozenset({"create", "patch"})),
    }


def test_secrets_and_leases_only_in_the_managers_namespace(management: list[Obj]) -> None:
    namespace = one(management, "Namespace")["metadata"]["name"]
    role = one(management, "Role", "multiqueue-manager")
    assert role["metadata"]["namespace"] == namespace == "multiqueue-system"
    assert rules_of(role) == {
        ("coordination.k8s.io", "leases", frozenset({"get", "list", "create", "update"})),
        ("", "secrets", frozenset({"get", "list", "watch"})),
    }
    for cluster_role in (o for o in management if o["kind"] == "ClusterRole"):
        assert not {r for _, r, _ in rules_of(cluster_role)} & {"secrets", "leases"}


def test_worker_cluster_role_is_exactly_the_listed_verbs(worker: list[Obj]) -> None:
    role = one(worker, "ClusterRole", "multiqueue-worker")
    assert [o["kind"] for o in worker] == ["ClusterRole"]
    assert rules_of(role) == {
        ("batch", "jobs", frozenset({"create", "get", "list", "watch", "patch", "delete"})),
        # A redispatched mirror is given the user Job's progress before it runs.
        ("batch", "jobs/status", frozenset({"update"})),
        ("jobset.x-k8s.io", "jobsets", frozenset({"create", "get", "list", "watch", "patch", "delete"})),
        ("jobset.x-k8s.io", "jobsets/status", frozenset({"update"})),
        ("", "namespaces", frozenset({"get", "create"})),
        # multiqueue logs, and the capacity of a worker read from its Nodes (capacity.fromNodes).
        ("", "pods", frozenset({"get", "list", "watch"})),
        ("", "nodes", frozenset({"list", "watch"})),
        ("", "pods/log", frozenset({"get"})),
    }


def container_of(management: list[Obj]) -> Obj:
    [container] = one(management, "Deployment")["spec"]["template"]["spec"]["containers"]
    result: Obj = container
    return result


def test_deployment_runs_two_replicas_with_probes_on_the_metrics_port(management: list[Obj]) -> None:
    deployment = one(management, "Deployment", "multiqueue-manager")
    assert deployment["spec"]["replicas"] == 2
    container = container_of(management)
    assert container["ports"] == [{"name": "metrics", "containerPort": 8080, "protocol": "TCP"}]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert set(container["resources"]["requests"]) == {"cpu", "memory"}
    assert "memory" in container["resources"]["limits"]
    assert container["image"] == IMAGE  # what the kind provider builds and loads
    assert container["imagePullPolicy"] == "IfNotPresent"


def test_deployment_runs_as_non_root_read_only_without_capabilities(management: list[Obj]) -> None:
    pod = one(management, "Deployment")["spec"]["template"]["spec"]
    container = container_of(management)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"] == {
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    # runAsNonRoot is only enforced against a numeric user; the image's must be the one the pod asks for.
    users = [
        line.split()[1]
        for line in (DEPLOY / "Dockerfile").read_text().splitlines()
        if line.startswith("USER ")
    ]
    assert users == [f"{pod['securityContext']['runAsUser']}:{pod['securityContext']['runAsGroup']}"]
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["serviceAccountName"] == one(management, "ServiceAccount")["metadata"]["name"]


def test_service_selects_the_manager_pods_on_the_metrics_port(management: list[Obj]) -> None:
    service = one(management, "Service")
    labels = one(management, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert [(p["name"], p["targetPort"]) for p in service["spec"]["ports"]] == [("metrics", "metrics")]


def manager_config_text(management: list[Obj]) -> str:
    """The config the pod reads: the ConfigMap the Deployment mounts, at the path its args name."""
    pod = one(management, "Deployment")["spec"]["template"]["spec"]
    container = container_of(management)
    path = Path(container["args"][container["args"].index("--config") + 1])
    mount = next(m for m in container["volumeMounts"] if path.parent == Path(m["mountPath"]))
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    configmap = one(management, "ConfigMap", volume["configMap"]["name"])
    text: str = configmap["data"][path.name]
    return text


NEW_KEYS = {"namespace", "worker_secrets", "worker_lost_timeout"}


@pytest.mark.skipif(
    not NEW_KEYS.issubset(ManagerConfig.model_fields), reason="needs workerSecrets/namespace config keys"
)
def test_mounted_config_is_a_manager_config_for_running_in_the_cluster(management: list[Obj]) -> None:
    config = ManagerConfig.model_validate(yaml.safe_load(manager_config_text(management)))
    namespace = one(management, "Namespace")["metadata"]["name"]
    assert config.namespace == namespace
    assert config.lease_namespace == one(management, "Role")["metadata"]["namespace"]
    assert config.management.kubeconfig is None  # the pod's service account
    assert config.workers == []
    assert config.worker_secrets.enabled and not config.worker_secrets.allow_insecure_kubeconfigs
    assert config.leader_election.enabled
    assert config.managed_by == "multiqueue.dev/dispatcher"
    host, _, port = config.metrics_address.rpartition(":")
    assert host == "0.0.0.0"  # reachable by the kubelet's probes and by scrapers
    assert int(port) == container_of(management)["ports"][0]["containerPort"]
