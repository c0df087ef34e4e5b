"""The volumes of the process kubelet's pods: what each ``volumeMount`` of a container is, made ready on disk, and
seen by the container's process at its ``mountPath``.

Sources: ``emptyDir`` is a folder under the pod's folder (``volumes/<pod uid>/<volume>``), kept across restarts
of the pod's containers and removed when the pod ends or goes; ``hostPath`` is the host's path itself, checked
(and made) as its ``type`` says; ``configMap``, ``secret``, ``downwardAPI`` and ``projected`` (the service
account volume ``kube-api-access-*`` that an upstream API server adds) are files written from the API objects
into a folder of the pod. Any other type cannot be provided: the container does not start (:class:`VolumeError`,
which the kubelet reports as a StartError), it never runs with a volume missing.

How the process sees them: its command runs under ``unshare --mount --propagation private``, whose first step
(:data:`MOUNT_SCRIPT`) bind-mounts each source at its mount path, read-only where asked, then execs the command,
so the recorded pid stays the command's and nothing is mounted on the host. A bind mount needs its mount point to
exist. One that does not exist on the host (``/data``) is made on the host before the container starts, as an
empty folder (or file), and removed once no pod uses it (:func:`release`; a registry under ``/run/multiqueue``
counts the pods of every kubelet of the host). Hiding the nearest
existing parent instead (a tmpfs, or an overlay over ``/``) would hide what lies there (``/proc``, ``/dev``,
``/tmp`` and every other mount are not part of an overlay of ``/``), which commands need; an empty folder that
lives as long as the pod is what the host sees of it. A mount path inside another volume is made in that volume.

The functions that are not pure do blocking file I/O: the kubelet calls them through ``asyncio.to_thread``.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import fcntl
import functools
import json
import os
import shutil
import stat
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import Final

from multiqueue.api.meta import as_dict, as_list
from multiqueue.api.types import Obj

SERVICE_ACCOUNT_PATH: Final = "/var/run/secrets/kubernetes.io/serviceaccount"
# Run by the host's sh inside the private mount namespace: "<source> <target> <rw|ro>" triples, "--", the command.
MOUNT_SCRIPT: Final = """while [ "$1" != -- ]; do
  mount --rbind "$1" "$2" || { echo "cannot mount $1 at $2" >&2; exit 128; }
  if [ "$3" = ro ]; then
    mount -o remount,bind,ro "$2" || { echo "cannot make $2 read-only" >&2; exit 128; }
  fi
  shift 3
done
shift
exec "$@"
"""
_HANDLED: Final = ("emptyDir", "hostPath", "configMap", "secret", "downwardAPI", "projected")
_CREATED_FILE: Final = "mountpoints.json"


class VolumeError(Exception):
    """A volume of the container cannot be provided: the container must not start."""


@dataclasses.dataclass(frozen=True)
class Mount:
    source: Path
    target: str  # the mountPath
    read_only: bool = False


@dataclasses.dataclass(frozen=True)
class Sources:
    """The API objects a pod's volumes read, fetched by the kubelet: ``(kind, name) -> data`` (None: not found)."""

    objects: Mapping[tuple[str, str], Mapping[str, bytes] | None]
    namespace: str
    token: str = ""  # a service account token, when one could be had


def referenced(pod: Obj) -> set[tuple[str, str]]:
    """The ConfigMaps and Secrets the pod's volumes read: ``("configmap"|"secret", name)``."""
    found: set[tuple[str, str]] = set()
    for volume in (as_dict(v) for v in as_list(as_dict(pod.get("spec")).get("volumes"))):
        entries = [volume] + [as_dict(s) for s in as_list(as_dict(volume.get("projected")).get("sources"))]
        for entry in entries:
            if entry.get("configMap"):
                found.add(("configmap", str(as_dict(entry["configMap"]).get("name", ""))))
            if entry.get("secret"):
                secret = as_dict(entry["secret"])
                found.add(("secret", str(secret.get("secretName") or secret.get("name") or "")))
    return found


def decode(kind: str, obj: Obj) -> dict[str, bytes]:
    """The files a ConfigMap or Secret gives: its keys and their bytes."""
    files: dict[str, bytes] = {}
    if kind == "secret":
        for key, value in as_dict(obj.get("data")).items():
            with contextlib.suppress(ValueError):
                files[key] = base64.b64decode(str(value), validate=True)
        for key, value in as_dict(obj.get("stringData")).items():
            files[key] = str(value).encode()
        return files
    for key, value in as_dict(obj.get("data")).items():
        files[key] = str(value).encode()
    for key, value in as_dict(obj.get("binaryData")).items():
        with contextlib.suppress(ValueError):
            files[key] = base64.b64decode(str(value), validate=True)
    return files


def pod_volumes_dir(pod_folder: Path, uid: str) -> Path:
    return pod_folder / "volumes" / uid


def needs_mounts(pod: Obj, container: Obj) -> bool:
    return bool(as_list(container.get("volumeMounts"))) and bool(
        as_list(as_dict(pod.get("spec")).get("volumes"))
    )


def only_service_account(pod: Obj, container: Obj) -> bool:
    """Whether the container mounts nothing but the service-account volume an upstream API server's admission adds
    (``kube-api-access-*``, projected, at :data:`SERVICE_ACCOUNT_PATH`): a volume the pod's author did not ask for,
    which a host that cannot make a mount namespace (not root) leaves out rather than fail every pod."""
    volumes = {
        str(as_dict(v).get("name")): as_dict(v) for v in as_list(as_dict(pod.get("spec")).get("volumes"))
    }
    mounts = [as_dict(m) for m in as_list(container.get("volumeMounts"))]
    return bool(mounts) and all(
        str(m.get("name", "")).startswith("kube-api-access-")
        and m.get("mountPath") == SERVICE_ACCOUNT_PATH
        and "projected" in volumes.get(str(m.get("name")), {})
        for m in mounts
    )


def wrap(mounts: list[Mount], argv: list[str], sh: str = "/bin/sh") -> list[str]:
    """The argv that runs ``argv`` with ``mounts`` in a private mount namespace (as is, without mounts)."""
    if not mounts:
        return argv
    triples = [part for m in mounts for part in (str(m.source), m.target, "ro" if m.read_only else "rw")]
    unshare = shutil.which("unshare") or "unshare"
    return [unshare, "--mount", "--propagation", "private", "--", sh, "-c", MOUNT_SCRIPT, "multiqueue-mounts",
            *triples, "--", *argv]  # fmt: skip


@functools.cache
def namespace_error() -> str | None:
    """Why no private mount namespace can be made here (not root, no user namespaces, no unshare); None: it can."""
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return (
            "the local kubelet mounts volumes with unshare(1) and mount(8), and this host lacks one of them"
        )
    try:
        done = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "true"],
            capture_output=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot make a private mount namespace for the pod's volumes: {exc}"
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip()
        return f"cannot make a private mount namespace for the pod's volumes (root is needed): {why}"
    return None


# --- making the volumes ready ----------------------------------------------------------------------------------


def prepare(
    pod: Obj, container: Obj, pod_folder: Path, sources: Sources, field: Callable[[str], str | None]
) -> list[Mount]:
    """The container's mounts, each source ready (folders made, files written, hostPath types checked) and each
    mount point present; :class:`VolumeError` when one cannot be. ``field`` gives a downward-API fieldPath's value.
    Mount points made on the host are recorded for :func:`release`."""
    spec = as_dict(pod.get("spec"))
    uid = str(as_dict(pod.get("metadata")).get("uid"))
    volumes = {str(as_dict(v).get("name")): as_dict(v) for v in as_list(spec.get("volumes"))}
    base = pod_volumes_dir(pod_folder, uid)
    mounts: list[Mount] = []
    for item in (as_dict(m) for m in as_list(container.get("volumeMounts"))):
        name = str(item.get("name"))
        volume = volumes.get(name)
        if volume is None:
            raise VolumeError(f'volume "{name}" is mounted but the pod has no such volume')
        source = _source(volume, base / name, sources, field)
        sub = str(item.get("subPath") or "")
        if sub:
            relative = PurePosixPath(sub)
            if relative.is_absolute() or ".." in relative.parts:
                raise VolumeError(
                    f'volume "{name}": subPath "{sub}" must be a relative path inside the volume'
                )
            source = source / relative
            if not source.exists():
                source.mkdir(mode=0o777, parents=True)
        target = str(item.get("mountPath") or "")
        if not target.startswith("/"):
            raise VolumeError(f'volume "{name}": mountPath "{target}" is not an absolute path')
        mounts.append(Mount(source, target, bool(item.get("readOnly")) or _read_only_source(volume)))
    mounts.sort(key=lambda m: len(PurePosixPath(m.target).parts))
    _make_mount_points(mounts, base, uid)
    # A mount on itself changes nothing the process sees (a hostPath at its own path).
    return [m for m in mounts if not (str(m.source) == m.target and not m.read_only)]


def _read_only_source(volume: Obj) -> bool:
    return any(volume.get(k) for k in ("configMap", "secret", "downwardAPI", "projected"))


def _source(volume: Obj, folder: Path, sources: Sources, field: Callable[[str], str | None]) -> Path:
    name = str(volume.get("name"))
    kinds = [k for k in volume if k != "name"]
    if "emptyDir" in volume:
        if not folder.is_dir():
            folder.mkdir(mode=0o777, parents=True)
            folder.chmod(0o777)
        return folder
    if "hostPath" in volume:
        return check_host_path(name, as_dict(volume["hostPath"]))
    if any(k in volume for k in ("configMap", "secret", "downwardAPI", "projected")):
        _write_files(folder, _files_of(volume, sources, field))
        return folder
    kind = kinds[0] if kinds else "none"
    raise VolumeError(
        f'volume "{name}": the local kubelet cannot provide volumes of type {kind} '
        f"(it provides {', '.join(_HANDLED)})"
    )


_HOST_TYPES: Final[dict[str, tuple[Callable[[int], bool], str]]] = {
    "Directory": (stat.S_ISDIR, "a directory"),
    "File": (stat.S_ISREG, "a file"),
    "Socket": (stat.S_ISSOCK, "a socket"),
    "CharDevice": (stat.S_ISCHR, "a character device"),
    "BlockDevice": (stat.S_ISBLK, "a block device"),
}


def check_host_path(name: str, host_path: Obj) -> Path:
    """The hostPath's path, made when its type says ...OrCreate and checked against its type."""
    path = Path(str(host_path.get("path") or ""))
    kind = str(host_path.get("type") or "")
    if not path.is_absolute():
        raise VolumeError(f'volume "{name}": hostPath "{path}" is not an absolute path')
    if kind == "DirectoryOrCreate" and not path.exists():
        path.mkdir(mode=0o755, parents=True)
    elif kind == "FileOrCreate" and not path.exists():
        if not path.parent.is_dir():
            raise VolumeError(f'volume "{name}": hostPath type check failed: {path.parent} does not exist')
        path.touch(mode=0o644)
    check = _HOST_TYPES.get(kind.removesuffix("OrCreate"))
    if check is not None:
        try:
            mode = path.stat().st_mode
        except OSError:
            raise VolumeError(f'volume "{name}": hostPath type check failed: {path} does not exist') from None
        if not check[0](mode):
            raise VolumeError(f'volume "{name}": hostPath type check failed: {path} is not {check[1]}')
    elif kind not in ("", "DirectoryOrCreate", "FileOrCreate"):
        raise VolumeError(f'volume "{name}": hostPath type "{kind}" is not one the API knows')
    if not path.exists():
        raise VolumeError(f'volume "{name}": hostPath {path} does not exist')
    return path


def _files_of(volume: Obj, sources: Sources, field: Callable[[str], str | None]) -> dict[str, bytes]:
    """The files of a configMap, secret, downwardAPI or projected volume: relative path -> content."""
    name = str(volume.get("name"))
    if "projected" in volume:
        parts = [as_dict(s) for s in as_list(as_dict(volume["projected"]).get("sources"))]
    else:
        parts = [volume]
    files: dict[str, bytes] = {}
    for part in parts:
        if part.get("configMap") or part.get("secret"):
            kind = "configmap" if part.get("configMap") else "secret"
            ref = as_dict(part.get("configMap") or part.get("secret"))
            obj_name = str(ref.get("secretName") or ref.get("name") or "")
            data = sources.objects.get((kind, obj_name))
            if data is None:
                if ref.get("optional"):
                    continue
                raise VolumeError(f'volume "{name}": {kind} "{obj_name}" not found')
            items = [as_dict(i) for i in as_list(ref.get("items"))]
            if not items:
                files.update(data)
            for item in items:
                key = str(item.get("key"))
                if key in data:
                    files[str(item.get("path") or key)] = data[key]
                elif not ref.get("optional"):
                    raise VolumeError(f'volume "{name}": {kind} "{obj_name}" has no key "{key}"')
        if part.get("downwardAPI"):
            for item in (as_dict(i) for i in as_list(as_dict(part["downwardAPI"]).get("items"))):
                path = str(as_dict(item.get("fieldRef")).get("fieldPath", ""))
                value = field(path)
                if value is None:
                    raise VolumeError(f'volume "{name}": the local kubelet cannot give the field "{path}"')
                files[str(item.get("path"))] = value.encode()
        if part.get("serviceAccountToken"):
            token = as_dict(part["serviceAccountToken"])
            files[str(token.get("path") or "token")] = sources.token.encode()
    return files


def _write_files(folder: Path, files: Mapping[str, bytes]) -> None:
    folder.mkdir(mode=0o755, parents=True, exist_ok=True)
    for relative, content in files.items():
        path = PurePosixPath(relative)
        if path.is_absolute() or ".." in path.parts:
            raise VolumeError(f'volume file "{relative}" must be a relative path inside the volume')
        target = folder / path
        target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        temporary = target.with_name(f".{target.name}.tmp")
        temporary.write_bytes(content)
        temporary.chmod(0o644)
        temporary.replace(target)


# --- mount points on the host ------------------------------------------------------------------------------------

_LOCK: Final = threading.Lock()
# Which pods use each mount point a kubelet made on the host, shared by every kubelet of the host (several
# ``local up`` or test processes may run pods with the same mount path): a mount point is removed only when no
# pod uses it, for removing a folder another pod's namespace has a mount on would take that mount away.
REGISTRY: Final = Path("/run/multiqueue/mount-points.json")


@contextlib.contextmanager
def _users() -> Iterator[dict[str, set[str]]]:
    """The registry of mount points and the pods that use them, locked (threads and processes) while held; what
    the caller changes is written back."""
    registry = _registry()
    with _LOCK:
        fd = os.open(registry, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            with os.fdopen(os.dup(fd), "r", encoding="utf-8") as handle:
                text = handle.read()
            try:
                data = json.loads(text) if text else {}
            except ValueError:
                data = {}
            users = {str(k): {str(u) for u in v} for k, v in data.items() if isinstance(v, list)}
            try:
                yield users
            finally:  # also when making a mount point failed part way: what was made is recorded
                kept = {k: sorted(v) for k, v in users.items() if os.path.lexists(k)}
                os.ftruncate(fd, 0)
                os.pwrite(fd, json.dumps(kept).encode(), 0)
        finally:
            os.close(fd)


@functools.cache
def _registry() -> Path:
    """Where the registry is: under /run (root), else in the temporary folder of this user."""
    for folder in (REGISTRY.parent, Path(tempfile.gettempdir()) / f"multiqueue-{os.getuid()}"):
        with contextlib.suppress(OSError):
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            if os.access(folder, os.W_OK):
                return folder / REGISTRY.name
    raise VolumeError("no folder to keep the registry of mount points in")


def _make_mount_points(mounts: list[Mount], base: Path, uid: str) -> None:
    made: list[str] = []
    try:
        _register_mount_points(mounts, uid, made)
    finally:
        if made:
            record = base / _CREATED_FILE
            before = _read_made(record)
            base.mkdir(mode=0o700, parents=True, exist_ok=True)
            record.write_text(json.dumps(before + [p for p in made if p not in before]))


def _register_mount_points(mounts: list[Mount], uid: str, made: list[str]) -> None:
    with _users() as users:
        for index, mount in enumerate(mounts):
            file = mount.source.is_file()
            inner = next((m for m in reversed(mounts[:index]) if _under(mount.target, m.target)), None)
            if inner is not None:
                # Inside another volume: the mount point is made there, the host never sees it.
                relative = PurePosixPath(mount.target).relative_to(inner.target)
                _make(Path(inner.source) / relative, file, [])
                continue
            for created in _make(Path(mount.target), file, made):
                users.setdefault(created, set())
            for path, using in users.items():
                if _under(mount.target, path) or mount.target == path:
                    using.add(uid)


def _make(target: Path, file: bool, made: list[str]) -> list[str]:
    """Make ``target`` (a folder, or an empty file) and the folders above it that are missing; what was made."""
    missing = [p for p in [*reversed(target.parents), target] if not os.path.lexists(p)]
    created: list[str] = []
    try:
        for path in missing:
            if path == target and file:
                path.touch(mode=0o644)
            else:
                path.mkdir(mode=0o755)
            created.append(str(path))
    except OSError as exc:
        raise VolumeError(f"cannot make the mount point {target}: {exc.strerror}") from None
    finally:
        made.extend(created)
    return created


def _under(path: str, parent: str) -> bool:
    return PurePosixPath(path).is_relative_to(parent) and path != parent


def _read_made(record: Path) -> list[str]:
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [str(p) for p in data] if isinstance(data, list) else []


def release(pod_folder: Path, uid: str, *, keep_volumes: bool = False) -> None:
    """The pod has ended or gone: remove the mount points made on the host for it that no other pod uses (only
    while they are empty: what is inside is never ours), and (unless ``keep_volumes``) its emptyDir and file
    volumes."""
    base = pod_volumes_dir(pod_folder, uid)
    record = base / _CREATED_FILE
    made = _read_made(record)
    with _users() as users:
        candidates = set(made)
        for path, using in users.items():
            if uid in using:
                using.discard(uid)
                candidates.add(path)
        # Deepest first, so that a folder made above another is empty when its turn comes.
        for path in sorted(candidates, key=lambda p: len(PurePosixPath(p).parts), reverse=True):
            if users.get(path):
                continue
            users.pop(path, None)
            with contextlib.suppress(OSError):
                if os.path.isdir(path) and not os.path.islink(path):
                    os.rmdir(path)
                elif os.path.isfile(path) and os.path.getsize(path) == 0:
                    os.unlink(path)
        with contextlib.suppress(OSError):
            record.unlink()
    if not keep_volumes:
        shutil.rmtree(base, ignore_errors=True)
