"""The MultiKueue comparison as docs/performance.md shows it, on 3 Jobs: Kueue and multiqueue dispatch the same Jobs
on the same upstream clusters, and the requests each makes are counted by the servers. What is asserted is
behaviour, not timing: every Job finishes under each dispatcher, MultiKueue makes a Workload on every worker
(AllAtOnce) and a Job copy on one, and multiqueue makes one mirror per Job and deletes it."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import sys
from pathlib import Path

import pytest

from multiqueue.local.upstream import Binaries, MissingBinaries
from tests.bench import multikueue_kueue as kueue
from tests.support.docblocks import shell_blocks
from tests.support.processes import REPO

JOBS = 3
HEADING = "## Side by side with MultiKueue"


def _skip(reason: str) -> None:
    print(reason)
    pytest.skip(reason)


async def test_the_documented_comparison_runs_both_dispatchers_and_counts_their_requests(
    tmp_path: Path,
) -> None:
    (block,) = shell_blocks("docs/performance.md", HEADING)
    lines = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    build, command = [line for line in lines if line]
    assert build == "hack/build-kueue.sh", block
    assets = kueue.assets_dir(kueue.pinned_version())
    missing = kueue.missing_assets(assets)
    if missing is not None:
        _skip(f"{missing} (CI does not build Kueue: a Go build of minutes)")
    try:
        Binaries.find()
    except MissingBinaries as exc:
        _skip(f"upstream control plane binaries not available ({exc})")
    # Built already, so the documented build only finds its stamp; its last line is where the bench looks.
    built = await asyncio.create_subprocess_exec(
        "bash", build, cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await built.communicate()
    # Its cache, which is where the bench looks unless MULTIQUEUE_KUEUE_ASSETS names another folder.
    cache = kueue.assets_dir(kueue.pinned_version(), {**os.environ, "MULTIQUEUE_KUEUE_ASSETS": ""})
    assert built.returncode == 0 and out.decode().strip().splitlines()[-1] == str(cache), err.decode()
    results = tmp_path / "results.json"
    # As written, with a tiny burst and a results file of its own (argparse takes the last of a flag).
    argv = [*shlex.split(command), "--jobs", str(JOBS), "--results", str(results)]
    assert argv[:3] == ["python3", "-m", "tests.bench.multikueue"], command
    process = await asyncio.create_subprocess_exec(
        sys.executable, *argv[1:], cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    async with asyncio.timeout(600):
        printed, _ = await process.communicate()
    assert process.returncode == 0, printed.decode()[-3000:]
    ((name, run),) = json.loads(results.read_text()).items()
    assert name == f"multikueue/{JOBS} jobs/2 workers"
    assert run["settings"]["kueue_version"] == kueue.pinned_version()
    multikueue, multiqueue = run["multikueue"], run["multiqueue"]
    for figures in (multikueue, multiqueue):
        assert figures["jobs_complete"] == JOBS and figures["never_finished"]["count"] == 0, figures
        assert figures["dispatcher_cpu_ms_per_job"] > 0, figures
        # Not above 0 for multiqueue: its mirror can be seen before the bench reads the answer to its create.
        assert figures["dispatch_latency"]["p50_ms"] <= figures["dispatch_latency"]["p99_ms"], figures
    assert multikueue["dispatch_latency"]["p50_ms"] > 0, multikueue
    workers = ("worker-1", "worker-2")
    made = {w: multikueue["requests_per_job_by_resource"][w] for w in workers}
    assert all(made[w]["create workloads"] == 1.0 for w in workers), (
        f"AllAtOnce: a Workload on every worker {made}"
    )
    assert sum(made[w].get("create jobs", 0) for w in workers) == 1.0, f"one Job copy, on one worker {made}"
    assert multikueue["requests_per_job_by_resource"]["management"]["create workloads"] == 1.0
    assert multikueue["workers_kueue_cpu_ms_per_job"] > 0
    mirrors = {w: multiqueue["requests_per_job_by_resource"].get(w, {}) for w in workers}
    assert sum(mirrors[w].get("create jobs", 0) for w in workers) == 1.0, f"one mirror per Job {mirrors}"
    assert sum(mirrors[w].get("delete jobs", 0) for w in workers) == 1.0, f"deleted once finished {mirrors}"
    assert "create workloads" not in multiqueue["requests_per_job_by_resource"]["management"]
