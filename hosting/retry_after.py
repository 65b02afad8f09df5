"""A quick first retry for a request the API refused for a moment (503 + ``Retry-After``).

On SQLite, a write that meets another process's commit is refused at once ("database is locked":
the request's deferred transaction had read an older snapshot, so SQLite's busy wait does not
apply); Prefect's API rolls the transaction back and answers 503, and Prefect's client waits
``2**attempt`` seconds (2, 4, 8 s) unless the answer carries ``Retry-After``. Measured on a quiet
home: the worker's ``PATCH /flow_runs/<id>/labels``, between a run's Pending and Submitting
states, was refused in 7 of 10 sequential tasks, which put 2 s on the way from ``run_task`` to the
agent; the conflict itself is over within milliseconds (docs/design-notes.md, note 55).

:func:`quick_first_retry` adds ``Retry-After: 0.05`` to the first 503 for a request (same method
and path, from any connection: the client may retry on a new one) and leaves later ones alone, so
a lasting stall still meets the client's own back-off (0.05 + 4 + 8 s with three retries,
against 2 + 4 + 8 s): the transient case costs 50 ms, resilience stays. The request is never
run twice by the server; the client sends it again, as it would have.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Message = MutableMapping[str, Any]
ASGIApp = Callable[[MutableMapping[str, Any], Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]],
                   Awaitable[None]]

FIRST_RETRY_S = "0.05"
"""``Retry-After`` of a first refusal (seconds, as the header carries it)."""
MEMORY_S = 30.0
"""A refusal is remembered this long: a request refused again within it gets no quick retry (s)."""
MAX_REMEMBERED = 1024
"""At most this many refusals are remembered (the oldest are forgotten first)."""


def quick_first_retry(app: ASGIApp, clock: Callable[[], float] = time.monotonic) -> ASGIApp:
    """Wrap the ASGI ``app``: its first 503 for a request key (method, path)
    within :data:`MEMORY_S` gets ``Retry-After: 0.05`` unless it has one; any other answer passes
    unchanged.

    Args:
        app: the ASGI application (Prefect's API).
        clock: monotonic seconds (injected by tests).
    """
    refused: dict[tuple[Any, ...], float] = {}

    async def wrapped(scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await app(scope, receive, send)
            return
        key = (scope.get("method"), scope.get("path"))

        async def mark(message: Message) -> None:
            if message.get("type") == "http.response.start" and message.get("status") == 503:
                now = clock()
                first = now - refused.get(key, -MEMORY_S - 1) > MEMORY_S
                refused[key] = now
                if len(refused) > MAX_REMEMBERED:
                    for old in sorted(refused, key=refused.__getitem__)[: len(refused) - MAX_REMEMBERED]:
                        del refused[old]
                headers = list(message.get("headers") or [])
                if first and not any(name.lower() == b"retry-after" for name, _value in headers):
                    message = {**message, "headers": [*headers, (b"retry-after", FIRST_RETRY_S.encode())]}
            await send(message)

        await app(scope, receive, mark)

    return wrapped
