"""The local kubelet: one Node per local cluster, and something that runs (or pretends to run) its pods.

Modes:

- ``process``: each container runs as a local process (the image is not used): ``command`` + ``args``, the
  container's env (with downward-API fieldRefs such as JOB_COMPLETION_INDEX), HOSTNAME, a working directory per
  pod; output goes to the log file ``pods/log`` serves. Deleting a pod sends SIGTERM, waits the grace period,
  then SIGKILL. Only for clusters bound to loopback: anyone who can create a pod can run a command here.
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
import signal
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from multiqueue.api import pods
from multiqueue.api.meta import annotations_of, as_dict, as_list, format_time, key_of, labels_of, metadata
from multiqueue.api.types import NODES, PODS, Obj
from multiqueue.kube.client import KubeClient
from multiqueue.kube.errors import AlreadyExists, Conflict, KubeError, NotFound
from multiqueue.kube.informer import Handlers, Informer, InformerFactory
from multiqueue.kube.workqueue import WorkQueue, run_workers

log = logging.getLogger(__name__)

MODES: Final = ("process", "simulate", "none")
SIMULATE_DURATION: Final = "multiqueue.dev/simulate-duration"
SIMULATE_EXIT_CODE: Final = "multiqueue.dev/simulate-exit-code"
_FIELD_REF: Final = re.compile(r"metadata\.(labels|annotations)\['([^']+)'\]")


@dataclasses.dataclass
class _Running:
    processes: list[asyncio.subprocess.Process] = dataclasses.field(default_factory=list)
    task: asyncio.Task[None] | None = None


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
        self.pods.add_handlers(
            Handlers(
                on_add=lambda p: self.queue.add(key_of(p)),
                on_update=lambda _o, p: self.queue.add(key_of(p)),
                on_delete=self._forget,
            )
        )

    async def run(self) -> None:
        await self._register_node()
        if self.mode == "none":
            return
        await self.pods.wait_for_sync()
        try:
            await run_workers(self.queue, self.sync, workers=8)
        finally:
            for key in list(self._running):
                await self._stop(key, grace=0)

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
        key = key_of(pod)
        running = self._running.pop(key, None)
        if running is not None and running.task is not None:
            running.task.cancel()

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
        self._running[key] = _Running()
        runner = self._simulate if self.mode == "simulate" else self._run_processes
        self._running[key].task = asyncio.create_task(self._guard(key, runner(pod)), name=f"pod:{key}")

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

    async def _guard(self, key: str, work: Any) -> None:
        try:
            await work
        except asyncio.CancelledError:
            raise
        except KubeError as exc:
            log.warning("kubelet %s: pod %s: %s", self.node_name, key, exc)
        except Exception:
            log.exception("kubelet %s: pod %s failed", self.node_name, key)
        finally:
            self._running.pop(key, None)
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
        await self._write_status(pod, self._final_status(names, {n: exit_code for n in names}, started, {}))

    # --- process ----------------------------------------------------------------------------------------------

    async def _run_processes(self, pod: Obj) -> None:
        meta = metadata(pod)
        spec = as_dict(pod.get("spec"))
        folder = self.log_dir / str(meta["namespace"]) / str(meta["name"])
        await asyncio.to_thread(folder.mkdir, parents=True, exist_ok=True)
        workdir = folder / "work"
        await asyncio.to_thread(workdir.mkdir, exist_ok=True)
        started = format_time(self.clock())
        containers = [as_dict(c) for c in as_list(spec.get("containers"))]
        names = [str(c.get("name")) for c in containers]
        restart_on_failure = spec.get("restartPolicy") == "OnFailure"
        restarts: dict[str, int] = {n: 0 for n in names}
        for init in [as_dict(c) for c in as_list(spec.get("initContainers"))]:
            if await self._run_container(pod, init, folder, workdir) != 0:
                await self._write_status(
                    pod, self._final_status(names, dict.fromkeys(names, 1), started, restarts)
                )
                return
        await self._write_status(pod, self._running_status(pod, names, started))

        async def run_one(container: Obj) -> int:
            name = str(container.get("name"))
            while True:
                code = await self._run_container(pod, container, folder, workdir)
                if code == 0 or not restart_on_failure:
                    return code
                restarts[name] += 1
                await self._write_status(pod, self._running_status(pod, names, started, restarts))
                await asyncio.sleep(min(10.0 * 2 ** (restarts[name] - 1), 300.0))

        codes = await asyncio.gather(*(run_one(c) for c in containers))
        await self._write_status(
            pod, self._final_status(names, dict(zip(names, codes, strict=True)), started, restarts)
        )

    async def _run_container(self, pod: Obj, container: Obj, folder: Path, workdir: Path) -> int:
        argv = [str(a) for a in as_list(container.get("command")) + as_list(container.get("args"))]
        if not argv:
            argv = ["true"]
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(workdir),
            **self._environment(pod, container),
        }
        log_path = folder / f"{container.get('name')}.log"
        handle = await asyncio.to_thread(open, log_path, "ab")
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                cwd=str(workdir),
                env=env,
                stdout=handle,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            await asyncio.to_thread(handle.write, f"failed to start {argv[0]}: {exc}\n".encode())
            await asyncio.to_thread(handle.close)
            return 127
        running = self._running.get(key_of(pod))
        if running is not None:
            running.processes.append(process)
        try:
            return await process.wait()
        finally:
            await asyncio.to_thread(handle.close)
            if running is not None and process in running.processes:
                running.processes.remove(process)

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
        grace = int(metadata(pod).get("deletionGracePeriodSeconds") or 0)
        was_running = key in self._running
        await self._stop(key, grace)
        meta = metadata(pod)
        if was_running and not pods.is_terminal(pod):
            # Killed by SIGTERM: exit code 143, as a container runtime reports it.
            names = [str(as_dict(c).get("name")) for c in as_list(as_dict(pod.get("spec")).get("containers"))]
            started = str(as_dict(pod.get("status")).get("startTime") or format_time(self.clock()))
            await self._write_status(pod, self._final_status(names, dict.fromkeys(names, 143), started, {}))
        with contextlib.suppress(NotFound, Conflict):
            await self.client.delete(
                PODS,
                str(meta["name"]),
                str(meta["namespace"]),
                grace_period_seconds=0,
                preconditions={"uid": str(meta.get("uid"))},
            )

    async def _stop(self, key: str, grace: int) -> None:
        running = self._running.get(key)
        if running is None:
            return
        for process in list(running.processes):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        for process in list(running.processes):
            try:
                await asyncio.wait_for(process.wait(), timeout=max(grace, 0))
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                await process.wait()
        if running.task is not None:
            running.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running.task

    # --- statuses ---------------------------------------------------------------------------------------------

    def _running_status(
        self, pod: Obj, names: list[str], started: str, restarts: dict[str, int] | None = None
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
                    "state": {"running": {"startedAt": started}},
                }
                for n in names
            ],
        }

    def _final_status(
        self, names: list[str], codes: dict[str, int], started: str, restarts: dict[str, int]
    ) -> Obj:
        now = format_time(self.clock())
        ok = all(codes.get(n, 1) == 0 for n in names)
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
                    "state": {
                        "terminated": {
                            "exitCode": codes.get(n, 1),
                            "reason": "Completed" if codes.get(n, 1) == 0 else "Error",
                            "startedAt": started,
                            "finishedAt": now,
                        }
                    },
                }
                for n in names
            ],
        }
