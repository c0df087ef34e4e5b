"""Fixtures shared by every test folder."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.e2e.kind import kind_unavailable
from tests.e2e.providers import PROVIDER_ENV, PROVIDERS, selected_provider

if TYPE_CHECKING:
    import aiohttp

    from multiqueue.apiserver.server import ApiServer


@pytest.fixture
async def apiserver(tmp_path: Path) -> AsyncIterator[ApiServer]:
    """A local API server in the test's event loop, with its state in a temporary folder."""
    from multiqueue.apiserver.server import ApiServer
    from tests.support.servers import server_config

    server = ApiServer(server_config(tmp_path / "state"))
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def http(apiserver: ApiServer) -> AsyncIterator[aiohttp.ClientSession]:
    """An HTTP session to ``apiserver`` as its admin (the bearer token of its config)."""
    import aiohttp

    headers = {"Authorization": f"Bearer {apiserver.config.token}"}
    async with aiohttp.ClientSession(apiserver.url, headers=headers) as session:
        yield session


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--provider",
        choices=PROVIDERS,
        default=None,
        help=f"clusters for tests/e2e: local (default), upstream (local with kube-apiserver and friends) or kind; "
        f"also ${PROVIDER_ENV}",
    )


def pytest_configure(config: pytest.Config) -> None:
    # A wrong $MULTIQUEUE_E2E_PROVIDER stops the run here rather than erroring in every e2e test.
    selected_provider(config.getoption("--provider"), os.environ)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """How many e2e scenarios ran (and how many skipped) on the session's provider: a session runs one provider,
    so a comparison of providers reads these lines from one run of each."""
    provider = selected_provider(config.getoption("--provider"), os.environ)
    outcomes: dict[str, set[str]] = {}
    for outcome in ("passed", "failed", "error", "skipped", "xfailed", "xpassed"):
        for report in terminalreporter.stats.get(outcome, []):
            nodeid = getattr(report, "nodeid", "")
            if nodeid.startswith("tests/e2e/"):
                outcomes.setdefault(outcome, set()).add(nodeid)
    skipped = outcomes.get("skipped", set())
    ran = set().union(*(ids for outcome, ids in outcomes.items() if outcome != "skipped")) - skipped
    if not ran and not skipped:
        return
    counts = ", ".join(f"{len(ids)} {outcome}" for outcome, ids in sorted(outcomes.items()))
    terminalreporter.write_sep("-", "e2e scenarios per provider")
    terminalreporter.write_line(f"{provider}: {len(ran)} scenarios run, {len(skipped)} skipped ({counts})")


def pytest_report_header(config: pytest.Config) -> str:
    provider = selected_provider(config.getoption("--provider"), os.environ)
    kind = (
        kind_unavailable()
        or "kind provider available (docker, kubectl, bash, the kind command and node image)"
    )
    return f"e2e provider: {provider}; {kind}"
