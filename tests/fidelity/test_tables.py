"""The embedded API server prints every kind it serves as kube-apiserver does: the Tables behind ``kubectl get``.

The same representative objects are made on both clusters (samples.py: Jobs running, complete and failed, a
CronJob, a Pod, a Service, RBAC objects, a CRD with additionalPrinterColumns and one of its objects, ...), then each
served kind's Table (``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``) is compared: its column definitions (name,
type, format, priority, description) and the cells of those objects' rows, ages and durations, UIDs and generated
names set aside. The test fails on a difference tables_known.yaml does not list and on a listed one that no longer
occurs; it prints the match rate.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from multiqueue.kube.client import KubeClient
from tests.fidelity.compare import judge, load_known
from tests.fidelity.conftest import CLUSTER, Pair
from tests.fidelity.openapi_compare import PRESENT, Difference, Served, compare
from tests.fidelity.samples import (
    CLUSTER_SCOPED,
    GROUP,
    NAMESPACE,
    NAMESPACED,
    REVIEWS,
    make_objects,
    served_resources,
)

KNOWN: Final = Path(__file__).with_name("tables_known.yaml")
TABLE: Final = "application/json;as=Table;v=v1;g=meta.k8s.io"
DURATION: Final = re.compile(r"^(\d+[smhdy])+$")
IP: Final = re.compile(r"^\d{1,3}(\.\d{1,3}){3}$")
TIME: Final = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
UID: Final = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# A pod a Job made: the Job's name and five generated characters.
JOB_POD: Final = re.compile(r"^(?P<job>job-[a-z]+)-[a-z0-9]{5}$")
NODE: Final = f"{CLUSTER}-node"  # the local kubelet's, on either cluster
# The rows compared: the objects made here (other tests, controllers and the cluster itself make more), the Node,
# the Namespace, and the pods of the Jobs.
ROWS: Final = frozenset(
    {
        NAMESPACE,
        NODE,
        f"gadgets.{GROUP}",
        *(b["metadata"]["name"] for _, b in [*CLUSTER_SCOPED, *NAMESPACED]),
    }
)


def wanted(name: str) -> bool:
    return name in ROWS or JOB_POD.match(name) is not None


def _cell(value: Any, generated: dict[str, str]) -> Any:
    if not isinstance(value, str):
        return value
    if DURATION.match(value):
        return "<duration>"
    if TIME.match(value):
        return "<time>"
    if IP.match(value):
        return "<ip>"  # allocated by each cluster
    value = UID.sub("<uid>", value)
    for name, placeholder in generated.items():
        value = value.replace(name, placeholder)
    return value


def flatten_table(table: dict[str, Any], wanted: Callable[[str], bool]) -> dict[str, Any]:
    """The items of one Table: each column's definition, and the cells of the rows of ``wanted`` names."""
    out: dict[str, Any] = {}
    names = [column["name"] for column in table.get("columnDefinitions", [])]
    for column in table.get("columnDefinitions", []):
        where = f"columns/{column['name']}"
        out[f"{where}/{PRESENT}"] = True
        for key in ("type", "format", "priority", "description"):
            out[f"{where}/{key}"] = column.get(key)
    rows = [
        r
        for r in table.get("rows", [])
        if wanted(str((r.get("object") or {}).get("metadata", {}).get("name")))
    ]
    generated = {}
    for row in rows:
        name = str(row["object"]["metadata"]["name"])
        if (match := JOB_POD.match(name)) is not None:
            generated[name] = f"{match['job']}-<generated>"
    for row in rows:
        where = f"rows/{_cell(row['object']['metadata']['name'], generated)}"
        out[f"{where}/{PRESENT}"] = True
        for column, cell in zip(names, row.get("cells", []), strict=False):
            out[f"{where}/{column}"] = _cell(cell, generated)
    return out


def _list_path(resource: Served) -> str:
    base = f"/apis/{resource.group}/{resource.version}" if resource.group else f"/api/{resource.version}"
    return (
        f"{base}/namespaces/{NAMESPACE}/{resource.plural}"
        if resource.namespaced
        else f"{base}/{resource.plural}"
    )


async def tables(client: KubeClient, served: list[Served]) -> dict[str, Any]:
    """Kind -> its Table on this cluster (namespaced kinds' in the test's namespace)."""
    found = {}
    for resource in served:
        params = {"includeObject": "Metadata"}
        found[resource.kind] = await client._json(
            "GET", _list_path(resource), params=params, headers={"Accept": TABLE}
        )
    return found


def differences(embedded: dict[str, Any], upstream: dict[str, Any]) -> tuple[int, list[Difference]]:
    compared, found = 0, []
    for kind, table in embedded.items():
        count, listed = compare(
            flatten_table(table, wanted), flatten_table(upstream[kind], wanted), f"table:{kind}"
        )
        compared += count
        found += listed
    return compared, found


def test_tables_match_upstream(pair: Pair) -> None:
    async def run() -> tuple[list[Served], dict[str, Any], dict[str, Any]]:
        async with pair.clients() as (embedded, upstream):
            await asyncio.gather(make_objects(embedded), make_objects(upstream))
            served = [s for s in await served_resources(embedded) if s.plural not in REVIEWS]
            return served, await tables(embedded, served), await tables(upstream, served)

    served, embedded, upstream = asyncio.run(run())
    compared, found = differences(embedded, upstream)
    known = load_known(KNOWN)
    verdict = judge((d.named for d in found), known)
    rate = (compared - len(found)) / compared
    print(
        f"\nTables of {len(served)} kinds: {compared - len(found)} of {compared} items match upstream ({rate:.1%})"
    )
    for entry in known:
        print(f"  known ({sum(entry.covers(d.named) for d in found)}): {entry.what}")
    unlisted = [d for d in found if d.named in set(verdict.unlisted)]
    problems = [
        f"unlisted: {d.named}: embedded {d.embedded!r}, upstream {d.upstream!r}" for d in unlisted[:60]
    ]
    problems += [f"stale entry (no such difference now): {k.what}" for k in verdict.stale]
    assert not unlisted and not verdict.stale, (
        f"{len(unlisted)} unlisted, {len(verdict.stale)} stale:\n" + "\n".join(problems)
    )
