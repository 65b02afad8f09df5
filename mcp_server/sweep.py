"""Start-up sweep and shutdown interrupt (10-tools §4, 40-agents-tasks §2.9, 00-design §4).

Tasks live and die with the process hosting the worker: at start-up, runs of this home left
non-final by a previous host are archived (queued → ``Cancelled(Interrupted)``, running →
``Crashed`` after killing the recorded agent tree); at shutdown, active runs are interrupted
the same way while the worker is still alive.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..core.procs import kill_recorded
from ..core.settings import task_dir
from ..core.taskstore import TaskStore, utc_now
from ..flows.states import INTERRUPTED

if TYPE_CHECKING:
    from .runtime import Runtime
    from .service import TaskService

log = logging.getLogger("tianshu_mcp")

_NON_FINAL = ("SCHEDULED", "PENDING", "RUNNING", "CANCELLING", "PAUSED")


async def _runs_of_home(client: Any, home_tag: str) -> list[Any]:
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterState,
        FlowRunFilterStateType,
        FlowRunFilterTags,
    )
    from prefect.client.schemas.objects import StateType

    return await client.read_flow_runs(
        flow_run_filter=FlowRunFilter(
            tags=FlowRunFilterTags(all_=[home_tag]),
            state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType(s) for s in _NON_FINAL])),
        ),
        limit=200,
    )


async def startup_sweep(client: Any, runtime: "Runtime") -> int:
    """Archive this home's non-final runs left by a previous host; return how many."""
    from prefect.states import Cancelled, Crashed

    store = TaskStore(runtime.home)
    runs = await _runs_of_home(client, runtime.home_tag)
    for run in runs:
        task_id = run.name
        queued = run.state.type.value in ("SCHEDULED", "PENDING", "PAUSED")
        msg = "server restart leftover (archived at start-up, not resumed)"
        if not queued:
            # an orphaned flow-run process of the dead host, then its agent tree
            kill_recorded(task_dir(task_id, runtime.home) / "flow-proc.json")
            kill_recorded(task_dir(task_id, runtime.home) / "agent-proc.json")
        state = Cancelled(name=INTERRUPTED, message=msg) if queued else Crashed(message=msg)
        await client.set_flow_run_state(run.id, state, force=True)
        if store.exists(task_id):
            store.update(task_id, lastMessage=msg, errorType="interrupted", abortSource="shutdown",
                         finishedAt=utc_now(), phase=None)
            store.event(task_id, "interrupted", "interrupted", "server restart leftover archived")
    if runs:
        log.info("start-up sweep archived %d leftover run(s)", len(runs))
    return len(runs)


async def shutdown_interrupt(service: "TaskService") -> int:
    """Interrupt every active task of this home (running first, then queued); return how many."""
    try:
        client = await service.client()
        runs = await _runs_of_home(client, service.runtime.home_tag)
    except Exception as exc:  # noqa: BLE001 - shutdown must go on
        log.warning("shutdown: could not list active runs: %s", exc)
        return 0
    runs.sort(key=lambda r: 0 if r.state.type.value in ("RUNNING", "CANCELLING") else 1)
    for run in runs:
        try:
            await service.cancel(run.name, None, source="shutdown", wait_s=3.0)
        except Exception as exc:  # noqa: BLE001
            log.warning("shutdown: could not interrupt %s: %s", run.name, exc)
    # anything still not final (flow process slow to die) is closed by force
    from prefect.states import Cancelled

    for run in await _runs_of_home(client, service.runtime.home_tag):
        kill_recorded(service.store.dir(run.name) / "agent-proc.json")
        await client.set_flow_run_state(run.id, Cancelled(name=INTERRUPTED, message="server exited"), force=True)
    return len(runs)
