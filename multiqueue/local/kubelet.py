"""The local kubelet: one Node per local cluster, and something that runs (or pretends to run) its pods.

Modes:

- ``process``: each container runs as a local process (the image is not used): ``command`` + ``args``, the
  container's env (with downward-API fieldRefs such as JOB_COMPLETION_INDEX), HOSTNAME, a working directory per
  pod; output goes to the log file ``pods/log`` serves. Deleting a pod sends SIGTERM to the container's process
  group, waits the grace period, then SIGKILL. Only for clusters bound to loopback: anyone who can create a pod
  can run a command here.

  Container processes run in sessions of their own and are recorded in the pod's folder under ``log_dir``
  (multiqueue/local/containers.py), so they outlive the kubelet as containers outlive a real kubelet, and a
  kubelet that starts again (after SIGKILL or a clean stop; a clean stop leaves them running) adopts them: it
  waits for a running one and reports its end, reports the recorded exit code of one that ended meanwhile, and
  reports one it cannot locate as terminated with reason ContainerStatusUnknown and exit code 137, as upstream's
  kubelet does. A container is never started twice for one attempt, so a pod with restartPolicy Never never runs
  its command twice; OnFailure restarts a failed container, its restartCount continuing from the records.
  :meth:`LocalKubelet.stop_all_pods` stops them all for good (tests, tear-downs).
- ``simulate``: a pod succeeds or fails after the duration and with the exit code given by its annotations
  ``multiqueue.dev/simulate-duration`` (seconds, default 0) and ``multiqueue.dev/simulate-exit-code`` (default 0).
- ``none``: pods stay Pending; tests drive pod status through the API, as upstream's integration tests do.

The kubelet also plays scheduler for its node: it binds unscheduled pods while it has room (``capacity_pods``);
the rest wait Pending until room frees.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from multiqueue.api import pods
from multiqueue.api.meta import annotations_of, as_dict, as_list, format_time, key_of, labels_of, metadata
from multiqueue.api.types import NODES, PODS, Obj
from multiqueue.kube.client import KubeClient
from multiqueue.kube.controller import reconcile
from multiqueue.kube.errors import AlreadyExists, Conflict, KubeError, NotFound
from multiqueue.kube.informer import Handlers, Informer, InformerFactory
from multiqueue.kube.workqueue import WorkQueue
from multiqueue.local import containers
from multiqueue.local.containers import (
    ContainerProcess,
    ContainerRecord,
    Observation,
    PodRecords,
    PodState,
    Seen,
    Step,
)

log = logging.getLogger(__name__)

MODES: Final = ("process", "simulate", "none")
SIMULATE_DURATION: Final = "multiqueue.dev/simulate-duration"
SIMULATE_EXIT_CODE: Final = "multiqueue.dev/simulate-exit-code"
_FIELD_REF: Final = re.compile(r"metadata\.(labels|annotations)\['([^']+)'\]")


# What upstream's kubelet says of a container it cannot find (kubelet_pods.go), in our words per case.
_LOST_MESSAGES: Final = {
    Seen.VANISHED: "The container could not be located: its process ended without recording an exit code",
    Seen.NOTHING: "The container could not be located: the kubelet has no record of it",
}


@dataclasses.dataclass
class _Running:
    processes: list[ContainerProcess] = dataclasses.field(default_factory=list)
    task: asyncio.Task[None] | None = None
    stopping: bool = False  # being stopped: start nothing more


@dataclasses.dataclass(frozen=True)
class _Ended:
    """How a container ended, for its terminated state."""

    exit_code: int
    reason: str = ""
    message: str = ""
    started_at: str | None = None
    finished_at: str | None = None

    @classmethod
    def of(cls, code: int) -> _Ended:
        return cls(code, "Completed" if code == 0 else "Error")

    @classmethod
    def observed(cls, seen: Observation) -> _Ended:
        if seen.seen is Seen.EXITED and seen.exit_code is not None:
            finished = format_time(seen.finished_at) if seen.finished_at is not None else None
            return dataclasses.replace(
                cls.of(seen.exit_code), started_at=seen.started_at, finished_at=finished
            )
        return cls(
            containers.LOST_EXIT_CODE,
            "ContainerStatusUnknown",
            _LOST_MESSAGES.get(seen.seen, _LOST_MESSAGES[Seen.NOTHING]),
            started_at=seen.started_at,
        )


class LocalKubelet:
    def __init__(
        self,
        client: KubeClient,
        factory: InformerFactory,
        node_name: str,
        mode: str,
        log_dir: Path,
        *,
        capacity_pods: int = 110,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"kubelet mode must be one of {', '.join(MODES)}, not {mode!r}")
        self.client = client
        self.node_name = node_name
        self.mode = mode
        self.log_dir = log_dir
        self.capacity_pods = capacity_pods
        self.clock = clock or (lambda: datetime.now(UTC))
        self.pods: Informer = factory.informer(PODS)
        self.queue: WorkQueue[str] = WorkQueue(f"kubelet-{node_name}")
        self._running: dict[str, _Running] = {}
        self._background: set[asyncio.Task[None]] = set()
        self.pods.add_handlers(
            Handlers(
                on_add=lambda p: self.queue.add(key_of(p)),
                on_update=lambda _o, p: self.queue.add(key_of(p)),
                on_delete=self._forget,
            )
        )

    async def run(self) -> None:
        """Serve the node until cancelled. Cancelling stops the kubelet, not its pods: their processes go on, and
        the next kubelet on the same ``log_dir`` adopts them (as upstream's kubelet leaves containers running)."""
        await self._register_node()
        if self.mode == "none":
            return
        await self.pods.wait_for_sync()
        try:
            if self.mode == "process":
                await self._sweep()
            await reconcile(self.queue, self.sync, 8)
        finally:
            await self._let_go()

    async def _let_go(self) -> None:
        """Stop watching every pod; nothing is killed."""
        tasks = [r.task for r in self._running.values() if r.task is not None]
        tasks += list(self._background)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._running.clear()

    async def stop_all_pods(self, grace: float = 0.0) -> None:
        """Stop, for good, every pod process of this node: the ones this kubelet watches and any other its records
        show running (SIGTERM to each process group, ``grace`` seconds, then SIGKILL). Nothing is reported to the
        API. For tests and tear-downs that must not leave processes behind; works before or after :meth:`run`
        ends. A plain stop of the kubelet leaves pods running, so that a restart adopts them."""
        await self._let_go()
        if self.mode != "process":
            return
        found = await asyncio.to_thread(containers.recorded, self.log_dir, self.node_name)
        await self._kill_recorded([f for f in found if f.observation.seen is Seen.RUNNING], grace)

    async def _sweep(self) -> None:
        """At start: stop processes recorded for this node whose pod is gone or finished, as a kubelet kills the
        containers of pods it no longer has. Pods being deleted are left to :meth:`_terminate` (with their grace);
        the others are adopted by :meth:`sync`."""
        found = await asyncio.to_thread(containers.recorded, self.log_dir, self.node_name)
        doomed = []
        for entry in found:
            pod = self.pods.get(f"{entry.namespace}/{entry.name}")
            state = PodState(
                gone=pod is None or str(metadata(pod).get("uid")) != entry.uid,
                terminal=pod is not None and pods.is_terminal(pod),
            )
            if containers.decide(entry.observation, state) is Step.KILL:
                log.info(
                    "kubelet %s: stopping %s of pod %s/%s (uid %s): the pod is gone or finished",
                    self.node_name, entry.container, entry.namespace, entry.name, entry.uid,
                )  # fmt: skip
                doomed.append(entry)
        if doomed:
            self._in_background(self._kill_recorded(doomed, grace=30.0))

    async def _kill_recorded(self, entries: list[containers.Recorded], grace: float) -> None:
        adopted = []
        for entry in entries:
            seen = entry.observation
            if seen.pid is None or seen.start_ticks is None:
                continue
            process = await asyncio.to_thread(ContainerProcess.adopt, seen.pid, seen.start_ticks)
            if process is not None:
                adopted.append(process)
        try:
            await containers.stop_processes(adopted, grace)
        finally:
            for process in adopted:
                process.close()

    def _in_background(self, work: Any) -> None:
        task = asyncio.create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _register_node(self) -> None:
        now = format_time(self.clock())
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.node_name,
                "labels": {"kubernetes.io/hostname": self.node_name, "multiqueue.dev/kubelet-mode": self.mode},
            },
            "status": {
                "capacity": {"pods": str(self.capacity_pods), "cpu": str(os.cpu_count() or 1), "memory": "16Gi"},
                "allocatable": {"pods": str(self.capacity_pods), "cpu": str(os.cpu_count() or 1), "memory": "16Gi"},
                "conditions": [
                    {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "local kubelet is ready",
                     "lastHeartbeatTime": now, "lastTransitionTime": now}
                ],
                "nodeInfo": {"kubeletVersion": "v1.33.0+multiqueue", "operatingSystem": "linux", "architecture": "amd64"},
            },
        }  # fmt: skip
        with contextlib.suppress(AlreadyExists):
            await self.client.create(NODES, node)
        with contextlib.suppress(Conflict, NotFound):
            current = await self.client.get(NODES, self.node_name)
            await self.client.update_status(NODES, {**current, "status": node["status"]})

    def _forget(self, pod: Obj) -> None:
        """The pod is gone from the API: stop what still runs for it (its name may come back as a new pod)."""
        running = self._running.pop(key_of(pod), None)
        if running is not None:
            self._in_background(self._stop_running(running, _grace_of(pod)))

    # --- one pod -----------------------------------------------------------------------------------------------

    async def sync(self, key: str) -> None:
        pod = self.pods.get(key)
        if pod is None:
            return
        spec = as_dict(pod.get("spec"))
        node = spec.get("nodeName")
        if node not in (None, "", self.node_name):
            return
        if pods.is_deleting(pod):
            await self._terminate(pod)
            return
        if pods.is_terminal(pod) or key in self._running:
            return
        if not node:
            if self._bound_count() < self.capacity_pods:
                await self._bind(pod)
            return
        running = self._running[key] = _Running()
        runner = self._simulate(pod) if self.mode == "simulate" else self._run_processes(pod, running)
        running.task = asyncio.create_task(self._guard(key, running, runner), name=f"pod:{key}")

    def _bound_count(self) -> int:
        return len(self._running)

    async def _bind(self, pod: Obj) -> None:
        with contextlib.suppress(NotFound, Conflict):
            await self.client.patch(
                PODS,
                str(metadata(pod)["name"]),
                {"spec": {"nodeName": self.node_name}},
                str(metadata(pod)["namespace"]),
            )

    async def _guard(self, key: str, running: _Running, work: Any) -> None:
        try:
            await work
        except asyncio.CancelledError:
            raise
        except KubeError as exc:
            log.warning("kubelet %s: pod %s: %s", self.node_name, key, exc)
        except Exception:
            log.exception("kubelet %s: pod %s failed", self.node_name, key)
        finally:
            if self._running.get(key) is running:
                del self._running[key]
            self._admit_waiting()

    def _admit_waiting(self) -> None:
        """Room freed: look at pods that wait for a node."""
        for pod in self.pods.objects():
            if not as_dict(pod.get("spec")).get("nodeName") and not pods.is_terminal(pod):
                self.queue.add(key_of(pod))

    async def _write_status(self, pod: Obj, status: Obj) -> None:
        meta = metadata(pod)
        with contextlib.suppress(NotFound):
            await self.client.patch(
                PODS, str(meta["name"]), {"status": status}, str(meta["namespace"]), subresource="status"
            )

    # --- simulate ---------------------------------------------------------------------------------------------

    async def _simulate(self, pod: Obj) -> None:
        annotations = annotations_of(pod)
        try:
            duration = max(0.0, float(annotations.get(SIMULATE_DURATION, "0")))
            exit_code = int(annotations.get(SIMULATE_EXIT_CODE, "0"))
        except ValueError:
            duration, exit_code = 0.0, 1
        started = format_time(self.clock())
        names = [str(as_dict(c).get("name")) for c in as_list(as_dict(pod.get("spec")).get("containers"))]
        if duration > 0:
            await self._write_status(pod, self._running_status(pod, names, started))
            await asyncio.sleep(duration)
        await self._write_status(
            pod, self._final_status(names, dict.fromkeys(names, _Ended.of(exit_code)), started, {})
        )

    # --- process ----------------------------------------------------------------------------------------------

    async def _run_processes(self, pod: Obj, running: _Running) -> None:
        """Run the pod's containers, or carry on with what the records show of them (after a restart)."""
        meta = metadata(pod)
        spec = as_dict(pod.get("spec"))
        namespace, name = str(meta["namespace"]), str(meta["name"])
        folder = self.log_dir / namespace / name
        records = PodRecords(folder, str(meta.get("uid")))
        started = await asyncio.to_thread(
            records.begin, self.node_name, namespace, name, format_time(self.clock())
        )
        main = [as_dict(c) for c in as_list(spec.get("containers"))]
        names = [str(c.get("name")) for c in main]
        policy = str(spec.get("restartPolicy") or "Always")
        reported = _reported_started(pod)
        restarts: dict[str, int] = dict.fromkeys(names, 0)
        since: dict[str, str] = {}

        async def report_running() -> None:
            await self._write_status(pod, self._running_status(pod, names, started, restarts, since))

        async def quietly() -> None:
            return None

        for index, init in enumerate(as_list(spec.get("initContainers"))):
            record = records.container(containers.safe_name(str(as_dict(init).get("name")), index, init=True))
            # Init containers run once, whatever the policy (a failed one fails the pod).
            state = PodState(restart_policy="Never", reported_started=bool(reported))
            init_ended = await self._container(pod, running, as_dict(init), record, state, {}, {}, quietly)
            if init_ended.exit_code != 0:
                await self._write_status(
                    pod, self._final_status(names, dict.fromkeys(names, _Ended.of(1)), started, restarts)
                )
                return

        async def run_one(index: int, container: Obj) -> _Ended:
            container_name = str(container.get("name"))
            record = records.container(containers.safe_name(container_name, index))
            state = PodState(restart_policy=policy, reported_started=container_name in reported)
            return await self._container(
                pod, running, container, record, state, restarts, since, report_running
            )

        results = await asyncio.gather(*(run_one(i, c) for i, c in enumerate(main)))
        await self._write_status(
            pod, self._final_status(names, dict(zip(names, results, strict=True)), started, restarts)
        )

    async def _container(
        self,
        pod: Obj,
        running: _Running,
        container: Obj,
        record: ContainerRecord,
        state: PodState,
        restarts: dict[str, int],
        since: dict[str, str],
        report_running: Callable[[], Awaitable[None]],
    ) -> _Ended:
        """Drive one container from what its records show to its end: start it, adopt its running process,
        restart it (OnFailure), or take the recorded end. Each pass looks again at the records."""
        name = str(container.get("name"))
        while True:
            seen = await asyncio.to_thread(record.observe)
            step = containers.decide(seen, state)
            restarts[name] = max(seen.attempt - 1, 0)
            if step in (Step.DONE, Step.UNKNOWN):
                return _Ended.observed(seen)
            if step is Step.ADOPT:
                assert seen.pid is not None and seen.start_ticks is not None
                process = await asyncio.to_thread(ContainerProcess.adopt, seen.pid, seen.start_ticks)
                if process is not None:
                    log.info(
                        "kubelet %s: pod %s: adopted %s (pid %d)", self.node_name, key_of(pod), name, seen.pid
                    )
                    since[name] = seen.started_at or format_time(self.clock())
                    await self._wait(running, process, report_running)
                continue
            assert step in (Step.START, Step.RESTART), step
            if step is Step.RESTART:
                restarts[name] = seen.attempt
                await report_running()
                await asyncio.sleep(self._backoff_left(seen))
            if running.stopping:
                return _Ended.of(143)
            attempt = max(seen.attempt, 0) + 1
            now = format_time(self.clock())
            run_dir = await asyncio.to_thread(record.start, attempt, now)
            process = await self._spawn(pod, container, record, attempt, run_dir)
            if process is not None:
                since[name] = now
                await self._wait(running, process, report_running)

    def _backoff_left(self, seen: Observation) -> float:
        """Upstream's crash-loop back-off (10 s, doubling, at most 300 s), counted from when the container ended."""
        backoff: float = min(10.0 * 2.0 ** (max(seen.attempt, 1) - 1), 300.0)
        if seen.finished_at is not None:
            backoff -= (self.clock() - seen.finished_at).total_seconds()
        return max(backoff, 0.0)

    async def _wait(
        self, running: _Running, process: ContainerProcess, report_running: Callable[[], Awaitable[None]]
    ) -> None:
        running.processes.append(process)
        try:
            await report_running()
            await process.wait()
        finally:
            running.processes.remove(process)
            process.close()

    async def _spawn(
        self, pod: Obj, container: Obj, record: ContainerRecord, attempt: int, run_dir: Path
    ) -> ContainerProcess | None:
        meta = metadata(pod)
        folder = self.log_dir / str(meta["namespace"]) / str(meta["name"])
        workdir = folder / "work"
        argv = [str(a) for a in as_list(container.get("command")) + as_list(container.get("args"))]
        if not argv:
            argv = ["true"]
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(workdir),
            **self._environment(pod, container),
        }
        log_path = folder / f"{container.get('name')}.log"
        try:
            return await asyncio.to_thread(containers.spawn, run_dir, argv, workdir, env, log_path)
        except OSError as exc:
            await asyncio.to_thread(_append, log_path, f"failed to start {argv[0]}: {exc}\n")
            await asyncio.to_thread(record.fail_to_start, attempt, 127)
            return None

    def _environment(self, pod: Obj, container: Obj) -> dict[str, str]:
        meta = metadata(pod)
        spec = as_dict(pod.get("spec"))
        env = {"HOSTNAME": str(spec.get("hostname") or meta.get("name"))}
        for item in as_list(container.get("env")):
            entry = as_dict(item)
            name = str(entry.get("name", ""))
            if "value" in entry:
                env[name] = str(entry["value"])
                continue
            path = str(as_dict(as_dict(entry.get("valueFrom")).get("fieldRef")).get("fieldPath", ""))
            simple = {
                "metadata.name": meta.get("name"),
                "metadata.namespace": meta.get("namespace"),
                "metadata.uid": meta.get("uid"),
                "spec.nodeName": self.node_name,
                "spec.serviceAccountName": spec.get("serviceAccountName", "default"),
                "status.podIP": "127.0.0.1",
                "status.hostIP": "127.0.0.1",
            }
            if path in simple:
                env[name] = str(simple[path] or "")
            elif (match := _FIELD_REF.fullmatch(path)) is not None:
                source = labels_of(pod) if match.group(1) == "labels" else annotations_of(pod)
                env[name] = str(source.get(match.group(2), ""))
        return env

    # --- deletion ---------------------------------------------------------------------------------------------

    async def _terminate(self, pod: Obj) -> None:
        """Stop what runs (SIGTERM, the grace period, SIGKILL), then confirm the deletion with grace 0."""
        key = key_of(pod)
        grace = _grace_of(pod)
        running = self._running.pop(key, None)
        was_running = running is not None
        if running is not None:
            await self._stop_running(running, grace)
        elif self.mode == "process":
            # Deleted while no kubelet watched it: its processes may still run.
            was_running = await self._stop_recorded(pod, grace)
        meta = metadata(pod)
        if was_running and not pods.is_terminal(pod):
            # Killed by SIGTERM: exit code 143, as a container runtime reports it.
            names = [str(as_dict(c).get("name")) for c in as_list(as_dict(pod.get("spec")).get("containers"))]
            started = str(as_dict(pod.get("status")).get("startTime") or format_time(self.clock()))
            await self._write_status(
                pod, self._final_status(names, dict.fromkeys(names, _Ended.of(143)), started, {})
            )
        with contextlib.suppress(NotFound, Conflict):
            await self.client.delete(
                PODS,
                str(meta["name"]),
                str(meta["namespace"]),
                grace_period_seconds=0,
                preconditions={"uid": str(meta.get("uid"))},
            )

    async def _stop_running(self, running: _Running, grace: float) -> None:
        running.stopping = True
        await containers.stop_processes(list(running.processes), grace)
        if running.task is not None:
            running.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running.task

    async def _stop_recorded(self, pod: Obj, grace: float) -> bool:
        """Stop the processes the records show running for this pod; whether there were any."""
        meta = metadata(pod)
        records = PodRecords(self.log_dir / str(meta["namespace"]) / str(meta["name"]), str(meta.get("uid")))
        found = await asyncio.to_thread(records.recorded, self.node_name)
        mine = [f for f in found if containers.decide(f.observation, PodState(deleting=True)) is Step.KILL]
        await self._kill_recorded(mine, grace)
        return bool(mine)

    # --- statuses ---------------------------------------------------------------------------------------------

    def _running_status(
        self,
        pod: Obj,
        names: list[str],
        started: str,
        restarts: dict[str, int] | None = None,
        since: dict[str, str] | None = None,
    ) -> Obj:
        now = format_time(self.clock())
        return {
            "phase": pods.RUNNING,
            "hostIP": "127.0.0.1",
            "podIP": "127.0.0.1",
            "startTime": started,
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": started},
                {"type": "Initialized", "status": "True", "lastTransitionTime": started},
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": now},
                {"type": "Ready", "status": "True", "lastTransitionTime": now},
            ],
            "containerStatuses": [
                {
                    "name": n,
                    "ready": True,
                    "started": True,
                    "restartCount": (restarts or {}).get(n, 0),
                    "image": "local",
                    "imageID": "",
                    "state": {"running": {"startedAt": (since or {}).get(n, started)}},
                }
                for n in names
            ],
        }

    def _final_status(
        self, names: list[str], ended: dict[str, _Ended], started: str, restarts: dict[str, int]
    ) -> Obj:
        now = format_time(self.clock())
        unknown = _Ended.of(1)
        ok = all(ended.get(n, unknown).exit_code == 0 for n in names)
        return {
            "phase": pods.SUCCEEDED if ok else pods.FAILED,
            "hostIP": "127.0.0.1",
            "podIP": "127.0.0.1",
            "startTime": started,
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": started},
                {"type": "Initialized", "status": "True", "lastTransitionTime": started},
                {
                    "type": "ContainersReady",
                    "status": "False",
                    "reason": "PodCompleted",
                    "lastTransitionTime": now,
                },
                {"type": "Ready", "status": "False", "reason": "PodCompleted", "lastTransitionTime": now},
            ],
            "containerStatuses": [
                {
                    "name": n,
                    "ready": False,
                    "started": False,
                    "restartCount": restarts.get(n, 0),
                    "image": "local",
                    "imageID": "",
                    "state": {"terminated": _terminated(ended.get(n, unknown), started, now)},
                }
                for n in names
            ],
        }


def _terminated(ended: _Ended, started: str, now: str) -> Obj:
    state: Obj = {
        "exitCode": ended.exit_code,
        "reason": ended.reason,
        "startedAt": ended.started_at or started,
        "finishedAt": ended.finished_at or now,
    }
    if ended.message:
        state["message"] = ended.message
    return state


def _grace_of(pod: Obj) -> int:
    """The grace period of a pod's deletion (or of its spec, when the API did not set one)."""
    meta = metadata(pod)
    grace = meta.get("deletionGracePeriodSeconds")
    if grace is None:
        grace = as_dict(pod.get("spec")).get("terminationGracePeriodSeconds")
    try:
        return max(int(grace or 0), 0)
    except (TypeError, ValueError):
        return 0


def _reported_started(pod: Obj) -> set[str]:
    """The containers the pod's status shows as having started (running or terminated, or restarted)."""
    started = set()
    for item in as_list(as_dict(pod.get("status")).get("containerStatuses")):
        status = as_dict(item)
        state = as_dict(status.get("state"))
        if "running" in state or "terminated" in state or int(status.get("restartCount") or 0) > 0:
            started.add(str(status.get("name")))
    return started


def _append(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "ab") as handle:
        handle.write(text.encode())
