"""The event recorder writes core/v1 Events and aggregates repeats like client-go."""

from __future__ import annotations

import gc
import weakref

from multiqueue.api.types import CONFIGMAPS, EVENTS
from multiqueue.apiserver.server import ApiServer
from multiqueue.kube.events import EventRecorder
from tests.support.clients import client_for


async def test_repeats_are_aggregated(apiserver: ApiServer) -> None:
    client = await client_for(apiserver)
    recorder = EventRecorder(client, "multiqueue-test")
    recorder.start()
    try:
        obj = await client.create(CONFIGMAPS, {"metadata": {"name": "subject"}}, "default")
        for _ in range(3):
            recorder.normal(obj, "Dispatched", "sent to worker-1")
        recorder.warning(obj, "StatusSyncRejected", "bad status")
        await recorder.flush()
        events, _ = await client.list(EVENTS, "default", field_selector="involvedObject.name=subject")
        by_reason = {e["reason"]: e for e in events}
        assert set(by_reason) == {"Dispatched", "StatusSyncRejected"}
        assert by_reason["Dispatched"]["count"] == 3
        assert by_reason["Dispatched"]["type"] == "Normal"
        assert by_reason["Dispatched"]["involvedObject"]["uid"] == obj["metadata"]["uid"]
        assert by_reason["Dispatched"]["source"]["component"] == "multiqueue-test"
        assert by_reason["StatusSyncRejected"]["type"] == "Warning"
    finally:
        await recorder.stop()
        await client.close()


class _Spec(dict[str, object]):
    """A dict that can be referred to weakly, to see whether anything still holds it."""


async def test_a_queued_event_keeps_only_the_names_of_its_object(apiserver: ApiServer) -> None:
    client = await client_for(apiserver)
    recorder = EventRecorder(client, "multiqueue-test")  # not started: the event stays queued
    try:
        spec = _Spec(template={"containers": [{"name": "main", "image": "busybox"}]})
        held = weakref.ref(spec)
        obj = {"kind": "Job", "apiVersion": "batch/v1", "metadata": {"name": "a", "uid": "u1"}, "spec": spec}
        recorder.normal(obj, "Dispatched", "sent to worker-1")
        del obj, spec
        gc.collect()
        assert held() is None, "a queued event keeps the whole object alive"
        recorder.start()
        await recorder.flush()
        events, _ = await client.list(EVENTS, "default", field_selector="involvedObject.name=a")
        assert [(e["reason"], e["involvedObject"]["uid"], e["involvedObject"]["kind"]) for e in events] == [
            ("Dispatched", "u1", "Job")
        ]
    finally:
        await recorder.stop()
        await client.close()
