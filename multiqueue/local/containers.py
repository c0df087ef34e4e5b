"""The container processes of the local kubelet's ``process`` mode, recorded on disk so that a kubelet that
restarts (after a crash, a SIGKILL or a clean stop) finds the processes it started instead of starting them again,
as a real kubelet re-reads its container runtime's state.

A container runs under a small ``/bin/sh`` wrapper (:data:`WRAPPER`) in a session of its own, so it outlives the
kubelet (the wrapper is POSIX sh on purpose; what the container's command runs under is the kubelet's choice). The wrapper records its own pid and start time (field 22 of ``/proc/<pid>/stat``: a reused pid is never
taken for ours), runs the command, and when the command ends writes its exit code atomically (rename), whether or
not a kubelet is alive by then.

Layout under a pod's folder ``<log_dir>/<namespace>/<pod>/`` (directories 0700, files 0600)::

    containers/<pod uid>/pod.json                   node, namespace, name, uid and startedAt of the pod
    containers/<pod uid>/<container>/record.json    the latest attempt: {"attempt": n, "state": "starting", ...}
    containers/<pod uid>/<container>/<n>/pid        "<pid> <start ticks>" (the wrapper), or "abandoned" (a kubelet)
    containers/<pod uid>/<container>/<n>/main       "<pid>" of the command (its main process, for SIGTERM)
    containers/<pod uid>/<container>/<n>/exit       "<exit code>" (the wrapper, when the command ended)
    containers/<pod uid>/<container>/<n>/start-error why the attempt could not start (a runtime's StartError)
    containers/<pod uid>/<container>/<n>/log-start  where the attempt's output begins in the container's log file
    containers/<pod uid>/<container>/<n>/log.index  "<offset> <unix ns>" for each chunk of output (the shipper)
    containers/<pod uid>/<container>/<n>/output     the named pipe the command's output goes through
    <container>.log                                 every attempt's output (also read by the pods/log endpoint)

The kubelet writes ``record.json`` before it starts attempt ``n``. The pid file is created exclusively (O_EXCL) by
whichever comes first: the wrapper, which then runs the command, or a kubelet that finds a "starting" record and
no pid file, which then starts a new attempt (the abandoned one never ran). A wrapper that starts after that finds
the file taken and exits without running anything, so one attempt never runs twice.

The functions and methods here that are not coroutines do blocking file I/O (or fork): the kubelet calls them
through ``asyncio.to_thread``.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import enum
import functools
import json
import os
import re
import shutil
import signal
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from multiqueue.loop.files import open_private, private_dirs, write_private

# $1: the attempt's folder, $2: mv, $3: the working directory, $4: a Python interpreter and $5: the log shipper
# (:data:`SHIPPER`) it runs, $6: the log file, then the command. Variables are prefixed so that none of the
# container's environment variables (which the shell exports) is overwritten; traps, `set -C` and the umask are
# reset before the command runs; `exec` runs programs only, never a shell builtin. The TERM trap makes the wrapper
# outlive a SIGTERM to the process group long enough to record the command's exit code (143 when SIGTERM ended it).
#
# The command's output goes through the attempt's named pipe (made by :func:`spawn`) to the shipper, which appends
# it to the log file and notes when each chunk came (so the kubelet API can stamp lines, as a container runtime's
# CRI log does). The shipper ignores SIGTERM (set before it starts: an ignored signal stays ignored across exec) so
# that it outlives the command; when the command has ended, SIGUSR1 tells it to take what is left in the pipe and
# stop, and the exit code is recorded only after that, so a finished container's log is complete. The command
# opens the pipe only once the shipper holds it, which is after the shipper is ready for SIGUSR1. With no
# interpreter or no pipe, the command writes to the log file directly, unstamped.
#
# The subshell that execs the command first writes its pid (``/proc/self`` is the subshell, unlike ``$$``) to the
# attempt's ``main`` file: the command keeps that pid through exec, so the kubelet can send SIGTERM to the
# container's main process alone, as a runtime signals a container's PID 1, and SIGKILL the whole group later.
WRAPPER: Final = """set -f
_mq_dir=$1
_mq_mv=$2
_mq_cwd=$3
_mq_py=$4
_mq_ship=$5
_mq_log=$6
shift 6
cd /
_mq_umask=$(umask)
umask 077
_mq_ticks() { local IFS=' '; set -- $1; _mq_start=${20}; }
read -r _mq_stat < /proc/$$/stat || exit 126
_mq_ticks "${_mq_stat##*) }"
set -C
{ echo "$$ $_mq_start" > "$_mq_dir/pid"; } 2>/dev/null || exit 125
set +C
_mq_out=$_mq_dir/output
_mq_pid=
if [ -x "$_mq_py" ] && [ -p "$_mq_out" ]; then
  trap '' TERM
  "$_mq_py" -I -S -c "$_mq_ship" "$_mq_out" "$_mq_log" "$_mq_dir/log.index" &
  _mq_pid=$!
fi
trap : TERM
_mq_main() {
  read -r _mq_self < /proc/self/stat && echo "${_mq_self%% *}" > "$_mq_dir/main"
  umask "$_mq_umask"
  cd -P -- "$_mq_cwd" && exec "$@"
}
if [ -n "$_mq_pid" ]; then
  (_mq_main "$@") > "$_mq_out" 2>&1
else
  (_mq_main "$@")
fi
_mq_code=$?
if [ -n "$_mq_pid" ]; then
  kill -USR1 "$_mq_pid" 2>/dev/null
  while kill -0 "$_mq_pid" 2>/dev/null; do wait "$_mq_pid"; done
fi
echo "$_mq_code" > "$_mq_dir/exit.tmp" && "$_mq_mv" -f "$_mq_dir/exit.tmp" "$_mq_dir/exit"
exit "$_mq_code"
"""
# The log shipper: argv is the pipe, the log file and the index. Each chunk read is appended to the log file, and
# "<offset in the log file> <unix time in ns>" to the index. It holds the pipe for reading and writing, so it never
# waits for a writer and never sees the end of the output early; SIGUSR1 (the command has ended) makes it take what
# is left and stop. The signal wakes its poll through a wakeup pipe, written by the C-level handler: a signal that
# lands just before a blocking read would otherwise wait for output that never comes.
SHIPPER: Final = """import os, select, signal, sys, time
fifo, log, index = sys.argv[1:4]
wake_r, wake_w = os.pipe()
os.set_blocking(wake_w, False)
signal.set_wakeup_fd(wake_w)
signal.signal(signal.SIGUSR1, lambda signum, frame: None)
pipe = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
out = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
stamps = os.open(index, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
poller = select.poll()
poller.register(pipe, select.POLLIN)
poller.register(wake_r, select.POLLIN)
ending = False
while not ending:
    ending = any(fd == wake_r for fd, _ in poller.poll())
    while True:
        try:
            chunk = os.read(pipe, 65536)
        except BlockingIOError:
            break
        os.write(stamps, b"%d %d\\n" % (os.fstat(out).st_size, time.time_ns()))
        while chunk:
            chunk = chunk[os.write(out, chunk):]
"""
WRAPPER_NAME: Final = "multiqueue-container"
ABANDONED: Final = "abandoned"
LOG_START: Final = "log-start"  # in an attempt's folder: where its output begins in the log file
LOG_INDEX: Final = "log.index"  # in an attempt's folder: "<offset> <unix ns>" per chunk the shipper wrote
MAIN: Final = "main"  # in an attempt's folder: the pid of the command (the container's main process)
START_ERROR: Final = "start-error"  # in an attempt's folder: why it could not start
START_ERROR_EXIT_CODE: Final = 128  # what a runtime reports for a container that could not start
LOST_EXIT_CODE: Final = 137
# How long a pid file may stay half-written (the wrapper writes one line right after creating it).
_PID_WRITE_WAIT: Final = 2.0
_SAFE_NAME: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
# Children started here that nobody watches any more (their kubelet stopped, this process goes on): reaped by a
# later spawn once they have ended.
_DETACHED: Final[set[int]] = set()


# --- what the records show, and what to do about it --------------------------------------------------------------


class Seen(enum.Enum):
    """What the records and /proc show of a container's latest attempt."""

    NOTHING = "nothing"  # no record: no kubelet ever decided to start it
    NEVER_RAN = "never-ran"  # a record says "starting", but no process ran (the kubelet stopped in between)
    RUNNING = "running"  # its process runs (same pid, same start time)
    EXITED = "exited"  # its command ended; the exit code is recorded
    VANISHED = "vanished"  # its process ran and is gone without an exit code (SIGKILL, say)


@dataclass(frozen=True)
class Observation:
    seen: Seen
    attempt: int = 0  # the latest attempt, from 1; 0 when none was recorded
    exit_code: int | None = None
    pid: int | None = None
    start_ticks: int | None = None
    started_at: str | None = None  # when the kubelet started the attempt (RFC 3339)
    finished_at: datetime | None = None  # when the exit code was written
    start_error: str | None = None  # it could not start (a runtime's StartError): why


@dataclass(frozen=True)
class PodState:
    """What the API says of the pod a container belongs to."""

    restart_policy: str = "Never"
    deleting: bool = False
    terminal: bool = False
    gone: bool = False  # no pod with this uid in the API any more
    reported_started: bool = False  # the pod's status shows this container started before


class Step(enum.Enum):
    START = "start"  # run the first attempt
    ADOPT = "adopt"  # the process runs: wait for it and report its end
    RESTART = "restart"  # it failed and the restart policy runs it again (a new attempt)
    DONE = "done"  # it ended: report the recorded exit code
    UNKNOWN = "unknown"  # it cannot be located: report it terminated, ContainerStatusUnknown, exit code 137
    KILL = "kill"  # it runs for a pod that is gone, deleted or finished: stop it
    NOTHING = "nothing"  # no process and no pod to run it for


def decide(seen: Observation, pod: PodState) -> Step:
    """The kubelet's next step for one container. A container that may have run is never started again under
    restartPolicy Never; OnFailure runs a failed one again, Always any that ended."""
    if pod.gone or pod.deleting or pod.terminal:
        return Step.KILL if seen.seen is Seen.RUNNING else Step.NOTHING
    if seen.seen is Seen.RUNNING:
        return Step.ADOPT
    if seen.seen is Seen.NOTHING and not pod.reported_started:
        return Step.START
    if seen.seen is Seen.NEVER_RAN:
        # Its pid file is taken ("abandoned"), so that attempt can never run: a new one is the first run.
        return Step.START
    if pod.restart_policy == "Always":
        return Step.RESTART
    if seen.seen is Seen.EXITED and seen.exit_code == 0:
        return Step.DONE
    # It failed, or it cannot be located (which counts as a failure, exit code 137).
    if pod.restart_policy == "OnFailure":
        return Step.RESTART
    return Step.DONE if seen.seen is Seen.EXITED else Step.UNKNOWN


# --- records --------------------------------------------------------------------------------------------------------


def safe_name(name: str, index: int, *, init: bool = False) -> str:
    """A container's folder name: its name when that is a DNS label (as the API requires), else its index; init
    containers get the prefix "init." (a dot is in no DNS label, so no container's name can look the same)."""
    plain = name if _SAFE_NAME.fullmatch(name) and len(name) <= 63 else f"unnamed.{index}"
    return f"init.{plain}" if init else plain


class PodRecords:
    """The records of one pod (one uid) under its folder."""

    def __init__(self, pod_folder: Path, uid: str) -> None:
        self.pod_folder = pod_folder
        self.root = pod_folder / "containers" / uid
        self.uid = uid

    def begin(self, node: str, namespace: str, name: str, now: str) -> str:
        """Make the pod's folders and record its start the first time; return the recorded start."""
        log_dir = self.pod_folder.parent.parent
        private_dirs(log_dir, namespace, name, "containers", self.uid)
        private_dirs(self.pod_folder, "work")
        pod_file = self.root / "pod.json"
        recorded = read_json(pod_file)
        if recorded is not None and isinstance(recorded.get("startedAt"), str):
            return str(recorded["startedAt"])
        write_private(
            pod_file,
            json.dumps(
                {"node": node, "namespace": namespace, "name": name, "uid": self.uid, "startedAt": now}
            ),
        )
        return now

    def container(self, folder_name: str) -> ContainerRecord:
        return ContainerRecord(self.root / folder_name)

    def recorded(self, node: str | None = None) -> list[Recorded]:
        """This pod's containers, with what their latest attempts show."""
        return _recorded_pod(self.root / "pod.json", node)


class ContainerRecord:
    """The attempts of one container of one pod."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def run_dir(self, attempt: int) -> Path:
        return self.folder / str(attempt)

    def start(self, attempt: int, now: str) -> Path:
        """Record that ``attempt`` is about to start; return the folder its wrapper records into."""
        private_dirs(self.folder.parent, self.folder.name, str(attempt))
        write_private(
            self.folder / "record.json",
            json.dumps({"attempt": attempt, "state": "starting", "startedAt": now}),
        )
        return self.run_dir(attempt)

    def fail_to_start(self, attempt: int, code: int, message: str = "") -> None:
        """The attempt could not be started: take its pid file and record ``code`` as its end (with ``message``:
        a runtime's StartError, which says why)."""
        run = self.run_dir(attempt)
        _claim_or_read(run / "pid")
        if message:
            write_private(run / START_ERROR, message)
        write_private(run / "exit", f"{code}\n")

    def observe(self) -> Observation:
        """What the latest attempt shows. A "starting" record without a pid file is claimed here, so the attempt's
        wrapper, should it start after all, runs nothing."""
        record = read_json(self.folder / "record.json")
        if record is None:
            return Observation(Seen.NOTHING)
        try:
            attempt = int(record["attempt"])
        except (KeyError, TypeError, ValueError):
            return Observation(Seen.NOTHING)
        started_at = record.get("startedAt") if isinstance(record.get("startedAt"), str) else None
        run = self.run_dir(attempt)
        parsed: tuple[int, int] | None = None
        exited = _read_exit(run / "exit")
        if exited is not None:
            with contextlib.suppress(OSError):
                parsed = _parse_pid((run / "pid").read_text(encoding="utf-8").strip())
            pid, ticks = parsed if parsed is not None else (None, None)
            start_error = None
            with contextlib.suppress(OSError):
                start_error = (run / START_ERROR).read_text(encoding="utf-8")
            return Observation(
                Seen.EXITED,
                attempt,
                exited[0],
                pid,
                ticks,
                started_at=started_at,
                finished_at=exited[1],
                start_error=start_error,
            )
        text = _claim_or_read(run / "pid")
        parsed = _parse_pid(text)
        if parsed is None:
            return Observation(Seen.NEVER_RAN, attempt, started_at=started_at)
        pid, ticks = parsed
        if is_alive(pid, ticks):
            return Observation(Seen.RUNNING, attempt, pid=pid, start_ticks=ticks, started_at=started_at)
        exited = _read_exit(run / "exit")  # it may have ended since the first look
        if exited is not None:
            return Observation(
                Seen.EXITED, attempt, exited[0], pid, ticks, started_at=started_at, finished_at=exited[1]
            )
        return Observation(Seen.VANISHED, attempt, pid=pid, start_ticks=ticks, started_at=started_at)


# --- logs ---------------------------------------------------------------------------------------------------------


class Running(enum.Enum):
    STARTING = "starting"  # started, its wrapper has not recorded its pid yet
    RUNNING = "running"
    ENDED = "ended"


@dataclass(frozen=True)
class AttemptLog:
    """Where one attempt's output lies in its container's log file, and when each part of it was written."""

    path: Path  # the container's log file (every attempt appends to it)
    run_dir: Path
    start: int  # where the attempt's output begins
    end: int | None  # where the next attempt's begins; None: the output runs to the end of the file
    stamps: tuple[tuple[int, int], ...]  # (offset, unix time in ns) of each chunk the shipper wrote, in order
    started_ns: int  # when the attempt started: the time of output written before the first stamp
    stamps_read_to: int = 0  # how much of the index the stamps come from (see :func:`read_stamps`)

    def read(self, offset: int, limit: int) -> bytes:
        """Up to ``limit`` bytes of the attempt's output from ``offset`` (an offset in the log file)."""
        offset = max(offset, self.start)
        if self.end is not None:
            limit = min(limit, self.end - offset)
        if limit <= 0:
            return b""
        try:
            with self.path.open("rb") as handle:
                handle.seek(offset)
                return handle.read(limit)
        except OSError:
            return b""

    def size(self) -> int:
        """Where the attempt's output ends for now."""
        if self.end is not None:
            return self.end
        try:
            return max(self.path.stat().st_size, self.start)
        except OSError:
            return self.start

    def written_at(self, offset: int) -> int:
        """When the byte at ``offset`` was written (unix time in ns): the time of the chunk it came in."""
        index = bisect.bisect_right(self.stamps, (offset, 1 << 63)) - 1
        return self.stamps[index][1] if index >= 0 else self.started_ns

    def running(self) -> Running:
        """Whether the attempt's process runs; read-only (unlike :meth:`ContainerRecord.observe`, it never claims
        the attempt, so it may look while the kubelet starts it). An attempt another one followed has ended."""
        if self.end is not None or (self.run_dir / "exit").exists():
            return Running.ENDED
        try:
            text = (self.run_dir / "pid").read_text(encoding="utf-8")
        except FileNotFoundError:
            return Running.STARTING
        except OSError:
            return Running.ENDED
        if not text.endswith("\n"):
            return Running.STARTING
        parsed = _parse_pid(text.strip())
        if parsed is None or not is_alive(*parsed):
            return Running.ENDED
        return Running.RUNNING


def attempt_log(record: ContainerRecord, log_path: Path, previous: bool = False) -> AttemptLog | None:
    """The output of the container's latest attempt, or (``previous``) of the one before it that ran; None when
    there is no such attempt. Attempts recorded before attempts noted where their output begins read from the
    start of the file."""
    latest = _latest_attempt(record)
    if latest is None:
        return None
    attempt = latest
    if previous:
        attempt = next((a for a in range(latest - 1, 0, -1) if (record.run_dir(a) / LOG_START).exists()), 0)
        if attempt == 0:
            return None
    run = record.run_dir(attempt)
    start, started_ns = _read_offset(run / LOG_START)
    end = None
    for later in range(attempt + 1, latest + 1):
        end, _ = _read_offset(record.run_dir(later) / LOG_START)
        if end is not None:
            break
    stamps, read_to = read_stamps(run, 0)
    return AttemptLog(log_path, run, start or 0, end, stamps, started_ns or _started_ns(record), read_to)


def _latest_attempt(record: ContainerRecord) -> int | None:
    data = read_json(record.folder / "record.json")
    try:
        return int(data["attempt"]) if data is not None else None
    except (KeyError, TypeError, ValueError):
        return None


def _read_offset(path: Path) -> tuple[int | None, int | None]:
    """The offset a log-start file holds, and when it was written (ns)."""
    try:
        text = path.read_text(encoding="utf-8")
        written = path.stat().st_mtime_ns
    except OSError:
        return None, None
    try:
        return int(text.strip()), written
    except ValueError:
        return None, written


def read_stamps(run_dir: Path, offset: int) -> tuple[tuple[tuple[int, int], ...], int]:
    """The stamps of an attempt's index from byte ``offset`` on (whole lines only), and where they end."""
    try:
        with (run_dir / LOG_INDEX).open("rb") as handle:
            handle.seek(offset)
            data = handle.read()
    except OSError:
        return (), offset
    complete = data[: data.rfind(b"\n") + 1]
    stamps = []
    for line in complete.splitlines():
        parts = line.split()
        if len(parts) == 2 and all(p.isdigit() for p in parts):
            stamps.append((int(parts[0]), int(parts[1])))
    return tuple(stamps), offset + len(complete)


def _started_ns(record: ContainerRecord) -> int:
    data = read_json(record.folder / "record.json") or {}
    try:
        moment = datetime.fromisoformat(str(data.get("startedAt", "")).replace("Z", "+00:00"))
    except ValueError:
        return 0
    return int(moment.timestamp() * 1_000_000_000)


@dataclass(frozen=True)
class Recorded:
    """One container found in the records of a log folder, with what its latest attempt shows."""

    node: str
    namespace: str
    name: str
    uid: str
    container: str
    observation: Observation
    folder: Path | None = None  # the container's records

    def run_dir(self) -> Path | None:
        """The folder of the latest attempt."""
        if self.folder is None or not self.observation.attempt:
            return None
        return self.folder / str(self.observation.attempt)


def recorded(log_dir: Path, node: str | None = None) -> list[Recorded]:
    """Every container recorded under ``log_dir`` (for pods of ``node`` when given)."""
    found: list[Recorded] = []
    for pod_file in sorted(log_dir.glob("*/*/containers/*/pod.json")):
        found += _recorded_pod(pod_file, node)
    return found


def _recorded_pod(pod_file: Path, node: str | None) -> list[Recorded]:
    pod = read_json(pod_file)
    if pod is None or (node is not None and pod.get("node") != node):
        return []
    return [
        Recorded(
            str(pod.get("node", "")),
            str(pod.get("namespace", "")),
            str(pod.get("name", "")),
            str(pod.get("uid", "")),
            record_file.parent.name,
            ContainerRecord(record_file.parent).observe(),
            record_file.parent,
        )
        for record_file in sorted(pod_file.parent.glob("*/record.json"))
    ]


def kill_recorded(log_dir: Path, node: str | None = None) -> int:
    """SIGKILL the process group of every container recorded as running under ``log_dir``; return how many. For
    tearing down for good what a stopped (or SIGKILLed) ``local up`` left running: tests, scripts."""
    killed = 0
    for entry in recorded(log_dir, node):
        seen = entry.observation
        if seen.seen is Seen.RUNNING and seen.pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(seen.pid, signal.SIGKILL)
                killed += 1
    return killed


# --- processes ------------------------------------------------------------------------------------------------------


class ContainerProcess:
    """A container's wrapper process, started by this kubelet or adopted from the records, watched through a
    pidfd (so the event loop never blocks and the process need not be our child). Nothing here kills it unless
    asked: a kubelet that stops leaves it running."""

    def __init__(
        self, pid: int, start_ticks: int, pidfd: int, child: bool, run_dir: Path | None = None
    ) -> None:
        self.pid = pid
        self.run_dir = run_dir  # the attempt's records: where the main process's pid is
        self.start_ticks = start_ticks
        self._pidfd = pidfd
        self._child = child  # ours to reap
        self._future: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiters = 0
        self._reopening = asyncio.Lock()
        self.ended = False

    @classmethod
    def adopt(cls, pid: int, start_ticks: int, run_dir: Path | None = None) -> ContainerProcess | None:
        """The process ``pid`` if it still runs and is the one recorded (same start time); else None."""
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            return None
        # The pidfd pins this pid to one process: check that process is ours.
        if not is_alive(pid, start_ticks):
            os.close(pidfd)
            return None
        return cls(pid, start_ticks, pidfd, child=False, run_dir=run_dir)

    async def wait(self) -> None:
        """Until the process ends. Cancelling one waiter leaves the others (and the process) alone."""
        if self._pidfd < 0 and not self.ended:
            async with self._reopening:
                if self._pidfd < 0 and not self.ended and not await asyncio.to_thread(self._reopen):
                    self._finish()
        if self.ended:
            return
        loop = asyncio.get_running_loop()
        if self._future is None:
            self._loop = loop
            self._future = loop.create_future()
            loop.add_reader(self._pidfd, self._on_exit)
        future = self._future
        self._waiters += 1
        try:
            await asyncio.shield(future)
        finally:
            self._waiters -= 1
            if self._waiters == 0 and not self.ended:
                self._unwatch()

    def signal_group(self, signum: int) -> None:
        """Signal the process group (the wrapper, the command and whatever the command started)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signum)

    def terminate(self) -> None:
        """SIGTERM to the container's main process only, as a runtime signals a container's PID 1: its shell's
        traps run while what it started goes on. The whole group when the main process is not known yet."""
        main = main_pid(self.run_dir) if self.run_dir is not None else None
        if main is None:
            self.signal_group(signal.SIGTERM)
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            # Still in the wrapper's group (the wrapper runs, so its pid names no other group): ours.
            if os.getpgid(main) == self.pid:
                os.kill(main, signal.SIGTERM)

    def kill_leftovers(self) -> None:
        """Once the container has ended: SIGKILL what it left running in its process group, as the end of a
        container's PID 1 ends every process of its namespace. Its group outlives the wrapper only while such
        processes remain, and the kernel gives no process the pid of a group still in use, so this reaches only
        them."""
        if self.ended:
            self.signal_group(signal.SIGKILL)

    def close(self) -> None:
        """Stop watching, unless someone waits (the process goes on either way)."""
        if self._waiters == 0:
            self._unwatch()

    def _reopen(self) -> bool:
        """Watch again after nobody did for a while: the same process, if it still runs."""
        if self._pidfd >= 0:
            return True
        try:
            self._pidfd = os.pidfd_open(self.pid)
        except ProcessLookupError:
            return False
        if not self._child and not is_alive(self.pid, self.start_ticks):
            os.close(self._pidfd)
            self._pidfd = -1
            return False
        return True

    def _on_exit(self) -> None:
        self._finish()

    def _finish(self) -> None:
        self.ended = True
        if self._future is not None and not self._future.done():
            self._future.set_result(None)
        self._unwatch()
        if self._child:
            _reap(self.pid)  # it has ended: this does not block
            self._child = False

    def _unwatch(self) -> None:
        if not self.ended and self._child:
            _DETACHED.add(self.pid)
            self._child = False
        if self._future is not None and self._loop is not None and self._pidfd >= 0:
            with contextlib.suppress(ValueError, RuntimeError):
                self._loop.remove_reader(self._pidfd)
        if self._future is not None and not self._future.done():
            self._future.cancel()
        self._future = None
        if self._pidfd >= 0:
            os.close(self._pidfd)
            self._pidfd = -1


def spawn(run_dir: Path, argv: list[str], cwd: Path, env: dict[str, str], log_path: Path) -> ContainerProcess:
    """Start ``argv`` under the wrapper in a session of its own, recording into ``run_dir``, output appended to
    ``log_path`` (where this attempt's output begins is recorded first, see :func:`attempt_log`). posix_spawn, not
    subprocess.Popen: the child is left running when its kubelet stops, which a Popen object takes for a leak;
    this module reaps it."""
    for pid in list(_DETACHED):
        if _reap(pid):
            _DETACHED.discard(pid)
    log_fd = open_private(log_path, os.O_WRONLY | os.O_APPEND)
    wrapper = [str(run_dir), _mv(), str(cwd), _python(), SHIPPER, str(log_path)]
    try:
        write_private(run_dir / LOG_START, f"{os.fstat(log_fd).st_size}\n")
        with contextlib.suppress(FileExistsError):
            os.mkfifo(run_dir / "output", 0o600)
        pid = os.posix_spawn(
            "/bin/sh",
            ["/bin/sh", "-c", WRAPPER, WRAPPER_NAME, *wrapper, *argv],
            env,
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_DUP2, log_fd, 1),
                (os.POSIX_SPAWN_DUP2, log_fd, 2),
            ],
            setsid=True,
            # As subprocess does: Python ignores these, and an ignored signal would stay ignored in the command.
            setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
        )
    finally:
        os.close(log_fd)
    pidfd = os.pidfd_open(pid)  # our child, not reaped yet: the pid cannot have been reused
    stat = _proc_stat(pid)
    return ContainerProcess(pid, stat[1] if stat else 0, pidfd, child=True, run_dir=run_dir)


def _reap(pid: int) -> bool:
    """Reap our child ``pid`` if it has ended; whether it is gone."""
    try:
        reaped, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return reaped == pid


async def stop_processes(processes: Iterable[ContainerProcess], grace: float) -> None:
    """SIGTERM each container's main process, wait up to ``grace`` seconds for them to end, SIGKILL the process
    groups of those left."""
    running = [p for p in processes if not p.ended]
    if not running:
        return
    for process in running:
        process.terminate()
    waits = [asyncio.ensure_future(p.wait()) for p in running]
    try:
        _, pending = await asyncio.wait(waits, timeout=max(grace, 0.0))
        for process in running:
            if not process.ended:
                process.signal_group(signal.SIGKILL)
        if pending:
            await asyncio.wait(pending)
        for process in running:
            process.kill_leftovers()
    finally:
        for wait in waits:
            wait.cancel()


# --- files ----------------------------------------------------------------------------------------------------------


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def is_alive(pid: int, start_ticks: int) -> bool:
    """Whether ``pid`` runs (not a zombie) and started at ``start_ticks`` (field 22 of /proc/<pid>/stat)."""
    stat = _proc_stat(pid)
    return stat is not None and stat[1] == start_ticks and stat[0] not in ("Z", "X")


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks since boot) of ``pid``, or None when there is no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()
    try:
        return fields[0], int(fields[19])  # fields 3 and 22 of proc(5)
    except (IndexError, ValueError):
        return None


def _claim_or_read(path: Path) -> str | None:
    """The pid file's complete line; when there is none, take the file ("abandoned") before a wrapper can.
    None when it stays half-written (its wrapper died writing it, before running anything)."""
    deadline = time.monotonic() + _PID_WRITE_WAIT
    while True:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                continue  # the wrapper came first: read what it wrote
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(f"{ABANDONED}\n")
            return ABANDONED
        if text.endswith("\n"):
            return text.strip()
        if time.monotonic() > deadline:
            return None
        time.sleep(0.01)  # in a worker thread: the wrapper is between creating the file and writing its line


def main_pid(run_dir: Path) -> int | None:
    """The command's pid, as its wrapper recorded it (None before it did)."""
    try:
        text = (run_dir / MAIN).read_text(encoding="utf-8")
    except OSError:
        return None
    return int(text) if text.endswith("\n") and text.strip().isdigit() else None


def _parse_pid(text: str | None) -> tuple[int, int] | None:
    if text is None or text == ABANDONED:
        return None
    try:
        pid, ticks = (int(part) for part in text.split())
    except ValueError:
        return None
    return (pid, ticks) if pid > 0 else None


def _read_exit(path: Path) -> tuple[int, datetime] | None:
    try:
        text = path.read_text(encoding="utf-8")
        finished = datetime.fromtimestamp(path.stat().st_mtime, UTC)
    except OSError:
        return None
    try:
        return int(text.strip()), finished
    except ValueError:
        return None


@functools.cache
def _mv() -> str:
    return shutil.which("mv") or "/bin/mv"


def _python() -> str:
    """The interpreter that runs log shippers: this one (none: the wrapper then logs unstamped)."""
    return sys.executable if os.path.isabs(sys.executable) else ""
