"""After a dispatched Job ends: its mirror and pods stay on the worker for the mirror TTL, so logs can be read and
``kubectl --context worker-1 get jobs`` shows it; how it ended (and why a Job waits) is an Event on the user's Job
and a REASON in ``multiqueue status``."""

from __future__ import annotations

import time

import pytest

from multiqueue.api.types import JOBS, Obj
from multiqueue.dispatch import inspect, joblogs
from multiqueue.dispatch.config import Capacity
from multiqueue.dispatch.mirror import CLUSTER_LABEL, CLUSTER_SELECTOR_ANNOTATION, PIN_LABEL
from multiqueue.kube.client import KubeClient
from tests.e2e.conftest import Clusters, has_condition, job_body
from tests.e2e.test_dispatch import managed
from tests.e2e.test_dispatch_failures import wait_for_event

pytestmark = pytest.mark.e2e


async def _mirror(clusters: Clusters, name: str) -> tuple[str, Obj]:
    user = await clusters.client().get(JOBS, name, "default")
    worker = user["metadata"]["labels"][CLUSTER_LABEL]
    return worker, await clusters.client(worker).get(JOBS, name, "default")


async def test_a_finished_jobs_mirror_and_logs_stay_until_the_job_is_deleted(
    dispatching_clusters: Clusters,
) -> None:
    clusters = dispatching_clusters
    running = await clusters.manager_config()
    assert running.mirror_ttl_after_finished == 3600.0, "an hour by default: long enough to read the logs"
    config, contexts = clusters.reader()
    management = clusters.client()
    await management.create(JOBS, managed("done", "echo all done here"), "default")
    finished = await clusters.wait_for(JOBS, "default", "done", has_condition("Complete"))
    worker, mirror = await _mirror(clusters, "done")
    assert mirror["metadata"]["annotations"]["multiqueue.dev/origin-uid"] == finished["metadata"]["uid"]
    completed = await wait_for_event(management, "done", "Completed")
    assert completed["type"] == "Normal" and completed["message"] == f"Job completed on worker {worker}"
    # A person's view: the worker still lists the mirror, and the logs can be read after the end.
    listed = await clusters.kubectl("--context", worker, "get", "jobs", "done", "-o", "name")
    assert listed.strip() == "job.batch/done"
    logs = await joblogs.logs(config, "done", "default", joblogs.LogOptions(), contexts)
    assert [text.strip() for _, text in logs] == ["all done here"]
    _, rows = await inspect.status(config, contexts)
    row = next(r for r in rows if r.key == "default/done")
    assert (row.worker, row.state, row.reason) == (worker, "Complete", "CompletionsReached")
    # Deleting the user's Job takes the kept mirror with it.
    await management.delete(JOBS, "done", "default", propagation="Background")
    await clusters.wait_gone(JOBS, "default", "done", cluster=worker)
    await clusters.wait_gone(JOBS, "default", "done")


async def test_a_finished_jobs_mirror_goes_when_its_ttl_ends(dispatching_clusters: Clusters) -> None:
    clusters = dispatching_clusters
    await clusters.restart_manager(mirror_ttl_after_finished=2.0)
    config, contexts = clusters.reader()
    await clusters.client().create(JOBS, managed("brief", "true"), "default")
    await clusters.wait_for(JOBS, "default", "brief", has_condition("Complete"))
    worker, _ = await _mirror(clusters, "brief")
    started = time.monotonic()
    await clusters.wait_gone(JOBS, "default", "brief", cluster=worker, within=30)
    print(f"mirror removed {time.monotonic() - started:.1f} s after the Job was seen Complete (TTL 2 s)")
    # Its finalizer goes with it; the user's Job stays, finished, and says where the logs went.
    user = await clusters.wait_for(JOBS, "default", "brief", lambda j: not j["metadata"].get("finalizers"))
    assert user["metadata"]["labels"][CLUSTER_LABEL] == worker
    with pytest.raises(joblogs.LogsError, match=r"mirror is gone .*\(mirrorTTLSecondsAfterFinished\)"):
        await joblogs.logs(config, "brief", "default", joblogs.LogOptions(), contexts)


async def test_a_failed_job_says_why_in_a_warning_and_its_logs_stay(dispatching_clusters: Clusters) -> None:
    clusters = dispatching_clusters
    config, contexts = clusters.reader()
    management = clusters.client()
    await management.create(JOBS, managed("broken", "echo about to fail; exit 3", backoffLimit=0), "default")
    await clusters.wait_for(JOBS, "default", "broken", has_condition("Failed"))
    worker, _ = await _mirror(clusters, "broken")
    warning = await wait_for_event(management, "broken", "BackoffLimitExceeded")
    assert warning["type"] == "Warning"
    assert warning["message"] == f"Job has reached the specified backoff limit (on worker {worker})"
    logs = await joblogs.logs(config, "broken", "default", joblogs.LogOptions(), contexts)
    assert [text.strip() for _, text in logs] == ["about to fail"]
    _, rows = await inspect.status(config, contexts)
    row = next(r for r in rows if r.key == "default/broken")
    assert (row.state, row.reason) == ("Failed", "BackoffLimitExceeded")


async def test_a_job_no_worker_can_ever_fit_waits_with_a_warning_saying_so(
    dispatching_clusters: Clusters,
) -> None:
    clusters = dispatching_clusters
    await clusters.set_capacity({w: Capacity(resources={"cpu": "4"}) for w in ("worker-1", "worker-2")})
    config, contexts = clusters.reader()
    management = clusters.client()
    huge = managed("huge", "true")
    huge["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "64"}}
    await management.create(JOBS, huge, "default")
    warning = await wait_for_event(management, "huge", "NeverFits")
    assert warning["type"] == "Warning"
    assert (
        warning["message"]
        == "0/2 workers can take this Job: 2 ask more cpu than they have in all (worker-1: cpu 4, worker-2: cpu 4)"
    )
    nowhere = managed("nowhere", "true")
    nowhere["metadata"]["annotations"] = {CLUSTER_SELECTOR_ANNOTATION: "region=mars"}
    await management.create(JOBS, nowhere, "default")
    await wait_for_event(management, "nowhere", "NoMatchingWorker")
    _, rows = await inspect.status(config, contexts)
    shown = {r.key: (r.worker, r.state, r.reason, r.message) for r in rows}
    assert shown["default/huge"] == ("-", "Waiting", "NeverFits", warning["message"])
    assert shown["default/nowhere"] == (
        "-",
        "Waiting",
        "NoMatchingWorker",
        "0/2 workers can take this Job: 2 do not match the selector region=mars (worker-1, worker-2)",
    )


async def test_a_pin_to_a_worker_that_does_not_exist_is_not_shown_as_placed(
    dispatching_clusters: Clusters,
) -> None:
    clusters = dispatching_clusters
    config, contexts = clusters.reader()
    management = clusters.client()
    pinned = managed("pinned", "true")
    pinned["metadata"]["labels"] = {PIN_LABEL: "worker-9"}
    await management.create(JOBS, pinned, "default")
    warning = await wait_for_event(management, "pinned", "NoWorker")
    assert warning["message"] == (
        "0/2 workers can take this Job: 2 are not the pinned worker worker-9 (worker-1, worker-2)"
    )
    waiting = await management.get(JOBS, "pinned", "default")
    assert CLUSTER_LABEL not in waiting["metadata"]["labels"], (
        "`kubectl get -L multiqueue.dev/cluster` shows none"
    )
    _, rows = await inspect.status(config, contexts)
    row = next(r for r in rows if r.key == "default/pinned")
    assert (row.worker, row.state, row.reason) == ("-", "Waiting", "NoWorker")
    with pytest.raises(joblogs.LogsError, match="has not been dispatched to a worker"):
        await joblogs.logs(config, "pinned", "default", joblogs.LogOptions(), contexts)


async def test_logs_are_never_read_from_a_job_of_the_same_name_made_for_another(
    dispatching_clusters: Clusters,
) -> None:
    """A Job of the same name on the worker that this manager did not make for this Job: its logs are refused,
    and the Job is left alone."""
    dispatching_clusters.in_process("stops the in-process manager while it swaps a mirror for another Job")
    clusters = dispatching_clusters
    assert clusters.local is not None and clusters.local.manager is not None
    config = clusters.local.manager.config
    management = clusters.client()
    await management.create(JOBS, managed("twin", "echo ours"), "default")
    await clusters.wait_for(JOBS, "default", "twin", has_condition("Complete"))
    worker, _ = await _mirror(clusters, "twin")
    # With the manager stopped, someone replaces the mirror by a Job of their own of that name.
    await clusters.local.manager.stop()
    clusters.local.manager = None
    worker_client: KubeClient = clusters.client(worker)
    await worker_client.delete(JOBS, "twin", "default", propagation="Background")
    await clusters.wait_gone(JOBS, "default", "twin", cluster=worker)
    await worker_client.create(JOBS, job_body("twin", "echo theirs"), "default")
    await clusters.wait_for(JOBS, "default", "twin", has_condition("Complete"), cluster=worker)
    with pytest.raises(joblogs.LogsError, match="was not made for this Job"):
        await joblogs.logs(config, "twin", "default", joblogs.LogOptions())
    theirs = await worker_client.get(JOBS, "twin", "default")
    assert "multiqueue.dev/origin" not in (theirs["metadata"].get("labels") or {})
