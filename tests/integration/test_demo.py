"""`multiqueue local demo`, the README's first command, on the embedded default and on upstream control planes."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

import pytest

from multiqueue.local.upstream import Binaries, MissingBinaries
from tests.support.processes import REPO

SUMMARY = re.compile(r"summary: Job default/demo Complete on (worker-\d): 4/4 completions \(indexes 0-3\)")


async def demo(*args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "multiqueue", "local", "demo", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, cwd=REPO,
    )  # fmt: skip
    async with asyncio.timeout(240):
        out, _ = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode()


async def test_the_demo_dispatches_a_job_to_a_worker_and_shows_it_complete(tmp_path: Path) -> None:
    code, out = await demo("--state-dir", str(tmp_path / "state"))
    assert code == 0, out
    assert SUMMARY.search(out), out
    assert "dispatched to worker-" in out


async def test_the_demo_on_upstream_control_planes(tmp_path: Path) -> None:
    try:
        Binaries.find()
    except MissingBinaries as exc:
        reason = f"upstream control plane binaries not available ({exc})"
        print(reason)
        pytest.skip(reason)
    code, out = await demo("--control-plane", "upstream", "--state-dir", str(tmp_path / "state"))
    assert code == 0, out
    assert "upstream control planes" in out
    assert SUMMARY.search(out), out
