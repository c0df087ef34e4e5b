"""``multiqueue status`` and ``multiqueue logs`` as a person runs them, with kubectl's flags: -o, -n, -c,
--all-containers, --tail, --timestamps, -f; and ``kubectl multiqueue`` as a kubectl plugin."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from multiqueue.api.types import JOBS, NAMESPACES, PODS, SECRETS
from multiqueue.dispatch.config import Capacity
from multiqueue.kube.client import LogQuery
from multiqueue.kube.errors import AlreadyExists, BadRequest
from tests.e2e.conftest import BUSYBOX, GATES_MOUNT, Clusters, Gate, has_condition
from tests.e2e.test_dispatch import managed
from tests.support.processes import REPO
from tests.support.waiting import saying_on_timeout

pytestmark = pytest.mark.e2e


async def multiqueue(
    *args: str,
    program: tuple[str, ...] = (sys.executable, "-m", "multiqueue"),
    env: dict[str, str] | None = None,
) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        *program, *args, cwd=str(REPO), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=None if env is None else {**os.environ, **env},
    )  # fmt: skip
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def _changed_since(seen: dict[str, Any]) -> Callable[[dict[str, Any]], bool]:
    version = seen["metadata"]["resourceVersion"]
    return lambda obj: bool(obj["metadata"]["resourceVersion"] != version)


def _two_containers(name: str, gate: Gate) -> dict[str, Any]:
    body = managed(name, "echo one; echo two; echo three")
    containers = body["spec"]["template"]["spec"]["containers"]
    wait = f"while [ ! -f {gate} ]; do sleep 0.1; done; echo side says hi"
    containers.append(
        {"name": "side", "image": BUSYBOX, "command": ["sh", "-c", wait], "volumeMounts": [GATES_MOUNT]}
    )
    return body


async def test_status_prints_what_kubectl_users_ask_for(dispatching_clusters: Clusters) -> None:
    clusters = dispatching_clusters
    target = clusters.cli_target()
    management = clusters.client()
    await management.create(NAMESPACES, {"metadata": {"name": "team-a"}})
    await management.create(JOBS, managed("in-default", "true"), "default")
    await management.create(JOBS, managed("in-team-a", "exit 1", backoffLimit=0), "team-a")
    await clusters.wait_for(JOBS, "default", "in-default", has_condition("Complete"))
    await clusters.wait_for(JOBS, "team-a", "in-team-a", has_condition("Failed"))

    code, out, _ = await multiqueue("status", *target, "-o", "json")
    assert code == 0
    document = json.loads(out)
    jobs = {j["key"]: j for j in document["jobs"]}
    assert jobs["default/in-default"]["state"] == "Complete" and "ageSeconds" in jobs["default/in-default"]
    assert (jobs["team-a/in-team-a"]["state"], jobs["team-a/in-team-a"]["reason"]) == (
        "Failed",
        "BackoffLimitExceeded",
    )
    assert {w["name"] for w in document["workers"]} == {"worker-1", "worker-2"}
    code, out, _ = await multiqueue("status", *target, "-o", "yaml")
    as_yaml = yaml.safe_load(out)
    assert code == 0 and as_yaml["workers"] == document["workers"]
    assert {j["key"]: j["state"] for j in as_yaml["jobs"]} == {k: j["state"] for k, j in jobs.items()}
    code, out, _ = await multiqueue("status", *target, "-n", "team-a", "-o", "name")
    assert (code, out) == (0, "job/team-a/in-team-a\n")
    code, out, _ = await multiqueue("status", *target, "-o", "wide")
    header = next(line for line in out.splitlines() if line.startswith("KIND"))
    assert header.split() == ["KIND", "NAME", "WORKER", "STATE", "COMPLETIONS", "REASON", "AGE", "MESSAGE"]
    assert "Job has reached the specified backoff limit (on worker" not in out, "the worker's words, not ours"
    assert "Job has reached the specified backoff limit" in out
    code, out, err = await multiqueue("status", *target, "-o", "table")
    assert code == 2 and "invalid choice: 'table'" in err and out == ""


async def test_logs_take_kubectls_flags(dispatching_clusters: Clusters, tmp_path: Path) -> None:
    clusters = dispatching_clusters
    target = clusters.cli_target()
    gate = clusters.gate("gate")
    await clusters.client().create(JOBS, _two_containers("pair", gate), "default")
    # Its main container writes three lines and ends, so the pod is never Ready: wait for those lines instead.
    user = await clusters.wait_for(
        JOBS, "default", "pair", lambda j: (j.get("status") or {}).get("active") == 1
    )
    placed = user["metadata"]["labels"]["multiqueue.dev/cluster"]
    worker = clusters.client(placed)
    pods, _ = await worker.list(PODS, "default", label_selector="batch.kubernetes.io/job-name=pair")
    pod = pods[0]["metadata"]["name"]
    # A pod not yet bound to a node has an empty log (kube-apiserver answers 200 with no lines): wait for its node.
    await clusters.wait_for(
        PODS, "default", pod, lambda p: bool((p.get("spec") or {}).get("nodeName")), cluster=placed
    )
    async with asyncio.timeout(30):
        while True:
            try:
                written = [line async for line in worker.follow_log(pod, "default", LogQuery("main"))]
                break  # followed until the container ended
            except (
                BadRequest
            ):  # a kubelet API answers 400 while the container waits to start: ask again later
                seen = await worker.get(PODS, pod, "default")
                await clusters.wait_for(PODS, "default", pod, _changed_since(seen), cluster=placed)
    assert written == ["one", "two", "three"]

    code, _, err = await multiqueue("logs", "pair", *target)
    assert code == 1 and "has 2 containers (main, side): name one with -c, or use --all-containers" in err
    code, _, err = await multiqueue("logs", "pair", "-c", "sidecar", *target)
    assert code == 1 and 'container "sidecar" is not in pod' in err and "its containers: main, side" in err
    code, out, _ = await multiqueue("logs", "pair", "-c", "main", "--tail", "1", *target)
    assert (code, out) == (0, "three\n")
    code, out, _ = await multiqueue("logs", "pair", "-c", "main", "--timestamps", *target)
    stamped = out.splitlines()
    assert [line.split(" ", 1)[1] for line in stamped] == ["one", "two", "three"]
    assert all(
        re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", line.split(" ", 1)[0]) for line in stamped
    )

    # -f prints the side container's line when it is written, and ends when the pod's containers have ended.
    follow = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "multiqueue", "logs", "pair", "--all-containers", "-f", *target,
        cwd=str(REPO), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert follow.stdout is not None
    async with asyncio.timeout(30):
        first = await follow.stdout.readline()
        assert re.fullmatch(rb"\[pod/pair-\w+/main\] one\n", first), first
        await gate.open()
        rest, err = await follow.communicate()
    assert follow.returncode == 0, err.decode()
    assert re.search(rb"\[pod/pair-\w+/side\] side says hi\n", rest), rest
    await clusters.wait_for(JOBS, "default", "pair", has_condition("Complete"))


async def test_kubectl_runs_multiqueue_as_a_plugin(dispatching_clusters: Clusters) -> None:
    plugin = shutil.which("kubectl-multiqueue")
    kubectl = shutil.which("kubectl")
    if plugin is None or kubectl is None:
        reason = f"needs {'kubectl' if kubectl is None else 'kubectl-multiqueue (pip install -e .)'} on PATH"
        print(reason)
        pytest.skip(reason)
    env = {"KUBECONFIG": str(dispatching_clusters.kubeconfig)}
    code, out, err = await multiqueue(  # as the README shows it
        "multiqueue", "status", "--context", "management", program=(kubectl,), env=env
    )
    assert code == 0 and re.search(r"^KIND\s+NAME\s+WORKER", out, re.MULTILINE), err
    code, out, err = await multiqueue(
        "multiqueue", "status", *dispatching_clusters.cli_target(), program=(kubectl,)
    )
    assert code == 0, err
    assert out.splitlines()[0].split() == [
        "WORKER",
        "ACTIVE",
        "JOBS",
        "RUNNING",
        "CAPACITY",
        "USED",
        "LABELS",
    ]


async def test_status_shows_what_each_worker_has_left(dispatching_clusters: Clusters) -> None:
    clusters = dispatching_clusters
    code, out, _ = await multiqueue("status", *clusters.cli_target())
    assert code == 0
    assert "<unlimited>" in out, "no capacity configured"
    capacity = Capacity(max_jobs=2, resources={"cpu": "4", "memory": "8Gi"})
    await clusters.set_capacity({"worker-1": capacity, "worker-2": capacity})
    gate = clusters.gate("gate")
    body = managed("sized", f"while [ ! -f {gate} ]; do sleep 0.1; done")
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "500m", "memory": "512Mi"}  # fits a kind node of 2 cores beside its control plane
    }
    await clusters.client().create(JOBS, body, "default")
    user = await clusters.wait_for(
        JOBS, "default", "sized", lambda j: (j.get("status") or {}).get("active") == 1
    )
    placed = user["metadata"]["labels"]["multiqueue.dev/cluster"]
    code, out, _ = await multiqueue("status", *clusters.cli_target())
    assert code == 0
    rows = {line.split()[0]: line for line in out.splitlines()[1:] if line.startswith("worker-")}
    other = "worker-2" if placed == "worker-1" else "worker-1"
    assert "jobs 1/2, cpu 0.5/4, memory 512Mi/8Gi" in rows[placed], out
    assert "jobs 0/2, cpu 0/4, memory 0/8Gi" in rows[other], out
    await gate.open()
    await clusters.wait_for(JOBS, "default", "sized", has_condition("Complete"))


async def test_status_watch_prints_each_job_as_it_changes(dispatching_clusters: Clusters) -> None:
    clusters = dispatching_clusters
    management = clusters.client()
    await management.create(NAMESPACES, {"metadata": {"name": "team-b"}})
    watching = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "multiqueue", "status", *clusters.cli_target(), "-n", "default", "-w",
        cwd=str(REPO), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert watching.stdout is not None
    seen: list[str] = []

    async def until(pattern: str) -> str:
        assert watching.stdout is not None
        while not re.search(pattern, seen[-1] if seen else ""):
            line = await watching.stdout.readline()
            assert line, f"status -w ended; it printed:\n{''.join(seen)}"
            seen.append(line.decode())
        return seen[-1]

    try:
        async with saying_on_timeout(lambda: f"status -w printed:\n{''.join(seen)}"), asyncio.timeout(60):
            await until(r"^KIND\s+NAME\s+WORKER\s+STATE")  # the tables first, as without -w
            await management.create(JOBS, managed("elsewhere", "true"), "team-b")
            await management.create(JOBS, managed("watched", "true"), "default")
            done = await until(r"^Job\s+default/watched\s+worker-\d\s+Complete\s+1/1\s+CompletionsReached\s")
    finally:
        watching.send_signal(signal.SIGINT)
        async with asyncio.timeout(30):
            _, err = await watching.communicate()
    assert watching.returncode == 0, err.decode()
    watched = [line for line in seen if "default/watched" in line]
    assert watched[-1] == done and len(set(watched)) == len(watched), "each change once, none repeated"
    assert not any("team-b/" in line for line in seen), "-n default keeps to its namespace"


async def test_status_and_logs_find_the_clusters_as_kubectl_does(dispatching_clusters: Clusters) -> None:
    """Without the manager's config: the management cluster from $KUBECONFIG or --kubeconfig and --context, the
    worker of a Job from a context of its name."""
    dispatching_clusters.in_process(
        "reads the kubeconfig local up writes, beside no worker Secrets (test_kind's Getting started scenario finds the workers through a user's kubeconfig)"
    )
    clusters = dispatching_clusters
    assert clusters.local is not None
    kubeconfig = str(clusters.local.state_dir / "kubeconfig")
    await clusters.client().create(JOBS, managed("found", "echo found it"), "default")
    await clusters.wait_for(JOBS, "default", "found", has_condition("Complete"))
    env = {"KUBECONFIG": kubeconfig}

    code, out, err = await multiqueue("status", "--context", "management", "-o", "name", env=env)
    assert (code, err) == (0, "") and "job/default/found\n" in out
    code, out, _ = await multiqueue("status", "--kubeconfig", kubeconfig, "--context", "management")
    assert code == 0 and out.startswith("No workers found in Secrets you can read"), out
    assert re.search(r"^Job\s+default/found\s+worker-\d\s+Complete\s", out, re.MULTILINE), out
    code, out, err = await multiqueue("logs", "found", "--context", "management", env=env)
    assert (code, out) == (0, "found it\n"), err

    code, _, err = await multiqueue("status", "--context", "nowhere", env=env)
    assert code == 2 and "nowhere" in err and len(err.splitlines()) == 1, err
    code, _, err = await multiqueue("status", env={"KUBECONFIG": os.pathsep.join([kubeconfig, kubeconfig])})
    assert code == 2 and "pass --kubeconfig FILE" in err, err
    code, _, err = await multiqueue("status", *clusters.cli_target(), "--context", "worker-1")
    assert code == 0, "--context takes the place of the config's management cluster: " + err


async def test_a_worker_is_reached_through_the_users_context_of_its_name_before_its_secret(
    dispatching_clusters: Clusters, tmp_path: Path
) -> None:
    """A worker Secret holds the address and token the manager uses, which may work only from where the manager
    runs (a name on kind's network, a cluster-internal address). Without --config, a user whose kubeconfig has a
    context of the worker's name reaches it through that context, with the user's own credentials."""
    clusters = dispatching_clusters
    management = clusters.client()
    far = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "far", "cluster": {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": False}}
        ],
        "users": [{"name": "far", "user": {"token": "the-managers"}}],
        "contexts": [{"name": "far", "context": {"cluster": "far", "user": "far"}}],
        "current-context": "far",
    }
    with contextlib.suppress(AlreadyExists):
        await management.create(NAMESPACES, {"metadata": {"name": "multiqueue-system"}})
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "multiqueue-worker-far", "labels": {"multiqueue.dev/cluster": "far"}},
        "stringData": {"kubeconfig": yaml.safe_dump(far)},
    }
    await management.create(SECRETS, secret, "multiqueue-system")
    try:
        # The user's kubeconfig: the scenario's, plus a context named far that reaches worker-2 as the user.
        mine = yaml.safe_load(clusters.kubeconfig.read_text())
        worker_2 = next(c["context"] for c in mine["contexts"] if c["name"] == "worker-2")
        without = tmp_path / "without.kubeconfig"
        without.write_text(yaml.safe_dump(mine))
        mine["contexts"].append({"name": "far", "context": worker_2})
        with_far = tmp_path / "with.kubeconfig"
        with_far.write_text(yaml.safe_dump(mine))

        code, out, err = await multiqueue("status", "--kubeconfig", str(with_far), "--context", "management")
        assert code == 0, err
        assert re.search(r"^far\s+True\s", out, re.MULTILINE), out
        code, out, err = await multiqueue("status", "--kubeconfig", str(without), "--context", "management")
        assert code == 0, err
        assert re.search(r"^far\s+False \(ClientConnectionFailed\)", out, re.MULTILINE), out
    finally:
        await management.delete(SECRETS, "multiqueue-worker-far", "multiqueue-system")
