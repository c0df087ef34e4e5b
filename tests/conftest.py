"""Fixtures shared by every test folder."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

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
