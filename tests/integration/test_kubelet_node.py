"""The local kubelet as a node agent, against the embedded API server: its Node reads back through the official
Python client, its Lease in kube-node-lease is renewed, its status heartbeats go on and a Ready condition someone
else changed is put right, the kubelet API serves container logs (tailLines, limitBytes, timestamps, previous,
follow) to the callers it is told to accept and to the API server's pods/log (which checks kube-apiserver's
options first), pod status reads back typed, and with binding off an unbound pod stays Pending."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import re
import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from multiqueue.api.types import LEASES, NAMESPACES, NODES, PODS
from multiqueue.apiserver.server import ApiServer
from multiqueue.kube.client import KubeClient
from multiqueue.kube.informer import Informer, InformerFactory
from multiqueue.local import containers
from multiqueue.local.kubelet import LocalKubelet
from multiqueue.local.kubeletapi import KubeletAuth
from multiqueue.local.node import NodeTiming
from tests.support.clients import client_for
from tests.support.clock import FakeClock
from tests.support.pods import phase, pod_body
from tests.support.servers import kubeconfig_dict
from tests.support.waiting import Changes

Obj = dict[str, Any]
NODE = "node-1"
FAST = NodeTiming(status_period=0.05, report_period=300.0, lease_period=0.05, retry=0.05)


@dataclass
class Api:
    client: KubeClient
    pods: Informer
    nodes: Informer
    leases: Informer
    namespaces: Informer
    changes: Changes

    def pod(self, name: str) -> Obj | None:
        return self.pods.get(f"default/{name}")

    def node(self) -> Obj | None:
        return self.nodes.get(NODE)

    async def until(self, predicate: Callable[[], bool], within: float = 60.0) -> None:
        await self.changes.until(predicate, within)


@pytest.fixture
async def api(apiserver: ApiServer, tmp_path: Path) -> AsyncIterator[Api]:
    client = await client_for(apiserver)
    factory = InformerFactory(client)
    pods, nodes, leases = factory.informer(PODS), factory.informer(NODES), factory.informer(LEASES)
    namespaces = factory.informer(NAMESPACES)
    factory.start()
    try:
        await factory.wait_for_sync()
        yield Api(client, pods, nodes, leases, namespaces, Changes(pods, nodes, leases, namespaces))
    finally:
        await factory.stop()
        await client.close()
        containers.kill_recorded(tmp_path / "logs")


@asynccontextmanager
async def kubelet(
    api: Api, apiserver: ApiServer, logs: Path, mode: str = "process", **options: Any
) -> AsyncIterator[LocalKubelet]:
    """A kubelet for NODE, once its Node gives the port of its kubelet API; leaving the block stops it and its
    pods."""
    client = await client_for(apiserver, "kubelet")
    factory = InformerFactory(client)
    options.setdefault("timing", FAST)
    running = LocalKubelet(client, factory, NODE, mode, logs, **options)
    factory.start()
    task = asyncio.create_task(running.run())
    try:
        await api.until(lambda: 0 < running.api.port == kubelet_port(api.node()))
        yield running
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await running.stop_all_pods()
        await factory.stop()
        await client.close()


def kubelet_port(node: Obj | None) -> int:
    return int(
        (((node or {}).get("status") or {}).get("daemonEndpoints") or {})
        .get("kubeletEndpoint", {})
        .get("Port", 0)
    )


def condition(obj: Obj | None, type_: str) -> Obj:
    for item in ((obj or {}).get("status") or {}).get("conditions") or []:
        if item.get("type") == type_:
            return dict(item)
    return {}


def official_client(apiserver: ApiServer, tmp_path: Path) -> k8s.ApiClient:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig_dict(apiserver)))
    return k8s_config.new_client_from_config(config_file=str(path))


# --- the Node and its Lease --------------------------------------------------------------------------------------


async def test_the_node_reads_back_typed_with_all_a_scheduler_needs(
    apiserver: ApiServer, api: Api, tmp_path: Path
) -> None:
    async with kubelet(api, apiserver, tmp_path / "logs") as running:
        await api.until(lambda: condition(api.node(), "Ready").get("status") == "True")
        with official_client(apiserver, tmp_path) as api_client:
            node = await asyncio.to_thread(k8s.CoreV1Api(api_client).read_node, NODE)
        port = running.api.port
    assert port > 0
    labels = node.metadata.labels
    for key, value in {
        "kubernetes.io/hostname": NODE,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": node.status.node_info.architecture,
        "multiqueue.dev/kubelet-mode": "process",
    }.items():
        assert labels[key] == value, key
    assert node.spec is None or not node.spec.taints
    assert [(a.type, a.address) for a in node.status.addresses] == [
        ("InternalIP", "127.0.0.1"),
        ("Hostname", NODE),
    ]
    for resources in (node.status.capacity, node.status.allocatable):
        assert set(resources) >= {"cpu", "memory", "pods", "ephemeral-storage"}
        assert resources["pods"] == "110"
    info = node.status.node_info
    for field in (
        "machine_id", "system_uuid", "boot_id", "kernel_version", "os_image", "container_runtime_version",
        "kubelet_version", "operating_system", "architecture",
    ):  # fmt: skip
        assert getattr(info, field), field
    assert info.kube_proxy_version == ""
    assert info.operating_system == "linux"
    assert info.container_runtime_version.startswith("multiqueue-process://")
    conditions = {c.type: c for c in node.status.conditions}
    assert {t: c.status for t, c in conditions.items()} == {
        "MemoryPressure": "False",
        "DiskPressure": "False",
        "PIDPressure": "False",
        "Ready": "True",
    }
    for item in conditions.values():
        assert item.reason and item.message and item.last_heartbeat_time and item.last_transition_time
    assert conditions["Ready"].reason == "KubeletReady"
    assert node.status.daemon_endpoints.kubelet_endpoint.port == port


async def test_the_lease_is_made_with_its_namespace_and_renewed(
    apiserver: ApiServer, api: Api, tmp_path: Path
) -> None:
    # The embedded server makes kube-node-lease as upstream's does; without it, the kubelet makes it.
    await api.client.delete(NAMESPACES, "kube-node-lease")
    await api.until(lambda: api.namespaces.get("kube-node-lease") is None)
    renewals: list[str] = []

    def renewed() -> bool:
        lease = api.leases.get(f"kube-node-lease/{NODE}")
        stamp = ((lease or {}).get("spec") or {}).get("renewTime")
        if stamp and stamp not in renewals:
            renewals.append(stamp)
        return len(renewals) >= 3  # made, then renewed twice

    async with kubelet(api, apiserver, tmp_path / "logs"):
        await api.until(renewed)
    lease = api.leases.get(f"kube-node-lease/{NODE}")
    assert lease is not None
    node = api.node()
    assert node is not None
    assert lease["spec"]["holderIdentity"] == NODE
    assert lease["spec"]["leaseDurationSeconds"] == 40
    assert lease["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": node["metadata"]["uid"]}
    ]
    assert sorted(renewals) == renewals, "each renewal is later"
    assert await api.client.get(NAMESPACES, "kube-node-lease")


async def test_heartbeats_go_on_and_a_ready_condition_changed_by_another_is_put_right(
    apiserver: ApiServer, api: Api, tmp_path: Path
) -> None:
    clock = FakeClock(dt.datetime(2030, 1, 1, tzinfo=dt.UTC))
    timing = NodeTiming(status_period=0.05, report_period=60.0, lease_period=0.05, retry=0.05)
    async with kubelet(api, apiserver, tmp_path / "logs", clock=clock, timing=timing):
        await api.until(
            lambda: condition(api.node(), "Ready").get("lastHeartbeatTime") == "2030-01-01T00:00:00Z"
        )
        clock.advance(dt.timedelta(seconds=30))  # nothing changed, and the report period has not passed
        clock.advance(dt.timedelta(seconds=31))  # now it has: the heartbeat is refreshed
        await api.until(
            lambda: condition(api.node(), "Ready").get("lastHeartbeatTime") == "2030-01-01T00:01:01Z"
        )
        ready = condition(api.node(), "Ready")
        assert ready["lastTransitionTime"] == "2030-01-01T00:00:00Z", "no transition: it stayed True"

        # As the node lifecycle controller does to a node whose kubelet went silent.
        clock.advance(dt.timedelta(seconds=5))
        unknown = {
            **ready,
            "status": "Unknown",
            "reason": "NodeStatusUnknown",
            "message": "Kubelet stopped posting",
        }
        await api.client.patch(
            NODES, NODE, {"status": {"conditions": [unknown]}}, patch_type="strategic", subresource="status"
        )
        await api.until(
            lambda: condition(api.node(), "Ready").get("lastTransitionTime") == "2030-01-01T00:01:06Z"
        )
    ready = condition(api.node(), "Ready")
    assert ready["reason"] == "KubeletReady"
    assert ready["lastTransitionTime"] == ready["lastHeartbeatTime"] == "2030-01-01T00:01:06Z"


# --- pods --------------------------------------------------------------------------------------------------------


async def test_with_binding_off_an_unbound_pod_stays_pending(
    apiserver: ApiServer, api: Api, tmp_path: Path
) -> None:
    await api.client.create(PODS, pod_body("unbound", ["true"], node=None), "default")
    await api.client.create(PODS, pod_body("bound", ["true"], node=NODE), "default")
    async with kubelet(api, apiserver, tmp_path / "logs", bind_pods=False) as running:
        await api.until(lambda: phase(api.pod("bound")) == "Succeeded")
        await running.sync("default/unbound")  # looked at once more, as on any change: still not its business
    unbound = api.pod("unbound")
    assert unbound is not None and not unbound["spec"].get("nodeName")
    assert phase(unbound) == "Pending"


async def test_pod_status_reads_back_typed_as_upstream_kubelet_writes_it(
    apiserver: ApiServer, api: Api, tmp_path: Path
) -> None:
    await api.client.create(PODS, pod_body("fails", ["sh", "-c", "exit 3"], node=NODE), "default")
    async with kubelet(api, apiserver, tmp_path / "logs"):
        await api.until(lambda: phase(api.pod("fails")) == "Failed")
        with official_client(apiserver, tmp_path) as api_client:
            pod = await asyncio.to_thread(k8s.CoreV1Api(api_client).read_namespaced_pod, "fails", "default")
    status = pod.status
    assert (status.host_ip, status.pod_ip) == ("127.0.0.1", "127.0.0.1")
    assert [i.ip for i in status.host_ips] == [i.ip for i in status.pod_ips] == ["127.0.0.1"]
    assert status.qos_class == "BestEffort"
    assert status.start_time is not None
    conditions = {c.type: c for c in status.conditions}
    assert {t: c.status for t, c in conditions.items()} == {
        "PodScheduled": "True",
        "PodReadyToStartContainers": "False",
        "Initialized": "True",
        "ContainersReady": "False",
        "Ready": "False",
    }
    assert conditions["Ready"].reason == conditions["ContainersReady"].reason == "PodCompleted"
    (container,) = status.container_statuses
    assert (container.name, container.image, container.restart_count, container.ready) == (
        "main",
        "busybox",  # the spec's image
        0,
        False,
    )
    assert container.container_id and container.container_id.startswith("multiqueue://")
    terminated = container.state.terminated
    assert (terminated.exit_code, terminated.reason) == (3, "Error")
    assert terminated.started_at is not None and terminated.finished_at is not None


# --- the kubelet API ---------------------------------------------------------------------------------------------


@asynccontextmanager
async def https(
    running: LocalKubelet, cert: tuple[Path, Path] | None = None
) -> AsyncIterator[aiohttp.ClientSession]:
    """A session that trusts the kubelet's serving certificate (and presents ``cert``, when given)."""
    context = ssl.create_default_context(cafile=str(running.api.ca_file))
    if cert is not None:
        context.load_cert_chain(*cert)
    async with aiohttp.ClientSession(
        base_url=f"https://127.0.0.1:{running.api.port}", connector=aiohttp.TCPConnector(ssl=context)
    ) as session:
        yield session


async def get_text(session: aiohttp.ClientSession, path: str, **params: str) -> tuple[int, str]:
    async with session.get(path, params=params) as response:
        return response.status, await response.text()


async def test_container_logs_honour_tail_limit_timestamps_and_previous(
    apiserver: ApiServer, api: Api, tmp_path: Path
) -> None:
    logs = tmp_path / "logs"
    await api.client.create(
        PODS, pod_body("lines", ["sh", "-c", "echo one; echo two; echo three"], node=NODE), "default"
    )
    await _pod_that_failed_an_hour_ago(api, logs)
    before = dt.datetime.now(dt.UTC)

    async with kubelet(api, apiserver, logs) as running, https(running) as session:
        await api.until(
            lambda: phase(api.pod("lines")) == "Succeeded" and phase(api.pod("retried")) == "Succeeded"
        )
        path = "/containerLogs/default/lines/main"
        assert await get_text(session, path) == (200, "one\ntwo\nthree\n")
        assert await get_text(session, path, tailLines="2") == (200, "two\nthree\n")
        assert await get_text(session, path, tailLines="0") == (200, "")
        assert await get_text(session, path, limitBytes="6") == (200, "one\ntw")
        assert await get_text(session, path, tailLines="1", limitBytes="100") == (200, "three\n")
        status, stamped = await get_text(session, path, timestamps="true")
        assert status == 200
        after = dt.datetime.now(dt.UTC)
        lines = stamped.splitlines()
        assert [line.split(" ", 1)[1] for line in lines] == ["one", "two", "three"]
        for line in lines:
            stamp = dt.datetime.fromisoformat(line.split(" ", 1)[0][:26].rstrip("Z") + "+00:00")
            assert before - dt.timedelta(seconds=1) <= stamp <= after, line
        status, limited = await get_text(session, path, timestamps="true", limitBytes="10")
        assert (status, limited) == (200, stamped[:10])
        assert await get_text(session, path, sinceSeconds="3600") == (200, "one\ntwo\nthree\n")

        retried_path = "/containerLogs/default/retried/main"
        assert await get_text(session, retried_path) == (200, "second try\n")
        assert await get_text(session, retried_path, previous="true") == (200, "first try\n")
        assert await get_text(session, path, previous="true") == (
            400,
            'previous terminated container "main" in pod "lines" not found',
        )
        assert await get_text(session, "/containerLogs/default/nope/main") == (
            404,
            'pod "nope" does not exist',
        )
        assert await get_text(session, "/containerLogs/default/lines/other") == (
            404,
            'container "other" not found in pod "lines"',
        )
        assert (await get_text(session, path, tailLines="-1"))[0] == 422
        assert await get_text(session, "/healthz") == (200, "ok")
    typed = (api.pod("retried") or {})["status"]["containerStatuses"][0]
    assert typed["restartCount"] == 1
    assert typed["lastState"]["terminated"]["exitCode"] == 1


async def test_following_a_log_streams_until_the_container_ends(
    apiserver: ApiServer, api: Api, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    script = f"echo before; while [ ! -e {gate} ]; do sleep 0.05; done; echo after"
    await api.client.create(PODS, pod_body("follow", ["sh", "-c", script], node=NODE), "default")
    async with kubelet(api, apiserver, tmp_path / "logs") as running, https(running) as session:
        await api.until(lambda: phase(api.pod("follow")) == "Running")
        async with session.get("/containerLogs/default/follow/main", params={"follow": "true"}) as response:
            assert response.status == 200
            async with asyncio.timeout(30):
                assert await response.content.readline() == b"before\n"
                gate.touch()
                assert await response.content.read() == b"after\n"  # to the end: the container ended
    assert phase(api.pod("follow")) in ("Running", "Succeeded")


def client_certificate(folder: Path) -> tuple[Path, tuple[Path, Path]]:
    """A CA and a client certificate it signed (as kube-apiserver's --kubelet-client-certificate would be)."""
    now = dt.datetime.now(dt.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-client-ca")])
    ca = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver-kubelet-client")]))
        .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    pem = serialization.Encoding.PEM
    ca_file, cert_file, key_file = folder / "client-ca.crt", folder / "client.crt", folder / "client.key"
    ca_file.write_bytes(ca.public_bytes(pem))
    cert_file.write_bytes(cert.public_bytes(pem))
    key_file.write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return ca_file, (cert_file, key_file)


async def test_the_kubelet_api_asks_for_the_token_or_client_certificate_it_is_given(
    apiserver: ApiServer, api: Api, tmp_path: Path
) -> None:
    ca_file, cert = client_certificate(tmp_path)
    auth = KubeletAuth(token="s3cret", client_ca_file=ca_file)
    await api.client.create(PODS, pod_body("hello", ["echo", "hello"], node=NODE), "default")
    path = "/containerLogs/default/hello/main"
    async with kubelet(api, apiserver, tmp_path / "logs", api_auth=auth) as running:
        await api.until(lambda: phase(api.pod("hello")) == "Succeeded")
        async with https(running) as session:
            assert await get_text(session, path) == (401, "Unauthorized")
            async with session.get(path, headers={"Authorization": "Bearer wrong"}) as response:
                assert response.status == 401
            async with session.get(path, headers={"Authorization": "Bearer s3cret"}) as response:
                assert (response.status, await response.text()) == (200, "hello\n")
            assert await get_text(session, "/healthz") == (200, "ok"), "no credentials needed"
        async with https(running, cert) as session:
            assert await get_text(session, path) == (200, "hello\n")


# --- pods/log through the API server -------------------------------------------------------------------------------


@asynccontextmanager
async def through_api(apiserver: ApiServer) -> AsyncIterator[aiohttp.ClientSession]:
    headers = {"Authorization": f"Bearer {apiserver.config.token}"}
    async with aiohttp.ClientSession(
        f"{apiserver.url}/api/v1/namespaces/default/pods/", headers=headers
    ) as session:
        yield session


async def read_log(session: aiohttp.ClientSession, pod: str, **params: str) -> tuple[int, Any]:
    async with session.get(f"{pod}/log", params=params) as response:
        if response.content_type == "application/json":
            return response.status, (await response.json())["message"]
        return response.status, await response.text()


async def test_pods_log_takes_kube_apiservers_options_and_reads_the_kubelets_log(
    apiserver: ApiServer, api: Api, tmp_path: Path
) -> None:
    logs = tmp_path / "logs"
    await api.client.create(
        PODS, pod_body("lines", ["sh", "-c", "echo one; echo two; echo three"], node=NODE), "default"
    )
    multi = pod_body("multi", ["sh", "-c", "echo a"], node=NODE)
    multi["spec"]["containers"].append({"name": "b", "image": "busybox", "command": ["sh", "-c", "echo b"]})
    multi["spec"]["initContainers"] = [{"name": "init", "image": "busybox", "command": ["echo", "init"]}]
    await api.client.create(PODS, multi, "default")
    await _pod_that_failed_an_hour_ago(api, logs)

    async with kubelet(api, apiserver, logs), through_api(apiserver) as session:
        await api.until(lambda: all(phase(api.pod(p)) == "Succeeded" for p in ("lines", "multi", "retried")))
        assert await read_log(session, "lines") == (200, "one\ntwo\nthree\n")
        assert await read_log(session, "lines", tailLines="2") == (200, "two\nthree\n")
        assert await read_log(session, "lines", limitBytes="6") == (200, "one\ntw")
        assert await read_log(session, "lines", sinceSeconds="3600") == (200, "one\ntwo\nthree\n")
        assert await read_log(session, "lines", sinceTime="2099-01-01T00:00:00Z") == (200, "")
        status, stamped = await read_log(session, "lines", timestamps="true")
        assert status == 200
        for line, text in zip(stamped.splitlines(), ("one", "two", "three"), strict=True):
            stamp, rest = line.split(" ", 1)
            assert rest == text and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z", stamp), line
        assert await read_log(session, "retried") == (200, "second try\n")
        assert await read_log(session, "retried", previous="true") == (200, "first try\n")
        assert await read_log(session, "lines", previous="true") == (
            400,
            'previous terminated container "main" in pod "lines" not found',
        )
        assert await read_log(session, "multi") == (
            400,
            "a container name must be specified for pod multi, choose one of: [init main b]",
        )
        assert await read_log(session, "multi", container="nope") == (
            400,
            "container nope is not valid for pod multi",
        )
        assert await read_log(session, "multi", container="b") == (200, "b\n")
        assert await read_log(session, "multi", container="init") == (200, "init\n")
        assert await read_log(session, "lines", tailLines="-1") == (
            422,
            'PodLogOptions "lines" is invalid: tailLines: Invalid value: -1: must be greater than or equal to 0',
        )
        assert await read_log(session, "lines", sinceSeconds="5", sinceTime="2020-01-01T00:00:00Z") == (
            422,
            'PodLogOptions "lines" is invalid: []: Forbidden: at most one of `sinceTime` or `sinceSeconds` may be '
            "specified",
        )
        assert await read_log(session, "lines", tailLines="x") == (
            400,
            'strconv.ParseInt: parsing "x": invalid syntax',
        )
        assert await read_log(session, "lines", sinceTime="yesterday") == (
            400,
            'parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as "2006"',
        )


async def test_following_a_log_through_the_api_server_sends_each_line_once(
    apiserver: ApiServer, api: Api, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    script = f"echo one; echo two; while [ ! -e {gate} ]; do sleep 0.05; done; echo three"
    await api.client.create(PODS, pod_body("follow", ["sh", "-c", script], node=NODE), "default")
    async with kubelet(api, apiserver, tmp_path / "logs"), through_api(apiserver) as session:
        await api.until(lambda: phase(api.pod("follow")) == "Running")
        async with session.get("follow/log", params={"follow": "true"}) as response, asyncio.timeout(30):
            assert [await response.content.readline() for _ in range(2)] == [b"one\n", b"two\n"]
        async with session.get("follow/log", params={"follow": "true", "tailLines": "1"}) as response:
            assert response.status == 200
            async with asyncio.timeout(30):
                assert await response.content.readline() == b"two\n"
                gate.touch()
                assert await response.content.read() == b"three\n"  # to the end: the container ended


async def test_a_pod_on_no_node_has_an_empty_log_and_one_on_a_missing_node_none(
    apiserver: ApiServer, api: Api, tmp_path: Path
) -> None:
    await api.client.create(PODS, pod_body("waiting", ["true"]), "default")
    await api.client.create(PODS, pod_body("lost", ["true"], node="ghost"), "default")
    async with through_api(apiserver) as session:
        assert await read_log(session, "waiting") == (200, "")
        assert await read_log(session, "lost") == (404, 'pods "ghost" not found')
        assert await read_log(session, "absent") == (404, 'pods "absent" not found')


async def test_a_log_whose_kubelet_does_not_answer_is_an_internal_error_naming_the_request(
    apiserver: ApiServer, api: Api, tmp_path: Path
) -> None:
    await api.client.create(PODS, pod_body("ended", ["echo", "done"], node=NODE), "default")
    async with kubelet(api, apiserver, tmp_path / "logs"):
        await api.until(lambda: phase(api.pod("ended")) == "Succeeded")
    # The kubelet is gone (its API port closed), while the Node still names that port: the fault is real.
    async with through_api(apiserver) as session:
        code, message = await read_log(session, "ended")
    assert code == 500
    assert message.startswith("Get ") and "/containerLogs/default/ended/main" in message


async def _pod_that_failed_an_hour_ago(api: Api, logs: Path) -> None:
    """An OnFailure pod ``retried`` whose first attempt failed an hour ago (so no back-off is left), as the records
    of a kubelet that went down would show: its next attempt runs at once, printing "second try"."""
    argv = ["sh", "-c", "echo second try"]
    retried = await api.client.create(
        PODS, pod_body("retried", argv, policy="OnFailure", node=NODE), "default"
    )
    records = containers.PodRecords(logs / "default" / "retried", retried["metadata"]["uid"])
    records.begin(NODE, "default", "retried", "2025-01-01T00:00:00Z")
    run_dir = records.container("main").start(1, "2025-01-01T00:00:00Z")
    (run_dir / containers.LOG_START).write_text("0\n")
    (logs / "default" / "retried" / "main.log").write_text("first try\n")
    (run_dir / "exit").write_text("1\n")
    hour_ago = (run_dir / "exit").stat().st_mtime - 3600
    os.utime(run_dir / "exit", (hour_ago, hour_ago))
