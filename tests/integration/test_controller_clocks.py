"""The embedded controllers on a fake clock: a sync returns the requeue delay its decide step computed from the
clock, and moving the clock (not waiting) brings deadlines and schedules due."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from multiqueue.api.meta import format_time, parse_time
from multiqueue.api.types import CRONJOBS, JOBS
from multiqueue.apiserver.server import ApiServer
from multiqueue.controllers.cronjob import CronJobController
from multiqueue.controllers.cronjob_schedule import NEXT_SCHEDULE_DELTA
from multiqueue.controllers.job import JobController
from multiqueue.kube.client import KubeClient
from multiqueue.kube.events import EventRecorder
from multiqueue.kube.informer import InformerFactory
from tests.support.clients import client_for
from tests.support.clock import FakeClock
from tests.support.waiting import Changes

TEMPLATE = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}


@pytest.fixture
async def client(apiserver: ApiServer) -> AsyncIterator[KubeClient]:
    client = await client_for(apiserver)
    yield client
    await client.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(datetime.now(UTC).replace(microsecond=0))  # whole seconds, as the API stores times


@pytest.fixture
async def factory(client: KubeClient) -> AsyncIterator[InformerFactory]:
    factory = InformerFactory(client)
    yield factory
    await factory.stop()


def _conditions(obj: dict[str, Any] | None) -> dict[str, str]:
    status = (obj or {}).get("status") or {}
    return {c["type"]: c.get("reason", "") for c in status.get("conditions") or []}


async def test_job_sync_returns_the_deadline_and_the_moved_clock_ends_the_job(
    client: KubeClient, factory: InformerFactory, clock: FakeClock
) -> None:
    """The controller is not run: the test calls its sync, as the reconcile loop would."""
    controller = JobController(client, factory, EventRecorder(client, "job-controller"), clock=clock)
    changes = Changes(controller.jobs, controller.pods)
    factory.start()
    await factory.wait_for_sync()
    body = {"metadata": {"name": "deadline"}, "spec": {"activeDeadlineSeconds": 600, "template": TEMPLATE}}
    await client.create(JOBS, body, "default")
    await changes.until(lambda: controller.jobs.get("default/deadline") is not None)
    assert await controller.sync("default/deadline") == pytest.approx(600, abs=0.01)
    await changes.until(
        lambda: (
            (controller.jobs.get("default/deadline") or {}).get("status", {}).get("startTime")
            == format_time(clock.now)
        )
    )
    clock.advance(timedelta(seconds=600))
    await controller.sync("default/deadline")
    await changes.until(lambda: "FailureTarget" in _conditions(controller.jobs.get("default/deadline")))
    assert _conditions(controller.jobs.get("default/deadline"))["FailureTarget"] == "DeadlineExceeded"


async def test_cronjob_sync_returns_the_time_to_the_next_schedule(
    client: KubeClient, factory: InformerFactory, clock: FakeClock
) -> None:
    controller = CronJobController(client, factory, EventRecorder(client, "cronjob-controller"), clock=clock)
    changes = Changes(controller.cronjobs, controller.jobs)
    factory.start()
    await factory.wait_for_sync()
    body = {
        "metadata": {"name": "minutely"},
        "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": TEMPLATE}}},
    }
    created = await client.create(CRONJOBS, body, "default")
    await changes.until(lambda: controller.cronjobs.get("default/minutely") is not None)
    created_at = parse_time(created["metadata"]["creationTimestamp"])
    assert created_at is not None
    clock.set(max(clock.now, created_at))  # schedules count from the creation
    boundary = clock.now.replace(second=0) + timedelta(minutes=1)
    expected = (boundary - clock.now + NEXT_SCHEDULE_DELTA).total_seconds()
    assert await controller.sync("default/minutely") == pytest.approx(expected)
    clock.set(boundary + timedelta(seconds=15))
    assert await controller.sync("default/minutely") == pytest.approx(45.1)
    await changes.until(lambda: len(controller.jobs.objects("default")) == 1)
    cronjob = await client.get(CRONJOBS, "minutely", "default")
    assert cronjob["status"]["lastScheduleTime"] == format_time(boundary)
