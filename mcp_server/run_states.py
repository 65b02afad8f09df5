"""Flow-run states read from the home's own service over plain HTTP (docs/design-notes.md, note 84).

query_task and wait_task need four fields of each run's state. Prefect's client would answer
them after this process imported it (0.55 s of CPU and ≈35 MiB, once per stdio server) and
parsed every run into its full model. On the home's own service, whose API and credentials are
known, these reads are two documented endpoints of Prefect's REST API instead:
``GET /flow_runs/{id}`` for one run, ``POST /flow_runs/filter`` for a batch. Remote APIs
(perhaps Prefect Cloud, with its own authentication) keep Prefect's client.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Any

import httpx
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential

from ..core.errors import ErrorCode, TianshuError
from ..core.i18n import _
from ..flows.states import RunState
from ..hosting.identity import auth_header

BATCH = 200
"""Runs per filter request (Prefect's page limit)."""
READ_LIMIT_S = 5.0
"""How long a read of the tasks' flow-run states from the home's own service may take, s."""
REMOTE_READ_LIMIT_S = 15.0
"""The same for a remote Prefect API (its network and its database are not ours), s."""
_RETRIED = frozenset({408, 429, 502, 503})


def _iso_z(value: Any) -> str | None:
    """Prefect's timestamp (an ISO string from the API, a datetime from its client) as
    ``2026-11-30T09:15:00.123Z``; None when absent or unreadable."""
    if isinstance(value, datetime):
        at = value
    elif isinstance(value, str):
        try:
            at = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    else:
        return None
    if at.tzinfo is None:
        at = at.replace(tzinfo=timezone.utc)
    return at.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_run(run: Any) -> tuple[str, RunState] | None:
    """``(flow run id, state)`` from one run as the API answers it, None without a usable state."""
    if not isinstance(run, dict) or not isinstance(run.get("state"), dict):
        return None
    state = run["state"]
    if not isinstance(run.get("id"), str) or not isinstance(state.get("type"), str):
        return None
    name = state.get("name") if isinstance(state.get("name"), str) else state["type"].title()
    message = state.get("message") if isinstance(state.get("message"), str) else None
    return run["id"], RunState(state["type"], name, message, _iso_z(state.get("timestamp")))


def _retried(exc: BaseException) -> bool:
    return isinstance(exc, httpx.HTTPStatusError) and exc.response.status_code in _RETRIED


class StateReader:
    """Reads flow-run states from one API with one connection pool.

    Args:
        api_url: the API's base, e.g. ``http://127.0.0.1:4200/api``.
        auth: its basic credentials (``user:password``).
    """

    def __init__(self, api_url: str, auth: str) -> None:
        self.api_url = api_url.rstrip("/")
        self._http = httpx.AsyncClient(headers=auth_header(auth), timeout=httpx.Timeout(10.0))

    async def read(self, ids: list[uuid.UUID]) -> dict[str, RunState]:
        """The states of the runs ``ids`` that exist, by flow run id (a run deleted in the UI is
        absent). A 408/429/502/503 answer (SQLite busy for a moment) is retried twice.

        Raises:
            httpx.TransportError: the API did not answer. httpx.HTTPStatusError: it refused
                (other status, or still 5xx after the retries).
        """
        found: dict[str, RunState] = {}
        for start in range(0, len(ids), BATCH):
            chunk = ids[start:start + BATCH]
            async for attempt in AsyncRetrying(retry=retry_if_exception(_retried), stop=stop_after_attempt(3),
                                               wait=wait_exponential(multiplier=0.05, max=0.5), reraise=True):
                with attempt:
                    runs = await self._fetch(chunk)
            for run in runs:
                parsed = parse_run(run)
                if parsed is not None:
                    found[parsed[0]] = parsed[1]
        return found

    async def _fetch(self, chunk: list[uuid.UUID]) -> list[Any]:
        if len(chunk) == 1:  # one run: ≈1.5 ms less than a filter (design note 77)
            answer = await self._http.get(f"{self.api_url}/flow_runs/{chunk[0]}")
            if answer.status_code == 404:
                return []
            answer.raise_for_status()
            return [answer.json()]
        answer = await self._http.post(f"{self.api_url}/flow_runs/filter", json={
            "flow_runs": {"id": {"any_": [str(i) for i in chunk]}}, "limit": BATCH})
        answer.raise_for_status()
        runs = answer.json()
        return runs if isinstance(runs, list) else []

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()


async def read_states(runtime: Any, client: Any, ids: list[uuid.UUID]) -> dict[str, RunState]:
    """The states of the flow runs ``ids`` that exist, by flow run id: one read per
    :data:`BATCH` runs, within :data:`READ_LIMIT_S` (:data:`REMOTE_READ_LIMIT_S` for a remote
    API). ``client``: a :class:`StateReader` on the home's own service, else Prefect's client;
    ``runtime``: the connection (:class:`~tianshu_mcp.mcp_server.runtime.Runtime`).

    Prefect's client retries a connection refused by an API it has reached before, with
    backoff: ≈ 18 s before a query about a killed service failed. Here the read is cut at the
    limit, and when the home's own service stopped answering the runtime connects again
    (``Runtime.invalidate``: it may start a new service) so the next call finds it.

    Raises:
        TianshuError: ``PREFECT_UNAVAILABLE`` when the API did not answer within the limit or
            refused the connection.
    """
    import anyio

    limit_s = REMOTE_READ_LIMIT_S if runtime.mode == "remote" else READ_LIMIT_S
    try:
        with anyio.fail_after(limit_s):
            if isinstance(client, StateReader):  # the home's own service: no Prefect import
                return await client.read(ids)
            return await _read_with_prefect(client, ids)
    except (TimeoutError, httpx.TransportError) as exc:
        if runtime.mode == "service":
            runtime.invalidate()
        raise TianshuError(ErrorCode.PREFECT_UNAVAILABLE, _(
            "the Prefect API at {url} did not answer the read of the tasks' states within {secs} s ({why}); "
            "the tasks are unaffected: ask again in a few seconds").format(
                url=runtime.api_url, secs=f"{limit_s:g}", why=type(exc).__name__)) from exc


async def _read_with_prefect(client: Any, ids: list[uuid.UUID]) -> dict[str, RunState]:
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
    from prefect.exceptions import ObjectNotFound

    found: dict[str, RunState] = {}
    for start in range(0, len(ids), BATCH):
        if len(ids) == 1:  # one run: ``GET /flow_runs/{id}``, ≈1.5 ms less than a filter (design note 77)
            try:
                runs = [await client.read_flow_run(ids[0])]
            except ObjectNotFound:
                runs = []
        else:
            runs = await client.read_flow_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=ids[start:start + BATCH])), limit=BATCH)
        for run in runs:
            if run.state is not None:
                found[str(run.id)] = RunState(run.state.type.value, run.state.name, run.state.message,
                                              _iso_z(run.state.timestamp))
    return found
