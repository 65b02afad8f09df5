"""The service's watchdog over hung flow-run processes (docs/lifecycle.md §6).

A flow-run process supervises its agent and its checks in polling loops (the stop probes of
:func:`tianshu_mcp.tasks.common.stop_probe`), each of which stamps ``flow-alive`` in the task's
directory at most every :data:`~tianshu_mcp.tasks.common.ALIVE_EVERY_S` seconds; every step of
the flow also writes ``task.json``. A process whose flow run is Running and that has touched
neither for ``flowStallMs`` (config, default 15 min) is hung — deadlocked, stopped, stuck in a
call that never returns. Prefect cannot see it: its heartbeat thread still beats, so the
heartbeat automation (dead hosts) does not fire.

The watchdog, run by the home's service every :data:`CHECK_EVERY_S` seconds, ends such a run:
``task.json`` failed / ``timeout`` (abortSource ``timeout``), the flow run ``Failed`` (written
before the kill so the worker does not call the exit a crash), then the recorded flow-run process
and agent tree are killed.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from ..core.procs import kill_recorded, recorded_alive
from ..core.settings import load_config
from ..core.record import RECORD_FILE
from ..core.taskstore import TaskStore, utc_now
from ..tasks.common import AGENT_PROC_FILE, ALIVE_FILE, FLOW_PROC_FILE
from .sweep import runs_in_states

log = logging.getLogger("tianshu_mcp")

CHECK_EVERY_S = 5.0
"""How often the service looks for hung flow runs, s."""


def last_sign_of_life(task_dir: Path) -> float | None:
    """Newest mtime (epoch s) of the task's ``flow-alive`` stamp, ``task.json`` and
    ``flow-proc.json``; None when the directory has none of them."""
    times = []
    for name in (ALIVE_FILE, RECORD_FILE, FLOW_PROC_FILE):
        try:
            times.append((task_dir / name).stat().st_mtime)
        except OSError:
            continue
    return max(times) if times else None


def stalled_for_s(task_dir: Path, now: float | None = None) -> float | None:
    """Seconds since the flow-run process of ``task_dir`` last showed progress, or None when no
    live flow-run process is recorded on this machine (not started, gone — a dead host is the
    heartbeat automation's case —, or running elsewhere)."""
    if not recorded_alive(task_dir / FLOW_PROC_FILE):
        return None
    seen = last_sign_of_life(task_dir)
    return None if seen is None else (now or time.time()) - seen


async def end_hung_runs(client: Any, home: Path) -> list[str]:
    """End every Running flow run of this home whose process made no progress for
    ``flowStallMs``; return the ended record ids.

    Never raises for one run (it is logged and retried on the next check).
    """
    from prefect.states import Failed

    stall_ms = load_config(home).flow_stall_ms
    store = TaskStore(home)
    ended = []
    for run in await runs_in_states(client, ("RUNNING",)):
        params = run.parameters or {}
        record_id = params.get("task_id") or params.get("record_id")
        if not record_id or not store.dir(str(record_id)).is_dir():
            continue
        tdir = store.dir(str(record_id))
        idle = stalled_for_s(tdir)
        if idle is None or idle * 1000 < stall_ms:
            continue
        meta = store.read(str(record_id)) or {}
        msg = (f"the flow-run process made no progress for {idle:.0f} s (limit flowStallMs={stall_ms} ms, "
               f"phase {meta.get('phase') or 'unknown'}); the watchdog ended it and killed its processes")
        try:
            store.update(str(record_id), lastMessage=msg, errorType="timeout", abortSource="timeout",
                         finishedAt=utc_now(), phase=None)
            await client.set_flow_run_state(run.id, Failed(message=msg), force=True)
            store.event(str(record_id), "failed", "failed", msg)
        except Exception as exc:  # noqa: BLE001 - looked at again on the next check
            log.warning("watchdog: could not end the hung flow run of %s: %s", record_id, exc)
            continue
        await _close_in_the_ui(client, run.id, msg)
        kill_recorded(tdir / FLOW_PROC_FILE)
        kill_recorded(tdir / AGENT_PROC_FILE)
        log.warning("watchdog: %s: %s", record_id, msg)
        ended.append(str(record_id))
    return ended


async def _close_in_the_ui(client: Any, flow_run_id: Any, msg: str) -> None:
    """The run's history says what happened: its Running task runs end ``Crashed`` (the hung
    process will never finish them) and the flow-run log gets the watchdog's line. Never raises."""
    from datetime import datetime, timezone

    from prefect.client.schemas.actions import LogCreate
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId, TaskRunFilter, TaskRunFilterState
    from prefect.client.schemas.filters import TaskRunFilterStateType
    from prefect.client.schemas.objects import StateType
    from prefect.states import Crashed

    try:
        stuck = await client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])),
            task_run_filter=TaskRunFilter(state=TaskRunFilterState(type=TaskRunFilterStateType(any_=[StateType.RUNNING]))))
        for tr in stuck:
            await client.set_task_run_state(tr.id, Crashed(message=f"ended by the watchdog: {msg}"), force=True)
        await client.create_logs([LogCreate(name="tianshu.watchdog", level=logging.WARNING, message=msg,
                                            timestamp=datetime.now(timezone.utc), flow_run_id=flow_run_id)])
    except Exception as exc:  # noqa: BLE001 - task.json and the flow-run state already tell it
        log.warning("watchdog: could not update the UI history of flow run %s: %s", flow_run_id, exc)
