"""Local API servers for tests: in the test's own event loop, or in a thread for blocking clients and kubectl."""

from __future__ import annotations

import asyncio
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from multiqueue.apiserver.server import ApiServer, ServerConfig
from multiqueue.local.certs import serving_cert


def server_config(state_dir: Path | None, **overrides: Any) -> ServerConfig:
    defaults: dict[str, Any] = {"name": "test", "token": secrets.token_urlsafe(16), "state_dir": state_dir}
    defaults.update(overrides)
    return ServerConfig(**defaults)


def tls_config(state_dir: Path, name: str) -> dict[str, Any]:
    """ServerConfig arguments for HTTPS with a CA made in ``state_dir`` (kubectl needs TLS to send tokens)."""
    tls = serving_cert(state_dir, name, "127.0.0.1")
    return {"tls_cert_file": tls.cert_file, "tls_key_file": tls.key_file, "ca_file": tls.ca_file}


def _cluster_entry(server: ApiServer) -> dict[str, Any]:
    entry: dict[str, Any] = {"server": server.url}
    if server.config.tls_cert_file is not None:
        entry["certificate-authority"] = str(server.config.tls_cert_file.parent.parent / "ca.crt")
    return entry


def write_kubeconfig(path: Path, servers: dict[str, ApiServer], current: str | None = None) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": _cluster_entry(s)} for n, s in servers.items()],
        "users": [{"name": n, "user": {"token": s.config.token}} for n, s in servers.items()],
        "contexts": [{"name": n, "context": {"cluster": n, "user": n}} for n in servers],
        "current-context": current or next(iter(servers)),
    }
    path.write_text(yaml.safe_dump(config))
    return path


class ThreadedServer:
    """An ApiServer running on its own event loop in a daemon thread."""

    def __init__(self, config: ServerConfig) -> None:
        self.server = ApiServer(config)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="apiserver", daemon=True)

    def start(self) -> None:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self._loop).result(timeout=30)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._loop.close()

    def call(self, coro: Any, timeout: float = 30) -> Any:
        """Run a coroutine on the server's loop (for checks that need its internals) and wait for it."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=timeout)


@contextmanager
def threaded_server(state_dir: Path | None, **overrides: Any) -> Iterator[ThreadedServer]:
    running = ThreadedServer(server_config(state_dir, **overrides))
    running.start()
    try:
        yield running
    finally:
        running.stop()


def kubeconfig_dict(server: ApiServer, name: str = "local") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": _cluster_entry(server)}],
        "users": [{"name": name, "user": {"token": server.config.token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
    }
