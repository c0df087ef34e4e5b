"""How the differential test compares two watches: only the events of writes both servers answered alike count,
and each event shows the state (labels) of the object it carries."""

from __future__ import annotations

from typing import Any

from tests.fidelity.compare import Answer, events_of, normalize, writers


def obj(name: str, rv: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": rv, "labels": labels}}


def event(kind: str, name: str, rv: str, **labels: str) -> dict[str, Any]:
    return {"type": kind, "object": obj(name, rv, **labels)}


SIDE = {
    "x/create": Answer(201, obj("a", "10")),
    "x/patch": Answer(200, obj("a", "11", step="patched")),
    "x/patch-noop": Answer(200, obj("a", "11", step="patched")),  # upstream answers a no-op with the same RV
    "x/apply": Answer(200, obj("b", "12")),
    "x/update-stale": Answer(409, {"kind": "Status", "code": 409}),
}
WATCH = Answer(
    200,
    None,
    events=[
        event("ADDED", "root-ca", "9"),  # made by a controller, before or after the script's writes
        event("ADDED", "a", "10"),
        event("MODIFIED", "a", "11", step="patched"),
        event("MODIFIED", "b", "12"),  # the other server refused this write
        {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "12"}}},
    ],
)


def test_each_resource_version_is_credited_to_the_first_write_that_answered_it() -> None:
    assert writers(SIDE, list(SIDE)) == {"10": "x/create", "11": "x/patch", "12": "x/apply"}


def test_a_watch_keeps_the_events_of_writes_both_servers_answered_alike() -> None:
    agreed = {"x/create", "x/patch", "x/patch-noop", "x/update-stale"}
    kept = events_of(WATCH, writers(SIDE, list(SIDE)), agreed)
    assert normalize(kept)["events"] == ["ADDED a {}", "MODIFIED a {step=patched}"]
    assert kept.events is not None and kept.events[-1]["type"] == "BOOKMARK"


def test_answers_without_events_pass_unchanged() -> None:
    assert events_of(SIDE["x/create"], {}, set()) is SIDE["x/create"]


def test_managed_fields_entries_compare_without_the_order_their_times_gave_them() -> None:
    """Two writes of one manager, the spec's then the status's: upstream lists the entries by the second each was
    last written, so one server may list the status entry first and the other the spec entry."""
    spec = {"manager": "m", "operation": "Update", "apiVersion": "batch/v1", "fieldsV1": {"f:spec": {}}}
    status = {**spec, "fieldsV1": {"f:status": {}}, "subresource": "status"}
    in_one_second = Answer(
        200, {"metadata": {"managedFields": [{**spec, "time": "T1"}, {**status, "time": "T1"}]}}
    )
    in_two = Answer(
        200,
        {
            "metadata": {
                "managedFields": [
                    {**status, "time": "2026-01-01T00:00:00Z"},
                    {**spec, "time": "2026-01-01T00:00:01Z"},
                ]
            }
        },
    )
    assert normalize(in_one_second) == normalize(in_two)
    other = Answer(200, {"metadata": {"managedFields": [{**spec, "manager": "n"}, status]}})
    assert normalize(other) != normalize(in_two), "who manages which fields is still compared"
