"""Generated status writes to Jobs that no controller runs (a foreign ``spec.managedBy``), for comparing how two
API servers judge them.

Each transition is a Job spec, a starting status reached by valid writes, and one more status write. The writes
lean on the edges of the KEP-4368 rules: a Job finished correctly but for one detail, a counter one below its old
value, an index string that is almost well formed, a condition flipped back. Generation is seeded, so a
disagreement found once is found again.

Transitions that share a spec and a starting state share a base; a Job made for a base may take several writes
as long as each was refused (a refused write leaves the Job as it was).
"""

from __future__ import annotations

import copy
import dataclasses
import random
from datetime import UTC, datetime, timedelta
from typing import Any, Final

Obj = dict[str, Any]

SEED: Final = 20260117
FOREIGN_MANAGER: Final = "example.com/other"
BASES: Final = 380
WRITES_PER_BASE: Final = 3

T0: Final = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
UIDS: Final = ("0b7f6a4e-1111-4c1a-9d7e-000000000001", "0b7f6a4e-1111-4c1a-9d7e-000000000002")

TEMPLATE: Final[Obj] = {
    "spec": {
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "busybox:1.36", "command": ["true"]}],
    }
}

# Index strings that break the format in every way upstream's parser tells apart (``{n}`` is completions).
BAD_INDEXES: Final = (
    "{n}",
    "0-{n}",
    "1-1",
    "2-1",
    "1,0",
    "0,0",
    "0-2,1",
    "a",
    "1,,2",
    ",",
    "0,",
    "-1",
    "0-1-2",
    " 0",
    "99999999999999999999",
)
# completedIndexes and failedIndexes together: overlaps where a single pass over both lists in step does and does
# not see them (lists out of order, fragments that do not parse), and touching but disjoint lists.
INDEX_PAIRS: Final = (
    ("0-1,3", "3"),
    ("0,2", "1"),
    ("1-3", "0,2"),
    ("2,0", "0"),
    ("0,x,2", "2"),
    ("1", "x,1"),
    ("0-2", "1-3"),
    ("3", "0-2"),
    ("0", "1,0"),
    ("1,0", "0"),
    ("", "0"),
    ("0", ""),
)
# Index strings upstream's parser reads although they are unusual.
ODD_INDEXES: Final = ("+0", "00", "0-+1")


@dataclasses.dataclass(frozen=True)
class Transition:
    """One status write to judge, after the writes that reach its starting state."""

    id: str
    base: str
    spec: Obj
    start: tuple[Obj, ...]
    write: Obj
    intent: str


def stamp(seconds: float) -> str:
    """An RFC 3339 time ``seconds`` after T0; a fraction is written out (upstream keeps it on decode)."""
    moment = T0 + timedelta(seconds=seconds)
    if seconds == int(seconds):
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def stamp_elsewhere(seconds: float) -> str:
    """The same instant as ``stamp(seconds)``, written in UTC+02:00: a different spelling, no change."""
    moment = T0 + timedelta(seconds=seconds) + timedelta(hours=2)
    return moment.strftime("%Y-%m-%dT%H:%M:%S+02:00")


def condition(type_: str, status: str = "True", reason: str = "", at: float = 30) -> Obj:
    return {
        "type": type_,
        "status": status,
        "reason": reason or f"{type_}Reason",
        "message": f"{type_} is {status}",
        "lastProbeTime": stamp(at),
        "lastTransitionTime": stamp(at),
    }


REASONS: Final = {
    "Complete": "CompletionsReached",
    "Failed": "BackoffLimitExceeded",
    "FailureTarget": "BackoffLimitExceeded",
    "SuccessCriteriaMet": "CompletionsReached",
    "Suspended": "JobSuspended",
}
CONDITION_TYPES: Final = tuple(REASONS)


def _set_condition(status: Obj, type_: str, value: str, at: float = 30) -> None:
    conditions = [c for c in status.get("conditions", []) if c["type"] != type_]
    reason = REASONS[type_] if value == "True" else ("JobResumed" if type_ == "Suspended" else "")
    conditions.append(condition(type_, value, reason, at))
    status["conditions"] = conditions


def _drop_condition(status: Obj, type_: str) -> None:
    conditions = [c for c in status.get("conditions", []) if c["type"] != type_]
    if conditions:
        status["conditions"] = conditions
    else:
        status.pop("conditions", None)


def _true(status: Obj, type_: str) -> bool:
    return any(c["type"] == type_ and c["status"] == "True" for c in status.get("conditions", []))


def _format(indexes: list[int]) -> str:
    return ",".join(str(i) for i in sorted(indexes))


# --- specs ----------------------------------------------------------------------------------------------------


def _spec(rng: random.Random) -> Obj:
    spec: Obj = {"managedBy": FOREIGN_MANAGER, "template": copy.deepcopy(TEMPLATE)}
    if rng.random() < 0.6:
        completions = rng.choice([1, 2, 4, 6])
        spec["completionMode"] = "Indexed"
        spec["completions"] = completions
        spec["parallelism"] = rng.choice([completions, completions, max(1, completions - 1), 1])
        if rng.random() < 0.5:
            spec["backoffLimitPerIndex"] = rng.choice([0, 1, 2])
            if rng.random() < 0.6:
                spec["maxFailedIndexes"] = rng.randint(0, completions)
        if rng.random() < 0.35:
            rule: Obj = rng.choice(
                [
                    {"succeededIndexes": f"0-{completions - 1}" if completions > 1 else "0"},
                    {"succeededCount": 1},
                ]
            )
            spec["successPolicy"] = {"rules": [rule]}
    else:
        completions_choice = rng.choice([None, 0, 1, 3])
        if completions_choice is not None:
            spec["completions"] = completions_choice
        spec["parallelism"] = rng.choice([1, 2, 3])
    if rng.random() < 0.3:
        spec["suspend"] = True
    if rng.random() < 0.3:
        rules: list[Obj] = [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]
        if "backoffLimitPerIndex" in spec:
            rules.append({"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [43]}})
        rules.append({"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]})
        spec["podFailurePolicy"] = {"rules": rules}
    return spec


def _indexed(spec: Obj) -> bool:
    return bool(spec.get("completionMode") == "Indexed")


def _completions(spec: Obj) -> int | None:
    value = spec.get("completions")
    return value if isinstance(value, int) else None


# --- starting states ------------------------------------------------------------------------------------------


def _running(rng: random.Random, spec: Obj) -> Obj:
    active = rng.randint(1, 3)
    status: Obj = {"startTime": stamp(0), "active": active, "ready": rng.randint(0, active)}
    if rng.random() < 0.4:
        status["terminating"] = rng.randint(0, 2)
    return status


def _progress(rng: random.Random, spec: Obj) -> Obj:
    status = _running(rng, spec)
    status["failed"] = rng.randint(0, 3)
    total = _completions(spec)
    if _indexed(spec) and total:
        done = sorted(rng.sample(range(total), rng.randint(0, max(0, total - 1))))
        status["succeeded"] = len(done)
        if done:
            status["completedIndexes"] = _format(done)
        if "backoffLimitPerIndex" in spec:
            rest = [i for i in range(total) if i not in done]
            lost = sorted(rng.sample(rest, rng.randint(0, min(1, len(rest)))))
            status["failedIndexes"] = _format(lost)
    else:
        status["succeeded"] = rng.randint(0, 2)
    if rng.random() < 0.4:
        status["uncountedTerminatedPods"] = {"succeeded": [UIDS[0]]}
    return status


def _finish(status: Obj) -> Obj:
    """The same progress, with no pods left running or uncounted (what a finished Job must show)."""
    status = copy.deepcopy(status)
    status["active"] = 0
    status["ready"] = 0
    status.pop("terminating", None)
    status["uncountedTerminatedPods"] = {}
    return status


def start_states(rng: random.Random, spec: Obj) -> tuple[str, list[Obj]]:
    """A named starting state and the writes that reach it, each valid on its own."""
    zero_suspended = spec.get("suspend") is True and spec.get("completions") == 0
    choice = rng.choice(
        [
            "none",
            "running",
            "progress",
            "progress",
            "suspended",
            "suspended-started",
            "failure-target",
            "failed",
            "failed",
            "success-criteria-met",
            "complete",
            "complete",
            "complete-shadowed",
        ]
    )
    if choice == "none":
        return choice, []
    if choice == "running":
        return choice, [_running(rng, spec)]
    if choice == "progress":
        return choice, [_progress(rng, spec)]
    if choice == "suspended":
        status: Obj = {}
        _set_condition(status, "Suspended", "True", 5)
        return choice, [status]
    if choice == "suspended-started":
        first = _running(rng, spec)
        second = {**copy.deepcopy(first), "active": 0, "ready": 0}
        second.pop("terminating", None)
        _set_condition(second, "Suspended", "True", 5)
        return choice, [first, second]
    if choice == "failure-target":
        status = _progress(rng, spec)
        _set_condition(status, "FailureTarget", "True")
        return choice, [status]
    if choice == "failed":
        interim = _progress(rng, spec)
        _set_condition(interim, "FailureTarget", "True")
        final = _finish(interim)
        _set_condition(final, "Failed", "True", 40)
        return choice, [interim, final]
    if choice == "success-criteria-met":
        status = _progress(rng, spec)
        _set_condition(status, "SuccessCriteriaMet", "True")
        return choice, [status]
    if choice == "complete-shadowed":
        # The stored status lists a False entry of each type before the True one.
        final = _finish(_progress(rng, spec))
        _set_condition(final, "SuccessCriteriaMet", "True")
        _set_condition(final, "Complete", "True", 40)
        final["completionTime"] = stamp(60)
        shadows = [condition(t, "False", "", 10) for t in ("Complete", "SuccessCriteriaMet")]
        final["conditions"] = shadows + final["conditions"]
        return choice, [final]
    final = _finish(_progress(rng, spec))
    if zero_suspended and rng.random() < 0.5:
        final.pop("startTime", None)
    _set_condition(final, "SuccessCriteriaMet", "True")
    _set_condition(final, "Complete", "True", 40)
    final["completionTime"] = stamp(60)
    return choice, [final]


# --- the generated write --------------------------------------------------------------------------------------


def _mutate(rng: random.Random, spec: Obj, status: Obj) -> str:
    """Change ``status`` in one way chosen toward the rules' edges; returns what was done."""
    total = _completions(spec) or 0
    kind = rng.choice(
        [
            "condition",
            "condition",
            "drop-condition",
            "complete",
            "complete",
            "fail",
            "fail",
            "start-time",
            "completion-time",
            "completion-time",
            "counter",
            "counter",
            "ready",
            "completed-indexes",
            "completed-indexes",
            "failed-indexes",
            "failed-indexes",
            "uncounted",
            "duplicate-condition",
            "resume",
            "index-pair",
            "odd-condition",
            "finish-unstarted",
            "nothing",
        ]
    )
    if kind == "condition":
        type_ = rng.choice(CONDITION_TYPES)
        value = rng.choice(["True", "True", "False", "Unknown"])
        _set_condition(status, type_, value, rng.choice([30, 50]))
        return f"set {type_}={value}"
    if kind == "drop-condition":
        present = [c["type"] for c in status.get("conditions", [])]
        if not present:
            _set_condition(status, "Suspended", "False")
            return "set Suspended=False"
        type_ = rng.choice(present)
        if rng.random() < 0.5:
            _drop_condition(status, type_)
            return f"drop {type_}"
        _set_condition(status, type_, "False")
        return f"flip {type_} to False"
    if kind == "complete":
        status["active"] = 0
        status["ready"] = 0
        status.pop("terminating", None)
        status["uncountedTerminatedPods"] = {}
        status.setdefault("startTime", stamp(0))
        _set_condition(status, "SuccessCriteriaMet", "True", 45)
        _set_condition(status, "Complete", "True", 50)
        status.setdefault("completionTime", stamp(55))
        return "finish Complete"
    if kind == "fail":
        status["active"] = 0
        status["ready"] = 0
        status.pop("terminating", None)
        status["uncountedTerminatedPods"] = {}
        status.setdefault("startTime", stamp(0))
        if not _true(status, "FailureTarget"):
            _set_condition(status, "FailureTarget", "True", 45)
        _set_condition(status, "Failed", "True", 50)
        return "finish Failed"
    if kind == "start-time":
        choice = rng.choice(["drop", "earlier", "later", "fraction", "set", "respelled"])
        if choice == "drop":
            status.pop("startTime", None)
        elif choice == "respelled":
            status["startTime"] = stamp_elsewhere(0)
        else:
            status["startTime"] = stamp({"earlier": -30, "later": 70, "fraction": 0.5, "set": 0}[choice])
        return f"startTime {choice}"
    if kind == "completion-time":
        choice = rng.choice(["drop", "before-start", "equal-start", "later", "fraction", "set", "respelled"])
        if choice == "drop":
            status.pop("completionTime", None)
        elif choice == "respelled":
            status["completionTime"] = stamp_elsewhere(60)
        else:
            offsets = {"before-start": -10, "equal-start": 0, "later": 90, "fraction": 60.25, "set": 60}
            status["completionTime"] = stamp(offsets[choice])
        return f"completionTime {choice}"
    if kind == "counter":
        field = rng.choice(["active", "succeeded", "failed", "terminating"])
        old: int = status.get(field) or 0
        count = rng.choice([old - 1, old + 1, 0, -1, old + 2])
        if field == "terminating" and rng.random() < 0.2:
            status.pop(field, None)
            return "terminating absent"
        status[field] = count
        return f"{field}={count} (was {old})"
    if kind == "ready":
        active: int = status.get("active") or 0
        ready = rng.choice([active + 1, active, 0, -1, None])
        if ready is None:
            status.pop("ready", None)
        else:
            status["ready"] = ready
        return f"ready={ready} active={active}"
    if kind == "completed-indexes":
        text = _index_string(rng, total)
        if text is None:
            status.pop("completedIndexes", None)
        else:
            status["completedIndexes"] = text
        return f"completedIndexes={text!r}"
    if kind == "failed-indexes":
        text = _index_string(rng, total, overlap_with=status.get("completedIndexes"))
        if text is None:
            status.pop("failedIndexes", None)
        else:
            status["failedIndexes"] = text
        return f"failedIndexes={text!r}"
    if kind == "uncounted":
        uncounted: Obj | None = rng.choice(
            [
                None,
                {},
                {"succeeded": [UIDS[0]]},
                {"failed": [UIDS[1]]},
                {"succeeded": [UIDS[0]], "failed": [UIDS[0]]},
                {"failed": [UIDS[1], UIDS[1]]},
                {"succeeded": [""]},
            ]
        )
        if uncounted is None:
            status.pop("uncountedTerminatedPods", None)
        else:
            status["uncountedTerminatedPods"] = uncounted
        return f"uncountedTerminatedPods={uncounted}"
    if kind == "duplicate-condition":
        type_ = rng.choice(["Complete", "Failed", "FailureTarget", "SuccessCriteriaMet"])
        extra = condition(type_, "False", "", 20)
        status["conditions"] = [extra, *status.get("conditions", [])]
        return f"a {type_}=False before the others"
    if kind == "index-pair":
        completed, failed = rng.choice(INDEX_PAIRS)
        status["completedIndexes"] = completed
        status["failedIndexes"] = failed
        return f"completedIndexes={completed!r} failedIndexes={failed!r}"
    if kind == "odd-condition":
        odd = rng.choice(
            [
                condition("Complete", "true"),
                condition("Failed", "TRUE"),
                condition("Custom", "True"),
                {"type": "FailureTarget", "status": "True"},
                {"type": "SuccessCriteriaMet", "status": "True", "reason": ""},
            ]
        )
        status["conditions"] = [*status.get("conditions", []), odd]
        return f"append {odd['type']}={odd['status']}"
    if kind == "finish-unstarted":
        status.pop("startTime", None)
        status["active"] = 0
        status.pop("ready", None)
        status.pop("terminating", None)
        status.pop("uncountedTerminatedPods", None)
        if rng.random() < 0.5:
            _set_condition(status, "SuccessCriteriaMet", "True", 45)
            _set_condition(status, "Complete", "True", 50)
            status["completionTime"] = stamp(55)
            return "finish Complete without startTime"
        _set_condition(status, "FailureTarget", "True", 45)
        _set_condition(status, "Failed", "True", 50)
        return "finish Failed without startTime"
    if kind == "resume":
        how = rng.choice(["False", "False", "drop", "Unknown"])
        if how == "drop":
            _drop_condition(status, "Suspended")
        else:
            _set_condition(status, "Suspended", how, 60)
        status["startTime"] = stamp(rng.choice([60, 0, 0.5]))
        return f"resume (Suspended {how}) with startTime {status['startTime']}"
    return "unchanged"


def _index_string(rng: random.Random, total: int, overlap_with: Any = None) -> str | None:
    choice = rng.random()
    if choice < 0.12:
        return None
    if choice < 0.22:
        return ""
    if choice < 0.55:
        picks = sorted(rng.sample(range(total), rng.randint(1, total))) if total else [0]
        if total > 2 and rng.random() < 0.5:
            return f"0-{total - 1}"
        return _format(picks)
    if choice < 0.65 and isinstance(overlap_with, str) and overlap_with:
        return overlap_with.split(",")[0]
    if choice < 0.72:
        return rng.choice(ODD_INDEXES)
    return rng.choice(BAD_INDEXES).replace("{n}", str(total))


def generate(seed: int = SEED, bases: int = BASES, per_base: int = WRITES_PER_BASE) -> list[Transition]:
    """The transitions, the same for the same arguments."""
    rng = random.Random(seed)
    result: list[Transition] = []
    for b in range(bases):
        spec = _spec(rng)
        state, start = start_states(rng, spec)
        base = f"b{b:03d}"
        current = start[-1] if start else {}
        for w in range(per_base):
            status = copy.deepcopy(current)
            intents = [_mutate(rng, spec, status)]
            while len(intents) < 3 and rng.random() < 0.35:
                intents.append(_mutate(rng, spec, status))
            result.append(
                Transition(
                    id=f"{base}-w{w}",
                    base=base,
                    spec=spec,
                    start=tuple(start),
                    write=status,
                    intent=f"{state}: " + "; ".join(intents),
                )
            )
    return result
