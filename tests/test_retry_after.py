"""The API's first 503 for a request carries ``Retry-After: 0.05`` (hosting/retry_after.py).

Observed: the worker's ``PATCH /flow_runs/<id>/labels`` was refused (SQLite "database is locked")
in 7 of 10 sequential tasks, and Prefect's client waited 2 s before trying again, between the
run's Pending and Submitting states. A refusal repeated within the memory window keeps the
client's own back-off, so a lasting stall is ridden out as before.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tianshu_mcp.hosting.retry_after import MEMORY_S, quick_first_retry


def answering(statuses: list[int], headers: list[tuple[bytes, bytes]] | None = None) -> Any:
    """An ASGI app answering the given statuses in turn."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "http.response.start", "status": statuses.pop(0), "headers": list(headers or [])})
        await send({"type": "http.response.body", "body": b"{}"})

    return app


async def patch(app: Any, path: str = "/api/flow_runs/x/labels") -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as client:
        return await client.patch(path, content=b"{}")


@pytest.mark.anyio
async def test_the_first_refusal_asks_for_a_quick_retry_a_repeated_one_does_not() -> None:
    now = [100.0]
    app = quick_first_retry(answering([503, 503, 200, 503, 503]), clock=lambda: now[0])
    first = await patch(app)
    assert first.status_code == 503 and first.headers["retry-after"] == "0.05"
    again = await patch(app)
    assert again.status_code == 503 and "retry-after" not in again.headers  # the client's back-off
    ok = await patch(app)
    assert ok.status_code == 200 and "retry-after" not in ok.headers
    now[0] += MEMORY_S + 1  # long after: a new first refusal
    assert (await patch(app)).headers["retry-after"] == "0.05"


@pytest.mark.anyio
async def test_requests_are_told_apart_and_a_servers_own_header_is_kept() -> None:
    app = quick_first_retry(answering([503, 503]))
    assert (await patch(app, "/api/a")).headers["retry-after"] == "0.05"
    assert (await patch(app, "/api/b")).headers["retry-after"] == "0.05"  # another request: its own first
    kept = quick_first_retry(answering([503], [(b"retry-after", b"7")]))
    assert (await patch(kept)).headers.get_list("retry-after") == ["7"]


@pytest.mark.anyio
async def test_a_retry_on_a_fresh_connection_is_the_same_request() -> None:
    """Seen in a run: Prefect's client sent each retry on a new connection; keyed by connection,
    every retry got the quick header and three retries were spent in 0.15 s."""
    app = quick_first_retry(answering([503, 503]))
    sent: list[Any] = []

    async def receive() -> Any:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: Any) -> None:
        sent.append(message)

    for port in (50001, 50002):
        scope = {"type": "http", "method": "PATCH", "path": "/api/flow_runs/x/labels",
                 "client": ("127.0.0.1", port), "headers": []}
        await app(scope, receive, send)
    starts = [dict(m["headers"]) for m in sent if m["type"] == "http.response.start"]
    assert starts[0].get(b"retry-after") == b"0.05"
    assert b"retry-after" not in starts[1]
