"""``manage_task(action="continue")``: answer a task that waits for the user (docs/agents-tasks.md §2.8).

The task's flow run is ``Suspended`` (:mod:`tianshu_mcp.flows.needs_user`); the answer becomes its
run input through Prefect's ``resume_flow_run``. The run is then ``Resuming`` (status ``queued``)
until its project's queue lets it run, and re-runs the asking round with the answer.
"""

from __future__ import annotations

from ..core.errors import ErrorCode, TianshuError
from ..core.i18n import _
from .format import clip
from .taskops import TaskService, TaskView


async def continue_task(service: TaskService, task_id: str, message: str) -> TaskView:
    """Resume ``task_id`` from needs_user with the user's ``message``.

    Raises:
        TianshuError: ``INVALID_ARGUMENT`` (empty message), ``TASK_NOT_FOUND``,
            ``INVALID_STATE`` (the task is not needs_user, or Prefect refused to resume its run).
    """
    if not message.strip():
        raise TianshuError(ErrorCode.INVALID_ARGUMENT, _("action=continue needs a non-empty message"))
    view = await service.view(task_id)
    if view.status != "needs_user":
        raise TianshuError(ErrorCode.INVALID_STATE,
                           _("task status is {status}; only a needs_user task can be continued").format(status=view.status))
    flow_run_id = view.task.get("flowRunId")
    client = await service.client()
    from prefect.client.schemas.responses import SetStateStatus

    # the answer is kept in task.json too, before the run can restart: the flow takes it from
    # there when Prefect's run input cannot be read (flows.needs_user.take_answer)
    service.store.update(task_id, continueMessage=message, continueKey=view.task.get("needsUserKey"))
    try:
        response = await client.resume_flow_run(flow_run_id, run_input={"message": message})
    except BaseException:
        service.store.update(task_id, continueMessage=None, continueKey=None)
        raise
    if response.status != SetStateStatus.ACCEPT:
        service.store.update(task_id, continueMessage=None, continueKey=None)
        reason = getattr(response.details, "reason", None) or response.status.value
        raise TianshuError(ErrorCode.INVALID_STATE, _("Prefect refused to resume {taskId}'s flow run: {reason}").format(
            taskId=task_id, reason=clip(str(reason))))
    kind = view.task.get("needsUserKind") or "unknown"
    # the question is answered (docs/tools.md §3.6: needsUserKind/pendingQuestion cleared); the flow
    # reads it back from needsUserQuestion when it re-runs the round
    service.store.update(task_id, lastMessage=_("answered by the user; queued to resume the round"),
                         needsUserKind=None, pendingQuestion=None)
    service.store.event(task_id, "continued", "queued", f"needs_user resumed ({kind})", {"kind": kind})
    return await service.view(task_id)
