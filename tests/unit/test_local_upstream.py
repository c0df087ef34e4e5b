"""A disposable upstream control plane (a test's clusters): what its processes are started with, and that its stop
kills them at once; ``multiqueue local up``'s own control planes keep upstream's defaults and a graceful stop."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from multiqueue.local.certs import ServingCert
from multiqueue.local.config import LocalCluster, LocalConfig
from multiqueue.local.up import LocalClusters
from multiqueue.local.upstream import (
    DISPOSABLE_ETCD_ARGUMENTS,
    DISPOSABLE_GOGC,
    Binaries,
    ChildProcess,
    ControlPlaneError,
    ControlPlaneFiles,
    Ports,
    UpstreamControlPlane,
)


def _plane(
    tmp_path: Path, disposable: bool, extra_args: dict[str, list[str]] | None = None
) -> UpstreamControlPlane:
    tls = ServingCert(tmp_path / "ca.crt", tmp_path / "serving.crt", tmp_path / "serving.key")
    return UpstreamControlPlane(
        "management",
        Binaries(tmp_path / "bin"),
        ControlPlaneFiles(tmp_path / "control-plane"),
        tls,
        "token",
        Ports(apiserver=1, etcd_client=2, etcd_peer=3, controller_manager=4, scheduler=5),
        lambda _: None,
        disposable=disposable,
        extra_args=extra_args,
    )


@pytest.mark.parametrize(
    ("disposable", "etcd_extra", "gogc"),
    [
        (False, (), None),
        (True, DISPOSABLE_ETCD_ARGUMENTS, DISPOSABLE_GOGC),
    ],
    ids=["local up", "disposable"],
)
def test_what_the_processes_start_with(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    disposable: bool,
    etcd_extra: tuple[str, ...],
    gogc: str | None,
) -> None:
    monkeypatch.delenv("GOGC", raising=False)
    plane = _plane(tmp_path, disposable)
    etcd = plane._arguments("etcd")
    assert tuple(a for a in etcd if a in DISPOSABLE_ETCD_ARGUMENTS) == etcd_extra
    assert "--unsafe-no-fsync" not in plane._arguments("kube-apiserver")
    env = plane._environment()
    assert (env or {}).get("GOGC") == gogc
    if env is not None:
        assert env["PATH"] == os.environ["PATH"], "the rest of the environment is this process's"


def test_a_gogc_set_outside_wins_over_the_disposable_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOGC", "50")
    environment = _plane(tmp_path, disposable=True)._environment()
    assert environment is not None and environment["GOGC"] == "50"


def test_local_clusters_hand_disposable_to_their_control_planes(tmp_path: Path) -> None:
    config = LocalConfig(clusters=[LocalCluster(name="management")], control_plane="upstream")
    for disposable in (False, True):
        clusters = LocalClusters(config, tmp_path / f"state-{disposable}", disposable=disposable)
        (plane,) = clusters._control_planes(Binaries(tmp_path / "bin")).values()
        assert plane.disposable is disposable


# A process that never sees SIGTERM (blocked signals stay blocked across fork and exec): a graceful stop waits out its
# grace, a kill does not.
async def _started(tmp_path: Path) -> ChildProcess:
    child = ChildProcess("sleep", ["sleep", "600"], tmp_path, tmp_path / "sleep.log", lambda _: None)
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        await child.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    return child


async def test_kill_ends_a_process_that_ignores_sigterm_at_once(tmp_path: Path) -> None:
    child = await _started(tmp_path)
    async with asyncio.timeout(5):
        await child.kill()
    assert child.process is not None and child.process.returncode == -signal.SIGKILL
    await child.kill()  # idempotent


async def test_stop_gives_sigterm_its_grace_before_sigkill(tmp_path: Path) -> None:
    child = await _started(tmp_path)
    loop = asyncio.get_running_loop()
    began = loop.time()
    await child.stop(grace=1.0)
    assert loop.time() - began >= 1.0
    assert child.process is not None and child.process.returncode == -signal.SIGKILL


async def test_a_disposable_plane_kills_every_process_on_stop(tmp_path: Path) -> None:
    plane = _plane(tmp_path, disposable=True)
    plane.processes = {"etcd": await _started(tmp_path)}
    async with asyncio.timeout(5):
        await plane.stop()
    assert plane.processes == {}


def test_extra_args_follow_ours_for_their_component_only(tmp_path: Path) -> None:
    extra = {"kube-controller-manager": ["--kube-api-qps=1000", "--concurrent-job-syncs=50"]}
    plane = _plane(tmp_path, disposable=False, extra_args=extra)
    plain = _plane(tmp_path, disposable=False)
    kcm = plane._arguments("kube-controller-manager")
    assert kcm[-2:] == extra["kube-controller-manager"], "after ours, so the last of a flag wins"
    assert kcm[:-2] == plain._arguments("kube-controller-manager")
    for other in ("etcd", "kube-apiserver", "kube-scheduler"):
        assert plane._arguments(other) == plain._arguments(other)


def test_local_clusters_hand_each_cluster_its_extra_args(tmp_path: Path) -> None:
    audit = ["--audit-log-path=/tmp/audit.log"]
    config = LocalConfig.model_validate(
        {
            "controlPlane": "upstream",
            "clusters": [
                {"name": "management", "extraArgs": {"kube-apiserver": audit}},
                {"name": "worker-1"},
            ],
        }
    )
    planes = LocalClusters(config, tmp_path / "state")._control_planes(Binaries(tmp_path / "bin"))
    assert planes["management"].extra_args == {"kube-apiserver": audit}
    assert planes["worker-1"].extra_args == {}


async def test_local_clusters_refuse_extra_args_when_made_embedded(tmp_path: Path) -> None:
    """``local up --control-plane embedded`` over a config written for upstream: nothing starts."""
    config = LocalConfig.model_validate(
        {"controlPlane": "upstream", "clusters": [{"name": "m", "extraArgs": {"kube-apiserver": ["--v=2"]}}]}
    ).model_copy(update={"control_plane": "embedded"})
    with pytest.raises(ControlPlaneError, match="--control-plane upstream"):
        await LocalClusters(config, tmp_path / "state").start()
    assert not (tmp_path / "state").exists()
