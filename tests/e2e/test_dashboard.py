"""The dashboard in a real browser (headless Chromium over the DevTools protocol), against local clusters.

A person opens the URL the manager prints, sees both workers Connected, submits a Job with kubectl's API, watches
it appear, run and complete on a worker, opens it to read its Events and logs, opens a waiting Job to read each
worker's placement verdict, and sees a worker turn unhealthy when its API server stops. Screenshots are written
to ``$MULTIQUEUE_TEST_ARTIFACTS/dashboard`` (default: ``test-artifacts/`` in the repository); docs/dashboard.md
shows one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from multiqueue.api.types import JOBS
from multiqueue.dashboard import server as dashboard
from multiqueue.dashboard.live import Timings
from tests.e2e.conftest import BUSYBOX, Clusters
from tests.support.browser import Page, launch

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("MULTIQUEUE_TEST_ARTIFACTS", REPO / "test-artifacts")) / "dashboard"
DOCS_SCREENSHOT = REPO / "docs" / "images" / "dashboard.png"
VIEWPORT = (1280, 900)
WITHIN = 60.0  # seconds: a Job runs on a process kubelet; an upstream control plane takes longer than ours


def job(name: str, script: str | None = None, pin: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "managedBy": "multiqueue.dev/dispatcher",
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": BUSYBOX,
                            "command": ["sh", "-c", script or f"echo hello from {name}"],
                        }
                    ],
                }
            },
        },
    }
    if pin is not None:
        body["metadata"]["labels"] = {"multiqueue.dev/requested-cluster": pin}
    return body


def row(name: str) -> str:
    """The JS expression of a Job's row in the table (drawn only while in view: the test filters to it)."""
    return f"document.querySelector('#jobs .row[data-job={json.dumps('default/' + name)}]')"


def worker(name: str) -> str:
    return f"document.querySelector('#workers tr[data-worker-name={json.dumps(name)}]')"


async def search(page: Page, text: str) -> None:
    await page.evaluate(
        "(() => { const box = document.getElementById('search');"
        f" box.value = {json.dumps(text)}; box.dispatchEvent(new Event('input')); }})()"
    )


async def test_a_job_appears_runs_and_completes_and_a_stopped_worker_turns_unhealthy(
    dispatching_clusters: Clusters, tmp_path: Path
) -> None:
    dispatching_clusters.in_process(
        "opens the in-process manager's dashboard and stops a worker's API server (deploy/ leaves the dashboard off)"
    )
    clusters = dispatching_clusters
    local = clusters.local
    assert local is not None and local.manager is not None
    # A chart point every second, so the screenshot shows lines after a few seconds rather than fifteen.
    board = await dashboard.serve(local.manager, Timings(chart=1.0))
    assert board is not None, "local up's manager config enables the dashboard"
    base = board.url.split("?")[0]
    try:
        async with launch(tmp_path) as browser:
            page = await browser.new_page(*VIEWPORT)
            assert await page.goto(base) == 401
            assert "the URL the manager printed" in await page.evaluate("document.body.innerText")
            assert await page.goto(base + "?token=guessed") == 401
            assert await page.goto(board.url) == 200
            assert await page.evaluate("location.search") == "", "the token is gone from the address bar"
            await page.wait_for("document.getElementById('connection').dataset.state === 'live'")
            for name in ("worker-1", "worker-2"):
                await page.wait_for(f"{worker(name)}?.dataset.healthy === 'true'")

            # It runs for a few seconds, so its panel is open before it ends and must show the Events that follow.
            script = "echo hello from from-the-browser-test; sleep 3"
            await clusters.client().create(JOBS, job("from-the-browser-test", script=script), "default")
            await search(page, "from-the-browser-test")
            await page.wait_for(
                f"{row('from-the-browser-test')}?.dataset.state === 'Running'", timeout=WITHIN
            )
            await page.evaluate(f"{row('from-the-browser-test')}.click()")
            await page.wait_for("document.querySelector('#detail-events tr[data-reason=\"Dispatched\"]')")
            await page.wait_for(
                f"{row('from-the-browser-test')}.dataset.state === 'Complete'", timeout=WITHIN
            )
            placed = await page.evaluate(f"{row('from-the-browser-test')}.dataset.worker")
            assert placed in ("worker-1", "worker-2")
            stored = await clusters.client().get(JOBS, "from-the-browser-test", "default")
            assert stored["metadata"]["labels"]["multiqueue.dev/cluster"] == placed

            await page.wait_for("document.querySelector('#detail-events tr[data-reason=\"Completed\"]')")
            await page.evaluate("document.getElementById('detail-logs-start').click()")
            await page.wait_for(
                "document.getElementById('detail-logs').textContent.includes('hello from from-the-browser-test')",
                timeout=WITHIN,
            )
            await page.screenshot(ARTIFACTS / "job-complete.png")
            await page.evaluate("document.getElementById('detail-close').click()")
            await search(page, "")

            # What waits says why, and what failed says how.
            for body in (
                job("fails", script="echo giving up; exit 3"),
                job("pinned-to-a-missing-worker", pin="worker-9"),
                *(job(f"batch-{i}") for i in range(3)),
            ):
                await clusters.client().create(JOBS, body, "default")
            await page.wait_for(f"{row('fails')}?.dataset.state === 'Failed'", timeout=WITHIN)
            assert await page.evaluate(f"{row('fails')}.querySelector('.reason').textContent") == (
                "BackoffLimitExceeded"
            )
            waiting = row("pinned-to-a-missing-worker")
            await page.wait_for(f"{waiting}?.querySelector('.reason').textContent !== '-'", timeout=WITHIN)
            assert await page.evaluate(f"{waiting}.dataset.state") == "Waiting"
            assert "worker-9" in await page.evaluate(f"{waiting}.title"), (
                "the message names the missing worker"
            )
            # Its panel says why, worker by worker, as multiqueue explain does.
            await page.evaluate(f"{waiting}.click()")
            rows = "document.querySelectorAll('#detail-explain tr[data-explain-worker]')"
            await page.wait_for(f"{rows}.length === 2")
            verdicts = await page.evaluate(
                f"Object.fromEntries([...{rows}].map((r) => [r.dataset.explainWorker,"
                " [...r.querySelectorAll('td[data-passes=\"false\"]')].map((c) => c.textContent)]))"
            )
            assert verdicts == {w: ["is not the pinned worker (worker-9)"] for w in ("worker-1", "worker-2")}
            decision = await page.evaluate("document.getElementById('detail-explain-line').textContent")
            assert decision.startswith("waiting: 0/2 workers can take this Job"), decision
            await page.screenshot(ARTIFACTS / "job-explained.png")
            await page.evaluate("document.getElementById('detail-close').click()")
            for i in range(3):
                await page.wait_for(f"{row(f'batch-{i}')}?.dataset.state === 'Complete'", timeout=WITHIN)
            await page.wait_for("window.dashboard.chart.length >= 4", timeout=20)
            await page.screenshot(ARTIFACTS / "overview.png")

            await local.stop_server("worker-2")
            await page.wait_for(f"{worker('worker-2')}.dataset.healthy === 'false'", timeout=30)
            assert await page.evaluate(f"{worker('worker-1')}.dataset.healthy") == "true"
            reason = await page.evaluate(f"{worker('worker-2')}.querySelector('.health').textContent")
            assert reason.startswith(("ClientConnectionFailed", "ServerError")), reason
            await page.screenshot(ARTIFACTS / "worker-unhealthy.png")
            assert not [m for m in page.console if m.type in ("error", "exception")], page.console
    finally:
        await board.stop()


def test_the_docs_show_a_screenshot_the_browser_test_made() -> None:
    """docs/dashboard.md shows a copy of ``overview.png`` from a run of the test above (same viewport)."""
    header = DOCS_SCREENSHOT.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(header[16:20], "big"), int.from_bytes(header[20:24], "big")
    assert (width, height) == VIEWPORT
    assert "images/dashboard.png" in (REPO / "docs" / "dashboard.md").read_text()
