"""Real processes for end-to-end fault tests: started in their own process group, their output kept in a log
file and watched line by line, killed (group and all) whatever happens to the test.

Pods of the local kubelet's ``process`` mode run in sessions of their own, so killing ``multiqueue local up``
leaves them running; :func:`kill_processes_under` finds them by their working directory (the kubelet gives each
pod one under the state directory) and ends their process groups.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# How long the output of a killed process may still take to drain.
READER_GRACE = 5.0


class ProcessExited(AssertionError):
    """The process ended while the test waited for it to say something."""


class Spawned:
    """One subprocess in a new session (its own process group), its stdout and stderr teed into ``log``."""

    def __init__(self, name: str, argv: Sequence[str], log: Path, cwd: Path = REPO) -> None:
        self.name = name
        self.argv = list(argv)
        self.log = log
        self.cwd = cwd
        self.process: asyncio.subprocess.Process | None = None
        self.lines: list[str] = []  # everything this run printed so far
        self._reader: asyncio.Task[None] | None = None
        self._printed = asyncio.Event()

    @classmethod
    def python(cls, name: str, args: Sequence[str], log: Path, cwd: Path = REPO) -> Spawned:
        """``python -m ...`` with this interpreter."""
        return cls(name, [sys.executable, *args], log, cwd)

    @property
    def pid(self) -> int:
        assert self.process is not None, f"{self.name} was never started"
        return self.process.pid

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None

    async def start(self) -> None:
        assert not self.running, f"{self.name} is already running"
        self.lines = []
        self.process = await asyncio.create_subprocess_exec(
            *self.argv,
            cwd=str(self.cwd),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self._reader = asyncio.create_task(self._read(self.process), name=f"output of {self.name}")

    async def _read(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        with self.log.open("a", encoding="utf-8") as log:
            log.write(f"--- {self.name} (pid {process.pid}): {' '.join(self.argv)}\n")
            log.flush()
            while line := await process.stdout.readline():
                text = line.decode(errors="replace").rstrip("\n")
                self.lines.append(text)
                log.write(text + "\n")
                log.flush()
                self._printed.set()
            await process.wait()
            log.write(f"--- {self.name} (pid {process.pid}) exited with {process.returncode}\n")
        self._printed.set()

    async def wait_for_line(self, pattern: str, within: float) -> re.Match[str]:
        """The first line of this run matching ``pattern``, waiting for it as it is printed."""
        expression = re.compile(pattern)
        seen = 0
        async with asyncio.timeout(within):
            while True:
                self._printed.clear()
                for line in self.lines[seen:]:
                    if (found := expression.search(line)) is not None:
                        return found
                seen = len(self.lines)
                if self._reader is None or self._reader.done():
                    raise ProcessExited(
                        f"{self.name} exited ({self.process and self.process.returncode}) before printing "
                        f"{pattern!r}; its last lines:\n" + "\n".join(self.lines[-30:])
                    )
                await self._printed.wait()

    def signal(self, signum: signal.Signals) -> None:
        """Send ``signum`` to the process itself."""
        assert self.running, f"{self.name} is not running"
        os.kill(self.pid, signum)

    async def kill_group(self) -> None:
        """SIGKILL the whole process group (a crash: nothing runs its shutdown code) and reap the process."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        await self.process.wait()
        if self._reader is not None:
            # A child that kept our pipe open would hold the reader forever; its output is not needed.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._reader), READER_GRACE)
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader


def pids_under(folder: Path) -> list[int]:
    """Processes whose working directory is ``folder`` or below it."""
    root = str(folder.resolve())
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if cwd == root or cwd.startswith(root + os.sep):
            found.append(int(entry.name))
    return found


def _start_ticks(pid: int) -> str | None:
    """When ``pid`` started (field 22 of /proc/PID/stat), to tell it from a later process with the same pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else None


def recorded_pids(folder: Path) -> list[int]:
    """Live processes named by the files called ``pid`` under ``folder`` ("PID [START-TICKS]", as the local
    kubelet records its containers); a pid whose start time differs belongs to someone else now."""
    found = []
    for path in folder.rglob("pid"):
        try:
            words = path.read_text().split()
            pid = int(words[0])
        except (OSError, ValueError, IndexError):
            continue
        started = _start_ticks(pid)
        if started is not None and (len(words) < 2 or words[1] == started):
            found.append(pid)
    return found


def kill_processes_under(folder: Path) -> list[int]:
    """SIGKILL the process group of every process working under ``folder`` or recorded in a pid file there (pods
    of the local kubelet); the pids found. The test's own process group is never touched."""
    own = os.getpgrp()
    found = sorted(set(pids_under(folder)) | set(recorded_pids(folder) if folder.exists() else []))
    for pid in found:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            group = os.getpgid(pid)
            if group != own:
                os.killpg(group, signal.SIGKILL)
                continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return found
