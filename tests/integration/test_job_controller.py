"""The Job controller against an in-process cluster with no kubelet: the test plays the kubelet through the API."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from multiqueue.api.jobs import TRACKING_FINALIZER
from multiqueue.api.types import EVENTS, JOBS, PODS
from multiqueue.apiserver.server import ApiServer
from multiqueue.controllers.job import JobController
from multiqueue.kube.client import KubeClient
from multiqueue.kube.errors import BadRequest
from multiqueue.kube.events import EventRecorder
from multiqueue.kube.informer import InformerFactory
from tests.support.clients import client_for
from tests.support.waiting import Changes


@dataclass
class Harness:
    client: KubeClient
    controller: JobController
    changes: Changes
    task: asyncio.Task[None]


@pytest.fixture
async def harness(apiserver: ApiServer) -> AsyncIterator[Harness]:
    client = await client_for(apiserver)
    factory = InformerFactory(client)
    recorder = EventRecorder(client, "job-controller")
    controller = JobController(client, factory, recorder)
    changes = Changes(controller.jobs, controller.pods)
    factory.start()
    recorder.start()
    harness = Harness(client, controller, changes, asyncio.create_task(controller.run()))
    yield harness
    harness.task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await harness.task
    await recorder.stop()
    await factory.stop()
    await client.close()


def _job(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}},
            **spec,
        },
    }


def _condition(job: dict[str, Any] | None, type_: str) -> bool:
    return any(
        c["type"] == type_ and c["status"] == "True"
        for c in ((job or {}).get("status") or {}).get("conditions", [])
    )


async def _finish(client: KubeClient, pod: dict[str, Any], phase: str, code: int) -> None:
    status = {
        "phase": phase,
        "containerStatuses": [
            {"name": "c", "state": {"terminated": {"exitCode": code, "finishedAt": "2026-01-01T00:00:00Z"}}}
        ],
    }
    await client.patch(PODS, pod["metadata"]["name"], {"status": status}, "default", subresource="status")


async def test_pods_driven_through_the_api_complete_the_job(harness: Harness) -> None:
    client, controller, changes = harness.client, harness.controller, harness.changes
    await client.create(JOBS, _job("driven", completions=3, parallelism=3), "default")
    await changes.until(lambda: len(controller.pods.objects("default")) == 3)
    for pod in controller.pods.objects("default"):
        assert pod["metadata"]["finalizers"] == ["batch.kubernetes.io/job-tracking"]
        await _finish(client, pod, "Succeeded", 0)
    await changes.until(lambda: _condition(controller.jobs.get("default/driven"), "Complete"))
    job = controller.jobs.get("default/driven")
    assert job is not None and job["status"]["succeeded"] == 3
    await changes.until(
        lambda: all(not p["metadata"].get("finalizers") for p in controller.pods.objects("default"))
    )
    # Events are recorded without waiting for their commit: watch until both are there.
    reasons: set[str] = set()
    async with asyncio.timeout(30):
        async for event in client.watch(EVENTS, "default", field_selector="involvedObject.name=driven"):
            reasons.add(str(event["object"].get("reason")))
            if {"SuccessfulCreate", "Completed"} <= reasons:
                break
    # What job_controller_job_pods_finished_total and job_controller_jobs_finished_total report: a finalizer
    # comes off only after the status write that counted its pod.
    assert controller.metrics.pods_finished == {("NonIndexed", "succeeded"): 3}
    assert [key[:2] for key in controller.metrics.finished] == [("NonIndexed", "succeeded")]


async def test_failed_pod_is_replaced_until_the_backoff_limit(harness: Harness) -> None:
    client, controller, changes = harness.client, harness.controller, harness.changes
    await client.create(JOBS, _job("flaky", completions=1, parallelism=1, backoffLimit=0), "default")
    await changes.until(lambda: len(controller.pods.objects("default")) == 1)
    await _finish(client, controller.pods.objects("default")[0], "Failed", 1)
    await changes.until(lambda: _condition(controller.jobs.get("default/flaky"), "Failed"))
    job = controller.jobs.get("default/flaky")
    assert job is not None and job["status"]["failed"] == 1
    assert len(controller.pods.objects("default")) == 1, "backoffLimit 0: no replacement"


async def test_parallelism_change_deletes_excess_pods(harness: Harness) -> None:
    client, controller, changes = harness.client, harness.controller, harness.changes
    await client.create(JOBS, _job("scaled", completions=10, parallelism=4), "default")
    await changes.until(lambda: len(controller.pods.objects("default")) == 4)
    await client.patch(JOBS, "scaled", {"spec": {"parallelism": 1}}, "default")
    # Unscheduled pods are removed at once; the Job keeps one.
    await changes.until(lambda: len(controller.pods.objects("default")) == 1)
    await changes.until(
        lambda: (controller.jobs.get("default/scaled") or {}).get("status", {}).get("active") == 1
    )


async def test_a_controller_stopped_and_run_again_picks_up_jobs_made_meanwhile(harness: Harness) -> None:
    """What a manager replica does when it loses the Lease and later leads again."""
    client, controller, changes = harness.client, harness.controller, harness.changes
    harness.task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await harness.task
    await client.create(JOBS, _job("meanwhile"), "default")
    await changes.until(lambda: controller.jobs.get("default/meanwhile") is not None)
    assert controller.pods.objects("default") == [], "nobody runs Jobs while the controller is stopped"
    harness.task = asyncio.create_task(controller.run())
    await changes.until(lambda: len(controller.pods.objects("default")) == 1)


async def _stop(harness: Harness) -> None:
    harness.task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await harness.task


@pytest.mark.parametrize("status", ["Running", ["Running"]])
async def test_a_job_status_that_is_not_an_object_is_refused_and_the_job_runs(
    harness: Harness, status: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """kube-apiserver's decoder refuses such a status (400, nothing stored); the controller's own tolerance of one
    is a table case of the decide step (tests/unit/test_job_sync.py)."""
    client, controller, changes = harness.client, harness.controller, harness.changes
    await _stop(harness)
    created = await client.create(JOBS, _job("odd", parallelism=1), "default")
    with pytest.raises(
        BadRequest, match=r"cannot unmarshal .* into Go struct field Job\.status of type v1\.JobStatus"
    ):
        await client.update_status(JOBS, {**created, "status": status})
    assert (await client.get(JOBS, "odd", "default")).get("status") == {}
    caplog.set_level(logging.WARNING, logger="multiqueue.loop.reconcile")
    harness.task = asyncio.create_task(controller.run())
    await changes.until(lambda: len(controller.pods.objects("default")) == 1)
    await changes.until(
        lambda: (controller.jobs.get("default/odd") or {}).get("status", {}).get("active") == 1
    )
    assert [r.getMessage() for r in caplog.records if r.name == "multiqueue.loop.reconcile"] == []


def _finalizers(controller: JobController, key: str) -> list[str] | None:
    """The finalizers of a cached pod; None while the pod is not in the cache."""
    pod = controller.pods.get(key)
    return None if pod is None else list(pod["metadata"].get("finalizers") or [])


def _bare_pod(name: str, *owners: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "finalizers": [TRACKING_FINALIZER]}
    if owners:
        meta["ownerReferences"] = list(owners)
    return {"metadata": meta, "spec": {"containers": [{"name": "c", "image": "i"}]}}


async def test_a_pod_whose_job_was_replaced_under_the_same_name_loses_its_finalizer(harness: Harness) -> None:
    client, controller, changes = harness.client, harness.controller, harness.changes
    await client.create(JOBS, _job("reused", parallelism=0), "default")
    old_job = {"apiVersion": "batch/v1", "kind": "Job", "name": "reused", "uid": "uid-of-the-old-job"}
    await client.create(PODS, _bare_pod("left-behind", {**old_job, "controller": True}), "default")
    await changes.until(lambda: _finalizers(controller, "default/left-behind") == [])
    job = controller.jobs.get("default/reused")
    assert job is not None and not job.get("status", {}).get("active"), "the new Job did not take the pod"


async def test_a_pod_no_job_controls_loses_its_finalizer(harness: Harness) -> None:
    client, controller, changes = harness.client, harness.controller, harness.changes
    await client.create(PODS, _bare_pod("stray"), "default")
    await changes.until(lambda: _finalizers(controller, "default/stray") == [])
