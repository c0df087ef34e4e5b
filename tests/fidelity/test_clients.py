"""Client libraries against the embedded server as against kube-apiserver: the flows of ``client_flows`` (the
official ``kubernetes`` client, ``lightkube`` and ``kr8s``) run on both clusters of the pair, and each must end as it
ends upstream, but for those ``clients_known.yaml`` lists with a reason; a listed flow that ends alike now fails
too, so the list stays true. Pass counts per client and side are printed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import pytest
import yaml

from multiqueue.api.types import NAMESPACES, PODS, Resource
from multiqueue.kube.client import KubeClient
from multiqueue.kube.errors import AlreadyExists
from tests.fidelity.client_flows import CLIENTS, Client, Until, run_flows
from tests.fidelity.conftest import Pair

KNOWN: Final = Path(__file__).with_name("clients_known.yaml")
SERVICEACCOUNTS: Final = Resource("", "v1", "serviceaccounts", "ServiceAccount")
KINDS: Final = {"pods": PODS, "serviceaccounts": SERVICEACCOUNTS}
WAIT: Final = 120.0  # a pod on a busy 2-core machine, beside another cluster


@dataclasses.dataclass(frozen=True)
class Known:
    client: str
    flow: str
    reason: str


def load_known(path: Path = KNOWN) -> list[Known]:
    return [Known(**entry) for entry in yaml.safe_load(path.read_text(encoding="utf-8")) or []]


def until_on(client: KubeClient, namespace: str) -> Until:
    """Waits on a watch of the one object until it satisfies the predicate."""

    async def until(kind: str, name: str, holds: Callable[[dict[str, Any]], bool]) -> None:
        async with asyncio.timeout(WAIT):
            while True:
                async for event in client.watch(
                    KINDS[kind], namespace, field_selector=f"metadata.name={name}"
                ):
                    if event.get("type") != "BOOKMARK" and holds(event["object"]):
                        return

    return until


async def prepare(client: KubeClient, namespace: str) -> None:
    """The namespace, with the ServiceAccount upstream's admission wants before it takes a pod."""
    with contextlib.suppress(AlreadyExists):
        await client.create(NAMESPACES, {"metadata": {"name": namespace}})
    await until_on(client, namespace)("serviceaccounts", "default", lambda _sa: True)


def verdict(
    client: type[Client], ours: dict[str, Any], theirs: dict[str, Any]
) -> tuple[list[str], list[str], str]:
    """Flows that end differently and no entry lists, listed flows that end alike, and the summary line."""
    differing = sorted(
        f for f in ours if json.dumps(ours[f], sort_keys=True) != json.dumps(theirs[f], sort_keys=True)
    )
    listed = {k.flow for k in load_known() if k.client == client.name}

    def clean(outcomes: dict[str, Any]) -> int:
        return sum(1 for o in outcomes.values() if not (isinstance(o, str) and o.startswith("error:")))

    summary = (
        f"{client.name}: {len(ours) - len(differing)} of {len(ours)} flows end as upstream; "
        f"without an error: embedded {clean(ours)}, upstream {clean(theirs)}"
    )
    return sorted(set(differing) - listed), sorted(listed - set(differing)), summary


@pytest.mark.parametrize("client", CLIENTS, ids=[c.name for c in CLIENTS])
async def test_client_flows_end_as_upstream(pair: Pair, client: type[Client]) -> None:
    namespace = f"fid-client-{client.name}"
    async with pair.clients() as (embedded, upstream):
        await asyncio.gather(prepare(embedded, namespace), prepare(upstream, namespace))
        ours, theirs = await asyncio.gather(
            run_flows(client, pair.embedded.kubeconfig, namespace, until_on(embedded, namespace)),
            run_flows(client, pair.upstream.kubeconfig, namespace, until_on(upstream, namespace)),
        )
    unlisted, stale, summary = verdict(client, ours, theirs)
    print(summary)
    differ = {f: {"embedded": ours[f], "upstream": theirs[f]} for f in unlisted}
    assert not differ, (
        f"flows that end differently (not in clients_known.yaml): {json.dumps(differ, indent=1)}"
    )
    assert not stale, f"listed flows that end as upstream now (remove them from clients_known.yaml): {stale}"
