"""Resource quantities parse as Kubernetes reads them."""

from __future__ import annotations

import pytest

from multiqueue.api.quantities import parse_quantity


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", 0.5),
        ("2", 2.0),
        ("1Gi", 2.0**30),
        ("1G", 1e9),
        ("1e3", 1000.0),
        ("0.5", 0.5),
        (3, 3.0),
        ("128Mi", 128 * 2.0**20),
    ],
)
def test_quantities(text: object, value: float) -> None:
    assert parse_quantity(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["", "abc", "1Gb", None, [], "1.2.3"])
def test_not_quantities(text: object) -> None:
    assert parse_quantity(text) is None
