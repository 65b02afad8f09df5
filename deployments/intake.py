"""Turn durable submission entries into flow runs (see :mod:`tianshu_mcp.core.submissions`).

:func:`submit_one` creates the flow run of one entry on the project's work queue, records
``flowRunId`` / ``workQueue`` in the record's ``task.json`` and removes the entry. A per-entry
file lock keeps two submitters of one host apart, and the Prefect idempotency key
``<deployment>:<id>`` makes a second creation (another host, a retry after a crash between the
creation and the record) return the same flow run. A transport failure leaves the entry for the
next attempt; a refusal by the API (the deployment's parameters rejected) ends the record
``failed`` with the API's reason, never silently.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from filelock import Timeout

from ..core import submissions
from ..core.taskstore import TaskStore, utc_now
from .setup import ensure_pool_deployment, ensure_project_queue

log = logging.getLogger("tianshu_mcp")

_READY_POOLS: set[tuple[str, str]] = set()
"""``(API URL, pool)`` whose pool and deployment this process has made sure of (one check per
pool, not per task; forgotten when the deployment turns out to be gone)."""


async def submit_one(client: Any, home: Path, record_id: str) -> str | None:
    """Create the flow run of ``record_id``'s entry; return its id (None: nothing to do or not now).

    Raises:
        httpx.TransportError and Prefect's HTTP errors other than a 4xx refusal: the API is not
        usable right now (the entry stays).
    """
    import httpx
    from prefect.exceptions import ObjectNotFound, PrefectHTTPStatusError

    lock = submissions.entry_lock(home, record_id)
    try:
        lock.acquire()
    except Timeout:
        return None  # another submitter of this host is on it
    try:
        entry = submissions.read(home, record_id)
        if entry is None:
            return None
        store = TaskStore(home)
        task = store.read(record_id)
        if task is None:
            submissions.remove(home, record_id)  # the record is gone: nothing to run
            return None
        if task.get("flowRunId"):
            submissions.remove(home, record_id)
            return str(task["flowRunId"])
        try:
            pool = entry.get("workPool")
            ready = (str(client.api_url), str(pool)) if pool else None
            if ready and ready not in _READY_POOLS:  # a remote task: its pool and deployment may not exist yet
                await ensure_pool_deployment(client, str(pool))
                _READY_POOLS.add(ready)
            queue = await ensure_project_queue(client, str(entry["projectKey"]), int(entry.get("queueLimit") or 1),
                                               **({"pool": str(pool)} if pool else {}))
            try:
                dep = await client.read_deployment_by_name(str(entry["deployment"]))
            except ObjectNotFound:
                _READY_POOLS.discard(ready)  # deleted meanwhile: made again on the next attempt
                raise
            run = await client.create_flow_run_from_deployment(
                dep.id, name=str(entry["flowRunName"]), parameters=dict(entry["parameters"]),
                tags=list(entry["tags"]), work_queue_name=queue,
                idempotency_key=f"{entry['deployment']}:{record_id}",
            )
        except PrefectHTTPStatusError as exc:
            code = exc.response.status_code
            if 400 <= code < 500 and code not in (401, 404, 408, 409, 429):
                msg = f"the Prefect API refused the flow run (HTTP {code}): {exc.response.text[:300]}"
                store.update(record_id, lastMessage=msg, errorType="submit_failed", finishedAt=utc_now(),
                             finalStatus="failed", phase=None)
                store.event(record_id, "failed", "failed", msg)
                submissions.remove(home, record_id)
                log.error("submission %s refused: %s", record_id, msg)
                return None
            raise
        except (KeyError, TypeError, ValueError) as exc:
            msg = f"submission entry {submissions.entry_path(home, record_id)} is damaged ({exc}); not submitted"
            store.update(record_id, lastMessage=msg, errorType="submit_failed", finishedAt=utc_now(),
                         finalStatus="failed", phase=None)
            store.event(record_id, "failed", "failed", msg)
            submissions.remove(home, record_id)
            return None
        except httpx.HTTPError:
            raise
        store.update(record_id, flowRunId=str(run.id), workQueue=queue, submittedAt=utc_now(),
                     lastMessage=f"queued: waiting for a worker of work pool {pool}" if pool else
                     "queued: waiting for the project's slot and the global limit")
        submissions.remove(home, record_id)
        return str(run.id)
    finally:
        lock.release()


async def submit_pending(client: Any, home: Path) -> int:
    """Submit every pending entry of ``home``, oldest first; return how many flow runs were created.

    Stops at the first transport failure (the API is down; the rest waits for the next round).
    """
    created = 0
    for record_id in submissions.pending(home):
        if await submit_one(client, home, record_id):
            created += 1
    return created
