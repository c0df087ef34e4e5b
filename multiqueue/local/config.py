"""The configuration of ``multiqueue local up``: which local clusters to serve and what runs in each."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from multiqueue.dispatch.config import Capacity, ClusterName, DashboardConfig, first_duplicate, load_model

DEFAULT_CONFIG = Path(__file__).resolve().parents[2] / "clusters" / "local.yaml"

ControlPlane = Literal["embedded", "upstream"]
# The processes of an upstream control plane that ``extraArgs`` can give flags to.
UpstreamComponent = Literal["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"]


def _all_controllers() -> list[Literal["job", "cronjob"]]:
    return ["job", "cronjob"]


class LocalCluster(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: ClusterName
    # 0 picks a free port (the one used last time, when it is still free).
    port: Annotated[int, Field(ge=0, le=65535)] = 0
    # The embedded controllers that run against this cluster.
    controllers: list[Literal["job", "cronjob"]] = Field(default_factory=lambda: _all_controllers())
    # How the local kubelet runs pods: as local processes, simulated, or not at all.
    kubelet: Literal["process", "simulate", "none"] = "process"
    # How many pods the node runs at once; the rest wait Pending.
    capacity_pods: Annotated[int, Field(ge=1, alias="capacityPods")] = 110
    # The cores the node advertises to a scheduler (kube-scheduler on an upstream control plane); none: this
    # machine's. Pods run as local processes whatever it says.
    capacity_cpu: Annotated[int | None, Field(ge=1, alias="capacityCpu")] = None
    # Flags appended to an upstream component's own (a later flag wins over an earlier one of the same name), e.g.
    # kube-controller-manager's rate limits or kube-apiserver's audit log: upstream control plane only.
    extra_args: Annotated[dict[UpstreamComponent, list[str]], Field(alias="extraArgs")] = Field(
        default_factory=dict
    )

    @field_validator("extra_args")
    @classmethod
    def _flags(cls, extra_args: dict[UpstreamComponent, list[str]]) -> dict[UpstreamComponent, list[str]]:
        for component, flags in extra_args.items():
            for flag in flags:
                if not flag.startswith("-"):
                    raise ValueError(f"{component}: {flag!r} is not a flag: write each as --name=value")
        return extra_args


class LocalWorker(BaseModel):
    """A worker of the local manager: a cluster's name, and what the manager's config would say of it."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: ClusterName
    labels: dict[str, str] = Field(default_factory=dict)
    capacity: Capacity = Field(default_factory=lambda: Capacity.model_validate({}))


class LocalManager(BaseModel):
    """The multiqueue manager over local clusters: which one is the management cluster, which are workers."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    management: str = "management"
    # Each worker is a cluster's name, or {name, labels, capacity} as in the manager's config.
    workers: Annotated[list[LocalWorker], Field(min_length=1)] = Field(
        default_factory=lambda: [LocalWorker(name="worker-1"), LocalWorker(name="worker-2")]
    )
    placement: Literal["LeastLoaded", "RoundRobin", "Ordered"] = "LeastLoaded"
    # Where the manager serves /healthz, /readyz and /metrics; port 0 picks a free one (printed at start).
    metrics_address: Annotated[str, Field(alias="metricsAddress")] = "127.0.0.1:0"
    mirror_ttl_after_finished: Annotated[float, Field(ge=0, alias="mirrorTTLSecondsAfterFinished")] = 3600.0
    # The most workers one Indexed Job annotated multiqueue.dev/split runs on at once (1: none is split).
    max_split_parts: Annotated[int, Field(ge=1, alias="maxSplitParts")] = 4
    # Namespaces of the management cluster whose Jobs are dispatched; empty: all.
    namespaces: list[str] = Field(default_factory=list)
    # The manager's web dashboard: on, on a free loopback port (its URL is printed at start).
    dashboard: DashboardConfig = Field(
        default_factory=lambda: DashboardConfig.model_validate({"enabled": True, "address": "127.0.0.1:0"})
    )

    @field_validator("workers", mode="before")
    @classmethod
    def _names_or_entries(cls, workers: Any) -> Any:
        if isinstance(workers, list):
            return [{"name": w} if isinstance(w, str) else w for w in workers]
        return workers

    @property
    def worker_names(self) -> list[str]:
        return [w.name for w in self.workers]


class LocalConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    clusters: Annotated[list[LocalCluster], Field(min_length=1)]
    manager: LocalManager | None = None
    # What serves each cluster: multiqueue's embedded API server (with the embedded Job and CronJob controllers), or
    # upstream etcd, kube-apiserver, kube-controller-manager and kube-scheduler (multiqueue/local/upstream.py; the
    # embedded controllers stay off). `local up --control-plane` overrides it.
    control_plane: Annotated[ControlPlane, Field(alias="controlPlane")] = "embedded"

    @model_validator(mode="after")
    def _manager_names_clusters(self) -> LocalConfig:
        if self.manager is not None:
            known = {c.name for c in self.clusters}
            for name in (self.manager.management, *self.manager.worker_names):
                if name not in known:
                    raise ValueError(f"manager names cluster {name!r}, which is not in clusters")
            if self.manager.management in self.manager.worker_names:
                raise ValueError("the management cluster cannot also be a worker")
        return self

    @model_validator(mode="after")
    def _extra_args_need_upstream(self) -> LocalConfig:
        if self.control_plane != "upstream":
            for cluster in self.clusters:
                if cluster.extra_args:
                    raise ValueError(
                        f"cluster {cluster.name!r} has extraArgs, which only an upstream control plane takes: "
                        "set controlPlane: upstream"
                    )
        return self

    @field_validator("clusters")
    @classmethod
    def _unique(cls, clusters: list[LocalCluster]) -> list[LocalCluster]:
        duplicate = first_duplicate([c.name for c in clusters])
        if duplicate is not None:
            raise ValueError(f"duplicate cluster name {duplicate!r}")
        return clusters


def load_local_config(path: Path | None) -> LocalConfig:
    """The local clusters config; every problem is a :class:`ConfigError` naming the field."""
    if path is None and not DEFAULT_CONFIG.exists():
        # Installed without the source tree: the same clusters clusters/local.yaml describes.
        return LocalConfig(
            clusters=[LocalCluster(name=n) for n in ("management", "worker-1", "worker-2")],
            manager=LocalManager(),
        )
    return load_model(path or DEFAULT_CONFIG, LocalConfig)
