"""What the process kubelet runs for a container (image shells, the pause image, containers it cannot start), how
its probes decide, how its volumes are made ready, and what the pod's status then says: tables of cases."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import stat
from pathlib import Path
from typing import Any

import pytest

from multiqueue.local import volumes
from multiqueue.local.containers import ContainerRecord, Observation, Seen, spawn
from multiqueue.local.podstatus import Ended, PodView, pod_status
from multiqueue.local.probes import ProbeSpec, ProbeState, after, first_run_in, started_failed
from multiqueue.local.shells import PAUSE_SCRIPT, Launch, is_pause_image, launch, with_shell
from tests.support.waiting import first_line

Obj = dict[str, Any]
BASH = "/usr/bin/bash"
T0, T1 = "2030-01-01T00:00:00Z", "2030-01-01T00:00:05Z"


@pytest.mark.parametrize(
    ("container", "bash", "expected"),
    [
        # Image shells run under the host's bash, invoked as bash: [[ and SIG-prefixed trap names work.
        ({"command": ["sh", "-c", "echo"]}, BASH, Launch((BASH, "-c", "echo"))),
        ({"command": ["/bin/sh", "-c", "x"]}, BASH, Launch((BASH, "-c", "x"))),
        ({"command": ["ash"], "args": ["-c", "x"]}, BASH, Launch((BASH, "-c", "x"))),
        ({"command": ["/bin/bash", "-c", "x"]}, BASH, Launch((BASH, "-c", "x"))),
        # No bash on the host: the host's sh.
        ({"command": ["sh", "-c", "x"]}, None, Launch(("sh", "-c", "x"))),
        # Other programs run as they are, args after the command.
        ({"command": ["python3"], "args": ["-c", "1"]}, BASH, Launch(("python3", "-c", "1"))),
        ({"command": ["shx"]}, BASH, Launch(("shx",))),
        # The pause image sleeps until stopped, whatever its registry and tag.
        ({"image": "registry.k8s.io/pause:3.10"}, BASH, Launch((BASH, "-c", PAUSE_SCRIPT))),
        ({"image": "pause"}, None, Launch(("sh", "-c", PAUSE_SCRIPT))),
    ],
)
def test_launch(container: Obj, bash: str | None, expected: Launch) -> None:
    assert launch({"name": "main", **container}, bash) == expected


@pytest.mark.parametrize(
    "container",
    [
        {"image": "busybox:1.35"},
        {"image": "busybox:1.35", "args": ["echo", "hi"]},  # args without command: the image's entrypoint's
        {"image": "example.com/pauser:1"},
        {},
    ],
)
def test_a_container_without_command_cannot_start(container: Obj) -> None:
    found = launch({"name": "main", **container}, BASH)
    assert found.argv == () and "has no command" in found.error and "'main'" in found.error


@pytest.mark.parametrize(
    ("image", "pause"),
    [
        ("registry.k8s.io/pause:3.10", True),
        ("k8s.gcr.io/pause", True),
        ("localhost:5000/library/pause:latest", True),
        ("pause@sha256:0123", True),
        ("pause", True),
        ("busybox", False),
        ("example.com/pause-not:1", False),
        ("example.com/pause/busybox:1", False),
    ],
)
def test_is_pause_image(image: str, pause: bool) -> None:
    assert is_pause_image(image) is pause


def test_with_shell_leaves_an_empty_argv() -> None:
    assert with_shell([], BASH) == []


# --- probes ----------------------------------------------------------------------------------------------------

SPEC = ProbeSpec(("true",), success_threshold=2, failure_threshold=3)
NOT_READY = ProbeState.readiness()
LIVE = ProbeState.liveness()


@pytest.mark.parametrize(
    ("state", "passed", "expected"),
    [
        # Readiness starts failed: ready after successThreshold passes in a row.
        (NOT_READY, True, ProbeState(False, 1, 0)),
        (ProbeState(False, 1, 0), True, ProbeState(True, 2, 0)),
        (ProbeState(False, 1, 0), False, ProbeState(False, 0, 1)),
        # Passing: stays so until failureThreshold fails in a row.
        (ProbeState(True, 5, 0), False, ProbeState(True, 0, 1)),
        (ProbeState(True, 0, 2), False, ProbeState(False, 0, 3)),
        (ProbeState(True, 0, 2), True, ProbeState(True, 1, 0)),
        # Liveness starts passing: one failure is not enough.
        (LIVE, False, ProbeState(True, 0, 1)),
        # Failed: one pass is not enough either (successThreshold 2).
        (ProbeState(False, 0, 7), True, ProbeState(False, 1, 0)),
    ],
)
def test_probe_after(state: ProbeState, passed: bool, expected: ProbeState) -> None:
    assert after(state, passed, SPEC) == expected


@pytest.mark.parametrize(
    ("probe", "expected"),
    [
        ({"exec": {"command": ["test", "-f", "x"]}}, ProbeSpec(("test", "-f", "x"))),
        (
            {
                "exec": {"command": ["true"]},
                "initialDelaySeconds": 2,
                "periodSeconds": 3,
                "timeoutSeconds": 4,
                "successThreshold": 1,
                "failureThreshold": 5,
            },
            ProbeSpec(("true",), 2.0, 3.0, 4.0, 1, 5),
        ),
        # Zeros the API would default are taken as the least it allows.
        (
            {"exec": {"command": ["true"]}, "periodSeconds": 0, "failureThreshold": 0},
            ProbeSpec(("true",), failure_threshold=1, period=1.0),
        ),
        # tcpSocket and httpGet on the pod's IP (127.0.0.1 here) unless a host is named; named ports resolved.
        ({"tcpSocket": {"port": 8080}}, ProbeSpec(action="tcp", port=8080)),
        ({"tcpSocket": {"port": "web"}}, ProbeSpec(action="tcp", port=8000)),
        ({"tcpSocket": {"port": "8081"}}, ProbeSpec(action="tcp", port=8081)),
        (
            {
                "httpGet": {
                    "port": "web",
                    "path": "/healthz",
                    "host": "::1",
                    "scheme": "https",
                    "httpHeaders": [{"name": "X-A", "value": "b"}],
                }
            },
            ProbeSpec(
                action="http", host="::1", port=8000, path="/healthz", scheme="HTTPS", headers=(("X-A", "b"),)
            ),
        ),
        ({"httpGet": {"port": 80}}, ProbeSpec(action="http", port=80)),
        # What the local kubelet does not run: gRPC, a port it cannot resolve, an empty exec.
        ({"grpc": {"port": 80}}, None),
        ({"tcpSocket": {"port": "nameless"}}, None),
        ({"tcpSocket": {"port": 70000}}, None),
        ({"exec": {}}, None),
    ],
)
def test_probe_spec(probe: Obj, expected: ProbeSpec | None) -> None:
    assert ProbeSpec.of(probe, {"web": 8000}) == expected


@pytest.mark.parametrize(
    ("state", "failed"),
    [(ProbeState(False, 0, 2), False), (ProbeState(False, 0, 3), True), (ProbeState(True, 0, 5), False)],
)
def test_a_startup_probe_fails_the_container_after_its_threshold(state: ProbeState, failed: bool) -> None:
    assert started_failed(state, SPEC) is failed


@pytest.mark.parametrize(("delay", "running_for", "wait"), [(5, 0, 5), (5, 2, 3), (5, 9, 0), (0, 0, 0)])
def test_first_run_in(delay: float, running_for: float, wait: float) -> None:
    assert first_run_in(ProbeSpec(("true",), initial_delay=delay), running_for) == wait


# --- pod status: readiness and start errors ----------------------------------------------------------------------


def _probed_pod() -> Obj:
    return {
        "metadata": {"name": "p", "namespace": "default", "uid": "u-1"},
        "spec": {
            "containers": [
                {"name": "main", "image": "busybox", "readinessProbe": {"exec": {"command": ["true"]}}},
                {"name": "side", "image": "busybox"},
            ]
        },
        "status": {},
    }


@pytest.mark.parametrize(
    ("probe_ready", "ready"),
    [
        (False, ("False", "ContainersNotReady", "containers with unready status: [main]")),
        (True, ("True", None, None)),
    ],
)
def test_a_probed_container_is_ready_once_its_probe_passes(
    probe_ready: bool, ready: tuple[str, Any, Any]
) -> None:
    subject = _probed_pod()
    view = PodView.of(subject, T0)
    for container in view.main.values():
        container.run(1, T1)
    view.main["main"].probe_ready = probe_ready
    status = pod_status(subject, view, "Running", T1)
    found = {c["type"]: (c["status"], c.get("reason"), c.get("message")) for c in status["conditions"]}
    assert found["Ready"] == found["ContainersReady"] == ready
    by_name = {c["name"]: c for c in status["containerStatuses"]}
    assert by_name["main"]["ready"] is probe_ready and by_name["main"]["started"] is True
    assert by_name["side"]["ready"] is True, "without a probe, ready once running"


def test_a_container_with_a_startup_probe_is_started_and_ready_only_once_it_passes() -> None:
    subject = _probed_pod()
    subject["spec"]["containers"][1]["startupProbe"] = {"tcpSocket": {"port": 80}}
    view = PodView.of(subject, T0)
    for container in view.main.values():
        container.run(1, T1)
    side = view.main["side"]
    status = {c["name"]: c for c in pod_status(subject, view, "Running", T1)["containerStatuses"]}
    assert (status["side"]["started"], status["side"]["ready"]) == (False, False)
    side.probe_started = True
    status = {c["name"]: c for c in pod_status(subject, view, "Running", T1)["containerStatuses"]}
    assert (status["side"]["started"], status["side"]["ready"]) == (True, True)


def test_a_restarted_container_waits_for_its_probe_again() -> None:
    view = PodView.of(_probed_pod(), T0)
    view.main["main"].run(1, T0)
    view.main["main"].probe_ready = True
    view.main["main"].run(2, T1)
    assert not view.main["main"].ready


def test_a_start_error_is_reported_as_a_runtime_does() -> None:
    seen = Observation(Seen.EXITED, 1, 128, started_at=T0, start_error="it has no command")
    ended = Ended.observed(seen)
    assert (ended.exit_code, ended.reason, ended.message) == (128, "StartError", "it has no command")
    assert Ended.observed(dataclasses.replace(seen, start_error=None)).reason == "Error"


def test_a_start_error_is_recorded_with_its_message(tmp_path: Path) -> None:
    record = ContainerRecord(tmp_path / "main")
    record.start(1, T0)
    record.fail_to_start(1, 128, "volume x cannot be provided")
    seen = record.observe()
    assert (seen.seen, seen.exit_code, seen.start_error) == (Seen.EXITED, 128, "volume x cannot be provided")


# --- volumes -----------------------------------------------------------------------------------------------------


def _volume_pod(volumes_: list[Obj], mounts: list[Obj]) -> tuple[Obj, Obj]:
    container = {"name": "main", "volumeMounts": mounts}
    pod = {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u-1"},
        "spec": {"containers": [container], "volumes": volumes_},
    }
    return pod, container


def _field(path: str) -> str | None:
    return {"metadata.namespace": "ns"}.get(path)


SOURCES = volumes.Sources(
    {("configmap", "settings"): {"a.txt": b"A", "b.txt": b"B"}, ("secret", "creds"): {"token": b"s3cret"}},
    "ns",
)


def test_empty_dir_and_files_volumes(tmp_path: Path) -> None:
    target = tmp_path / "host" / "data"
    pod, container = _volume_pod(
        [
            {"name": "data", "emptyDir": {}},
            {
                "name": "settings",
                "configMap": {"name": "settings", "items": [{"key": "b.txt", "path": "dir/b"}]},
            },
            {"name": "creds", "secret": {"secretName": "creds"}},
            {
                "name": "api",
                "projected": {
                    "sources": [
                        {"serviceAccountToken": {"path": "token"}},
                        {
                            "configMap": {
                                "name": "kube-root-ca.crt",
                                "items": [{"key": "ca.crt", "path": "ca.crt"}],
                            }
                        },
                        {
                            "downwardAPI": {
                                "items": [
                                    {"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}
                                ]
                            }
                        },
                    ]
                },
            },
        ],
        [
            {"name": "data", "mountPath": str(target)},
            {"name": "settings", "mountPath": str(target / "settings")},
            {"name": "creds", "mountPath": str(tmp_path / "creds"), "readOnly": True},
            {"name": "api", "mountPath": str(tmp_path / "sa")},
        ],
    )
    sources = dataclasses.replace(
        SOURCES, objects={**SOURCES.objects, ("configmap", "kube-root-ca.crt"): {"ca.crt": b"CA"}}
    )
    mounts = volumes.prepare(pod, container, tmp_path / "pod", sources, _field)
    base = tmp_path / "pod" / "volumes" / "u-1"
    assert [(m.source, m.target, m.read_only) for m in mounts] == [
        # Shallowest first, so that a mount inside another volume comes after that volume's.
        (base / "creds", str(tmp_path / "creds"), True),
        (base / "api", str(tmp_path / "sa"), True),
        (base / "data", str(target), False),
        (base / "settings", str(target / "settings"), True),
    ]
    assert (base / "settings" / "dir" / "b").read_bytes() == b"B" and not (
        base / "settings" / "a.txt"
    ).exists()
    assert (base / "creds" / "token").read_bytes() == b"s3cret"
    assert {p.name: p.read_bytes() for p in (base / "api").iterdir()} == {
        "token": b"",
        "ca.crt": b"CA",
        "namespace": b"ns",
    }
    # Mount points: made on the host where missing, inside the volume for a mount under another one.
    assert target.is_dir() and (base / "data" / "settings").is_dir()
    assert stat.S_IMODE((base / "data").stat().st_mode) == 0o777
    volumes.release(tmp_path / "pod", "u-1")
    assert not (tmp_path / "host").exists(), "the mount points made for the pod are gone with it"
    assert not base.exists(), "its volumes too"


def test_a_mount_point_another_pod_uses_stays(tmp_path: Path) -> None:
    target = str(tmp_path / "shared")
    first, container = _volume_pod([{"name": "d", "emptyDir": {}}], [{"name": "d", "mountPath": target}])
    second = {**first, "metadata": {**first["metadata"], "uid": "u-2"}}
    volumes.prepare(first, container, tmp_path / "a", SOURCES, _field)
    volumes.prepare(second, container, tmp_path / "b", SOURCES, _field)
    volumes.release(tmp_path / "a", "u-1")
    assert Path(target).is_dir(), "still used by the second pod"
    volumes.release(tmp_path / "b", "u-2")
    assert not Path(target).exists()


def test_a_host_path_at_its_own_path_is_not_mounted(tmp_path: Path) -> None:
    pod, container = _volume_pod(
        [{"name": "h", "hostPath": {"path": str(tmp_path), "type": "Directory"}}],
        [{"name": "h", "mountPath": str(tmp_path)}],
    )
    assert volumes.prepare(pod, container, tmp_path / "pod", SOURCES, _field) == []


@pytest.mark.parametrize(
    ("host_path", "problem"),
    [
        ({"type": "Directory"}, "{dir}/missing does not exist"),
        ({"type": "File", "at": "dir"}, "{dir} is not a file"),
        ({"type": "Directory", "at": "file"}, "{dir}/file is not a directory"),
        ({"type": "Socket", "at": "file"}, "{dir}/file is not a socket"),
        ({"type": "FileOrCreate", "at": "missing/file"}, "{dir}/missing does not exist"),
        ({"type": "Sideways", "at": "dir"}, 'type "Sideways"'),
        ({"at": "missing"}, "{dir}/missing does not exist"),
    ],
)
def test_host_path_types_are_checked(tmp_path: Path, host_path: Obj, problem: str) -> None:
    (tmp_path / "file").write_text("x")
    at = host_path.pop("at", "missing")
    path = str(tmp_path) if at == "dir" else str(tmp_path / at)
    with pytest.raises(volumes.VolumeError) as caught:
        volumes.check_host_path("h", {"path": path, **host_path})
    assert problem.format(dir=tmp_path) in str(caught.value) and 'volume "h"' in str(caught.value)


@pytest.mark.parametrize(
    ("host_path", "kind"),
    [({"type": "DirectoryOrCreate"}, stat.S_ISDIR), ({"type": "FileOrCreate"}, stat.S_ISREG)],
)
def test_host_path_made_when_its_type_says_so(tmp_path: Path, host_path: Obj, kind: Any) -> None:
    path = tmp_path / "made"
    assert volumes.check_host_path("h", {"path": str(path), **host_path}) == path
    assert kind(path.stat().st_mode)


@pytest.mark.parametrize(
    ("volume", "mount", "problem"),
    [
        ({"name": "v", "nfs": {"server": "x", "path": "/"}}, {}, "cannot provide volumes of type nfs"),
        ({"name": "v", "configMap": {"name": "absent"}}, {}, 'configmap "absent" not found'),
        ({"name": "v", "configMap": {"name": "settings", "items": [{"key": "z"}]}}, {}, 'has no key "z"'),
        ({"name": "v", "emptyDir": {}}, {"subPath": "../up"}, "relative path inside the volume"),
        ({"name": "v", "emptyDir": {}}, {"mountPath": "relative"}, "not an absolute path"),
        ({"name": "other", "emptyDir": {}}, {}, 'volume "v" is mounted but the pod has no such volume'),
        (
            {
                "name": "v",
                "downwardAPI": {"items": [{"path": "x", "fieldRef": {"fieldPath": "spec.hostname"}}]},
            },
            {},
            'cannot give the field "spec.hostname"',
        ),
    ],
)
def test_volumes_that_cannot_be_provided(tmp_path: Path, volume: Obj, mount: Obj, problem: str) -> None:
    pod, container = _volume_pod([volume], [{"name": "v", "mountPath": str(tmp_path / "m"), **mount}])
    with pytest.raises(volumes.VolumeError) as caught:
        volumes.prepare(pod, container, tmp_path / "pod", SOURCES, _field)
    assert problem in str(caught.value)


def test_optional_sources_may_be_missing(tmp_path: Path) -> None:
    pod, container = _volume_pod(
        [{"name": "v", "configMap": {"name": "absent", "optional": True}}],
        [{"name": "v", "mountPath": str(tmp_path / "m"), "subPath": "sub"}],
    )
    [mount] = volumes.prepare(pod, container, tmp_path / "pod", SOURCES, _field)
    assert mount.source == tmp_path / "pod" / "volumes" / "u-1" / "v" / "sub" and mount.source.is_dir()
    volumes.release(tmp_path / "pod", "u-1")
    assert not (tmp_path / "m").exists()


def test_wrap_runs_the_command_after_its_mounts() -> None:
    assert volumes.wrap([], ["echo"]) == ["echo"]
    argv = volumes.wrap([volumes.Mount(Path("/src"), "/data", True)], ["echo", "hi"])
    assert argv[1:5] == ["--mount", "--propagation", "private", "--"]
    assert argv[-7:] == ["multiqueue-mounts", "/src", "/data", "ro", "--", "echo", "hi"]


@pytest.mark.parametrize(
    ("secret", "expected"),
    [
        ({"data": {"k": "aGk="}}, {"k": b"hi"}),
        ({"stringData": {"k": "plain"}}, {"k": b"plain"}),
        ({"data": {"k": "!!"}}, {}),
    ],
)
def test_decode_secret(secret: Obj, expected: dict[str, bytes]) -> None:
    assert volumes.decode("secret", secret) == expected


def test_decode_config_map() -> None:
    assert volumes.decode("configmap", {"data": {"a": "x"}, "binaryData": {"b": "aGk="}}) == {
        "a": b"x",
        "b": b"hi",
    }


# --- signals -----------------------------------------------------------------------------------------------------


async def test_sigterm_goes_to_the_main_process_only(tmp_path: Path) -> None:
    """The command's trap runs while what it started goes on; the wrapper records the trap's exit code."""
    record = ContainerRecord(tmp_path / "records" / "main")
    run_dir = record.start(1, T0)
    log = tmp_path / "main.log"
    fifo = tmp_path / "child"
    os.mkfifo(fifo)
    script = f"trap 'echo term; exit 7' TERM; sleep 30 & echo $! > {fifo}; wait"
    process = spawn(run_dir, [BASH, "-c", script], tmp_path, {"PATH": os.environ["PATH"]}, log)
    child = 0
    try:
        child = int(await first_line(fifo))
        process.terminate()
        async with asyncio.timeout(10):
            await process.wait()
        assert record.observe().exit_code == 7
        os.kill(child, 0)  # the command's child did not get the SIGTERM
        assert log.read_text() == "term\n"
    finally:
        process.signal_group(signal.SIGKILL)
        process.close()
        if child:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)


async def test_what_a_container_leaves_running_ends_with_it(tmp_path: Path) -> None:
    record = ContainerRecord(tmp_path / "records" / "main")
    fifo = tmp_path / "child"
    os.mkfifo(fifo)
    script = f"sleep 30 & echo $! > {fifo}; exit 0"
    process = spawn(
        record.start(1, T0), [BASH, "-c", script], tmp_path, {"PATH": os.environ["PATH"]}, tmp_path / "log"
    )
    child = int(await first_line(fifo))
    async with asyncio.timeout(10):
        await process.wait()
    pidfd = os.pidfd_open(child)  # the wrapper ended; its group's stray process runs on
    ended = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_reader(pidfd, ended.set)
    try:
        assert not ended.is_set()
        process.kill_leftovers()
        async with asyncio.timeout(10):
            await ended.wait()
    finally:
        loop.remove_reader(pidfd)
        os.close(pidfd)
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)
        process.close()


_SA_VOLUME = {
    "name": "kube-api-access-x1",
    "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]},
}
_SA_MOUNT = {"name": "kube-api-access-x1", "mountPath": volumes.SERVICE_ACCOUNT_PATH, "readOnly": True}


@pytest.mark.parametrize(
    ("pod_volumes", "mounts", "only"),
    [
        ([_SA_VOLUME], [_SA_MOUNT], True),
        (
            [_SA_VOLUME, {"name": "data", "emptyDir": {}}],
            [_SA_MOUNT, {"name": "data", "mountPath": "/data"}],
            False,
        ),
        ([_SA_VOLUME], [{**_SA_MOUNT, "mountPath": "/elsewhere"}], False),
        ([{"name": "kube-api-access-x1", "emptyDir": {}}], [_SA_MOUNT], False),
        ([_SA_VOLUME], [], False),
    ],
    ids=["admission's volume only", "and one of the author's", "moved", "not projected", "no mounts"],
)
def test_only_the_service_account_volume(pod_volumes: list[Obj], mounts: list[Obj], only: bool) -> None:
    pod = {"spec": {"volumes": pod_volumes}}
    assert volumes.only_service_account(pod, {"name": "c", "volumeMounts": mounts}) is only
