"""The MultiKueue bench's pure parts: Kueue's configuration and objects as the bench renders them, and requests
counted from a kube-apiserver audit log."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from tests.bench import multikueue_audit as audit
from tests.bench import multikueue_kueue as kueue


def test_the_pinned_version_is_the_one_hack_kueue_go_mod_requires(tmp_path: Path) -> None:
    assert kueue.pinned_version().startswith("v0.")
    go_mod = tmp_path / "go.mod"
    go_mod.write_text("module x\n\nrequire (\n\tsigs.k8s.io/kueue v9.8.7\n)\n")
    assert kueue.pinned_version(go_mod) == "v9.8.7"
    go_mod.write_text("module x\n")
    with pytest.raises(ValueError, match=r"pins no sigs\.k8s\.io/kueue"):
        kueue.pinned_version(go_mod)


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, Path.home() / ".cache/multiqueue/kueue/v1.2.3"),
        ({"MULTIQUEUE_KUEUE_CACHE": "/c"}, Path("/c/v1.2.3")),
        ({"MULTIQUEUE_KUEUE_CACHE": "/c", "MULTIQUEUE_KUEUE_ASSETS": "/a"}, Path("/a")),
    ],
    ids=["cache", "cache set", "assets set"],
)
def test_where_the_built_kueue_is_looked_for(environ: dict[str, str], expected: Path) -> None:
    assert kueue.assets_dir("v1.2.3", environ) == expected


def test_missing_assets_name_the_build_script(tmp_path: Path) -> None:
    assert "run hack/build-kueue.sh" in (kueue.missing_assets(tmp_path) or "")
    (tmp_path / "kueue").write_text("")
    (tmp_path / "webhooks.yaml").write_text("")
    (tmp_path / "crds").mkdir()
    assert kueue.missing_assets(tmp_path) is None


def test_the_configuration_is_one_instance_on_loopback_that_leaves_queueless_jobs_alone(
    tmp_path: Path,
) -> None:
    config = kueue.configuration(
        webhook_port=1, cert_dir=tmp_path, metrics_port=2, health_port=3, qps=1000, burst=1000
    )
    assert config["kind"] == "Configuration" and config["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"
    assert config["manageJobsWithoutQueueName"] is False
    assert config["leaderElection"] == {"leaderElect": False}
    assert config["internalCertManagement"] == {"enable": False}
    assert config["webhook"] == {"host": "127.0.0.1", "port": 1, "certDir": str(tmp_path)}
    assert config["metrics"]["bindAddress"] == "127.0.0.1:2"
    assert config["health"]["healthProbeBindAddress"] == "127.0.0.1:3"
    assert config["clientConnection"] == {"qps": 1000, "burst": 1000}
    assert config["integrations"]["frameworks"] == ["batch/job"]
    assert config["multiKueue"]["dispatcherName"] == kueue.ALL_AT_ONCE


def _webhook(path: str, group: str) -> dict[str, Any]:
    return {
        "name": path.strip("/"),
        "clientConfig": {"service": {"name": "webhook-service", "namespace": "system", "path": path}},
        "rules": [{"apiGroups": [group], "resources": ["x"]}],
        "failurePolicy": "Fail",
    }


def test_webhooks_call_the_manager_on_loopback_and_only_the_served_ones_are_kept() -> None:
    manifests = [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "mutating-webhook-configuration"},
            "webhooks": [
                _webhook("/mutate-batch-v1-job", "batch"),
                _webhook("/mutate--v1-pod", ""),
                _webhook("/mutate-kueue-x-k8s-io-v1beta2-workload", "kueue.x-k8s.io"),
                _webhook("/mutate-jobset-x-k8s-io-v1alpha2-jobset", "jobset.x-k8s.io"),
            ],
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "validating-webhook-configuration"},
            "webhooks": [_webhook("/validate-batch-v1-job", "batch")],
        },
    ]
    mutating, validating = kueue.webhook_configurations(manifests, 9443, b"PEM")
    assert mutating["metadata"]["name"] == "kueue-mutating-webhook-configuration"
    assert validating["metadata"]["name"] == "kueue-validating-webhook-configuration"
    assert [w["clientConfig"]["url"] for w in mutating["webhooks"]] == [
        "https://127.0.0.1:9443/mutate-batch-v1-job",
        "https://127.0.0.1:9443/mutate-kueue-x-k8s-io-v1beta2-workload",
    ]
    (job,) = validating["webhooks"]
    assert job["clientConfig"] == {
        "url": "https://127.0.0.1:9443/validate-batch-v1-job",
        "caBundle": base64.b64encode(b"PEM").decode(),
    }
    assert job["failurePolicy"] == "Fail" and job["rules"] == [{"apiGroups": ["batch"], "resources": ["x"]}]


@pytest.mark.parametrize("admission_check", [None, "multikueue"], ids=["worker", "management"])
def test_queues_hold_every_job_at_once(admission_check: str | None) -> None:
    flavor, cluster_queue, local_queue = kueue.queues(50, "default", admission_check)
    assert flavor["kind"] == "ResourceFlavor"
    (group,) = cluster_queue["spec"]["resourceGroups"]
    (quotas,) = group["flavors"]
    assert quotas["name"] == flavor["metadata"]["name"]
    assert {r["name"]: r["nominalQuota"] for r in quotas["resources"]}["pods"] == "100"
    checks = cluster_queue["spec"].get("admissionChecksStrategy", {}).get("admissionChecks", [])
    assert [c["name"] for c in checks] == ([admission_check] if admission_check else [])
    assert local_queue["metadata"] == {"name": kueue.LOCAL_QUEUE, "namespace": "default"}
    assert local_queue["spec"]["clusterQueue"] == cluster_queue["metadata"]["name"]
    assert kueue.job("j")["metadata"]["labels"] == {kueue.QUEUE_LABEL: kueue.LOCAL_QUEUE}


def test_multikueue_objects_name_each_worker_and_its_kubeconfig_secret() -> None:
    objects = kueue.multikueue({"worker-1": b"one", "worker-2": b"two"})
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for obj in objects:
        by_kind.setdefault(obj["kind"], []).append(obj)
    secrets = {s["metadata"]["name"]: s for s in by_kind["Secret"]}
    assert base64.b64decode(secrets["worker-2-kubeconfig"]["data"]["kubeconfig"]) == b"two"
    assert all(s["metadata"]["namespace"] == kueue.NAMESPACE for s in secrets.values())
    for cluster in by_kind["MultiKueueCluster"]:
        source = cluster["spec"]["clusterSource"]["kubeConfig"]
        assert source == {"locationType": "Secret", "location": f"{cluster['metadata']['name']}-kubeconfig"}
    (config,) = by_kind["MultiKueueConfig"]
    assert config["spec"]["clusters"] == ["worker-1", "worker-2"]
    (check,) = by_kind["AdmissionCheck"]
    assert check["spec"]["controllerName"] == "kueue.x-k8s.io/multikueue"
    assert check["spec"]["parameters"]["name"] == config["metadata"]["name"]


@pytest.mark.parametrize(("as_root", "user_namespace"), [(True, False), (False, True)])
def test_the_manager_runs_in_a_mount_namespace_under_the_name_given(
    tmp_path: Path, as_root: bool, user_namespace: bool
) -> None:
    argv = kueue.command(
        tmp_path / "kueue", tmp_path / "c.yaml", tmp_path / "tls", tmp_path / "etc", "mk", as_root
    )
    assert argv[:2] == ["unshare", "--mount"]
    assert ("--map-root-user" in argv) is user_namespace
    script = argv[argv.index("-c") + 1]
    assert kueue.METRICS_CERT_DIR in script and 'exec -a "$name"' in script
    assert argv[-5:] == [
        str(tmp_path / "etc"),
        str(tmp_path / "tls"),
        "mk",
        str(tmp_path / "kueue"),
        f"--config={tmp_path / 'c.yaml'}",
    ]


def _event(verb: str, stage: str, agent: str, resource: str = "jobs", sub: str = "", code: int = 200) -> str:
    ref = {"resource": resource, "namespace": "default"} | ({"subresource": sub} if sub else {})
    return json.dumps(
        {
            "kind": "Event",
            "verb": verb,
            "stage": stage,
            "userAgent": agent,
            "objectRef": ref,
            "requestURI": "/x",
            "responseStatus": {"code": code},
        }
    )


def test_each_request_is_counted_once_by_client_and_what_it_did() -> None:
    kueue_agent = "kueue/v0.17.0 (linux/amd64) module"
    lines = [
        _event("create", "ResponseComplete", kueue_agent, "workloads"),
        _event("patch", "ResponseComplete", kueue_agent, "workloads", "status"),
        # A watch: counted when it starts, not again when it ends.
        _event("watch", "ResponseStarted", kueue_agent, "workloads"),
        _event("watch", "ResponseComplete", kueue_agent, "workloads"),
        # A long request's start is not its answer.
        _event("get", "ResponseStarted", kueue_agent),
        _event("get", "ResponseComplete", kueue_agent),
        _event("delete", "ResponseComplete", "multikueue-manager/v0.0.0 (linux/amd64) kubernetes/$Format"),
        _event("delete", "ResponseComplete", "multikueue-manager/v0.0.0", code=404),
        json.dumps(
            {
                "kind": "Event",
                "verb": "get",
                "stage": "ResponseComplete",
                "userAgent": "",
                "requestURI": "/readyz?x",
            }
        ),
        "",
    ]
    assert audit.count(lines) == {
        "kueue": {"create workloads": 1, "patch workloads/status": 1, "watch workloads": 1, "get jobs": 1},
        "multikueue-manager": {"delete jobs": 1, "delete jobs (404)": 1},
        "unknown": {"get /readyz": 1},
    }


def test_a_log_is_read_from_an_offset_and_divided_per_job(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    assert audit.size(log) == 0
    log.write_text(_event("create", "ResponseComplete", "a/1") + "\n")
    offset = audit.size(log)
    with log.open("a") as more:
        more.write(
            _event("create", "ResponseComplete", "a/1")
            + "\n"
            + _event("get", "ResponseComplete", "a/1")
            + "\n"
        )
    counts = audit.count_since(log, offset)["a"]
    assert counts == {"create jobs": 1, "get jobs": 1}
    assert audit.by_verb({"create jobs": 3, "create events": 1, "get jobs": 1}) == {"create": 4, "get": 1}
    assert audit.per_job({"create jobs": 300, "get jobs": 1}, 1000) == {"create jobs": 0.3}
