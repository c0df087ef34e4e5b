"""What every benchmark shares: a local API server in a child process, and the results file."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import platform
import secrets
import statistics
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results.json"


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def summary_ms(values: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(percentile(values, 50) * 1000, 2),
        "p99_ms": round(percentile(values, 99) * 1000, 2),
        "mean_ms": round(statistics.fmean(values) * 1000, 2) if values else float("nan"),
    }


def record(name: str, figures: dict[str, Any], path: Path = RESULTS) -> None:
    """Merge one benchmark's figures into the results file, stamped with when and where they were measured."""
    results = json.loads(path.read_text()) if path.exists() else {}
    results[name] = {
        "measured_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": {"python": platform.python_version(), "cpus": multiprocessing.cpu_count()},
        **figures,
    }
    path.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    print(json.dumps({name: results[name]}, indent=2))


def _serve(port_queue: Any, token: str, state_dir: str, window: int) -> None:
    from multiqueue.apiserver.server import ApiServer, ServerConfig

    async def main() -> None:
        server = ApiServer(
            ServerConfig(name="bench", token=token, state_dir=Path(state_dir), watch_window=window)
        )
        await server.start()
        port_queue.put(server.port)
        await asyncio.Event().wait()

    asyncio.run(main())


class ServerProcess:
    """A local API server in its own process, so the load generator does not share its CPU time slice."""

    def __init__(self, window: int = 200_000) -> None:
        self.token = secrets.token_urlsafe(16)
        self.state_dir = tempfile.mkdtemp(prefix="mq-bench-")
        context = multiprocessing.get_context("spawn")
        ports = context.Queue()
        self.process = context.Process(
            target=_serve, args=(ports, self.token, self.state_dir, window), daemon=True
        )
        self.process.start()
        self.url = f"http://127.0.0.1:{ports.get(timeout=60)}"

    def stop(self) -> None:
        self.process.terminate()
        self.process.join(10)

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}
