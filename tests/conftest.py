"""Fixtures shared by every test folder."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.e2e.kind import PROVIDER_ENV, PROVIDERS, missing_tool, selected_provider

if TYPE_CHECKING:
    from multiqueue.local.apiserver.server import ApiServer


@pytest.fixture
async def apiserver(tmp_path: Path) -> AsyncIterator[ApiServer]:
    """A local API server in the test's event loop, with its state in a temporary folder."""
    from multiqueue.local.apiserver.server import ApiServer
    from tests.support.servers import server_config

    server = ApiServer(server_config(tmp_path / "state"))
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--provider",
        choices=PROVIDERS,
        default=None,
        help=f"clusters for tests/e2e: local (default) or kind; also ${PROVIDER_ENV}",
    )


def pytest_configure(config: pytest.Config) -> None:
    # A wrong $MULTIQUEUE_E2E_PROVIDER stops the run here rather than erroring in every e2e test.
    selected_provider(config.getoption("--provider"), os.environ)


def pytest_report_header(config: pytest.Config) -> str:
    provider = selected_provider(config.getoption("--provider"), os.environ)
    kind = missing_tool() or "kind provider available (docker, kind, kubectl and bash on PATH)"
    return f"e2e provider: {provider}; {kind}"
