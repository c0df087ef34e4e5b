"""A kind the dispatcher has never seen: the example JobGroup CRD, dispatched through its adapter alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from multiqueue import telemetry
from multiqueue.api.types import CRDS
from multiqueue.dispatch import inspect
from multiqueue.dispatch.adapters.declared import JOBGROUP
from multiqueue.dispatch.config import ConfigError, DeclaredKind
from multiqueue.dispatch.manager import Manager
from multiqueue.dispatch.mirror import CLUSTER_LABEL, FINALIZER_PREFIX, ORIGIN_LABEL
from tests.e2e.conftest import Clusters, has_condition
from tests.e2e.test_dispatch_failures import wait_for_event

MIRROR_FINALIZER = FINALIZER_PREFIX + "multiqueue"  # the finalizer of the manager named multiqueue


pytestmark = pytest.mark.e2e
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
JOBGROUPS = JOBGROUP.resource


def _established(crd: dict[str, Any]) -> bool:
    return has_condition("Established")(crd)


async def _with_jobgroups(clusters: Clusters) -> None:
    crd = yaml.safe_load((EXAMPLES / "jobgroup-crd.yaml").read_text())
    for name in ("management", "worker-1", "worker-2"):
        await clusters.client(name).create(CRDS, crd)
        await clusters.wait_for(CRDS, "", crd["metadata"]["name"], _established, cluster=name)


async def _finish_mirror(clusters: Clusters, worker: str) -> None:
    """No JobGroup controller runs on the workers here: the test plays it, finishing the mirror of "trainer"."""
    status = {
        "succeeded": 4,
        "conditions": [{"type": "Completed", "status": "True", "reason": "AllJobsSucceeded"}],
    }
    await clusters.client(worker).patch(
        JOBGROUPS, "trainer", {"status": status}, "default", subresource="status"
    )


async def test_jobgroup_is_dispatched_suspended_and_mirrored_back(dispatching_clusters: Clusters) -> None:
    dispatching_clusters.in_process(
        "dispatches JobGroup, a CRD of the tests' own that deploy/'s config and RBAC leave out"
    )
    clusters = dispatching_clusters
    assert clusters.local is not None and clusters.local.manager is not None
    await _with_jobgroups(clusters)
    config = clusters.local.manager.config.model_copy(update={"kinds": ["Job", "JobGroup"]})
    await clusters.local.manager.stop()
    clusters.local.manager = Manager(config)
    await clusters.local.manager.start()

    management = clusters.client()
    body = yaml.safe_load((EXAMPLES / "jobgroup.yaml").read_text())
    created = await management.create(JOBGROUPS, body, "default")
    user = await clusters.wait_for(
        JOBGROUPS, "default", "trainer", lambda g: CLUSTER_LABEL in (g["metadata"].get("labels") or {})
    )
    assert MIRROR_FINALIZER in user["metadata"]["finalizers"]
    worker = user["metadata"]["labels"][CLUSTER_LABEL]
    mirror = await clusters.wait_for(JOBGROUPS, "default", "trainer", lambda g: True, cluster=worker)
    assert mirror["metadata"]["labels"][ORIGIN_LABEL] == "multiqueue"
    assert "managedBy" not in mirror["spec"] and mirror["spec"]["suspend"] is False

    # `multiqueue status` counts it: a row of its kind, and a Job running on its worker.
    workers, rows = await inspect.status(config)
    assert [(r.kind, r.key, r.worker, r.state) for r in rows] == [
        ("JobGroup", "default/trainer", worker, "Running")
    ]
    assert {w.name: w.running for w in workers}[worker] == 1

    await management.patch(JOBGROUPS, "trainer", {"spec": {"suspend": True}}, "default")
    await clusters.wait_for(
        JOBGROUPS, "default", "trainer", lambda g: g["spec"].get("suspend") is True, cluster=worker
    )

    await _finish_mirror(clusters, worker)
    done = await clusters.wait_for(JOBGROUPS, "default", "trainer", has_condition("Completed"))
    assert done["status"]["succeeded"] == 4
    assert done["metadata"]["uid"] == created["metadata"]["uid"]
    await clusters.wait_gone(JOBGROUPS, "default", "trainer", cluster=worker)
    await clusters.wait_for(JOBGROUPS, "default", "trainer", lambda g: not g["metadata"].get("finalizers"))


async def test_a_manager_of_jobgroups_alone_becomes_ready_and_counts_them(
    dispatching_clusters: Clusters,
) -> None:
    dispatching_clusters.in_process(
        "dispatches JobGroup, a CRD of the tests' own that deploy/'s config and RBAC leave out"
    )
    clusters = dispatching_clusters
    assert clusters.local is not None and clusters.local.manager is not None
    await _with_jobgroups(clusters)
    config = clusters.local.manager.config.model_copy(update={"kinds": ["JobGroup"]})
    await clusters.local.manager.stop()
    manager = clusters.local.manager = Manager(config)
    await manager.start()
    metrics = telemetry.Metrics()
    metrics.observe_manager(manager)
    runner, url = await telemetry.serve(manager, metrics, "127.0.0.1:0")
    try:
        await clusters.client().create(
            JOBGROUPS, yaml.safe_load((EXAMPLES / "jobgroup.yaml").read_text()), "default"
        )
        await clusters.wait_for(
            JOBGROUPS, "default", "trainer", lambda g: CLUSTER_LABEL in (g["metadata"].get("labels") or {})
        )
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{url}/readyz") as response:
                assert (response.status, await response.text()) == (200, "ok")
            async with http.get(f"{url}/metrics") as response:
                text = await response.text()
        assert 'multiqueue_managed_jobs{state="active"} 1.0' in text
    finally:
        await runner.cleanup()


async def test_a_kind_declared_only_in_the_config_is_dispatched_end_to_end(
    dispatching_clusters: Clusters,
) -> None:
    dispatching_clusters.in_process(
        "dispatches JobGroup, a CRD of the tests' own that deploy/'s config and RBAC leave out"
    )
    clusters = dispatching_clusters
    await _with_jobgroups(clusters)
    declared = DeclaredKind.model_validate(
        {
            "group": "example.multiqueue.dev",
            "version": "v1",
            "kind": "JobGroup",
            "plural": "jobgroups",
            "priorityClass": "spec.priorityClassName",
            "running": ["status.active"],
        }
    )
    await clusters.restart_manager(kinds=["Job", declared])
    management = clusters.client()
    created = await management.create(
        JOBGROUPS, yaml.safe_load((EXAMPLES / "jobgroup.yaml").read_text()), "default"
    )
    user = await clusters.wait_for(
        JOBGROUPS, "default", "trainer", lambda g: CLUSTER_LABEL in (g["metadata"].get("labels") or {})
    )
    worker = user["metadata"]["labels"][CLUSTER_LABEL]
    mirror = await clusters.wait_for(JOBGROUPS, "default", "trainer", lambda g: True, cluster=worker)
    assert "managedBy" not in mirror["spec"] and mirror["spec"]["suspend"] is False
    await _finish_mirror(clusters, worker)
    done = await clusters.wait_for(JOBGROUPS, "default", "trainer", has_condition("Completed"))
    assert done["status"]["succeeded"] == 4 and done["metadata"]["uid"] == created["metadata"]["uid"]


async def test_a_kind_the_management_cluster_does_not_serve_is_refused_at_start(
    dispatching_clusters: Clusters,
) -> None:
    clusters = dispatching_clusters
    local = clusters.in_process("starts a second manager in the test's process")
    assert local.manager is not None
    nowhere = DeclaredKind.model_validate(
        {"group": "example.com", "version": "v1", "kind": "Nowhere", "plural": "nowheres"}
    )
    manager = Manager(local.manager.config.model_copy(update={"kinds": ["Job", nowhere]}))
    try:
        with pytest.raises(ConfigError) as refused:
            await manager.start()
    finally:
        await manager.stop()
    message = str(refused.value)
    assert message.startswith(
        "kinds: Nowhere (example.com/v1 nowheres) is not served by the management cluster"
    )
    assert "install its CRD there" in message and "\n" not in message


async def test_a_status_the_management_cluster_refuses_is_told_in_an_event_and_the_next_one_is_written(
    dispatching_clusters: Clusters,
) -> None:
    """The management cluster's JobGroup CRD is stricter than the workers' (an older version of it, say): the
    mirror's status that it refuses is not written, a Warning says why, and a status it takes goes through."""
    clusters = dispatching_clusters
    clusters.in_process(
        "dispatches JobGroup, a CRD of the tests' own that deploy/'s config and RBAC leave out"
    )
    crd = yaml.safe_load((EXAMPLES / "jobgroup-crd.yaml").read_text())
    for name in ("worker-1", "worker-2"):
        await clusters.client(name).create(CRDS, crd)
        await clusters.wait_for(CRDS, "", crd["metadata"]["name"], _established, cluster=name)
    stricter = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    stricter["properties"] = {"succeeded": {"type": "integer", "maximum": 3}}
    await clusters.client().create(CRDS, crd)
    await clusters.wait_for(CRDS, "", crd["metadata"]["name"], _established)
    await clusters.restart_manager(kinds=["Job", "JobGroup"])
    management = clusters.client()
    await management.create(JOBGROUPS, yaml.safe_load((EXAMPLES / "jobgroup.yaml").read_text()), "default")
    user = await clusters.wait_for(
        JOBGROUPS, "default", "trainer", lambda g: CLUSTER_LABEL in (g["metadata"].get("labels") or {})
    )
    worker = user["metadata"]["labels"][CLUSTER_LABEL]
    await clusters.wait_for(JOBGROUPS, "default", "trainer", lambda g: True, cluster=worker)

    await _finish_mirror(clusters, worker)  # succeeded: 4, more than the management cluster's schema allows
    warning = await wait_for_event(management, "trainer", "StatusSyncRejected")
    assert warning["type"] == "Warning"
    assert warning["message"].startswith(
        f"status from worker {worker} not applied: the management cluster refused it (Invalid): "
    )
    assert "status.succeeded" in warning["message"]
    assert "succeeded" not in ((await management.get(JOBGROUPS, "trainer", "default")).get("status") or {})

    await clusters.client(worker).patch(
        JOBGROUPS, "trainer", {"status": {"succeeded": 3}}, "default", subresource="status"
    )
    done = await clusters.wait_for(JOBGROUPS, "default", "trainer", has_condition("Completed"))
    assert done["status"]["succeeded"] == 3, "a status it takes is written at once, back-off or not"
