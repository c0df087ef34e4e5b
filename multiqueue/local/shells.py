"""What the process kubelet runs for a container's command: the argv it execs, or why it cannot run one.

A container image's ``sh`` is most often busybox's ash or bash, both of which know ``[[ ... ]]`` and signal names
such as ``SIGTERM`` in ``trap``. The host's ``/bin/sh`` may be dash, which knows neither: a script written for an
image would fail here at its first ``[[`` or stop at a "bad trap" (so a container meant to handle SIGTERM dies at
once). A command that starts with one of the shells an image provides therefore runs under the host's bash,
invoked as ``bash`` (not as ``sh``, which would switch it to POSIX mode), and under the host's ``sh`` only when
there is no bash. The image itself is never used, so a container without a ``command`` cannot run, except the
pause image, whose only behaviour (sleep until stopped, exit 0 on SIGTERM) is reproduced here.

Pure: the caller passes where bash is (:func:`host_bash`, which looks once).
"""

from __future__ import annotations

import dataclasses
import functools
import re
import shutil
from typing import Final

from multiqueue.api.meta import as_list
from multiqueue.api.types import Obj

# The names under which images provide a POSIX shell (busybox ash, bash) that is more than dash.
IMAGE_SHELLS: Final = frozenset(
    {"sh", "/bin/sh", "/usr/bin/sh", "ash", "/bin/ash", "bash", "/bin/bash", "/usr/bin/bash"}
)
# Any registry, any tag or digest: registry.k8s.io/pause:3.10, k8s.gcr.io/pause, pause@sha256:...
_PAUSE: Final = re.compile(r"(?:[^@]*/)?pause(?::[\w][\w.-]*)?(?:@\S+)?")
# The pause container: sleeps until SIGTERM or SIGINT, then exits 0 (its sleep goes with it).
PAUSE_SCRIPT: Final = "trap 'kill $! 2>/dev/null; exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"
NO_COMMAND: Final = (
    "the local kubelet runs a container's command, not its image, and container {name!r} (image {image!r}) "
    "has no command"
)


@dataclasses.dataclass(frozen=True)
class Launch:
    """What to exec for a container: ``argv``, or ``error`` (the message of a container that cannot start)."""

    argv: tuple[str, ...] = ()
    error: str = ""


def is_pause_image(image: str) -> bool:
    return _PAUSE.fullmatch(image.strip()) is not None


def with_shell(argv: list[str], bash: str | None) -> list[str]:
    """``argv`` with an image shell at its head replaced by bash (when there is one)."""
    if argv and bash and argv[0] in IMAGE_SHELLS:
        return [bash, *argv[1:]]
    return argv


def launch(container: Obj, bash: str | None) -> Launch:
    """How the kubelet runs ``container``: its ``command`` + ``args`` (an image shell run by bash); the pause
    image's sleep; or, for any other container without a command, an error (a runtime's StartError)."""
    command = [str(a) for a in as_list(container.get("command"))]
    args = [str(a) for a in as_list(container.get("args"))]
    image = str(container.get("image") or "")
    if not command:
        if is_pause_image(image):
            return Launch(tuple(with_shell(["sh", "-c", PAUSE_SCRIPT], bash)))
        return Launch(error=NO_COMMAND.format(name=str(container.get("name")), image=image))
    return Launch(tuple(with_shell(command + args, bash)))


@functools.cache
def host_bash() -> str | None:
    """The host's bash, looked up once (None: the host's ``sh`` runs image shells)."""
    return shutil.which("bash")
