"""An upstream control plane for one local cluster: etcd, kube-apiserver, kube-controller-manager and kube-scheduler,
run as child processes on 127.0.0.1.

``multiqueue local up --control-plane upstream`` runs one :class:`UpstreamControlPlane` per configured cluster where
the embedded default runs its own API server; the rest stays as it is (the local kubelet as the cluster's node, the
manager, one kubeconfig with a context per cluster). The binaries are built once from the official Go modules by
``bash hack/build-control-plane.sh`` into ``${MULTIQUEUE_CONTROL_PLANE_CACHE:-~/.cache/multiqueue/control-plane}/
<version>/``; ``--assets DIR`` or ``KUBEBUILDER_ASSETS`` names a folder of binaries one already has instead.

Each cluster has its own etcd rather than one etcd with a key prefix per cluster: the whole state of a cluster lives
in its own folder (deleting it resets that cluster alone), a cluster starts, stops and fails as one unit (the runner
knows one cluster and nothing else), and the clusters stay as independent as real ones. The price is one small
process per cluster: etcd is 40-60 MiB of a cluster's ~490 MiB RSS (kube-apiserver ~270, kube-controller-manager
~100, kube-scheduler ~50; measured on v1.37.2, three clusters ready in about 6 s on 2 cores).

Per cluster, under ``<state>/<cluster>/`` (folders 0700, files 0600): ``token``, ``port`` and the serving
certificate as for the embedded server (the state directory's CA signs it, multiqueue/local/certs.py), and
``control-plane/`` with

- ``etcd/``: etcd's data, kept across restarts, so a restart serves the same objects;
- ``tokens.csv``: ``--token-auth-file``, the admin token as user ``admin`` in ``system:masters`` (authorization is
  RBAC);
- ``service-account.key`` / ``.pub``: the cluster's own key pair that signs and checks service-account tokens;
- ``kubeconfig``: the admin kubeconfig of kube-controller-manager and kube-scheduler;
- ``logs/<binary>.log``: each process's output, appended across restarts;
- ``lock``: held by the ``local up`` that runs these processes, so a second one on the same folder stops at once.

Every process is watched: one that dies while starting fails the start with the last lines of its log; one that
dies later is reported the same way. Processes run in sessions of their own, so a Ctrl-C at the terminal reaches
only ``local up``, which stops them in order (schedulers and controllers, then kube-apiserver, then etcd); and the
kernel kills them if ``local up`` dies without stopping them (PR_SET_PDEATHSIG), so nothing is left holding a
cluster's ports or etcd data.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import dataclasses
import datetime
import fcntl
import logging
import os
import shlex
import signal
import socket
import ssl
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Final

import aiohttp
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from multiqueue.api.versions import KUBERNETES_VERSION
from multiqueue.local.certs import ServingCert
from multiqueue.local.config import UpstreamComponent
from multiqueue.loop.files import open_private, private_dirs, write_private

log = logging.getLogger(__name__)

BINARIES: Final = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
BUILD_COMMAND: Final = "bash hack/build-control-plane.sh"
ASSETS_VARIABLE: Final = "KUBEBUILDER_ASSETS"
CACHE_VARIABLE: Final = "MULTIQUEUE_CONTROL_PLANE_CACHE"
HOST: Final = "127.0.0.1"

# How long one cluster may take from its first process to ready (2 cores shared by three clusters are slow).
READY_TIMEOUT: Final = 180.0
PROGRESS_EVERY: Final = 10.0  # seconds between two "still waiting" lines
# Between two readiness probes: each is one local request, so a tight poll costs little and a cluster is seen ready
# within 50 ms rather than a quarter of a second later at each of the four waits of a start.
POLL_INTERVAL: Final = 0.05
STOP_GRACE: Final = 15.0  # seconds from SIGTERM to SIGKILL
TAIL_LINES: Final = 15
# kube-controller-manager: every controller on by default (Job, CronJob, garbage collector, namespace, serviceaccount
# and serviceaccount-token, node lifecycle, ...). The cloud controllers left kube-controller-manager before 1.37 (naming
# one here is an error now); node-ipam-controller stays idle without --allocate-node-cidrs.
CONTROLLERS: Final = "*"
SERVICE_CLUSTER_IP_RANGE: Final = "10.0.0.0/24"
SERVICE_ACCOUNT_ISSUER: Final = "https://kubernetes.default.svc.cluster.local"
# A disposable cluster (one whose state is thrown away once it stops: a test's) starts and stops sooner, serving the
# same API: its etcd, the only member of its cluster, elects itself within 100 ms instead of up to a second later, and
# skips fsync (what a crash of the machine could lose, nobody would read again); its processes collect garbage less
# often (a few hundred MiB more at most, for seconds-long lives); stop() kills them at once, with no grace.
DISPOSABLE_ETCD_ARGUMENTS: Final = ("--heartbeat-interval=10", "--election-timeout=100", "--unsafe-no-fsync")
DISPOSABLE_GOGC: Final = "400"

Say = Callable[[str], None]


class ControlPlaneError(Exception):
    """An upstream control plane could not start: the message says why (a process's last log lines, a timeout)."""


class MissingBinaries(ControlPlaneError):
    """Binaries are missing: one line naming them and the command that builds them."""


# --- where the binaries are -----------------------------------------------------------------------------------------


def cache_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """The folder ``hack/build-control-plane.sh`` builds the pinned release into."""
    root = environ.get(CACHE_VARIABLE) or str(Path.home() / ".cache" / "multiqueue" / "control-plane")
    return Path(root) / KUBERNETES_VERSION


@dataclasses.dataclass(frozen=True)
class Binaries:
    """A folder holding etcd, kube-apiserver, kube-controller-manager and kube-scheduler."""

    folder: Path

    def path(self, binary: str) -> str:
        return str(self.folder / binary)

    @classmethod
    def find(cls, assets: Path | None = None, environ: Mapping[str, str] = os.environ) -> Binaries:
        """``assets``, else ``$KUBEBUILDER_ASSETS``, else the build cache; :class:`MissingBinaries` if any is absent."""
        if assets is not None:
            folder, source = assets, "--assets"
        elif environ.get(ASSETS_VARIABLE):
            folder, source = Path(environ[ASSETS_VARIABLE]), ASSETS_VARIABLE
        else:
            folder, source = cache_dir(environ), ""
        folder = folder.expanduser()
        missing = [b for b in BINARIES if not ((folder / b).is_file() and os.access(folder / b, os.X_OK))]
        if not missing:
            return cls(folder)
        if not source:
            raise MissingBinaries(
                f"the upstream control plane is not built: {', '.join(missing)} missing in {folder}; "
                f"build it with `{BUILD_COMMAND}`"
            )
        raise MissingBinaries(
            f"{', '.join(missing)} missing in {folder} (from {source}); `{BUILD_COMMAND}` builds them into "
            f"{cache_dir(environ)}, used when neither --assets nor {ASSETS_VARIABLE} is given"
        )


# --- ports ----------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Ports:
    """The loopback ports of one cluster's control plane."""

    apiserver: int
    etcd_client: int
    etcd_peer: int
    controller_manager: int
    scheduler: int


def allocate_ports(apiservers: Mapping[str, int]) -> dict[str, Ports]:
    """Ports for each cluster: its kube-apiserver's when given (non-zero: the one its kubeconfig already names),
    every other one free now and distinct from all the others (each probe socket stays open until all are chosen)."""
    wanted = {port for port in apiservers.values() if port}
    held: list[socket.socket] = []

    def fresh() -> int:
        while True:
            probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            held.append(probe)
            probe.bind((HOST, 0))
            port = int(probe.getsockname()[1])
            if port not in wanted:
                return port

    try:
        return {
            name: Ports(
                apiserver=port or fresh(),
                etcd_client=fresh(),
                etcd_peer=fresh(),
                controller_manager=fresh(),
                scheduler=fresh(),
            )
            for name, port in apiservers.items()
        }
    finally:
        for probe in held:
            probe.close()


# --- files ----------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ControlPlaneFiles:
    """The files of one cluster's control plane, under ``folder`` (``<state>/<cluster>/control-plane``)."""

    folder: Path

    @property
    def etcd_data(self) -> Path:
        return self.folder / "etcd"

    @property
    def tokens(self) -> Path:
        return self.folder / "tokens.csv"

    @property
    def service_account_key(self) -> Path:
        return self.folder / "service-account.key"

    @property
    def service_account_public_key(self) -> Path:
        return self.folder / "service-account.pub"

    @property
    def kubeconfig(self) -> Path:
        return self.folder / "kubeconfig"

    @property
    def logs(self) -> Path:
        return self.folder / "logs"

    def log(self, binary: str) -> Path:
        return self.logs / f"{binary}.log"

    def prepare(self, cluster: str, token: str, ca_file: Path, apiserver_url: str) -> IO[str]:
        """Make the folders, take the lock (returned: hold it while the processes run), write the token file and the
        kubeconfig, and make the service-account key pair the first time."""
        for folder in (self.folder, self.etcd_data, self.logs):
            private_dirs(folder)
        lock = _lock(self.folder / "lock", cluster)
        try:
            write_private(self.tokens, f"{token},admin,admin,system:masters\n".encode())
            if not (self.service_account_key.exists() and self.service_account_public_key.exists()):
                key = ec.generate_private_key(ec.SECP256R1())
                public = key.public_key().public_bytes(
                    serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
                )
                private = key.private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.PKCS8,
                    serialization.NoEncryption(),
                )
                write_private(self.service_account_key, private)
                write_private(self.service_account_public_key, public)
            kubeconfig = {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": cluster,
                        "cluster": {"server": apiserver_url, "certificate-authority": str(ca_file)},
                    }
                ],
                "users": [{"name": "admin", "user": {"token": token}}],
                "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": "admin"}}],
                "current-context": cluster,
            }
            write_private(self.kubeconfig, yaml.safe_dump(kubeconfig, sort_keys=False).encode())
        except BaseException:
            lock.close()
            raise
        return lock


def _lock(path: Path, cluster: str) -> IO[str]:
    """Hold ``path`` locked for as long as the returned file stays open (the kernel drops the lock when this
    process ends); a second ``local up`` on the same state directory is refused, naming the first."""
    handle = os.fdopen(open_private(path, os.O_RDWR), "r+", encoding="utf-8")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = handle.read().strip() or "another process"
        handle.close()
        raise ControlPlaneError(
            f"{cluster}: the control plane in {path.parent} is run by pid {holder} already; stop that "
            "`multiqueue local up` first, or use another --state-dir"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


def _open_log(path: Path, argv: list[str]) -> IO[bytes]:
    """``path`` opened for appending (mode 0600), a line that says what starts written first."""
    handle = os.fdopen(open_private(path, os.O_WRONLY | os.O_APPEND), "ab")
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    handle.write(f"--- {started} multiqueue local up starts: {shlex.join(argv)}\n".encode())
    handle.flush()
    return handle


def _tail(path: Path, lines: int) -> list[str]:
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 64 * 1024))
            text = handle.read().decode(errors="replace")
    except OSError as exc:
        return [f"(cannot read it: {exc.strerror or exc})"]
    return text.splitlines()[-lines:]


# --- one process ----------------------------------------------------------------------------------------------------

_PR_SET_PDEATHSIG: Final = 1


def _die_with_parent(parent: int) -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the kernel SIGKILL the child when ``parent`` dies (Linux); None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    kill = int(signal.SIGKILL)

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, kill)
        if os.getppid() != parent:  # the parent died before the request took effect
            os._exit(1)

    return preexec


class ChildProcess:
    """One control-plane binary as a child process: its output appended to its log file, its exit watched (and
    reported through ``say`` once :attr:`watched`; while starting, the waiter raises instead), stopped with SIGTERM
    and, after a grace period, SIGKILL."""

    def __init__(
        self,
        name: str,
        argv: list[str],
        cwd: Path,
        log_path: Path,
        say: Say,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """``env``: the whole environment of the process (None: this process's)."""
        self.name = name
        self.argv = argv
        self.env = env
        self.cwd = cwd
        self.log_path = log_path
        self.say = say
        self.watched = False
        self.process: asyncio.subprocess.Process | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._stopping = False

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None

    @property
    def exited(self) -> bool:
        return self.process is not None and self.process.returncode is not None

    async def start(self) -> None:
        output = await asyncio.to_thread(_open_log, self.log_path, self.argv)
        try:
            self.process = await asyncio.create_subprocess_exec(
                *self.argv,
                cwd=self.cwd,
                env=self.env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=output,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent(os.getpid()),
            )
        finally:
            output.close()
        self._stopping = False
        self._watcher = asyncio.create_task(self._watch(self.process), name=f"watch {self.name}")

    async def _watch(self, process: asyncio.subprocess.Process) -> None:
        await process.wait()
        if self.watched and not self._stopping:
            self.say(await self.exit_report())

    async def exit_report(self) -> str:
        """How it ended and the last lines of its log."""
        code = self.process.returncode if self.process is not None else None
        if code is None:
            how = "is running"
        elif code < 0:
            how = f"was killed by {signal.Signals(-code).name}"
        else:
            how = f"exited with code {code}"
        tail = await asyncio.to_thread(_tail, self.log_path, TAIL_LINES)
        return f"{self.name} {how}; the last lines of {self.log_path}:\n" + "\n".join(
            f"    {t}" for t in tail
        )

    async def stop(self, grace: float = STOP_GRACE) -> None:
        """SIGTERM, then SIGKILL after ``grace`` seconds; returns once it is gone. Idempotent."""
        self._stopping = True
        process = self.process
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
            try:
                async with asyncio.timeout(grace):
                    await process.wait()
            except TimeoutError:
                log.warning("%s did not stop within %.0fs of SIGTERM: SIGKILL", self.name, grace)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                await process.wait()
        await self._unwatch()

    async def kill(self) -> None:
        """SIGKILL at once, to its whole session: for a process whose state nobody needs any more. Idempotent."""
        self._stopping = True
        process = self.process
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
        await self._unwatch()

    async def _unwatch(self) -> None:
        if self._watcher is not None:
            await self._watcher
            self._watcher = None


# --- one cluster ----------------------------------------------------------------------------------------------------


class UpstreamControlPlane:
    """etcd, kube-apiserver, kube-controller-manager and kube-scheduler of one local cluster, on 127.0.0.1.

    :meth:`start` returns once kube-apiserver answers /readyz, kube-scheduler is ready and kube-controller-manager
    works (it made the ServiceAccount ``default/default``, which pods need); it stops whatever it started if it
    fails or is cancelled. :meth:`stop` stops every process; the files stay. ``disposable``: a cluster whose files
    are thrown away after it stops (see :data:`DISPOSABLE_ETCD_ARGUMENTS`); ``multiqueue local up`` keeps its own.
    ``extra_args``: more flags for a binary, after ours (the cluster's ``extraArgs``)."""

    def __init__(
        self,
        name: str,
        binaries: Binaries,
        files: ControlPlaneFiles,
        tls: ServingCert,
        token: str,
        ports: Ports,
        say: Say,
        *,
        disposable: bool = False,
        extra_args: Mapping[UpstreamComponent, Sequence[str]] | None = None,
    ) -> None:
        self.name = name
        self.binaries = binaries
        self.files = files
        self.tls = tls
        self.token = token
        self.ports = ports
        self.say = say
        self.disposable = disposable
        self.extra_args: dict[str, list[str]] = {k: list(v) for k, v in (extra_args or {}).items()}
        self.processes: dict[str, ChildProcess] = {}
        self._lock: IO[str] | None = None

    @property
    def url(self) -> str:
        return f"https://{HOST}:{self.ports.apiserver}"

    @property
    def port(self) -> int:
        return self.ports.apiserver

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        began = loop.time()
        deadline = began + READY_TIMEOUT
        try:
            self._lock = await asyncio.to_thread(
                self.files.prepare, self.name, self.token, self.tls.ca_file, self.url
            )
            async with await self._session() as session:
                await self._launch("etcd")
                await self._wait("etcd", lambda: self._etcd_health(session), deadline)
                await self._launch("kube-apiserver")
                await self._wait("kube-apiserver", lambda: self._apiserver_ready(session), deadline)
                await self._launch("kube-controller-manager")
                await self._launch("kube-scheduler")
                await self._wait("kube-scheduler", lambda: self._scheduler_ready(session), deadline)
                await self._wait(
                    "kube-controller-manager", lambda: self._default_service_account(session), deadline
                )
        except BaseException:
            await self.stop()
            raise
        for process in self.processes.values():
            process.watched = True
        self.say(f"{self.name}: upstream control plane ready in {loop.time() - began:.1f}s on {self.url}")

    async def stop(self) -> None:
        """Stop every process, the ones that use kube-apiserver first and etcd last (a disposable cluster's all at
        once, killed: nothing of theirs is needed after). Idempotent."""
        if self.disposable:
            await asyncio.gather(*(p.kill() for p in self.processes.values()))
        else:
            first = [
                self.processes[b]
                for b in ("kube-scheduler", "kube-controller-manager")
                if b in self.processes
            ]
            await asyncio.gather(*(p.stop() for p in first))
            for binary in ("kube-apiserver", "etcd"):
                if binary in self.processes:
                    await self.processes[binary].stop()
        self.processes.clear()
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    async def stop_apiserver(self) -> None:
        """Take kube-apiserver down, the rest running: the cluster is unreachable until :meth:`start_apiserver`."""
        if "kube-apiserver" in self.processes:
            await self.processes.pop("kube-apiserver").stop()

    async def start_apiserver(self) -> None:
        """Serve again, on the same port with the same objects."""
        deadline = asyncio.get_running_loop().time() + READY_TIMEOUT
        await self._launch("kube-apiserver")
        async with await self._session() as session:
            await self._wait("kube-apiserver", lambda: self._apiserver_ready(session), deadline)
        self.processes["kube-apiserver"].watched = True

    # --- processes --------------------------------------------------------------------------------------------------

    async def _launch(self, binary: str) -> None:
        argv = [self.binaries.path(binary), *self._arguments(binary)]
        process = ChildProcess(
            f"{binary} of {self.name}",
            argv,
            self.files.folder,
            self.files.log(binary),
            self.say,
            self._environment(),
        )
        self.processes[binary] = process
        await process.start()

    def _environment(self) -> dict[str, str] | None:
        """Every process's environment: this process's; a disposable cluster's with :data:`DISPOSABLE_GOGC` unless
        GOGC is set already."""
        if not self.disposable:
            return None
        return {"GOGC": DISPOSABLE_GOGC, **os.environ}

    def _arguments(self, binary: str) -> list[str]:
        """A binary's flags: ours, then the cluster's ``extraArgs`` for it (the last of a flag wins)."""
        match binary:
            case "etcd":
                ours = self._etcd_arguments()
            case "kube-apiserver":
                ours = self._apiserver_arguments()
            case "kube-controller-manager":
                ours = self._controller_manager_arguments()
            case "kube-scheduler":
                ours = self._scheduler_arguments()
            case _:
                raise ValueError(f"not a control-plane binary: {binary}")
        return [*ours, *self.extra_args.get(binary, ())]

    def _etcd_arguments(self) -> list[str]:
        client = f"http://{HOST}:{self.ports.etcd_client}"
        peer = f"http://{HOST}:{self.ports.etcd_peer}"
        return [
            f"--name={self.name}",
            f"--data-dir={self.files.etcd_data}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster={self.name}={peer}",
            "--log-format=console",
            *(DISPOSABLE_ETCD_ARGUMENTS if self.disposable else ()),
        ]

    def _apiserver_arguments(self) -> list[str]:
        return [
            f"--etcd-servers=http://{HOST}:{self.ports.etcd_client}",
            f"--bind-address={HOST}",
            f"--advertise-address={HOST}",
            f"--secure-port={self.ports.apiserver}",
            f"--tls-cert-file={self.tls.cert_file}",
            f"--tls-private-key-file={self.tls.key_file}",
            f"--cert-dir={self.files.folder}",
            f"--token-auth-file={self.files.tokens}",
            "--authorization-mode=RBAC",
            # kubeadm and kind clusters admit privileged containers, and so does the embedded server.
            "--allow-privileged=true",
            f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
            f"--service-account-key-file={self.files.service_account_public_key}",
            f"--service-account-signing-key-file={self.files.service_account_key}",
            f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
            # The Endpoints of the `kubernetes` Service may not name a loopback address: nothing to publish.
            "--endpoint-reconciler-type=none",
            # Logs, exec and port-forward go to the node's kubelet: the local kubelet's Node names 127.0.0.1 as its
            # InternalIP, and a Hostname no resolver knows.
            "--kubelet-preferred-address-types=InternalIP,Hostname",
            # Stop within seconds even while clients watch (by default it waits up to a minute for watches to end).
            "--shutdown-watch-termination-grace-period=2s",
            "--profiling=false",
        ]

    def _component_arguments(self, port: int) -> list[str]:
        """What kube-controller-manager and kube-scheduler share: the admin kubeconfig (also to check who calls
        their own endpoints), serving on loopback with the cluster's certificate, one instance (no election)."""
        kubeconfig = str(self.files.kubeconfig)
        return [
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            f"--bind-address={HOST}",
            f"--secure-port={port}",
            f"--tls-cert-file={self.tls.cert_file}",
            f"--tls-private-key-file={self.tls.key_file}",
            "--leader-elect=false",
            "--profiling=false",
        ]

    def _controller_manager_arguments(self) -> list[str]:
        return [
            *self._component_arguments(self.ports.controller_manager),
            f"--controllers={CONTROLLERS}",
            f"--cluster-name={self.name}",
            f"--root-ca-file={self.tls.ca_file}",
            f"--service-account-private-key-file={self.files.service_account_key}",
        ]

    def _scheduler_arguments(self) -> list[str]:
        return self._component_arguments(self.ports.scheduler)

    # --- readiness --------------------------------------------------------------------------------------------------

    async def _session(self) -> aiohttp.ClientSession:
        ca = await asyncio.to_thread(ssl.create_default_context, cafile=str(self.tls.ca_file))
        return aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=ca), timeout=aiohttp.ClientTimeout(total=5)
        )

    async def _wait(self, what: str, probe: Callable[[], Awaitable[str | None]], deadline: float) -> None:
        """Until ``probe`` answers None (ready; otherwise a few words on what is missing), with a progress line
        every :data:`PROGRESS_EVERY` seconds; :class:`ControlPlaneError` when a process being started ends or time
        runs out."""
        loop = asyncio.get_running_loop()
        began = loop.time()
        next_progress = began + PROGRESS_EVERY
        while True:
            for process in self.processes.values():
                if process.exited and not process.watched:  # a watched one was reported when it ended
                    raise ControlPlaneError(await process.exit_report())
            missing = await probe()
            if missing is None:
                return
            now = loop.time()
            if now >= deadline:
                raise ControlPlaneError(
                    f"{self.name}: {what} not ready within {READY_TIMEOUT:.0f}s ({missing}); "
                    f"its log: {self.files.log(what)}"
                )
            if now >= next_progress:
                self.say(f"{self.name}: waiting for {what} ({now - began:.0f}s): {missing}")
                next_progress = now + PROGRESS_EVERY
            await asyncio.sleep(POLL_INTERVAL)

    async def _etcd_health(self, session: aiohttp.ClientSession) -> str | None:
        try:
            async with session.get(f"http://{HOST}:{self.ports.etcd_client}/health") as response:
                body = await response.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            return f"/health does not answer yet ({type(exc).__name__})"
        if isinstance(body, dict) and body.get("health") == "true":
            return None
        return f"/health: {body}"

    async def _apiserver_ready(self, session: aiohttp.ClientSession) -> str | None:
        return await self._get_ok(session, f"{self.url}/readyz?verbose", "/readyz")

    async def _scheduler_ready(self, session: aiohttp.ClientSession) -> str | None:
        return await self._get_ok(session, f"https://{HOST}:{self.ports.scheduler}/readyz", "/readyz")

    async def _default_service_account(self, session: aiohttp.ClientSession) -> str | None:
        url = f"{self.url}/api/v1/namespaces/default/serviceaccounts/default"
        if await self._get_ok(session, url, "ServiceAccount") is None:
            return None
        return "no ServiceAccount default/default yet (its serviceaccount controller makes it)"

    async def _get_ok(self, session: aiohttp.ClientSession, url: str, what: str) -> str | None:
        """None when ``url`` answers 200 to the admin token, else what it said."""
        headers = {"Authorization": f"Bearer {self.token}"}
        try:
            async with session.get(url, headers=headers) as response:
                if response.status == 200:
                    return None
                text = await response.text()
        except (aiohttp.ClientError, TimeoutError) as exc:
            return f"{what} does not answer yet ({type(exc).__name__})"
        failing = [line[3:].split(" ")[0] for line in text.splitlines() if line.startswith("[-]")]
        if failing:
            return f"{what}: {', '.join(failing)} not ready"
        return f"{what}: HTTP {response.status} {text.strip()[:200]}"
