"""Turn durable submission entries into flow runs (see :mod:`tianshu_mcp.core.submissions`).

:func:`submit_one` creates the flow run of one entry on the project's work queue, records
``flowRunId`` / ``workQueue`` in the record's ``task.json`` and removes the entry. A per-entry
file lock keeps two submitters of one host apart, and the Prefect idempotency key
``<deployment>:<id>`` makes a second creation (another host, a retry after a crash between the
creation and the record) return the same flow run. A transport failure leaves the entry for the
next attempt; a refusal by the API (the deployment's parameters rejected) ends the record
``failed`` with the API's reason, never silently.

**Acceptance order is creation order, per queue** (design note 53). Entries with the same
``(workPool, projectKey)`` form one FIFO ordered by ``acceptedSeq``: no submitter creates an
entry's flow run while an older entry of its queue is still pending — submitting an entry means
submitting the older ones first, in order, and stopping (the entry left for later) at the first
one another process holds. An entry that ends without a flow run (withdrawn by a cancel, refused
by the API, damaged) leaves its queue at once, so it never holds the later ones back. Each flow
run is created ``Scheduled`` at its ``acceptedAt``; a work pool hands out a queue's runs by
scheduled start time (its ``get_scheduled_flow_runs``), so the worker starts them in acceptance
order too.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from filelock import FileLock, Timeout

from ..core import submissions
from ..core.taskstore import TaskStore, utc_now
from ..deployments.setup import ensure_pool_deployment, ensure_project_queue, queue_name

log = logging.getLogger("tianshu_mcp")

_READY_POOLS: set[tuple[str, str]] = set()
"""``(API URL, pool)`` whose pool and deployment this process has made sure of (one check per
pool, not per task; forgotten when the deployment turns out to be gone)."""

_DEPLOYMENT_IDS: dict[tuple[str, str], Any] = {}
"""``(API URL, deployment name)`` → its id, for this process's life: the service that made a
deployment updates it in place and never re-creates it; one that is gone answers the creation
404, which drops the entry (the next attempt reads it again). One read less before every flow run."""

LOCK_POLL_S = 0.02
"""How often a submitter that waits for an entry's lock tries again, s."""
CREATE_BUDGET_S = 30.0
"""How long :func:`create_flow_run` retries a 503 (the API's "database is locked"), s."""


@dataclass(frozen=True)
class Outcome:
    """What handling one entry came to.

    Attributes:
        kind: ``"created"`` — its flow run exists (made now, or found recorded in ``task.json``);
            ``"gone"`` — it is no longer pending and has no flow run from this call (another
            submitter made it, a cancel withdrew it, the API refused it, it was damaged): it holds
            its queue back no longer; ``"busy"`` — another submitter or a cancel holds its lock
            (past the wait): it is still pending, and so is everything after it in its queue.
        flow_run_id: the flow run's id with ``"created"``, else None.
    """

    kind: Literal["created", "gone", "busy"]
    flow_run_id: str | None = None


@dataclass
class Round:
    """What one pass over the entries has made sure of already, so that a backlog costs one API
    call per entry (the creation) instead of three.

    Attributes:
        queues: ``(work pool or "", projectKey)`` → the concurrency limit its queue was given.
        deployments: deployment name (``flow/deployment``) → its id.
    """

    queues: dict[tuple[str, str], int] = field(default_factory=dict)
    deployments: dict[str, Any] = field(default_factory=dict)


async def submit_one(client: Any, home: Path, record_id: str, wait_s: float = 0.0,
                     first_only: bool = False) -> str | None:
    """Create the flow run of ``record_id``'s entry after every older pending entry of its queue,
    in acceptance order; return its id.

    Args:
        client: a Prefect client (async). wait_s: how long to wait, per entry, for a lock another
            submitter holds (0: do not wait). first_only: do nothing when an older entry of the
            queue is pending (the accepting client's inline attempt: a backlog is the background
            rounds' work, and an attempt cut short by the client's time budget would only hold the
            queue's first entry from them).

    Returns:
        The flow run's id; None when ``record_id`` has no pending entry, ended without a flow run
        (refused, damaged, withdrawn), or was left for later because an older entry of its queue
        is pending (``first_only``) or (like its own) held by another process.

    Raises:
        httpx.TransportError and Prefect's HTTP errors other than a 4xx refusal: the API is not
        usable right now (the entries stay, and so does the order).
    """
    entries = submissions.pending_entries(home)
    mine = next((e for e in entries if e.id == record_id), None)
    if mine is None:
        return None
    done = Round()
    if mine.queue is not None:
        older_ones = [e for e in entries if e.queue == mine.queue and e.order < mine.order]
        if older_ones and first_only:
            return None
        for older in older_ones:
            if (await submit_entry(client, home, older.id, wait_s, done)).kind == "busy":
                log.info("%s waits for %s, accepted before it on the same queue", record_id, older.id)
                return None
    return (await submit_entry(client, home, record_id, wait_s, done)).flow_run_id


async def submit_pending(client: Any, home: Path, wait_s: float = 0.0) -> int:
    """Submit every pending entry of ``home`` in acceptance order; a queue whose next entry is
    held by another process is skipped for this round (its later entries too). Returns how many
    entries got their flow run.

    Raises:
        httpx.TransportError and Prefect's HTTP errors other than a 4xx refusal: the round stops at
        the first (the API is down; the rest waits for the next round).
    """
    created = 0
    blocked: set[tuple[str, str]] = set()
    done = Round()
    for entry in submissions.pending_entries(home):
        if entry.queue in blocked:
            continue
        outcome = await submit_entry(client, home, entry.id, wait_s, done)
        if outcome.kind == "busy" and entry.queue is not None:
            blocked.add(entry.queue)
        elif outcome.kind == "created":
            created += 1
    return created


async def submit_entry(client: Any, home: Path, record_id: str, wait_s: float = 0.0,
                       done: Round | None = None) -> Outcome:
    """Create the flow run of this one entry, whatever waits before it (callers keep the order:
    :func:`submit_one`, :func:`submit_pending`). ``done``: the queues and deployments this pass
    has already made sure of (updated).

    Raises:
        as :func:`submit_one`.
    """
    import httpx
    from prefect.exceptions import ObjectNotFound, PrefectHTTPStatusError
    from prefect.states import Scheduled

    lock = submissions.entry_lock(home, record_id)
    if not await _acquire(lock, wait_s):
        return Outcome("busy")
    try:
        entry = submissions.read(home, record_id)
        if entry is None:
            if submissions.is_pending(home, record_id):  # there, but not a JSON object
                _fail(home, record_id, "its file is not a JSON object")
            return Outcome("gone")
        store = TaskStore(home)
        task = store.read(record_id)
        if task is None:
            submissions.remove(home, record_id)  # the record is gone: nothing to run
            return Outcome("gone")
        if task.get("flowRunId"):
            submissions.remove(home, record_id)
            return Outcome("created", str(task["flowRunId"]))
        if submissions.summarize(record_id, entry).queue is None:
            _fail(home, record_id, "no projectKey")
            return Outcome("gone")
        try:
            pool = entry.get("workPool")
            ready = (str(client.api_url), str(pool)) if pool else None
            if ready and ready not in _READY_POOLS:  # a remote task: its pool and deployment may not exist yet
                await ensure_pool_deployment(client, str(pool))
                _READY_POOLS.add(ready)
            done = done if done is not None else Round()
            key, limit = str(entry["projectKey"]), int(entry.get("queueLimit") or 1)
            if done.queues.get((str(pool or ""), key)) == limit:
                queue = queue_name(key)
            else:
                queue = await ensure_project_queue(client, key, limit, **({"pool": str(pool)} if pool else {}))
                done.queues[(str(pool or ""), key)] = limit
            name = str(entry["deployment"])
            known = (str(client.api_url), name)
            if name not in done.deployments:
                if known in _DEPLOYMENT_IDS:
                    done.deployments[name] = _DEPLOYMENT_IDS[known]
                else:
                    try:
                        done.deployments[name] = _DEPLOYMENT_IDS[known] = (await client.read_deployment_by_name(name)).id
                    except ObjectNotFound:
                        _READY_POOLS.discard(ready)  # deleted meanwhile: made again on the next attempt
                        raise
            at = submissions.accepted_at(entry)
            try:
                run = await create_flow_run(
                    client, done.deployments[name], name=str(entry["flowRunName"]), parameters=dict(entry["parameters"]),
                    tags=list(entry["tags"]), work_queue_name=queue,
                    idempotency_key=f"{entry['deployment']}:{record_id}",
                    # the work pool hands a queue's runs out by scheduled time: acceptance order
                    state=Scheduled(scheduled_time=at) if at is not None else None,
                )
            except (ObjectNotFound, PrefectHTTPStatusError) as exc:
                if isinstance(exc, ObjectNotFound) or exc.response.status_code == 404:
                    _DEPLOYMENT_IDS.pop(known, None)  # the deployment is gone: read again on the next attempt
                    done.deployments.pop(name, None)
                    _READY_POOLS.discard(ready)
                    if not isinstance(exc, ObjectNotFound):  # as a read of the deployment would say it
                        raise ObjectNotFound(http_exc=exc, help_message=f"deployment {name} not found") from exc
                raise
        except PrefectHTTPStatusError as exc:
            code = exc.response.status_code
            if 400 <= code < 500 and code not in (401, 404, 408, 409, 429):
                msg = f"the Prefect API refused the flow run (HTTP {code}): {exc.response.text[:300]}"
                _end_failed(store, record_id, msg)
                submissions.remove(home, record_id)
                log.error("submission %s refused: %s", record_id, msg)
                return Outcome("gone")
            raise
        except (KeyError, TypeError, ValueError) as exc:
            _fail(home, record_id, str(exc))
            return Outcome("gone")
        except httpx.HTTPError:
            raise
        store.update(record_id, flowRunId=str(run.id), workQueue=queue, submittedAt=utc_now(),
                     lastMessage=f"queued: waiting for a worker of work pool {pool}" if pool else
                     "queued: flow run created; waiting for a worker to start it")
        submissions.remove(home, record_id)
        return Outcome("created", str(run.id))
    finally:
        lock.release()


async def create_flow_run(client: Any, deployment_id: Any, **kwargs: Any) -> Any:
    """``client.create_flow_run_from_deployment(deployment_id, **kwargs)``, retrying a 503 within
    a fraction of a second for up to :data:`CREATE_BUDGET_S`; returns the flow run.

    On SQLite the API answers a creation 503 at once when another writer committed while its
    transaction was reading ("database is locked"), which happens on most attempts while runs are
    busy writing; Prefect's client would retry after 2, 4, 8, 16 and 32 s (measured: 2–15 s per
    creation beside running flows). Creations of one queue go one at a time, so those waits would
    add up. The idempotency key makes a repeated attempt return the same run.

    Raises:
        PrefectHTTPStatusError: a 503 past the budget, or any other HTTP error (at once).
        httpx.TransportError: the API does not answer.
    """
    import random

    import anyio
    from prefect.exceptions import PrefectHTTPStatusError

    deadline = anyio.current_time() + CREATE_BUDGET_S
    delay = 0.05
    while True:
        try:
            with _without_client_retries():
                return await client.create_flow_run_from_deployment(deployment_id, **kwargs)
        except PrefectHTTPStatusError as exc:
            if exc.response.status_code != 503 or anyio.current_time() + delay > deadline:
                raise
        await anyio.sleep(delay * random.uniform(0.8, 1.2))
        delay = min(1.0, delay * 2)


_NO_RETRIES: list[Any] = []
"""``[current settings, the same with PREFECT_CLIENT_MAX_RETRIES=0]`` (made once, not per call:
copying Prefect's settings costs ≈40 ms)."""


@contextmanager
def _without_client_retries() -> Iterator[None]:
    """Prefect's client settings, without its own retries, for the calls made inside."""
    import prefect.context
    from prefect.settings import PREFECT_CLIENT_MAX_RETRIES

    current = prefect.context.get_settings_context()
    if not _NO_RETRIES or _NO_RETRIES[0] is not current.settings:
        _NO_RETRIES[:] = [current.settings, current.settings.copy_with_update(updates={PREFECT_CLIENT_MAX_RETRIES: 0})]
    with prefect.context.SettingsContext(profile=current.profile, settings=_NO_RETRIES[1]):
        yield


async def _acquire(lock: FileLock, wait_s: float) -> bool:
    """Take ``lock`` within ``wait_s`` seconds without blocking the event loop; False if not."""
    import anyio

    deadline = anyio.current_time() + max(0.0, wait_s)
    while True:
        try:
            lock.acquire(timeout=0)
            return True
        except Timeout:
            if anyio.current_time() >= deadline:
                return False
        await anyio.sleep(LOCK_POLL_S)


def _fail(home: Path, record_id: str, why: str) -> None:
    """End a record whose entry is damaged ``failed`` (with its event) and drop the entry."""
    msg = f"submission entry {submissions.entry_path(home, record_id)} is damaged ({why}); not submitted"
    store = TaskStore(home)
    if store.read(record_id) is not None:
        _end_failed(store, record_id, msg)
    submissions.remove(home, record_id)
    log.error("%s", msg)


def _end_failed(store: TaskStore, record_id: str, msg: str) -> None:
    store.update(record_id, lastMessage=msg, errorType="submit_failed", finishedAt=utc_now(),
                 finalStatus="failed", phase=None)
    store.event(record_id, "failed", "failed", msg)
