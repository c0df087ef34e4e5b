"""The kind provider's orchestration, against a runner that records the commands instead of running them."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.kind import (
    ASSETS_ENV,
    REPO,
    Command,
    CommandFailed,
    KindAssets,
    KindProvider,
    KindUnavailable,
    delete_all,
    guide_blocks,
    missing_tool,
)
from tests.e2e.providers import selected_provider
from tests.support import jobset
from tests.support.docblocks import shell_blocks

NODE_IMAGE = "multiqueue.local/kind/node:v1.37.2"


class RecordingRunner:
    """Records each command; acts as kind does on ``create cluster`` (adds the context of the cluster its config
    names to the kubeconfig) and on ``get clusters``; fails the first command that contains ``fail_on``."""

    def __init__(self, fail_on: str | None = None, existing: tuple[str, ...] = ()) -> None:
        self.commands: list[Command] = []
        self.fail_on = fail_on
        self.existing = existing

    def __call__(self, command: Command) -> str:
        self.commands.append(command)
        line = " ".join(command.argv)
        if self.fail_on is not None and self.fail_on in line:
            raise CommandFailed(command, 1, f"{Path(command.argv[0]).name}: it went wrong")
        argv = command.argv
        if argv[1:3] == ("create", "cluster"):
            name = yaml.safe_load(Path(_flag(argv, "--config")).read_text())["name"]
            self._add_context(Path(_flag(argv, "--kubeconfig")), name)
        if argv[1:3] == ("get", "clusters"):
            return "\n".join(self.existing) + "\n"
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


@pytest.fixture
def assets(tmp_path: Path) -> KindAssets:
    """What hack/build-kind-images.sh leaves: an executable kind and the node image's name."""
    folder = tmp_path / "assets"
    folder.mkdir()
    (folder / "kind").write_text("#!/bin/sh\n")
    (folder / "kind").chmod(0o755)
    (folder / "node-image").write_text(NODE_IMAGE + "\n")
    return KindAssets(folder)


def provider(tmp_path: Path, runner: RecordingRunner, assets: KindAssets) -> KindProvider:
    environ = {ASSETS_ENV: str(assets.folder), "PATH": "/usr/bin"}
    return KindProvider(REPO, tmp_path / "kind", runner=runner, which=everything_on_path, environ=environ)


def expected_up(kind: KindProvider, assets: KindAssets) -> list[str]:
    kc = str(kind.kind_kubeconfig)
    creates = [
        f"{assets.kind} create cluster --config {REPO}/clusters/kind-{cluster}.yaml --image {NODE_IMAGE} "
        f"--kubeconfig {kc} --wait 120s"
        for cluster in ("management", "worker-1", "worker-2")
    ]
    return [
        "docker info --format {{.ServerVersion}}",
        f"docker image inspect --format {{{{.Id}}}} {NODE_IMAGE}",
        *creates,
        *(f"bash -euo pipefail -c {block}" for block in guide_blocks()),
        f"kubectl --kubeconfig {kc} --context kind-mq-management -n multiqueue-system wait "
        "--for=condition=Available deployment/multiqueue-manager --timeout=300s",
    ]


def deletions(kind: KindProvider, assets: KindAssets, *names: str) -> list[str]:
    return [
        f"{assets.kind} delete cluster --name {name} --kubeconfig {kind.kind_kubeconfig}" for name in names
    ]


def test_up_issues_every_step_in_order_and_down_deletes_newest_first(
    tmp_path: Path, assets: KindAssets
) -> None:
    runner = RecordingRunner()
    kind = provider(tmp_path, runner, assets)
    environment = kind.up()
    assert runner.lines == expected_up(kind, assets)
    kind.down()
    assert runner.lines[len(expected_up(kind, assets)) :] == deletions(
        kind, assets, "mq-worker-2", "mq-worker-1", "mq-management"
    )
    assert environment.clusters == ["management", "worker-1", "worker-2"]


def test_the_admin_guides_install_and_register_blocks_run_as_written_in_the_repository(
    tmp_path: Path, assets: KindAssets
) -> None:
    runner = RecordingRunner()
    kind = provider(tmp_path, runner, assets)
    kind.up()
    guide = [c for c in runner.commands if c.argv[0] == "bash"]
    install, register = guide_blocks()
    assert [c.argv[-1] for c in guide] == [install, register]
    assert "docker build -f deploy/Dockerfile" in install and "apply -k deploy/" in install
    assert register.count("deploy/register-worker.sh") == 2
    for command in guide:
        assert command.cwd == REPO
        env = dict(command.env)
        assert env["KUBECONFIG"] == str(kind.kind_kubeconfig)
        assert env["PATH"] == f"{assets.folder}:/usr/bin", "the kind command built here comes first"
    assert not [c for c in runner.commands if c.argv[0] != "bash" and c.env], (
        "only the guide's blocks get env"
    )


def test_getting_started_brings_the_clusters_up_and_down_with_kind_up(tmp_path: Path) -> None:
    up, _, down = shell_blocks("docs/getting-started.md", "## Trying it on kind")
    assert up.strip() == "bash hack/kind-up.sh"
    assert down.strip() == "bash hack/kind-up.sh --down"


def test_scenarios_get_contexts_named_after_the_clusters(tmp_path: Path, assets: KindAssets) -> None:
    runner = RecordingRunner()
    environment = provider(tmp_path, runner, assets).up()
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
        ("--config /src/x/clusters/kind-management.yaml", []),
        ("kind-worker-2.yaml", ["mq-worker-1", "mq-management"]),
        ("docker build", ["mq-worker-2", "mq-worker-1", "mq-management"]),
        ("register-worker.sh --name worker-2", ["mq-worker-2", "mq-worker-1", "mq-management"]),
        ("--for=condition=Available", ["mq-worker-2", "mq-worker-1", "mq-management"]),
    ],
)
def test_a_failed_step_stops_the_run_and_deletes_only_the_clusters_it_created(
    tmp_path: Path, assets: KindAssets, failing: str, created: list[str]
) -> None:
    failing = failing.replace("/src/x", str(REPO))
    runner = RecordingRunner(fail_on=failing)
    kind = provider(tmp_path, runner, assets)
    with pytest.raises(CommandFailed, match="it went wrong"):
        kind.up()
    planned = expected_up(kind, assets)
    failed_at = next(i for i, line in enumerate(planned) if failing in line)
    assert runner.lines == [*planned[: failed_at + 1], *deletions(kind, assets, *created)]
    assert kind.created == []


def test_a_failed_deletion_does_not_stop_the_others(
    tmp_path: Path, assets: KindAssets, capsys: pytest.CaptureFixture[str]
) -> None:
    runner = RecordingRunner()
    kind = provider(tmp_path, runner, assets)
    kind.up()
    runner.fail_on = "delete cluster --name mq-worker-1"
    kind.down()
    assert runner.lines[-3:] == deletions(kind, assets, "mq-worker-2", "mq-worker-1", "mq-management")
    assert "clean-up failed: " in capsys.readouterr().err


def test_down_deletes_only_the_clusters_of_clusters_that_exist(
    tmp_path: Path, assets: KindAssets, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ASSETS_ENV, str(assets.folder))
    runner = RecordingRunner(existing=("mq-worker-1", "someone-elses", "mq-management"))
    assert delete_all(REPO, tmp_path, runner) == ["mq-worker-1", "mq-management"]
    kind = KindProvider(REPO, tmp_path)
    assert runner.lines == [
        f"{assets.kind} get clusters",
        *deletions(kind, assets, "mq-worker-1", "mq-management"),
    ]


@pytest.mark.parametrize("absent", ["docker", "kubectl", "bash"])
def test_a_missing_tool_is_the_skip_reason_and_nothing_runs(
    tmp_path: Path, assets: KindAssets, absent: str
) -> None:
    runner = RecordingRunner()

    def which(tool: str) -> str | None:
        return None if tool == absent else f"/usr/bin/{tool}"

    kind = KindProvider(
        REPO, tmp_path / "kind", runner=runner, which=which, environ={ASSETS_ENV: str(assets.folder)}
    )
    with pytest.raises(KindUnavailable) as raised:
        kind.up()
    assert str(raised.value) == f"kind provider skipped: {absent} not found on PATH"
    assert runner.commands == []
    assert missing_tool(which) == str(raised.value)


def test_images_not_built_are_the_skip_reason_naming_the_build_command(tmp_path: Path) -> None:
    runner = RecordingRunner()
    environ = {"MULTIQUEUE_KIND_CACHE": str(tmp_path / "cache")}
    kind = KindProvider(REPO, tmp_path / "kind", runner=runner, which=everything_on_path, environ=environ)
    with pytest.raises(KindUnavailable, match=r"build them with `bash hack/build-kind-images.sh`") as raised:
        kind.up()
    assert str(tmp_path / "cache" / "v1.37.2") in str(raised.value)
    assert runner.commands == []


def test_the_assets_folder_comes_from_the_environment_then_the_cache(
    tmp_path: Path, assets: KindAssets
) -> None:
    assert KindAssets.find({ASSETS_ENV: str(assets.folder)}) == assets
    assert KindAssets.find({ASSETS_ENV: str(assets.folder)}).node_image == NODE_IMAGE
    cache = tmp_path / "cache"
    (cache / "v1.37.2").mkdir(parents=True)
    for name in ("kind", "node-image"):
        (cache / "v1.37.2" / name).write_bytes((assets.folder / name).read_bytes())
    (cache / "v1.37.2" / "kind").chmod(0o755)
    assert KindAssets.find({"MULTIQUEUE_KIND_CACHE": str(cache)}).folder == cache / "v1.37.2"


def test_a_docker_daemon_that_does_not_answer_is_the_skip_reason(tmp_path: Path, assets: KindAssets) -> None:
    runner = RecordingRunner(fail_on="docker info")
    kind = provider(tmp_path, runner, assets)
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


def test_a_node_image_docker_does_not_have_is_the_skip_reason_before_kind_could_pull_it(
    tmp_path: Path, assets: KindAssets
) -> None:
    runner = RecordingRunner(fail_on="docker image inspect")
    kind = provider(tmp_path, runner, assets)
    with pytest.raises(KindUnavailable) as raised:
        kind.up()
    assert str(raised.value) == (
        f"kind provider skipped: Docker has no {NODE_IMAGE}; build it with `bash hack/build-kind-images.sh`"
    )
    assert not any("create cluster" in line for line in runner.lines)


def test_in_a_kubeconfig_shared_with_other_clusters_the_scenarios_get_only_the_kind_ones(
    tmp_path: Path, assets: KindAssets
) -> None:
    """hack/kind-up.sh lets kind write to the user's own kubeconfig: the scenario kubeconfig keeps none of the
    user's other clusters, users or contexts."""
    own = tmp_path / "config"
    own.write_text(yaml.safe_dump(_kubeconfig_of("prod", "https://prod.example:6443")))
    runner = RecordingRunner()
    kind = KindProvider(
        REPO,
        tmp_path / "kind",
        runner=runner,
        which=everything_on_path,
        environ={ASSETS_ENV: str(assets.folder)},
        kind_config=own,
    )
    environment = kind.up()
    assert environment.kind_kubeconfig == own
    scenario = yaml.safe_load(environment.kubeconfig.read_text())
    for key in ("clusters", "users", "contexts"):
        assert not [e for e in scenario[key] if "prod" in e["name"]], key
    assert len(scenario["clusters"]) == len(scenario["users"]) == 3
    assert "kind-prod" in {c["name"] for c in yaml.safe_load(own.read_text())["contexts"]}, "the user's stay"


def test_the_admin_guides_jobset_commands_load_the_image_and_manifest_build_jobset_makes() -> None:
    """The guide's JobSet block, which the kind JobSet scenarios run, names the image of the pinned JobSet version
    and the manifest that runs it; its removal block takes away the same manifest and the CRD."""
    install, remove = shell_blocks(jobset.GUIDE, jobset.KIND_SECTION)
    image = f"multiqueue.local/jobset:{jobset.version()}"
    assert f"kind load docker-image {image} " in install
    assert f'apply --server-side -f "$jobset/{jobset.LOCAL_MANIFEST}"' in install
    assert f'apply --server-side -f "$jobset/{jobset.CRD_FILE}"' in install
    assert f'delete --ignore-not-found -f "$jobset/{jobset.LOCAL_MANIFEST}"' in remove
    assert f'delete --ignore-not-found -f "$jobset/{jobset.CRD_FILE}"' in remove
