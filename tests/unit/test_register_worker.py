"""deploy/register-worker.sh against a fake kubectl that records its arguments and answers the few reads."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from multiqueue.dispatch.workersecrets import worker_from_secret
from multiqueue.kube.config import unsafe_kubeconfig_reason

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
SCRIPT = DEPLOY / "register-worker.sh"
BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(
    BASH is None, reason="bash is not on PATH: deploy/register-worker.sh needs it"
)

TOKEN = "eyJhbGciOiJSUzI1NiJ9.payload.signature"
CA_PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
CA_DATA = base64.b64encode(CA_PEM.encode()).decode()
KUBECONFIG_SERVER = "https://203.0.113.7:6443"

# Records argv and stdin (when it reads a manifest from "-") as one JSON line; answers reads like kubectl would.
FAKE_KUBECTL = """\
import json, os, sys
args = sys.argv[1:]
stdin = sys.stdin.read() if "-" in args and "-f" in args else None
with open(os.environ["FAKE_KUBECTL_LOG"], "a") as log:
    log.write(json.dumps({"args": args, "stdin": stdin}) + "\\n")
if any(a.startswith("go-template=") for a in args):
    print(TOKEN, end="")
elif any(a.startswith("jsonpath={.data.ca") for a in args):
    print(CA_DATA, end="")
elif "view" in args:
    print(SERVER, end="")
"""


@dataclass
class Run:
    returncode: int
    stderr: str
    calls: list[dict[str, Any]]


def register(tmp_path: Path, *args: str) -> Run:
    assert BASH is not None
    kubectl = tmp_path / "kubectl"
    constants = f"TOKEN = {TOKEN!r}\nCA_DATA = {CA_DATA!r}\nSERVER = {KUBECONFIG_SERVER!r}\n"
    kubectl.write_text(f"#!{sys.executable}\n{constants}{FAKE_KUBECTL}")
    kubectl.chmod(0o755)
    log = tmp_path / "calls.jsonl"
    result = subprocess.run(
        [BASH, str(SCRIPT), *args],
        env={"PATH": "/usr/bin:/bin", "KUBECTL": str(kubectl), "FAKE_KUBECTL_LOG": str(log)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return Run(result.returncode, result.stderr, calls)


BASE_ARGS = ("--name", "worker-1", "--worker-context", "w1", "--management-context", "mgmt")


def test_issues_the_kubectl_calls_in_order(tmp_path: Path) -> None:
    run = register(tmp_path, *BASE_ARGS)
    assert run.returncode == 0, run.stderr
    assert [call["args"] for call in run.calls] == [
        ["--context", "w1", "apply", "-f", str(DEPLOY / "worker" / "clusterrole.yaml")],
        ["--context", "w1", "apply", "-f", "-"],
        [
            "--context", "w1", "-n", "multiqueue-system",
            "wait", "--for=jsonpath={.data.token}", "secret/multiqueue-manager-token", "--timeout=60s",
        ],
        [
            "--context", "w1", "-n", "multiqueue-system",
            "get", "secret", "multiqueue-manager-token", "-o", "go-template={{.data.token | base64decode}}",
        ],
        [
            "--context", "w1", "-n", "multiqueue-system",
            "get", "secret", "multiqueue-manager-token", "-o", "jsonpath={.data.ca\\.crt}",
        ],
        ["--context", "w1", "config", "view", "--minify", "--raw", "-o", "jsonpath={.clusters[0].cluster.server}"],
        ["--context", "mgmt", "apply", "-f", "-"],
    ]  # fmt: skip


def test_the_worker_gets_a_service_account_bound_to_multiqueue_worker_and_a_token(tmp_path: Path) -> None:
    run = register(tmp_path, *BASE_ARGS)
    objects = {obj["kind"]: obj for obj in yaml.safe_load_all(run.calls[1]["stdin"])}
    assert set(objects) == {"Namespace", "ServiceAccount", "ClusterRoleBinding", "Secret"}
    assert objects["Namespace"]["metadata"]["name"] == "multiqueue-system"
    account = objects["ServiceAccount"]["metadata"]
    assert (account["name"], account["namespace"]) == ("multiqueue-manager", "multiqueue-system")
    binding = objects["ClusterRoleBinding"]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "multiqueue-worker",
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "multiqueue-manager", "namespace": "multiqueue-system"}
    ]
    token = objects["Secret"]
    assert token["type"] == "kubernetes.io/service-account-token"
    assert token["metadata"]["annotations"] == {"kubernetes.io/service-account.name": "multiqueue-manager"}


def management_secret(run: Run) -> dict[str, Any]:
    last = run.calls[-1]
    assert last["args"][:2] == ["--context", "mgmt"]
    secret: dict[str, Any] = yaml.safe_load(last["stdin"])
    return secret


def test_the_management_secret_is_a_worker_the_manager_accepts(tmp_path: Path) -> None:
    labels = '{"region": "eu", "team": "o\'neil"}'
    capacity = '{"maxJobs": 10, "resources": {"cpu": "8"}}'
    run = register(tmp_path, *BASE_ARGS, "--labels", labels, "--capacity", capacity)
    assert run.returncode == 0, run.stderr
    secret = management_secret(run)
    assert secret["metadata"]["name"] == "multiqueue-worker-worker-1"
    assert secret["metadata"]["namespace"] == "multiqueue-system"
    assert secret["metadata"]["labels"] == {"multiqueue.dev/cluster": "worker-1"}
    assert json.loads(secret["metadata"]["annotations"]["multiqueue.dev/labels"]) == json.loads(labels)

    worker = worker_from_secret(secret, allow_unsafe=False)
    assert worker.name == "worker-1"
    assert worker.settings.labels == {"region": "eu", "team": "o'neil"}
    assert worker.settings.max_jobs == 10
    kubeconfig = worker.kubeconfig
    assert unsafe_kubeconfig_reason(kubeconfig) is None
    [cluster] = kubeconfig["clusters"]
    assert cluster["cluster"] == {"server": KUBECONFIG_SERVER, "certificate-authority-data": CA_DATA}
    [user] = kubeconfig["users"]
    assert user["user"] == {"token": TOKEN}
    assert kubeconfig["current-context"] == "worker-1"


def test_server_given_on_the_command_line_replaces_the_contexts_one(tmp_path: Path) -> None:
    run = register(tmp_path, *BASE_ARGS, "--server", "https://mq-worker-1-control-plane:6443")
    assert run.returncode == 0, run.stderr
    assert not any("view" in call["args"] for call in run.calls)
    kubeconfig = yaml.safe_load(management_secret(run)["stringData"]["kubeconfig"])
    assert kubeconfig["clusters"][0]["cluster"]["server"] == "https://mq-worker-1-control-plane:6443"


def test_without_labels_or_capacity_the_secret_has_no_annotations(tmp_path: Path) -> None:
    run = register(tmp_path, *BASE_ARGS, "--namespace", "mq")
    assert run.returncode == 0, run.stderr
    secret = management_secret(run)
    assert "annotations" not in secret["metadata"]
    assert secret["metadata"]["namespace"] == "mq"


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        ((), "--name is required"),
        (("--name", "worker-1", "--worker-context", "w1"), "--management-context is required"),
        (("--name",), "--name needs a value"),
        ((*BASE_ARGS, "--colour", "blue"), "unknown argument: --colour"),
        (("--name", "Worker_1", "--worker-context", "w1", "--management-context", "m"), "DNS-1123 label"),
        ((*BASE_ARGS, "--labels", "region=eu"), "take a JSON object"),
    ],
)
def test_bad_arguments_exit_2_with_the_usage_line_and_touch_nothing(
    tmp_path: Path, args: tuple[str, ...], complaint: str
) -> None:
    run = register(tmp_path, *args)
    assert run.returncode == 2
    first, second = run.stderr.splitlines()[:2]
    assert complaint in first
    assert second.startswith("usage: register-worker.sh --name NAME")
    assert run.calls == []
