"""The default/kubernetes Service the embedded server keeps: made when missing, its port put back when changed."""

from __future__ import annotations

from typing import Any

import pytest

from multiqueue.apiserver.rules import apiservice

PORT = 36361
STORED = {
    **apiservice.wanted(PORT),
    "spec": {
        **apiservice.wanted(PORT)["spec"],
        "clusterIPs": ["10.0.0.1"],
        "internalTrafficPolicy": "Cluster",
    },
}


def _with_spec(**changes: Any) -> dict[str, Any]:
    return {**STORED, "spec": {**STORED["spec"], **changes}}


CASES: dict[str, tuple[dict[str, Any] | None, str | None]] = {
    "missing": (None, "create"),
    "as-made": (STORED, None),
    "port-moved-on-restart": (
        _with_spec(ports=[{**STORED["spec"]["ports"][0], "targetPort": 6443}]),
        "update",
    ),
    "port-renamed": (_with_spec(ports=[{**STORED["spec"]["ports"][0], "name": "web"}]), "update"),
    "extra-port": (_with_spec(ports=[*STORED["spec"]["ports"], {"name": "x", "port": 80}]), "update"),
    "type-changed": (_with_spec(type="NodePort"), "update"),
}


@pytest.mark.parametrize(("existing", "verb"), [pytest.param(*c, id=n) for n, c in CASES.items()])
def test_decide(existing: dict[str, Any] | None, verb: str | None) -> None:
    action = apiservice.decide(existing, PORT)
    assert (action and action[0]) == verb
    if action is not None:
        spec = action[1]["spec"]
        assert spec["ports"] == [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": PORT}]
        assert spec["type"] == "ClusterIP"
        assert action[1]["metadata"]["labels"] == {"component": "apiserver", "provider": "kubernetes"}


def test_made_with_the_first_address_of_the_range() -> None:
    made = apiservice.wanted(PORT)
    assert made["spec"]["clusterIP"] == "10.0.0.1"
    assert (made["metadata"]["namespace"], made["metadata"]["name"]) == ("default", "kubernetes")
    assert "clusterIP" not in apiservice.wanted(PORT, cluster_ip=None)["spec"]


def test_an_update_keeps_what_else_was_stored() -> None:
    action = apiservice.decide(_with_spec(type="NodePort", sessionAffinity="ClientIP"), PORT)
    assert action is not None
    assert action[1]["spec"]["sessionAffinity"] == "ClientIP"
    assert action[1]["spec"]["clusterIPs"] == ["10.0.0.1"]
