"""Files of a local cluster that only their owner may read (tokens, keys, kubeconfigs, container records)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_private(path: Path, data: str | bytes) -> None:
    """Write atomically (a temporary file renamed over the old one), mode 0600, making missing folders 0700:
    a reader never sees half a file, and nobody else sees it at all."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # mkstemp makes it 0600
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
