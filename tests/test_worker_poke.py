"""Which API requests wake the service's worker (``hosting/embedded.identity_app``, design note 80).

A request that may make a flow run ready (a creation, a resume, a state that frees a project's
slot or reschedules a run) pokes the worker; a run's own claim and start (``Pending``,
``Running``) and a ``Cancelling`` do not: each poke costs the API a ``get_scheduled_flow_runs``
while the run's engine waits for its own answers. The wrapped app is a plain ASGI app here: the
filter is a property of the request and the response, not of Prefect.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tianshu_mcp.hosting.embedded import identity_app

RUN = "/api/flow_runs/3f1c0d7e-0000-4000-8000-000000000001"


def _serve(status: int, seen: list[bytes]) -> Any:
    """An ASGI app that reads the whole request body into ``seen`` and answers ``status``."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        seen.append(body)
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    return app


def _call(path: str, chunks: list[bytes], status: int = 201, method: str = "POST") -> tuple[int, bytes]:
    """Send one request through :func:`identity_app`; returns (pokes, the body the app read)."""
    pokes: list[int] = []
    seen: list[bytes] = []
    app = identity_app(_serve(status, seen), {"homeId": "h"}, "u:p", lambda: pokes.append(1))
    messages = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]

    async def receive() -> dict[str, Any]:
        return messages.pop(0)

    async def send(message: dict[str, Any]) -> None:
        return None

    scope = {"type": "http", "method": method, "path": path, "headers": []}
    asyncio.run(app(scope, receive, send))
    return len(pokes), seen[0]


def _state(kind: str) -> bytes:
    return json.dumps({"state": {"type": kind, "name": kind.title()}, "force": False}).encode()


@pytest.mark.parametrize("kind", ["PENDING", "RUNNING", "CANCELLING"])
def test_a_runs_own_claim_start_and_cancelling_poke_nothing(kind: str) -> None:
    assert _call(f"{RUN}/set_state", [_state(kind)]) == (0, _state(kind))


@pytest.mark.parametrize("kind", ["SCHEDULED", "COMPLETED", "FAILED", "CANCELLED", "CRASHED", "PAUSED"])
def test_a_state_that_may_ready_a_run_pokes_once(kind: str) -> None:
    assert _call(f"{RUN}/set_state", [_state(kind)])[0] == 1


def test_a_creation_and_a_resume_poke() -> None:
    assert _call("/api/deployments/abc/create_flow_run", [b'{"parameters": {}}'])[0] == 1
    assert _call(f"{RUN}/resume", [b"{}"])[0] == 1


def test_a_body_in_several_messages_is_read_whole_and_passed_on_unchanged() -> None:
    body = _state("RUNNING")
    pokes, seen = _call(f"{RUN}/set_state", [body[:7], body[7:20], body[20:]])
    assert (pokes, seen) == (0, body)
    body = _state("COMPLETED")
    assert _call(f"{RUN}/set_state", [body[:5], body[5:]]) == (1, body)


@pytest.mark.parametrize("body", [b"", b"not json", b'{"state": "RUNNING"}', b"[1, 2]"])
def test_a_body_that_is_not_prefects_pokes_to_be_safe(body: bytes) -> None:
    assert _call(f"{RUN}/set_state", [body])[0] == 1


def test_a_refused_request_and_other_routes_poke_nothing() -> None:
    assert _call(f"{RUN}/set_state", [_state("COMPLETED")], status=409)[0] == 0
    assert _call("/api/deployments/abc/create_flow_run", [b"{}"], status=422)[0] == 0
    assert _call("/api/flow_runs/filter", [b"{}"], status=200)[0] == 0
    assert _call(RUN, [b"{}"], status=204, method="PATCH")[0] == 0
