"""run_task's ``isolation`` and manage_task's ``merge`` (docs/isolation.md §1).

The work itself is :mod:`tianshu_mcp.core.git.worktree` (git) and :mod:`tianshu_mcp.flows.isolation`
(the flow run's side); this module decides a call's isolation mode and merges a result branch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

from ..core.errors import ErrorCode, TianshuError
from ..core.i18n import _
from ..core.taskstore import utc_now
from .remote import refuse_remote

if TYPE_CHECKING:
    from ..core.git.worktree import MergeResult

MODES = ("inplace", "worktree")


def resolve_isolation(args: dict[str, Any], registered: dict[str, Any], norm: str) -> tuple[str, int | None]:
    """The call's isolation mode and, for ``worktree``, the repository's parallel limit.

    The argument wins over the project's ``projects.json`` ``isolation``; ``worktreeParallel``
    there (1..32) overrides config.json's ``concurrency.worktreeParallel``. A worktree needs a git
    repository with a commit; that is checked here, so a bad call is refused before anything runs.

    Returns:
        ``(mode, limit)``; ``limit`` None means config.json's value.

    Raises:
        TianshuError: CONFIG_INVALID (a bad ``projects.json`` value), WORKTREE_UNAVAILABLE.
    """
    mode = args.get("isolation") or registered.get("isolation") or "inplace"
    if mode not in MODES:
        raise TianshuError(ErrorCode.CONFIG_INVALID, _("projects.json: the entry of {path} has isolation {mode}; use "
                                                       "one of {modes}").format(path=norm, mode=repr(mode),
                                                                                modes=", ".join(MODES)))
    limit = registered.get("worktreeParallel")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 32):
        raise TianshuError(ErrorCode.CONFIG_INVALID, _("projects.json: the entry of {path} has worktreeParallel "
                                                       "{limit}; use an integer 1..32").format(path=norm, limit=repr(limit)))
    if mode == "worktree":
        from ..core.git.worktree import repo_top

        repo_top(norm)  # WORKTREE_UNAVAILABLE: not git, or no commit yet
    return mode, limit


async def merge_task(service: Any, task_id: str) -> tuple[MergeResult, str]:
    """manage_task(action="merge"): merge a succeeded worktree task's ``tianshu/<taskId>`` into
    the project's current branch (``git merge --no-ff``) and delete the merged branch.

    Returns:
        ``(merge, text)``: the :class:`~tianshu_mcp.core.git.worktree.MergeResult`
        ``{branch, mergeCommit, alreadyMerged}`` and the answer's text.

    Raises:
        TianshuError: TASK_NOT_FOUND; INVALID_STATE (not a worktree task, not succeeded, or an
            unfinished in-place task of the project is editing its work tree); MERGE_CONFLICT;
            GIT_FAILED (git refused, e.g. uncommitted changes in files the branch changes).
    """
    from ..core.git.worktree import MergeResult, merge_result

    view = await service.view(task_id)
    task = view.task
    if task.get("mergeCommit"):  # merged before: the same answer again, nothing done
        merged = MergeResult(branch=task.get("resultBranch"), mergeCommit=task["mergeCommit"], alreadyMerged=True)
        return merged, _("task {taskId}: {branch} was merged already, as {commit}.").format(
            taskId=task_id, branch=merged.branch, commit=task["mergeCommit"])
    refuse_remote(task, "merge")
    if task.get("isolation") != "worktree":
        raise TianshuError(ErrorCode.INVALID_STATE, _("{taskId} ran in the project's own work tree (isolation "
                                                      "inplace): its changes are already there, there is nothing to "
                                                      "merge").format(taskId=task_id))
    if view.status != "succeeded":
        branch = task.get("resultBranch")
        raise TianshuError(ErrorCode.INVALID_STATE, _("{taskId} is {status}; only a succeeded task's branch is merged by "
                                                      "manage_task").format(taskId=task_id, status=view.status)
                           + (_(" (its branch {branch} can still be merged by hand with git merge)").format(branch=branch)
                              if branch else ""))
    busy = _inplace_editor(service, task["projectPath"], task_id)
    if busy:
        raise TianshuError(ErrorCode.INVALID_STATE, _("task {busy} is working in {path} itself (isolation inplace); "
                                                      "merge when it has finished").format(busy=busy,
                                                                                           path=task["projectPath"]))
    brief = str(task.get("task") or "").strip().splitlines()
    message = f"Merge {task.get('resultBranch')} (tianshu task {task_id})" + (f": {brief[0][:60]}" if brief else "")
    merged = await anyio.to_thread.run_sync(merge_result, service.runtime.home, task["projectPath"], task_id, message)
    service.store.update(task_id, mergeCommit=merged.mergeCommit, mergedAt=utc_now())
    service.store.event(task_id, "note", view.status, f"merged {merged.branch}"
                        + (f" as {merged.mergeCommit[:12]}" if merged.mergeCommit else " (already merged)"))
    text = (_("task {taskId}: {branch} merged into {path} as {commit}; the merged branch was deleted.")
            if merged.mergeCommit else
            _("task {taskId}: {branch} was already part of {path}'s branch; the merged branch was deleted.")).format(
        taskId=task_id, branch=merged.branch, path=task["projectPath"], commit=merged.mergeCommit)
    return merged, text


def refuse_gone_result(task: dict[str, Any]) -> None:
    """Refuse a re-run (``rework``, ``verify_task(taskId)``) of a local worktree task whose result
    branch was merged or deleted: nothing of its work is left to continue or verify (README,
    "Parallel tasks on one repository"). Said at the call, before the flow run is touched.

    Raises:
        TianshuError: INVALID_STATE naming the branch; nothing for other tasks.
    """
    from ..core.git.worktree import branch_exists, branch_name, repo_top

    if task.get("isolation") != "worktree" or task.get("workPool") or not task.get("resultBranch"):
        return
    branch = task["resultBranch"]
    if task.get("mergeCommit"):
        why = _("its branch {branch} was merged as {commit}").format(branch=branch, commit=str(task["mergeCommit"])[:12])
    else:
        try:
            top, _rel = repo_top(str(task["projectPath"]))
            if branch_exists(top, branch_name(str(task["taskId"]))):
                return
        except TianshuError:
            pass  # the repository itself is gone or broken: its branch is gone with it
        why = _("its branch {branch} no longer exists (deleted by hand?)").format(branch=branch)
    raise TianshuError(ErrorCode.INVALID_STATE, _("task {taskId}: {why}; there is no work of it left to rework or "
                                                  "verify — start a new task").format(taskId=task["taskId"], why=why))


def _inplace_editor(service: Any, norm: str, own: str) -> str | None:
    """An unfinished in-place task of ``norm``'s repository (it edits the work tree a merge writes)."""
    from ..core.paths import serial_key

    key = serial_key(norm)
    for task in service.store.unfinished(("tsk_",), every=True):  # rare and must not miss one: every record
        if (task.get("taskId") != own and task.get("isolation", "inplace") == "inplace"
                and isinstance(task.get("projectPath"), str) and serial_key(task["projectPath"]) == key):
            return str(task["taskId"])
    return None
