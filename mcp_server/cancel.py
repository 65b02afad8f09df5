"""Cancelling a task (docs/agents-tasks.md §2.7): queued, waiting for the user, running here or on a
remote worker. :meth:`tianshu_mcp.mcp_server.taskops.TaskService.cancel` calls :func:`cancel_task`.
"""

from __future__ import annotations

from typing import Any

from ..adapters.drivers import agent_stop_grace_ms
from ..core import submissions
from ..core.i18n import _
from ..core.model import NO_QUESTION, TERMINAL
from ..core.procs import kill_recorded
from ..core.taskstore import utc_now
from ..flows.states import INTERRUPTED
from ..tasks.common import AGENT_PROC_FILE, CANCEL_FILE, request_cancel

ORDERLY_CANCEL_GRACE_S = 3.0
"""How long a cancelled running flow gets to end itself before its final state is written for it, s."""


async def cancel_task(service: Any, task_id: str, reason: str | None, source: str = "user", wait_s: float = 30.0) -> tuple[Any, bool, str]:
    """Cancel a task (docs/agents-tasks.md §2.7).

    queued/needs_user → Cancelled at once; running → cancel marker + kill of the agent's
    process tree, the flow ends itself ``Cancelled`` (written for it after
    :data:`ORDERLY_CANCEL_GRACE_S`); wait ≤ ``wait_s`` for the terminal state. Terminal → no-op.

    Returns:
        ``(view, settled, text)``.
    """
    import anyio

    view = await service.view(task_id)
    if view.status in TERMINAL:
        return view, True, _("task is already final ({status}); nothing to cancel").format(status=view.status)
    if not view.task.get("flowRunId"):
        withdrawn = await _withdraw(service, task_id, reason)
        if withdrawn is not None:
            return withdrawn, True, _("cancelled {taskId}").format(taskId=task_id)
        view = await service.view(task_id)  # its flow run was created meanwhile
    client = await service.client()
    from prefect.states import Cancelled

    tdir = service.store.dir(task_id)
    now = utc_now()
    interrupted = source == "shutdown"
    (tdir / CANCEL_FILE).unlink(missing_ok=True)  # this request's source and reason win
    request_cancel(tdir, source, reason)
    fields: dict[str, Any] = {"cancelRequestedAt": now, "abortSource": source}
    if reason:
        fields["cancelReason"] = reason
    service.store.update(task_id, **fields)
    service.store.event(task_id, "cancel_requested", view.status, f"cancel requested: {reason}" if reason else "cancel requested (no reason)")
    flow_run_id = view.task.get("flowRunId")
    if view.status in ("queued", "needs_user"):
        was = _("queued") if view.status == "queued" else _("waiting for the user")
        msg = (_("server exited; {was} task archived").format(was=was) if interrupted
               else _("cancelled ({was})").format(was=was) + (_(": {reason}").format(reason=reason) if reason else ""))
        if flow_run_id:
            await client.set_flow_run_state(
                flow_run_id, Cancelled(name=INTERRUPTED if interrupted else "Cancelled", message=msg), force=True
            )
        finish_cancel(service, task_id, msg, interrupted)
        return await service.view(task_id), True, _("cancelled {taskId}").format(taskId=task_id) if not interrupted else msg
    if view.task.get("workPool") and flow_run_id:  # on a worker that cannot see the marker
        from .remote_sync import cancel_remote

        return await cancel_remote(service, client, task_id, flow_run_id, reason, wait_s)
    # running: kill the agent tree now (same host); the flow sees the marker and the killed
    # agent and ends itself Cancelled — an orderly end, no crash in its log. Only a flow
    # that does not end within the grace gets its final state written for it (its process
    # is then aborted by Prefect on its next state change, its watcher kills what it
    # started, and a process that hangs is ended by the service's watchdog).
    # an ACP agent or a desktop app is first asked to stop its own way (session/cancel, the
    # stop button: guiStop is reported), for at most its driver's grace
    grace_ms = await anyio.to_thread.run_sync(agent_stop_grace_ms, service.runtime.home, view.task.get("agentId"))
    stop_deadline = anyio.current_time() + min(grace_ms / 1000, wait_s / 2)
    while anyio.current_time() < stop_deadline and (await service.view(task_id)).status not in TERMINAL:
        await anyio.sleep(0.2)
    await anyio.to_thread.run_sync(kill_recorded, tdir / AGENT_PROC_FILE)
    deadline = anyio.current_time() + wait_s
    forced = False
    grace = anyio.current_time() + ORDERLY_CANCEL_GRACE_S
    while anyio.current_time() < deadline:
        view = await service.view(task_id)
        if view.status in TERMINAL:
            break
        if not forced and anyio.current_time() > grace and flow_run_id:
            forced = True
            await client.set_flow_run_state(
                flow_run_id,
                Cancelled(name=INTERRUPTED if interrupted else "Cancelled",
                          message=_("server exited") if interrupted else (reason or _("cancelled"))),
                force=True,
            )
            continue
        await anyio.sleep(0.2)
    settled = view.status in TERMINAL
    if settled:
        task = service.read_task(task_id)
        if view.status in ("cancelled", "interrupted") and (
                not task.get("finishedAt") or task.get("errorType") not in ("cancelled", "interrupted")):
            msg = _("server exited; the agent process was terminated") if interrupted else (
                _("cancelled") + (_(": {reason}").format(reason=reason) if reason else ""))
            finish_cancel(service, task_id, msg, interrupted)
        view = await service.view(task_id)
        return view, True, _("cancelled {taskId}").format(taskId=task_id) if not interrupted else _("interrupted")
    return view, False, _("cancel requested for {taskId}, not final yet after {secs} s; "
                          "check again with query_task").format(taskId=task_id, secs=f"{wait_s:.0f}")

async def _withdraw(service: Any, task_id: str, reason: str | None) -> Any | None:
    """Cancel a task whose flow run does not exist yet: drop its submission entry under the
    submitters' lock. None when a flow run was created meanwhile (cancel that instead)."""
    import anyio

    lock = submissions.entry_lock(service.runtime.home, task_id, timeout_s=10)
    await anyio.to_thread.run_sync(lock.acquire)
    try:
        task = service.read_task(task_id)
        if task.get("flowRunId"):
            return None
        submissions.remove(service.runtime.home, task_id)
        msg = _("cancelled (queued, before its flow run was created)") + (_(": {reason}").format(reason=reason) if reason else "")
        service.store.update(task_id, finalStatus="cancelled", cancelRequestedAt=utc_now(), abortSource="user",
                          **({"cancelReason": reason} if reason else {}))
        finish_cancel(service, task_id, msg, False)
    finally:
        lock.release()
    return await service.view(task_id)


def finish_cancel(service: Any, task_id: str, msg: str, interrupted: bool) -> None:
    """Record a cancelled (or interrupted) end in ``task.json`` and its status event."""
    status = "interrupted" if interrupted else "cancelled"
    service.store.update(task_id, lastMessage=msg, errorType=status, finishedAt=utc_now(), phase=None, **NO_QUESTION)
    service.store.event(task_id, status, status, msg)
