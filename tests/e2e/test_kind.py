"""What only real clusters show: the manager as deploy/ installs it (a Deployment of two replicas with only its
ServiceAccount), its Pods killed while Jobs run, a worker's node frozen by Docker, the RBAC that deploy/ and
register-worker.sh grant, and a user's own kubeconfig. These run on the kind provider only."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import pytest
import yaml

from multiqueue.api.types import EVENTS, JOBS, LEASES, PODS, SECRETS
from multiqueue.dispatch.lossclock import lease_name, recorded_since
from tests.e2e.conftest import Clusters, has_condition, job_body
from tests.e2e.kind import DEFAULT_WORKDIR, GETTING_STARTED, IMAGE, KIND_SECTION, NAMESPACE, REPO
from tests.e2e.kindops import KindManager, node, run
from tests.support.docblocks import shell_blocks
from tests.support.waiting import saying_on_timeout

pytestmark = pytest.mark.e2e
Obj = dict[str, Any]
MANAGED_BY: Final = "multiqueue.dev/dispatcher"
CLUSTER_LABEL: Final = "multiqueue.dev/cluster"
PIN_LABEL: Final = "multiqueue.dev/requested-cluster"
MANAGER: Final = f"system:serviceaccount:{NAMESPACE}:multiqueue-manager"
JOBS_UNDER_KILL: Final = 100


@dataclass
class OnKind:
    clusters: Clusters
    manager: KindManager  # the manager deploy/ installed


@pytest.fixture
def kind(request: pytest.FixtureRequest, e2e_provider: str) -> OnKind:
    """The kind clusters; the scenario skips, saying why, on the providers that have no deployed manager."""
    if e2e_provider != "kind":
        reason = (
            "kind only: this scenario needs the manager deployed from deploy/ on real clusters, which the "
            f"{e2e_provider} provider does not have"
        )
        print(reason)
        pytest.skip(reason)
    clusters: Clusters = request.getfixturevalue("dispatching_clusters")
    assert clusters.kind_manager is not None
    return OnKind(clusters, clusters.kind_manager)


def managed(name: str, command: str, **spec: Any) -> Obj:
    return job_body(name, command, managedBy=MANAGED_BY, **spec)


async def test_the_manager_runs_from_the_image_built_here_with_only_its_service_account(
    kind: OnKind,
) -> None:
    manager = kind.manager
    listed = await manager.manager_kubectl(
        "get", "pods", "-l", "app.kubernetes.io/component=manager", "-o", "json"
    )
    pods = json.loads(listed)["items"]
    assert len(pods) == 2
    built = (await run("docker", "image", "inspect", "--format", "{{.Id}}", IMAGE)).strip()
    loaded = json.loads(
        await run(
            "docker",
            "exec",
            node("management"),
            "crictl",
            "inspecti",
            "-o",
            "json",
            f"docker.io/library/{IMAGE}",
        )
    )
    assert loaded["status"]["id"] == built, "the node runs the image docker built here"
    for pod in pods:
        spec, status = pod["spec"], pod["status"]
        assert next(c for c in status["conditions"] if c["type"] == "Ready")["status"] == "True"
        assert status["containerStatuses"][0]["image"] == f"docker.io/library/{IMAGE}"
        assert spec["serviceAccountName"] == "multiqueue-manager"
        (container,) = spec["containers"]
        assert not container.get("env") and not container.get("envFrom"), "no credentials but the account's"
        mounted = {m["mountPath"] for m in container["volumeMounts"]}
        assert mounted == {"/etc/multiqueue", "/tmp", "/var/run/secrets/kubernetes.io/serviceaccount"}
    print(
        f"\nmanager Pods Ready from {IMAGE} ({built[:19]}): {', '.join(p['metadata']['name'] for p in pods)}"
    )


# (verb, resource, namespace or "" for cluster-wide, allowed): what deploy/rbac.yaml gives the manager and not more.
MANAGER_RIGHTS: Final = [
    ("list", "jobs.batch", "", True),
    ("patch", "jobs.batch", "default", True),
    ("update", "jobs.batch/status", "default", True),
    ("watch", "cronjobs.batch", "", True),
    ("list", "priorityclasses.scheduling.k8s.io", "", True),
    ("create", "events", "default", True),
    ("list", "secrets", NAMESPACE, True),
    ("list", "leases.coordination.k8s.io", NAMESPACE, True),
    ("update", "leases.coordination.k8s.io", NAMESPACE, True),
    ("watch", "jobsets.jobset.x-k8s.io", "", True),
    ("update", "jobsets.jobset.x-k8s.io", "default", True),
    ("patch", "jobsets.jobset.x-k8s.io/status", "default", True),
    ("create", "jobs.batch", "default", False),
    ("delete", "jobs.batch", "default", False),
    ("create", "pods", "default", False),
    ("get", "secrets", "default", False),
    ("list", "secrets", "kube-system", False),
    ("create", "secrets", NAMESPACE, False),
    ("delete", "leases.coordination.k8s.io", NAMESPACE, False),
    ("create", "jobsets.jobset.x-k8s.io", "default", False),
    ("delete", "jobsets.jobset.x-k8s.io", "default", False),
    ("get", "namespaces", "", False),
    ("create", "pods/exec", NAMESPACE, False),
]


def access_review(verb: str, resource: str, namespace: str) -> str:
    """The SelfSubjectAccessReview ``kubectl auth can-i`` sends, spelled out; ``kubectl create --validate=false -f
    -`` of it asks the same question (kubectl's own validation would list CRDs, which the manager may not). can-i
    finds the group of ``plural.group`` through discovery, so it cannot ask about a kind whose CRD the cluster does
    not serve yet, which RBAC grants all the same. ``resource`` as can-i takes it, ``/status`` the subresource."""
    plural_group, _, subresource = resource.partition("/")
    plural, _, group = plural_group.partition(".")
    attributes = {"verb": verb, "group": group, "resource": plural, "subresource": subresource}
    if namespace:
        attributes["namespace"] = namespace
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attributes},
    }
    return json.dumps(review)


async def test_the_managers_service_account_may_do_what_deploy_grants_and_nothing_more(
    kind: OnKind,
) -> None:
    manager = kind.manager
    wrong = []
    for verb, resource, namespace, allowed in MANAGER_RIGHTS:
        answer = (
            await run(
                "kubectl", "--kubeconfig", str(manager.environment.kubeconfig), "--context", "management",
                "create", "--validate=false", "-f", "-", "-o", "jsonpath={.status.allowed}", "--as", MANAGER,
                stdin=access_review(verb, resource, namespace),
            )
        ).strip()  # fmt: skip
        if answer != ("true" if allowed else "false"):
            wrong.append(f"{verb} {resource} in {namespace or 'the cluster'}: {answer}")
    assert not wrong, wrong


async def test_the_worker_credentials_register_worker_wrote_create_jobs_and_cannot_read_secrets_or_exec(
    kind: OnKind, tmp_path: Path
) -> None:
    clusters, manager = kind.clusters, kind.manager
    secret = await clusters.client().get(SECRETS, "multiqueue-worker-worker-1", NAMESPACE)
    kubeconfig = yaml.safe_load(base64.b64decode(secret["data"]["kubeconfig"]))
    # The manager reaches the worker by its name on the kind network; from here, at the port kind published.
    admin = yaml.safe_load(manager.environment.kubeconfig.read_text())
    published = next(c["cluster"]["server"] for c in admin["clusters"] if c["name"] == "kind-mq-worker-1")
    kubeconfig["clusters"][0]["cluster"]["server"] = published
    path = tmp_path / "worker-1.kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig))

    async def as_manager(*args: str, stdin: str | None = None) -> tuple[int, str]:
        process = await asyncio.create_subprocess_exec(
            "kubectl", "--kubeconfig", str(path), *args,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        out, _ = await process.communicate(stdin.encode() if stdin is not None else None)
        assert process.returncode is not None
        return process.returncode, out.decode()

    code, out = await as_manager("auth", "can-i", "create", "jobs.batch", "-n", "default")
    assert (code, out.strip()) == (0, "yes")
    # Mirrors of JobSets too, whether or not the JobSet CRD is installed yet.
    for verb, resource in [(v, "jobsets.jobset.x-k8s.io") for v in ("create", "watch", "patch", "delete")] + [
        ("update", "jobsets.jobset.x-k8s.io/status")
    ]:
        review = access_review(verb, resource, "default")
        code, out = await as_manager(
            "create", "--validate=false", "-f", "-", "-o", "jsonpath={.status.allowed}", stdin=review
        )
        assert (code, out.strip()) == (0, "true"), f"{verb} {resource}: {out}"
    code, out = await as_manager("get", "secrets", "-A")
    assert code != 0 and "Forbidden" in out, out
    code, out = await as_manager("auth", "can-i", "get", "secrets", "-n", NAMESPACE)
    assert out.strip() == "no"

    await clusters.client("worker-1").create(JOBS, job_body("target", "sleep 300"), "default")
    pod = await _running_pod(clusters, "worker-1", "target")
    code, out = await as_manager("exec", "-n", "default", pod, "--", "true")
    assert code != 0 and "Forbidden" in out and "pods/exec" in out, out
    code, out = await as_manager("logs", "-n", "default", pod)
    assert code == 0, f"multiqueue logs reads pods/log with these credentials: {out}"


async def _running_pod(clusters: Clusters, cluster: str, job: str, within: float = 120.0) -> str:
    """The name of a Running pod of ``job`` on ``cluster``, watching until there is one."""
    client = clusters.client(cluster)
    selector = f"batch.kubernetes.io/job-name={job}"
    async with asyncio.timeout(within):
        while True:
            pods, rv = await client.list(PODS, "default", label_selector=selector)
            running = [p for p in pods if p["status"].get("phase") == "Running"]
            if running:
                return str(running[0]["metadata"]["name"])
            async for event in client.watch(PODS, "default", label_selector=selector, resource_version=rv):
                if event["object"]["status"].get("phase") == "Running":
                    return str(event["object"]["metadata"]["name"])


async def test_the_leader_pod_deleted_then_killed_while_100_jobs_run_and_each_runs_once(
    kind: OnKind,
) -> None:
    """The leader's Pod is deleted (it hands the Lease back on SIGTERM), then the next leader's process is
    SIGKILLed on the node (the Lease must expire first); the standby takes over each time, and every one of 100
    running Jobs completes exactly once, on the worker it started on. Each run leaves a line in a file of the
    worker's node once it passed the gate, so a pod that never got to run (a start that failed on the node and
    was retried) does not count as a run, and one that ran twice cannot hide."""
    clusters, manager = kind.clusters, kind.manager
    management = clusters.client()
    gate, runs = clusters.gate("go"), clusters.gate("runs").path
    names = [f"survivor-{i:03}" for i in range(JOBS_UNDER_KILL)]
    for name in names:
        command = (
            f"mkdir -p {runs}; while [ ! -f {gate} ]; do sleep 0.2; done; echo $HOSTNAME >> {runs}/{name}"
        )
        await management.create(JOBS, managed(name, command), "default")
    running = await _until_jobs(clusters, names, lambda j: (j.get("status") or {}).get("active") == 1, 600)
    placed = {n: running[n]["metadata"]["labels"][CLUSTER_LABEL] for n in names}
    print(f"\n{JOBS_UNDER_KILL} Jobs running: {dict(Counter(placed.values()))}")

    takeovers = []
    for how in ("pod deleted", "process SIGKILLed"):
        # Each time with a warm standby: both replicas Ready, as a running Deployment keeps them.
        await manager.manager_kubectl("rollout", "status", "deployment/multiqueue-manager", "--timeout=300s")
        leader = await manager.until_leader(lambda _: True)
        since = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        started = time.monotonic()
        if how == "pod deleted":
            await manager.manager_kubectl("delete", "pod", leader, "--wait=false")
        else:
            pid = await manager.container_pid(leader)
            await run("docker", "exec", node("management"), "kill", "-9", str(pid))
        try:
            successor = await manager.until_leader(lambda holder, old=leader: holder != old, within=120)
        except pytest.fail.Exception:
            # What each manager said meanwhile, printed with the failure: why no standby took over.
            for pod, text in (await manager.logs_since(since)).items():
                print(f"--- {pod} since {since}:\n{text}")
            raise
        takeovers.append((how, time.monotonic() - started, leader, successor))

    await gate.open()
    done = await _until_jobs(clusters, names, has_condition("Complete"), 600)
    assert all(done[n]["status"].get("succeeded") == 1 for n in names)
    assert all(done[n]["metadata"]["labels"][CLUSTER_LABEL] == placed[n] for n in names), "no Job moved"
    ran: Counter[str] = Counter()
    for worker in ("worker-1", "worker-2"):
        lines = await run("docker", "exec", node(worker), "sh", "-c", f"cd {runs} && grep -c . * || true")
        ran.update({name: int(count) for name, count in (line.split(":") for line in lines.split())})
    twice = {n: c for n, c in ran.items() if c != 1}
    lost = set(names) - set(ran)
    assert not twice and not lost, f"run twice: {twice}; never run: {lost}"
    moved, _ = await management.list(EVENTS, "default", field_selector="reason=Redispatched")
    assert [e for e in moved if e["involvedObject"]["name"] in placed] == []
    retried = sum(int(done[n]["status"].get("failed") or 0) for n in names)
    for how, seconds, leader, successor in takeovers:
        print(f"{how}: {leader} -> {successor}, new leader in {seconds:.1f} s")
    print(
        f"{JOBS_UNDER_KILL} Jobs: 0 run twice, 0 lost ({retried} pod starts failed on the nodes and were retried)"
    )


async def _until_jobs(clusters: Clusters, names: list[str], holds: Any, within: float) -> dict[str, Obj]:
    """Watch the management cluster's Jobs until every one of ``names`` satisfies ``holds``; the last seen."""
    client = clusters.client()
    wanted = set(names)
    latest: dict[str, Obj] = {}

    def laggards() -> str:
        late = [n for n in names if not (n in latest and holds(latest[n]))]
        shown = {n: (latest.get(n) or {}).get("status") for n in late[:5]}
        return f"{len(late)} of {len(names)} Jobs not there yet, among them {shown}"

    async with saying_on_timeout(laggards), asyncio.timeout(within):
        items, rv = await client.list(JOBS, "default")
        latest.update({j["metadata"]["name"]: j for j in items if j["metadata"]["name"] in wanted})
        while not all(n in latest and holds(latest[n]) for n in names):
            async for event in client.watch(
                JOBS, "default", resource_version=rv, timeout_seconds=int(within)
            ):
                job = event["object"]
                rv = job["metadata"]["resourceVersion"]
                if event["type"] in ("ADDED", "MODIFIED") and job["metadata"]["name"] in wanted:
                    latest[job["metadata"]["name"]] = job
                if all(n in latest and holds(latest[n]) for n in names):
                    break
    return latest


async def test_a_worker_node_paused_past_the_loss_timeout_loses_its_job_to_the_other_worker(
    kind: OnKind,
) -> None:
    """`docker pause` of worker-1's node freezes its API server and kubelet; past workerLostTimeout the Job moves
    to worker-2 and completes there; unpaused, worker-1's stale mirror is deleted and the Job stays as it is."""
    clusters, manager = kind.clusters, kind.manager
    lost_timeout = 20.0
    await manager.reconfigure(worker_lost_timeout=lost_timeout)
    management = clusters.client()
    body = managed("frozen", "sleep 15; echo done")
    body["metadata"]["labels"] = {PIN_LABEL: "worker-1"}
    await management.create(JOBS, body, "default")
    await clusters.wait_for(JOBS, "default", "frozen", lambda j: (j.get("status") or {}).get("active") == 1)
    paused = time.monotonic()
    await run("docker", "pause", node("worker-1"))
    try:
        moved = await clusters.wait_for(
            JOBS,
            "default",
            "frozen",
            lambda j: j["metadata"]["labels"].get(CLUSTER_LABEL) == "worker-2",
            within=180,
        )
        moved_after = time.monotonic() - paused
        done = await clusters.wait_for(JOBS, "default", "frozen", has_condition("Complete"), within=120)
    finally:
        await run("docker", "unpause", node("worker-1"))
    assert moved_after >= lost_timeout
    await clusters.wait_gone(JOBS, "default", "frozen", cluster="worker-1", within=120)
    after = await management.get(JOBS, "frozen", "default")
    assert after["status"] == done["status"] and after["status"]["succeeded"] == 1
    assert moved["metadata"]["labels"][CLUSTER_LABEL] == "worker-2"
    events, _ = await management.list(
        EVENTS, "default", field_selector="involvedObject.name=frozen,reason=Redispatched"
    )
    assert len(events) == 1 and "worker-1" in events[0]["message"]
    print(
        f"\nworker-1 paused: the Job moved to worker-2 after {moved_after:.1f} s (workerLostTimeout {lost_timeout:g} s)"
    )


async def test_getting_started_on_kind_runs_as_written_with_a_users_own_kubeconfig(
    kind: OnKind, tmp_path: Path
) -> None:
    """The commands Getting started gives once the clusters are up, as a user runs them: kubectl and multiqueue
    status and logs with the user's kubeconfig (contexts of the workers' names), not the manager's credentials."""
    manager = kind.manager
    _, tried, _ = shell_blocks(GETTING_STARTED, KIND_SECTION)
    workdir = manager.environment.kubeconfig.parent
    script = tried.replace(DEFAULT_WORKDIR, str(workdir))
    process = await asyncio.create_subprocess_exec(
        "bash", "-euo", "pipefail", "-c", script, cwd=REPO,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await process.communicate()
    printed = out.decode()
    assert process.returncode == 0, printed
    assert len(re.findall(r"multiqueue-manager-\S+\s+1/1\s+Running", printed)) == 2, printed
    assert "job.batch/hello-dispatched condition met" in printed, printed
    # The workers through the user's contexts: the Secrets' addresses are the manager's, inside the kind network.
    assert re.search(r"worker-1\s+True", printed) and re.search(r"worker-2\s+True", printed), printed
    assert re.search(r"Job\s+default/hello-dispatched\s+worker-\d\s+Complete\s+4/4", printed), printed
    # The pods' logs; each Indexed pod's hostname is the Job's name and its index.
    assert all(re.search(rf"\] index {i} ran on hello-dispatched-{i}$", printed, re.M) for i in range(4)), (
        printed
    )
    print(printed)


async def test_a_takeover_goes_on_counting_how_long_a_paused_worker_has_been_gone(kind: OnKind) -> None:
    """The loss clock is a Lease in the manager's namespace, which the next leader lists when it takes over
    (deploy/'s Role must allow it): a takeover while a worker's node is paused does not start the count again."""
    clusters, manager = kind.clusters, kind.manager
    lost_timeout, gone_before_takeover = 45.0, 25.0
    await manager.reconfigure(worker_lost_timeout=lost_timeout)
    management = clusters.client()
    body = managed("patient", "sleep 20; echo done")
    body["metadata"]["labels"] = {PIN_LABEL: "worker-2"}
    await management.create(JOBS, body, "default")
    await clusters.wait_for(JOBS, "default", "patient", lambda j: (j.get("status") or {}).get("active") == 1)
    await manager.manager_kubectl("rollout", "status", "deployment/multiqueue-manager", "--timeout=300s")
    await run("docker", "pause", node("worker-2"))
    try:
        lease = await clusters.wait_for(
            LEASES,
            NAMESPACE,
            lease_name("multiqueue", "worker-2"),
            lambda lease: recorded_since(lease) is not None,
        )
        since = recorded_since(lease)
        assert since is not None
        # The scenario itself: the worker stays gone a while, then the leader goes (not a wait for some state).
        await asyncio.sleep(max(0.0, since + gone_before_takeover - time.time()))
        leader = await manager.until_leader(lambda _: True)
        took_over = time.time()
        await manager.manager_kubectl("delete", "pod", leader, "--wait=false")
        await manager.until_leader(lambda holder: holder != leader)
        await clusters.wait_for(
            JOBS, "default", "patient", lambda j: j["metadata"]["labels"].get(CLUSTER_LABEL) == "worker-1",
            within=lost_timeout + 90,
        )  # fmt: skip
        moved = time.time()
    finally:
        await run("docker", "unpause", node("worker-2"))
    print(
        f"\nworker-2 unreachable since {since:.1f}; leader replaced {took_over - since:.1f} s later; the Job moved "
        f"{moved - since:.1f} s after the worker stopped answering (workerLostTimeout {lost_timeout:g} s)"
    )
    assert moved - since >= lost_timeout
    # Counted from its own start, the new leader would have waited until took_over + lost_timeout at least.
    assert moved < took_over + lost_timeout, "the new leader counted from its own start, not from the record"
    done = await clusters.wait_for(JOBS, "default", "patient", has_condition("Complete"), within=120)
    assert done["metadata"]["labels"][CLUSTER_LABEL] == "worker-1"


async def test_a_container_that_fails_once_is_restarted_in_place_by_the_workers_kubelet(kind: OnKind) -> None:
    """restartPolicy OnFailure on a real kubelet: the container starts again in the same pod (a file on the node
    tells it that it already tried), the Job completes with no failure counted, and the restart shows on the pod."""
    clusters = kind.clusters
    tried = clusters.gate("tried")
    command = f"if [ -f {tried} ]; then echo second try; else mkdir -p {tried.path.parent}; touch {tried}; exit 1; fi"
    body = managed("retried", command)
    body["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    await clusters.client().create(JOBS, body, "default")
    done = await clusters.wait_for(JOBS, "default", "retried", has_condition("Complete"), within=120)
    assert done["status"]["succeeded"] == 1 and not done["status"].get("failed")
    worker = done["metadata"]["labels"][CLUSTER_LABEL]
    pods, _ = await clusters.client(worker).list(
        PODS, "default", label_selector="batch.kubernetes.io/job-name=retried"
    )
    assert [p["status"]["containerStatuses"][0]["restartCount"] for p in pods] == [1]
    logs = await run("multiqueue", "logs", "retried", *clusters.cli_target())
    assert logs.strip().endswith("second try"), logs
