"""``wait_task``: block until a task, or the first of several, reaches a stop point (docs/tools.md §3.3).

Polls every 500 ms, and at once when a waited task's record changes (design note 77). With ``taskIds``, a task whose record is damaged (``TASK_RECORD_CORRUPT``) is
left out with a note and the others are still waited for (docs/robustness.md §6: one damaged id failed the
whole call); the call fails only when no listed task can be read. A client that sent a progress token
gets ``notifications/progress`` while the call waits (:mod:`.progress`, design note 89).
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import httpx
import mcp_types as types

from ..core.errors import ErrorCode, TianshuError
from ..core.i18n import _
from ..core.model import is_wait_settled
from ..core.taskstore import age_s
from .format import clip, ok_result
from .phrases import status_phrase
from .progress import describe_views, progress_ticker
from .taskops import TaskService, TaskView

WAIT_DEFAULT_MS = 50000
WAIT_MAX_MS = 600000
WAIT_POLL_S = 0.5
WAIT_ENDING_POLL_S = 0.05
"""Poll interval (s) once a waited task's flow has recorded its end (``finishedAt``) and only its
flow run's final state is still to come (≈0.1 s later): the answer then follows the state within
50 ms instead of ≤ 0.5 s (docs/design-notes.md, note 56)."""
RECORD_LOOK_S = 0.02
"""Between two polls, how often the waited tasks' records are looked at for a change, s
(:func:`_sleep_unless_changed`)."""
STARTING_POLL_S = 10.0
"""While the service is still starting, how long one read waits for it before the call reports
progress and waits again (up to its own timeout), s."""
WAIT_ENDING_S = 5.0
"""The quick polls last this long after ``finishedAt`` (s); a run whose final state never comes
(its engine died after the record) is polled at :data:`WAIT_POLL_S` again."""


def _ending(view: TaskView) -> bool:
    """The task's flow recorded its end within :data:`WAIT_ENDING_S` and its run has not settled."""
    age = age_s(view.task.get("finishedAt"))
    return age is not None and age <= WAIT_ENDING_S


def _readable(service: TaskService, ids: list[str], damaged: dict[str, str]) -> list[dict[str, Any]]:
    """The records of ``ids`` that can be read; the others go to ``damaged`` ``{id: why}``.

    Raises:
        TianshuError: ``TASK_RECORD_CORRUPT`` when none can be read.
    """
    tasks: list[dict[str, Any]] = []
    first: TianshuError | None = None
    for task_id in ids:
        if task_id in damaged:
            continue
        try:
            tasks.append(service.read_task(task_id))
        except TianshuError as exc:
            if exc.code is not ErrorCode.TASK_RECORD_CORRUPT:
                raise
            damaged[task_id] = exc.message
            first = first or exc
    if not tasks:
        raise first or TianshuError(ErrorCode.TASK_RECORD_CORRUPT, _("no listed task can be read"))
    return tasks


async def wait_task(service: TaskService, runtime: Any, args: dict[str, Any], ctx: Any = None) -> types.CallToolResult:
    """Wait for a stop point (terminal or needs_user) of ``taskId`` or the first of ``taskIds``.

    Args:
        service: the task service.
        runtime: the server runtime (for the meta block).
        args: schema-checked arguments ``{taskId | taskIds, timeoutMs?}`` (ms, default 50000,
            clamped to 600000).
        ctx: the request context (progress notifications when the client gave a token).

    Raises:
        TianshuError: ``INVALID_ARGUMENT`` (neither or both of taskId/taskIds), ``TASK_NOT_FOUND``
            (an id names no task), ``TASK_RECORD_CORRUPT`` (the single task, or every listed
            one, has a damaged record).
    """
    single, many = args.get("taskId"), args.get("taskIds")
    if (single is None) == (many is None):
        which = _("neither was given") if single is None else _("both were given")
        raise TianshuError(ErrorCode.INVALID_ARGUMENT,
                           _("give exactly one of taskId (single) or taskIds (batch); {which}").format(which=which))
    ids = [single] if single is not None else list(dict.fromkeys(many))  # duplicates once
    missing = [i for i in ids if not service.store.exists_dir(i)]  # a damaged record is not a missing one
    if missing:
        raise TianshuError(ErrorCode.TASK_NOT_FOUND, _("task not found: {taskId}").format(taskId=clip(", ".join(missing))))
    requested = int(args.get("timeoutMs", WAIT_DEFAULT_MS))
    timeout_ms = min(requested, WAIT_MAX_MS)
    clamp = _(" (timeoutMs above the maximum, clamped to {ms} ms)").format(ms=WAIT_MAX_MS) if requested > WAIT_MAX_MS else ""
    start = time.monotonic()
    # this process's one import of Prefect's client (design note 79), ≈1 s on the first call
    # that needs it: not the service's state, so not part of the wait's own time (a short wait
    # on a task that ended long ago answered "the service did not answer yet"); the home's own
    # service is read with plain HTTP and needs none (note 84)
    if runtime.mode != "service":
        await runtime.prefect()
    deadline = time.monotonic() + timeout_ms / 1000
    damaged: dict[str, str] = {}
    views: list[TaskView] | None = None  # the newest views read
    stopped: TaskView | None = None
    # signs of life for the host while it waits (design note 89): the newest read's status and message
    async with progress_ticker(ctx, timeout_ms / 1000, lambda: describe_views(views)):
        while True:
            read_as = _signature(service, ids)  # the records as this poll reads them
            fresh = await _poll(service, runtime, single, ids, damaged, deadline)
            waited = int((time.monotonic() - start) * 1000)
            if fresh is None:  # the service did not answer this time: connecting, starting or restarting
                if time.monotonic() >= deadline:
                    if views is None:  # a slow start (or a killed service) is a wait that timed out, not an error
                        return _timed_out_unread(ids, waited, clamp)
                    break  # the newest state read is the answer
                await anyio.sleep(min(WAIT_POLL_S / 5, max(0.0, deadline - time.monotonic())))
                continue
            views = fresh
            stopped = next((v for v in views if is_wait_settled(v.status)), None)
            if stopped is not None:
                # its record was read before its state: read it again, now that the flow wrote it
                # (the flow records a question or a final message, then its run changes state)
                again = await _reread(service, stopped, deadline)
                views = [again if v is stopped else v for v in views]
                stopped = again
            waited = int((time.monotonic() - start) * 1000)
            if stopped is not None or time.monotonic() >= deadline:
                break
            every = WAIT_ENDING_POLL_S if any(_ending(v) for v in views) else WAIT_POLL_S
            await _sleep_unless_changed(service, ids, min(every, max(0.0, deadline - time.monotonic())), read_as)
    secs = f"{waited / 1000:.1f}"
    if single is not None:
        view = views[0]
        meta = view.meta(runtime)
        meta.update(waitSettled=stopped is not None, waitedMs=waited)
        if stopped is not None:
            nxt = next_step(view)
            return ok_result(_("task reached a stop point (waited {secs} s): {status}\nnext: {next}").format(
                secs=secs, status=status_phrase(view), next=nxt), meta)
        return ok_result(_("wait timed out ({secs} s): {status}{clamp}\n"
                           "the task is unaffected; call wait_task again to keep waiting.").format(
                               secs=secs, status=status_phrase(view), clamp=clamp), meta)
    listing = "\n".join([f"- {v.task['taskId']}: {status_phrase(v)}" for v in views]
                        + [_("- {taskId}: not waited for, damaged task record ({why})").format(taskId=i, why=clip(why))
                           for i, why in damaged.items()])
    skipped = {"skippedRecords": sorted(damaged)} if damaged else {}
    if stopped is not None:
        meta = stopped.meta(runtime)
        meta.update(waitSettled=True, waitedMs=waited, **skipped)
        return ok_result(_("a task reached a stop point (waited {secs} s): {taskId} — {status}\n"
                           "next: {next}\nall tasks now:\n{listing}").format(
                               secs=secs, taskId=stopped.task["taskId"], status=status_phrase(stopped),
                               next=next_step(stopped), listing=listing), meta)
    return ok_result(_("wait timed out ({secs} s): no task reached a stop point yet.{clamp}\n"
                       "call wait_task again to keep waiting.\nall tasks now:\n{listing}").format(
                           secs=secs, clamp=clamp, listing=listing),
                     {"ok": False, "message": _("wait timed out"), "waitSettled": False, "waitedMs": waited, **skipped})


def _signature(service: TaskService, ids: list[str]) -> tuple[tuple[int, int, int] | None, ...]:
    """Each waited record's :meth:`~tianshu_mcp.core.taskstore.TaskStore.signature`."""
    return tuple(service.store.signature(task_id) for task_id in ids)


async def _sleep_unless_changed(service: TaskService, ids: list[str], seconds: float,
                                since: tuple[tuple[int, int, int] | None, ...] | None = None) -> None:
    """Sleep ``seconds``, or less: until a waited task's record differs from ``since`` (the
    :func:`_signature` the last poll read them at; default: now), looked at every
    :data:`RECORD_LOOK_S`. A task's end is first written to its record (``finishedAt``), and
    the wait then polls quickly for the final state; without this the end was noticed up to
    :data:`WAIT_POLL_S` late, half of that on average in every waited task's time (design note
    77). A record written while the poll was reading the run's state (design note 82) differs
    from ``since`` at the first look, so it is not missed for a whole interval. A look is one
    ``stat`` per waited task; no Prefect read."""
    end = time.monotonic() + seconds
    before = since if since is not None else _signature(service, ids)
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return
        await anyio.sleep(min(RECORD_LOOK_S, left))
        if _signature(service, ids) != before:
            return


async def _poll(service: TaskService, runtime: Any, single: str | None, ids: list[str], damaged: dict[str, str],
                deadline: float) -> list[TaskView] | None:
    """One read of the waited tasks' views, never past ``deadline`` (monotonic s); None when the
    service did not answer: this server is still connecting to it or it is still starting (a
    read waits for that ≤ :data:`STARTING_POLL_S`), or it stopped answering (killed: the runtime
    reconnects, which may start a new one; Prefect's client would retry a dead address for
    ≈ 18 s, so the read is cut at the call's deadline).

    Raises:
        TianshuError: any other coded error (``TASK_RECORD_CORRUPT``, a service that cannot
            start: ``PREFECT_UNAVAILABLE`` once the connection has failed, …).
    """
    remaining = deadline - time.monotonic()
    try:
        with anyio.move_on_after(max(0.1, remaining)):
            tasks = [service.read_task(single)] if single is not None else _readable(service, ids, damaged)
            return await service.views(tasks, max(0.1, min(STARTING_POLL_S, remaining)))
        return None  # cut at the deadline
    except TianshuError as exc:
        unanswered = isinstance(exc.__cause__, (TimeoutError, httpx.TransportError))  # the read was cut
        if exc.code != ErrorCode.PREFECT_UNAVAILABLE or not (runtime.starting or unanswered):
            raise
        return None
    except httpx.TransportError:
        runtime.invalidate()  # the service was stopped or killed: connect again
        return None


async def _reread(service: TaskService, stopped: TaskView, deadline: float) -> TaskView:
    """``stopped`` read again (its record is newer than the state that stopped it); ``stopped``
    itself when the service does not answer by ``deadline``."""
    try:
        with anyio.move_on_after(max(0.1, deadline - time.monotonic())):
            return await service.view(stopped.task["taskId"])
    except (TianshuError, httpx.TransportError):
        pass
    return stopped


def _timed_out_unread(ids: list[str], waited_ms: int, clamp: str) -> types.CallToolResult:
    """The answer of a wait whose time ran out before any state could be read: this server's
    connection to the service was not ready (it connects, or the service starts or restarts on
    a loaded machine). A wait that timed out, with no status, since only the flow run's state
    says it (docs/tools.md §3.3; ``serviceNotReady`` true). The host waits again as after any
    timeout."""
    meta: dict[str, Any] = {"ok": False, "message": _("wait timed out: the service did not answer yet"),
                            "waitSettled": False, "waitedMs": waited_ms, "serviceNotReady": True}
    if len(ids) == 1:
        meta["taskId"] = ids[0]
    return ok_result(_("wait timed out ({secs} s) before the state of {tasks} could be read: this server is still "
                       "connecting to the tianshu-mcp service, or the service is starting.{clamp}\n"
                       "the task is unaffected; call wait_task again to keep waiting.").format(
                           secs=f"{waited_ms / 1000:.1f}", tasks=", ".join(ids), clamp=clamp), meta)


def next_step(view: TaskView) -> str:
    """What the caller does next with a task at a stop point (wait_task's ``next:`` line, docs/tools.md
    §2.7): answer a question, have a person approve visual baselines, read the dry-run report or
    the acceptance report, or read the agent log when no report was written."""
    if view.status == "needs_user":
        return _('use manage_task(action="continue") then wait again')
    if view.task.get("pendingVisualVerification") and view.status == "needs_attention":
        return _('a person approves the visual baselines: prepare_visual_baseline(projectPath), review its preview, '
                 'approve_visual_baseline(..., taskId="{taskId}"), then manage_task(action="rework") '
                 "re-verifies before any agent round").format(taskId=view.task["taskId"])
    if view.task.get("dryRunReportMd"):
        return _("read the dry-run report {path} (no agent ran)").format(path=view.task["dryRunReportMd"])
    if view.task.get("reportMd"):
        return _('read the report with query_info(type="report", taskId="{taskId}")').format(taskId=view.task["taskId"])
    return _('no acceptance report was written; see query_task(taskId="{taskId}") for the agent log').format(
        taskId=view.task["taskId"])

