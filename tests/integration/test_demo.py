"""`multiqueue local demo`, the README's first command, on the embedded default and on upstream control planes."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path

import pytest

from multiqueue.local.upstream import Binaries, MissingBinaries
from tests.support.processes import REPO

SUMMARY = re.compile(r"summary: Job default/demo Complete on (worker-\d): 4/4 completions \(indexes 0-3\)")


async def demo(tmp_path: Path, *args: str) -> tuple[int, str]:
    """``multiqueue local demo`` with its temporary folders made under ``tmp_path``."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "multiqueue", "local", "demo", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, cwd=REPO,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )  # fmt: skip
    async with asyncio.timeout(240):
        out, _ = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode()


def _demo_folders(under: Path) -> list[Path]:
    return list(under.glob("multiqueue-demo-*"))


async def test_the_demo_dispatches_a_job_to_a_worker_and_shows_it_complete(tmp_path: Path) -> None:
    """The README's first command as written: it also removes the folder it made."""
    code, out = await demo(tmp_path)
    assert code == 0, out
    assert SUMMARY.search(out), out
    assert "dispatched to worker-" in out
    assert re.search(r"^  on worker-\d: \d running, [1-4]/4 succeeded, 0 failed$", out, re.MULTILINE), (
        "progress"
    )
    assert "removed" in out and _demo_folders(tmp_path) == [], out


async def test_the_demo_on_upstream_control_planes(tmp_path: Path) -> None:
    try:
        Binaries.find()
    except MissingBinaries as exc:
        reason = f"upstream control plane binaries not available ({exc})"
        print(reason)
        pytest.skip(reason)
    code, out = await demo(tmp_path, "--control-plane", "upstream", "--keep")
    assert code == 0, out
    assert "upstream control planes" in out
    (kept,) = _demo_folders(tmp_path)
    assert (kept / "kubeconfig").is_file(), out
    assert SUMMARY.search(out), out
