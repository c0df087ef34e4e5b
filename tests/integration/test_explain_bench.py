"""The explain benchmark on a few Jobs: it runs, and the answers it times are the right ones. Its figures are
recorded, never asserted."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from tests.integration.test_bench import run_to_the_end
from tests.support.docblocks import shell_blocks

JOBS = 100


async def test_the_explain_benchmark_times_the_right_answers(tmp_path: Path) -> None:
    (block,) = shell_blocks("docs/waiting.md", "## With 10,000 Jobs")
    (command,) = [line for line in block.splitlines() if "tests.bench.explain" in line]
    results = tmp_path / "results.json"
    # As written, with fewer Jobs and a results file of its own (argparse takes the last of a flag).
    argv = [*shlex.split(command), "--jobs", str(JOBS), "--results", str(results)]
    assert argv[:3] == ["python3", "-m", "tests.bench.explain"], command
    await run_to_the_end(argv)
    run = json.loads(results.read_text())[f"explain/{JOBS} jobs"]
    assert (run["jobs"], run["jobs_finished"], run["jobs_placed"], run["jobs_waiting"]) == (JOBS, 40, 2, 1)
    decisions = run["decisions"]
    assert decisions["placed"] in ("placed on worker worker-1", "placed on worker worker-2")
    assert decisions["waiting"] == (
        "waiting: 0/2 workers can take this Job: 2 ask more cpu than they have in all "
        "(worker-1: cpu 4, worker-2: cpu 4)"
    )
    assert decisions["finished"] == "finished on worker worker-1 (Complete)"
    assert decisions["suspended"].startswith("suspended: not placed until it is resumed; now it would go to")
    assert run["from_clusters_same_as_in_manager"] is True, "the clusters and the read model disagree"
    assert run["in_manager"]["calls"] > 0 and run["from_clusters"]["calls"] > 0
