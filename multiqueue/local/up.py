"""``multiqueue local up``: serve every configured local cluster and hand out one kubeconfig for all of them.

Each cluster is served by multiqueue's embedded API server (the default) or by an upstream control plane
(``controlPlane: upstream``: etcd, kube-apiserver, kube-controller-manager and kube-scheduler, multiqueue/local/
upstream.py); this module chooses between them, and the rest is the same for both: the local kubelet as each
cluster's node, the manager, one kubeconfig with a context per cluster.

State lives under the state directory, one folder per cluster (its SQLite store or its etcd data, its token, the
port it used), so a second ``local up`` with the same directory serves the same objects on the same addresses.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import secrets
import socket
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from opentelemetry.metrics import Meter

from multiqueue.apiserver.server import ApiServer, ServerConfig
from multiqueue.assembly import ManagerProcess
from multiqueue.dispatch.config import ManagerConfig
from multiqueue.dispatch.manager import Manager
from multiqueue.local.certs import serving_cert
from multiqueue.local.components import ClusterComponents
from multiqueue.local.config import LocalCluster, LocalConfig
from multiqueue.local.upstream import (
    Binaries,
    ControlPlaneError,
    ControlPlaneFiles,
    UpstreamControlPlane,
    allocate_ports,
)
from multiqueue.loop.files import private_dirs, write_private

log = logging.getLogger(__name__)

READY_TIMEOUT = 30.0


class LocalClusters:
    """The running local clusters of one state directory."""

    def __init__(
        self,
        config: LocalConfig,
        state_dir: Path,
        meter: Meter | None = None,
        *,
        assets: Path | None = None,
        say: Callable[[str], None] | None = None,
        disposable: bool = False,
    ) -> None:
        """``assets``: where the upstream binaries are (default: KUBEBUILDER_ASSETS, else the build cache);
        ``say``: where progress lines of a slow start go (default: this module's logger); ``disposable``: the state
        directory is thrown away after :meth:`stop` (a test's), so upstream control planes start and stop sooner
        (multiqueue/local/upstream.py says how); the embedded server is the same either way."""
        self.config = config
        self.meter = meter
        self.state_dir = state_dir
        self.assets = assets
        self.say = say or log.info
        self.disposable = disposable
        self.servers: dict[str, ApiServer] = {}  # embedded clusters
        self.control_planes: dict[str, UpstreamControlPlane] = {}  # upstream clusters
        self.components: dict[str, ClusterComponents] = {}
        self.manager: Manager | None = None

    @property
    def upstream(self) -> bool:
        return self.config.control_plane == "upstream"

    def urls(self) -> dict[str, str]:
        """Each serving cluster's API server address, in config order."""
        return {name: url for name, (url, _) in self._endpoints().items()}

    def _endpoints(self) -> dict[str, tuple[str, str]]:
        """Each serving cluster's address and admin token."""
        if self.upstream:
            return {n: (c.url, c.token) for n, c in self.control_planes.items()}
        return {n: (s.url, s.config.token) for n, s in self.servers.items()}

    @property
    def kubeconfig_path(self) -> Path:
        return self.state_dir / "kubeconfig"

    async def start(self) -> None:
        """Start every server, wait until each answers /readyz, then write the kubeconfig. Upstream binaries that are
        missing raise :class:`~multiqueue.local.upstream.MissingBinaries` before anything is made; a control plane
        that fails to start raises :class:`~multiqueue.local.upstream.ControlPlaneError`; either way, whatever was
        started is stopped."""
        if not self.upstream and any(c.extra_args for c in self.config.clusters):
            # `local up --control-plane embedded` over a config written for upstream.
            raise ControlPlaneError(
                "extraArgs pass flags to upstream components: use --control-plane upstream"
            )
        binaries = await asyncio.to_thread(Binaries.find, self.assets) if self.upstream else None
        await asyncio.to_thread(private_dirs, self.state_dir)
        try:
            if binaries is not None:
                await self._start_control_planes(binaries)
            else:
                for cluster in self.config.clusters:
                    await self._serve(cluster)
                await self._wait_ready()
        except BaseException:
            await self.stop()
            raise
        kubeconfig = await asyncio.to_thread(self.kubeconfig)
        try:
            for cluster in self.config.clusters:
                # On an upstream cluster kube-controller-manager runs Jobs and CronJobs: the embedded ones stay off.
                served = cluster.model_copy(update={"controllers": []}) if self.upstream else cluster
                # There kube-scheduler binds pods, too; the kubelet only runs what is bound to its node.
                components = ClusterComponents(
                    served,
                    kubeconfig,
                    self._cluster_dir(cluster.name) / "logs",
                    self.meter,
                    bind_pods=not self.upstream,
                )
                self.components[cluster.name] = components
                await components.start()
        except BaseException:
            await self.stop()
            raise
        text = await asyncio.to_thread(lambda: yaml.safe_dump(kubeconfig, sort_keys=False))
        await asyncio.to_thread(write_private, self.kubeconfig_path, text)
        if self.config.manager is not None:
            manager_yaml = yaml.safe_dump(
                self.manager_config().model_dump(mode="json", by_alias=True), sort_keys=False
            )
            await asyncio.to_thread(write_private, self.state_dir / "manager.yaml", manager_yaml)
            process = ManagerProcess(self.manager_config(), meter=self.meter)
            self.manager = process.manager
            try:
                await process.start()
            except BaseException:
                await self.stop()
                raise

    async def stop_server(self, name: str) -> None:
        """Take one cluster's API server down (its state and address stay): a cluster that became unreachable."""
        if self.upstream:
            await self.control_planes[name].stop_apiserver()
        else:
            await self.servers.pop(name).stop()

    async def start_server(self, name: str) -> None:
        """Serve a stopped cluster again, with the same objects on the same address."""
        if self.upstream:
            await self.control_planes[name].start_apiserver()
            return
        await self._serve(next(c for c in self.config.clusters if c.name == name))
        await self._wait_ready()

    async def _start_control_planes(self, binaries: Binaries) -> None:
        """Start every cluster's upstream control plane, all at once, and record the port each serves on. Each one is
        known to :meth:`stop` before it starts, so a failure or a Ctrl-C anywhere stops them all."""
        self.control_planes.update(await asyncio.to_thread(self._control_planes, binaries))
        starting = [asyncio.create_task(c.start(), name=f"start {n}") for n, c in self.control_planes.items()]
        try:
            await asyncio.gather(*starting)
        except BaseException:
            for task in starting:
                task.cancel()
            await asyncio.gather(*starting, return_exceptions=True)
            raise
        for name, plane in self.control_planes.items():
            await asyncio.to_thread(write_private, self._cluster_dir(name) / "port", str(plane.port))

    def _control_planes(self, binaries: Binaries) -> dict[str, UpstreamControlPlane]:
        """One upstream control plane per cluster, each on the port it had last time when that is still free."""
        wanted = {
            c.name: c.port or _reusable_port(self._cluster_dir(c.name) / "port") for c in self.config.clusters
        }
        ports = allocate_ports(wanted)
        planes = {}
        for cluster in self.config.clusters:
            folder = self._cluster_dir(cluster.name)
            private_dirs(folder)
            planes[cluster.name] = UpstreamControlPlane(
                cluster.name,
                binaries,
                ControlPlaneFiles(folder / "control-plane"),
                serving_cert(self.state_dir, cluster.name, "127.0.0.1"),
                _token(folder),
                ports[cluster.name],
                self.say,
                disposable=self.disposable,
                extra_args=cluster.extra_args,
            )
        return planes

    async def _serve(self, cluster: LocalCluster) -> None:
        """Start one cluster's API server on its recorded address (a free one the first time) and record it."""
        server = ApiServer(await asyncio.to_thread(self._server_config, cluster))
        await server.start()
        self.servers[cluster.name] = server
        await asyncio.to_thread(write_private, self._cluster_dir(cluster.name) / "port", str(server.port))

    def manager_config(self) -> ManagerConfig:
        """The manager's config for these clusters: every context in the one kubeconfig."""
        local = self.config.manager
        assert local is not None
        path = self.kubeconfig_path
        return ManagerConfig.model_validate(
            {
                "management": {"kubeconfig": path, "context": local.management},
                "workers": [
                    {
                        "name": w.name,
                        "kubeconfig": path,
                        "context": w.name,
                        "labels": w.labels,
                        "capacity": w.capacity.model_dump(by_alias=True, exclude_none=True),
                    }
                    for w in local.workers
                ],
                "placement": local.placement,
                "mirrorTTLSecondsAfterFinished": local.mirror_ttl_after_finished,
                "maxSplitParts": local.max_split_parts,
                "namespaces": local.namespaces,
                "dashboard": local.dashboard.model_dump(by_alias=True),
            }
        )

    async def stop(self, stop_pods: bool = False) -> None:
        """Stop everything; pod processes go on running for the next ``local up`` to adopt, unless ``stop_pods``."""
        if self.manager is not None:
            await self.manager.stop()
            self.manager = None
        for components in reversed(list(self.components.values())):
            await components.stop(stop_pods)
        self.components.clear()
        for server in reversed(list(self.servers.values())):
            await server.stop()
        self.servers.clear()
        stopped = await asyncio.gather(
            *(c.stop() for c in self.control_planes.values()), return_exceptions=True
        )
        self.control_planes.clear()
        for outcome in stopped:
            if isinstance(outcome, BaseException):
                raise outcome

    def kubeconfig(self) -> dict[str, Any]:
        first = self.config.clusters[0].name
        endpoints = self._endpoints()
        current = "management" if "management" in endpoints else first
        ca = base64.b64encode((self.state_dir / "ca.crt").read_bytes()).decode()
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": n, "cluster": {"server": url, "certificate-authority-data": ca}}
                for n, (url, _) in endpoints.items()
            ],
            "users": [{"name": n, "user": {"token": token}} for n, (_, token) in endpoints.items()],
            "contexts": [{"name": n, "context": {"cluster": n, "user": n}} for n in endpoints],
            "current-context": current,
            "preferences": {},
        }

    def _cluster_dir(self, name: str) -> Path:
        return self.state_dir / name

    def _server_config(self, cluster: LocalCluster) -> ServerConfig:
        folder = self._cluster_dir(cluster.name)
        private_dirs(folder)
        tls = serving_cert(self.state_dir, cluster.name, "127.0.0.1")
        return ServerConfig(
            name=cluster.name,
            token=_token(folder),
            port=cluster.port or _reusable_port(folder / "port"),
            state_dir=folder,
            tls_cert_file=tls.cert_file,
            tls_key_file=tls.key_file,
            ca_file=tls.ca_file,
        )

    async def _wait_ready(self) -> None:
        ca = await asyncio.to_thread(ssl.create_default_context, cafile=str(self.state_dir / "ca.crt"))
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ca)) as session:
            for server in self.servers.values():
                async with asyncio.timeout(READY_TIMEOUT):
                    while True:
                        with contextlib.suppress(aiohttp.ClientError):
                            async with session.get(f"{server.url}/readyz") as response:
                                if response.status == 200:
                                    break
                        await asyncio.sleep(0.05)


def _token(folder: Path) -> str:
    """The cluster's admin token: made the first time, the same one after (kubeconfigs stay valid)."""
    token_file = folder / "token"
    if token_file.exists():
        return token_file.read_text().strip()
    token = secrets.token_urlsafe(32)
    write_private(token_file, token)
    return token


def _reusable_port(port_file: Path) -> int:
    """The port this cluster had last time if nothing else took it, so old kubeconfigs keep working."""
    try:
        port = int(port_file.read_text().strip())
    except (OSError, ValueError):
        return 0
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return 0
    return port
