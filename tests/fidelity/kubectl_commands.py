"""The everyday kubectl commands of the matrix, in the order a user would type them in one namespace.

Each command runs with every kubectl version the machine has, against the embedded and the upstream cluster. A
command passes when kubectl exits with one of its ``ok`` codes (``kubectl diff`` exits 1 when it finds a
difference, which is an answer, not a failure). The objects that commands read are made beforehand through the
API (:func:`setup_objects`), so one command that fails does not take the ones after it down with it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Final

import yaml


@dataclasses.dataclass(frozen=True)
class Command:
    id: str
    args: tuple[str, ...]
    stdin: str | None = None
    ok: frozenset[int] = frozenset({0})
    env: tuple[tuple[str, str], ...] = ()


CONFIGMAP: Final = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: base
  labels: {app: matrix}
data:
  greeting: hello
"""

CONFIGMAP_CHANGED: Final = CONFIGMAP.replace("hello", "hello again")

JOB: Final = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: applied
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox
        command: ["sh", "-c", "echo ran from a file"]
"""

SERVICE: Final = """\
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports:
  - port: 80
    targetPort: 8080
"""


def _c(id: str, *args: str, stdin: str | None = None, ok: tuple[int, ...] = (0,), **env: str) -> Command:
    return Command(id, args, stdin, frozenset(ok), tuple(env.items()))


def setup_objects() -> list[dict[str, Any]]:
    """What the commands find in their namespace before the first one runs (made through the API)."""
    job = yaml.safe_load(JOB)
    job["metadata"]["name"] = "base"
    cronjob = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "nightly"},
        "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": job["spec"]}},
    }
    return [yaml.safe_load(CONFIGMAP), job, cronjob]


def commands(namespace: str) -> list[Command]:
    """The matrix for one kubectl version, in ``namespace`` (made beforehand with :func:`setup_objects`)."""
    n = ("-n", namespace)
    return [
        _c("version", "version"),
        _c("cluster-info", "cluster-info"),
        _c("api-versions", "api-versions"),
        _c("api-resources", "api-resources"),
        _c("get-raw-version", "get", "--raw", "/version"),
        _c("get-nodes", "get", "nodes"),
        _c("get-nodes-wide", "get", "nodes", "-o", "wide"),
        _c("create-namespace", "create", "namespace", f"{namespace}-made"),
        _c("auth-can-i", "auth", "can-i", "create", "jobs", *n),
        _c("auth-whoami", "auth", "whoami"),
        _c("create-configmap", "create", "configmap", "literal", "--from-literal=a=b", *n),
        _c("create-secret", "create", "secret", "generic", "literal", "--from-literal=password=s3cret", *n),
        _c("create-serviceaccount", "create", "serviceaccount", "runner", *n),
        _c("create-job", "create", "job", "imperative", "--image=busybox", *n, "--", "sh", "-c", "echo hi"),
        _c("create-cronjob", "create", "cronjob", "hourly", "--image=busybox", "--schedule=0 * * * *", *n, "--", "true"),
        _c("create-job-from-cronjob", "create", "job", "manual", "--from=cronjob/nightly", *n),
        _c("create-f", "create", "-f", "-", *n, stdin=CONFIGMAP.replace("name: base", "name: from-file")),
        _c("create-f-exists", "create", "-f", "-", *n, stdin=CONFIGMAP, ok=(1,)),
        _c("create-dry-run-server", "create", "-f", "-", "--dry-run=server", *n, stdin=JOB),
        _c("apply-f", "apply", "-f", "-", *n, stdin=JOB),
        _c("apply-f-again", "apply", "-f", "-", *n, stdin=JOB),
        _c("apply-service", "apply", "-f", "-", *n, stdin=SERVICE),
        _c("apply-server-side", "apply", "--server-side", "--force-conflicts", "-f", "-", *n, stdin=CONFIGMAP_CHANGED),
        _c("diff-unchanged", "diff", "-f", "-", *n, stdin=CONFIGMAP_CHANGED, ok=(0,)),
        _c("diff-changed", "diff", "-f", "-", *n, stdin=CONFIGMAP, ok=(1,)),
        _c("replace-f", "replace", "-f", "-", *n, stdin=CONFIGMAP),
        _c("get-configmaps", "get", "configmaps", *n),
        _c("get-yaml", "get", "configmap", "base", "-o", "yaml", *n),
        _c("get-json", "get", "configmap", "base", "-o", "json", *n),
        _c("get-name", "get", "configmaps", "-o", "name", *n),
        _c("get-wide", "get", "jobs", "-o", "wide", *n),
        _c("get-jsonpath", "get", "configmap", "base", "-o", "jsonpath={.data.greeting}", *n),
        _c("get-custom-columns", "get", "jobs", "-o", "custom-columns=NAME:.metadata.name,DONE:.status.succeeded", *n),
        _c("get-label-selector", "get", "configmaps", "-l", "app=matrix", *n),
        _c("get-field-selector", "get", "pods", "--field-selector=status.phase!=Unknown", *n),
        _c("get-show-labels", "get", "configmaps", "--show-labels", *n),
        _c("get-sort-by", "get", "configmaps", "--sort-by=.metadata.name", *n),
        _c("get-missing", "get", "configmap", "absent", *n, ok=(1,)),
        _c("get-multiple-kinds", "get", "jobs,cronjobs,configmaps", *n),
        _c("get-all-namespaces", "get", "jobs", "-A"),
        _c("get-chunked", "get", "configmaps", "--chunk-size=1", *n),
        _c("label", "label", "configmap", "base", "tier=test", *n),
        _c("label-overwrite", "label", "configmap", "base", "tier=prod", "--overwrite", *n),
        _c("annotate", "annotate", "configmap", "base", "note=kept", *n),
        _c("patch-merge", "patch", "configmap", "base", "--type=merge", "-p", '{"data":{"c":"d"}}', *n),
        _c("patch-json", "patch", "configmap", "base", "--type=json", "-p", '[{"op":"add","path":"/data/e","value":"f"}]', *n),
        _c("patch-strategic", "patch", "configmap", "base", "-p", '{"data":{"g":"h"}}', *n),
        _c("edit-unchanged", "edit", "configmap", "base", *n, KUBE_EDITOR="true", EDITOR="true"),
        _c("set-env", "set", "env", "cronjob/nightly", "MODE=test", *n),
        _c("suspend-cronjob", "patch", "cronjob", "nightly", "-p", '{"spec":{"suspend":true}}', *n),
        _c("describe-job", "describe", "job", "base", *n),
        _c("describe-configmap", "describe", "configmap", "base", *n),
        _c("describe-cronjob", "describe", "cronjob", "nightly", *n),
        _c("describe-node", "describe", "nodes"),
        _c("explain-job", "explain", "job"),
        _c("explain-job-spec", "explain", "job.spec.podFailurePolicy"),
        _c("explain-recursive", "explain", "cronjob.spec", "--recursive"),
        _c("wait-complete", "wait", "--for=condition=complete", "job/base", "--timeout=90s", *n),
        _c("logs-job", "logs", "job/base", *n),
        _c("logs-options", "logs", "job/base", "--tail=1", "--timestamps", "--limit-bytes=40", *n),
        _c("logs-since-container", "logs", "job/base", "--since=1h", "-c", "main", *n),
        _c("logs-previous", "logs", "job/base", "-p", *n, ok=(1,)),
        _c("get-events", "get", "events", *n),
        _c("events", "events", *n),
        _c("get-pods", "get", "pods", *n),
        _c("get-pods-wide", "get", "pods", "-o", "wide", *n),
        _c("delete-dry-run-server", "delete", "configmap", "base", "--dry-run=server", *n),
        _c("get-after-dry-run", "get", "configmap", "base", *n),
        _c("delete-configmap", "delete", "configmap", "base", *n),
        _c("delete-by-label", "delete", "configmaps", "-l", "app=matrix", *n),
        _c("delete-job-orphan", "delete", "job", "base", "--cascade=orphan", *n),
        _c("delete-wait", "delete", "cronjob", "nightly", "--wait=true", "--timeout=60s", *n),
        _c("delete-missing", "delete", "configmap", "absent", *n, ok=(1,)),
        _c("delete-missing-ignored", "delete", "configmap", "absent", "--ignore-not-found", *n),
        _c("delete-namespace", "delete", "namespace", namespace, "--wait=false"),
    ]  # fmt: skip
