"""The kind provider's orchestration, against a runner that records the commands instead of running them."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.kind import (
    IMAGE,
    Command,
    CommandFailed,
    KindProvider,
    KindUnavailable,
    missing_tool,
    selected_provider,
)

REPO = Path("/src/multiqueue")


class RecordingRunner:
    """Records each command; acts as kind does on ``create cluster`` (adds its context to the kubeconfig) and
    answers ``get kubeconfig --internal``; fails the first command that contains ``fail_on``."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.commands: list[Command] = []
        self.fail_on = fail_on

    def __call__(self, command: Command) -> str:
        self.commands.append(command)
        line = " ".join(command.argv)
        if self.fail_on is not None and self.fail_on in line:
            raise CommandFailed(command, 1, f"{command.argv[0]}: it went wrong")
        argv = command.argv
        if argv[:3] == ("kind", "create", "cluster"):
            self._add_context(Path(_flag(argv, "--kubeconfig")), _flag(argv, "--name"))
        if argv[:4] == ("kind", "get", "kubeconfig", "--internal"):
            name = _flag(argv, "--name")
            return yaml.safe_dump(_kubeconfig_of(name, f"https://{name}-control-plane:6443"))
        return ""

    @property
    def lines(self) -> list[str]:
        return [" ".join(c.argv) for c in self.commands]

    @staticmethod
    def _add_context(path: Path, name: str) -> None:
        config: dict[str, Any] = yaml.safe_load(path.read_text()) if path.exists() else {}
        piece = _kubeconfig_of(name, f"https://127.0.0.1:{40000 + len(config.get('clusters') or [])}")
        for key in ("clusters", "users", "contexts"):
            config[key] = [*(config.get(key) or []), *piece[key]]
        config.update({"apiVersion": "v1", "kind": "Config", "current-context": f"kind-{name}"})
        path.write_text(yaml.safe_dump(config))


def _flag(argv: tuple[str, ...], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def _kubeconfig_of(name: str, server: str) -> dict[str, Any]:
    context = f"kind-{name}"
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": {"server": server, "certificate-authority-data": "Q0E="}}],
        "users": [
            {"name": context, "user": {"client-certificate-data": "Y2VydA==", "client-key-data": "a2V5"}}
        ],
        "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
        "current-context": context,
    }


def everything_on_path(tool: str) -> str | None:
    return f"/usr/bin/{tool}"


def provider(tmp_path: Path, runner: RecordingRunner) -> KindProvider:
    return KindProvider(REPO, tmp_path / "kind", runner=runner, which=everything_on_path)


def expected_up(kubeconfig: Path) -> list[str]:
    kc = str(kubeconfig)
    mgmt = f"kubectl --kubeconfig {kc} --context kind-mq-management"
    register = (
        f"bash {REPO}/deploy/register-worker.sh --name {{w}} --worker-context kind-mq-{{w}} "
        f"--management-context kind-mq-management --server https://mq-{{w}}-control-plane:6443 --labels {{labels}}"
    )
    return [
        "docker info --format {{.ServerVersion}}",
        f"kind create cluster --name mq-management --config {REPO}/clusters/kind-management.yaml --kubeconfig {kc} --wait 120s",
        f"kind create cluster --name mq-worker-1 --config {REPO}/clusters/kind-worker-1.yaml --kubeconfig {kc} --wait 120s",
        f"kind create cluster --name mq-worker-2 --config {REPO}/clusters/kind-worker-2.yaml --kubeconfig {kc} --wait 120s",
        f"docker build -f {REPO}/deploy/Dockerfile -t {IMAGE} {REPO}",
        f"kind load docker-image {IMAGE} --name mq-management",
        f"{mgmt} apply -k {REPO}/deploy",
        "kind get kubeconfig --internal --name mq-worker-1",
        register.format(w="worker-1", labels='{"region": "eu"}'),
        "kind get kubeconfig --internal --name mq-worker-2",
        register.format(w="worker-2", labels='{"region": "us"}'),
        f"{mgmt} -n multiqueue-system wait --for=condition=Available deployment/multiqueue-manager --timeout=300s",
    ]


def deletions(kubeconfig: Path, *names: str) -> list[str]:
    return [f"kind delete cluster --name {name} --kubeconfig {kubeconfig}" for name in names]


def test_up_issues_every_step_in_order_and_down_deletes_newest_first(tmp_path: Path) -> None:
    runner = RecordingRunner()
    kind = provider(tmp_path, runner)
    environment = kind.up()
    assert runner.lines == expected_up(kind.kind_kubeconfig)
    kind.down()
    assert runner.lines[len(expected_up(kind.kind_kubeconfig)) :] == deletions(
        kind.kind_kubeconfig, "mq-worker-2", "mq-worker-1", "mq-management"
    )
    assert environment.clusters == ["management", "worker-1", "worker-2"]


def test_only_the_registration_script_gets_the_kind_kubeconfig_through_the_environment(
    tmp_path: Path,
) -> None:
    runner = RecordingRunner()
    kind = provider(tmp_path, runner)
    kind.up()
    with_env = [c for c in runner.commands if c.env]
    assert [c.argv[1] for c in with_env] == [f"{REPO}/deploy/register-worker.sh"] * 2
    assert all(dict(c.env) == {"KUBECONFIG": str(kind.kind_kubeconfig)} for c in with_env)


def test_scenarios_get_contexts_named_after_the_clusters(tmp_path: Path) -> None:
    runner = RecordingRunner()
    environment = provider(tmp_path, runner).up()
    config = yaml.safe_load(environment.kubeconfig.read_text())
    contexts = {c["name"]: c["context"]["cluster"] for c in config["contexts"]}
    assert contexts == {
        "management": "kind-mq-management",
        "worker-1": "kind-mq-worker-1",
        "worker-2": "kind-mq-worker-2",
    }
    assert config["current-context"] == "management"
    servers = {c["name"]: c["cluster"]["server"] for c in config["clusters"]}
    # The published ports on this machine, not the Docker-network addresses the manager uses.
    assert all(server.startswith("https://127.0.0.1:") for server in servers.values())


@pytest.mark.parametrize(
    ("failing", "created"),
    [
        ("kind create cluster --name mq-management", []),
        ("kind create cluster --name mq-worker-2", ["mq-worker-1", "mq-management"]),
        ("docker build", ["mq-worker-2", "mq-worker-1", "mq-management"]),
        ("kind load docker-image", ["mq-worker-2", "mq-worker-1", "mq-management"]),
        ("apply -k", ["mq-worker-2", "mq-worker-1", "mq-management"]),
        (
            "kind get kubeconfig --internal --name mq-worker-1",
            ["mq-worker-2", "mq-worker-1", "mq-management"],
        ),
        ("register-worker.sh --name worker-2", ["mq-worker-2", "mq-worker-1", "mq-management"]),
        ("--for=condition=Available", ["mq-worker-2", "mq-worker-1", "mq-management"]),
    ],
)
def test_a_failed_step_stops_the_run_and_deletes_only_the_clusters_it_created(
    tmp_path: Path, failing: str, created: list[str]
) -> None:
    runner = RecordingRunner(fail_on=failing)
    kind = provider(tmp_path, runner)
    with pytest.raises(CommandFailed, match="it went wrong"):
        kind.up()
    planned = expected_up(kind.kind_kubeconfig)
    failed_at = next(i for i, line in enumerate(planned) if failing in line)
    assert runner.lines == [*planned[: failed_at + 1], *deletions(kind.kind_kubeconfig, *created)]
    assert kind.created == []


def test_a_failed_deletion_does_not_stop_the_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runner = RecordingRunner()
    kind = provider(tmp_path, runner)
    kind.up()
    runner.fail_on = "kind delete cluster --name mq-worker-1"
    kind.down()
    assert runner.lines[-3:] == deletions(kind.kind_kubeconfig, "mq-worker-2", "mq-worker-1", "mq-management")
    assert "clean-up failed: kind delete cluster --name mq-worker-1" in capsys.readouterr().err


@pytest.mark.parametrize("absent", ["docker", "kind", "kubectl", "bash"])
def test_a_missing_tool_is_the_skip_reason_and_nothing_runs(tmp_path: Path, absent: str) -> None:
    runner = RecordingRunner()

    def which(tool: str) -> str | None:
        return None if tool == absent else f"/usr/bin/{tool}"

    kind = KindProvider(REPO, tmp_path / "kind", runner=runner, which=which)
    with pytest.raises(KindUnavailable) as raised:
        kind.up()
    assert str(raised.value) == f"kind provider skipped: {absent} not found on PATH"
    assert runner.commands == []
    assert missing_tool(which) == str(raised.value)


def test_a_docker_daemon_that_does_not_answer_is_the_skip_reason(tmp_path: Path) -> None:
    runner = RecordingRunner(fail_on="docker info")
    kind = provider(tmp_path, runner)
    with pytest.raises(KindUnavailable, match=r"Docker daemon does not answer \(docker: it went wrong\)"):
        kind.up()
    assert runner.lines == ["docker info --format {{.ServerVersion}}"]


def test_missing_tool_is_none_when_all_are_there() -> None:
    assert missing_tool(everything_on_path) is None


@pytest.mark.parametrize(
    ("option", "environ", "expected"),
    [
        (None, {}, "local"),
        (None, {"MULTIQUEUE_E2E_PROVIDER": "kind"}, "kind"),
        ("local", {"MULTIQUEUE_E2E_PROVIDER": "kind"}, "local"),
        ("kind", {}, "kind"),
        (None, {"MULTIQUEUE_E2E_PROVIDER": ""}, "local"),
    ],
)
def test_provider_comes_from_the_option_then_the_environment(
    option: str | None, environ: Mapping[str, str], expected: str
) -> None:
    assert selected_provider(option, environ) == expected


def test_an_unknown_provider_is_a_usage_error_naming_its_source() -> None:
    with pytest.raises(pytest.UsageError, match="MULTIQUEUE_E2E_PROVIDER='minikube'"):
        selected_provider(None, {"MULTIQUEUE_E2E_PROVIDER": "minikube"})
