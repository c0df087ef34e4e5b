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


def test_the_committed_reference_pages_match_the_code() -> None:
    assert _generator().main(["--check"]) == 0, "run python docs/generate.py"


def test_every_metric_and_config_key_is_documented() -> None:
    metrics_page = (DOCS / "reference" / "metrics.md").read_text()
    for name in METRICS:
        assert f"| `{name}` |" in metrics_page
    config_page = (DOCS / "reference" / "config.md").read_text()
    for name, field in ManagerConfig.model_fields.items():
        assert f"| `{field.alias or name}` |" in config_page
