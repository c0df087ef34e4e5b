"""The reference pages in docs/ are generated from the code; they must say what the code does."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from multiqueue.dispatch.config import ManagerConfig
from multiqueue.telemetry import METRICS

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_generate", DOCS / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def documented_metrics() -> dict[str, tuple[str, tuple[str, ...]]]:
    """The metrics table of docs/reference/metrics.md: name -> (type, label names)."""
    table: dict[str, tuple[str, tuple[str, ...]]] = {}
    for line in (DOCS / "reference" / "metrics.md").read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`"):
            labels = tuple(label.strip(" `") for label in cells[2].split(",") if label.strip(" `-"))
            table[cells[0].strip("`")] = (cells[1], labels)
    return table


def test_the_committed_reference_pages_match_the_code() -> None:
    assert _generator().main(["--check"]) == 0, "run python docs/generate.py"


def test_the_metrics_table_and_the_exported_families_are_the_same() -> None:
    exported = {name: (family.kind, family.labels) for name, family in METRICS.items()}
    assert documented_metrics() == exported


def test_every_config_key_is_documented() -> None:
    config_page = (DOCS / "reference" / "config.md").read_text()
    for name, field in ManagerConfig.model_fields.items():
        assert f"| `{field.alias or name}` |" in config_page
