"""What a scenario does to the kind clusters from outside, as an admin would: kubectl with the kind kubeconfig,
the manager's Deployment, ConfigMap and leader Lease, and the node containers through Docker."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

import yaml

from multiqueue.api.types import LEASES
from multiqueue.dispatch.config import ManagerConfig
from multiqueue.dispatch.workersecrets import CAPACITY_ANNOTATION
from multiqueue.kube.client import KubeClient
from multiqueue.kube.informer import Informer
from tests.e2e.kind import DEPLOYMENT, NAMESPACE, REPO, KindEnvironment, kind_cluster_name
from tests.support.waiting import Changes, saying_on_timeout

Obj = dict[str, Any]
LEASE: Final = "multiqueue-manager"  # deploy/config.yaml's leaderElection.leaseName
CONFIG_KEY: Final = "config.yaml"


class CommandError(AssertionError):
    """A command a scenario ran failed; the message has its output."""


async def run(*argv: str, stdin: str | None = None, check: bool = True) -> str:
    """Run a command; its stdout, or :class:`CommandError` with its stderr when it fails and ``check``."""
    process = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate(stdin.encode() if stdin is not None else None)
    if check and process.returncode != 0:
        raise CommandError(f"{' '.join(argv)} exited {process.returncode}: {err.decode().strip()}")
    return out.decode()


def _secret(worker: str) -> str:
    """The management cluster's Secret of a worker, as deploy/register-worker.sh names it."""
    return f"multiqueue-worker-{worker}"


def _timestamp(text: str) -> datetime:
    """A log line's RFC 3339 timestamp (nanoseconds, which datetime cannot hold, cut to microseconds)."""
    whole, _, fraction = text.rstrip("Z").partition(".")
    return datetime.fromisoformat(f"{whole}.{(fraction + '000000')[:6]}+00:00")


def node(cluster: str) -> str:
    """The node container of a scenario cluster (management, worker-1, ...)."""
    return f"{kind_cluster_name(REPO, cluster)}-control-plane"


@dataclass
class KindManager:
    """The manager as deploy/ installs it on the management cluster."""

    environment: KindEnvironment
    client: KubeClient  # the management cluster, with the scenario's (admin) credentials
    # The ConfigMap's config as it was before a scenario changed it (None: unchanged).
    original: str | None = None
    # Each worker Secret's capacity annotation as it was before a scenario changed it (None: it had none).
    capacities: dict[str, str | None] = field(default_factory=dict)

    def _kubectl(self) -> tuple[str, ...]:
        """kubectl in the manager's namespace of the management cluster, as the scenario's admin."""
        kubeconfig = str(self.environment.kubeconfig)
        return ("kubectl", "--kubeconfig", kubeconfig, "--context", "management", "-n", NAMESPACE)

    async def manager_kubectl(self, *args: str, stdin: str | None = None) -> str:
        return await run(*self._kubectl(), *args, stdin=stdin)

    async def config_map(self) -> tuple[str, str]:
        """The name of the ConfigMap the Deployment mounts (kustomize suffixes a hash) and its config."""
        deployment = yaml.safe_load(await self.manager_kubectl("get", "deployment", DEPLOYMENT, "-o", "yaml"))
        (name,) = [
            v["configMap"]["name"]
            for v in deployment["spec"]["template"]["spec"]["volumes"]
            if "configMap" in v
        ]
        found = yaml.safe_load(await self.manager_kubectl("get", "configmap", name, "-o", "yaml"))
        return name, str(found["data"][CONFIG_KEY])

    async def reconfigure(self, **changes: Any) -> None:
        """Change the config (ManagerConfig field names) in its ConfigMap and roll the Deployment, as an admin
        changing deploy/config.yaml would; :meth:`restore` puts the old config back."""
        name, text = await self.config_map()
        if self.original is None:
            self.original = text
        document = yaml.safe_load(text)
        changed = ManagerConfig.model_validate(document).model_copy(update=changes)
        dumped = changed.model_dump(mode="json", by_alias=True)
        for field_name in changes:
            key = ManagerConfig.model_fields[field_name].alias or field_name
            document[key] = dumped[key]
        await self._write_and_roll(name, yaml.safe_dump(document, sort_keys=False))

    async def set_capacity(self, capacities: dict[str, Obj]) -> None:
        """Write each worker's capacity into the annotation of its Secret, as `register-worker.sh --capacity` does,
        and wait until the leader has taken the worker up again with it; :meth:`restore` puts the old ones back."""
        previous = await self._annotate({w: json.dumps(c, sort_keys=True) for w, c in capacities.items()})
        for worker, capacity in previous.items():
            self.capacities.setdefault(worker, capacity)

    async def _annotate(self, capacities: dict[str, str | None]) -> dict[str, str | None]:
        """Set (None: remove) each worker Secret's capacity annotation; what each held before."""
        leader = await self.until_leader(lambda _: True)
        since = datetime.now(UTC)
        previous: dict[str, str | None] = {}
        for worker, capacity in capacities.items():
            secret = yaml.safe_load(
                await self.manager_kubectl("get", "secret", _secret(worker), "-o", "yaml")
            )
            previous[worker] = (secret["metadata"].get("annotations") or {}).get(CAPACITY_ANNOTATION)
            if previous[worker] == capacity:
                continue  # the manager has nothing new to take up
            value = f"{CAPACITY_ANNOTATION}-" if capacity is None else f"{CAPACITY_ANNOTATION}={capacity}"
            await self.manager_kubectl("annotate", "--overwrite", "secret", _secret(worker), value)
        changed = {w for w, capacity in capacities.items() if previous[w] != capacity}
        if changed:
            await self.until_logged(leader, since, {f"worker {w} added from Secret" for w in changed})
        return previous

    async def until_logged(self, pod: str, since: datetime, texts: set[str], within: float = 60.0) -> None:
        """Follow a manager Pod's log until each of ``texts`` is in a line it wrote after ``since``. (The log API
        counts ``--since-time`` in whole seconds; the runtime's timestamp of each line is finer.)"""
        process = await asyncio.create_subprocess_exec(
            *self._kubectl(), "logs", "--follow", "--timestamps", pod,
            f"--since-time={since.strftime('%Y-%m-%dT%H:%M:%SZ')}",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        assert process.stdout is not None
        missing = set(texts)
        try:
            async with asyncio.timeout(within):
                while missing:
                    line = (await process.stdout.readline()).decode()
                    if not line:
                        raise CommandError(f"the log of {pod} ended before it said {sorted(missing)}")
                    stamp, _, text = line.partition(" ")
                    if _timestamp(stamp) >= since:
                        missing = {t for t in missing if t not in text}
        except TimeoutError:
            raise CommandError(f"{pod} did not log {sorted(missing)} within {within:.0f} s") from None
        finally:
            process.kill()
            await process.wait()

    async def restore(self) -> None:
        """Put back the capacities and the config a scenario changed."""
        if self.capacities:
            capacities, self.capacities = self.capacities, {}
            await self._annotate(capacities)
        if self.original is None:
            return
        name, _ = await self.config_map()
        original, self.original = self.original, None
        await self._write_and_roll(name, original)

    async def _write_and_roll(self, name: str, text: str) -> None:
        patch = yaml.safe_dump({"data": {CONFIG_KEY: text}})
        await self.manager_kubectl(
            "patch", "configmap", name, "--type=merge", "--patch-file=/dev/stdin", stdin=patch
        )
        await self.roll()

    async def roll(self) -> None:
        """Restart every replica (one at a time, as the Deployment's strategy says) and wait for a leader."""
        await self.manager_kubectl("rollout", "restart", f"deployment/{DEPLOYMENT}")
        await self.manager_kubectl("rollout", "status", f"deployment/{DEPLOYMENT}", "--timeout=300s")
        pods = set(await self.pods())
        await self.until_leader(lambda holder: holder in pods)

    async def pods(self) -> list[str]:
        """The manager's running Pods."""
        out = await self.manager_kubectl(
            "get", "pods", "-l", "app.kubernetes.io/component=manager", "--field-selector=status.phase=Running",
            "-o", "jsonpath={.items[*].metadata.name}",
        )  # fmt: skip
        return out.split()

    async def until_leader(self, holds: Callable[[str], bool], within: float = 60.0) -> str:
        """Watch the leader Lease until the Pod holding it is one ``holds`` accepts; that Pod's name (a manager's
        identity is its Pod's name, then ``_`` and a suffix)."""
        informer = Informer(self.client, LEASES, NAMESPACE, field_selector=f"metadata.name={LEASE}")
        changes = Changes(informer)

        def holder() -> str:
            lease = informer.get(f"{NAMESPACE}/{LEASE}") or {}
            return str((lease.get("spec") or {}).get("holderIdentity") or "").rsplit("_", 1)[0]

        def seen() -> str:
            lease = informer.get(f"{NAMESPACE}/{LEASE}") or {}
            return f"no leader accepted within {within:g} s; the Lease's spec: {lease.get('spec')}"

        informer.start()
        try:
            async with saying_on_timeout(seen):
                await changes.until(lambda: bool(holder()) and holds(holder()), within)
            return holder()
        finally:
            await informer.stop()

    async def container_pid(self, pod: str) -> int:
        """The manager process of a Pod, as the management node sees it."""
        status = yaml.safe_load(await self.manager_kubectl("get", "pod", pod, "-o", "yaml"))["status"]
        container = status["containerStatuses"][0]["containerID"].split("://", 1)[1]
        pid = await run(
            "docker", "exec", node("management"), "crictl", "inspect", "--output", "go-template",
            "--template", "{{.info.pid}}", container,
        )  # fmt: skip
        return int(pid.strip())

    async def logs_since(self, since: str) -> dict[str, str]:
        """Each running manager Pod's log from ``since`` (RFC 3339) on."""
        return {
            pod: await self.manager_kubectl("logs", pod, f"--since-time={since}", "--all-containers")
            for pod in await self.pods()
        }
