"""The e2e scenario suite's providers of clusters.

``local`` (the default): ``multiqueue local up``'s clusters, in-process, with the embedded controllers and a
process kubelet. ``upstream`` (``--provider=upstream`` or ``MULTIQUEUE_E2E_PROVIDER=upstream``): the same clusters
and manager, in-process, but each cluster served by upstream etcd, kube-apiserver, kube-controller-manager and
kube-scheduler (``local up --control-plane upstream``); every scenario skips, naming the build command, where the
binaries are not built. The scenarios that reach into the embedded Job or CronJob controller objects skip there
(kube-controller-manager runs Jobs and CronJobs, in a process of its own). ``kind`` (``--provider=kind``): real
clusters from clusters/ with the manager installed from deploy/ (tests/e2e/kind.py); where Docker or kind are
missing its scenarios skip with the reason. Scenarios that drive the in-process manager or servers
(``Clusters.local``) skip on kind.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import pytest
import yaml

from multiqueue.api.types import CRONJOBS, EVENTS, JOBS, NAMESPACES, PRIORITY_CLASSES, Resource
from multiqueue.dispatch import inspect
from multiqueue.dispatch.config import Capacity, ManagerConfig
from multiqueue.dispatch.manager import Manager
from multiqueue.kube.client import KubeClient
from multiqueue.kube.errors import NotFound
from multiqueue.local.config import ControlPlane, LocalCluster, LocalConfig, LocalManager
from multiqueue.local.up import LocalClusters
from multiqueue.local.upstream import Binaries, MissingBinaries
from multiqueue.loop.files import write_private
from tests.e2e.kind import (
    ASSETS_ENV,
    DEFAULT_WORKDIR,
    GETTING_STARTED,
    KIND_SECTION,
    REPO,
    REUSE_ENV,
    WORKDIR_ENV,
    KindAssets,
    KindEnvironment,
    KindProvider,
    KindUnavailable,
)
from tests.e2e.kindops import KindManager
from tests.e2e.providers import selected_provider
from tests.support.docblocks import run_block, shell_blocks
from tests.support.waiting import saying_on_timeout

Obj = dict[str, Any]

# Where the scenarios' gates are: files their pods wait for. On local and upstream the kubelet runs containers as
# processes of this machine, which see this folder; on kind it is a hostPath folder of each node, which every
# scenario Job mounts at the same path (job_body).
GATES: Final = Path("/tmp/multiqueue-e2e-gates")
GateOpener = Callable[[Path], Awaitable[None]]


async def touch_here(path: Path) -> None:
    def touch() -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()

    await asyncio.to_thread(touch)


def touch_on_nodes(nodes: list[str]) -> GateOpener:
    """Opens a gate on every node of the kind clusters, whichever runs the pods that wait for it."""

    async def touch(path: Path) -> None:
        for node in nodes:
            process = await asyncio.create_subprocess_exec(
                "docker", "exec", node, "sh", "-c", f'mkdir -p "{path.parent}" && touch "{path}"'
            )
            assert await process.wait() == 0, f"could not open {path} on {node}"

    return touch


@dataclass(frozen=True)
class Gate:
    """A file a scenario's pods wait for (its text is the path, for their commands), opened when they may go on."""

    path: Path
    opener: GateOpener

    def __str__(self) -> str:
        return str(self.path)

    async def open(self) -> None:
        await self.opener(self.path)


@dataclass
class Clusters:
    """What a scenario gets: a client per cluster and the kubeconfig a person would use."""

    clients: dict[str, KubeClient]
    kubeconfig: Path
    local_clusters: LocalClusters | None = None
    provider: str = "local"
    gate_opener: GateOpener = touch_here
    scenario: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    kind_manager: KindManager | None = None  # kind: the manager's Deployment, driven as an admin would

    async def restart_manager(self, **changes: Any) -> Manager | None:
        """The manager again, with ``changes`` (ManagerConfig field names) to its config: in process on local and
        upstream (the new Manager is returned), its config file (what the multiqueue command reads) written too;
        on kind its ConfigMap is changed and its Deployment rolled, as an admin would (None; the change is undone
        after the scenario)."""
        if self.kind_manager is not None:
            await (self.kind_manager.reconfigure(**changes) if changes else self.kind_manager.roll())
            return None
        local = self.local
        assert local is not None and local.manager is not None
        config = local.manager.config.model_copy(deep=True, update=changes)
        await local.manager.stop()
        local.manager = Manager(config)
        await local.manager.start()
        text = yaml.safe_dump(config.model_dump(mode="json", by_alias=True), sort_keys=False)
        await asyncio.to_thread(write_private, local.state_dir / "manager.yaml", text)
        return local.manager

    async def set_capacity(self, capacities: dict[str, Capacity]) -> None:
        """Give workers these capacities as an admin does: on kind in the annotation of each worker's Secret that
        `register-worker.sh --capacity` writes, which the running manager takes up (put back after the scenario);
        on local and upstream in the manager's config file, the manager restarted with it."""
        if self.kind_manager is not None:
            await self.kind_manager.set_capacity(
                {
                    w: c.model_dump(mode="json", by_alias=True, exclude_none=True)
                    for w, c in capacities.items()
                }
            )
            return
        local = self.local_clusters
        assert local is not None and local.manager is not None
        workers = [
            w.model_copy(update={"capacity": capacities.get(w.name, w.capacity)})
            for w in local.manager.config.workers
        ]
        await self.restart_manager(workers=workers)

    async def manager_config(self) -> ManagerConfig:
        """The config the manager runs with (on kind: its ConfigMap's)."""
        if self.kind_manager is not None:
            return ManagerConfig.model_validate(yaml.safe_load((await self.kind_manager.config_map())[1]))
        local = self.local
        assert local is not None and local.manager is not None
        return local.manager.config

    def reader(self) -> tuple[ManagerConfig, Path | None]:
        """What ``multiqueue status`` and ``logs`` read, as :meth:`cli_target` points them: the manager's config;
        on kind the user's kubeconfig, whose contexts of the workers' names reach the workers (every kind the
        management cluster serves is read, as the multiqueue command reads them without ``--config``)."""
        if self.kind_manager is not None:
            return inspect.reader_of(self.kubeconfig, "management"), self.kubeconfig
        local = self.local
        assert local is not None and local.manager is not None
        return local.manager.config, None

    def cli_target(self) -> list[str]:
        """How the multiqueue command finds these clusters: the manager's config that local up writes; on kind,
        where the manager's config is deploy/'s inside the cluster, the user's kubeconfig, as a user runs it."""
        if self.local_clusters is not None:
            return ["--config", str(self.local_clusters.state_dir / "manager.yaml")]
        return ["--kubeconfig", str(self.kubeconfig), "--context", "management"]

    def gate(self, name: str) -> Gate:
        """A gate of this scenario's own."""
        return Gate(GATES / self.scenario / name, self.gate_opener)

    def in_process(self, why: str) -> LocalClusters:
        """The in-process clusters and manager, for a scenario that ``why`` needs them; it skips on kind, saying so,
        where the manager is deploy/'s Deployment (test_kind.py has what only kind shows of it)."""
        if self.local_clusters is None:
            reason = f"not on {self.provider}: this scenario {why}"
            print(reason)
            pytest.skip(reason)
        return self.local_clusters

    @property
    def local(self) -> LocalClusters | None:
        """The in-process clusters and manager (local and upstream); a scenario that needs them skips on kind."""
        if self.local_clusters is None:
            pytest.skip(
                f"needs the local provider: this scenario drives the in-process manager or API servers, "
                f"which the {self.provider} provider does not have"
            )
        return self.local_clusters

    def embedded_controllers(self, what: str) -> LocalClusters:
        """The in-process clusters, for a scenario that drives the embedded Job or CronJob controller objects
        (``what`` it does to them); it skips on the providers where kube-controller-manager runs those."""
        if self.provider != "local":
            skip_without_embedded_controllers(self.provider, what)
        local = self.local
        assert local is not None
        return local

    def client(self, name: str = "management") -> KubeClient:
        return self.clients[name]

    async def wait_for(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        predicate: Callable[[Obj], bool],
        cluster: str = "management",
        within: float = 60.0,
    ) -> Obj:
        """Watch one object (which may not exist yet) until ``predicate`` holds; return it."""
        client = self.clients[cluster]
        selector = f"metadata.name={name}"
        seen: list[str] = []  # what the lists and watches gave, for the message of a timeout

        def what() -> str:
            where = f"{resource.plural} {namespace}/{name} on {cluster}"
            return f"{where} never held within {within:g} s; last seen: {seen[-20:]}"

        async with saying_on_timeout(what), asyncio.timeout(within):
            while True:
                items, rv = await client.list(resource, namespace, field_selector=selector)
                versions = [i["metadata"].get("resourceVersion") for i in items]
                seen.append(f"listed at {rv}: object at {versions}")
                if items and predicate(items[0]):
                    return items[0]
                async for event in client.watch(
                    resource,
                    namespace,
                    field_selector=selector,
                    resource_version=rv,
                    timeout_seconds=int(within),
                ):
                    seen.append(
                        f"{event['type']} {event['object'].get('metadata', {}).get('resourceVersion')}"
                    )
                    if event["type"] in ("ADDED", "MODIFIED") and predicate(event["object"]):
                        return dict(event["object"])

    async def wait_gone(
        self, resource: Resource, namespace: str, name: str, cluster: str = "management", within: float = 60.0
    ) -> None:
        """Watch until the object no longer exists."""
        client = self.clients[cluster]
        async with asyncio.timeout(within):
            items, rv = await client.list(resource, namespace, field_selector=f"metadata.name={name}")
            if not items:
                return
            async for event in client.watch(
                resource,
                namespace,
                field_selector=f"metadata.name={name}",
                resource_version=rv,
                timeout_seconds=int(within),
            ):
                if event["type"] == "DELETED":
                    return
            raise AssertionError(f"{resource.plural} {namespace}/{name} still exists")

    async def kubectl(self, *args: str) -> str:
        process = await asyncio.create_subprocess_exec(
            "kubectl", "--kubeconfig", str(self.kubeconfig), *args,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await process.communicate()
        assert process.returncode == 0, err.decode()
        return out.decode()


# On kind the first scenario also waits for the session's clusters to be made (minutes, more on a cold machine).
KIND_TIMEOUT: Final = 1200


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if selected_provider(config.getoption("--provider"), os.environ) != "kind":
        return
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(KIND_TIMEOUT))


@pytest.fixture(scope="session")
def e2e_provider(request: pytest.FixtureRequest) -> str:
    return selected_provider(request.config.getoption("--provider"), os.environ)


def skip_without_embedded_controllers(provider: str, what: str) -> None:
    pytest.skip(
        f"cannot apply on the {provider} provider: this scenario {what}, and there kube-controller-manager runs "
        f"Jobs and CronJobs in its own process, with the embedded controllers off"
    )


@pytest.fixture(scope="session")
def control_plane(e2e_provider: str) -> ControlPlane:
    """What serves the in-process clusters: the embedded server (local) or upstream binaries (upstream, which
    skips, naming the build command, where they are not built). On kind there are no in-process clusters."""
    if e2e_provider == "kind":
        pytest.skip(
            "needs in-process clusters: this scenario starts its own local clusters and manager, which the kind "
            "provider does not have"
        )
    if e2e_provider == "local":
        return "embedded"
    try:
        Binaries.find()
    except MissingBinaries as exc:
        pytest.skip(f"upstream provider: {exc}")
    return "upstream"


@pytest.fixture(scope="session")
def kind_environment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KindEnvironment]:
    """The kind clusters, made for the session by Getting started's command (``bash hack/kind-up.sh``, run as
    written) and deleted at its end by the one it gives for that. With $MULTIQUEUE_KIND_REUSE set, the clusters
    hack/kind-up.sh left in its folder are used as they are and kept."""
    if os.environ.get(REUSE_ENV):
        workdir = Path(os.environ.get(WORKDIR_ENV) or DEFAULT_WORKDIR).expanduser()
        yield KindEnvironment.of(REPO, workdir, KindAssets.find())
        return
    workdir = tmp_path_factory.mktemp("kind")
    try:
        assets = KindProvider(REPO, workdir).check()
    except KindUnavailable as exc:
        pytest.skip(str(exc))
    up, _, down = shell_blocks(GETTING_STARTED, KIND_SECTION)
    env = {**os.environ, WORKDIR_ENV: str(workdir), ASSETS_ENV: str(assets.folder)}
    run_block(up, env)
    try:
        yield KindEnvironment.of(REPO, workdir, assets)
    finally:
        run_block(down, env)


# The clusters' own namespaces: no scenario makes Jobs, CronJobs or Events there.
SYSTEM_NAMESPACES: Final = frozenset({"kube-system", "kube-public", "kube-node-lease", "multiqueue-system"})


async def _kind_clusters(environment: KindEnvironment) -> AsyncIterator[Clusters]:
    """Clients on the kind clusters, with no Events left from earlier scenarios; the Jobs, CronJobs, namespaces and
    PriorityClasses a scenario made are deleted after it, so the next scenario can reuse the names (user Jobs first:
    the manager then deletes their mirrors), and the config and worker capacities it changed are put back. A
    scenario fails if the manager met a refusal of its RBAC meanwhile: deploy/ must grant what it uses."""
    clients = {
        name: await KubeClient.connect(environment.kubeconfig, name, name) for name in environment.clusters
    }
    manager = KindManager(environment, clients["management"])
    clusters = Clusters(
        clients,
        environment.kubeconfig,
        provider="kind",
        gate_opener=touch_on_nodes(environment.nodes),
        kind_manager=manager,
    )
    since = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    async def cluster_scoped(client: KubeClient) -> set[tuple[Resource, str]]:
        return {
            (resource, item["metadata"]["name"])
            for resource in (NAMESPACES, PRIORITY_CLASSES)
            for item in (await client.list(resource))[0]
        }

    before = {name: await cluster_scoped(client) for name, client in clients.items()}
    # Events outlive their objects by an hour: a scenario's Job must not find those of an earlier one of its name.
    for client in clients.values():
        for event in (await client.list(EVENTS))[0]:
            meta = event["metadata"]
            if meta["namespace"] not in SYSTEM_NAMESPACES:
                with contextlib.suppress(NotFound):
                    await client.delete(EVENTS, meta["name"], meta["namespace"])
    try:
        yield clusters
    finally:
        try:
            for name, client in clients.items():
                for resource in (CRONJOBS, JOBS):
                    items, _ = await client.list(resource)
                    items = [i for i in items if i["metadata"]["namespace"] not in SYSTEM_NAMESPACES]
                    for item in items:
                        with contextlib.suppress(NotFound):
                            await client.delete(
                                resource,
                                item["metadata"]["name"],
                                item["metadata"]["namespace"],
                                propagation="Background",
                            )
                    for item in items:
                        await clusters.wait_gone(
                            resource,
                            item["metadata"]["namespace"],
                            item["metadata"]["name"],
                            name,
                            within=120,
                        )
                made = await cluster_scoped(client) - before[name]
                for resource, item_name in made:
                    with contextlib.suppress(NotFound):
                        await client.delete(resource, item_name)
                for resource, item_name in made:
                    await clusters.wait_gone(resource, "", item_name, name, within=120)
            await manager.restore()
            refused = [
                f"{pod}: {line}"
                for pod, log in (await manager.logs_since(since)).items()
                for line in log.splitlines()
                if "403 Forbidden" in line
            ]
            assert not refused, "the manager was refused what it needs:\n" + "\n".join(refused)
        finally:
            for client in clients.values():
                await client.close()


@pytest.fixture
async def local_clusters(
    request: pytest.FixtureRequest, e2e_provider: str, tmp_path: Path
) -> AsyncIterator[Clusters]:
    """One cluster that runs Jobs and CronJobs itself (local: the embedded controllers; upstream and kind: the
    management cluster's kube-controller-manager)."""
    if e2e_provider == "kind":
        async for on_kind in _kind_clusters(request.getfixturevalue("kind_environment")):
            yield on_kind
        return
    config = LocalConfig(
        clusters=[LocalCluster(name="management", kubelet="process")],
        control_plane=request.getfixturevalue("control_plane"),
    )
    # The state is the scenario's alone and goes with tmp_path: upstream clusters start and stop sooner so.
    clusters = LocalClusters(config, tmp_path / "state", disposable=True)
    await clusters.start()
    clients = {name: c.client for name, c in clusters.components.items() if c.client is not None}
    scenario = Clusters(clients, clusters.kubeconfig_path, clusters, e2e_provider)
    try:
        yield scenario
    finally:
        await clusters.stop(stop_pods=True)
        shutil.rmtree(GATES / scenario.scenario, ignore_errors=True)


@pytest.fixture
async def dispatching_clusters(
    request: pytest.FixtureRequest, e2e_provider: str, tmp_path: Path
) -> AsyncIterator[Clusters]:
    """management, worker-1 (region=eu) and worker-2 (region=us), with the manager dispatching to the workers;
    an indirect parameter adds keys to the local manager's config (as clusters/local.yaml would give them)."""
    extra = getattr(request, "param", {})
    if e2e_provider == "kind":
        async for on_kind in _kind_clusters(request.getfixturevalue("kind_environment")):
            if extra:
                await on_kind.restart_manager(**{field_named(key): value for key, value in extra.items()})
            yield on_kind
        return
    # Labelled workers, as clusters/local.yaml can give them (selectors need labels).
    workers = [
        {"name": "worker-1", "labels": {"region": "eu"}},
        {"name": "worker-2", "labels": {"region": "us"}},
    ]
    config = LocalConfig(
        clusters=[LocalCluster(name=n) for n in ("management", "worker-1", "worker-2")],
        manager=LocalManager.model_validate({"workers": workers, **extra}),
        control_plane=request.getfixturevalue("control_plane"),
    )
    # The state is the scenario's alone and goes with tmp_path: upstream clusters start and stop sooner so.
    clusters = LocalClusters(config, tmp_path / "state", disposable=True)
    await clusters.start()
    clients = {name: c.client for name, c in clusters.components.items() if c.client is not None}
    scenario = Clusters(clients, clusters.kubeconfig_path, clusters, e2e_provider)
    try:
        yield scenario
    finally:
        await clusters.stop(stop_pods=True)
        shutil.rmtree(GATES / scenario.scenario, ignore_errors=True)


def field_named(key: str) -> str:
    """The ManagerConfig field a config file's key sets."""
    return next(name for name, info in ManagerConfig.model_fields.items() if key in (name, info.alias))


def condition(obj: Obj, type_: str) -> Obj | None:
    return next(
        (c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == type_), None
    )


def has_condition(type_: str) -> Callable[[Obj], bool]:
    def check(obj: Obj) -> bool:
        found = condition(obj, type_)
        return found is not None and found.get("status") == "True"

    return check


# The image the scenarios' Jobs run. Pinned: an untagged image is pulled on every start (imagePullPolicy Always),
# and kind clusters here reach no registry; hack/build-kind-images.sh builds this one into the node image.
BUSYBOX: Final = "busybox:1.35"


# Mounted in every container of the scenarios' Jobs, so that gates reach them on every provider.
GATES_MOUNT: Final = {"name": "gates", "mountPath": str(GATES)}


def job_body(name: str, command: str, **spec: Any) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        {
                            "name": "main",
                            "image": BUSYBOX,
                            "command": ["sh", "-c", command],
                            "volumeMounts": [GATES_MOUNT],
                        }
                    ],
                    "volumes": [
                        {"name": "gates", "hostPath": {"path": str(GATES), "type": "DirectoryOrCreate"}}
                    ],
                }
            },
            **spec,
        },
    }
