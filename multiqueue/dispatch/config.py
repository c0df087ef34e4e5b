"""The manager's configuration file: the management cluster, the workers, and how Jobs are placed."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, TypeVar

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from multiqueue.api.meta import dns1123_label_errors
from multiqueue.api.quantities import parse_quantity

M = TypeVar("M", bound=BaseModel)


def _dns_label(value: str) -> str:
    problems = dns1123_label_errors(value)
    if problems:
        raise ValueError(problems[0])
    return value


# Cluster names become context names, label values and node names: DNS-1123 labels.
ClusterName = Annotated[str, AfterValidator(_dns_label)]


def first_duplicate(names: list[str]) -> str | None:
    """The first name that occurs twice, in sorted order, or None."""
    duplicates = sorted({n for n in names if names.count(n) > 1})
    return duplicates[0] if duplicates else None


class ConfigError(Exception):
    """A configuration problem, phrased as one line that names the field."""


class ClusterRef(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    # No kubeconfig: the pod's service account (the manager runs in the management cluster).
    kubeconfig: Path | None = None
    context: str | None = None
    # Only for test clusters: accept kubeconfigs that turn certificate checks off.
    allow_insecure: bool = Field(False, alias="allowInsecure")


class Capacity(BaseModel):
    """How much a worker takes from this manager: a number of Jobs and/or resource quotas (cpu, memory,
    nvidia.com/gpu, ...), counted from the pods' requests times their parallelism."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    max_jobs: Annotated[int | None, Field(ge=0, alias="maxJobs")] = None
    resources: dict[str, str] = Field(default_factory=dict)

    @field_validator("resources")
    @classmethod
    def _quantities(cls, resources: dict[str, str]) -> dict[str, str]:
        for name, value in resources.items():
            if parse_quantity(value) is None:
                raise ValueError(f"{name}: {value!r} is not a quantity")
        return resources


class WorkerConfig(ClusterRef):
    name: ClusterName
    kubeconfig: Path  # a worker is always reached through a kubeconfig
    labels: dict[str, str] = Field(default_factory=dict)
    capacity: Capacity = Field(default_factory=lambda: Capacity.model_validate({}))


class LeaderElectionConfig(BaseModel):
    """Several replicas may run; only the holder of this Lease dispatches."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    enabled: bool = False
    # Default: the manager's namespace.
    namespace: str | None = None
    lease_name: str = Field("multiqueue-manager", alias="leaseName")
    lease_duration: Annotated[float, Field(gt=0, alias="leaseDurationSeconds")] = 15.0
    renew_deadline: Annotated[float, Field(gt=0, alias="renewDeadlineSeconds")] = 10.0
    retry_period: Annotated[float, Field(gt=0, alias="retryPeriodSeconds")] = 2.0


class WorkerSecretsConfig(BaseModel):
    """Workers added at runtime by Secrets labelled ``multiqueue.dev/cluster=<name>`` in the manager's namespace."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    enabled: bool = True
    # Kubeconfigs in Secrets may not point at local files or run exec plugins, since whoever can write a Secret
    # would then choose what the manager reads or runs; allow them only where that is intended.
    allow_insecure_kubeconfigs: bool = Field(False, alias="allowInsecureKubeconfigs")


def _jobs_only() -> list[Literal["Job", "JobGroup"]]:
    return ["Job"]


class ManagerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    # The value of the multiqueue.dev/origin label on every mirror this manager makes.
    name: str = "multiqueue"
    managed_by: str = Field("multiqueue.dev/dispatcher", alias="managedBy")
    # The manager's own namespace: its Lease and the Secrets of live workers are here.
    namespace: str = "multiqueue-system"
    management: ClusterRef
    # Workers from the config file; more may come from Secrets (``workerSecrets``).
    workers: list[WorkerConfig] = Field(default_factory=list)
    placement: Literal["LeastLoaded", "RoundRobin", "Ordered"] = "LeastLoaded"
    # How often mirrors whose user Job is gone (or was re-created) are looked for and deleted.
    gc_interval: Annotated[float, Field(gt=0, alias="gcInterval")] = 60.0
    # A worker unreachable for longer than this (seconds) has its unfinished Jobs run elsewhere.
    worker_lost_timeout: Annotated[float, Field(gt=0, alias="workerLostTimeout")] = 900.0
    worker_secrets: WorkerSecretsConfig = Field(
        default_factory=lambda: WorkerSecretsConfig.model_validate({}), alias="workerSecrets"
    )
    # Namespaces of the management cluster whose Jobs are dispatched; empty means all.
    namespaces: list[str] = Field(default_factory=list)
    # The kinds to dispatch; each needs its adapter (multiqueue/dispatch/kinds.py) and, for custom kinds, the CRD
    # installed on every cluster.
    kinds: Annotated[list[Literal["Job", "JobGroup"]], Field(min_length=1)] = Field(
        default_factory=lambda: _jobs_only()
    )
    embedded_controllers: list[Literal["job", "cronjob"]] = Field(
        default_factory=list, alias="embeddedControllers"
    )
    metrics_address: str = Field("127.0.0.1:8080", alias="metricsAddress")
    leader_election: LeaderElectionConfig = Field(
        default_factory=lambda: LeaderElectionConfig.model_validate({}), alias="leaderElection"
    )

    @field_validator("workers")
    @classmethod
    def _unique(cls, workers: list[WorkerConfig]) -> list[WorkerConfig]:
        duplicate = first_duplicate([w.name for w in workers])
        if duplicate is not None:
            raise ValueError(f"duplicate worker name {duplicate!r}")
        return workers

    @model_validator(mode="after")
    def _some_workers(self) -> ManagerConfig:
        if not self.workers and not self.worker_secrets.enabled:
            raise ValueError("no workers: list some under workers, or enable workerSecrets")
        return self

    @property
    def lease_namespace(self) -> str:
        return self.leader_election.namespace or self.namespace


def load_model(path: Path, model: type[M]) -> M:
    """Read a YAML file into a pydantic model; every problem is a :class:`ConfigError` naming the field."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"config {path} is not valid YAML: {str(exc).splitlines()[0]}") from exc
    try:
        return model.model_validate(data if data is not None else {})
    except ValidationError as exc:
        first = exc.errors()[0]
        location = ".".join(str(part) for part in first["loc"]) or "(top level)"
        raise ConfigError(f"config {path}: {location}: {first['msg']}") from exc


def load_manager_config(path: Path) -> ManagerConfig:
    config = load_model(path, ManagerConfig)
    for ref in (config.management, *config.workers):
        if ref.kubeconfig is not None and not ref.kubeconfig.is_absolute():
            ref.kubeconfig = path.parent / ref.kubeconfig
    return config
