"""The embedded API server accepts and refuses status writes of a Job exactly as kube-apiserver does.

A dispatcher or another external controller owns the status of a Job with a foreign ``spec.managedBy``; the
KEP-4368 rules on the status subresource are what keep a faulty one from writing a status kubectl, the CronJob
controller or the dispatcher would misread. Each generated transition (status_transitions.py) is sent to both
clusters; the answers must agree on accepted or refused, and for a refusal on the reason and the set of field
paths in ``details.causes``.

Run by hand against two running clusters (a kubeconfig each, context ``fidelity``)::

    python3 -m tests.fidelity.test_status_transitions EMBEDDED_KUBECONFIG UPSTREAM_KUBECONFIG
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from itertools import groupby
from pathlib import Path
from typing import Any

from multiqueue.kube.client import ClientOptions, KubeClient
from multiqueue.kube.config import load_credentials
from tests.fidelity.conftest import CLUSTER, Pair
from tests.fidelity.status_transitions import Obj, Transition, generate

NAMESPACE_PREFIX = "status-transitions"
CONCURRENCY = 16
SHOWN = 8


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What a server said about one write: the parts of it that must agree."""

    code: int
    reason: str
    fields: tuple[str, ...]
    message: str

    @property
    def accepted(self) -> bool:
        return self.code < 300

    def key(self) -> tuple[bool, str, tuple[str, ...]]:
        return (self.accepted, "" if self.accepted else self.reason, self.fields)


def _verdict(code: int, body: Any) -> Verdict:
    if code < 300 or not isinstance(body, dict):
        return Verdict(code, "", (), "" if code < 300 else str(body)[:300])
    causes = (body.get("details") or {}).get("causes") or []
    fields = tuple(sorted({str(c.get("field", "")) for c in causes if isinstance(c, dict)}))
    return Verdict(code, str(body.get("reason", "")), fields, str(body.get("message", "")))


class Side:
    """Sends the transitions to one cluster: a Job per base, reused while its writes are refused."""

    def __init__(self, client: KubeClient, namespace: str) -> None:
        self.client = client
        self.namespace = namespace
        self.session = client._session
        self.limit = asyncio.Semaphore(CONCURRENCY)
        self.verdicts: dict[str, Verdict] = {}
        self.setup_failures: dict[str, Verdict] = {}

    async def _call(self, method: str, path: str, body: Obj | None = None) -> tuple[int, Any]:
        headers = {**(await self.client.credentials.auth_headers()), "Accept": "application/json"}
        data = None
        if body is not None:
            headers["Content-Type"] = "application/json"
            data = json.dumps(body)
        async with self.session.request(method, path, data=data, headers=headers) as response:
            text = await response.text()
            try:
                return response.status, json.loads(text)
            except ValueError:
                return response.status, text

    async def prepare(self) -> None:
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}}
        code, body = await self._call("POST", "/api/v1/namespaces", namespace)
        assert code == 201, f"{self.client.name}: namespace: {code} {body}"

    async def _make_job(self, name: str, transition: Transition) -> Obj | None:
        """A Job in the transition's starting state, or None (noted) when a server refuses a step there."""
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": transition.spec,
        }
        code, created = await self._call("POST", f"/apis/batch/v1/namespaces/{self.namespace}/jobs", job)
        if code >= 300:
            self.setup_failures[f"{transition.id} create"] = _verdict(code, created)
            return None
        for i, status in enumerate(transition.start):
            code, answer = await self._put_status(created, status)
            if code >= 300:
                self.setup_failures[f"{transition.id} start[{i}]"] = _verdict(code, answer)
                return None
        return dict(created)

    async def _put_status(self, job: Obj, status: Obj) -> tuple[int, Any]:
        metadata = {k: v for k, v in job["metadata"].items() if k not in ("resourceVersion", "managedFields")}
        body = {**job, "metadata": metadata, "status": status}
        name = metadata["name"]
        return await self._call("PUT", f"/apis/batch/v1/namespaces/{self.namespace}/jobs/{name}/status", body)

    async def _run_base(self, transitions: list[Transition]) -> None:
        async with self.limit:
            job: Obj | None = None
            made = 0
            for transition in transitions:
                if job is None:
                    job = await self._make_job(f"{transition.base}-{made}", transition)
                    made += 1
                    if job is None:
                        continue
                code, body = await self._put_status(job, transition.write)
                self.verdicts[transition.id] = verdict = _verdict(code, body)
                if verdict.accepted:
                    job = None  # the Job moved on; the next write needs the starting state again

    async def run(self, transitions: Sequence[Transition]) -> None:
        await self.prepare()
        bases = [list(group) for _, group in groupby(transitions, key=lambda t: t.base)]
        await asyncio.gather(*(self._run_base(b) for b in bases))

    async def cleanup(self) -> None:
        """The namespace goes, without waiting for it."""
        await self._call("DELETE", f"/api/v1/namespaces/{self.namespace}")


@dataclasses.dataclass
class Outcome:
    transitions: list[Transition]
    embedded: Side
    upstream: Side
    seconds: float

    def disagreements(self) -> list[Transition]:
        result = []
        for t in self.transitions:
            ours, theirs = self.embedded.verdicts.get(t.id), self.upstream.verdicts.get(t.id)
            if ours is None or theirs is None or ours.key() != theirs.key():
                result.append(t)
        return result

    def report(self) -> str:
        total = len(self.transitions)
        wrong = self.disagreements()
        agree = total - len(wrong)
        accepted = sum(1 for v in self.upstream.verdicts.values() if v.accepted)
        lines = [
            f"{agree} of {total} transitions agree, {100.0 * agree / total:.1f}% "
            f"(upstream accepted {accepted}, refused {len(self.upstream.verdicts) - accepted}; "
            f"{self.seconds:.1f}s)"
        ]
        for side in (self.embedded, self.upstream):
            for what, verdict in list(side.setup_failures.items())[:SHOWN]:
                lines.append(f"  {side.client.name} could not reach the starting state of {what}: {verdict}")
        for t in wrong[:SHOWN]:
            lines.append(f"--- {t.id}: {t.intent}")
            lines.append(f"  spec:  {json.dumps({k: v for k, v in t.spec.items() if k != 'template'})}")
            for i, status in enumerate(t.start):
                lines.append(f"  start[{i}]: {json.dumps(status)}")
            lines.append(f"  write: {json.dumps(t.write)}")
            lines.append(f"  embedded: {self.embedded.verdicts.get(t.id)}")
            lines.append(f"  upstream: {self.upstream.verdicts.get(t.id)}")
        return "\n".join(lines)


async def compare(embedded: KubeClient, upstream: KubeClient) -> Outcome:
    transitions = generate()
    namespace = f"{NAMESPACE_PREFIX}-{int(time.time()) % 100000}"  # a rerun need not wait for the last one's
    ours, theirs = Side(embedded, namespace), Side(upstream, namespace)
    began = time.monotonic()
    try:
        await asyncio.gather(ours.run(transitions), theirs.run(transitions))
    finally:
        await asyncio.gather(ours.cleanup(), theirs.cleanup(), return_exceptions=True)
    return Outcome(transitions, ours, theirs, time.monotonic() - began)


async def test_status_transitions_agree_with_upstream(pair: Pair) -> None:
    async with pair.clients() as (embedded, upstream):
        outcome = await compare(embedded, upstream)
    report = outcome.report()
    print(report)
    assert len(outcome.transitions) >= 1000
    assert not outcome.upstream.setup_failures, report
    assert not outcome.disagreements(), report


async def _main(kubeconfigs: list[str]) -> None:
    options = ClientOptions(max_attempts=1, request_timeout=30.0)
    clients = [
        KubeClient(await load_credentials(Path(path), CLUSTER), name, options)
        for path, name in zip(kubeconfigs, ("embedded", "upstream"), strict=True)
    ]
    try:
        outcome = await compare(*clients)
    finally:
        await asyncio.gather(*(c.close() for c in clients))
    print(outcome.report())


if __name__ == "__main__":
    asyncio.run(_main(sys.argv[1:3]))
