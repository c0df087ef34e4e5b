"""The ``default/kubernetes`` Service of a local API server: there once it serves, naming its port; deleted or
changed, it comes back as kube-apiserver's reconciler brings it back; a restart on another port updates it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from multiqueue.apiserver.server import ApiServer
from tests.support.servers import server_config
from tests.support.waiting import until_stored


def _service(server: ApiServer) -> dict[str, Any] | None:
    return server.store.get("services", "default", "kubernetes")


def _target_port(server: ApiServer) -> Any:
    found = _service(server)
    return None if found is None else found["spec"]["ports"][0]["targetPort"]


async def test_there_from_the_start_and_made_again_when_deleted(apiserver: ApiServer) -> None:
    first = _service(apiserver)
    assert first is not None
    assert first["spec"]["clusterIP"] == "10.0.0.1"
    assert first["spec"]["ports"] == [
        {"name": "https", "port": 443, "protocol": "TCP", "targetPort": apiserver.port}
    ]

    services = apiserver.registry.lookup("", "v1", "services")
    assert services is not None
    await apiserver.rest.delete(services, "default", "kubernetes", {}, False)
    await until_stored(
        apiserver, lambda: (_service(apiserver) or first)["metadata"]["uid"] != first["metadata"]["uid"]
    )
    assert _target_port(apiserver) == apiserver.port

    changed = {**(_service(apiserver) or {})}
    changed["spec"] = {**changed["spec"], "ports": [{"name": "web", "port": 80, "targetPort": 8080}]}
    await apiserver.rest.update(services, "default", "kubernetes", changed)
    await until_stored(apiserver, lambda: _target_port(apiserver) == apiserver.port)


async def test_a_restart_on_another_port_updates_it(tmp_path: Path) -> None:
    first = ApiServer(server_config(tmp_path / "state"))
    await first.start()
    await first.stop()
    second = ApiServer(server_config(tmp_path / "state"))
    await second.start()
    try:
        assert _target_port(second) == second.port  # the system picks a new port (rarely the same: no harm)
    finally:
        await second.stop()
