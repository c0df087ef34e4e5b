"""The declared adapter, on JobSet's defaults and on a kind that keeps its fields elsewhere: what the dispatcher
reads of a job-like kind, the mirror it makes, the status it takes back, and placement of a JobSet by its pods."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from multiqueue.api.types import Resource
from multiqueue.dispatch.adapters import ADAPTERS, adapters_of
from multiqueue.dispatch.adapters.declared import EACH, JOBSET, DeclaredAdapter, DeclaredKind, path_of
from multiqueue.dispatch.config import ManagerConfig
from multiqueue.dispatch.decision import Observed
from multiqueue.dispatch.generic import PodSet, StatusRefused, demand
from multiqueue.dispatch.lifecycle import decide
from multiqueue.dispatch.mirror import Identity
from multiqueue.dispatch.placement import WaitReason, WorkerView, WorkerViews
from tests.support.docblocks import yaml_block

MANAGED_BY = "multiqueue.dev/dispatcher"
ADAPTER = DeclaredAdapter(JOBSET)


def replicated(
    name: str, replicas: int, parallelism: int, cpu: str, priority: str | None = None
) -> dict[str, Any]:
    pod_spec: dict[str, Any] = {"containers": [{"name": "main", "resources": {"requests": {"cpu": cpu}}}]}
    if priority is not None:
        pod_spec["priorityClassName"] = priority
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "spec": {"parallelism": parallelism, "completions": parallelism, "template": {"spec": pod_spec}}
        },
    }


def jobset(*rjobs: dict[str, Any], status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "train", "namespace": "default", "uid": "u-1", "resourceVersion": "7"},
        "spec": {
            "managedBy": MANAGED_BY,
            "replicatedJobs": list(rjobs),
            "network": {"enableDNSHostnames": True},
            **spec,
        },
        "status": status or {},
    }


def condition(type_: str, reason: str = "R") -> dict[str, Any]:
    return {
        "type": type_,
        "status": "True",
        "reason": reason,
        "message": "m",
        "lastTransitionTime": "2026-11-28T10:00:00Z",
    }


def test_jobset_is_dispatched_by_the_name_a_config_uses() -> None:
    adapter = ADAPTERS["JobSet"]()
    assert adapter.resource == Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet")


@pytest.mark.parametrize(
    ("obj", "managed_by", "suspended", "finished"),
    [
        pytest.param(jobset(), MANAGED_BY, False, None, id="running"),
        pytest.param(jobset(suspend=True), MANAGED_BY, True, None, id="suspended"),
        pytest.param({"spec": {"managedBy": ""}}, None, False, None, id="empty-managedBy-is-none"),
        pytest.param(jobset(status={"conditions": [condition("Completed", "AllJobsCompleted")]}), MANAGED_BY, False, (True, "AllJobsCompleted"), id="completed"),
        pytest.param(jobset(status={"conditions": [condition("Failed", "ReachedMaxRestarts")]}), MANAGED_BY, False, (False, "ReachedMaxRestarts"), id="failed"),
        pytest.param(jobset(status={"conditions": [{**condition("Completed"), "status": "False"}]}), MANAGED_BY, False, None, id="completed-false-is-not-finished"),
    ],
)  # fmt: skip
def test_what_the_dispatcher_reads_of_a_jobset(
    obj: dict[str, Any], managed_by: str | None, suspended: bool, finished: tuple[bool, str] | None
) -> None:
    assert ADAPTER.managed_by(obj) == managed_by
    assert ADAPTER.is_suspended(obj) is suspended
    assert ADAPTER.is_finished(obj) is (finished is not None)
    end = ADAPTER.finish(obj)
    assert (None if end is None else (end.succeeded, end.reason)) == finished


def test_a_jobset_mirror_loses_only_managedby_and_suspend_and_keeps_every_other_field() -> None:
    user = jobset(replicated("workers", 2, 2, "1"), suspend=True, failurePolicy={"maxRestarts": 3})
    user["metadata"]["labels"] = {"team": "a"}
    mirror = ADAPTER.build_mirror(user, "multiqueue")
    assert "managedBy" not in mirror["spec"] and mirror["spec"]["suspend"] is False
    assert mirror["spec"]["failurePolicy"] == {"maxRestarts": 3}
    assert mirror["spec"]["network"] == {"enableDNSHostnames": True}
    assert mirror["spec"]["replicatedJobs"] == user["spec"]["replicatedJobs"]
    assert "uid" not in mirror["metadata"] and "resourceVersion" not in mirror["metadata"]
    assert mirror["metadata"]["labels"]["team"] == "a"
    assert user["spec"]["managedBy"] == MANAGED_BY, "the user's object is left as it was"
    assert ADAPTER.suspend_patch(True) == {"spec": {"suspend": True}}


@pytest.mark.parametrize(
    ("rjobs", "pod_sets", "asked"),
    [
        pytest.param([replicated("leader", 1, 1, "1")], [PodSet("leader", 1, {"cpu": 1.0})], {"cpu": 1.0}, id="one"),
        pytest.param(
            [replicated("a", 1, 2, "500m"), replicated("b", 1, 2, "500m"), replicated("c", 1, 2, "500m")],
            [PodSet("a", 2, {"cpu": 0.5}), PodSet("b", 2, {"cpu": 0.5}), PodSet("c", 2, {"cpu": 0.5})],
            {"cpu": 3.0},
            id="three-replicated-jobs-of-two-pods",
        ),
        pytest.param([replicated("w", 4, 2, "250m")], [PodSet("w", 8, {"cpu": 0.25})], {"cpu": 2.0}, id="replicas-times-parallelism"),
    ],
)  # fmt: skip
def test_a_jobset_asks_for_every_pod_of_every_replicated_job(
    rjobs: list[dict[str, Any]], pod_sets: list[PodSet], asked: dict[str, float]
) -> None:
    assert ADAPTER.pod_sets(jobset(*rjobs)) == pod_sets
    assert demand(ADAPTER.pod_sets(jobset(*rjobs))) == asked


def test_a_jobset_too_big_for_every_worker_never_fits_and_names_them() -> None:
    user = jobset(replicated("a", 1, 2, "1"), replicated("b", 1, 2, "1"), replicated("c", 1, 2, "1"))
    workers = [
        WorkerView("worker-1", {}, True, 0, free={"cpu": 4.0}, capacity={"cpu": 4.0}),
        WorkerView("worker-2", {}, True, 0, free={"cpu": 2.0}, capacity={"cpu": 2.0}),
    ]
    actions = decide(
        ADAPTER,
        Identity("multiqueue", MANAGED_BY),
        "LeastLoaded",
        Observed(user, {}, WorkerViews.of(workers), {}, 0.0),
    )
    assert actions.place_on is None and actions.waiting is not None
    assert actions.waiting.reason == WaitReason.NEVER_FITS
    assert "worker-1" in actions.waiting.message and "worker-2" in actions.waiting.message


@pytest.mark.parametrize(
    ("user_status", "mirror_status", "synced"),
    [
        pytest.param({}, {}, None, id="nothing-new"),
        pytest.param({}, {"restarts": 1, "replicatedJobsStatus": [{"name": "w", "active": 2}]}, {"restarts": 1, "replicatedJobsStatus": [{"name": "w", "active": 2}]}, id="taken-whole"),
        pytest.param({"conditions": [condition("Completed")]}, {"conditions": [condition("Completed")], "restarts": 0}, {"conditions": [condition("Completed")], "restarts": 0}, id="still-completed"),
    ],
)  # fmt: skip
def test_the_users_jobset_takes_the_mirrors_status_whole(
    user_status: dict[str, Any], mirror_status: dict[str, Any], synced: dict[str, Any] | None
) -> None:
    assert ADAPTER.synced_status(jobset(status=user_status), jobset(status=mirror_status)) == synced


def test_a_terminal_condition_never_goes_back() -> None:
    with pytest.raises(StatusRefused, match="Completed"):
        ADAPTER.synced_status(
            jobset(status={"conditions": [condition("Completed")]}), jobset(status={"restarts": 0})
        )


def test_priority_comes_from_the_pod_templates_and_a_rerun_keeps_restarts_but_not_what_ran() -> None:
    user = jobset(
        replicated("leader", 1, 1, "1"),
        replicated("workers", 2, 2, "1", priority="high"),
        status={
            "restarts": 2,
            "replicatedJobsStatus": [{"name": "workers", "active": 2, "ready": 2, "succeeded": 1}],
        },
    )
    assert ADAPTER.priority_class(user) == "high"
    assert ADAPTER.priority_class(jobset(replicated("a", 1, 1, "1"))) is None
    before = copy.deepcopy(user)
    assert ADAPTER.rerun_status(user) == {
        "restarts": 2,
        "replicatedJobsStatus": [{"name": "workers", "active": 0, "ready": 0, "succeeded": 1}],
    }
    assert user == before


@pytest.mark.parametrize(
    ("status", "progress"),
    [
        ({}, None),  # never restarted: a new mirror starts from nothing
        ({"restarts": 0, "replicatedJobsStatus": []}, None),
        ({"restarts": 2, "restartsCountTowardsMax": 1}, {"restarts": 2, "restartsCountTowardsMax": 1}),
        ({"restarts": 1, "terminalState": "Failed"}, {"restarts": 1}),  # only the counts carry over
    ],
)
def test_a_new_mirror_after_a_worker_loss_goes_on_from_the_restarts_counted(
    status: dict[str, Any], progress: dict[str, Any] | None
) -> None:
    assert ADAPTER.progress(jobset(replicated("a", 1, 1, "1"), status=status)) == progress


# A kind that keeps its fields elsewhere: told by its declaration alone.
TRAINER = DeclaredKind(
    Resource("example.com", "v1", "trainers", "Trainer"),
    managed_by=("spec", "runPolicy", "managedBy"),
    suspend=("spec", "runPolicy", "suspend"),
    succeeded="Succeeded",
    replicated_jobs=("spec", "stages"),
    priority_class=("spec", "runPolicy", "priorityClass"),
    running=(("status", "stages", EACH, "running"),),
)


def test_a_kind_declared_with_its_own_paths() -> None:
    adapter = DeclaredAdapter(TRAINER)
    obj = {
        "metadata": {"name": "t", "namespace": "default", "uid": "u"},
        "spec": {
            "runPolicy": {"managedBy": MANAGED_BY, "suspend": True, "priorityClass": "low"},
            "stages": [replicated("s", 3, 1, "2")],
        },
        "status": {
            "conditions": [condition("Succeeded", "Done")],
            "stages": [{"name": "s", "running": 3, "done": 3}],
        },
    }
    assert adapter.managed_by(obj) == MANAGED_BY and adapter.is_suspended(obj)
    assert adapter.finish(obj) is not None and adapter.is_finished(obj)
    assert adapter.pod_sets(obj) == [PodSet("s", 3, {"cpu": 2.0})]
    assert adapter.priority_class(obj) == "low"
    mirror = adapter.build_mirror(obj, "multiqueue")
    assert mirror["spec"]["runPolicy"] == {"suspend": False, "priorityClass": "low"}
    assert adapter.suspend_patch(True) == {"spec": {"runPolicy": {"suspend": True}}}
    assert adapter.rerun_status(obj)["stages"] == [{"name": "s", "running": 0, "done": 3}]


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("spec.managedBy", ("spec", "managedBy")),
        ("status.replicatedJobsStatus[].active", ("status", "replicatedJobsStatus", EACH, "active")),
        ("spec.stages[]", ("spec", "stages", EACH)),
    ],
)
def test_a_config_path_reads_as_keys_and_list_steps(text: str, path: tuple[str, ...]) -> None:
    assert path_of(text) == path


def test_a_kind_declared_in_the_manager_config_has_jobsets_defaults_where_it_names_nothing() -> None:
    config = ManagerConfig.model_validate(
        {
            "management": {"kubeconfig": "/k"},
            "kinds": [
                "Job",
                {"group": "example.com", "version": "v1", "kind": "Trainer", "plural": "trainers"},
            ],
        }
    )
    job, trainer = adapters_of(config.kinds)
    assert job.resource.kind == "Job"
    assert isinstance(trainer, DeclaredAdapter)
    assert trainer.kind == dataclasses.replace(
        JOBSET, resource=Resource("example.com", "v1", "trainers", "Trainer")
    )


@pytest.mark.parametrize(
    ("declared", "problem"),
    [
        pytest.param({"group": "g", "version": "v1", "kind": "K"}, "plural", id="plural-missing"),
        pytest.param({"group": "g", "version": "v1", "kind": "K", "plural": "ks", "suspend": "spec..x"}, "suspend", id="bad-path"),
        pytest.param({"group": "g", "version": "v1", "kind": "K", "plural": "ks", "managedby": "x"}, "managedby", id="unknown-key"),
    ],
)  # fmt: skip
def test_a_declared_kind_with_a_mistake_is_refused_naming_it(declared: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        ManagerConfig.model_validate({"management": {"kubeconfig": "/k"}, "kinds": [declared]})


def test_the_admin_guides_kinds_are_a_valid_config_of_three_kinds() -> None:
    kinds = yaml.safe_load(yaml_block("docs/admin-guide.md", "## Kinds beyond Job"))
    config = ManagerConfig.model_validate({"management": {"kubeconfig": "/k"}, **kinds})
    assert [a.resource.kind for a in adapters_of(config.kinds)] == ["Job", "JobSet", "Trainer"]
    trainer = adapters_of(config.kinds)[2]
    assert isinstance(trainer, DeclaredAdapter) and trainer.kind == dataclasses.replace(
        TRAINER, priority_class=None
    )
