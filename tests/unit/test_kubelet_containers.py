"""The process kubelet's container records: the decision table, and the wrapper's records with real processes."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from multiqueue.local.containers import (
    ContainerProcess,
    ContainerRecord,
    Observation,
    PodRecords,
    PodState,
    Seen,
    Step,
    decide,
    is_alive,
    spawn,
)
from tests.support.waiting import first_line

NEVER = PodState(restart_policy="Never")
ALWAYS = PodState(restart_policy="Always")
ON_FAILURE = PodState(restart_policy="OnFailure")
NEVER_REPORTED = PodState(restart_policy="Never", reported_started=True)
ON_FAILURE_REPORTED = PodState(restart_policy="OnFailure", reported_started=True)
DELETING = PodState(restart_policy="Never", deleting=True)
TERMINAL = PodState(restart_policy="OnFailure", terminal=True)
GONE = PodState(gone=True)

NOTHING = Observation(Seen.NOTHING)
NEVER_RAN = Observation(Seen.NEVER_RAN, attempt=1)
RUNNING = Observation(Seen.RUNNING, attempt=1, pid=10, start_ticks=5)
EXITED_0 = Observation(Seen.EXITED, attempt=1, exit_code=0)
EXITED_3 = Observation(Seen.EXITED, attempt=2, exit_code=3)
VANISHED = Observation(Seen.VANISHED, attempt=1, pid=10, start_ticks=5)


@pytest.mark.parametrize(
    ("seen", "pod", "step"),
    [
        # A pod to run, restartPolicy Never: whatever may have run is never started again.
        (NOTHING, NEVER, Step.START),
        # An attempt that never ran (its pid file taken by a later kubelet) is started anew: its first run.
        (NEVER_RAN, NEVER, Step.START),
        (RUNNING, NEVER, Step.ADOPT),
        (EXITED_0, NEVER, Step.DONE),
        (EXITED_3, NEVER, Step.DONE),
        (VANISHED, NEVER, Step.UNKNOWN),
        # No record, but the API shows the container started (records lost): not started again.
        (NOTHING, NEVER_REPORTED, Step.UNKNOWN),
        # Always: whatever way a container ended, it runs again; never reported done.
        (NEVER_RAN, ALWAYS, Step.START),
        (RUNNING, ALWAYS, Step.ADOPT),
        (EXITED_3, ALWAYS, Step.RESTART),
        (EXITED_0, ALWAYS, Step.RESTART),
        (VANISHED, ALWAYS, Step.RESTART),
        (RUNNING, dataclasses.replace(ALWAYS, deleting=True), Step.KILL),
        # OnFailure: a failure, or a container that cannot be located, is restarted.
        (NOTHING, ON_FAILURE, Step.START),
        (NOTHING, ON_FAILURE_REPORTED, Step.RESTART),
        (NEVER_RAN, ON_FAILURE, Step.START),
        (RUNNING, ON_FAILURE, Step.ADOPT),
        (EXITED_0, ON_FAILURE, Step.DONE),
        (EXITED_3, ON_FAILURE, Step.RESTART),
        (VANISHED, ON_FAILURE, Step.RESTART),
        # Pods being deleted, finished or gone: a running process is stopped, nothing is started.
        (RUNNING, DELETING, Step.KILL),
        (RUNNING, TERMINAL, Step.KILL),
        (RUNNING, GONE, Step.KILL),
        (NOTHING, DELETING, Step.NOTHING),
        (NEVER_RAN, TERMINAL, Step.NOTHING),
        (EXITED_3, TERMINAL, Step.NOTHING),
        (VANISHED, GONE, Step.NOTHING),
        (EXITED_0, GONE, Step.NOTHING),
    ],
)
def test_decide(seen: Observation, pod: PodState, step: Step) -> None:
    assert decide(seen, pod) is step


# --- records and the wrapper, with real processes --------------------------------------------------------------


def _record(tmp_path: Path) -> ContainerRecord:
    records = PodRecords(tmp_path / "logs" / "default" / "p", "uid-1")
    records.begin("node-1", "default", "p", "2025-01-01T00:00:00Z")
    return records.container("main")


def _run(record: ContainerRecord, tmp_path: Path, *argv: str, attempt: int = 1) -> ContainerProcess:
    run_dir = record.start(attempt, "2025-01-01T00:00:00Z")
    return spawn(run_dir, list(argv), tmp_path, {"PATH": os.environ["PATH"]}, tmp_path / "main.log")


async def test_the_wrapper_records_its_pid_start_time_and_the_exit_code(tmp_path: Path) -> None:
    record = _record(tmp_path)
    process = _run(record, tmp_path, "sh", "-c", "echo out; exit 3")
    async with asyncio.timeout(10):
        await process.wait()
    seen = record.observe()
    assert seen.seen is Seen.EXITED and seen.exit_code == 3 and seen.attempt == 1
    assert seen.pid == process.pid and seen.start_ticks == process.start_ticks != 0
    assert (tmp_path / "main.log").read_text() == "out\n"
    run_dir = record.run_dir(1)
    for path in (
        run_dir / "pid",
        run_dir / "exit",
        record.folder / "record.json",
        record.folder.parent / "pod.json",
    ):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    for path in (run_dir, record.folder, record.folder.parent, tmp_path / "logs" / "default" / "p" / "work"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700, path


async def test_the_command_keeps_the_umask_and_a_shell_builtin_is_not_run_as_a_command(
    tmp_path: Path,
) -> None:
    record = _record(tmp_path)
    process = _run(record, tmp_path, "exit", "3")
    async with asyncio.timeout(10):
        await process.wait()
    assert record.observe().exit_code == 127, "exit is not a program: as a container runtime, not found"
    old = os.umask(0o022)
    try:
        process = _run(record, tmp_path, "sh", "-c", "umask", attempt=2)
    finally:
        os.umask(old)
    async with asyncio.timeout(10):
        await process.wait()
    assert (tmp_path / "main.log").read_text().splitlines()[-1] == "0022"


async def test_a_running_attempt_is_seen_running_adopted_and_stopped_by_sigterm(tmp_path: Path) -> None:
    record = _record(tmp_path)
    gate, fifo = tmp_path / "gate", tmp_path / "fifo"
    os.mkfifo(fifo)
    started = _run(
        record, tmp_path, "sh", "-c", f"echo go > {fifo}; while [ ! -e {gate} ]; do sleep 0.1; done"
    )
    # The command runs, so its wrapper recorded its pid (looking earlier would claim the attempt, as a restarted
    # kubelet does, and the wrapper would then run nothing).
    await first_line(fifo)
    seen = record.observe()
    assert seen.seen is Seen.RUNNING and seen.pid == started.pid
    assert seen.start_ticks is not None
    adopted = ContainerProcess.adopt(started.pid, seen.start_ticks)
    assert adopted is not None
    adopted.signal_group(signal.SIGTERM)
    async with asyncio.timeout(10):
        await adopted.wait()
        await started.wait()
    seen = record.observe()
    assert seen.seen is Seen.EXITED and seen.exit_code == 143, "the wrapper outlived SIGTERM to record it"


def test_a_reused_pid_is_not_taken_for_the_container(tmp_path: Path) -> None:
    record = _record(tmp_path)
    run_dir = record.start(1, "2025-01-01T00:00:00Z")
    # A live process (this one) with another start time than the one recorded.
    with open(f"/proc/{os.getpid()}/stat") as handle:
        ticks = int(handle.read().rpartition(")")[2].split()[19])
    (run_dir / "pid").write_text(f"{os.getpid()} {ticks + 1}\n")
    assert is_alive(os.getpid(), ticks)
    assert record.observe().seen is Seen.VANISHED
    assert ContainerProcess.adopt(os.getpid(), ticks + 1) is None


async def test_a_container_killed_without_an_exit_code_has_vanished(tmp_path: Path) -> None:
    record = _record(tmp_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    process = _run(record, tmp_path, "sh", "-c", f"echo go > {fifo}; exec sleep 60")
    # The command runs, so its wrapper recorded its pid (looking earlier would claim the attempt, as a restarted
    # kubelet does, and the wrapper would then run nothing).
    await first_line(fifo)
    assert record.observe().seen is Seen.RUNNING
    process.signal_group(signal.SIGKILL)
    async with asyncio.timeout(10):
        await process.wait()
    assert record.observe().seen is Seen.VANISHED


async def test_a_starting_record_is_claimed_so_a_late_wrapper_runs_nothing(tmp_path: Path) -> None:
    record = _record(tmp_path)
    run_dir = record.start(1, "2025-01-01T00:00:00Z")  # the kubelet stopped before its wrapper started
    seen = record.observe()
    assert seen.seen is Seen.NEVER_RAN and seen.attempt == 1
    marker = tmp_path / "ran"
    late = spawn(run_dir, ["sh", "-c", f"echo ran > {marker}"], tmp_path, {}, tmp_path / "main.log")
    async with asyncio.timeout(10):
        await late.wait()
    assert not marker.exists()
    assert record.observe().seen is Seen.NEVER_RAN


def test_no_record_is_nothing_and_the_exit_time_is_the_exit_files(tmp_path: Path) -> None:
    record = _record(tmp_path)
    assert record.observe() == Observation(Seen.NOTHING)
    run_dir = record.start(4, "2025-01-01T00:00:00Z")
    (run_dir / "exit").write_text("1\n")
    os.utime(run_dir / "exit", (1_700_000_000, 1_700_000_000))
    seen = record.observe()
    assert (seen.seen, seen.attempt, seen.exit_code) == (Seen.EXITED, 4, 1)
    assert seen.finished_at == datetime.fromtimestamp(1_700_000_000, UTC)
    assert seen.started_at == "2025-01-01T00:00:00Z"
