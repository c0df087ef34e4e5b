"""A kind the dispatcher has never seen: the example JobGroup CRD, dispatched through its adapter alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from multiqueue.api.types import CRDS
from multiqueue.dispatch.adapters.jobgroup import JobGroupAdapter
from multiqueue.dispatch.manager import Manager
from multiqueue.dispatch.mirror import CLUSTER_LABEL, FINALIZER_PREFIX, ORIGIN_LABEL
from tests.e2e.conftest import Clusters, has_condition

MIRROR_FINALIZER = FINALIZER_PREFIX + "multiqueue"  # the finalizer of the manager named multiqueue


pytestmark = pytest.mark.e2e
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
JOBGROUPS = JobGroupAdapter.resource


def _established(crd: dict[str, Any]) -> bool:
    return has_condition("Established")(crd)


async def test_jobgroup_is_dispatched_suspended_and_mirrored_back(dispatching_clusters: Clusters) -> None:
    clusters = dispatching_clusters
    assert clusters.local is not None and clusters.local.manager is not None
    crd = yaml.safe_load((EXAMPLES / "jobgroup-crd.yaml").read_text())
    for name in ("management", "worker-1", "worker-2"):
        await clusters.client(name).create(CRDS, crd)
        await clusters.wait_for(CRDS, "", crd["metadata"]["name"], _established, cluster=name)
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

    await management.patch(JOBGROUPS, "trainer", {"spec": {"suspend": True}}, "default")
    await clusters.wait_for(
        JOBGROUPS, "default", "trainer", lambda g: g["spec"].get("suspend") is True, cluster=worker
    )

    # No JobGroup controller runs on the workers here: the test plays it, finishing the mirror.
    status = {
        "succeeded": 4,
        "conditions": [{"type": "Completed", "status": "True", "reason": "AllJobsSucceeded"}],
    }
    await clusters.client(worker).patch(
        JOBGROUPS, "trainer", {"status": status}, "default", subresource="status"
    )
    done = await clusters.wait_for(JOBGROUPS, "default", "trainer", has_condition("Completed"))
    assert done["status"]["succeeded"] == 4
    assert done["metadata"]["uid"] == created["metadata"]["uid"]
    await clusters.wait_gone(JOBGROUPS, "default", "trainer", cluster=worker)
    await clusters.wait_for(JOBGROUPS, "default", "trainer", lambda g: not g["metadata"].get("finalizers"))
