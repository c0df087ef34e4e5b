"""Placement's plugins one by one: each filter's verdict, the scores, the worker affinity and the summary line."""

from __future__ import annotations

import json
from typing import Any

import pytest

from multiqueue.api.labelsyntax import parse_label_selector
from multiqueue.dispatch.adapters.job import BatchJobAdapter
from multiqueue.dispatch.affinity import (
    NO_AFFINITY,
    WORKER_AFFINITY_ANNOTATION,
    Affinity,
    AffinityError,
    parse_affinity,
)
from multiqueue.dispatch.decision import Observed
from multiqueue.dispatch.lifecycle import decide
from multiqueue.dispatch.mirror import Identity
from multiqueue.dispatch.placement import WaitReason, WorkerView, WorkerViews, evaluate, place
from multiqueue.dispatch.placement_filters import (
    Asked,
    Filter,
    Verdict,
    accepting,
    active,
    affinity,
    could_ever_fit,
    fits_now,
    not_excluded,
    pinned,
    selector,
    serves_kind,
)
from multiqueue.dispatch.placement_scores import affinity_scores, best, policy_scores
from multiqueue.dispatch.placement_summary import summary
from tests.unit.jobfixtures import job


def view(name: str, **extra: Any) -> WorkerView:
    return WorkerView(name, extra.pop("labels", {}), extra.pop("active", True), extra.pop("load", 0), **extra)


EU = view("eu", labels={"region": "eu"})
US = view("us", labels={"region": "us", "gpu": "a100"})
BUSY = view("busy", capacity={"cpu": 4.0}, free={"cpu": 0.5})
FULL = view("full", max_jobs=2, load=2)
HELD = view("held", held=True)
ZERO = view("zero", max_jobs=0)
IDLE = view("idle", active=False, reason="Unauthorized")
GONE = view("gone", accepting=False)
NO_JOBSETS = view("nojs", missing_kinds=frozenset({"JobSet"}))
US_ONLY = parse_affinity(json.dumps({"required": [{"matchLabels": {"region": "us"}}]}))


@pytest.mark.parametrize(
    ("check", "asked", "worker", "verdict"),
    [
        pytest.param(not_excluded, Asked(excluded=frozenset({"eu"})), EU, Verdict("Excluded", "Excluded", "refused this Job's mirror lately, or is lost"), id="excluded"),
        pytest.param(not_excluded, Asked(), EU, Verdict("Excluded"), id="not-excluded"),
        pytest.param(pinned, Asked(pinned="us"), EU, Verdict("Pinned", "NotPinned", "is not the pinned worker", "us"), id="not-the-pinned-one"),
        pytest.param(pinned, Asked(pinned="eu"), EU, Verdict("Pinned"), id="the-pinned-one"),
        pytest.param(pinned, Asked(), EU, Verdict("Pinned"), id="no-pin"),
        pytest.param(accepting, Asked(), GONE, Verdict("Accepting", "Draining", "is draining"), id="draining"),
        pytest.param(accepting, Asked(), EU, Verdict("Accepting"), id="accepting"),
        pytest.param(serves_kind, Asked(kind="JobSet"), NO_JOBSETS, Verdict("ServesKind", "KindNotServed", "does not serve JobSet"), id="no-crd"),
        pytest.param(serves_kind, Asked(kind="Job"), NO_JOBSETS, Verdict("ServesKind"), id="serves-its-other-kinds"),
        pytest.param(selector, Asked(selector=parse_label_selector("region=us")), EU, Verdict("Selector", "SelectorMismatch", "does not match the selector", "region=us"), id="selector-mismatch"),
        pytest.param(selector, Asked(selector=parse_label_selector("region=us")), US, Verdict("Selector"), id="selector-match"),
        pytest.param(affinity, Asked(affinity=US_ONLY), EU, Verdict("Affinity", "AffinityMismatch", "does not match the required worker affinity"), id="affinity-mismatch"),
        pytest.param(affinity, Asked(affinity=US_ONLY), US, Verdict("Affinity"), id="affinity-match"),
        pytest.param(could_ever_fit, Asked(demand={"cpu": 8.0}), BUSY, Verdict("CouldEverFit", "NeverFits", "asks more cpu than it has in all", "cpu 4"), id="more-than-all"),
        pytest.param(could_ever_fit, Asked(demand={"cpu": 4.0}), BUSY, Verdict("CouldEverFit"), id="exactly-all"),
        pytest.param(could_ever_fit, Asked(), ZERO, Verdict("CouldEverFit", "NeverFits", "takes no Jobs", "maxJobs 0"), id="max-jobs-zero"),
        pytest.param(could_ever_fit, Asked(demand={"cpu": 99.0}), EU, Verdict("CouldEverFit"), id="no-quota"),
        pytest.param(active, Asked(), IDLE, Verdict("Active", "Inactive", "is not active", "Unauthorized"), id="inactive"),
        pytest.param(active, Asked(), EU, Verdict("Active"), id="active"),
        pytest.param(fits_now, Asked(demand={"cpu": 1.0}), BUSY, Verdict("FitsNow", "NoCapacity", "has no capacity now", "cpu 3.5/4"), id="cpu-in-use"),
        pytest.param(fits_now, Asked(demand={"cpu": 0.5}), BUSY, Verdict("FitsNow"), id="just-fits"),
        pytest.param(fits_now, Asked(), FULL, Verdict("FitsNow", "NoCapacity", "has no capacity now", "jobs 2/2"), id="max-jobs"),
        pytest.param(fits_now, Asked(), HELD, Verdict("FitsNow", "NoCapacity", "holds its capacity for higher-ranked Jobs"), id="held"),
    ],
)  # fmt: skip
def test_filter(check: Filter, asked: Asked, worker: WorkerView, verdict: Verdict) -> None:
    assert check(asked, worker) == verdict


@pytest.mark.parametrize(
    ("text", "labels", "allows", "weight"),
    [
        pytest.param(None, {}, True, 0, id="none"),
        pytest.param("", {}, True, 0, id="empty"),
        pytest.param('{"required": [{"matchLabels": {"region": "us"}}]}', {"region": "us"}, True, 0, id="required-match"),
        pytest.param('{"required": [{"matchLabels": {"region": "us"}}]}', {"region": "eu"}, False, 0, id="required-mismatch"),
        pytest.param('{"required": [{"matchLabels": {"region": "us"}}, {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]}', {"gpu": "x"}, True, 0, id="any-term"),
        pytest.param('{"required": [{"matchExpressions": [{"key": "region", "operator": "NotIn", "values": ["eu"]}]}]}', {"region": "eu"}, False, 0, id="not-in"),
        pytest.param('{"preferred": [{"weight": 30, "matchLabels": {"region": "us"}}, {"weight": 5, "matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]}', {"region": "us", "gpu": "a"}, True, 35, id="weights-add"),
        pytest.param('{"preferred": [{"weight": 30, "matchLabels": {"region": "us"}}]}', {"region": "eu"}, True, 0, id="no-preference-met"),
    ],
)  # fmt: skip
def test_affinity(text: str | None, labels: dict[str, str], allows: bool, weight: int) -> None:
    parsed = parse_affinity(text)
    assert (parsed.allows(labels), parsed.weight(labels)) == (allows, weight)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("{", "not JSON"),
        pytest.param("[]", "must be a JSON object"),
        pytest.param('{"require": []}', "unknown field 'require'"),
        pytest.param('{"required": {}}', "required must be a list"),
        pytest.param('{"required": [1]}', "required[0] must be an object"),
        pytest.param('{"required": [{"matchLabel": {}}]}', "required[0] has unknown field 'matchLabel'"),
        pytest.param('{"required": [{"matchExpressions": [{"key": "a", "operator": "Near"}]}]}', "required[0]: "),
        pytest.param('{"preferred": [{"matchLabels": {"a": "b"}}]}', "preferred[0].weight must be a whole number from 1 to 100"),
        pytest.param('{"preferred": [{"weight": 101, "matchLabels": {"a": "b"}}]}', "preferred[0].weight must be"),
        pytest.param('{"preferred": [{"weight": true}]}', "preferred[0].weight must be"),
    ],
)  # fmt: skip
def test_a_malformed_affinity_says_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(AffinityError, match=f"^invalid {WORKER_AFFINITY_ANNOTATION}: .*") as raised:
        parse_affinity(text)
    assert message in str(raised.value)


W1, W2, W3 = view("w1", load=2), view("w2", load=1, labels={"tier": "gold"}), view("w3", load=1)
GOLD = parse_affinity('{"preferred": [{"weight": 10, "matchLabels": {"tier": "gold"}}]}')


@pytest.mark.parametrize(
    ("policy", "turn", "scores", "chosen", "preferring"),
    [
        pytest.param("LeastLoaded", 0, {"w1": -2.0, "w2": -1.0, "w3": -1.0}, "w2", NO_AFFINITY, id="least-loaded-tie-by-name"),
        pytest.param("Ordered", 0, {"w1": 0.0, "w2": -1.0, "w3": -2.0}, "w1", NO_AFFINITY, id="ordered"),
        pytest.param("RoundRobin", 2, {"w1": 0.0, "w2": 0.0, "w3": 1.0}, "w3", NO_AFFINITY, id="round-robin"),
        pytest.param("Ordered", 0, {"w1": 0.0, "w2": -1.0, "w3": -2.0}, "w2", GOLD, id="preference-before-policy"),
        pytest.param("RoundRobin", 1, {"w1": 0.0, "w2": 1.0, "w3": 0.0}, "w2", GOLD, id="only-the-preferred-tie-takes-turns"),
    ],
)  # fmt: skip
def test_scores(policy: str, turn: int, scores: dict[str, float], chosen: str, preferring: Affinity) -> None:
    assert policy_scores(policy, [W1, W2, W3], turn) == scores
    assert best(policy, [W1, W2, W3], turn, preferring) == chosen


def test_affinity_scores() -> None:
    assert affinity_scores(GOLD, [W1, W2]) == {"w1": 0, "w2": 10}


def _v(text: str = "", detail: str = "", code: str = "X") -> tuple[Verdict, ...]:
    return (Verdict("F", code, text, detail),) if text else (Verdict("F"),)


@pytest.mark.parametrize(
    ("verdicts", "line"),
    [
        pytest.param({}, "0/0 workers can take this Job: no worker is configured", id="none"),
        pytest.param({"w1": _v()}, "1/1 workers can take this Job", id="all-pass"),
        pytest.param(
            {
                "worker-1": _v("has no capacity now", "cpu 3.5/4"),
                "worker-2": _v("asks more cpu than it has in all", "cpu 4"),
                "worker-3": _v("does not match the selector", "region=eu", "SelectorMismatch"),
            },
            "0/3 workers can take this Job: 1 asks more cpu than it has in all (worker-2: cpu 4), "
            "1 does not match the selector region=eu (worker-3), 1 has no capacity now (worker-1: cpu 3.5/4)",
            id="ties-in-the-phrases-order",
        ),
        pytest.param(
            {"a": _v("is draining"), "b": _v("is draining"), "c": _v("is not active", "Unauthorized"), "d": _v()},
            "1/4 workers can take this Job: 2 are draining (a, b), 1 is not active (c: Unauthorized)",
            id="most-first-plural",
        ),
        pytest.param(
            {"a": (Verdict("P", "NotPinned", "is not the pinned worker", "b"), Verdict("D", "Draining", "is draining")), "b": (Verdict("P"), Verdict("D", "Draining", "is draining"))},
            "0/2 workers can take this Job: 1 is not the pinned worker b (a), 1 is draining (b)",
            id="first-failure-counts",
        ),
        pytest.param(
            {"a": _v("asks more cpu than it has in all", "cpu 4"), "b": _v("asks more cpu than it has in all", "cpu 2")},
            "0/2 workers can take this Job: 2 ask more cpu than they have in all (a: cpu 4, b: cpu 2)",
            id="plural-never-fits",
        ),
        pytest.param(
            {"a": _v("has no capacity now", "jobs 2/2"), "b": _v("has no capacity now", "cpu 4/4")},
            "0/2 workers can take this Job: 2 have no capacity now (a: jobs 2/2, b: cpu 4/4)",
            id="details-per-worker",
        ),
    ],
)  # fmt: skip
def test_summary(verdicts: dict[str, tuple[Verdict, ...]], line: str) -> None:
    assert summary(verdicts) == line


def _with(annotation: str) -> dict[str, Any]:
    body = job()
    body["metadata"]["annotations"] = {WORKER_AFFINITY_ANNOTATION: annotation}
    return body


def test_a_required_affinity_places_only_where_it_allows() -> None:
    assert (
        place(_with('{"required": [{"matchLabels": {"region": "us"}}]}'), [EU, US], "Ordered").worker == "us"
    )
    waiting = place(_with('{"required": [{"matchLabels": {"region": "asia"}}]}'), [EU, US], "Ordered")
    assert (waiting.reason, waiting.message) == (
        WaitReason.NO_MATCHING_WORKER,
        "no worker matches the required worker affinity",
    )
    assert (
        waiting.summary
        == "0/2 workers can take this Job: 2 do not match the required worker affinity (eu, us)"
    )


def test_a_preferred_affinity_wins_over_the_policy() -> None:
    preferring = _with('{"preferred": [{"weight": 1, "matchLabels": {"gpu": "a100"}}]}')
    assert place(preferring, [EU, US], "Ordered").worker == "us"
    assert place(job(), [EU, US], "Ordered").worker == "eu"


def test_a_malformed_affinity_makes_the_job_wait_saying_why() -> None:
    waiting = place(_with('{"required": "us"}'), [EU, US], "Ordered")
    assert waiting.worker is None and waiting.reason == WaitReason.INVALID_AFFINITY
    assert waiting.message == f"invalid {WORKER_AFFINITY_ANNOTATION}: required must be a list"


def test_evaluate_gives_every_worker_its_verdicts_and_the_survivors_scores() -> None:
    shown = evaluate(job(), [EU, BUSY, IDLE], "LeastLoaded", demand={"cpu": 1.0})
    assert shown.placement.worker == "eu"
    assert {n: [v.code for v in vs if not v.passes] for n, vs in shown.verdicts.items()} == {
        "eu": [],
        "busy": ["NoCapacity"],
        "idle": ["Inactive"],
    }
    assert (shown.affinity, shown.policy) == ({"eu": 0}, {"eu": -0.0})


def test_evaluate_scores_the_workers_it_chooses_among_when_the_best_weighted_one_is_slow() -> None:
    """A slow worker takes a Job only when no responsive one fits: the policy scores shown are those of the
    responsive workers tied on their top weight, the ones the placement was chosen from."""
    preferring = _with('{"preferred": [{"weight": 10, "matchLabels": {"region": "us"}}]}')
    slow_us = view("us", labels={"region": "us"}, slow=True)
    shown = evaluate(preferring, [EU, slow_us, view("eu-2", load=3)], "LeastLoaded")
    assert shown.placement.worker == "eu"
    assert shown.affinity == {"eu": 0, "us": 10, "eu-2": 0}
    assert shown.policy == {"eu": -0.0, "eu-2": -3.0}
    assert (
        evaluate(preferring, [EU, slow_us], "LeastLoaded", exclude=frozenset({"eu"})).placement.worker == "us"
    )


def test_a_job_that_waits_carries_the_summary_of_every_worker() -> None:
    tiny = view("tiny", capacity={"cpu": 0.5}, free={"cpu": 0.5})
    waiting = place(job(), [BUSY, IDLE, tiny], "LeastLoaded", demand={"cpu": 1.0})
    assert waiting.reason == WaitReason.NO_CAPACITY
    assert waiting.summary == (
        "0/3 workers can take this Job: 1 asks more cpu than it has in all (tiny: cpu 0.5), "
        "1 is not active (idle: Unauthorized), 1 has no capacity now (busy: cpu 3.5/4)"
    )


def test_a_malformed_affinity_is_a_warning_event_and_the_job_waits() -> None:
    body = _with('{"preferred": [{"weight": 0, "matchLabels": {"region": "us"}}]}')
    body["spec"]["managedBy"] = "multiqueue.dev/dispatcher"
    identity = Identity("multiqueue", "multiqueue.dev/dispatcher")
    actions = decide(
        BatchJobAdapter(), identity, "LeastLoaded", Observed(body, {}, WorkerViews.of([EU, US]), {}, 0.0)
    )
    assert actions.place_on is None and actions.create_mirror is None
    assert [(e.type, e.reason, e.message) for e in actions.events] == [
        (
            "Warning",
            "InvalidAffinity",
            f"invalid {WORKER_AFFINITY_ANNOTATION}: preferred[0].weight must be a whole number from 1 to 100",
        )
    ]
