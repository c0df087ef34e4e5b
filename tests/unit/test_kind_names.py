"""How ``multiqueue logs`` (and the dashboard) find a kind from the TYPE a person writes, as kubectl takes it."""

from __future__ import annotations

import pytest

from multiqueue.dispatch.config import ManagerConfig
from multiqueue.dispatch.inspect import UnknownKind, kind_named

DECLARED = {
    "group": "ray.io",
    "version": "v1",
    "kind": "RayJob",
    "plural": "rayjobs",
    "replicatedJobs": "spec.groups",
}


@pytest.mark.parametrize(
    ("written", "kinds", "found"),
    [
        ("job", ["Job"], "Job"),
        ("jobs", ["Job"], "Job"),
        ("Job", ["Job"], "Job"),
        ("jobs.batch", ["Job"], "Job"),
        ("jobset", ["Job", "JobSet"], "JobSet"),
        ("JobSets", ["Job", "JobSet"], "JobSet"),
        ("jobsets.jobset.x-k8s.io", ["Job", "JobSet"], "JobSet"),
        ("jobset.jobset.x-k8s.io", ["Job", "JobSet"], "JobSet"),
        # A kind multiqueue knows is found when the config (or no config) does not name it.
        ("jobset", ["Job"], "JobSet"),
        ("jobgroups", ["Job"], "JobGroup"),
        # A kind declared in the config.
        ("rayjob", ["Job", DECLARED], "RayJob"),
        ("rayjobs.ray.io", ["Job", DECLARED], "RayJob"),
    ],
)
def test_a_type_names_a_kind_as_kubectl_takes_it(written: str, kinds: list[object], found: str) -> None:
    config = ManagerConfig.model_validate({"management": {}, "kinds": kinds})
    assert kind_named(config, written).resource.kind == found


@pytest.mark.parametrize(
    ("written", "message"),
    [
        ("jobsett", 'no kind named "jobsett": use one of Job, JobGroup, JobSet'),
        ("jobs.apps", 'no kind named "jobs.apps": use one of Job, JobGroup, JobSet'),
        ("rayjob", 'no kind named "rayjob": use one of Job, JobGroup, JobSet'),
    ],
)
def test_an_unknown_type_names_the_kinds_there_are(written: str, message: str) -> None:
    with pytest.raises(UnknownKind) as raised:
        kind_named(ManagerConfig.model_validate({"management": {}, "kinds": ["Job"]}), written)
    assert str(raised.value) == message
