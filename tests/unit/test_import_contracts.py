"""Each import contract in .importlinter catches the wrong import it exists to forbid.

The package is copied aside, one wrong import is added to one module, and lint-imports must report the contract
that forbids it as broken. A contract no case breaks could be kept by any tree, so every contract needs a case.
"""

from __future__ import annotations

import configparser
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.processes import REPO

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

# contract id -> (module file to change, the wrong import added to it)
WRONG_IMPORTS = {
    "layers": ("api/meta.py", "import multiqueue.kube.client"),
    "product-without-server": ("dispatch/mirror.py", "import multiqueue.apiserver.rules.apply"),
    "server-stands-on-rules": ("apiserver/gc.py", "import multiqueue.kube.errors"),
    "loop-ground-floor": ("loop/tasks.py", "import multiqueue.api.meta"),
    "dispatch-layers": ("dispatch/placement.py", "import multiqueue.dispatch.executor"),
    "controller-layers": ("controllers/job.py", "import multiqueue.controllers.cronjob"),
    "api-no-io": ("api/meta.py", "import asyncio"),
    "decide-no-io": ("dispatch/placement.py", "import asyncio"),
    "http-client": ("dispatch/executor.py", "import aiohttp"),
    "kubernetes-client": ("dispatch/executor.py", "import kubernetes"),
    "storage": ("local/kubelet.py", "import sqlite3"),
}


def _contracts() -> dict[str, str]:
    config = configparser.ConfigParser()
    config.read(REPO / ".importlinter")
    prefix = "importlinter:contract:"
    return {s.removeprefix(prefix): config[s]["name"] for s in config.sections() if s.startswith(prefix)}


def _lint(tree: Path) -> str:
    if not LINT_IMPORTS.exists():
        pytest.fail(f"{LINT_IMPORTS} is missing: pip install -e '.[dev]' installs import-linter")
    done = subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--config", str(tree / ".importlinter")],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=120,
    )
    # Long contract names wrap; join the lines so each verdict follows its whole name.
    return re.sub(r"\s+", " ", done.stdout + done.stderr)


def _tree(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    shutil.copytree(
        REPO / "multiqueue", tree / "multiqueue", ignore=shutil.ignore_patterns("__pycache__", "static")
    )
    shutil.copy(REPO / ".importlinter", tree / ".importlinter")
    return tree


def test_every_contract_has_a_wrong_import_that_breaks_it() -> None:
    assert set(_contracts()) == set(WRONG_IMPORTS)


def test_the_tree_as_it_is_keeps_every_contract(tmp_path: Path) -> None:
    report = _lint(_tree(tmp_path))
    for name in _contracts().values():
        assert f"{name} KEPT" in report, report


@pytest.mark.parametrize("contract", sorted(WRONG_IMPORTS))
def test_a_wrong_import_breaks_its_contract(tmp_path: Path, contract: str) -> None:
    tree = _tree(tmp_path)
    module, line = WRONG_IMPORTS[contract]
    path = tree / "multiqueue" / module
    path.write_text(path.read_text() + f"\n{line}  # deliberately wrong\n")
    report = _lint(tree)
    assert f"{_contracts()[contract]} BROKEN" in report, report
