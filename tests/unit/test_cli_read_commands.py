"""What ``multiqueue explain`` and ``status`` load and how they run: only the modules their path needs are
imported, and their one read of the clusters runs without garbage collection (the collector is left as it was)."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from multiqueue import cli
from multiqueue.dispatch import inspect
from multiqueue.dispatch.explain import Explanation
from multiqueue.local import upstream
from tests.support.processes import REPO

# Loaded by the commands that need them (validate, logs, the local clusters, the manager), never by explain.
NOT_FOR_EXPLAIN = (
    "multiqueue.api.manifests",
    "multiqueue.apiserver",
    "multiqueue.dashboard",
    "multiqueue.dispatch.joblogs",
    "multiqueue.dispatch.manager",
    "multiqueue.local",
    "cryptography",
)


def test_the_cli_imports_none_of_the_modules_explain_does_not_use() -> None:
    shown = subprocess.run(
        [sys.executable, "-c", "import sys, multiqueue.cli; print('\\n'.join(sorted(sys.modules)))"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split()
    assert "multiqueue.dispatch.inspect" in shown
    loaded = [m for m in shown if any(m == n or m.startswith(n + ".") for n in NOT_FOR_EXPLAIN)]
    assert loaded == []


@pytest.mark.parametrize("command", [["local", "up"], ["local", "demo"]])
def test_help_of_the_local_commands_names_the_upstream_build_command_and_cache(
    command: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Filled in when help is printed, from the module that starts control planes."""
    monkeypatch.setenv(upstream.CACHE_VARIABLE, "/cache/100%")
    monkeypatch.setenv("COLUMNS", "500")
    with pytest.raises(SystemExit):
        cli.main([*command, "--help"])
    shown = capsys.readouterr().out
    assert f"(built by `{upstream.BUILD_COMMAND}`)" in shown
    assert f"else {upstream.cache_dir()})" in shown
    assert "/cache/100%/" in shown


def _config(tmp_path: Path) -> str:
    config = tmp_path / "manager.yaml"
    config.write_text("management: {kubeconfig: k}\nworkers: [{name: w, kubeconfig: k}]\n")
    return str(config)


def _explanation() -> Explanation:
    return Explanation(
        "Job", "default/j", "Waiting", {}, None, None, None, "Balanced", None, "waiting", "", "", ()
    )


@pytest.mark.parametrize("enabled", [True, False])
def test_explain_reads_without_collections_and_leaves_the_collector_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], enabled: bool
) -> None:
    during: list[bool] = []

    async def explain(*args: Any, **kwargs: Any) -> Explanation:
        during.append(gc.isenabled())
        return _explanation()

    monkeypatch.setattr(inspect, "explain", explain)
    (gc.enable if enabled else gc.disable)()
    try:
        assert cli.main(["explain", "j", "--config", _config(tmp_path), "-o", "json"]) == 0
        assert gc.isenabled() is enabled
    finally:
        gc.enable()
    assert during == [False]
    assert '"decision": "waiting"' in capsys.readouterr().out


def test_status_reads_without_collections_and_collects_again_after_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    during: list[bool] = []

    async def status(*args: Any, **kwargs: Any) -> Any:
        during.append(gc.isenabled())
        raise OSError("unreachable")

    monkeypatch.setattr(inspect, "status", status)
    assert gc.isenabled()
    assert cli.main(["status", "--config", _config(tmp_path)]) == cli.RUNTIME_FAILURE
    assert during == [False]
    assert gc.isenabled()
    assert "unreachable" in capsys.readouterr().err
