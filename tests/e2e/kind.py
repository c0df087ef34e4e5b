"""The ``kind`` provider of the e2e suite: real clusters from clusters/, the manager installed from deploy/.

Bringing the clusters up is a plain sequence of commands (kind, docker, kubectl, deploy/register-worker.sh) issued
through a runner that tests replace with a recording fake, so the order of the steps and the clean-up after a
failed step are checked on machines without Docker. Only clusters this provider created are ever deleted: a
``kind create cluster`` that fails because a cluster of that name exists leaves that cluster alone.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import pytest
import yaml

REPO: Final = Path(__file__).resolve().parents[2]
PROVIDERS: Final = ("local", "upstream", "kind")
PROVIDER_ENV: Final = "MULTIQUEUE_E2E_PROVIDER"
# The tag deploy/kustomization.yaml gives the image; the provider builds and loads exactly that one.
IMAGE: Final = "multiqueue:0.1.0"
NAMESPACE: Final = "multiqueue-system"
DEPLOYMENT: Final = "multiqueue-manager"
# Scenario name of each cluster -> the kind config it is made from.
CLUSTER_CONFIGS: Final = {
    "management": "clusters/kind-management.yaml",
    "worker-1": "clusters/kind-worker-1.yaml",
    "worker-2": "clusters/kind-worker-2.yaml",
}
# The worker labels the scenarios select on (the local provider gives its workers the same ones).
WORKER_LABELS: Final = {"worker-1": '{"region": "eu"}', "worker-2": '{"region": "us"}'}
TOOLS: Final = ("docker", "kind", "kubectl", "bash")


def selected_provider(option: str | None, environ: Mapping[str, str]) -> str:
    """The provider chosen by ``--provider``, else by $MULTIQUEUE_E2E_PROVIDER, else ``local``."""
    chosen = option or environ.get(PROVIDER_ENV) or "local"
    if chosen not in PROVIDERS:
        source = "--provider" if option else PROVIDER_ENV
        raise pytest.UsageError(f"{source}={chosen!r}: the e2e provider is one of {', '.join(PROVIDERS)}")
    return chosen


@dataclass(frozen=True)
class Command:
    argv: tuple[str, ...]
    # Added to the environment of the command (the rest is inherited).
    env: tuple[tuple[str, str], ...] = ()


class CommandFailed(Exception):
    def __init__(self, command: Command, returncode: int, output: str) -> None:
        super().__init__(f"{' '.join(command.argv)} exited {returncode}: {output.strip()}")
        self.command = command
        self.returncode = returncode
        self.output = output


class KindUnavailable(Exception):
    """kind clusters cannot be made on this machine; the message is the skip reason."""


Runner = Callable[[Command], str]


def run_command(command: Command) -> str:
    """Run one command (echoed on stderr); return its stdout or raise :class:`CommandFailed` with its stderr."""
    print(f"+ {' '.join(command.argv)}", file=sys.stderr, flush=True)
    result = subprocess.run(
        command.argv,
        env={**os.environ, **dict(command.env)},
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise CommandFailed(command, result.returncode, result.stderr or result.stdout)
    return result.stdout


def missing_tool(which: Callable[[str], str | None] = shutil.which) -> str | None:
    """Why kind clusters cannot be made here, judged from PATH alone; None when every tool is there."""
    for tool in TOOLS:
        if which(tool) is None:
            return f"kind provider skipped: {tool} not found on PATH"
    return None


@dataclass
class KindEnvironment:
    """The clusters once up: a kubeconfig whose contexts carry the scenario names (management, worker-1, ...)."""

    kubeconfig: Path
    clusters: list[str]


@dataclass
class KindProvider:
    repo: Path
    workdir: Path
    runner: Runner = run_command
    which: Callable[[str], str | None] = shutil.which
    prefix: str = "mq-"
    created: list[str] = field(default_factory=list)  # kind cluster names, in creation order

    @property
    def kind_kubeconfig(self) -> Path:
        """Where kind writes its contexts (kind-<cluster>): ours, never the user's ~/.kube/config."""
        return self.workdir / "kind.kubeconfig"

    @property
    def scenario_kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    def kind_name(self, cluster: str) -> str:
        return f"{self.prefix}{cluster}"

    def context(self, cluster: str) -> str:
        return f"kind-{self.kind_name(cluster)}"

    def check(self) -> None:
        """Raise :class:`KindUnavailable` with the reason when Docker, kind, kubectl or bash are missing."""
        reason = missing_tool(self.which)
        if reason is not None:
            raise KindUnavailable(reason)
        try:
            self.runner(Command(("docker", "info", "--format", "{{.ServerVersion}}")))
        except CommandFailed as exc:
            first = (exc.output.strip().splitlines() or ["no output"])[0]
            raise KindUnavailable(
                f"kind provider skipped: the Docker daemon does not answer ({first})"
            ) from exc

    def up(self) -> KindEnvironment:
        """Create the clusters, install the manager and register the workers; on failure delete what was made."""
        self.check()
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            for cluster, config in CLUSTER_CONFIGS.items():
                self._run(
                    "kind", "create", "cluster",
                    "--name", self.kind_name(cluster),
                    "--config", str(self.repo / config),
                    "--kubeconfig", str(self.kind_kubeconfig),
                    "--wait", "120s",
                )  # fmt: skip
                self.created.append(self.kind_name(cluster))
            self._run(
                "docker", "build", "-f", str(self.repo / "deploy" / "Dockerfile"), "-t", IMAGE, str(self.repo)
            )
            self._run("kind", "load", "docker-image", IMAGE, "--name", self.kind_name("management"))
            self._kubectl("management", "apply", "-k", str(self.repo / "deploy"))
            for worker, labels in WORKER_LABELS.items():
                self._register(worker, labels)
            self._kubectl(
                "management", "-n", NAMESPACE,
                "wait", "--for=condition=Available", f"deployment/{DEPLOYMENT}", "--timeout=300s",
            )  # fmt: skip
            self._write_scenario_kubeconfig()
        except BaseException:
            self.down()
            raise
        return KindEnvironment(self.scenario_kubeconfig, list(CLUSTER_CONFIGS))

    def down(self) -> None:
        """Delete the clusters this provider created, newest first; one failed deletion does not stop the rest."""
        failures: list[str] = []
        while self.created:
            name = self.created.pop()
            try:
                self._run(
                    "kind", "delete", "cluster", "--name", name, "--kubeconfig", str(self.kind_kubeconfig)
                )
            except CommandFailed as exc:
                failures.append(str(exc))
        for failure in failures:
            print(f"kind provider: clean-up failed: {failure}", file=sys.stderr)

    def _run(self, *argv: str, env: tuple[tuple[str, str], ...] = ()) -> str:
        return self.runner(Command(argv, env))

    def _kubectl(self, cluster: str, *args: str) -> str:
        return self._run(
            "kubectl", "--kubeconfig", str(self.kind_kubeconfig), "--context", self.context(cluster), *args
        )

    def _register(self, worker: str, labels: str) -> None:
        # The manager runs in a pod of the management cluster: it reaches the worker at the address kind gives on
        # its Docker network, not at the port published on this machine.
        internal = yaml.safe_load(
            self._run("kind", "get", "kubeconfig", "--internal", "--name", self.kind_name(worker))
        )
        server = str(internal["clusters"][0]["cluster"]["server"])
        self._run(
            "bash", str(self.repo / "deploy" / "register-worker.sh"),
            "--name", worker,
            "--worker-context", self.context(worker),
            "--management-context", self.context("management"),
            "--server", server,
            "--labels", labels,
            env=(("KUBECONFIG", str(self.kind_kubeconfig)),),
        )  # fmt: skip

    def _write_scenario_kubeconfig(self) -> None:
        """kind's kubeconfig with each context renamed to the cluster's scenario name."""
        config: dict[str, Any] = yaml.safe_load(self.kind_kubeconfig.read_text(encoding="utf-8"))
        names = {self.context(cluster): cluster for cluster in CLUSTER_CONFIGS}
        contexts = [c for c in config.get("contexts") or [] if c.get("name") in names]
        for context in contexts:
            context["name"] = names[context["name"]]
        config["contexts"] = contexts
        config["current-context"] = "management"
        self.scenario_kubeconfig.write_text(yaml.safe_dump(config), encoding="utf-8")
