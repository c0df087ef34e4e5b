"""The embedded API server's OpenAPI documents and /version say what kube-apiserver's say, for what it serves.

The /openapi/v3 index is compared with upstream's over the served group versions, their groups and the roots; then
for every group version the embedded server's discovery lists (with the CRD of samples.py made on both sides), its
/openapi/v3 document, and /openapi/v2 likewise, item by item (openapi_compare.py): the definitions the served kinds
and operations reach (properties, types and formats, ``required``, references, ``x-kubernetes-*`` extensions,
descriptions) and the served resources' paths (operations, their ids, actions and parameters). Paths upstream has
for a served resource and the embedded server lacks are differences too, printed apart. /version is compared on
what kubectl reads. The test fails on a difference openapi_known.yaml does not list and on a listed one that no
longer occurs; it prints the match rate.
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Any, Final

from multiqueue.kube.client import KubeClient
from tests.fidelity.compare import judge, load_known
from tests.fidelity.conftest import Pair
from tests.fidelity.openapi_compare import Difference, Served, compare, flatten_pair
from tests.fidelity.samples import get_json, make_crd, served_resources

KNOWN: Final = Path(__file__).with_name("openapi_known.yaml")
PUBLISH_TIMEOUT: Final = 60.0
PUBLISH_POLL: Final = 0.5
# What kubectl's version skew check and clients read of /version.
VERSION_FIELDS: Final = ("major", "minor", "emulationMajor", "emulationMinor", "minCompatibilityMajor")
_MISSING_PATH: Final = re.compile(r"^.+?:paths/(?P<path>/.*)//present$")


async def wait_published(client: KubeClient, served: list[Served]) -> None:
    """Until the server's documents cover every served kind: upstream publishes a new CRD's a little later."""
    paths = {f"apis/{s.group}/{s.version}" if s.group else f"api/{s.version}" for s in served}
    plurals = {f"/{s.plural}" for s in served}
    deadline = time.monotonic() + PUBLISH_TIMEOUT
    while time.monotonic() < deadline:
        index = (await get_json(client, "/openapi/v3"))["paths"]
        listed = {path.rsplit("/", 1)[-1] for path in (await get_json(client, "/openapi/v2"))["paths"]}
        if paths <= set(index) and {p.lstrip("/") for p in plurals} <= listed:
            return
        await asyncio.sleep(PUBLISH_POLL)  # nothing to watch: the documents are polled
    raise AssertionError(
        f"{client.name}: the OpenAPI documents did not cover {sorted(paths)} in {PUBLISH_TIMEOUT}s"
    )


async def documents(client: KubeClient, served: list[Served]) -> dict[str, Any]:
    """Label -> document: the v3 index, each served group version's v3 document, the v2 one and /version."""
    found = {
        "v3-index": await get_json(client, "/openapi/v3"),
        "v2": await get_json(client, "/openapi/v2"),
        "version": await get_json(client, "/version"),
    }
    for group, version in sorted({(s.group, s.version) for s in served}):
        path = f"apis/{group}/{version}" if group else f"api/{version}"
        found[f"v3:{group or 'core'}/{version}"] = await get_json(client, f"/openapi/v3/{path}")
    listed = found["v3-index"]["paths"]
    for path in ["api", "apis", *sorted({f"apis/{s.group}" for s in served if s.group})]:
        if path in listed:  # a CRD's group has none; the index comparison says whether either side lacks one
            found[f"v3:{path}"] = await get_json(client, f"/openapi/v3/{path}")
    return found


def _index_items(index: dict[str, Any], served: list[Served]) -> dict[str, Any]:
    """The index's documents that concern what is served: its group versions', their groups' and the roots'."""
    groups = {s.group for s in served if s.group}
    wanted = {"api", "apis", *(f"apis/{g}" for g in groups)}
    wanted |= {f"apis/{s.group}/{s.version}" if s.group else f"api/{s.version}" for s in served}
    # The double slash ends the path, as in openapi_compare: apis is no node above apis/batch.
    return {f"{path}//present": True for path in index.get("paths", {}) if path in wanted}


def differences(
    embedded: dict[str, Any], upstream: dict[str, Any], served: list[Served]
) -> tuple[int, list[Difference]]:
    compared, found = 0, []
    for label, document in embedded.items():
        if label not in upstream:
            continue  # a document upstream lacks: the index comparison reports it
        if label == "version":
            pair = (
                {k: document.get(k) for k in VERSION_FIELDS},
                {k: upstream[label].get(k) for k in VERSION_FIELDS},
            )
        elif label == "v3-index":
            pair = (_index_items(document, served), _index_items(upstream[label], served))
        else:
            pair = flatten_pair(document, upstream[label], served)
        count, listed = compare(*pair, label)
        compared += count
        found += listed
    return compared, found


def test_openapi_documents_match_upstream(pair: Pair) -> None:
    async def fetch() -> tuple[list[Served], dict[str, Any], dict[str, Any]]:
        async with pair.clients() as (embedded, upstream):
            await asyncio.gather(make_crd(embedded), make_crd(upstream))
            served = await served_resources(embedded)
            await asyncio.gather(wait_published(embedded, served), wait_published(upstream, served))
            return served, await documents(embedded, served), await documents(upstream, served)

    served, embedded, upstream = asyncio.run(fetch())
    compared, found = differences(embedded, upstream, served)
    known = load_known(KNOWN)
    verdict = judge((d.named for d in found), known)
    rate = (compared - len(found)) / compared
    print(f"\nOpenAPI and /version: {compared - len(found)} of {compared} items match upstream ({rate:.1%})")
    lacking = sorted({m["path"] for d in found if d.upstream and (m := _MISSING_PATH.match(d.id))})
    print(f"paths upstream has for served resources that the embedded server lacks ({len(lacking)}):")
    for path in lacking:
        print(f"  {path}")
    for entry in known:
        covered = sum(entry.covers(d.named) for d in found)
        print(f"  known ({covered}): {entry.what}")
    unlisted = [d for d in found if d.named in set(verdict.unlisted)]
    problems = [
        f"unlisted: {d.named}: embedded {d.embedded!r}, upstream {d.upstream!r}" for d in unlisted[:40]
    ]
    problems += [f"stale entry (no such difference now): {k.what}" for k in verdict.stale]
    assert not unlisted and not verdict.stale, (
        f"{len(unlisted)} unlisted, {len(verdict.stale)} stale:\n" + "\n".join(problems)
    )
