"""The product stays readable: no function above cyclomatic complexity 30 and no module with a maintainability
index under 20, measured with radon as `radon cc` and `radon mi` do. The embedded API server, the local clusters
and the CLI are outside the product and are not held to it."""

from __future__ import annotations

from pathlib import Path

from radon.complexity import cc_visit
from radon.metrics import mi_visit

from tests.support.processes import REPO

MAX_COMPLEXITY = 30
MIN_MAINTAINABILITY = 20.0
OUTSIDE = ("multiqueue/apiserver/", "multiqueue/local/", "multiqueue/cli.py")


def product_modules() -> list[Path]:
    found = sorted((REPO / "multiqueue").rglob("*.py"))
    modules = [p for p in found if not str(p.relative_to(REPO)).startswith(OUTSIDE)]
    assert len(modules) > 50, "the product's modules were not found"
    return modules


def test_no_function_of_the_product_is_above_complexity_30() -> None:
    over = [
        f"{path.relative_to(REPO)}:{block.lineno} {block.fullname} ({block.complexity})"
        for path in product_modules()
        for block in cc_visit(path.read_text())
        if block.complexity > MAX_COMPLEXITY
    ]
    assert over == []


def test_no_module_of_the_product_is_under_maintainability_20() -> None:
    under = {
        str(path.relative_to(REPO)): round(index, 2)
        for path in product_modules()
        if (index := mi_visit(path.read_text(), multi=True)) < MIN_MAINTAINABILITY
    }
    assert under == {}
