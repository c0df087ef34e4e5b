"""The embedded CronJob controller end to end: a Job per minute, run to Complete, history trimmed."""

from __future__ import annotations

import pytest

from multiqueue.api.types import CRONJOBS, JOBS
from tests.e2e.conftest import Clusters

pytestmark = pytest.mark.e2e


async def test_every_minute_cronjob_runs_a_job_and_trims_history(local_clusters: Clusters) -> None:
    client = local_clusters.client()
    body = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "minutely"},
        "spec": {
            "schedule": "* * * * *",
            "successfulJobsHistoryLimit": 0,
            "jobTemplate": {
                "spec": {
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "c", "image": "busybox", "command": ["true"]}],
                        }
                    }
                }
            },
        },
    }
    await client.create(CRONJOBS, body, "default")
    cronjob = await local_clusters.wait_for(
        CRONJOBS,
        "default",
        "minutely",
        lambda c: bool((c.get("status") or {}).get("lastSuccessfulTime")),
        within=90,
    )
    status = cronjob["status"]
    assert status["lastScheduleTime"].endswith(":00Z")
    # With a history limit of 0, the completed Job is deleted once seen.
    jobs, _ = await client.list(JOBS, "default")
    names = [j["metadata"]["name"] for j in jobs if j["metadata"]["name"].startswith("minutely-")]
    for name in names:
        await local_clusters.wait_for(
            JOBS, "default", name, lambda j: bool(j["metadata"].get("deletionTimestamp")), within=30
        )
