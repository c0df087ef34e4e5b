"""The command line: one-line errors with exit status 2, and the offline manifest check."""

from __future__ import annotations

import importlib.metadata
import socket
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from multiqueue import DISTRIBUTION, __version__
from multiqueue.api import manifests
from multiqueue.cli import main
from multiqueue.kube.client import unanswered

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "multiqueue", *args], capture_output=True, text=True, check=False, timeout=60
    )


def test_unknown_command_is_one_line_and_exit_2() -> None:
    result = run("no-such-command")
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert "no-such-command" in result.stderr
    assert "Traceback" not in result.stderr


def test_help_lists_commands() -> None:
    result = run("--help")
    assert result.returncode == 0
    assert "validate" in result.stdout


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert __version__ in capsys.readouterr().out


def test_the_multiqueue_command_comes_from_the_installed_distribution() -> None:
    """Installed under a name PyPI does not give to another project; the command keeps its name."""
    scripts = importlib.metadata.entry_points(group="console_scripts", name="multiqueue")
    ours = [s for s in scripts if s.dist is not None and s.dist.name == DISTRIBUTION]
    assert DISTRIBUTION != "multiqueue" and [s.value for s in ours] == ["multiqueue.cli:main"]
    assert __version__ == importlib.metadata.version(DISTRIBUTION) != "0.0.0+unknown"


def test_examples_are_valid(capsys: pytest.CaptureFixture[str]) -> None:
    files = sorted(str(p) for p in EXAMPLES.glob("*.yaml"))
    assert files
    assert main(["validate", *files]) == 0
    assert "0 invalid" in capsys.readouterr().out


def test_invalid_manifest_reports_upstream_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: bad}\nspec:\n  parallelism: -1\n"
        "  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: c, image: i}]\n"
    )
    assert main(["validate", str(bad)]) == 1
    out = capsys.readouterr().out
    assert 'Job.batch "bad" is invalid' in out
    assert "spec.parallelism: Invalid value: -1: must be greater than or equal to 0" in out


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        pytest.param("a: [unclosed", "input.yaml:1:13: not valid YAML: expected ',' or ']'", id="bad-yaml"),
        pytest.param(
            "kind: Job\nmetadata:\n  name: x\n bad: y\n", "input.yaml:4:2: not valid YAML", id="bad-indent"
        ),
        pytest.param("- just\n- a list\n", "must be a Kubernetes object", id="not-an-object"),
        pytest.param("", "no Job or CronJob manifests found", id="empty"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path: Path, content: str, problem: str) -> None:
    path = tmp_path / "input.yaml"
    path.write_text(content)
    result = run("validate", str(path))
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert problem in result.stderr


def test_missing_file_is_one_line_exit_2(tmp_path: Path) -> None:
    result = run("validate", str(tmp_path / "absent.yaml"))
    assert result.returncode == 2
    assert "cannot read" in result.stderr


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        pytest.param("management: {kubeconfig: k}\nworkers: []\nworkerSecrets: {enabled: false}\n", "no workers", id="no-workers"),
        pytest.param("management: {kubeconfig: k}\nworkers: [{name: Bad_Name, kubeconfig: k}]\n", "workers.0.name", id="bad-worker-name"),
        pytest.param("management: {kubeconfig: k}\nworkers: [{name: w, kubeconfig: k}]\nplacement: Random\n", "placement", id="bad-policy"),
        pytest.param("workers: [{name: w, kubeconfig: k}]\n", "management", id="no-management"),
    ],
)  # fmt: skip
def test_bad_manager_config_is_one_line_naming_the_field(tmp_path: Path, content: str, problem: str) -> None:
    config = tmp_path / "manager.yaml"
    config.write_text(content)
    for command in (["manager"], ["status"], ["logs", "some-job"]):
        result = run(*command, "--config", str(config))
        assert result.returncode == 2, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and problem in lines[0], lines


def test_a_config_that_is_not_yaml_names_its_line(tmp_path: Path) -> None:
    config = tmp_path / "manager.yaml"
    config.write_text("name: m\nmanagement: {kubeconfig: k\n")
    result = run("status", "--config", str(config))
    assert result.returncode == 2
    assert (
        result.stderr.strip()
        == f"multiqueue: error: config {config}:3:1: not valid YAML: expected ',' or '}}', but got '<stream end>'"
    )


def test_unreadable_kubeconfig_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "manager.yaml"
    config.write_text(
        "management: {kubeconfig: missing.yaml}\nworkers: [{name: w, kubeconfig: missing.yaml}]\n"
    )
    result = run("status", "--config", str(config))
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert "cannot read kubeconfig" in result.stderr


JOB_YAML = """apiVersion: batch/v1
kind: Job
metadata: {{name: {name}}}
spec:
  {spec}
  template:
    spec:
      restartPolicy: Never
      containers: [{{name: c, image: busybox}}]
"""


@pytest.mark.parametrize(
    ("spec", "code", "said"),
    [
        pytest.param("paralelism: 2", 1, 'job/j: Job in version "v1" cannot be handled as a Job: strict decoding '
                     'error: unknown field "spec.paralelism"', id="unknown-field"),
        pytest.param('parallelism: "2"', 1, 'job/j: Job in version "v1" cannot be handled as a Job: json: cannot '
                     "unmarshal string into Go struct field JobSpec.spec.parallelism of type int32", id="wrong-type"),
        pytest.param("managedBy: multiqueue.dev/dispacher", 0, 'warning: job/j: spec.managedBy '
                     '"multiqueue.dev/dispacher" is not "multiqueue.dev/dispatcher"', id="near-miss-managed-by"),
        pytest.param("managedBy: kubernetes.io/job-controler", 0, 'warning: job/j: spec.managedBy '
                     '"kubernetes.io/job-controler" is not "kubernetes.io/job-controller"', id="near-miss-built-in"),
    ],
)  # fmt: skip
def test_validate_meets_what_kubectl_meets_and_warns_of_a_near_miss_managed_by(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: str, code: int, said: str
) -> None:
    manifest = tmp_path / "job.yaml"
    manifest.write_text(JOB_YAML.format(name="j", spec=spec))
    assert main(["validate", str(manifest)]) == code
    assert f"{manifest}: {said}" in capsys.readouterr().out


@pytest.mark.parametrize(
    "managed_by", ["multiqueue.dev/dispatcher", "kubernetes.io/job-controller", "example.com/batch-runner"]
)
def test_validate_takes_any_managed_by_that_is_not_a_near_miss(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], managed_by: str
) -> None:
    manifest = tmp_path / "job.yaml"
    manifest.write_text(JOB_YAML.format(name="j", spec=f"managedBy: {managed_by}"))
    assert main(["validate", str(manifest)]) == 0
    assert "warning" not in capsys.readouterr().out


def test_a_cronjobs_near_miss_managed_by_is_found_in_its_job_template() -> None:
    cronjob = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "spec": {"jobTemplate": {"spec": {"managedBy": "Multiqueue.dev/dispatcher"}}},
    }
    assert manifests.managed_by_warning(cronjob).startswith(
        'spec.managedBy "Multiqueue.dev/dispatcher" is not "multiqueue.dev/dispatcher"'
    )


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("command", [["status"], ["logs", "some-job"]])
def test_a_cluster_out_of_reach_is_a_runtime_failure_in_one_plain_line(
    tmp_path: Path, command: list[str]
) -> None:
    """Exit 1, not 2: the command line and the config were right; the message names the address and the cause."""
    port = _closed_port()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: down\n"
        f"clusters: [{{name: down, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n"
        "users: [{name: down, user: {token: t}}]\ncontexts: [{name: down, context: {cluster: down, user: down}}]\n"
    )
    config = tmp_path / "manager.yaml"
    config.write_text(
        f"management: {{kubeconfig: {kubeconfig}}}\nworkers: [{{name: w, kubeconfig: {kubeconfig}}}]\n"
    )
    result = run(*command, "--config", str(config))
    assert result.returncode == 1, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert f"cannot connect to 127.0.0.1:{port} (connection refused)" in line, line


@pytest.mark.parametrize(
    ("error", "said"),
    [
        pytest.param(TimeoutError(), "no answer in time", id="timeout"),
        pytest.param(aiohttp.ServerDisconnectedError(), "the server closed the connection without answering", id="closed"),
        pytest.param(aiohttp.ClientPayloadError("truncated"), "ClientPayloadError: truncated", id="other"),
    ],
)  # fmt: skip
def test_a_request_without_an_answer_says_why_in_plain_words(
    error: aiohttp.ClientError | TimeoutError, said: str
) -> None:
    assert unanswered(error) == said


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (0.0, "0"),
        (1.5, "1.5"),
        (4.0, "4"),
        (512 * 2**20, "512Mi"),
        (8 * 2**30, "8Gi"),
        (1.5 * 2**30, "1.5Gi"),
        (1000.0, "1000"),
    ],
)
def test_capacity_amounts_read_as_quantities(value: float, shown: str) -> None:
    from multiqueue.cli import _amount

    assert _amount(value) == shown
