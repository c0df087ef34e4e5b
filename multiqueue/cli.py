"""The ``multiqueue`` command.

Conventions every subcommand keeps: bad usage or bad input is one line on stderr and exit status 2, never a
traceback; a check that ran and found problems exits 1; success exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import errno
import json
import os
import re
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import yaml

from multiqueue import __version__, completion
from multiqueue.api.durations import human_duration
from multiqueue.dispatch import inspect
from multiqueue.dispatch.config import ConfigError, ManagerConfig, load_manager_config, yaml_problem
from multiqueue.dispatch.generic import GenericJob
from multiqueue.dispatch.mirror import CLUSTER_LABEL
from multiqueue.kube.config import KubeconfigError
from multiqueue.kube.errors import KubeError
from multiqueue.loop.collector import collector_paused, settle
from multiqueue.loop.tasks import cancel_and_wait

if TYPE_CHECKING:
    from aiohttp import web

    from multiqueue import telemetry
    from multiqueue.controllers.embedded import EmbeddedControllers
    from multiqueue.dashboard import server as dashboard
    from multiqueue.dispatch import joblogs
    from multiqueue.dispatch.manager import Manager
    from multiqueue.local.config import ControlPlane, LocalConfig
    from multiqueue.local.up import LocalClusters

USAGE_ERROR = 2
RUNTIME_FAILURE = 1


class RuntimeFailure(Exception):
    """The command line and the config were right, the run failed (a cluster out of reach, a Job not found): one
    line, exit 1."""


class UsageError(Exception):
    """Bad input from the person at the keyboard: printed as one line, exit status 2."""


# Stand-ins in help text for facts of the upstream control plane, filled in only when help is printed.
BUILD_COMMAND_HELP = "{upstream build command}"
CACHE_DIR_HELP = "{upstream cache folder}"


class _HelpFormatter(argparse.HelpFormatter):
    """Help text with the upstream control plane's build command and cache folder, which come from the module
    that starts control planes: imported when help is printed, not by every command (explain starts sooner)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = super()._get_help_string(action)
        if text is None or (BUILD_COMMAND_HELP not in text and CACHE_DIR_HELP not in text):
            return text
        from multiqueue.local import upstream

        for stand_in, fact in (
            (BUILD_COMMAND_HELP, upstream.BUILD_COMMAND),
            (CACHE_DIR_HELP, upstream.cache_dir()),
        ):
            text = text.replace(stand_in, str(fact).replace("%", "%%"))
        return text


class _Parser(argparse.ArgumentParser):
    """argparse prints the whole usage on an error; we print one line naming the problem."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message}\n")


Handler = Callable[[argparse.Namespace], int]


def _validate(args: argparse.Namespace) -> int:
    """Check manifests against the batch/v1 rules the API server enforces, without a cluster (the rules imported
    here: no other command needs them)."""
    from multiqueue.api import manifests

    failures = 0
    checked = 0
    for path in args.files:
        for obj in _load_manifests(Path(path)):
            if not manifests.is_checked(obj):
                print(
                    f"{path}: {obj.get('kind', 'object')}/{manifests.display_name(obj)} skipped (not a batch/v1 Job or CronJob)"
                )
                continue
            checked += 1
            problems = _decoding_problem(obj) or manifests.validate_manifest(obj)
            kind = str(obj.get("kind", "")).lower() or "object"
            name = manifests.display_name(obj)
            if problems:
                failures += 1
                print(f"{path}: {problems}")
            else:
                print(f"{path}: {kind}/{name} is valid")
            if warning := manifests.managed_by_warning(obj):
                print(f"{path}: warning: {kind}/{name}: {warning}")
    if checked == 0:
        raise UsageError("no Job or CronJob manifests found in the given files")
    print(f"{checked - failures} valid, {failures} invalid")
    return 1 if failures else 0


def _decoding_problem(obj: dict[str, Any]) -> str:
    """What the API server's decoding refuses in ``obj``; imported here, as the other commands never need the
    Kubernetes client's models it loads (half of the CLI's start-up)."""
    from multiqueue.apiserver import decoding

    return decoding.decoding_problem(obj)


def _load_manifests(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise UsageError(yaml_problem(path, exc)) from exc
    objects: list[dict[str, Any]] = []
    for doc in docs:
        if not isinstance(doc, dict):
            raise UsageError(f"{path}: every document must be a Kubernetes object (a mapping)")
        if doc.get("kind") == "List":
            objects.extend(item for item in doc.get("items") or [] if isinstance(item, dict))
        else:
            objects.append(doc)
    return objects


def _default_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "multiqueue"


def _say(line: str) -> None:
    print(line, flush=True)


def _control_plane(args: argparse.Namespace, configured: ControlPlane) -> tuple[ControlPlane, Path | None]:
    """``--control-plane`` (else the config's) and ``--assets``, which only an upstream control plane uses."""
    chosen: ControlPlane = args.control_plane or configured
    if args.assets is not None and chosen != "upstream":
        raise UsageError("--assets names the upstream binaries: use it with --control-plane upstream")
    return chosen, Path(args.assets) if args.assets is not None else None


def _local_up(args: argparse.Namespace) -> int:
    """Serve the local clusters until SIGINT or SIGTERM."""
    from multiqueue.local.config import load_local_config

    try:
        config = load_local_config(Path(args.config) if args.config else None)
    except ConfigError as exc:
        raise UsageError(str(exc)) from exc
    control_plane, assets = _control_plane(args, config.control_plane)
    config = config.model_copy(update={"control_plane": control_plane})
    return asyncio.run(_serve_local(config, Path(args.state_dir), assets))


async def _serve_local(config: LocalConfig, state_dir: Path, assets: Path | None = None) -> int:
    from multiqueue import telemetry
    from multiqueue.local.up import LocalClusters
    from multiqueue.local.upstream import ControlPlaneError, MissingBinaries

    metrics = telemetry.Metrics()
    clusters = LocalClusters(config, state_dir, meter=metrics.meter, assets=assets, say=_say)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        started = await _start_unless_stopped(clusters, stop)
    except MissingBinaries as exc:
        raise UsageError(str(exc)) from exc
    except ControlPlaneError as exc:
        print(f"multiqueue: error: cannot start local clusters: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise UsageError(
                f"cannot start local clusters: a port of the config is taken ({exc.strerror}); choose another "
                "port in the config (0 picks a free one), or stop what listens there"
            ) from exc
        raise UsageError(f"cannot start local clusters: {exc}") from exc
    if not started:
        print("interrupted while starting; everything started is stopped again")
        return 130
    endpoints = None
    try:
        kubeconfig = clusters.kubeconfig_path
        print(f"local clusters are up: {', '.join(f'{n} ({url})' for n, url in clusters.urls().items())}")
        print(f"  export KUBECONFIG={kubeconfig}")
        if clusters.manager is not None and config.manager is not None:
            print(f"  multiqueue status --config {clusters.state_dir / 'manager.yaml'}")
            controllers = clusters.components[config.manager.management].controllers
            endpoints = await _OperatorEndpoints.serve(
                clusters.manager, controllers, metrics, config.manager.metrics_address, "manager."
            )
            print(f"  curl {endpoints.metrics_url}/metrics")
            if endpoints.board is not None:
                print(f"  dashboard: {endpoints.board.url}")
        others = [n for n in clusters.urls() if n != "management"]
        if others:
            print(f"  kubectl --context {others[0]} get jobs")
        print("press Ctrl-C to stop", flush=True)
        await stop.wait()
    finally:
        if endpoints is not None:
            await endpoints.stop()
        await clusters.stop()
    print(
        "local clusters stopped; pods still running go on, and the next `multiqueue local up` with this "
        "state directory takes them over"
    )
    return 0


async def _start_unless_stopped(clusters: LocalClusters, stop: asyncio.Event) -> bool:
    """Start the clusters; False if ``stop`` was set first (Ctrl-C while an upstream control plane takes its time):
    the start is cancelled, and cancelling it stops whatever it had started."""
    starting = asyncio.create_task(clusters.start())
    stopping = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
    if not starting.done():
        await cancel_and_wait([starting])
        return False
    starting.result()
    return True


def _local_demo(args: argparse.Namespace) -> int:
    """Dispatch one Job across local clusters and print a summary."""
    from multiqueue.local.demo import run_demo
    from multiqueue.local.upstream import ControlPlaneError, MissingBinaries

    state_dir = Path(args.state_dir) if args.state_dir else None
    control_plane, assets = _control_plane(args, "embedded")
    try:
        completed = asyncio.run(
            run_demo(state_dir, _say, control_plane=control_plane, assets=assets, keep=args.keep)
        )
    except MissingBinaries as exc:
        raise UsageError(str(exc)) from exc
    except ControlPlaneError as exc:
        print(f"multiqueue: error: cannot start local clusters: {exc}", file=sys.stderr)
        return 1
    return 0 if completed else 1


def _add_reach_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="the manager's config (YAML): its clusters, workers and name; without it, the management cluster is "
        "kubectl's (--kubeconfig, $KUBECONFIG or ~/.kube/config, and --context) and workers come from the "
        "worker Secrets you can read, or from contexts of their names",
    )
    parser.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig of the management cluster")
    parser.add_argument("--context", help="the management cluster's context in that kubeconfig")


def _add_control_plane_arguments(parser: argparse.ArgumentParser, default: str) -> None:
    parser.add_argument(
        "--control-plane",
        choices=("embedded", "upstream"),
        help="what serves each cluster: multiqueue's embedded API server and controllers, or upstream etcd, "
        "kube-apiserver, kube-controller-manager and kube-scheduler (built by `" + BUILD_COMMAND_HELP + "`); "
        f"default: {default}",
    )
    parser.add_argument(
        "--assets",
        metavar="DIR",
        help=f"the folder of the upstream binaries (default: $KUBEBUILDER_ASSETS, else {CACHE_DIR_HELP})",
    )


def _manager_config(path: str) -> ManagerConfig:
    try:
        return load_manager_config(Path(path))
    except ConfigError as exc:
        raise UsageError(str(exc)) from exc


def _manager(args: argparse.Namespace) -> int:
    """Run the manager until SIGINT or SIGTERM."""
    from multiqueue import telemetry

    config = _manager_config(args.config)
    telemetry.setup_logging(args.log_format)
    import uvloop  # the manager's CPU per Job is mostly the loop's and TLS's work per request and watch event

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(_run_manager(config))


async def _run_manager(config: ManagerConfig) -> int:
    from multiqueue import telemetry
    from multiqueue.assembly import ManagerProcess

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    tracing = telemetry.setup_tracing()
    metrics = telemetry.Metrics()
    tracer = tracing.get_tracer("multiqueue.dispatch") if tracing is not None else None
    process = ManagerProcess(config, meter=metrics.meter, tracer=tracer)
    try:
        await process.start()
    except (KubeconfigError, ConfigError) as exc:
        raise UsageError(f"cannot start the manager: {exc}") from exc
    except (KubeError, OSError) as exc:
        raise RuntimeFailure(f"cannot start the manager: {exc}") from exc
    settle()
    endpoints = None
    try:
        endpoints = await _OperatorEndpoints.serve(
            process.manager, process.controllers, metrics, config.metrics_address, ""
        )
        targets = [w.name for w in config.workers]
        if config.worker_secrets.enabled:
            targets.append(f"the workers of Secrets labelled {CLUSTER_LABEL} in {config.namespace}")
        print(
            f"manager {config.name}: dispatching {config.managed_by} Jobs to {', '.join(targets)}; "
            f"metrics on {endpoints.metrics_url}/metrics",
            flush=True,
        )
        if endpoints.board is not None:
            print(f"dashboard on {endpoints.board.url}", flush=True)
        await stop.wait()
    finally:
        if endpoints is not None:
            await endpoints.stop()
        await process.manager.stop()
        if tracing is not None:
            tracing.shutdown()
    return 0


@dataclasses.dataclass
class _OperatorEndpoints:
    """What a running manager serves its operators, the same for ``manager`` and ``local up``: /metrics with
    /healthz and /readyz, and the dashboard when the config enables it."""

    runner: web.AppRunner
    metrics_url: str
    board: dashboard.Dashboard | None

    @classmethod
    async def serve(
        cls,
        manager: Manager,
        controllers: EmbeddedControllers,
        metrics: telemetry.Metrics,
        metrics_address: str,
        settings: str,
    ) -> _OperatorEndpoints:
        """``settings``: where the config's settings sit, named in a line about an address in use."""
        from multiqueue import telemetry
        from multiqueue.dashboard import server as dashboard

        metrics.observe_manager(manager)
        if controllers.job is not None:
            metrics.observe_job_controller(controllers.job)
        runner, url = await _listening(
            "metrics",
            f"{settings}metricsAddress",
            metrics_address,
            telemetry.serve(manager, metrics, metrics_address),
        )
        try:
            board = await _listening(
                "the dashboard",
                f"{settings}dashboard.address",
                manager.config.dashboard.address,
                dashboard.serve(manager),
            )
        except BaseException:
            await runner.cleanup()
            raise
        return cls(runner, url, board)

    async def stop(self) -> None:
        if self.board is not None:
            await self.board.stop()
        await self.runner.cleanup()


T = TypeVar("T")


async def _listening(what: str, setting: str, address: str, serving: Awaitable[T]) -> T:
    """``serving`` started, or one line naming the config setting whose address cannot be listened on."""
    try:
        return await serving
    except OSError as exc:
        raise UsageError(
            f"cannot serve {what} on {address}: {exc.strerror or exc}; choose another {setting} in the config "
            "(port 0 picks a free one), or stop what listens there"
        ) from exc


def _reach(args: argparse.Namespace) -> tuple[ManagerConfig, Path | None]:
    """The manager config of ``--config``, with ``--kubeconfig``/``--context`` in place of its management cluster;
    without ``--config``, the management cluster as kubectl finds it, a manager of the default name dispatching
    every kind multiqueue knows (those the cluster serves are shown), and the path of the kubeconfig (whose
    contexts may reach the workers)."""
    if args.config is None:
        path = _kubectl_kubeconfig(args.kubeconfig)
        return inspect.reader_of(path, args.context), path
    config = _manager_config(args.config)
    chosen = {"kubeconfig": Path(args.kubeconfig) if args.kubeconfig else None, "context": args.context}
    update = {k: v for k, v in chosen.items() if v is not None}
    if update:
        config = config.model_copy(update={"management": config.management.model_copy(update=update)})
    return config, None


def _kubectl_kubeconfig(explicit: str | None) -> Path:
    """``--kubeconfig``, else ``$KUBECONFIG``, else ``~/.kube/config``, as kubectl reads them."""
    if explicit:
        return Path(explicit)
    listed = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    if len(listed) > 1:
        raise UsageError(
            f"$KUBECONFIG lists {len(listed)} files and multiqueue reads one: pass --kubeconfig FILE (the "
            "management cluster's) or --config FILE (the manager's config)"
        )
    path = Path(listed[0]) if listed else Path.home() / ".kube" / "config"
    if not path.is_file():
        raise UsageError(
            f"no kubeconfig at {path}: pass --kubeconfig FILE, or --config FILE (the manager's config)"
        )
    return path


def _status(args: argparse.Namespace) -> int:
    config, contexts = _reach(args)
    try:
        # One read of the clusters to print an answer: thousands of Jobs, no cycles, and the process ends soon.
        with collector_paused():
            workers, jobs_rows = asyncio.run(inspect.status(config, contexts))
    except KubeconfigError as exc:
        raise UsageError(f"cannot reach the management cluster: {exc}") from exc
    except (KubeError, OSError) as exc:
        raise RuntimeFailure(f"cannot reach the management cluster: {exc}") from exc
    in_scope = _namespace_filter(args)
    jobs_rows = [j for j in jobs_rows if in_scope(j)]
    widths: list[int] = []  # of the Jobs table, when one is printed
    if args.output in ("json", "yaml"):
        _print_document(
            {
                "workers": [_camel(dataclasses.asdict(w)) for w in workers],
                "jobs": [_camel(dataclasses.asdict(j)) for j in jobs_rows],
            },
            args.output,
        )
    elif args.output == "name":
        for j in jobs_rows:
            print(f"{j.kind.lower()}/{j.key}")
    else:
        _print_workers(workers, known_by_config=args.config is not None)
        print()
        header, rows = _job_table(jobs_rows, wide=args.output == "wide")
        widths = _print_table(header, rows)
    if not args.watch:
        return 0
    sys.stdout.flush()
    try:
        return asyncio.run(_watch_status(config, args, in_scope, widths))
    except (KubeError, OSError) as exc:
        raise RuntimeFailure(f"stopped watching the management cluster: {exc}") from exc


def _namespace_filter(args: argparse.Namespace) -> Callable[[inspect.JobRow], bool]:
    if args.namespace is None or args.all_namespaces:
        return lambda _: True
    return lambda row: row.key.split("/", 1)[0] == args.namespace


async def _watch_status(
    config: ManagerConfig,
    args: argparse.Namespace,
    in_scope: Callable[[inspect.JobRow], bool],
    widths: list[int],
) -> int:
    """After the tables, as ``kubectl get -w``: a line (or document) for each Job that changes, until Ctrl-C."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)

    async def follow() -> None:
        async for row in inspect.watch_jobs(config):
            if not in_scope(row):
                continue
            if args.output in ("json", "yaml"):
                _print_document(_camel(dataclasses.asdict(row)), args.output)
            elif args.output == "name":
                print(f"{row.kind.lower()}/{row.key}")
            else:
                _, (cells,) = _job_table([row], wide=args.output == "wide")
                _print_row(cells, widths)
            sys.stdout.flush()

    following = asyncio.create_task(follow())
    stopping = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({following, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        await cancel_and_wait([following, stopping])
    if following.done() and not following.cancelled():
        following.result()
    return 0


def _print_document(document: object, output: str) -> None:
    if output == "json":
        print(json.dumps(document, indent=2))
    else:
        print("---\n" + yaml.safe_dump(document, sort_keys=False), end="")


def _print_workers(workers: list[inspect.WorkerRow], known_by_config: bool) -> None:
    if not workers and not known_by_config:
        print(
            "No workers found in Secrets you can read; the manager's config may list others: pass --config FILE."
        )
        return
    _print_table(
        ["WORKER", "ACTIVE", "JOBS RUNNING", "CAPACITY USED", "LABELS"],
        [
            [
                w.name,
                w.active,
                str(w.running),
                ", ".join(f"{k} {_amount(u)}/{_amount(q)}" for k, (u, q) in w.capacity.items())
                or "<unlimited>",
                ",".join(f"{k}={v}" for k, v in sorted(w.labels.items())) or "<none>",
            ]
            for w in workers
        ],
    )


def _job_table(rows: list[inspect.JobRow], wide: bool) -> tuple[list[str], list[list[str]]]:
    header = [
        "KIND",
        "NAME",
        "WORKER",
        "STATE",
        "COMPLETIONS",
        "REASON",
        "AGE",
        *(["MESSAGE"] if wide else []),
    ]
    return header, [
        [
            j.kind, j.key, j.worker, j.state, j.completions, j.reason, human_duration(j.age_seconds),
            *([_wide_message(j)] if wide else []),
        ]
        for j in rows
    ]  # fmt: skip


def _amount(value: float) -> str:
    """A resource amount as a person reads it: 1.5, 4, 512Mi, 8Gi."""
    for suffix, size in (("Gi", 2.0**30), ("Mi", 2.0**20)):
        if value >= size and (value / size) * 10 == int(value / size * 10):
            return f"{value / size:g}{suffix}"
    return f"{value:g}"


def _camel(row: dict[str, Any]) -> dict[str, Any]:
    """A row's fields as JSON names them (ageSeconds)."""
    return {re.sub(r"_(\w)", lambda m: m.group(1).upper(), k): v for k, v in row.items()}


def _kind_and_name(config: ManagerConfig, job: str, failing: str) -> tuple[GenericJob | None, str]:
    """``[TYPE/]NAME`` as kubectl takes it: the adapter of TYPE (None: batch/v1 Job) and NAME; an unknown TYPE is a
    usage error that starts with ``failing``."""
    type_name, _, name = job.rpartition("/")
    try:
        return (inspect.kind_named(config, type_name) if type_name else None), name
    except inspect.UnknownKind as exc:
        raise UsageError(f"{failing}: {exc}") from exc


def _logs(args: argparse.Namespace) -> int:
    from multiqueue.dispatch import joblogs

    config, contexts = _reach(args)
    kind, name = _kind_and_name(config, args.job, "cannot read logs")
    options = joblogs.LogOptions(
        index=args.index,
        container=args.container,
        all_containers=args.all_containers,
        tail=args.tail if args.tail is not None and args.tail >= 0 else None,
        timestamps=args.timestamps,
    )
    try:
        if args.follow:
            return asyncio.run(_follow_logs(config, name, args.namespace, options, contexts, kind))
        found = asyncio.run(joblogs.logs(config, name, args.namespace, options, contexts, kind))
    except joblogs.LogsError as exc:
        raise RuntimeFailure(str(exc)) from exc
    except KubeconfigError as exc:
        raise UsageError(f"cannot read logs: {exc}") from exc
    except (KubeError, OSError) as exc:
        raise RuntimeFailure(f"cannot read logs: {exc}") from exc
    for prefix, text in found:
        for line in text.splitlines():
            print(f"[{prefix}] {line}" if len(found) > 1 or options.all_containers else line)
    return 0


def _wide_message(row: inspect.JobRow) -> str:
    """The manager's latest word on a Job, then, for one that waits, the line accounting for every worker."""
    if not row.placement or row.placement == row.message:
        return row.message
    return f"{row.message}; {row.placement}" if row.message else row.placement


def _explain(args: argparse.Namespace) -> int:
    if args.output not in (None, "json", "yaml"):
        raise UsageError(f"explain: -o takes json or yaml, not {args.output!r}")
    config, contexts = _reach(args)
    kind, name = _kind_and_name(config, args.job, "cannot explain")
    try:
        with collector_paused():
            shown = asyncio.run(inspect.explain(config, name, args.namespace, contexts, kind))
    except inspect.ExplainError as exc:
        raise RuntimeFailure(str(exc)) from exc
    except KubeconfigError as exc:
        raise UsageError(f"cannot reach the management cluster: {exc}") from exc
    except (KubeError, OSError) as exc:
        raise RuntimeFailure(f"cannot reach the management cluster: {exc}") from exc
    if args.output in ("json", "yaml"):
        _print_document(shown.as_document(), args.output)
        return 0
    asked = ", ".join(f"{r} {amount:g}" for r, amount in sorted(shown.demand.items())) or "nothing counted"
    facts = [
        ("Job", f"{shown.key} ({shown.kind})"),
        ("State", shown.state),
        ("Asks", asked),
        *([("Pinned to", shown.pinned)] if shown.pinned else []),
        *([("Selector", shown.selector)] if shown.selector else []),
        *([("Affinity", shown.affinity)] if shown.affinity else []),
        ("Policy", shown.policy),
        ("Decision", shown.decision),
    ]
    for label, value in facts:
        print(f"{label + ':':<11}{value}")
    print()
    _print_table(
        ["WORKER", "ACTIVE", "FILTERS", "VERDICT", "AFFINITY", "POLICY", "CHOSEN"],
        [
            [
                w.name,
                w.active,
                f"{sum(v.passes for v in w.verdicts)}/{len(w.verdicts)}",
                "; ".join(v.message for v in w.verdicts if not v.passes) or "passes",
                "-" if w.affinity_score is None else str(w.affinity_score),
                "-" if w.policy_score is None else f"{w.policy_score:g}",
                "yes" if w.chosen else "",
            ]
            for w in shown.workers
        ],
    )
    return 0


async def _follow_logs(
    config: ManagerConfig,
    job: str,
    namespace: str,
    options: joblogs.LogOptions,
    contexts: Path | None,
    kind: GenericJob | None,
) -> int:
    from multiqueue.dispatch import joblogs

    async for prefix, line in joblogs.follow_logs(config, job, namespace, options, contexts, kind):
        print(f"[{prefix}] {line}", flush=True)
    return 0


def _print_table(header: list[str], rows: list[list[str]]) -> list[int]:
    """Columns as wide as their widest cell; the widths, for rows printed later under the same header."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=False)]
    for row in [header, *rows]:
        _print_row(row, widths)
    return widths


def _print_row(row: list[str], widths: list[int]) -> None:
    print("   ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=False)).rstrip())


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="multiqueue",
        description="Dispatch Kubernetes batch Jobs from a management cluster to worker clusters.",
    )
    parser.add_argument("--version", action="version", version=f"multiqueue {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    validate = commands.add_parser(
        "validate",
        help="check Job and CronJob manifests against the batch/v1 rules, offline",
        description="Apply the API server's defaulting and validation to Job and CronJob manifests.",
    )
    validate.add_argument("files", nargs="+", metavar="FILE", help="YAML files with one or more objects")
    validate.set_defaults(handler=_validate)

    manager = commands.add_parser(
        "manager",
        help="run the manager: dispatch managedBy Jobs from the management cluster to workers",
        description="Dispatch Jobs whose spec.managedBy is multiqueue's to worker clusters and mirror their status.",
    )
    manager.add_argument("--config", metavar="FILE", required=True, help="manager config (YAML)")
    manager.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="text (default) or json: one JSON object per line, for log collectors",
    )
    manager.set_defaults(handler=_manager)

    status = commands.add_parser("status", help="show workers and the Jobs this manager handles")
    _add_reach_arguments(status)
    status.add_argument(
        "-n", "--namespace", help="only the Jobs of this namespace (default: every namespace)"
    )
    status.add_argument(
        "-A", "--all-namespaces", action="store_true", help="the Jobs of every namespace (the default)"
    )
    status.add_argument(
        "-o",
        "--output",
        choices=("wide", "json", "yaml", "name"),
        help="wide: with the MESSAGE column; json or yaml: every field; name: kind/namespace/name per Job",
    )
    status.add_argument(
        "-w", "--watch", action="store_true", help="after the tables, print each Job again as it changes"
    )
    status.set_defaults(handler=_status)

    logs = commands.add_parser(
        "logs", help="print the logs of a dispatched Job's pods, fetched from its worker"
    )
    logs.add_argument(
        "job",
        metavar="[TYPE/]NAME",
        help="the Job's name on the management cluster; TYPE/NAME for another kind (jobset/NAME)",
    )
    logs.add_argument("-n", "--namespace", default="default", help="the Job's namespace (default: default)")
    logs.add_argument("--index", type=int, help="only the pod of this completion index")
    logs.add_argument("-c", "--container", help="this container's log (needed when a pod has several)")
    logs.add_argument("--all-containers", action="store_true", help="every container's log, each prefixed")
    logs.add_argument(
        "-f", "--follow", action="store_true", help="print lines as they are written, until the pods end"
    )
    logs.add_argument("--tail", type=int, help="only the last N lines of each log (-1: all, the default)")
    logs.add_argument(
        "--timestamps", action="store_true", help="start each line with the time it was written"
    )
    _add_reach_arguments(logs)
    logs.set_defaults(handler=_logs)

    explain = commands.add_parser(
        "explain",
        help="show why a Job runs where it runs, or why it waits: each worker's verdict from each placement filter",
        description="Explain a Job's placement: what it asks, each configured worker's verdict from each placement "
        "filter, the scores of the workers that pass them all, and the decision (placed on a worker, waiting and "
        "why, or where it would go now). Reads the clusters as status does.",
    )
    explain.add_argument(
        "job",
        metavar="[TYPE/]NAME",
        help="the Job's name on the management cluster; TYPE/NAME for another kind (jobset/NAME)",
    )
    explain.add_argument(
        "-n", "--namespace", default="default", help="the Job's namespace (default: default)"
    )
    # Not argparse choices: completion keys a flag's values by the flag alone, and status's -o offers more.
    explain.add_argument(
        "-o", "--output", metavar="json|yaml", help="json or yaml: every field, each filter's verdict"
    )
    _add_reach_arguments(explain)
    explain.set_defaults(handler=_explain)

    complete = commands.add_parser(
        "completion",
        help="print a shell script that completes multiqueue's commands and flags",
        description="Print the completion script of a shell. Load it in bash with: source <(multiqueue completion "
        "bash); in zsh with: source <(multiqueue completion zsh); in fish with: multiqueue completion fish | source",
    )
    complete.add_argument("shell", choices=tuple(completion.SHELLS), help="the shell to complete in")
    complete.set_defaults(handler=_completion)

    local = commands.add_parser("local", help="run the embedded default: local clusters on loopback")
    local_commands = local.add_subparsers(dest="local_command", metavar="COMMAND", parser_class=_Parser)
    up = local_commands.add_parser(
        "up",
        help="serve the local clusters of a config until interrupted",
        description="Serve one Kubernetes-compatible API server per local cluster and write a kubeconfig for them.",
    )
    up.add_argument("--config", metavar="FILE", help="local clusters config (default: clusters/local.yaml)")
    up.add_argument(
        "--state-dir",
        metavar="DIR",
        default=str(_default_state_dir()),
        help="where objects, tokens and the kubeconfig live (default: %(default)s)",
    )
    _add_control_plane_arguments(up, "the config's controlPlane, else embedded")
    up.set_defaults(handler=_local_up)
    demo = local_commands.add_parser(
        "demo",
        help="start local clusters, dispatch an Indexed Job to a worker, print a summary",
        description="Run the whole system once on this machine: a Job submitted to the management cluster runs on "
        "a worker and its status comes back.",
    )
    demo.add_argument(
        "--state-dir",
        metavar="DIR",
        help="keep the clusters' state here (default: a temporary folder, removed at the end unless --keep)",
    )
    demo.add_argument(
        "--keep",
        action="store_true",
        help="keep the temporary folder (kubeconfig, logs, state) to look at after",
    )
    _add_control_plane_arguments(demo, "embedded")
    demo.set_defaults(handler=_local_demo)
    return parser


def _completion(args: argparse.Namespace) -> int:
    print(completion.SHELLS[args.shell](build_parser(), ["multiqueue", "kubectl-multiqueue"]), end="")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return USAGE_ERROR
    try:
        return handler(args)
    except UsageError as exc:
        print(f"multiqueue: error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    except RuntimeFailure as exc:
        print(f"multiqueue: error: {exc}", file=sys.stderr)
        return RUNTIME_FAILURE
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
