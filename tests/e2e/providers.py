"""Which provider of clusters the e2e suite runs on: ``--provider``, else $MULTIQUEUE_E2E_PROVIDER, else local."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import pytest

PROVIDERS: Final = ("local", "upstream", "kind")
PROVIDER_ENV: Final = "MULTIQUEUE_E2E_PROVIDER"


def selected_provider(option: str | None, environ: Mapping[str, str]) -> str:
    """The provider chosen by ``--provider``, else by $MULTIQUEUE_E2E_PROVIDER, else ``local``."""
    chosen = option or environ.get(PROVIDER_ENV) or "local"
    if chosen not in PROVIDERS:
        source = "--provider" if option else PROVIDER_ENV
        raise pytest.UsageError(f"{source}={chosen!r}: the e2e provider is one of {', '.join(PROVIDERS)}")
    return chosen
