"""Kueue as the MultiKueue bench runs it, rendered from its inputs alone: the manager's Configuration, the webhook
configurations pointed at a manager on loopback, the queues of a worker and of the management cluster, and the
command line that starts a manager. No I/O here but reading the pinned version and the built assets' directory."""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "kueue-system"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
FLAVOR, CLUSTER_QUEUE, LOCAL_QUEUE = "default-flavor", "cluster-queue", "user-queue"
ADMISSION_CHECK, MULTIKUEUE_CONFIG = "multikueue", "multikueue"
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
ALL_AT_ONCE = "kueue.x-k8s.io/multikueue-dispatcher-all-at-once"
# What the release's own manager config (config/components/manager/controller_manager_config.yaml) gives the
# controllers this bench uses; controller-runtime's default is 1.
GROUP_KIND_CONCURRENCY = {
    "Job.batch": 5,
    "Workload.kueue.x-k8s.io": 5,
    "LocalQueue.kueue.x-k8s.io": 1,
    "ClusterQueue.kueue.x-k8s.io": 1,
    "ResourceFlavor.kueue.x-k8s.io": 1,
}
# The webhooks a manager with only the batch/job integration serves: the rest of the release's list would send
# pods, Deployments and other kinds to paths nobody answers.
SERVED_GROUPS = frozenset({"batch", "kueue.x-k8s.io"})
# Where v0.17.0 reads its metrics server's certificate when internalCertManagement is off; no setting moves it.
METRICS_CERT_DIR = "/etc/kueue/metrics/certs"


def pinned_version(go_mod: Path = REPO / "hack" / "kueue" / "go.mod") -> str:
    """The Kueue version hack/kueue/go.mod pins (the one hack/build-kueue.sh builds)."""
    found = re.search(r"^\s*(?:require\s+)?sigs\.k8s\.io/kueue\s+(v\S+)", go_mod.read_text(), re.MULTILINE)
    if found is None:
        raise ValueError(f"{go_mod} pins no sigs.k8s.io/kueue")
    return found.group(1)


def assets_dir(version: str, environ: Mapping[str, str] = os.environ) -> Path:
    """Where hack/build-kueue.sh put that version: MULTIQUEUE_KUEUE_ASSETS, else its cache."""
    if environ.get("MULTIQUEUE_KUEUE_ASSETS"):
        return Path(environ["MULTIQUEUE_KUEUE_ASSETS"])
    cache = environ.get("MULTIQUEUE_KUEUE_CACHE") or str(Path.home() / ".cache" / "multiqueue" / "kueue")
    return Path(cache) / version


def missing_assets(assets: Path) -> str | None:
    """Why ``assets`` cannot run the bench, or None."""
    wanted = [assets / "kueue", assets / "webhooks.yaml", assets / "crds"]
    absent = [str(p) for p in wanted if not p.exists()]
    if absent:
        return f"Kueue is not built ({', '.join(absent)} missing): run hack/build-kueue.sh"
    return None


def configuration(
    *, webhook_port: int, cert_dir: Path, metrics_port: int, health_port: int, qps: float, burst: int
) -> dict[str, Any]:
    """A manager's Configuration: one instance (no election), Jobs only when they name a queue, webhooks served
    with our certificate on loopback, MultiKueue dispatching to every worker at once."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "manageJobsWithoutQueueName": False,
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
        "metrics": {"bindAddress": f"127.0.0.1:{metrics_port}"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "clientConnection": {"qps": qps, "burst": burst},
        "controller": {"groupKindConcurrency": dict(GROUP_KIND_CONCURRENCY)},
        "integrations": {"frameworks": ["batch/job"]},
        "multiKueue": {"dispatcherName": ALL_AT_ONCE},
        # The visibility API is an aggregated API server of its own, which no dispatch needs.
        "featureGates": {"VisibilityOnDemand": False},
    }


def _served(webhook: dict[str, Any]) -> bool:
    return all(g in SERVED_GROUPS for rule in webhook.get("rules", []) for g in rule.get("apiGroups", []))


def webhook_configurations(
    manifests: list[dict[str, Any]], port: int, ca_bundle: bytes
) -> list[dict[str, Any]]:
    """The release's webhook configurations, each webhook the manager serves called at
    ``https://127.0.0.1:<port><path>`` and trusting ``ca_bundle`` (PEM); the others left out."""
    rendered = []
    for manifest in manifests:
        kind = manifest["kind"]
        webhooks = []
        for webhook in manifest.get("webhooks", []):
            if not _served(webhook):
                continue
            path = webhook["clientConfig"]["service"]["path"]
            webhooks.append(
                {
                    **webhook,
                    "clientConfig": {
                        "url": f"https://127.0.0.1:{port}{path}",
                        "caBundle": base64.b64encode(ca_bundle).decode(),
                    },
                }
            )
        prefix = "mutating" if kind == "MutatingWebhookConfiguration" else "validating"
        rendered.append(
            {
                "apiVersion": manifest["apiVersion"],
                "kind": kind,
                "metadata": {"name": f"kueue-{prefix}-webhook-configuration"},
                "webhooks": webhooks,
            }
        )
    return rendered


def _cluster_queue(jobs: int, admission_check: str | None) -> dict[str, Any]:
    quota = str(max(jobs, 1) * 2)
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory", "pods"],
                "flavors": [
                    {
                        "name": FLAVOR,
                        "resources": [
                            {"name": "cpu", "nominalQuota": quota},
                            {"name": "memory", "nominalQuota": f"{quota}Gi"},
                            {"name": "pods", "nominalQuota": quota},
                        ],
                    }
                ],
            }
        ],
    }
    if admission_check is not None:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": admission_check}]}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": CLUSTER_QUEUE},
        "spec": spec,
    }


def queues(jobs: int, namespace: str, admission_check: str | None = None) -> list[dict[str, Any]]:
    """A ResourceFlavor, a ClusterQueue with room for every Job at once (behind ``admission_check`` if given) and
    the LocalQueue of ``namespace`` that the Jobs name."""
    return [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}},
        _cluster_queue(jobs, admission_check),
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": LOCAL_QUEUE, "namespace": namespace},
            "spec": {"clusterQueue": CLUSTER_QUEUE},
        },
    ]


def multikueue(workers: Mapping[str, bytes]) -> list[dict[str, Any]]:
    """The management cluster's MultiKueue: each worker's kubeconfig in a Secret of Kueue's namespace, a
    MultiKueueCluster per worker, a MultiKueueConfig naming them and the AdmissionCheck that uses it."""
    objects: list[dict[str, Any]] = []
    for name, kubeconfig in workers.items():
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": f"{name}-kubeconfig", "namespace": NAMESPACE},
                "data": {"kubeconfig": base64.b64encode(kubeconfig).decode()},
            }
        )
        objects.append(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "MultiKueueCluster",
                "metadata": {"name": name},
                "spec": {
                    "clusterSource": {
                        "kubeConfig": {"locationType": "Secret", "location": f"{name}-kubeconfig"}
                    }
                },
            }
        )
    objects.append(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "MultiKueueConfig",
            "metadata": {"name": MULTIKUEUE_CONFIG},
            "spec": {"clusters": list(workers)},
        }
    )
    objects.append(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "AdmissionCheck",
            "metadata": {"name": ADMISSION_CHECK},
            "spec": {
                "controllerName": MULTIKUEUE_CONTROLLER,
                "parameters": {
                    "apiGroup": "kueue.x-k8s.io",
                    "kind": "MultiKueueConfig",
                    "name": MULTIKUEUE_CONFIG,
                },
            },
        }
    )
    return objects


def job(name: str) -> dict[str, Any]:
    """The dispatch bench's one-pod Job, handed to Kueue by its queue label instead of a managedBy."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {QUEUE_LABEL: LOCAL_QUEUE}},
        "spec": {
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}
            },
        },
    }


def command(
    binary: Path, config: Path, metrics_cert_dir: Path, scratch: Path, name: str, as_root: bool
) -> list[str]:
    """The manager in a mount namespace of its own, in which an overlay on /etc (its writes in a tmpfs on the empty
    folder ``scratch``) holds ``metrics_cert_dir``'s tls.crt and tls.key where v0.17.0 reads them
    (:data:`METRICS_CERT_DIR`); the machine's /etc is untouched. The process runs as ``name`` (its argv[0]), which
    its client-go clients put first in their User-Agent (its own client says ``kueue/<version>``): how the audit log
    tells the management cluster's manager's calls on a worker from the worker's own manager's. Not root: a user
    namespace maps this user to root in it."""
    script = (
        'set -eu; mount -t tmpfs tmpfs "$1"; mkdir "$1/upper" "$1/work"; '
        'mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1/upper,workdir=$1/work" /etc; '
        f'mkdir -p {METRICS_CERT_DIR}; cp "$2/tls.crt" "$2/tls.key" {METRICS_CERT_DIR}/; '
        'name=$3; binary=$4; shift 4; exec -a "$name" "$binary" "$@"'
    )
    namespace = ["unshare", "--mount", "--propagation", "private"]
    if not as_root:
        namespace += ["--user", "--map-root-user"]
    return [
        *namespace,
        "bash",
        "-c",
        script,
        "kueue-manager",
        str(scratch),
        str(metrics_cert_dir),
        name,
        str(binary),
        f"--config={config}",
    ]


def audit_policy() -> dict[str, Any]:
    """Every request at Metadata level (who, what, which object; no bodies), once it is answered (a watch: once
    it starts)."""
    return {
        "apiVersion": "audit.k8s.io/v1",
        "kind": "Policy",
        "omitStages": ["RequestReceived"],
        "rules": [{"level": "Metadata"}],
    }


def audit_arguments(policy: Path, log: Path) -> list[str]:
    return [
        f"--audit-policy-file={policy}",
        f"--audit-log-path={log}",
        "--audit-log-format=json",
        "--audit-log-maxsize=0",
    ]
