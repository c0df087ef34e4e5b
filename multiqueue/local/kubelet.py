"""The local kubelet: one Node per local cluster, and something that runs (or pretends to run) its pods.

Modes:

- ``process``: each container runs as a local process (the image is not used): ``command`` + ``args`` (an image
  shell such as ``sh`` run by the host's bash, multiqueue/local/shells.py), the container's env (with downward-API
  fieldRefs such as JOB_COMPLETION_INDEX), HOSTNAME, a working directory per pod, its volumes at their mount paths
  in a private mount namespace (multiqueue/local/volumes.py); output goes to the log file ``pods/log`` serves. A
  container without a command cannot run (terminated, StartError), except the pause image's. Exec probes run
  beside it (multiqueue/local/probes.py): readiness sets its ``ready``, a failed liveness probe stops it.
  Deleting a pod sends SIGTERM to each container's main process, waits the grace period (the pod stays,
  Terminating, meanwhile), then SIGKILLs its process group. Only for clusters bound to loopback: anyone who can
  create a pod can run a command here.

  Container processes run in sessions of their own and are recorded in the pod's folder under ``log_dir``
  (multiqueue/local/containers.py), so they outlive the kubelet as containers outlive a real kubelet, and a
  kubelet that starts again (after SIGKILL or a clean stop; a clean stop leaves them running) adopts them: it
  waits for a running one and reports its end, reports the recorded exit code of one that ended meanwhile, and
  reports one it cannot locate as terminated with reason ContainerStatusUnknown and exit code 137, as upstream's
  kubelet does. A container is never started twice for one attempt, so a pod with restartPolicy Never never runs
  its command twice; OnFailure restarts a failed container and Always any that ended (with upstream's back-off),
  its restartCount continuing from the records.
  :meth:`LocalKubelet.stop_all_pods` stops them all for good (tests, tear-downs).
- ``simulate``: a pod succeeds or fails after the duration and with the exit code given by its annotations
  ``multiqueue.dev/simulate-duration`` (seconds, default 0) and ``multiqueue.dev/simulate-exit-code`` (default 0).
- ``none``: pods stay Pending; tests drive pod status through the API, as upstream's integration tests do.

In every mode the kubelet is a node agent as upstream's kubelet is (multiqueue/local/node.py): it registers its
Node, keeps its status and its Lease in ``kube-node-lease`` fresh, and serves the kubelet API on 127.0.0.1
(multiqueue/local/kubeletapi.py) at the port its Node gives, for ``kubectl logs`` through an upstream
kube-apiserver. Pod status goes through ``pods/status`` as the strategic merge patch upstream's kubelet sends:
conditions (PodScheduled, PodReadyToStartContainers, Initialized, ContainersReady, Ready, with upstream's reasons)
merge by type, so conditions others write (DisruptionTarget, readiness gates) stay.

Binding: where no scheduler runs (the embedded API server), the kubelet plays scheduler for its node
(``bind_pods``, the default): it binds unscheduled pods while it has room (``capacity_pods``), the rest wait
Pending until room frees. With kube-scheduler (an upstream control plane) ``bind_pods=False``: it runs only the
pods bound to its node, and unbound pods are none of its business.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import os
import re
import signal
from collections.abc import Awaitable, Callable, Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import aiohttp

from multiqueue.api import pods
from multiqueue.api.meta import annotations_of, as_dict, as_list, format_time, key_of, labels_of, metadata
from multiqueue.api.types import CONFIGMAPS, NODES, PODS, SECRETS, Obj
from multiqueue.kube.client import KubeClient
from multiqueue.kube.errors import Conflict, KubeError, NotFound
from multiqueue.kube.events import EventRecorder
from multiqueue.kube.informer import Handlers, Informer, InformerFactory
from multiqueue.local import containers, probes, shells, volumes
from multiqueue.local.containers import (
    AttemptLog,
    ContainerProcess,
    ContainerRecord,
    Observation,
    PodRecords,
    PodState,
    Seen,
    Step,
)
from multiqueue.local.kubeletapi import KubeletApi, KubeletAuth, LogRequestError
from multiqueue.local.node import NODE_IP, NodeAgent, NodeIdentity, NodeTiming, cordoned
from multiqueue.local.podstatus import ContainerView, Ended, PodView, pod_status
from multiqueue.local.probes import ProbeSpec, ProbeState
from multiqueue.loop.controller import Controller
from multiqueue.loop.files import open_private
from multiqueue.loop.runner import Runner
from multiqueue.loop.source import Feed
from multiqueue.loop.tasks import cancel_and_wait

log = logging.getLogger(__name__)

MODES: Final = ("process", "simulate", "none")
SIMULATE_DURATION: Final = "multiqueue.dev/simulate-duration"
SIMULATE_EXIT_CODE: Final = "multiqueue.dev/simulate-exit-code"
# A pod whose status could not be written is synced again after this.
POD_RETRY: Final = 1.0
POD_WORKERS: Final = 8
# The kubelet keeps this much of an exec probe's output for the Event that says why it failed.
PROBE_OUTPUT_LIMIT: Final = 10 * 1024
_FIELD_REF: Final = re.compile(r"metadata\.(labels|annotations)\['([^']+)'\]")


@dataclasses.dataclass
class _Running:
    processes: list[ContainerProcess] = dataclasses.field(default_factory=list)
    task: asyncio.Task[None] | None = None
    stopping: bool = False  # being stopped: start nothing more


@dataclasses.dataclass(frozen=True)
class KubeletSettings:
    node_name: str
    mode: str
    log_dir: Path
    capacity_pods: int = 110
    bind_pods: bool = True  # play scheduler for the node (no scheduler runs), or run only what is bound to it


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
        capacity_cpu: int | None = None,
        clock: Callable[[], datetime] | None = None,
        bind_pods: bool = True,
        timing: NodeTiming | None = None,
        api_auth: KubeletAuth | None = None,
        api_port: int = 0,
        pki_dir: Path | None = None,
    ) -> None:
        """``bind_pods``: bind unscheduled pods to this node (where no scheduler runs) or leave them to one.
        ``capacity_cpu``: the cores the Node advertises (None: this machine's). ``timing``: how often the Node's
        status and Lease are written. ``api_auth``, ``api_port`` and
        ``pki_dir`` (default: ``kubelet-pki`` beside ``log_dir``): who may call the kubelet API, its port (0: a
        free one) and where its serving certificate is kept."""
        if mode not in MODES:
            raise ValueError(f"kubelet mode must be one of {', '.join(MODES)}, not {mode!r}")
        self.client = client
        self.settings = KubeletSettings(node_name, mode, log_dir, capacity_pods, bind_pods)
        self.clock = clock or (lambda: datetime.now(UTC))
        self.node = NodeAgent(
            client, NodeIdentity(node_name, mode, capacity_pods, log_dir, capacity_cpu), self.clock, timing
        )
        self.api = KubeletApi(
            self.container_log,
            pki_dir or log_dir.parent / "kubelet-pki",
            auth=api_auth,
            port=api_port,
            clock=self.clock,
        )
        # Events about pods, from the component and node upstream's kubelet names as their source.
        self.events = EventRecorder(client, "kubelet", host=node_name)
        self.pods: Informer = factory.informer(PODS)
        # Where this kubelet binds pods itself, its own Node, watched: a cordon (kubectl drain) must stop binding
        # before the drain's replacement pods come, and an uncordon lets the pods that waited meanwhile go.
        self.own_node: Informer | None = None
        if bind_pods:
            self.own_node = factory.informer(NODES, field_selector=f"metadata.name={node_name}")
            self.own_node.add_handlers(
                Handlers(on_update=lambda old, new: self._admit_waiting() if cordoned(old) else None)
            )
        self._running: dict[str, _Running] = {}
        self._background: set[asyncio.Task[None]] = set()
        handlers = Handlers(
            on_add=lambda p: self.runner.add(key_of(p)),
            on_update=lambda _o, p: self.runner.add(key_of(p)),
            on_delete=self._forget,
        )
        self.runner: Runner[str] = Runner(
            Controller(
                f"kubelet-{node_name}",
                self.sync,
                POD_WORKERS,
                feeds=[Feed(self.pods, handlers)],
                cached=self.pods.keys,
                prepare=self._sweep if mode == "process" else None,
            )
        )
        self.runner.open()

    @property
    def node_name(self) -> str:
        return self.settings.node_name

    @property
    def mode(self) -> str:
        return self.settings.mode

    @property
    def log_dir(self) -> Path:
        return self.settings.log_dir

    @property
    def capacity_pods(self) -> int:
        return self.settings.capacity_pods

    async def run(self) -> None:
        """Serve the node until cancelled: the kubelet API, the Node and its Lease, and (unless the mode is
        ``none``) its pods. Cancelling stops the kubelet, not its pods: their processes go on, and the next kubelet
        on the same ``log_dir`` adopts them (as upstream's kubelet leaves containers running)."""
        port = await self.api.start()
        self.events.start()
        try:
            await self.node.register(port)
            async with asyncio.TaskGroup() as group:
                group.create_task(self.node.run())
                if self.mode != "none":
                    group.create_task(self._run_pods())
        finally:
            await self.events.stop()
            await self.api.stop()

    async def close(self) -> None:
        """For good, once :meth:`run` has ended: the pod handlers unsubscribed, the queue shut down."""
        await self.runner.stop()

    async def _run_pods(self) -> None:
        try:
            await self.runner.run()
        finally:
            await self._let_go()

    async def _let_go(self) -> None:
        """Stop watching every pod; nothing is killed."""
        tasks = [r.task for r in self._running.values() if r.task is not None]
        tasks += list(self._background)
        await cancel_and_wait(tasks)
        self._running.clear()

    async def stop_all_pods(self, grace: float = 0.0) -> None:
        """Stop, for good, every pod process of this node: the ones this kubelet watches and any other its records
        show running (SIGTERM to each, ``grace`` seconds, then SIGKILL), and the mount points made on the host for
        their volumes. Nothing is reported to the API. For tests and tear-downs that must not leave processes
        behind; works before or after :meth:`run` ends. A plain stop of the kubelet leaves pods running, so that a
        restart adopts them."""
        await self._let_go()
        if self.mode != "process":
            return
        found = await asyncio.to_thread(containers.recorded, self.log_dir, self.node_name)
        await self._kill_recorded([f for f in found if f.observation.seen is Seen.RUNNING], grace)
        # Nothing runs for them any more: the mount points made on the host go too (their volumes stay on disk).
        for namespace, name, uid in sorted({(f.namespace, f.name, f.uid) for f in found}):
            await asyncio.to_thread(volumes.release, self.log_dir / namespace / name, uid, keep_volumes=True)

    async def _sweep(self) -> None:
        """At start: stop processes recorded for this node whose pod is gone or finished, as a kubelet kills the
        containers of pods it no longer has. Pods being deleted are left to :meth:`_terminate` (with their grace);
        the others are adopted by :meth:`sync`."""
        found = await asyncio.to_thread(containers.recorded, self.log_dir, self.node_name)
        doomed = []
        ended: set[tuple[str, str, str]] = set()
        for entry in found:
            pod = self.pods.get(f"{entry.namespace}/{entry.name}")
            state = PodState(
                gone=pod is None or str(metadata(pod).get("uid")) != entry.uid,
                terminal=pod is not None and pods.is_terminal(pod),
            )
            if state.gone or state.terminal:
                ended.add((entry.namespace, entry.name, entry.uid))
            if containers.decide(entry.observation, state) is Step.KILL:
                log.info(
                    "kubelet %s: stopping %s of pod %s/%s (uid %s): the pod is gone or finished",
                    self.node_name, entry.container, entry.namespace, entry.name, entry.uid,
                )  # fmt: skip
                doomed.append(entry)
        if doomed or ended:
            self._in_background(self._kill_then_release(doomed, ended))

    async def _kill_then_release(
        self, doomed: list[containers.Recorded], ended: set[tuple[str, str, str]]
    ) -> None:
        """Stop what runs for pods that are gone or finished, then remove their volumes and mount points."""
        await self._kill_recorded(doomed, grace=30.0)
        for namespace, name, uid in sorted(ended):
            await asyncio.to_thread(volumes.release, self.log_dir / namespace / name, uid)

    async def _kill_recorded(self, entries: list[containers.Recorded], grace: float) -> None:
        adopted = []
        for entry in entries:
            seen = entry.observation
            if seen.pid is None or seen.start_ticks is None:
                continue
            process = await asyncio.to_thread(
                ContainerProcess.adopt, seen.pid, seen.start_ticks, entry.run_dir()
            )
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

    def _forget(self, pod: Obj) -> None:
        """The pod is gone from the API: stop what still runs for it (its name may come back as a new pod)."""
        running = self._running.pop(key_of(pod), None)
        if running is not None:
            self._in_background(self._stop_then_release(running, pod))
        elif self.mode == "process":
            self._in_background(self._release(pod))

    async def _stop_then_release(self, running: _Running, pod: Obj) -> None:
        await self._stop_running(running, _grace_of(pod))
        await self._release(pod)

    # --- the kubelet API ----------------------------------------------------------------------------------------

    async def container_log(self, namespace: str, name: str, container: str, previous: bool) -> AttemptLog:
        """Where the output of a container of a pod on this node is (its latest attempt, or the one before);
        :class:`LogRequestError` with upstream kubelet's status and message when there is none."""
        pod = self.pods.get(f"{namespace}/{name}")
        if pod is None or as_dict(pod.get("spec")).get("nodeName") != self.node_name:
            raise LogRequestError(404, f'pod "{name}" does not exist')
        spec = as_dict(pod.get("spec"))
        folders = {
            str(as_dict(c).get("name")): containers.safe_name(
                str(as_dict(c).get("name")), i, init=field == "init"
            )
            for field, listed in (("main", spec.get("containers")), ("init", spec.get("initContainers")))
            for i, c in enumerate(as_list(listed))
        }
        if container not in folders:
            raise LogRequestError(404, f'container "{container}" not found in pod "{name}"')
        folder = self.log_dir / namespace / name
        record = PodRecords(folder, str(metadata(pod).get("uid"))).container(folders[container])
        found = await asyncio.to_thread(containers.attempt_log, record, folder / f"{container}.log", previous)
        if found is not None:
            return found
        if previous:
            raise LogRequestError(
                400, f'previous terminated container "{container}" in pod "{name}" not found'
            )
        if container in _reported_started(pod):
            # It ran without records to read (simulated, or run before this kubelet kept them): nothing to show.
            return AttemptLog(folder / f"{container}.log", folder, 0, 0, (), 0)
        raise LogRequestError(
            400, f'container "{container}" in pod "{name}" is waiting to start: ContainerCreating'
        )

    # --- one pod -----------------------------------------------------------------------------------------------

    async def sync(self, key: str) -> None:
        pod = self.pods.get(key)
        if pod is None:
            return
        spec = as_dict(pod.get("spec"))
        node = spec.get("nodeName")
        if node not in (None, "", self.node_name):
            return
        if not node and not self.settings.bind_pods:
            return  # a scheduler's business
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
        if self.own_node is not None and cordoned(self.own_node.get(self.node_name)):
            return  # bound once the node is uncordoned (the Node's handler admits the pods that wait)
        # Our embedded API server has no pods/binding: setting spec.nodeName of an unbound pod is its way.
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
            # The API server did not take a status write (it restarts, say): look at the pod again shortly. The
            # records let that run take over the container where it is, or report how it ended.
            log.warning(
                "kubelet %s: pod %s: %s; syncing it again in %gs", self.node_name, key, exc, POD_RETRY
            )
            self.runner.add_after(key, POD_RETRY)
        except Exception:
            log.exception("kubelet %s: pod %s failed", self.node_name, key)
        finally:
            if self._running.get(key) is running:
                del self._running[key]
            self._admit_waiting()

    def _admit_waiting(self) -> None:
        """Room freed: look at pods that wait for a node (when this kubelet binds them)."""
        if not self.settings.bind_pods:
            return
        for pod in self.pods.objects():
            if not as_dict(pod.get("spec")).get("nodeName") and not pods.is_terminal(pod):
                self.runner.add(key_of(pod))

    async def _report(self, pod: Obj, view: PodView, phase: str) -> None:
        """Write the pod's status as ``view`` shows it, through pods/status (a strategic merge patch, as upstream's
        kubelet sends: conditions merge by type, the container status lists are replaced)."""
        meta = metadata(pod)
        status = pod_status(pod, view, phase, format_time(self.clock()))
        with contextlib.suppress(NotFound):
            await self.client.patch(
                PODS,
                str(meta["name"]),
                {"status": status},
                str(meta["namespace"]),
                patch_type="strategic",
                subresource="status",
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
        view = PodView.of(pod, started)
        for container in view.init.values():
            container.end(Ended.of(0), started)
        for container in view.main.values():
            container.run(1, started)
        if duration > 0:
            await self._report(pod, view, pods.RUNNING)
            await asyncio.sleep(duration)
        now = format_time(self.clock())
        for container in view.main.values():
            container.end(Ended.of(exit_code), now)
        await self._report(pod, view, pods.SUCCEEDED if exit_code == 0 else pods.FAILED)

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
        view = PodView.of(pod, started)
        main = [as_dict(c) for c in as_list(spec.get("containers"))]
        policy = str(spec.get("restartPolicy") or "Always")
        reported = _reported_started(pod)

        async def report_pending() -> None:
            await self._report(pod, view, pods.PENDING)

        async def report_running() -> None:
            await self._report(pod, view, pods.RUNNING)

        for index, init in enumerate(as_dict(c) for c in as_list(spec.get("initContainers"))):
            record = records.container(containers.safe_name(str(init.get("name")), index, init=True))
            # Init containers run once, whatever the policy (a failed one fails the pod).
            state = PodState(restart_policy="Never", reported_started=bool(reported))
            status = view.init[str(init.get("name"))]
            init_ended = await self._container(pod, running, init, record, state, status, report_pending)
            if init_ended.exit_code != 0:
                await self._report(pod, view, pods.FAILED)
                await self._release(pod)
                return
        for container in view.main.values():
            container.waiting = ("ContainerCreating", "")

        async def run_one(index: int, container: Obj) -> Ended:
            container_name = str(container.get("name"))
            record = records.container(containers.safe_name(container_name, index))
            state = PodState(restart_policy=policy, reported_started=container_name in reported)
            status = view.main[container_name]
            return await self._container(pod, running, container, record, state, status, report_running)

        results = await asyncio.gather(*(run_one(i, c) for i, c in enumerate(main)))
        ok = all(r.exit_code == 0 for r in results)
        await self._report(pod, view, pods.SUCCEEDED if ok else pods.FAILED)
        await self._release(pod)

    async def _container(
        self,
        pod: Obj,
        running: _Running,
        container: Obj,
        record: ContainerRecord,
        state: PodState,
        status: ContainerView,
        report: Callable[[], Awaitable[None]],
    ) -> Ended:
        """Drive one container from what its records show to its end: start it, adopt its running process,
        restart it (OnFailure), or take the recorded end. Each pass looks again at the records; ``status`` follows
        what is seen, and ``report`` writes it."""
        name = str(container.get("name"))
        while True:
            seen = await asyncio.to_thread(record.observe)
            step = containers.decide(seen, state)
            status.restarts = max(seen.attempt - 1, 0)
            if step in (Step.DONE, Step.UNKNOWN):
                status.attempt = max(seen.attempt, status.attempt)
                return status.end(Ended.observed(seen), format_time(self.clock()))
            if step is Step.ADOPT:
                assert seen.pid is not None and seen.start_ticks is not None
                process = await asyncio.to_thread(
                    ContainerProcess.adopt, seen.pid, seen.start_ticks, record.run_dir(seen.attempt)
                )
                if process is not None:
                    log.info(
                        "kubelet %s: pod %s: adopted %s (pid %d)", self.node_name, key_of(pod), name, seen.pid
                    )
                    status.run(seen.attempt, seen.started_at or format_time(self.clock()))
                    await self._wait(running, process, report, self._prober(pod, container, process, status))
                continue
            assert step in (Step.START, Step.RESTART), step
            if step is Step.RESTART:
                backoff = self._backoff_left(seen)
                status.restarts = seen.attempt
                status.last = status.end(Ended.observed(seen), format_time(self.clock()))
                status.ended = None
                status.waiting = ("CrashLoopBackOff", _backoff_message(pod, name, seen.attempt))
                await report()
                await asyncio.sleep(backoff)
            if running.stopping:
                return status.end(Ended.of(143), format_time(self.clock()))
            attempt = max(seen.attempt, 0) + 1
            now = format_time(self.clock())
            run_dir = await asyncio.to_thread(record.start, attempt, now)
            process = await self._spawn(pod, container, record, attempt, run_dir)
            if process is not None:
                status.run(attempt, now)
                await self._wait(running, process, report, self._prober(pod, container, process, status))

    def _backoff_left(self, seen: Observation) -> float:
        """Upstream's crash-loop back-off (10 s, doubling, at most 300 s), counted from when the container ended."""
        backoff: float = min(10.0 * 2.0 ** (max(seen.attempt, 1) - 1), 300.0)
        if seen.finished_at is not None:
            backoff -= (self.clock() - seen.finished_at).total_seconds()
        return max(backoff, 0.0)

    async def _wait(
        self,
        running: _Running,
        process: ContainerProcess,
        report: Callable[[], Awaitable[None]],
        prober: Callable[[Callable[[], Awaitable[None]]], Coroutine[Any, Any, None]] | None = None,
    ) -> None:
        running.processes.append(process)
        probing = asyncio.create_task(prober(report)) if prober is not None else None
        try:
            await report()
            await process.wait()
            process.kill_leftovers()
        finally:
            await cancel_and_wait([probing] if probing is not None else [])
            running.processes.remove(process)
            process.close()

    # --- probes -----------------------------------------------------------------------------------------------

    def _prober(
        self, pod: Obj, container: Obj, process: ContainerProcess, status: ContainerView
    ) -> Callable[[Callable[[], Awaitable[None]]], Coroutine[Any, Any, None]] | None:
        """What probes the running container (None: it has no probe the kubelet runs): its startup probe until
        that passes, then its readiness and liveness probes."""
        startup = probes.startup_of(container)
        readiness, liveness = probes.readiness_of(container), probes.liveness_of(container)
        if startup is None and readiness is None and liveness is None:
            return None

        async def probe(report: Callable[[], Awaitable[None]]) -> None:
            loop = functools.partial(self._probe_loop, pod, container, process, status, report=report)
            if startup is not None and not await loop(startup, "startup"):
                return
            async with asyncio.TaskGroup() as group:
                if readiness is not None:
                    group.create_task(loop(readiness, "readiness"))
                if liveness is not None:
                    group.create_task(loop(liveness, "liveness"))

        return probe

    async def _probe_loop(
        self,
        pod: Obj,
        container: Obj,
        process: ContainerProcess,
        status: ContainerView,
        spec: ProbeSpec,
        kind: str,
        *,
        report: Callable[[], Awaitable[None]],
    ) -> bool:
        """Run one probe every period while the container runs: readiness sets its ``ready``; startup its
        ``started`` (and ends there: True); a liveness failure, or startup failing enough, stops it (False; its
        restart policy then decides)."""
        state = ProbeState.liveness() if kind == "liveness" else ProbeState.readiness()
        since = status.running_since
        running_for = 0.0
        if since is not None:
            with contextlib.suppress(ValueError):
                started = datetime.fromisoformat(since.replace("Z", "+00:00"))
                running_for = (self.clock() - started).total_seconds()
        await asyncio.sleep(probes.first_run_in(spec, running_for))
        while not process.ended:
            failure = await self._run_probe(pod, container, process, spec)
            if failure is not None and not process.ended:
                self.events.warning(pod, "Unhealthy", f"{kind.capitalize()} probe failed: {failure}")
            now = probes.after(state, failure is None, spec)
            if kind == "readiness" and now.passing != state.passing:
                status.probe_ready = now.passing
                await report()
            if kind == "startup" and now.passing:
                status.probe_started = True
                await report()
                return True
            if (kind == "liveness" and not now.passing) or (
                kind == "startup" and probes.started_failed(now, spec)
            ):
                log.info("kubelet %s: pod %s: %s failed its %s probe", self.node_name, key_of(pod),
                         container.get("name"), kind)  # fmt: skip
                self.events.normal(
                    pod,
                    "Killing",
                    f"Container {container.get('name')} failed {kind} probe, will be restarted",
                )
                await containers.stop_processes([process], _termination_grace(pod))
                return False
            state = now
            await asyncio.sleep(spec.period)
        return False

    async def _run_probe(
        self, pod: Obj, container: Obj, process: ContainerProcess, spec: ProbeSpec
    ) -> str | None:
        """Run a probe once: None when it passed, else what it answered (the message of an Unhealthy Event)."""
        where = f"{spec.host}:{spec.port}"
        try:
            async with asyncio.timeout(spec.timeout):
                if spec.action == "tcp":
                    _, writer = await asyncio.open_connection(spec.host, spec.port)
                    writer.close()
                    with contextlib.suppress(OSError):
                        await writer.wait_closed()
                    return None
                if spec.action == "http":
                    return await _http_probe(spec)
        except TimeoutError:
            return f"dial tcp {where}: i/o timeout"
        except (OSError, aiohttp.ClientError) as exc:
            return f"dial tcp {where}: {exc.strerror if isinstance(exc, OSError) and exc.strerror else exc}"
        return await self._exec_probe(pod, container, process, spec)

    async def _exec_probe(
        self, pod: Obj, container: Obj, process: ContainerProcess, spec: ProbeSpec
    ) -> str | None:
        """Run an exec probe beside the container (in its mount namespace when it has one): None when it exits 0,
        else its output (at most PROBE_OUTPUT_LIMIT bytes, as the kubelet keeps)."""
        argv = shells.with_shell(list(spec.command), shells.host_bash())
        main = containers.main_pid(process.run_dir) if process.run_dir is not None else None
        if main is not None and volumes.needs_mounts(pod, container):
            argv = ["nsenter", "--mount", f"--target={main}", "--", *argv]
        meta = metadata(pod)
        workdir = self.log_dir / str(meta["namespace"]) / str(meta["name"]) / "work"
        env = self._process_env(pod, container, workdir)
        try:
            child = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                cwd=workdir,
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            return f"cannot run the probe's command: {exc}"
        try:
            async with asyncio.timeout(spec.timeout):
                output, _ = await child.communicate()
        except TimeoutError:
            return f"command {' '.join(spec.command)!r} timed out"
        finally:
            if child.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGKILL)
                await child.wait()
        if child.returncode == 0:
            return None
        return output[:PROBE_OUTPUT_LIMIT].decode(errors="replace")

    async def _spawn(
        self, pod: Obj, container: Obj, record: ContainerRecord, attempt: int, run_dir: Path
    ) -> ContainerProcess | None:
        """Start one attempt of the container; None when it cannot start (recorded as a runtime's StartError)."""
        meta = metadata(pod)
        folder = self.log_dir / str(meta["namespace"]) / str(meta["name"])
        workdir = folder / "work"
        launch = shells.launch(container, shells.host_bash())
        argv = list(launch.argv)
        problem = launch.error
        if not problem:
            try:
                argv = volumes.wrap(await self._mounts(pod, container, folder), argv)
            except volumes.VolumeError as exc:
                problem = str(exc)
        if problem:
            log.info("kubelet %s: pod %s: %s cannot start: %s", self.node_name, key_of(pod),
                     container.get("name"), problem)  # fmt: skip
            await asyncio.to_thread(record.fail_to_start, attempt, containers.START_ERROR_EXIT_CODE, problem)
            self.events.warning(pod, "Failed", f"Error: {problem}")
            return None
        env = self._process_env(pod, container, workdir)
        log_path = folder / f"{container.get('name')}.log"
        try:
            return await asyncio.to_thread(containers.spawn, run_dir, argv, workdir, env, log_path)
        except OSError as exc:
            await asyncio.to_thread(_append, log_path, f"failed to start {argv[0]}: {exc}\n")
            await asyncio.to_thread(record.fail_to_start, attempt, 127)
            return None

    async def _mounts(self, pod: Obj, container: Obj, folder: Path) -> list[volumes.Mount]:
        """The container's volumes, ready on disk; :class:`volumes.VolumeError` when one cannot be."""
        if not volumes.needs_mounts(pod, container):
            return []
        # Before anything is made on the host for a container that could not see it.
        if (why := await asyncio.to_thread(volumes.namespace_error)) is not None:
            if volumes.only_service_account(pod, container):
                return []
            raise volumes.VolumeError(why)
        namespace = str(metadata(pod)["namespace"])
        fetched: dict[tuple[str, str], dict[str, bytes] | None] = {}
        for kind, name in volumes.referenced(pod):
            try:
                obj = await self.client.get(CONFIGMAPS if kind == "configmap" else SECRETS, name, namespace)
            except NotFound:
                fetched[kind, name] = None
                continue
            except KubeError as exc:
                raise volumes.VolumeError(f'cannot read {kind} "{name}": {exc}') from None
            fetched[kind, name] = volumes.decode(kind, obj)
        # Not published yet (kube-controller-manager publishes it): an empty bundle, as the pod may read it later.
        fetched.setdefault(("configmap", "kube-root-ca.crt"), {"ca.crt": b""})
        if fetched["configmap", "kube-root-ca.crt"] is None:
            fetched["configmap", "kube-root-ca.crt"] = {"ca.crt": b""}
        sources = volumes.Sources(fetched, namespace)
        return await asyncio.to_thread(
            volumes.prepare, pod, container, folder, sources, lambda path: _field(pod, self.node_name, path)
        )

    async def _release(self, pod: Obj) -> None:
        """The pod has ended or gone: its volumes and the mount points made for it go."""
        if self.mode != "process":
            return
        meta = metadata(pod)
        folder = self.log_dir / str(meta["namespace"]) / str(meta["name"])
        await asyncio.to_thread(volumes.release, folder, str(meta.get("uid")))

    def _process_env(self, pod: Obj, container: Obj, workdir: Path) -> dict[str, str]:
        """What a container's process (and its exec probes) runs with: the host's PATH, the pod's folder as HOME,
        then the container's own environment."""
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(workdir)} | self._environment(
            pod, container
        )

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
            value = _field(pod, self.node_name, path)
            if value is not None:
                env[name] = value
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
        await self._release(pod)
        meta = metadata(pod)
        if was_running and not pods.is_terminal(pod):
            # How each container ended (its trap may have made it exit 0), or SIGTERM's 143 where the records do not
            # say; the pod ends Succeeded when all exited 0, whatever its restart policy, as upstream's kubelet
            # ends a pod it terminates.
            now = format_time(self.clock())
            view = PodView.of(pod, str(as_dict(pod.get("status")).get("startTime") or now))
            view.init.clear()  # what the status says of them stays
            restarts = _reported_restarts(pod)
            ended = await asyncio.to_thread(self._ended_after_stop, pod) if self.mode == "process" else {}
            for name, container in view.main.items():
                container.restarts = restarts.get(name, 0)
                container.end(ended.get(name, Ended.of(143)), now)
            succeeded = all(c.ended is not None and c.ended.exit_code == 0 for c in view.main.values())
            await self._report(pod, view, pods.SUCCEEDED if succeeded else pods.FAILED)
        with contextlib.suppress(NotFound, Conflict):
            await self.client.delete(
                PODS,
                str(meta["name"]),
                str(meta["namespace"]),
                grace_period_seconds=0,
                preconditions={"uid": str(meta.get("uid"))},
            )

    def _ended_after_stop(self, pod: Obj) -> dict[str, Ended]:
        """How the stopped pod's main containers ended, from their records: the recorded exit code, or 137 for
        one SIGKILL ended before it recorded any."""
        meta = metadata(pod)
        records = PodRecords(self.log_dir / str(meta["namespace"]) / str(meta["name"]), str(meta.get("uid")))
        found = {}
        for index, container in enumerate(
            as_dict(c) for c in as_list(as_dict(pod.get("spec")).get("containers"))
        ):
            name = str(container.get("name"))
            seen = records.container(containers.safe_name(name, index)).observe()
            if seen.seen is Seen.EXITED:
                found[name] = Ended.observed(seen)
            elif seen.seen is Seen.VANISHED:
                found[name] = dataclasses.replace(Ended.of(137), started_at=seen.started_at)
        return found

    async def _stop_running(self, running: _Running, grace: float) -> None:
        running.stopping = True
        await containers.stop_processes(list(running.processes), grace)
        await cancel_and_wait([running.task])

    async def _stop_recorded(self, pod: Obj, grace: float) -> bool:
        """Stop the processes the records show running for this pod; whether there were any."""
        meta = metadata(pod)
        records = PodRecords(self.log_dir / str(meta["namespace"]) / str(meta["name"]), str(meta.get("uid")))
        found = await asyncio.to_thread(records.recorded, self.node_name)
        mine = [f for f in found if containers.decide(f.observation, PodState(deleting=True)) is Step.KILL]
        await self._kill_recorded(mine, grace)
        return bool(mine)


# --- pod status, as upstream's kubelet writes it (pkg/kubelet/status, kubelet_pods.go) ----------------------------


def _backoff_message(pod: Obj, container: str, attempt: int) -> str:
    seconds = int(min(10 * 2 ** (max(attempt, 1) - 1), 300))
    meta = metadata(pod)
    return (
        f"back-off {seconds}s restarting failed container={container} "
        f"pod={meta.get('name')}_{meta.get('namespace')}({meta.get('uid')})"
    )


async def _http_probe(spec: ProbeSpec) -> str | None:
    """An httpGet probe: passes (None) on a status from 200 to 399, else says which status came back (redirects
    are not followed; HTTPS is not verified, as upstream's kubelet does not verify it either)."""
    host = f"[{spec.host}]" if ":" in spec.host else spec.host
    url = f"{spec.scheme.lower()}://{host}:{spec.port}{spec.path if spec.path.startswith('/') else '/' + spec.path}"
    headers = {"User-Agent": "kube-probe/1.37", **dict(spec.headers)}
    async with (
        aiohttp.ClientSession() as session,
        session.get(url, headers=headers, allow_redirects=False, ssl=False) as response,
    ):
        return (
            None if 200 <= response.status < 400 else f"HTTP probe failed with statuscode: {response.status}"
        )


def _field(pod: Obj, node: str, path: str) -> str | None:
    """A downward-API fieldPath's value for the pod (None: one the local kubelet does not give)."""
    meta = metadata(pod)
    spec = as_dict(pod.get("spec"))
    simple = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": node,
        "spec.serviceAccountName": spec.get("serviceAccountName", "default"),
        "status.podIP": NODE_IP,
        "status.hostIP": NODE_IP,
    }
    if path in simple:
        return str(simple[path] or "")
    if (match := _FIELD_REF.fullmatch(path)) is not None:
        source = labels_of(pod) if match.group(1) == "labels" else annotations_of(pod)
        return str(source.get(match.group(2), ""))
    if path in ("metadata.labels", "metadata.annotations"):
        source = labels_of(pod) if path == "metadata.labels" else annotations_of(pod)
        return "".join(f'{k}="{v}"\n' for k, v in sorted(source.items()))
    return None


def _termination_grace(pod: Obj) -> int:
    try:
        return max(int(as_dict(pod.get("spec")).get("terminationGracePeriodSeconds") or 30), 0)
    except (TypeError, ValueError):
        return 30


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


def _reported_restarts(pod: Obj) -> dict[str, int]:
    found = {}
    for item in as_list(as_dict(pod.get("status")).get("containerStatuses")):
        status = as_dict(item)
        with contextlib.suppress(TypeError, ValueError):
            found[str(status.get("name"))] = int(status.get("restartCount") or 0)
    return found


def _append(path: Path, text: str) -> None:
    with os.fdopen(open_private(path, os.O_WRONLY | os.O_APPEND), "ab") as handle:
        handle.write(text.encode())
