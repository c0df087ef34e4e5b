"""The dispatch benchmark as docs/performance.md shows it, on a small burst: it runs every cluster and the manager
in processes of their own, follows each Job to its end, and records what the page reports. The request counts it
records are behaviour, not timing: one create and one delete per mirror on the workers, whatever the load."""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
from pathlib import Path

import pytest

from tests.support.browser import chromium_path
from tests.support.docblocks import shell_blocks
from tests.support.processes import REPO

JOBS = 24


async def run_to_the_end(argv: list[str]) -> None:
    """A ``python3 -m ...`` command line from the docs, run from the repository; it must exit 0."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        *argv[1:],
        cwd=str(REPO),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    async with asyncio.timeout(240):
        out, _ = await process.communicate()
    assert process.returncode == 0, out.decode()[-3000:]


async def test_the_documented_benchmark_runs_and_counts_the_managers_requests(tmp_path: Path) -> None:
    (block,) = shell_blocks("docs/performance.md", "## Running it")
    (command,) = [line for line in block.splitlines() if "tests.bench.dispatch_scale" in line]
    results = tmp_path / "results.json"
    # As written, with a smaller burst and a results file of its own (argparse takes the last of a flag).
    argv = [*shlex.split(command.split("#", 1)[0]), "--jobs", str(JOBS), "--results", str(results)]
    assert argv[:3] == ["python3", "-m", "tests.bench.dispatch_scale"], command
    await run_to_the_end(argv)
    (name, run), *_ = json.loads(results.read_text()).items()
    assert name == f"dispatch_scale/embedded/{JOBS} jobs/2 workers"
    assert run["jobs"] == JOBS and sum(run["completed_per_second"]) == JOBS
    assert run["jobs_per_s"] > 0 and run["raw_creates_per_s"] > 0
    assert run["status_sync_cdf_ms"]["100"] >= run["status_sync_cdf_ms"]["50"] >= 0
    sent = run["manager_requests_by_method"]
    assert sent["workers POST 201"] == JOBS, "one create per mirror: its namespace is made only when missing"
    assert sent["workers DELETE 200"] == JOBS, "one delete per mirror (mirrorTTLSecondsAfterFinished: 0)"
    assert sent["management PATCH 200"] >= 2 * JOBS, "placed, then let go"
    assert run["manager_events_per_job"] > 0
    assert run["served_per_job"]["management"]["POST jobs"] == 1.0, (
        "the bench's own creates, as the server saw them"
    )


async def test_cheap_workers_leave_the_managers_own_cost_in_a_burst_and_at_a_steady_rate(
    tmp_path: Path,
) -> None:
    block, _ = shell_blocks("docs/performance.md", "## The manager's own cost")
    burst, steady = [shlex.split(line) for line in block.splitlines() if "tests.bench.dispatch_scale" in line]
    assert "cheap" in burst and "cheap" in steady and "--rate" in steady, block
    results = tmp_path / "results.json"
    # As written, smaller (argparse takes the last of a flag).
    await run_to_the_end([*burst, "--jobs", "8", "--results", str(results)])
    await run_to_the_end([*steady, "--rate", "8", "--duration", "1", "--results", str(results)])
    (burst_run,) = [
        r for name, r in json.loads(results.read_text()).items() if name.endswith("/8 jobs/2 workers")
    ]
    assert burst_run["jobs"] == 8 and sum(burst_run["completed_per_second"]) == 8
    assert burst_run["manager_cpu_ms_per_job"] > 0 and burst_run["workers_mode"] == "cheap"
    run = json.loads(results.read_text())["dispatch_scale_cheap/embedded/8 per s for 1 s/2 workers"]
    assert run["jobs"] == 8 and sum(run["completed_per_second"]) == 8
    assert run["workers_mode"] == "cheap" and run["rate_per_s"] == 8
    served = run["served_per_job"]["worker-1"]
    assert served["PATCH jobs/status"] == 1.0, "the status writer finishes each mirror with one write"
    assert not any("pods" in what for what in served), "a cheap worker runs no Job controller and no kubelet"
    assert run["status_writers"] == "bench" and run["bench_cpu_seconds"] > 0
    on_workers = run["manager_requests_per_job_by_verb"]["workers"]
    assert on_workers["POST"] == on_workers["DELETE"] == 1.0, "one create and one delete per mirror"
    assert 0 < run["dispatch_latency"]["p50_ms"] <= run["dispatch_latency"]["p99_ms"]
    assert run["manager_cpu_ms_per_job"] > 0 and run["status_sync_latency"]["p50_ms"] >= 0


async def test_fifty_workers_are_measured_against_two_on_a_machine_as_busy(tmp_path: Path) -> None:
    _, block = shell_blocks("docs/performance.md", "## The manager's own cost")
    many, few = [shlex.split(line) for line in block.splitlines() if "tests.bench.dispatch_scale" in line]
    assert "--idle-servers" in few and "--idle-servers" not in many, block
    results = tmp_path / "results.json"
    # As written, smaller: 3 workers against 2 and 1 idle server.
    await run_to_the_end([*many, "--jobs", "4", "--workers", "3", "--results", str(results)])
    await run_to_the_end([*few, "--jobs", "4", "--idle-servers", "1", "--results", str(results)])
    figures = json.loads(results.read_text())
    spread = figures["dispatch_scale_cheap/embedded/4 jobs/3 workers"]
    beside = figures["dispatch_scale_cheap/embedded/4 jobs/2 workers, 1 idle servers"]
    for run in (spread, beside):
        assert run["jobs"] == 4 and sum(run["completed_per_second"]) == 4
        assert run["manager_cpu_ms_per_job"] > 0
        assert run["manager_requests_per_job_by_verb"]["workers"]["POST"] == 1.0, "one mirror per Job"
    servers = {"manager", "management", "worker-1", "worker-2"}
    assert set(spread["cpu_seconds_by_process"]) == servers | {"worker-3"} and "idle_servers" not in spread
    # The idle server ran beside the run.
    assert beside["idle_servers"] == 1 and set(beside["cpu_seconds_by_process"]) == servers | {"idle-1"}


async def test_the_documented_dashboard_benchmark_times_the_page_and_its_changes(tmp_path: Path) -> None:
    (block,) = shell_blocks("docs/dashboard.md", "## With 10,000 Jobs")
    (command,) = [line for line in block.splitlines() if "tests.bench.dashboard" in line]
    results = tmp_path / "results.json"
    argv = [*shlex.split(command), "--jobs", "40", "--changes", "3", "--results", str(results)]
    assert argv[:3] == ["python3", "-m", "tests.bench.dashboard"], command
    if chromium_path() is None:
        pytest.skip("no Chromium to load the page in: apt-get install chromium (.ci/run installs it)")
    await run_to_the_end(argv)
    run = json.loads(results.read_text())["dashboard/40 jobs"]
    assert run["jobs"] == 40 and run["changes"] == 3
    assert run["page_load_s"] > 0 and run["snapshot_bytes"] > 40 * 100
    assert 0 <= run["change_shown_ms"]["p50"] <= run["change_shown_ms"]["max"]


async def test_the_documented_split_benchmark_runs_and_records_both_runs(tmp_path: Path) -> None:
    (block,) = shell_blocks("docs/performance.md", "## An Indexed Job split across workers")
    (command,) = [line for line in block.splitlines() if "tests.bench.split" in line]
    results = tmp_path / "results.json"
    # As written, with fewer and shorter pods (argparse takes the last of a flag).
    argv = [*shlex.split(command), "--indexes", "12", "--seconds", "0.2", "--results", str(results)]
    assert argv[:3] == ["python3", "-m", "tests.bench.split"], command
    await run_to_the_end(argv)
    run = json.loads(results.read_text())["split/12 indexes"]
    assert json.loads(run["split_parts"])["parts"] == {
        "worker-1": {"indexes": "0-5", "parallelism": 4},
        "worker-2": {"indexes": "6-11", "parallelism": 4},
    }
    assert run["whole_worker"] in ("worker-1", "worker-2")
    assert run["split_seconds"] > 0 and run["whole_seconds"] > 0
