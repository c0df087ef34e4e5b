"""deploy/register-worker.sh against a fake kubectl that records its arguments, answers the few reads, reports what
an apply created, and fails or signals where a test says."""

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

# Records argv and stdin (when it reads a manifest from "-") as one JSON line; answers reads like kubectl would. A
# call whose arguments contain one of FAKE_KUBECTL_FAIL (a JSON list) fails; one containing FAKE_KUBECTL_SIGNAL
# sends SIGTERM to the script first. An apply reports each object "created", or "unchanged" if FAKE_KUBECTL_EXISTING
# (a JSON list) names it.
FAKE_KUBECTL = """\
import json, os, signal, sys
import yaml
args = sys.argv[1:]
stdin = sys.stdin.read() if "-" in args and "-f" in args else None
with open(os.environ["FAKE_KUBECTL_LOG"], "a") as log:
    log.write(json.dumps({"args": args, "stdin": stdin}) + "\\n")
called = " ".join(args)
if os.environ.get("FAKE_KUBECTL_SIGNAL") and os.environ["FAKE_KUBECTL_SIGNAL"] in called:
    os.kill(os.getppid(), signal.SIGTERM)
if any(part in called for part in json.loads(os.environ.get("FAKE_KUBECTL_FAIL", "[]"))):
    print("error: the fake kubectl was told to fail: " + called, file=sys.stderr)
    sys.exit(1)
if "apply" in args:
    source = args[args.index("-f") + 1]
    text = stdin if source == "-" else open(source).read()
    existing = json.loads(os.environ.get("FAKE_KUBECTL_EXISTING", "[]"))
    for obj in yaml.safe_load_all(text):
        group = obj["apiVersion"].split("/")[0] if "/" in obj["apiVersion"] else ""
        what = obj["kind"].lower() + ("." + group if group else "") + "/" + obj["metadata"]["name"]
        print(what, "unchanged" if what in existing else "created")
elif any(a.startswith("go-template=") for a in args):
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


def register(tmp_path: Path, *args: str, **fake: list[str] | str) -> Run:
    """Run the script; ``fake`` sets the fake kubectl's FAKE_KUBECTL_<KEY> (fail, existing: lists; signal)."""
    assert BASH is not None
    kubectl = tmp_path / "kubectl"
    constants = f"TOKEN = {TOKEN!r}\nCA_DATA = {CA_DATA!r}\nSERVER = {KUBECONFIG_SERVER!r}\n"
    kubectl.write_text(f"#!{sys.executable}\n{constants}{FAKE_KUBECTL}")
    kubectl.chmod(0o755)
    log = tmp_path / "calls.jsonl"
    result = subprocess.run(
        [BASH, str(SCRIPT), *args],
        env={
            "PATH": "/usr/bin:/bin",
            "KUBECTL": str(kubectl),
            "FAKE_KUBECTL_LOG": str(log),
            **{
                f"FAKE_KUBECTL_{k.upper()}": v if isinstance(v, str) else json.dumps(v)
                for k, v in fake.items()
            },
        },
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


PROGRESS = [
    "worker worker-1: ClusterRole multiqueue-worker on context w1",
    "worker worker-1: namespace multiqueue-system, ServiceAccount multiqueue-manager, its ClusterRoleBinding and "
    "token Secret on context w1",
    "worker worker-1: waiting up to 60s for the token controller to fill in Secret multiqueue-manager-token",
    "worker worker-1: reading the token, the CA and the API server address",
    "worker worker-1: Secret multiqueue-worker-worker-1 in multiqueue-system on context mgmt",
    "worker worker-1: registered: the manager adds it from that Secret while it runs",
]
# What a first run creates on the worker, as kubectl apply names it, newest first: the order it is removed in.
CREATED_NEWEST_FIRST = [
    "secret/multiqueue-manager-token",
    "clusterrolebinding.rbac.authorization.k8s.io/multiqueue-worker",
    "serviceaccount/multiqueue-manager",
    "namespace/multiqueue-system",
    "clusterrole.rbac.authorization.k8s.io/multiqueue-worker",
]


def deletions(run: Run) -> list[str]:
    """What the run deleted, in order; each on the worker, in the namespace, waiting until it is gone."""
    found = []
    for call in run.calls:
        args = call["args"]
        if "delete" in args:
            assert args[:5] == ["--context", "w1", "-n", "multiqueue-system", "delete"]
            assert args[6:] == ["--ignore-not-found", "--wait=true", "--timeout=60s"]
            found.append(args[5])
    return found


def test_a_registration_prints_one_line_per_step_and_removes_nothing(tmp_path: Path) -> None:
    run = register(tmp_path, *BASE_ARGS)
    assert run.returncode == 0, run.stderr
    assert run.stderr.splitlines() == PROGRESS
    assert deletions(run) == []


@pytest.mark.parametrize(
    ("failing", "complaint"),
    [
        pytest.param(
            "wait --for",
            "Secret multiqueue-manager-token got no token within 60s on context w1",
            id="no-token",
        ),
        pytest.param("--context mgmt apply", "told to fail: --context mgmt apply", id="management-refuses"),
    ],
)
def test_a_run_that_fails_after_creating_objects_removes_them_newest_first(
    tmp_path: Path, failing: str, complaint: str
) -> None:
    run = register(tmp_path, *BASE_ARGS, fail=[failing])
    assert run.returncode == 1
    assert complaint in run.stderr
    assert deletions(run) == CREATED_NEWEST_FIRST
    lines = run.stderr.splitlines()
    start = lines.index("worker worker-1: failed; removing what this run created on context w1")
    assert lines[start + 1 :] == [f"worker worker-1: removed {what}" for what in CREATED_NEWEST_FIRST]
    # Nothing was written on the management cluster, except the one apply that was refused.
    on_management = [c["args"] for c in run.calls if c["args"][:2] == ["--context", "mgmt"]]
    assert on_management == ([["--context", "mgmt", "apply", "-f", "-"]] if failing.endswith("apply") else [])


def test_what_was_there_before_the_run_stays(tmp_path: Path) -> None:
    existing = ["namespace/multiqueue-system", "clusterrole.rbac.authorization.k8s.io/multiqueue-worker"]
    run = register(tmp_path, *BASE_ARGS, fail=["wait --for"], existing=existing)
    assert run.returncode == 1
    assert deletions(run) == [w for w in CREATED_NEWEST_FIRST if w not in existing]


def test_a_run_that_fails_before_creating_anything_removes_nothing(tmp_path: Path) -> None:
    run = register(tmp_path, *BASE_ARGS, fail=["clusterrole.yaml"])
    assert run.returncode == 1
    assert deletions(run) == []
    assert "removing" not in run.stderr
    assert run.stderr.splitlines()[0] == PROGRESS[0]


def test_a_removal_that_fails_is_reported_and_the_rest_go_on(tmp_path: Path) -> None:
    run = register(tmp_path, *BASE_ARGS, fail=["wait --for", "delete serviceaccount/"])
    assert run.returncode == 1
    assert deletions(run) == CREATED_NEWEST_FIRST
    assert "could not remove serviceaccount/multiqueue-manager: delete it by hand" in run.stderr
    assert "removed namespace/multiqueue-system" in run.stderr


def test_an_interrupted_run_removes_what_it_created(tmp_path: Path) -> None:
    run = register(tmp_path, *BASE_ARGS, signal="wait --for")
    assert run.returncode == 143
    assert deletions(run) == CREATED_NEWEST_FIRST
    assert not any(c["args"][:2] == ["--context", "mgmt"] for c in run.calls)
