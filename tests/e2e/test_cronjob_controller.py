"""The embedded CronJob controller end to end, on a fake clock: the test moves time to the next schedule instead
of waiting for a real minute boundary, so each scenario takes seconds.

The controller computes its requeue delay from the fake clock, which the queue's real timers cannot honour; after
moving the clock, the test asks the controller to look at every CronJob again (``resync``), as it would at the
schedule time. Jobs run for real (the process kubelet and the embedded Job controller, on the real clock).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from multiqueue.api.cronjobtimes import job_name
from multiqueue.api.meta import format_time, parse_time
from multiqueue.api.types import CRONJOBS, JOBS, PODS
from multiqueue.controllers.cronjob import CronJobController
from multiqueue.local.config import LocalCluster, LocalConfig
from multiqueue.local.up import LocalClusters
from tests.e2e.conftest import BUSYBOX, Clusters, has_condition, skip_without_embedded_controllers
from tests.support.clock import FakeClock

pytestmark = pytest.mark.e2e

Obj = dict[str, Any]
DISPATCHER = "multiqueue.dev/dispatcher"  # design.md §4: the default managedBy value and the placement label
CLUSTER_LABEL = "multiqueue.dev/cluster"


@dataclass
class Scheduled:
    """A local cluster whose CronJob controller runs on ``clock``."""

    clusters: Clusters
    controller: CronJobController
    clock: FakeClock

    def next_minute(self, created: Obj | None = None) -> datetime:
        """Move the clock just past the next minute boundary and have the controller look again; return the
        boundary (the schedule time a ``* * * * *`` CronJob starts a Job for). Given the CronJob just
        ``created``, the boundary is after its creationTimestamp, from which schedules count."""
        start = self.clock.now
        created_at = parse_time(created["metadata"]["creationTimestamp"]) if created is not None else None
        if created_at is not None and created_at > start:
            start = created_at
        boundary = start.replace(second=0, microsecond=0) + timedelta(minutes=1)
        self.clock.set(boundary + timedelta(seconds=1))
        self.controller.resync()
        return boundary


def _on_fake_clock(
    clusters: LocalClusters, cluster: str = "management"
) -> tuple[CronJobController, FakeClock]:
    """The cluster's CronJob controller, switched to a fake clock set to now (before any CronJob exists, so no
    sync ever saw the real one): the API server stamps creationTimestamp with real time, and schedules count
    from it."""
    controller = clusters.components[cluster].controllers.cronjob
    assert controller is not None
    clock = FakeClock(datetime.now(UTC))
    controller.clock = clock
    return controller, clock


@pytest.fixture
async def scheduled(e2e_provider: str, tmp_path: Path) -> AsyncIterator[Scheduled]:
    if e2e_provider != "local":
        skip_without_embedded_controllers(
            e2e_provider, "injects a fake clock into the embedded CronJob controller"
        )
    local = LocalClusters(LocalConfig(clusters=[LocalCluster(name="management")]), tmp_path / "state")
    await local.start()
    try:
        clients = {name: c.client for name, c in local.components.items() if c.client is not None}
        controller, clock = _on_fake_clock(local)
        yield Scheduled(Clusters(clients, local.kubeconfig_path, local), controller, clock)
    finally:
        await local.stop(stop_pods=True)


def cronjob_body(name: str, command: str, **spec: Any) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name},
        "spec": {
            "schedule": "* * * * *",
            "jobTemplate": {
                "spec": {
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "terminationGracePeriodSeconds": 1,
                            "containers": [{"name": "c", "image": BUSYBOX, "command": ["sh", "-c", command]}],
                        }
                    }
                }
            },
            **spec,
        },
    }


def _status(obj: Obj) -> Obj:
    status = obj.get("status")
    return status if isinstance(status, dict) else {}


def _active_names(cronjob: Obj) -> list[str]:
    return [str(ref.get("name")) for ref in _status(cronjob).get("active") or []]


async def test_every_minute_cronjob_runs_a_job_and_trims_history(scheduled: Scheduled) -> None:
    clusters = scheduled.clusters
    client = clusters.client()
    created = await client.create(
        CRONJOBS, cronjob_body("minutely", "true", successfulJobsHistoryLimit=0), "default"
    )
    boundary = scheduled.next_minute(created)
    cronjob = await clusters.wait_for(
        CRONJOBS, "default", "minutely", lambda c: bool(_status(c).get("lastSuccessfulTime")), within=30
    )
    assert cronjob["status"]["lastScheduleTime"] == format_time(boundary)
    assert not _active_names(cronjob), "the finished Job left status.active"
    # With a history limit of 0, the completed Job is deleted once seen.
    await clusters.wait_gone(JOBS, "default", job_name("minutely", boundary), within=30)


async def test_replace_deletes_the_running_job_at_the_next_schedule(scheduled: Scheduled) -> None:
    clusters = scheduled.clusters
    client = clusters.client()
    await client.create(
        CRONJOBS, cronjob_body("replacer", "sleep 300", concurrencyPolicy="Replace"), "default"
    )
    first = job_name("replacer", scheduled.next_minute())
    await clusters.wait_for(CRONJOBS, "default", "replacer", lambda c: _active_names(c) == [first], within=30)
    await clusters.wait_for(JOBS, "default", first, lambda j: _status(j).get("ready") == 1, within=30)
    second_time = scheduled.next_minute()
    second = job_name("replacer", second_time)
    cronjob = await clusters.wait_for(
        CRONJOBS, "default", "replacer", lambda c: _active_names(c) == [second], within=30
    )
    assert cronjob["status"]["lastScheduleTime"] == format_time(second_time)
    pods, _ = await client.list(PODS, "default", label_selector=f"batch.kubernetes.io/job-name={first}")
    await clusters.wait_gone(JOBS, "default", first, within=30)
    for pod in pods:  # released by the Job controller once their Job was gone, then deleted
        await clusters.wait_gone(PODS, "default", pod["metadata"]["name"], within=30)


async def test_a_cronjob_whose_jobs_are_dispatched_sees_them_complete(dispatching_clusters: Clusters) -> None:
    """The management cluster's CronJob controller makes a Job the dispatcher runs on a worker. On local the
    embedded controller's clock is moved to the next minute; on upstream and kind kube-controller-manager's CronJob
    controller runs on the real clock, so the Job comes at the next real minute boundary."""
    clusters = dispatching_clusters
    local = clusters.local_clusters  # none on kind, whose kube-controller-manager runs on the real clock too
    fake = _on_fake_clock(local) if local is not None and not local.upstream else None
    body = cronjob_body("nightly", "true")
    body["spec"]["jobTemplate"]["spec"]["managedBy"] = DISPATCHER
    created = await clusters.client().create(CRONJOBS, body, "default")
    if fake is not None:
        boundary = Scheduled(clusters, *fake).next_minute(created)
        within = 60.0
    else:
        created_at = parse_time(created["metadata"]["creationTimestamp"])
        assert created_at is not None
        boundary = created_at.replace(second=0, microsecond=0) + timedelta(minutes=1)
        within = 60.0 + (boundary - datetime.now(UTC)).total_seconds()
    made = job_name("nightly", boundary)
    job = await clusters.wait_for(JOBS, "default", made, has_condition("Complete"), within=within)
    assert CLUSTER_LABEL in job["metadata"].get("labels", {}), "placed on a worker"
    cronjob = await clusters.wait_for(
        CRONJOBS, "default", "nightly", lambda c: bool(_status(c).get("lastSuccessfulTime")), within=30
    )
    assert not _active_names(cronjob), "the CronJob saw its dispatched Job's Complete condition"
    local_pods, _ = await clusters.client().list(PODS, "default")
    assert local_pods == [], "dispatched, not run on the management cluster"
