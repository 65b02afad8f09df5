"""Leftover runs, missed schedules and shutdown (docs/tools.md §4, docs/agents-tasks.md §2.9, docs/hosting.md
§6).

Run by whoever hosts a home's Prefect, never by a client of a remote API:

* :func:`startup_sweep` — on start, before the worker polls: every run of this home's
  deployments (``run-task``, ``verify``, ``reverify``) that is Pending, Running or Cancelling
  has no process any more (its host is gone; a flow-run process outlives its host by at most a
  second, see :func:`~tianshu_mcp.core.reaper.exit_when_host_dies`): its recorded flow-run
  process and agent tree are killed and it becomes ``Crashed`` (task ``interrupted``), which
  frees its pool and queue slots. Scheduled (queued) runs stay queued: tasks are durable.
* :func:`trim_missed_schedules` — catch-up policy: of the re-verification runs a schedule should
  have started while no service ran, only the newest one per schedule runs; the older ones end
  ``Cancelled(Missed)``. So a service down for an hour fires one catch-up run per project, not 60.
* :func:`shutdown_interrupt` — on an orderly stop of the host: running runs first (agent tree
  killed, ``Cancelled(Interrupted)``), then Pending ones. Scheduled runs stay queued, except in
  ``in-process`` hosting, where every active task ends with the stdio server.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..core.procs import kill_recorded
from ..core.settings import task_dir
from ..core.taskstore import TaskStore, utc_now
from ..flows.states import INTERRUPTED
from ..tasks.common import request_cancel

log = logging.getLogger("tianshu_mcp")

DEPLOYMENTS = ("run-task/run-task", "verify/verify", "reverify/reverify")
_ORPHAN_STATES = ("PENDING", "RUNNING", "CANCELLING")
MISSED = "Missed"


# how long the ids of a complete set of DEPLOYMENTS are taken as known, per API (s): the service
# updates its deployments in place (never re-creates them), and the watchdog and the idle check
# ask every few seconds; three reads each time were a steady load on the API beside the runs
IDS_KNOWN_S = 60.0
_known_ids: dict[str, tuple[float, list[Any]]] = {}


def forget_deployment_ids() -> None:
    """Read the deployment ids again on the next call (the service has just made them anew)."""
    _known_ids.clear()


async def _deployment_ids(client: Any) -> list[Any]:
    """The ids of this home's :data:`DEPLOYMENTS` that exist on ``client``'s API. A complete set
    is remembered for :data:`IDS_KNOWN_S` s; an incomplete one (a deployment missing, e.g.
    before the service made them) is read again on the next call."""
    from prefect.exceptions import ObjectNotFound

    api = str(client.api_url)
    known = _known_ids.get(api)
    if known is not None and time.monotonic() < known[0]:
        return list(known[1])
    ids = []
    for name in DEPLOYMENTS:
        try:
            ids.append((await client.read_deployment_by_name(name)).id)
        except ObjectNotFound:
            continue
    if len(ids) == len(DEPLOYMENTS):
        _known_ids[api] = (time.monotonic() + IDS_KNOWN_S, ids)
    return ids


async def runs_in_states(client: Any, states: tuple[str, ...], deployment_ids: list[Any] | None = None,
                         limit: int = 200) -> list[Any]:
    """Flow runs of this home's deployments in ``states`` (StateType values)."""
    from prefect.client.schemas.filters import (
        DeploymentFilter,
        DeploymentFilterId,
        FlowRunFilter,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType

    ids = deployment_ids if deployment_ids is not None else await _deployment_ids(client)
    if not ids:
        return []
    return await client.read_flow_runs(
        flow_run_filter=FlowRunFilter(state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType(s) for s in states]))),
        deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=ids)),
        limit=limit,
    )


def _record_id(run: Any) -> str | None:
    params = run.parameters or {}
    rid = params.get("task_id") or params.get("record_id")
    return str(rid) if rid else None


def _close_record(home: Path, record_id: str | None, msg: str, source: str) -> None:
    store = TaskStore(home)
    if record_id and store.exists(record_id):
        store.update(record_id, lastMessage=msg, errorType="interrupted", abortSource=source,
                     finishedAt=utc_now(), phase=None)
        store.event(record_id, "interrupted", "interrupted", msg)


async def startup_sweep(client: Any, home: Path) -> int:
    """Crash every Pending/Running/Cancelling run of this home's deployments; return how many."""
    from prefect.states import Crashed

    runs = await runs_in_states(client, _ORPHAN_STATES)
    msg = "interrupted: the tianshu-mcp service that ran it stopped (archived at start-up, not resumed)"
    for run in runs:
        record_id = _record_id(run)
        if record_id:
            kill_recorded(task_dir(record_id, home) / "flow-proc.json")
            kill_recorded(task_dir(record_id, home) / "agent-proc.json")
        await client.set_flow_run_state(run.id, Crashed(message=msg), force=True)
        _close_record(home, record_id, msg, "restart")
    if runs:
        log.info("start-up sweep: %d leftover run(s) crashed, their slots freed", len(runs))
    return len(runs)


async def trim_missed_schedules(client: Any, now: datetime | None = None, grace_s: float = 60.0) -> int:
    """Keep at most one overdue scheduled run per re-verification schedule; cancel the rest.

    A run is overdue when its expected start is more than ``grace_s`` seconds in the past.
    Returns how many runs were cancelled.
    """
    from prefect.states import Cancelled

    from prefect.exceptions import ObjectNotFound

    try:
        dep = await client.read_deployment_by_name("reverify/reverify")
    except ObjectNotFound:
        return 0
    now = now or datetime.now(timezone.utc)
    runs = await runs_in_states(client, ("SCHEDULED",), [dep.id], limit=200)
    overdue: dict[str, list[Any]] = defaultdict(list)
    for run in runs:
        start = run.expected_start_time or (run.state.timestamp if run.state else None)
        if start is not None and (now - start).total_seconds() > grace_s:
            overdue[str((run.parameters or {}).get("project_path"))].append(run)
    cancelled = 0
    for project, group in overdue.items():
        group.sort(key=lambda r: r.expected_start_time)
        for run in group[:-1]:
            await client.set_flow_run_state(run.id, Cancelled(
                name=MISSED, message="missed while no tianshu-mcp service ran; one catch-up run per schedule"),
                force=True)
            cancelled += 1
    if cancelled:
        log.info("missed schedules: %d overdue re-verification run(s) cancelled, one catch-up per project kept", cancelled)
    return cancelled


async def shutdown_interrupt(client: Any, home: Path, include_queued: bool = False) -> int:
    """Interrupt this home's running and pending runs (an orderly stop of the host); return how many.

    ``include_queued`` (in-process hosting, where tasks live and die with the stdio server) also
    archives Scheduled and Paused runs.
    """
    from prefect.states import Cancelled

    states = _ORPHAN_STATES + (("SCHEDULED", "PAUSED") if include_queued else ())
    try:
        runs = await runs_in_states(client, states)
    except Exception as exc:  # noqa: BLE001 - shutdown must go on
        log.warning("shutdown: could not list active runs: %s", exc)
        return 0
    runs.sort(key=lambda r: 0 if r.state.type.value in ("RUNNING", "CANCELLING") else 1)
    msg = "server exited; the agent process was terminated"
    for run in runs:
        record_id = _record_id(run)
        if record_id:
            tdir = task_dir(record_id, home)
            if tdir.is_dir():
                request_cancel(tdir, "shutdown", None)
            kill_recorded(tdir / "agent-proc.json")
        try:
            await client.set_flow_run_state(run.id, Cancelled(name=INTERRUPTED, message="server exited"), force=True)
        except Exception as exc:  # noqa: BLE001
            log.warning("shutdown: could not interrupt %s: %s", run.name, exc)
        _close_record(home, record_id, msg, "shutdown")
    return len(runs)
