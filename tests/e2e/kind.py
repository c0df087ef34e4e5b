"""The ``kind`` provider of the e2e suite: real clusters from clusters/, the manager installed from deploy/.

The clusters are made from the node image hack/build-kind-images.sh builds here (no registry is needed), then the
manager is installed and the workers registered by running the admin guide's own command blocks, verbatim, so the
guide is what every kind session proves. Bringing the clusters up is a plain sequence of commands issued through a
runner that tests replace with a recording fake, so the order of the steps and the clean-up after a failed step
are checked on machines without Docker. Only clusters this provider created are ever deleted: a
``kind create cluster`` that fails because a cluster of that name exists leaves that cluster alone.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

from multiqueue.api.versions import KUBERNETES_VERSION
from tests.support.docblocks import shell_blocks

REPO: Final = Path(__file__).resolve().parents[2]
# Where hack/build-kind-images.sh put the kind command and the node image's name (the last line it prints).
ASSETS_ENV: Final = "MULTIQUEUE_KIND_ASSETS"
BUILD_COMMAND: Final = "bash hack/build-kind-images.sh"
# hack/kind-up.sh's folder for the kubeconfigs, and the e2e suite's switch to use the clusters it left there.
WORKDIR_ENV: Final = "MULTIQUEUE_KIND_WORKDIR"
DEFAULT_WORKDIR: Final = "~/.kube/multiqueue-kind"
REUSE_ENV: Final = "MULTIQUEUE_KIND_REUSE"
GETTING_STARTED: Final = "docs/getting-started.md"
KIND_SECTION: Final = "## Trying it on kind"
# The tag deploy/kustomization.yaml gives the image; the admin guide builds and loads exactly that one.
IMAGE: Final = "multiqueue:0.1.0"
NAMESPACE: Final = "multiqueue-system"
DEPLOYMENT: Final = "multiqueue-manager"
# Scenario name of each cluster -> the kind config it is made from (which names the kind cluster).
CLUSTER_CONFIGS: Final = {
    "management": "clusters/kind-management.yaml",
    "worker-1": "clusters/kind-worker-1.yaml",
    "worker-2": "clusters/kind-worker-2.yaml",
}
# The admin guide's sections whose command blocks install the manager and register the workers.
GUIDE: Final = "docs/admin-guide.md"
GUIDE_SECTIONS: Final = ("## Install on the management cluster", "## Register a worker")
TOOLS: Final = ("docker", "kubectl", "bash")


@dataclass(frozen=True)
class Command:
    argv: tuple[str, ...]
    # Added to the environment of the command (the rest is inherited).
    env: tuple[tuple[str, str], ...] = ()
    cwd: Path | None = None


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
        cwd=command.cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise CommandFailed(command, result.returncode, result.stderr or result.stdout)
    return result.stdout


@dataclass(frozen=True)
class KindAssets:
    """What hack/build-kind-images.sh made: a folder with the kind command and the node image's name."""

    folder: Path

    @property
    def kind(self) -> Path:
        return self.folder / "kind"

    @property
    def node_image(self) -> str:
        return (self.folder / "node-image").read_text(encoding="utf-8").strip()

    @classmethod
    def find(cls, environ: Mapping[str, str] = os.environ) -> KindAssets:
        """$MULTIQUEUE_KIND_ASSETS, else the build cache; :class:`KindUnavailable` naming the build command."""
        if environ.get(ASSETS_ENV):
            folder = Path(environ[ASSETS_ENV])
        else:
            cache = Path(
                environ.get("MULTIQUEUE_KIND_CACHE")
                or Path(environ.get("HOME", "~")) / ".cache/multiqueue/kind"
            )
            folder = cache / KUBERNETES_VERSION
        assets = cls(folder.expanduser())
        if not (os.access(assets.kind, os.X_OK) and (assets.folder / "node-image").is_file()):
            raise KindUnavailable(
                f"kind provider skipped: no kind command and node image in {assets.folder}; build them with "
                f"`{BUILD_COMMAND}` (and point {ASSETS_ENV} at the folder it prints last, if elsewhere)"
            )
        return assets


def missing_tool(which: Callable[[str], str | None] = shutil.which) -> str | None:
    """Why kind clusters cannot be made here, judged from PATH alone; None when every tool is there."""
    for tool in TOOLS:
        if which(tool) is None:
            return f"kind provider skipped: {tool} not found on PATH"
    return None


def kind_unavailable(environ: Mapping[str, str] = os.environ) -> str | None:
    """Why kind clusters cannot be made here, short of asking Docker; None when tools and images are there."""
    try:
        KindAssets.find(environ)
    except KindUnavailable as exc:
        return missing_tool() or str(exc)
    return missing_tool()


def guide_blocks() -> list[str]:
    """The admin guide's command blocks that install the manager and register the workers (the first block of
    each of its sections), in order."""
    return [shell_blocks(GUIDE, heading)[0] for heading in GUIDE_SECTIONS]


def kind_cluster_name(repo: Path, cluster: str) -> str:
    """The kind cluster a scenario cluster is: the ``name`` its config gives."""
    config = yaml.safe_load((repo / CLUSTER_CONFIGS[cluster]).read_text(encoding="utf-8"))
    return str(config["name"])


@dataclass
class KindEnvironment:
    """The clusters once up: a kubeconfig whose contexts carry the scenario names (management, worker-1, ...), and
    the kind kubeconfig (contexts ``kind-<cluster>``) the admin guide's commands use."""

    kubeconfig: Path
    clusters: list[str]
    kind_kubeconfig: Path
    assets: KindAssets

    @property
    def nodes(self) -> list[str]:
        """The node containers of the clusters (kind names them after the cluster)."""
        return [f"{kind_cluster_name(REPO, cluster)}-control-plane" for cluster in self.clusters]

    @classmethod
    def of(cls, repo: Path, workdir: Path, assets: KindAssets) -> KindEnvironment:
        """The clusters whose kubeconfigs a provider (or hack/kind-up.sh) wrote to ``workdir``."""
        provider = KindProvider(repo, workdir)
        return cls(provider.scenario_kubeconfig, list(CLUSTER_CONFIGS), provider.kind_kubeconfig, assets)


@dataclass
class KindProvider:
    repo: Path
    workdir: Path
    runner: Runner = run_command
    which: Callable[[str], str | None] = shutil.which
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)
    created: list[str] = field(default_factory=list)  # kind cluster names, in creation order
    assets: KindAssets | None = None  # once found by up()
    # Where kind writes its contexts (kind-<cluster>); by default a file of the workdir, never the user's own.
    kind_config: Path | None = None

    @property
    def kind_kubeconfig(self) -> Path:
        return self.kind_config or self.workdir / "kind.kubeconfig"

    @property
    def scenario_kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    def kind_name(self, cluster: str) -> str:
        return kind_cluster_name(self.repo, cluster)

    def context(self, cluster: str) -> str:
        return f"kind-{self.kind_name(cluster)}"

    def check(self) -> KindAssets:
        """The images to use; :class:`KindUnavailable` with the reason when tools, images or Docker are missing."""
        reason = missing_tool(self.which)
        if reason is not None:
            raise KindUnavailable(reason)
        assets = KindAssets.find(self.environ)
        try:
            self.runner(Command(("docker", "info", "--format", "{{.ServerVersion}}")))
        except CommandFailed as exc:
            first = (exc.output.strip().splitlines() or ["no output"])[0]
            raise KindUnavailable(
                f"kind provider skipped: the Docker daemon does not answer ({first}); start one with "
                f"`bash hack/docker-up.sh`"
            ) from exc
        try:
            self.runner(Command(("docker", "image", "inspect", "--format", "{{.Id}}", assets.node_image)))
        except CommandFailed as exc:
            # kind would pull a missing node image, and no registry is reachable here.
            raise KindUnavailable(
                f"kind provider skipped: Docker has no {assets.node_image}; build it with `{BUILD_COMMAND}`"
            ) from exc
        return assets

    def up(self) -> KindEnvironment:
        """Create the clusters, then install the manager and register the workers as the admin guide says; on
        failure delete what was made."""
        assets = self.assets = self.check()
        self.workdir.mkdir(parents=True, exist_ok=True)
        # The guide's commands run in the repository, with kind on PATH and the kind clusters' kubeconfig.
        guide_env = (
            ("KUBECONFIG", str(self.kind_kubeconfig)),
            ("PATH", f"{assets.folder}{os.pathsep}{self.environ.get('PATH', '')}"),
        )
        try:
            for cluster, config in CLUSTER_CONFIGS.items():
                self._run(
                    str(assets.kind), "create", "cluster",
                    "--config", str(self.repo / config),
                    "--image", assets.node_image,
                    "--kubeconfig", str(self.kind_kubeconfig),
                    "--wait", "120s",
                )  # fmt: skip
                self.created.append(self.kind_name(cluster))
            for block in guide_blocks():
                self.runner(Command(("bash", "-euo", "pipefail", "-c", block), guide_env, self.repo))
            self._kubectl(
                "management", "-n", NAMESPACE,
                "wait", "--for=condition=Available", f"deployment/{DEPLOYMENT}", "--timeout=300s",
            )  # fmt: skip
            self._write_scenario_kubeconfig()
        except BaseException:
            self.down()
            raise
        return KindEnvironment(self.scenario_kubeconfig, list(CLUSTER_CONFIGS), self.kind_kubeconfig, assets)

    def down(self) -> None:
        """Delete the clusters this provider created, newest first; one failed deletion does not stop the rest."""
        failures: list[str] = []
        kind = str(self.assets.kind) if self.assets else "kind"
        while self.created:
            name = self.created.pop()
            try:
                self._run(
                    kind, "delete", "cluster", "--name", name, "--kubeconfig", str(self.kind_kubeconfig)
                )
            except CommandFailed as exc:
                failures.append(str(exc))
        for failure in failures:
            print(f"kind provider: clean-up failed: {failure}", file=sys.stderr)

    def _run(self, *argv: str) -> str:
        return self.runner(Command(argv))

    def _kubectl(self, cluster: str, *args: str) -> str:
        return self._run(
            "kubectl", "--kubeconfig", str(self.kind_kubeconfig), "--context", self.context(cluster), *args
        )

    def _write_scenario_kubeconfig(self) -> None:
        """The clusters' part of kind's kubeconfig, each context renamed to the cluster's scenario name."""
        config: dict[str, Any] = yaml.safe_load(self.kind_kubeconfig.read_text(encoding="utf-8"))
        names = {self.context(cluster): cluster for cluster in CLUSTER_CONFIGS}
        contexts = [c for c in config.get("contexts") or [] if c.get("name") in names]
        for key, field_name in (("clusters", "cluster"), ("users", "user")):
            used = {c["context"][field_name] for c in contexts}
            config[key] = [entry for entry in config.get(key) or [] if entry.get("name") in used]
        for context in contexts:
            context["name"] = names[context["name"]]
        config["contexts"] = contexts
        config["current-context"] = "management"
        self.scenario_kubeconfig.write_text(yaml.safe_dump(config), encoding="utf-8")


def delete_all(
    repo: Path, workdir: Path, runner: Runner = run_command, kind_config: Path | None = None
) -> list[str]:
    """Delete whichever of the clusters of clusters/ exist (``hack/kind-up.sh --down``), newest first; return
    their names in that order."""
    assets = KindAssets.find()
    existing = set(runner(Command((str(assets.kind), "get", "clusters"))).split())
    names = [kind_cluster_name(repo, cluster) for cluster in CLUSTER_CONFIGS]
    provider = KindProvider(
        repo,
        workdir,
        runner,
        created=[n for n in names if n in existing],
        assets=assets,
        kind_config=kind_config,
    )
    deleted = list(reversed(provider.created))
    provider.down()
    return deleted


def main(argv: list[str] | None = None) -> int:
    """``up``: the clusters of clusters/ with the manager installed and the workers registered, kept after the
    command ends; ``down``: those clusters deleted. hack/kind-up.sh runs this once it has built the images."""
    parser = argparse.ArgumentParser(prog="python3 -m tests.e2e.kind", description=main.__doc__)
    parser.add_argument("action", choices=("up", "down"))
    parser.add_argument("--workdir", type=Path, required=True, help="where the scenario kubeconfig goes")
    parser.add_argument(
        "--kind-kubeconfig", type=Path, help="where kind writes its contexts (default: the workdir)"
    )
    args = parser.parse_args(argv)
    workdir: Path = args.workdir.expanduser()
    kind_config: Path | None = args.kind_kubeconfig.expanduser() if args.kind_kubeconfig else None
    try:
        if args.action == "down":
            deleted = delete_all(REPO, workdir, kind_config=kind_config)
            print(f"deleted {', '.join(deleted)}" if deleted else "no kind clusters of clusters/ to delete")
            return 0
        environment = KindProvider(REPO, workdir, kind_config=kind_config).up()
    except KindUnavailable as exc:
        print(str(exc).removeprefix("kind provider skipped: "), file=sys.stderr)
        return 1
    except CommandFailed as exc:
        print(f"kind clusters not made: {exc}", file=sys.stderr)
        return 1
    print(f"kind clusters up: {', '.join(environment.clusters)}; the manager runs in management")
    print(f"kubeconfig: {environment.kubeconfig} (contexts {', '.join(environment.clusters)})")
    print(
        f"kind's contexts (kind-mq-management, ...), which the admin guide uses, are in {environment.kind_kubeconfig}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
