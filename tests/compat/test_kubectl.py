"""kubectl against a local API server: the everyday commands work as on a real cluster."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.compat.conftest import Cluster

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")

JOB = """
apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  labels: {{app: compat}}
spec:
  suspend: true
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: main
          image: busybox:1.36
          command: ["true"]
"""


def test_create_get_describe_delete(cluster: Cluster) -> None:
    created = cluster.kubectl("create", "-f", str(EXAMPLES / "job.yaml"))
    assert created.stdout.strip() == "job.batch/hello-indexed created"
    table = cluster.kubectl("get", "jobs")
    header = table.stdout.splitlines()[0].split()
    assert header == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    assert "hello-indexed" in table.stdout
    as_yaml = yaml.safe_load(cluster.kubectl("get", "job", "hello-indexed", "-o", "yaml").stdout)
    assert as_yaml["spec"]["completionMode"] == "Indexed"
    assert (
        as_yaml["spec"]["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"]
        == as_yaml["metadata"]["uid"]
    )
    described = cluster.kubectl("describe", "job", "hello-indexed").stdout
    assert any(line.split() == ["Completion", "Mode:", "Indexed"] for line in described.splitlines()), (
        described
    )
    assert "Parallelism:" in described
    deleted = cluster.kubectl("delete", "job", "hello-indexed")
    assert deleted.stdout.strip() == 'job.batch "hello-indexed" deleted'
    missing = cluster.kubectl("get", "job", "hello-indexed", check=False)
    assert missing.returncode == 1
    assert 'jobs.batch "hello-indexed" not found' in missing.stderr


def test_apply_twice_is_unchanged(cluster: Cluster, tmp_path: Path) -> None:
    manifest = tmp_path / "job.yaml"
    manifest.write_text(JOB.format(name="applied"))
    assert cluster.kubectl("apply", "-f", str(manifest)).stdout.strip() == "job.batch/applied created"
    assert cluster.kubectl("apply", "-f", str(manifest)).stdout.strip() == "job.batch/applied unchanged"
    manifest.write_text(JOB.format(name="applied").replace("suspend: true", "suspend: false"))
    assert cluster.kubectl("apply", "-f", str(manifest)).stdout.strip() == "job.batch/applied configured"
    job = json.loads(cluster.kubectl("get", "job", "applied", "-o", "json").stdout)
    assert job["spec"]["suspend"] is False
    assert job["metadata"]["generation"] == 2


def test_server_side_apply_then_diff_finds_nothing(cluster: Cluster, tmp_path: Path) -> None:
    manifest = tmp_path / "job.yaml"
    manifest.write_text(JOB.format(name="server-applied"))
    applied = cluster.kubectl("apply", "--server-side", "-f", str(manifest)).stdout.strip()
    assert applied == "job.batch/server-applied serverside-applied"
    assert cluster.kubectl("diff", "--server-side", "-f", str(manifest), check=False).returncode == 0
    manifest.write_text(JOB.format(name="server-applied").replace("suspend: true", "suspend: false"))
    assert cluster.kubectl("diff", "--server-side", "-f", str(manifest), check=False).returncode == 1
    shown = cluster.kubectl("get", "job", "server-applied", "-o", "json", "--show-managed-fields").stdout
    job = json.loads(shown)
    assert [(e["manager"], e["operation"]) for e in job["metadata"]["managedFields"]] == [
        ("kubectl", "Apply")
    ]


def test_label_and_patch_types(cluster: Cluster) -> None:
    cluster.kubectl("create", "-f", "-", stdin=JOB.format(name="patched"))
    assert "labeled" in cluster.kubectl("label", "job", "patched", "tier=batch").stdout
    cluster.kubectl("patch", "job", "patched", "--type", "merge", "-p", '{"spec":{"parallelism":3}}')
    cluster.kubectl(
        "patch",
        "job",
        "patched",
        "--type",
        "json",
        "-p",
        '[{"op":"replace","path":"/spec/backoffLimit","value":2}]',
    )
    cluster.kubectl(
        "patch", "job", "patched", "--type", "strategic", "-p", '{"metadata":{"annotations":{"team":"a"}}}'
    )
    job = json.loads(cluster.kubectl("get", "job", "patched", "-o", "json").stdout)
    assert job["metadata"]["labels"]["tier"] == "batch"
    assert job["spec"]["parallelism"] == 3
    assert job["spec"]["backoffLimit"] == 2
    assert job["metadata"]["annotations"]["team"] == "a"
    invalid = cluster.kubectl(
        "patch", "job", "patched", "--type", "merge", "-p", '{"spec":{"completions":7}}', check=False
    )
    assert invalid.returncode == 1
    assert "spec.completions: Invalid value: 7: field is immutable" in invalid.stderr


def test_get_watch_sees_an_update(cluster: Cluster) -> None:
    cluster.kubectl("create", "-f", "-", stdin=JOB.format(name="watched"))
    kubectl = shutil.which("kubectl")
    assert kubectl is not None
    with subprocess.Popen(
        [
            kubectl,
            "--kubeconfig",
            str(cluster.kubeconfig),
            "get",
            "jobs",
            "watched",
            "-w",
            "--output-watch-events",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as watch:
        try:
            assert watch.stdout is not None
            header = watch.stdout.readline()
            assert header.split()[:3] == ["EVENT", "NAME", "STATUS"]
            first = watch.stdout.readline()
            assert "watched" in first and "ADDED" in first
            cluster.kubectl("label", "job", "watched", "seen=yes")
            second = watch.stdout.readline()
            assert "MODIFIED" in second and "watched" in second
        finally:
            watch.kill()


def test_namespaces_and_contexts(cluster: Cluster) -> None:
    namespaces = cluster.kubectl("get", "ns").stdout
    assert namespaces.splitlines()[0].split() == ["NAME", "STATUS", "AGE"]
    assert "default" in namespaces and "kube-system" in namespaces
    cluster.kubectl("create", "-f", "-", stdin="apiVersion: v1\nkind: Namespace\nmetadata: {name: team-a}\n")
    cluster.kubectl("create", "-n", "team-a", "-f", "-", stdin=JOB.format(name="in-team-a"))
    assert "in-team-a" in cluster.kubectl("get", "jobs", "-A").stdout
    cluster.kubectl("delete", "namespace", "team-a", "--wait=true", "--timeout=30s")
    assert cluster.kubectl("get", "ns", "team-a", check=False).returncode == 1


def test_explain_and_api_resources(cluster: Cluster) -> None:
    explained = cluster.kubectl("explain", "jobs.spec.backoffLimit").stdout
    assert "backoffLimit" in explained
    resources = cluster.kubectl("api-resources").stdout
    assert any(line.split()[:1] == ["cronjobs"] and "cj" in line.split() for line in resources.splitlines())


def test_server_side_validation_errors_read_like_upstream(cluster: Cluster) -> None:
    bad = JOB.format(name="bad").replace("restartPolicy: Never", "restartPolicy: Always")
    result = cluster.kubectl("create", "-f", "-", stdin=bad, check=False)
    assert result.returncode == 1
    assert 'The Job "bad" is invalid' in result.stderr
    assert "spec.template.spec.restartPolicy" in result.stderr


def test_the_deploy_manifests_apply_here(cluster: Cluster) -> None:
    """deploy/ is what admins apply to a real management cluster; the local one takes it too (stored, not run)."""
    deploy = Path(__file__).resolve().parents[2] / "deploy"
    dry = cluster.kubectl("apply", "--dry-run=client", "-k", str(deploy)).stdout.splitlines()
    assert len(dry) == 9 and all(line.endswith("created (dry run)") for line in dry), dry
    cluster.kubectl("apply", "-k", str(deploy))
    again = cluster.kubectl("apply", "-k", str(deploy)).stdout.splitlines()
    assert all(line.endswith("unchanged") for line in again), again
    replicas = cluster.kubectl(
        "-n",
        "multiqueue-system",
        "get",
        "deployment",
        "multiqueue-manager",
        "-o",
        "jsonpath={.spec.replicas}",
    )
    assert replicas.stdout == "2"
    cluster.kubectl("delete", "-k", str(deploy), "--wait=false", "--ignore-not-found")


def test_imperative_generators_work(cluster: Cluster) -> None:
    """kubectl 1.32 and newer send these objects in protobuf; older ones in JSON. Either way they are stored."""
    cluster.kubectl("create", "namespace", "imperative")
    cluster.kubectl("-n", "imperative", "create", "secret", "generic", "pw", "--from-literal=password=s3cret")
    cluster.kubectl(
        "-n", "imperative", "create", "cronjob", "hourly", "--image=busybox", "--schedule=0 * * * *"
    )
    cluster.kubectl("-n", "imperative", "create", "job", "now", "--from=cronjob/hourly")
    secret = json.loads(cluster.kubectl("-n", "imperative", "get", "secret", "pw", "-o", "json").stdout)
    assert secret["data"] == {"password": "czNjcmV0"} and secret["type"] == "Opaque"
    job = json.loads(cluster.kubectl("-n", "imperative", "get", "job", "now", "-o", "json").stdout)
    assert [o["name"] for o in job["metadata"]["ownerReferences"]] == ["hourly"]
    assert job["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 30
    assert cluster.kubectl("auth", "can-i", "create", "jobs").stdout.strip() == "yes"
    assert "system:masters" in cluster.kubectl("auth", "whoami").stdout
    cluster.kubectl("delete", "namespace", "imperative", "--wait=false")
