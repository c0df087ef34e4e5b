"""The embedded API server answers the differential script as kube-apiserver does, but for the listed differences.

Both clusters run the script of api_script.py at once; every answer is normalized (compare.py) and compared. The
test fails on a difference differences.yaml does not list, and on a listed difference that no longer occurs, so
the file (and the compatibility page generated from it) stays true. It prints the match rate and writes each
request's outcome to a JSON file under pytest's tmp dir.

Run by hand against two running clusters (a kubeconfig each, context ``fidelity``)::

    python3 -m tests.fidelity.test_api_differential EMBEDDED_KUBECONFIG UPSTREAM_KUBECONFIG [OUT.json]

Each side's raw answers are saved beside its kubeconfig (``KUBECONFIG.answers.json``); naming that file instead of a
kubeconfig reuses them, so the embedded side can be rerun alone after a change.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

from yarl import URL

from multiqueue.kube.client import KubeClient
from multiqueue.kube.config import load_credentials
from tests.fidelity import api_script
from tests.fidelity.api_script import Group, Step, Wait
from tests.fidelity.compare import Answer, differences, events_of, judge, load_known, normalize, writers
from tests.fidelity.conftest import CLUSTER, Pair

WAIT_TIMEOUT = 30.0
WAIT_POLL = 0.2


def _fill(value: Any, variables: dict[str, str]) -> Any:
    if isinstance(value, str):
        for name, replacement in variables.items():
            value = value.replace("{" + name + "}", replacement)
        return value
    if isinstance(value, dict):
        return {k: _fill(v, variables) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_fill(v, variables) for v in value]
    return value


def _dig(body: Any, dotted: str) -> str:
    for key in dotted.split("."):
        body = body.get(key) if isinstance(body, dict) else None
    return "" if body is None else str(body)


class Runner:
    """Sends the script to one cluster, raw: status codes, headers and bodies as they come."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.session = client._session
        self.answers: dict[str, Answer] = {}
        self.waits_missed: list[str] = []

    async def run(self, groups: list[Group]) -> dict[str, Answer]:
        for group in groups:
            variables = {"ns": group.namespace}
            for action in group.actions:
                if isinstance(action, Wait):
                    await self._wait(_fill(action.path, variables), action.condition)
                else:
                    self.answers[action.id] = await self._send(action, variables)
        return self.answers

    async def _headers(self, content_type: str | None) -> dict[str, str]:
        headers = {**(await self.client.credentials.auth_headers()), "Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    async def _send(self, step: Step, variables: dict[str, str]) -> Answer:
        body = _fill(step.body, variables)
        data = None if body is None else body if isinstance(body, str) else json.dumps(body)
        headers = await self._headers(step.content_type if data is not None else None)
        path = _fill(step.path, variables)
        url = URL(self.client.credentials.server.rstrip("/") + path, encoded=True) if step.raw_path else path
        async with self.session.request(
            step.method,
            url,
            params=_fill(dict(step.query), variables),
            data=data,
            headers=headers,
        ) as response:
            warnings = response.headers.getall("Warning", [])
            if step.watch:
                events = [json.loads(line) async for line in response.content if line.strip()]
                answer = Answer(response.status, None, list(warnings), events)
            else:
                text = await response.text()
                try:
                    decoded: Any = json.loads(text)
                except ValueError:
                    decoded = text.strip()
                answer = Answer(response.status, decoded, list(warnings))
        for name, dotted in step.capture.items():
            variables[name] = _dig(answer.body, dotted)
        return answer

    async def _wait(self, path: str, condition: str) -> None:
        """A sync point on an asynchronous controller; a server that never gets there is noted, not waited on."""
        deadline = time.monotonic() + WAIT_TIMEOUT
        while time.monotonic() < deadline:
            async with self.session.get(path, headers=await self._headers(None)) as response:
                if response.status == 200:
                    body = await response.json()
                    conditions = (body.get("status") or {}).get("conditions") or []
                    if not condition or any(
                        c.get("type") == condition and c.get("status") == "True" for c in conditions
                    ):
                        return
            await asyncio.sleep(WAIT_POLL)  # polling an upstream controller we cannot watch from here
        self.waits_missed.append(path)


async def run_pair(embedded: KubeClient, upstream: KubeClient) -> list[dict[str, Any]]:
    """Both sides at once; one outcome per request, in script order."""
    groups = api_script.groups()
    ours, theirs = Runner(embedded), Runner(upstream)
    await asyncio.gather(ours.run(groups), theirs.run(groups))
    return compare_answers(ours.answers, theirs.answers)


def _without(answer: Answer, volatile: tuple[str, ...]) -> Answer:
    """The answer with each of a step's environment-specific values replaced by a placeholder."""
    if not volatile or not isinstance(answer.body, dict):
        return answer
    body = copy.deepcopy(answer.body)
    for dotted in volatile:
        *parents, last = dotted.split(".")
        node: Any = body
        for key in parents:
            if isinstance(node, list) and key.isdigit() and int(key) < len(node):
                node = node[int(key)]
            else:
                node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict) and last in node:
            node[last] = "<volatile>"
    return dataclasses.replace(answer, body=body)


def compare_answers(ours: dict[str, Answer], theirs: dict[str, Answer]) -> list[dict[str, Any]]:
    steps = api_script.steps()
    agreed = {s.id for s in steps if ours[s.id].code == theirs[s.id].code}
    writes = [s.id for s in steps if s.method != "GET"]
    our_writers, their_writers = writers(ours, writes), writers(theirs, writes)
    outcomes = []
    for step in steps:
        a = normalize(_without(events_of(ours[step.id], our_writers, agreed), step.volatile))
        b = normalize(_without(events_of(theirs[step.id], their_writers, agreed), step.volatile))
        diff = differences(a, b)
        outcomes.append({"id": step.id, "match": not diff, "differences": diff, "embedded": a, "upstream": b})
    return outcomes


def report(outcomes: list[dict[str, Any]], out: Path) -> tuple[list[str], str]:
    """Write the outcomes; return the ids that differ and the one-line summary."""
    out.write_text(json.dumps(outcomes, indent=1, sort_keys=True), encoding="utf-8")
    matched = sum(1 for o in outcomes if o["match"])
    total = len(outcomes)
    summary = f"{matched} of {total} requests match, {100.0 * matched / total:.1f}% (per request: {out})"
    return [o["id"] for o in outcomes if not o["match"]], summary


async def test_embedded_answers_like_upstream(pair: Pair, tmp_path: Path) -> None:
    async with pair.clients() as (embedded, upstream):
        outcomes = await run_pair(embedded, upstream)
    differing, summary = report(outcomes, tmp_path / "api-differential.json")
    print(summary)
    assert len(outcomes) >= 300
    verdict = judge(differing, load_known())
    by_id = {o["id"]: o for o in outcomes}
    unlisted = {rid: by_id[rid]["differences"][:5] for rid in verdict.unlisted}
    assert not unlisted, f"differences not in differences.yaml: {json.dumps(unlisted, indent=1)}"
    stale = [f"{k.ids}: {k.what}" for k in verdict.stale]
    assert not stale, f"listed differences that no longer occur (remove them from differences.yaml): {stale}"


async def _answers(kubeconfig: str) -> dict[str, Answer]:
    """A cluster's answers, or answers saved from an earlier run (a .json file: upstream's, to rerun ours alone)."""
    if kubeconfig.endswith(".json"):
        saved = json.loads(await asyncio.to_thread(Path(kubeconfig).read_text, encoding="utf-8"))
        return {rid: Answer(**raw) for rid, raw in saved.items()}
    client = KubeClient(await load_credentials(Path(kubeconfig), CLUSTER), CLUSTER)
    try:
        answers = await Runner(client).run(api_script.groups())
    finally:
        await client.close()
    saved_text = json.dumps({rid: dataclasses.asdict(a) for rid, a in answers.items()})
    await asyncio.to_thread(Path(kubeconfig + ".answers.json").write_text, saved_text, encoding="utf-8")
    return answers


async def _main(argv: list[str]) -> int:
    ours, theirs = await asyncio.gather(_answers(argv[0]), _answers(argv[1]))
    outcomes = compare_answers(ours, theirs)
    out = Path(argv[2] if len(argv) > 2 else "api-differential.json")
    differing, summary = report(outcomes, out)
    verdict = judge(differing, load_known())
    print(summary)
    for rid in verdict.unlisted:
        print("unlisted:", rid)
    for known in verdict.stale:
        print("stale:", known.ids)
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(_main(sys.argv[1:])))
