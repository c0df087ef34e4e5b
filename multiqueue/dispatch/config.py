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
    Strict,
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
    """How to reach a cluster."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    kubeconfig: Path | None = Field(
        None,
        description="Path of a kubeconfig file (relative to the config file). None for the management "
        "cluster: the pod's service account, when the manager runs in that cluster.",
    )
    context: str | None = Field(None, description="Context in the kubeconfig; default: its current context.")
    allow_insecure: bool = Field(
        False,
        alias="allowInsecure",
        description="Accept a kubeconfig that turns certificate checks off (test clusters only).",
    )


class Capacity(BaseModel):
    """How much a worker takes from this manager, counted from the pods' requests times their parallelism; with
    ``fromNodes``, also what its Nodes have left."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    max_jobs: Annotated[int | None, Field(ge=0, alias="maxJobs")] = Field(
        None, description="Most unfinished Jobs at once; none: no limit."
    )
    resources: dict[str, str] = Field(
        default_factory=dict,
        description="Quota per resource name (cpu, memory, nvidia.com/gpu, ...), as Kubernetes quantities.",
    )

    from_nodes: Annotated[bool, Strict()] = Field(
        False,
        alias="fromNodes",
        description="Also read capacity from the worker's Nodes: the allocatable of those that are Ready and not "
        "cordoned, less the requests of every unfinished pod on them or not yet bound, whoever made it. Each "
        "resource takes the smaller of that and its quota. Needs list and watch on nodes and pods there.",
    )

    @field_validator("resources")
    @classmethod
    def _quantities(cls, resources: dict[str, str]) -> dict[str, str]:
        for name, value in resources.items():
            if parse_quantity(value) is None:
                raise ValueError(f"{name}: {value!r} is not a quantity")
        return resources


class WorkerConfig(ClusterRef):
    """A worker cluster listed in the config file."""

    name: ClusterName = Field(description="The worker's name: the value of the multiqueue.dev/cluster label.")
    kubeconfig: Path = Field(
        description="Path of the worker's kubeconfig file (relative to the config file)."
    )
    labels: dict[str, str] = Field(
        default_factory=dict, description="Labels Jobs select workers by (multiqueue.dev/cluster-selector)."
    )
    capacity: Capacity = Field(
        default_factory=lambda: Capacity.model_validate({}),
        description="What the worker takes; none: no limit.",
    )


class WorkerSecretsConfig(BaseModel):
    """Workers added at runtime by Secrets labelled ``multiqueue.dev/cluster=<name>`` in the manager's namespace."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    enabled: bool = Field(True, description="Watch the manager's namespace for worker Secrets.")
    # Whoever can write such a Secret would choose what the manager reads from its disk or runs.
    allow_insecure_kubeconfigs: bool = Field(
        False,
        alias="allowInsecureKubeconfigs",
        description="Accept Secret kubeconfigs that name local files or run credential plugins.",
    )


class ClientConfig(BaseModel):
    """How fast the manager may talk to each cluster: every cluster (the management cluster and each worker) has a
    token bucket of its own, shared by everything the manager sends it, so a busy worker never slows another."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    qps: Annotated[float, Field(gt=0)] = Field(
        200.0, description="Requests per second to one cluster, sustained (client-go's QPS)."
    )
    burst: Annotated[int, Field(ge=1)] = Field(
        400, description="Requests to one cluster that may go at once above that rate (client-go's Burst)."
    )


class DashboardConfig(BaseModel):
    """A read-only web page of workers and Jobs, served by the manager. It is never open without a secret: the URL
    the manager prints carries a token, which the browser trades for a session cookie."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    enabled: bool = Field(False, description="Serve the dashboard.")
    address: str = Field(
        "127.0.0.1:8081",
        description="host:port it listens on; loopback unless you mean to share it (port 0: any).",
    )


class LeaderElectionConfig(BaseModel):
    """Several replicas may run; only the holder of this Lease dispatches and runs the embedded controllers."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    enabled: bool = Field(False, description="Take part in leader election (run two or more replicas).")
    namespace: str | None = Field(
        None, description="Namespace of the Lease; default: the manager's namespace."
    )
    lease_name: str = Field("multiqueue-manager", alias="leaseName", description="Name of the Lease.")
    lease_duration: Annotated[float, Field(gt=0, alias="leaseDurationSeconds")] = Field(
        15.0, description="How long a Lease holds without renewal: the longest a takeover waits."
    )
    renew_deadline: Annotated[float, Field(gt=0, alias="renewDeadlineSeconds")] = Field(
        10.0, description="How long the leader keeps trying to renew before it stops leading."
    )
    retry_period: Annotated[float, Field(gt=0, alias="retryPeriodSeconds")] = Field(
        2.0, description="How often replicas try to acquire or renew the Lease."
    )


Kind = Literal["Job", "JobGroup", "JobSet"]  # a kind the dispatcher has an adapter for (dispatch/adapters)
# A dotted path into an object, ``[]`` after a key stepping into every item of that list: status.items[].active.
FieldPath = Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]+(\[\])?(\.[A-Za-z0-9_-]+(\[\])?)*$")]


class DeclaredKind(BaseModel):
    """A job-like kind dispatched with no code of its own: its controller must honour spec.managedBy (or the field
    ``managedBy`` names). Every path has JobSet's default, so a kind shaped like JobSet names only where it lives."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    group: str = Field(description="API group of the kind's CRD.")
    version: str = Field(description="The version to read and write it in.")
    kind: str = Field(description="Its kind, as in manifests.")
    plural: str = Field(description="Its resource name, as in URLs (the CRD's spec.names.plural).")
    managed_by: FieldPath = Field("spec.managedBy", alias="managedBy", description="Where its managedBy is.")
    suspend: FieldPath = Field("spec.suspend", description="Where its suspend flag is (true: nothing runs).")
    succeeded_condition: str = Field(
        "Completed",
        alias="succeededCondition",
        description="The condition type that is True once it succeeded.",
    )
    failed_condition: str = Field(
        "Failed", alias="failedCondition", description="The condition type that is True once it failed."
    )
    replicated_jobs: FieldPath = Field(
        "spec.replicatedJobs",
        alias="replicatedJobs",
        description="The list of its pod groups: entries with replicas and a batch/v1 Job template.",
    )
    priority_class: FieldPath | None = Field(
        None,
        alias="priorityClass",
        description="Where its PriorityClass is named; none: the first pod template's priorityClassName.",
    )
    running: list[FieldPath] = Field(
        default_factory=lambda: [
            "status.replicatedJobsStatus[].active",
            "status.replicatedJobsStatus[].ready",
        ],
        description="Status fields counting what runs, set to 0 when the worker that ran it is lost.",
    )
    progress: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]+$")]] = Field(
        default_factory=lambda: ["restarts", "restartsCountTowardsMax"],
        description="Fields of its status that a mirror made after a worker loss is given before it runs, so "
        "that they go on from there (JobSet's restarts, which its failurePolicy counts).",
    )


def _jobs_only() -> list[Kind | DeclaredKind]:
    return ["Job"]


class ManagerConfig(BaseModel):
    """The manager's configuration file (``multiqueue manager --config FILE``)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str = Field(
        "multiqueue",
        description="Value of the multiqueue.dev/origin label on every mirror this manager makes.",
    )
    managed_by: str = Field(
        "multiqueue.dev/dispatcher",
        alias="managedBy",
        description="The spec.managedBy value this manager handles.",
    )
    namespace: str = Field(
        "multiqueue-system",
        description="The manager's own namespace: its Lease and the Secrets of live workers.",
    )
    management: ClusterRef = Field(description="The management cluster, where users submit Jobs.")
    workers: list[WorkerConfig] = Field(
        default_factory=list, description="Worker clusters; more may come from Secrets (workerSecrets)."
    )
    placement: Literal["LeastLoaded", "RoundRobin", "Ordered"] = Field(
        "LeastLoaded",
        description="How a worker is chosen among those that fit: fewest unfinished Jobs, in turn, or the first "
        "in config order (primary/backup).",
    )
    gc_interval: Annotated[float, Field(gt=0, alias="gcInterval")] = Field(
        60.0, description="Seconds between sweeps for mirrors whose user Job is gone or was re-created."
    )
    worker_lost_timeout: Annotated[float, Field(gt=0, alias="workerLostTimeout")] = Field(
        900.0, description="Seconds a worker may be unreachable before its unfinished Jobs run elsewhere."
    )
    mirror_ttl_after_finished: Annotated[float, Field(ge=0, alias="mirrorTTLSecondsAfterFinished")] = Field(
        3600.0,
        description="Seconds a finished Job's mirror, with its pods and their logs, stays on the worker (0: "
        "removed at once). Deleting the user's Job removes it sooner.",
    )
    max_split_parts: Annotated[int, Field(ge=1, alias="maxSplitParts")] = Field(
        4,
        description='The most workers one Indexed Job annotated multiqueue.dev/split: "true" runs on at once, '
        "each running a range of its indexes (1: no Job is split).",
    )
    worker_secrets: WorkerSecretsConfig = Field(
        default_factory=lambda: WorkerSecretsConfig.model_validate({}),
        alias="workerSecrets",
        description="Workers registered at runtime through Secrets.",
    )
    namespaces: list[str] = Field(
        default_factory=list, description="Namespaces of the management cluster to dispatch from; empty: all."
    )
    kinds: Annotated[list[Kind | DeclaredKind], Field(min_length=1)] = Field(
        default_factory=lambda: _jobs_only(),
        description="Kinds to dispatch, each with its CRD on every cluster: a name multiqueue knows (Job, JobSet, "
        "JobGroup), or a kind declared here by where it keeps its fields.",
    )
    embedded_controllers: list[Literal["job", "cronjob"]] = Field(
        default_factory=list,
        alias="embeddedControllers",
        description="Run multiqueue's Job and CronJob controllers for the management cluster (where "
        "kube-controller-manager runs with --controllers=*,-job,-cronjob).",
    )
    metrics_address: str = Field(
        "127.0.0.1:8080", alias="metricsAddress", description="host:port of /healthz, /readyz and /metrics."
    )
    dashboard: DashboardConfig = Field(
        default_factory=lambda: DashboardConfig.model_validate({}),
        description="The web dashboard.",
    )
    leader_election: LeaderElectionConfig = Field(
        default_factory=lambda: LeaderElectionConfig.model_validate({}),
        alias="leaderElection",
        description="Leader election among replicas.",
    )
    client: ClientConfig = Field(
        default_factory=lambda: ClientConfig.model_validate({}),
        description="Client-side rate limits, per cluster.",
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


def yaml_problem(path: Path, exc: yaml.YAMLError) -> str:
    """``file:line:column: what is wrong``, as an editor jumps to it."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None) or str(exc).splitlines()[0]
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
    return f"{where}: not valid YAML: {problem}"


def load_model(path: Path, model: type[M]) -> M:
    """Read a YAML file into a pydantic model; every problem is a :class:`ConfigError` naming the field."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"config {yaml_problem(path, exc)}") from exc
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
