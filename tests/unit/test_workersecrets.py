"""Reading a worker from a Secret, and the kubeconfigs a Secret may not carry."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from multiqueue.dispatch.workersecrets import WorkerSecretError, worker_from_secret
from multiqueue.kube.config import KubeconfigError, in_cluster_kubeconfig, unsafe_kubeconfig_reason


def kubeconfig(cluster: dict[str, Any] | None = None, user: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "w",
                "cluster": cluster or {"server": "https://w:6443", "certificate-authority-data": "Q0E="},
            }
        ],
        "users": [{"name": "sa", "user": user or {"token": "secret-token"}}],
        "contexts": [{"name": "w", "context": {"cluster": "w", "user": "sa"}}],
        "current-context": "w",
    }


def secret(config: dict[str, Any] | str | None, name: str = "worker-3", **annotations: str) -> dict[str, Any]:
    data = {}
    if config is not None:
        text = config if isinstance(config, str) else yaml.safe_dump(config)
        data["kubeconfig"] = base64.b64encode(text.encode()).decode()
    return {
        "metadata": {
            "name": f"{name}-secret",
            "namespace": "multiqueue-system",
            "labels": {"multiqueue.dev/cluster": name},
            "annotations": annotations,
        },
        "data": data,
    }


def test_a_secret_makes_a_worker_with_its_labels_and_capacity() -> None:
    found = worker_from_secret(
        secret(
            kubeconfig(),
            **{
                "multiqueue.dev/labels": json.dumps({"region": "eu"}),
                "multiqueue.dev/capacity": json.dumps({"maxJobs": 2, "resources": {"cpu": "500m"}}),
            },
        ),
        allow_unsafe=False,
    )
    assert found.name == "worker-3"
    assert found.kubeconfig["current-context"] == "w"
    assert (found.settings.labels, found.settings.max_jobs, found.settings.quota) == (
        {"region": "eu"},
        2,
        {"cpu": 0.5},
    )


def test_the_fingerprint_changes_with_what_the_worker_is_made_of() -> None:
    one = worker_from_secret(secret(kubeconfig()), allow_unsafe=False)
    again = worker_from_secret(secret(kubeconfig()), allow_unsafe=False)
    other = worker_from_secret(secret(kubeconfig(user={"token": "rotated"})), allow_unsafe=False)
    relabelled = worker_from_secret(
        secret(kubeconfig(), **{"multiqueue.dev/labels": '{"a": "b"}'}), allow_unsafe=False
    )
    assert one.fingerprint == again.fingerprint
    assert len({one.fingerprint, other.fingerprint, relabelled.fingerprint}) == 3


@pytest.mark.parametrize(
    ("body", "reason", "message"),
    [
        pytest.param(secret(None), "BadKubeConfig", "no 'kubeconfig' key", id="no-key"),
        pytest.param(secret("- a\n- list\n"), "BadKubeConfig", "is not a kubeconfig", id="not-a-mapping"),
        pytest.param(
            secret(kubeconfig(), name="Bad_Name"),
            "InvalidWorkerName",
            "multiqueue.dev/cluster='Bad_Name'",
            id="bad-name",
        ),
        pytest.param(
            secret(
                kubeconfig(user={"exec": {"command": "aws", "apiVersion": "client.authentication.k8s.io/v1"}})
            ),
            "BadKubeConfig",
            "user 'sa' runs the credential plugin exec; not allowed unless workerSecrets.allowInsecureKubeconfigs is true",
            id="exec",
        ),
        pytest.param(
            secret(kubeconfig(user={"tokenFile": "/var/run/token"})),
            "BadKubeConfig",
            "user 'sa' reads the local file tokenFile '/var/run/token'",
            id="token-file",
        ),
        pytest.param(
            secret(kubeconfig(cluster={"server": "https://w", "certificate-authority": "/etc/ca.crt"})),
            "BadKubeConfig",
            "cluster 'w' reads the local file certificate-authority '/etc/ca.crt'",
            id="ca-file",
        ),
        pytest.param(
            secret(kubeconfig(), **{"multiqueue.dev/capacity": '{"maxJobs": -1}'}),
            "InvalidWorkerCapacity",
            "annotation multiqueue.dev/capacity: maxJobs: Input should be greater than or equal to 0",
            id="bad-capacity",
        ),
        pytest.param(
            secret(kubeconfig(), **{"multiqueue.dev/labels": "region=eu"}),
            "InvalidWorkerAnnotation",
            "annotation multiqueue.dev/labels is not JSON",
            id="labels-not-json",
        ),
        pytest.param(
            secret(kubeconfig(), **{"multiqueue.dev/labels": '{"size": 3}'}),
            "InvalidWorkerLabels",
            "values must be strings",
            id="label-not-a-string",
        ),
    ],
)
def test_a_faulty_secret_is_refused_with_its_reason(body: dict[str, Any], reason: str, message: str) -> None:
    with pytest.raises(WorkerSecretError) as refused:
        worker_from_secret(body, allow_unsafe=False)
    assert refused.value.reason == reason
    assert message in str(refused.value)


def test_file_paths_and_plugins_pass_when_the_config_allows_them() -> None:
    body = secret(kubeconfig(user={"tokenFile": "/var/run/token"}))
    assert worker_from_secret(body, allow_unsafe=True).name == "worker-3"
    assert unsafe_kubeconfig_reason(kubeconfig()) is None


def test_in_cluster_credentials_use_the_service_account(tmp_path: Path) -> None:
    config = in_cluster_kubeconfig(
        {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}, tmp_path
    )
    assert config["clusters"][0]["cluster"] == {
        "server": "https://10.0.0.1:443",
        "certificate-authority": str(tmp_path / "ca.crt"),
    }
    assert config["users"][0]["user"] == {"tokenFile": str(tmp_path / "token")}
    v6 = in_cluster_kubeconfig(
        {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}, tmp_path
    )
    assert v6["clusters"][0]["cluster"]["server"] == "https://[fd00::1]:443"
    with pytest.raises(KubeconfigError, match="not running in a pod"):
        in_cluster_kubeconfig({}, tmp_path)
