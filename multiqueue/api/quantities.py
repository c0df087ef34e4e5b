"""Kubernetes resource quantities ("500m", "2", "1Gi", "1e3") as numbers, for capacity arithmetic."""

from __future__ import annotations

import re
from typing import Final

_SUFFIXES: Final = {
    "n": 1e-9, "u": 1e-6, "m": 1e-3, "": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
    "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50, "Ei": 2.0**60,
}  # fmt: skip
_QUANTITY: Final = re.compile(
    r"([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?"
)


def parse_quantity(text: object) -> float | None:
    """The quantity's value in base units (cores, bytes, devices), or None when it is not a quantity."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        return float(text)
    if not isinstance(text, str):
        return None
    match = _QUANTITY.fullmatch(text.strip())
    if match is None:
        return None
    number, exponent, suffix = match.groups()
    value = float(number)
    if exponent:
        return value * 10.0 ** int(exponent[1:])
    return value * _SUFFIXES[suffix or ""]
