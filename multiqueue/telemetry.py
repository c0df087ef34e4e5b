"""The manager's HTTP endpoint for operators: /healthz, /readyz and /metrics in the Prometheus text format.

Metric names follow upstream where upstream has one (the embedded controllers' job_controller_* families) and use
the ``multiqueue_`` prefix for the dispatcher's own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from aiohttp import web

from multiqueue.controllers.job import JobController
from multiqueue.dispatch.dispatcher import Dispatcher


def _counter(name: str, help_text: str, samples: Iterable[tuple[dict[str, str], float]]) -> list[str]:
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} counter"]
    for labels, value in samples:
        rendered = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        lines.append(f"{name}{{{rendered}}} {value}" if rendered else f"{name} {value}")
    return lines


def _summary(name: str, help_text: str, values: list[float]) -> list[str]:
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} summary"]
    if values:
        ordered = sorted(values)
        for q in (0.5, 0.99):
            lines.append(
                f'{name}{{quantile="{q}"}} {ordered[min(len(ordered) - 1, int(q * len(ordered)))]:.6f}'
            )
        lines.append(f"{name}_sum {sum(values):.6f}")
    lines.append(f"{name}_count {len(values)}")
    return lines


def render(dispatcher: Dispatcher | None, job_controller: JobController | None) -> str:
    lines: list[str] = []
    if dispatcher is not None:
        m = dispatcher.metrics
        lines += _counter(
            "multiqueue_jobs_dispatched_total",
            "Jobs dispatched, by worker.",
            [({"cluster": c}, n) for c, n in m.dispatched.items()],
        )
        lines += _counter(
            "multiqueue_status_sync_rejected_total",
            "Mirror statuses not applied because they break the Job status rules.",
            [({"reason": r}, n) for r, n in m.rejected.items()],
        )
        lines += _summary(
            "multiqueue_dispatch_latency_seconds",
            "From first seeing a Job to its mirror existing.",
            m.dispatch_latency,
        )
        states: dict[str, int] = {}
        for job in dispatcher.users.objects():
            if dispatcher.adapter.managed_by(job) == dispatcher.managed_by:
                state = "finished" if dispatcher.adapter.is_finished(job) else "active"
                states[state] = states.get(state, 0) + 1
        lines += [
            "# HELP multiqueue_managed_jobs Jobs with multiqueue's managedBy, by state.",
            "# TYPE multiqueue_managed_jobs gauge",
            *(f'multiqueue_managed_jobs{{state="{s}"}} {n}' for s, n in sorted(states.items())),
        ]
        lines += [
            "# HELP multiqueue_cluster_active Whether a worker's cache is in sync (1) or not (0).",
            "# TYPE multiqueue_cluster_active gauge",
            *(
                f'multiqueue_cluster_active{{cluster="{w.name}"}} {int(w.active)}'
                for w in dispatcher.worker_views()
            ),
        ]
    if job_controller is not None:
        m2 = job_controller.metrics
        lines += _counter(
            "job_controller_job_syncs_total",
            "The number of job syncs.",
            [({"completion_mode": c, "result": r, "action": a}, n) for (c, r, a), n in m2.syncs.items()],
        )
        lines += _counter(
            "job_controller_jobs_finished_total",
            "The number of finished jobs.",
            [
                ({"completion_mode": c, "result": r, "reason": why}, n)
                for (c, r, why), n in m2.finished.items()
            ],
        )
        lines += _counter(
            "job_controller_jobs_by_external_controller_total",
            "The number of Jobs managed by an external controller.",
            [({"controller_name": c}, n) for c, n in m2.by_external_controller.items()],
        )
        lines += _summary(
            "job_controller_job_sync_duration_seconds",
            "The time it took to sync a job.",
            m2.sync_seconds[-10000:],
        )
    return "\n".join(lines) + "\n"


def app(ready: Callable[[], bool], metrics: Callable[[], str]) -> web.Application:
    async def healthz(_request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_request: web.Request) -> web.Response:
        return web.Response(text="ok" if ready() else "not ready", status=200 if ready() else 503)

    async def metrics_handler(_request: web.Request) -> web.Response:
        return web.Response(text=metrics(), content_type="text/plain", charset="utf-8")

    application = web.Application()
    application.router.add_get("/healthz", healthz)
    application.router.add_get("/livez", healthz)
    application.router.add_get("/readyz", readyz)
    application.router.add_get("/metrics", metrics_handler)
    return application
