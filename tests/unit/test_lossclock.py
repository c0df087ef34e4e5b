"""The Lease that records how long a worker has been gone: what is written, and when nothing needs writing."""

from __future__ import annotations

from typing import Any

import pytest

from multiqueue.dispatch.lossclock import INACTIVE_SINCE, lease_to_write, recorded_since

T0 = 1_790_000_000.25  # epoch seconds, with a fraction: the record keeps microseconds
NOW = T0 + 42.0


def lease(since: float | None, **extra: Any) -> dict[str, Any]:
    written = lease_to_write(None, "ns", "mq", "worker-1", since if since is not None else T0, NOW)
    assert written is not None
    if since is None:
        written = lease_to_write(written, "ns", "mq", "worker-1", None, NOW)
        assert written is not None
    written["metadata"].update(extra)
    return written


@pytest.mark.parametrize(
    ("existing", "since", "writes", "recorded"),
    [
        pytest.param(None, None, False, None, id="no-record-and-connected"),
        pytest.param(None, T0, True, T0, id="first-outage-creates-it"),
        pytest.param(lease(T0), T0, False, T0, id="same-outage-already-recorded"),
        pytest.param(lease(T0), None, True, None, id="back-clears-it"),
        pytest.param(lease(None), None, False, None, id="cleared-stays-cleared"),
        pytest.param(lease(None), T0 + 5, True, T0 + 5, id="a-new-outage-after-one-ended"),
        pytest.param(lease(T0), T0 + 5, True, T0 + 5, id="another-outage-time"),
    ],
)  # fmt: skip
def test_the_lease_records_the_outage(
    existing: dict[str, Any] | None, since: float | None, writes: bool, recorded: float | None
) -> None:
    written = lease_to_write(existing, "ns", "mq", "worker-1", since, NOW)
    assert (written is not None) == writes
    result = written if written is not None else existing
    found = recorded_since(result)
    assert (found is None) == (recorded is None)
    if recorded is not None:
        assert found == pytest.approx(recorded, abs=1e-6)


def test_a_new_lease_names_the_worker_and_its_manager_and_keeps_what_else_it_had() -> None:
    written = lease_to_write(None, "ns", "mq", "worker-1", T0, NOW)
    assert written is not None
    meta = written["metadata"]
    assert (meta["name"], meta["namespace"], meta["labels"]) == (
        "mq-worker-worker-1",
        "ns",
        {"multiqueue.dev/origin": "mq"},
    )
    assert meta["annotations"][INACTIVE_SINCE].endswith("Z")
    assert written["spec"]["holderIdentity"] == "mq"
    kept = lease(T0, resourceVersion="7")
    kept["metadata"]["annotations"]["other"] = "x"
    cleared = lease_to_write(kept, "ns", "mq", "worker-1", None, NOW)
    assert cleared is not None
    assert cleared["metadata"]["resourceVersion"] == "7"
    assert cleared["metadata"]["annotations"] == {"other": "x"}


def test_an_unreadable_record_counts_as_none() -> None:
    broken = lease(T0)
    broken["metadata"]["annotations"][INACTIVE_SINCE] = "yesterday"
    assert recorded_since(broken) is None
