"""Every kubectl the machine has (1.27 to 1.33) through the everyday commands of ``kubectl_commands``, against the
embedded and the upstream cluster: what kubectl can do on kube-apiserver it can do on ``multiqueue local up``.

A command that fails on the embedded side where it passes upstream is a failure, unless ``kubectl_known.yaml``
lists it with its reason; a listed one that passes now fails too, so the list stays true. Pass counts per version
and side are printed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
import yaml

from multiqueue.api.types import CONFIGMAPS, CRONJOBS, JOBS, NAMESPACES, Resource
from tests.fidelity.conftest import CLUSTER, Pair, Side
from tests.fidelity.kubectl_commands import Command, commands, setup_objects

VERSIONED: Final = Path("/usr/lib/google-cloud-sdk/bin")
KNOWN: Final = Path(__file__).with_name("kubectl_known.yaml")
# kubectl runs at once (each a Go process of its own); more only queue for the same two cores.
AT_ONCE: Final = 4
COMMAND_TIMEOUT: Final = 120.0
KINDS: Final[dict[str, Resource]] = {"ConfigMap": CONFIGMAPS, "Job": JOBS, "CronJob": CRONJOBS}


def kubectls() -> dict[str, Path]:
    """Version ("1.27") -> binary: Debian's kubectl package ships one per minor version. ``KUBECTL_VERSIONS``
    (``1.29,1.33``) runs only those."""
    found = {}
    for path in sorted(VERSIONED.glob("kubectl.1.*")):
        found[path.name.removeprefix("kubectl.")] = path
    if not found and (plain := shutil.which("kubectl")) is not None:
        found["default"] = Path(plain)
    wanted = [v for v in os.environ.get("KUBECTL_VERSIONS", "").split(",") if v]
    return {v: p for v, p in found.items() if not wanted or v in wanted}


@dataclasses.dataclass(frozen=True)
class Outcome:
    code: int
    passed: bool
    said: str  # the last lines kubectl wrote to stderr


@dataclasses.dataclass(frozen=True)
class Known:
    version: str  # a regular expression over versions
    command: str
    reason: str

    def covers(self, version: str, command: str) -> bool:
        return self.command == command and re.fullmatch(self.version, version) is not None


def known() -> list[Known]:
    data: list[dict[str, Any]] = yaml.safe_load(KNOWN.read_text()) or []
    return [Known(str(e["versions"]), str(e["command"]), str(e["reason"])) for e in data]


async def run(binary: Path, side: Side, command: Command, cache: Path, limit: asyncio.Semaphore) -> Outcome:
    argv = [
        str(binary),
        "--kubeconfig",
        str(side.kubeconfig),
        "--context",
        CLUSTER,
        "--cache-dir",
        str(cache),
    ]
    async with limit:
        process = await asyncio.create_subprocess_exec(
            *argv,
            *command.args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, **dict(command.env)},
        )
        try:
            async with asyncio.timeout(COMMAND_TIMEOUT):
                _, err = await process.communicate(command.stdin.encode() if command.stdin else None)
        except TimeoutError:
            process.kill()
            await process.wait()
            return Outcome(-1, False, f"no answer within {COMMAND_TIMEOUT:.0f} s")
    code = process.returncode if process.returncode is not None else -1
    said = " | ".join(err.decode(errors="replace").strip().splitlines()[-3:])
    return Outcome(code, code in command.ok, said)


async def run_version(
    version: str, binary: Path, side: Side, folder: Path, limit: asyncio.Semaphore
) -> dict[str, Outcome]:
    """The whole matrix, in order, for one version on one side, in a namespace of its own."""
    namespace = "kubectl-" + re.sub(r"[^a-z0-9]", "", version)
    client = await side.client()
    try:
        await client.create(
            NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        )
        for body in setup_objects():
            await client.create(KINDS[body["kind"]], body, namespace)
    finally:
        await client.close()
    cache = folder / side.name / version
    return {c.id: await run(binary, side, c, cache, limit) for c in commands(namespace)}


@pytest.fixture(scope="module")
def outcomes(
    pair: Pair, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[tuple[str, str], dict[str, Outcome]]]:
    """(version, side) -> command -> outcome, every version on both sides at once."""
    binaries = kubectls()
    if not binaries:
        reason = "no kubectl on this machine"
        print(reason)
        pytest.skip(reason)
    folder = tmp_path_factory.mktemp("kubectl-cache")

    async def everything() -> dict[tuple[str, str], dict[str, Outcome]]:
        limit = asyncio.Semaphore(AT_ONCE)
        keys = [(v, s) for v in binaries for s in pair.sides]
        found = await asyncio.gather(*(run_version(v, binaries[v], s, folder, limit) for v, s in keys))
        return {(v, s.name): f for (v, s), f in zip(keys, found, strict=True)}

    yield asyncio.run(everything())


def test_every_kubectl_does_on_local_up_what_it_does_on_kube_apiserver(
    outcomes: dict[tuple[str, str], dict[str, Outcome]],
) -> None:
    listed = known()
    versions = sorted({v for v, _ in outcomes})
    unexpected: list[str] = []
    used: set[Known] = set()
    for version in versions:
        embedded, upstream = outcomes[(version, "embedded")], outcomes[(version, "upstream")]
        passed = {
            side: sum(o.passed for o in outcomes[(version, side)].values())
            for side in ("embedded", "upstream")
        }
        print(
            f"kubectl {version}: embedded passes {passed['embedded']}, upstream {passed['upstream']} of {len(embedded)}"
        )
        for command, theirs in upstream.items():
            ours = embedded[command]
            if not theirs.passed or ours.passed:
                continue
            cover = next((k for k in listed if k.covers(version, command)), None)
            if cover is not None:
                used.add(cover)
                continue
            unexpected.append(f"kubectl {version} {command}: exit {ours.code} on embedded ({ours.said})")
    upstream_failures = sorted(
        {
            f"{c} ({o.said})"
            for (v, s), found in outcomes.items()
            if s == "upstream"
            for c, o in found.items()
            if not o.passed
        }
    )
    if upstream_failures:
        print("failing on upstream too (not required):\n  " + "\n  ".join(upstream_failures))
    ran = [k for k in listed if any(k.covers(v, k.command) for v in versions)]
    stale = [f"{k.command} (versions {k.version})" for k in ran if k not in used]
    assert not unexpected, f"{len(unexpected)} commands fail on embedded and pass upstream:\n" + "\n".join(
        unexpected
    )
    assert not stale, "kubectl_known.yaml lists commands that pass now; delete their entries: " + ", ".join(
        stale
    )
