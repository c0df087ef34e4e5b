"""clusters/local.yaml: workers as names or as entries with labels and capacity, carried into the manager's config
that ``local up`` runs and writes to manager.yaml."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from multiqueue.dispatch.config import ConfigError
from multiqueue.local.config import DEFAULT_CONFIG, load_local_config
from multiqueue.local.up import LocalClusters
from tests.support.docblocks import named_files

CLUSTERS = [{"name": n} for n in ("management", "worker-1", "worker-2")]


def _load(tmp_path: Path, manager: dict[str, Any]) -> LocalClusters:
    path = tmp_path / "local.yaml"
    path.write_text(yaml.safe_dump({"clusters": CLUSTERS, "manager": manager}))
    return LocalClusters(load_local_config(path), tmp_path / "state")


def test_workers_given_as_names_or_as_entries_reach_the_managers_config(tmp_path: Path) -> None:
    entry = {
        "name": "worker-2",
        "labels": {"gpu": "a100"},
        "capacity": {"maxJobs": 3, "resources": {"cpu": "8"}},
    }
    clusters = _load(
        tmp_path,
        {"workers": ["worker-1", entry], "mirrorTTLSecondsAfterFinished": 60, "namespaces": ["team-a"]},
    )
    config = clusters.manager_config()
    plain, rich = config.workers
    assert (plain.name, plain.labels, plain.capacity.max_jobs, plain.capacity.resources) == (
        "worker-1",
        {},
        None,
        {},
    )
    assert (rich.name, rich.labels) == ("worker-2", {"gpu": "a100"})
    assert (rich.capacity.max_jobs, rich.capacity.resources) == (3, {"cpu": "8"})
    assert (rich.context, config.mirror_ttl_after_finished, config.namespaces) == (
        "worker-2",
        60.0,
        ["team-a"],
    )


@pytest.mark.parametrize(
    ("manager", "problem"),
    [
        pytest.param({"workers": [{"name": "worker-9"}]}, "manager names cluster 'worker-9'", id="unknown-worker"),
        pytest.param({"workers": [{"name": "worker-1", "capacity": {"resources": {"cpu": "lots"}}}]}, "'lots' is not a quantity", id="bad-quantity"),
        pytest.param({"workers": [{"name": "worker-1", "label": {}}]}, "Extra inputs are not permitted", id="misspelt-key"),
        pytest.param({"workers": ["management"]}, "cannot also be a worker", id="management-as-worker"),
    ],
)  # fmt: skip
def test_a_bad_worker_entry_is_one_line_naming_it(
    tmp_path: Path, manager: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ConfigError, match=problem):
        _load(tmp_path, manager)


def test_the_shipped_local_yaml_labels_its_workers() -> None:
    workers = load_local_config(DEFAULT_CONFIG).manager
    assert workers is not None
    assert {w.name: w.labels for w in workers.workers} == {
        "worker-1": {"region": "eu"},
        "worker-2": {"region": "us"},
    }


@pytest.mark.parametrize(
    ("clusters", "control_plane", "error"),
    [
        (
            [{"name": "w", "extraArgs": {"kube-proxy": ["--v=2"]}}],
            "upstream",
            "clusters.0.extraArgs.kube-proxy.[key]: Input should be 'etcd', 'kube-apiserver', "
            "'kube-controller-manager' or 'kube-scheduler'",
        ),
        (
            [{"name": "w", "extraArgs": {"kube-apiserver": ["v=2"]}}],
            "upstream",
            "kube-apiserver: 'v=2' is not a flag",
        ),
        (
            [{"name": "w", "extraArgs": {"kube-controller-manager": ["--kube-api-qps=1000"]}}],
            "embedded",
            "cluster 'w' has extraArgs, which only an upstream control plane takes: set controlPlane: upstream",
        ),
        (
            [{"name": "w", "extraArgs": {"kube-controller-manager": ["--kube-api-qps=1000"]}}],
            None,
            "cluster 'w' has extraArgs, which only an upstream control plane takes",
        ),
        (
            [{"name": "w", "extraArgs": {"kube-controller-manager": ["--kube-api-qps=1000"]}}],
            "upstream",
            None,
        ),
        ([{"name": "w", "extraArgs": {}}], "embedded", None),
    ],
    ids=["unknown component", "not a flag", "embedded", "embedded by default", "upstream", "empty"],
)
def test_extra_args_name_upstream_components_and_need_an_upstream_control_plane(
    tmp_path: Path, clusters: list[dict[str, Any]], control_plane: str | None, error: str | None
) -> None:
    path = tmp_path / "local.yaml"
    path.write_text(
        yaml.safe_dump({"clusters": clusters} | ({"controlPlane": control_plane} if control_plane else {}))
    )
    if error is None:
        assert load_local_config(path).clusters[0].extra_args == clusters[0]["extraArgs"]
        return
    with pytest.raises(ConfigError) as raised:
        load_local_config(path)
    assert error in str(raised.value)


def test_the_admin_guides_extra_args_example_loads(tmp_path: Path) -> None:
    path = tmp_path / "fast-workers.yaml"
    path.write_text(named_files("docs/admin-guide.md")["fast-workers.yaml"])
    config = load_local_config(path)
    assert config.clusters[1].extra_args["kube-controller-manager"] == [
        "--kube-api-qps=1000",
        "--kube-api-burst=1000",
        "--concurrent-job-syncs=50",
    ]
