"""The walkthroughs of the README, Getting started and the User guide, run as written against one
``multiqueue local up``: each shell block line by line in one shell, failing on the first command that fails.

Two things differ from what a person types: the state directory ``/tmp/mq`` is a fresh temporary one, and ``PORT``
is the port ``local up`` prints for the manager's metrics. The blocks are read from the documents each run, so an
edit to a walkthrough is tested as it is.
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.support.docblocks import named_files, shell_blocks, yaml_block
from tests.support.processes import REPO, Spawned, kill_processes_under

READY = r"press Ctrl-C to stop"
METRICS = r"curl (?P<url>http://\S+)/metrics"
MARK = ":::: "


@dataclass
class Walk:
    """One ``local up`` the walkthroughs share, and how the documents' words map onto it."""

    state: Path
    metrics_url: str

    def adapt(self, line: str) -> str:
        line = line.replace("/tmp/mq", str(self.state))
        return line.replace("http://127.0.0.1:PORT", self.metrics_url)

    async def run(self, block: str, cwd: Path = REPO, env: dict[str, str] | None = None) -> dict[str, str]:
        """Each line of ``block`` in one bash (so ``export`` carries on); command -> what it printed."""
        lines = [self.adapt(line) for line in block.strip().splitlines() if line.strip()]
        script = ["set -euo pipefail"]
        for line in lines:
            script += [f"echo {shlex.quote(MARK + line)}", line]
        process = await asyncio.create_subprocess_exec(
            "bash", "-c", "\n".join(script),
            cwd=str(cwd), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            env={**_environ(), **(env or {})},
        )  # fmt: skip
        async with asyncio.timeout(180):
            out, _ = await process.communicate()
        text = out.decode()
        assert process.returncode == 0, f"a walkthrough command failed:\n{text}"
        printed: dict[str, str] = {}
        for chunk in text.split(MARK)[1:]:
            command, _, output = chunk.partition("\n")
            printed[command] = output
        assert list(printed) == lines, text
        return printed


def _environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}


@pytest.fixture
async def walk(tmp_path: Path) -> AsyncIterator[Walk]:
    """The README's first line, ``multiqueue local up --state-dir /tmp/mq &``, until it says it serves."""
    missing = [tool for tool in ("kubectl", "curl", "multiqueue") if shutil.which(tool) is None]
    if missing:
        reason = f"the walkthroughs need {', '.join(missing)} on PATH"
        print(reason)
        pytest.skip(reason)
    (first, *_) = shell_blocks("README.md", "## Trying the local clusters")[0].splitlines()
    command = first.split("#", 1)[0].strip()
    assert command.endswith("&"), first
    state = tmp_path / "mq"
    up = Spawned("local up", ["bash", "-c", f"exec {command.removesuffix('&').replace('/tmp/mq', str(state))}"],
                 tmp_path / "local-up.log")  # fmt: skip
    await up.start()
    try:
        await up.wait_for_line(READY, within=120)
        metrics = await up.wait_for_line(METRICS, within=5)
        yield Walk(state, metrics.group("url"))
    finally:
        await up.kill_group()
        kill_processes_under(state)


def _printed(printed: dict[str, str], starts: str) -> str:
    return next(out for command, out in printed.items() if command.startswith(starts))


async def test_the_readme_and_getting_started_walkthroughs_run_as_written(walk: Walk) -> None:
    (readme,) = [b for b in shell_blocks("README.md", "## Trying the local clusters") if "local up" in b]
    printed = await walk.run("\n".join(readme.strip().splitlines()[1:]))  # local up itself is the fixture
    assert "job.batch/hello-dispatched condition met" in _printed(printed, "kubectl wait")
    labels = _printed(printed, "kubectl get jobs --show-labels")
    assert re.search(r"hello-dispatched .*multiqueue\.dev/cluster=worker-1", labels), labels
    assert "hello-dispatched" in _printed(printed, "kubectl --context worker-1 get jobs"), "the kept mirror"
    assert "hello from index 0" in _printed(printed, "kubectl logs job/hello-indexed")
    logs = _printed(printed, "multiqueue logs hello-dispatched")
    assert {f"index {i} ran on" for i in range(4)} <= {
        line.split("]", 1)[-1].strip()[:14] for line in logs.splitlines()
    }

    started = shell_blocks("docs/getting-started.md", "## Local clusters that stay up")
    assert started[0].strip() == "multiqueue local up --state-dir /tmp/mq", "the fixture starts it so"
    printed = await walk.run(started[1])
    status = _printed(printed, "multiqueue status")
    assert re.search(
        r"Job\s+default/hello-dispatched\s+worker-1\s+Complete\s+4/4\s+CompletionsReached", status
    ), status
    assert "multiqueue_" in _printed(printed, "curl"), "the manager's metrics"


async def test_the_user_guide_runs_as_written(walk: Walk) -> None:
    guide = "docs/user-guide.md"
    manifest = yaml.safe_load(yaml_block(guide, "## Submit a Job"))
    kubeconfig = str(walk.state / "kubeconfig")
    applied = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", kubeconfig, "apply", "-f", "-",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await applied.communicate(yaml.safe_dump(manifest).encode())
    assert applied.returncode == 0, out.decode()
    # The guide's commands run where manager.yaml is, with the kubeconfig of local up.
    env = {"KUBECONFIG": kubeconfig}
    wait = "kubectl wait --for=condition=complete --timeout=60s job/hello"
    await walk.run(wait, walk.state, env)
    (where,) = shell_blocks(guide, "## See where it runs")
    printed = await walk.run(where, walk.state, env)
    assert re.search(r"hello\s+Complete\s+3/3.*worker-\d", _printed(printed, "kubectl get job hello")), (
        printed
    )
    described = _printed(printed, "kubectl describe job hello")
    assert "Dispatched" in described and "Completed" in described, described
    for name, text in named_files(guide).items():
        (walk.state / name).write_text(text)
    aimed, capacity = shell_blocks(guide, "## Choose a worker")
    printed = await walk.run(aimed, walk.state, env)
    table = _printed(printed, "kubectl get jobs pinned selected")
    # Pinned: both labels name worker-2. Selected: nothing requested, placed on the worker labelled region=eu.
    assert re.search(r"^pinned\s+Complete\s+1/1\s+\S+\s+\S+\s+worker-2\s+worker-2$", table, re.MULTILINE), (
        table
    )
    assert re.search(r"^selected\s+Complete\s+1/1\s+\S+\s+\S+\s+worker-1$", table, re.MULTILINE), table
    printed = await walk.run(capacity, walk.state, env)
    status = _printed(printed, "multiqueue status")
    assert re.search(r"^worker-1\s.*\scpu 0/4\s", status, re.MULTILINE), status
    assert re.search(r"^Job\s+default/big\s+-\s+Waiting\s", status, re.MULTILINE), status
    (suspend,) = shell_blocks(guide, "## Suspend and resume")
    await walk.run(suspend, walk.state, env)
    (logs,) = shell_blocks(guide, "## Logs")
    printed = await walk.run(logs, walk.state, env)
    assert _printed(printed, "multiqueue logs hello --index 2").strip() == "index 2"
    every = _printed(printed, "multiqueue logs hello --config")
    assert [line.split("] ", 1)[1] for line in every.splitlines()] == ["index 0", "index 1", "index 2"]
    (ended,) = shell_blocks(guide, "## How it ended")
    printed = await walk.run(ended, walk.state, env)
    warnings = _printed(printed, "kubectl get events")
    assert re.search(r"Warning\s+BackoffLimitExceeded\s+job/fails\s", warnings), warnings
    assert _printed(printed, "multiqueue logs fails").strip() == "cannot find the input"
    (split,) = shell_blocks(guide, "## Split an Indexed Job across workers")
    printed = await walk.run(split, walk.state, env)
    status = _printed(printed, "multiqueue status")
    assert re.search(
        r"^Job\s+default/sweep\s+worker-1\[0-5\],worker-2\[6-11\]\s+Complete\s+12/12\s", status, re.MULTILINE
    ), status
    assert _printed(printed, "multiqueue logs sweep --index 7").strip() == "index 7 on sweep-7"


async def test_why_is_my_job_waiting_runs_as_written(walk: Walk) -> None:
    page = "docs/waiting.md"
    env = {"KUBECONFIG": str(walk.state / "kubeconfig")}
    for name, text in named_files(page).items():
        (walk.state / name).write_text(text)
    (huge,) = shell_blocks(page, "## A Job that fits nowhere")
    printed = await walk.run(huge, walk.state, env)
    line = "0/2 workers can take this Job: 2 ask more cpu than they have in all (worker-1: cpu 4, worker-2: cpu 4)"
    assert f"Decision:  waiting: {line}" in _printed(printed, "multiqueue explain huge").splitlines()
    as_json = yaml.safe_load(_printed(printed, "kubectl multiqueue explain huge"))
    assert (as_json["state"], as_json["reason"], as_json["summary"]) == ("Waiting", "NeverFits", line)
    (choosy,) = shell_blocks(page, "## Asking for workers by label")
    printed = await walk.run(choosy, walk.state, env)
    shown = _printed(printed, "multiqueue explain choosy")
    assert "Decision:  finished on worker worker-2 (CompletionsReached)" in shown.splitlines(), shown
    assert re.search(
        r"^worker-1\s+True\s+8/9\s+does not match the required worker affinity", shown, re.MULTILINE
    ), shown
