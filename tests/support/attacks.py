"""Requests built to hurt an API server rather than use it: a small JSON patch whose copy operations double a value
25 times, bodies nested far past any object's depth. Shared by the robustness test that checks each is refused
cheaply and the benchmark that measures what they cost other clients."""

from __future__ import annotations

import base64
import dataclasses
import json
import ssl
import tempfile
from pathlib import Path
from typing import Any, Final

import aiohttp
import yaml

CONFIGMAPS_PATH: Final = "/api/v1/namespaces/default/configmaps"
TARGET: Final = "target"  # the ConfigMap the patches aim at


@dataclasses.dataclass(frozen=True)
class Attack:
    name: str
    method: str
    path: str
    content_type: str
    body: bytes
    refused_with: int  # what kube-apiserver's bounds answer


def _doubling_patch(copies: int = 25) -> bytes:
    """An array, then ``copies`` operations each appending the whole array to itself: 2**copies times the value,
    from a body of about a kilobyte."""
    ops: list[dict[str, Any]] = [{"op": "add", "path": "/x", "value": ["y" * 64]}]
    ops += [{"op": "copy", "from": "/x", "path": "/x/-"} for _ in range(copies)]
    return json.dumps(ops, separators=(",", ":")).encode()


def _nested(depth: int, key: str) -> bytes:
    """A ConfigMap whose field ``key`` nests arrays ``depth`` deep."""
    return b'{"metadata":{"name":"deep"},"%s":%s%s}' % (key.encode(), b"[" * depth, b"]" * depth)


ATTACKS: Final = (
    Attack(
        "patch-amplification",
        "PATCH",
        f"{CONFIGMAPS_PATH}/{TARGET}",
        "application/json-patch+json",
        _doubling_patch(),
        422,
    ),
    Attack("deep-create", "POST", CONFIGMAPS_PATH, "application/json", _nested(100_000, "x"), 400),
    Attack("deep-labels", "POST", CONFIGMAPS_PATH, "application/json", _nested(5_000, "labels"), 400),
    Attack(
        "deep-merge-patch",
        "PATCH",
        f"{CONFIGMAPS_PATH}/{TARGET}",
        "application/merge-patch+json",
        b'{"x":' + b"[" * 50_000 + b"]" * 50_000 + b"}",
        400,
    ),
)


def rss_mb(pid: int) -> float:
    """The resident memory of process ``pid``, in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


def session_for(kubeconfig: Path, cluster: str) -> tuple[aiohttp.ClientSession, str]:
    """A plain HTTP session that speaks to ``cluster`` as its kubeconfig says (CA, bearer token), and its URL;
    attacks are raw bytes, which no client library sends as they are."""
    config = yaml.safe_load(kubeconfig.read_text())
    entry = next(c["cluster"] for c in config["clusters"] if c["name"] == cluster)
    user = next(u["user"] for u in config["users"] if u["name"] == cluster)
    context = ssl.create_default_context()
    if "certificate-authority-data" in entry:
        with tempfile.NamedTemporaryFile("wb", suffix=".crt") as ca:
            ca.write(base64.b64decode(entry["certificate-authority-data"]))
            ca.flush()
            context.load_verify_locations(ca.name)
    elif "certificate-authority" in entry:
        context.load_verify_locations(entry["certificate-authority"])
    token = user.get("token") or Path(user["tokenFile"]).read_text().strip()
    session = aiohttp.ClientSession(
        headers={"Authorization": f"Bearer {token}"}, connector=aiohttp.TCPConnector(ssl=context)
    )
    return session, str(entry["server"])


async def send(session: aiohttp.ClientSession, server: str, attack: Attack) -> int:
    headers = {"Content-Type": attack.content_type}
    async with session.request(
        attack.method, server + attack.path, data=attack.body, headers=headers
    ) as answer:
        await answer.read()
        return answer.status
