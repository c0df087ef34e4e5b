"""`multiqueue manager` run against local clusters: what an operator scrapes and reads from it."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

import aiohttp
import yaml

from tests.integration.test_local_up import local_up
from tests.unit.test_docs import documented_metrics


def _families(text: str) -> dict[str, str]:
    """name -> type, from the TYPE lines of the Prometheus text format."""
    return {
        parts[2]: parts[3]
        for parts in (line.split() for line in text.splitlines() if line.startswith("# TYPE "))
    }


async def test_the_manager_exports_exactly_the_documented_metrics_and_logs_json(tmp_path: Path) -> None:
    # Clusters only: the manager under test runs the management cluster's Job controller itself.
    clusters = tmp_path / "local.yaml"
    clusters.write_text(
        yaml.safe_dump(
            {
                "clusters": [
                    {"name": "management", "controllers": []},
                    {"name": "worker-1"},
                    {"name": "worker-2"},
                ]
            }
        )
    )
    state = tmp_path / "state"
    kubeconfig = str(state / "kubeconfig")
    config = tmp_path / "manager.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "management": {"kubeconfig": kubeconfig, "context": "management"},
                "workers": [
                    {"name": name, "kubeconfig": kubeconfig, "context": name}
                    for name in ("worker-1", "worker-2")
                ],
                "embeddedControllers": ["job", "cronjob"],
                "metricsAddress": "127.0.0.1:0",
            }
        )
    )
    async with local_up(state, "--config", str(clusters)):
        manager = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "multiqueue", "manager", "--config", str(config), "--log-format", "json",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            assert manager.stdout is not None
            async with asyncio.timeout(60):
                started = (await manager.stdout.readline()).decode()
            assert " metrics on http://" in started, started
            url = started.rsplit(" ", 1)[1].strip()
            async with aiohttp.ClientSession() as session, session.get(url) as response:
                assert response.status == 200
                assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
                text = await response.text()
        finally:
            if manager.returncode is None:
                manager.send_signal(signal.SIGTERM)
            _, stderr = await asyncio.wait_for(manager.communicate(), 60)
    assert manager.returncode == 0, stderr.decode()

    exported = _families(text)
    documented = {name: kind for name, (kind, _labels) in documented_metrics().items()}
    assert exported == documented
    lines = text.splitlines()
    for worker in ("worker-1", "worker-2"):
        assert any(
            line.startswith(f'multiqueue_cluster_active{{cluster="{worker}",reason="') for line in lines
        )

    logged = [json.loads(line) for line in stderr.decode().splitlines() if line.strip()]
    assert logged, "the manager logged nothing"
    for entry in logged:
        assert {"time", "level", "logger", "message"} <= entry.keys(), entry
    assert any(entry["logger"].startswith("multiqueue") for entry in logged)
