"""Workers registered at runtime: Secrets labelled ``multiqueue.dev/cluster=<name>`` in the manager's namespace.

A Secret carries the worker's kubeconfig under the key ``kubeconfig`` and, optionally, its labels and capacity as
JSON in the annotations ``multiqueue.dev/labels`` and ``multiqueue.dev/capacity``. Reading a Secret is a pure
step (:func:`worker_from_secret`) so every refusal is tested without a cluster; the manager acts on the result.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import json
from typing import Any, Final

import yaml
from pydantic import ValidationError

from multiqueue.api.meta import annotations_of, as_dict, dns1123_label_errors, labels_of
from multiqueue.api.quantities import parse_quantity
from multiqueue.api.types import Obj
from multiqueue.dispatch.config import Capacity
from multiqueue.dispatch.mirror import CLUSTER_LABEL
from multiqueue.dispatch.workers import WorkerSettings
from multiqueue.kube.config import unsafe_kubeconfig_reason

KUBECONFIG_KEY: Final = "kubeconfig"
LABELS_ANNOTATION: Final = "multiqueue.dev/labels"
CAPACITY_ANNOTATION: Final = "multiqueue.dev/capacity"


class WorkerSecretError(Exception):
    """Why a Secret does not make a worker; ``reason`` is the CamelCase word shown on Events and metrics."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclasses.dataclass(frozen=True)
class SecretWorker:
    name: str
    kubeconfig: dict[str, Any]
    settings: WorkerSettings
    fingerprint: str  # changes whenever anything the worker is made from changes


def settings_of(labels: dict[str, str], capacity: Capacity) -> WorkerSettings:
    """What placement needs of a worker, from its labels and configured capacity."""
    quota = {name: parse_quantity(value) or 0.0 for name, value in capacity.resources.items()}
    return WorkerSettings(dict(labels), capacity.max_jobs, quota, from_nodes=capacity.from_nodes)


def worker_from_secret(secret: Obj, *, allow_unsafe: bool) -> SecretWorker:
    """The worker a Secret describes, or :class:`WorkerSecretError` saying what is wrong with it."""
    name = labels_of(secret).get(CLUSTER_LABEL, "")
    problems = dns1123_label_errors(name)
    if problems:
        raise WorkerSecretError("InvalidWorkerName", f"label {CLUSTER_LABEL}={name!r}: {problems[0]}")
    encoded = as_dict(secret.get("data")).get(KUBECONFIG_KEY)
    plain = as_dict(secret.get("stringData")).get(KUBECONFIG_KEY)
    if not encoded and not plain:
        raise WorkerSecretError("BadKubeConfig", f"the Secret has no {KUBECONFIG_KEY!r} key")
    try:
        text = plain if isinstance(plain, str) else base64.b64decode(str(encoded), validate=True).decode()
        kubeconfig = yaml.safe_load(text)
    except (binascii.Error, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise WorkerSecretError(
            "BadKubeConfig", f"key {KUBECONFIG_KEY!r} is not a kubeconfig: {exc}"
        ) from exc
    if not isinstance(kubeconfig, dict):
        raise WorkerSecretError("BadKubeConfig", f"key {KUBECONFIG_KEY!r} is not a kubeconfig")
    if not allow_unsafe:
        unsafe = unsafe_kubeconfig_reason(kubeconfig)
        if unsafe is not None:
            raise WorkerSecretError(
                "BadKubeConfig",
                f"{unsafe}; not allowed unless workerSecrets.allowInsecureKubeconfigs is true",
            )
    annotations = annotations_of(secret)
    labels = _json_annotation(annotations, LABELS_ANNOTATION)
    if not all(isinstance(v, str) for v in labels.values()):
        raise WorkerSecretError(
            "InvalidWorkerLabels", f"annotation {LABELS_ANNOTATION}: values must be strings"
        )
    try:
        capacity = Capacity.model_validate(_json_annotation(annotations, CAPACITY_ANNOTATION))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise WorkerSecretError(
            "InvalidWorkerCapacity", f"annotation {CAPACITY_ANNOTATION}: {where}: {first['msg']}"
        ) from exc
    fingerprint = hashlib.sha256(
        json.dumps([kubeconfig, labels, capacity.model_dump()], sort_keys=True, default=str).encode()
    ).hexdigest()
    return SecretWorker(name, kubeconfig, settings_of(labels, capacity), fingerprint)


def _json_annotation(annotations: dict[str, str], key: str) -> dict[str, Any]:
    text = annotations.get(key)
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise WorkerSecretError("InvalidWorkerAnnotation", f"annotation {key} is not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise WorkerSecretError("InvalidWorkerAnnotation", f"annotation {key} must be a JSON object")
    return value
