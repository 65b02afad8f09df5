"""The watchdog's and the idle check's deployment ids are read once a minute, not on every look
(``hosting/sweep._deployment_ids``, design note 80), against the session service's real API."""

from __future__ import annotations

from typing import Any, AsyncIterator

import pytest

from conftest import list_deployment_reads
from tianshu_mcp.hosting import sweep

pytestmark = [pytest.mark.anyio, pytest.mark.prefect]


@pytest.fixture
async def counted(ts_daemon: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[Any, list[str]]]:
    """A Prefect client of the session service's API whose deployment reads by name are listed."""
    from prefect.client.orchestration import PrefectClient

    auth = (ts_daemon["home"] / "prefect" / "credentials").read_text().strip()
    monkeypatch.setattr(sweep, "_known_ids", {})
    async with PrefectClient(ts_daemon["api"], auth_string=auth) as client:
        reads, _ = list_deployment_reads(client, monkeypatch)
        yield client, reads


async def test_a_complete_set_is_read_once_a_minute(counted: tuple[Any, list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    client, reads = counted
    first = await sweep._deployment_ids(client)
    assert len(first) == 3 and reads == list(sweep.DEPLOYMENTS)
    assert await sweep._deployment_ids(client) == first and len(reads) == 3  # remembered
    assert await sweep.runs_in_states(client, ("RUNNING",)) is not None and len(reads) == 3
    now = sweep.time.monotonic()
    monkeypatch.setattr(sweep.time, "monotonic", lambda: now + sweep.IDS_KNOWN_S + 1)
    assert await sweep._deployment_ids(client) == first and len(reads) == 6  # read again after a minute


async def test_an_incomplete_set_is_read_again(counted: tuple[Any, list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    client, reads = counted
    monkeypatch.setattr(sweep, "DEPLOYMENTS", (*sweep.DEPLOYMENTS, "run-task/no-such-deployment"))
    assert len(await sweep._deployment_ids(client)) == 3
    assert len(await sweep._deployment_ids(client)) == 3
    assert len(reads) == 8  # nothing remembered while one is missing
