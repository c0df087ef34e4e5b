"""Files of a local cluster that only their owner may read (tokens, keys, kubeconfigs, pod logs, container records).

Modes are set explicitly, whatever the umask, and put right on files and folders an older version left open: every
folder under the state directory is 0700, every file 0600.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

FOLDER_MODE = 0o700
FILE_MODE = 0o600


def private_dirs(base: Path, *parts: str) -> Path:
    """``base/parts...``, with ``base`` and each level below it a folder only its owner may enter (missing folders
    above ``base`` are made so too)."""
    for missing in reversed([p for p in base.parents if not p.exists()]):
        _private_dir(missing)
    path = _private_dir(base)
    for part in parts:
        path = _private_dir(path / part)
    return path


def _private_dir(path: Path) -> Path:
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=FOLDER_MODE)
    path.chmod(FOLDER_MODE)
    return path


def open_private(path: Path, flags: int) -> int:
    """``os.open`` of ``path`` (made if missing) with mode 0600, also when it existed with another mode."""
    fd = os.open(path, flags | os.O_CREAT, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_private(path: Path, data: str | bytes) -> None:
    """Write atomically (a temporary file renamed over the old one), mode 0600, in a folder made 0700: a reader
    never sees half a file, and nobody else sees it at all."""
    private_dirs(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), FILE_MODE)
            handle.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
