"""The flow run's side of worktree isolation (docs/isolation.md §1; :mod:`tianshu_mcp.core.git.worktree`).

:func:`open_workspace` runs before the project gate: it takes the task's worktree lock, makes (or
re-opens) the worktree and records where the task works (``workPath``; the agent's cwd, the
checks' and the reports' project). :func:`close_workspace` runs when the flow run returns a final
state: the result is committed to ``tianshu/<taskId>``, ``result.patch`` written, the worktree
removed and the lock released. A needs_user suspension (an exception out of the flow) keeps it.
"""

from __future__ import annotations

from filelock import FileLock

from ..core.errors import TianshuError
from ..core.i18n import _
from ..core.record import Isolation, TaskRecord
from ..core.settings import data_home
from ..tasks.common import record, store
from ..core.git.worktree import Workspace, WorktreeClose, close_worktree, hold, open_worktree

_held: dict[str, tuple[Workspace, FileLock]] = {}


def open_workspace(task_id: str, project_path: str, meta: TaskRecord) -> str:
    """Where the task works: ``project_path`` itself (``inplace``), else its worktree.

    Returns:
        The work path (the worktree's top plus the project's path inside its repository).

    Raises:
        TianshuError: WORKTREE_UNAVAILABLE (not git, no commit), GIT_FAILED (git refused),
            INVALID_STATE (another process holds the task's worktree).
    """
    if meta.isolation != Isolation.WORKTREE or meta.dryRun:
        return project_path
    home = data_home()
    lock = hold(home, task_id)
    try:
        ws = open_worktree(home, task_id, project_path, meta.worktreeBase, meta.worktreeStart)
    except TianshuError:
        lock.release()
        raise
    _held[task_id] = (ws, lock)
    record(task_id, workPath=ws.work_path, worktreePath=ws.top, worktreeBase=ws.base_commit,
           resultBranch=ws.branch, **({"dirtyNotCarried": len(ws.dirty_not_carried)} if ws.created else {}))
    st = store()
    if ws.created:
        left = ws.dirty_not_carried
        said = _("; {n} uncommitted path(s) of the project are not in it (it starts at HEAD): {paths}").format(
            n=len(left), paths=", ".join(left[:10]) + (" …" if len(left) > 10 else "")) if left else ""
        st.event(task_id, "note", "running", _("worktree {top} on new branch {branch} from {commit}{said}").format(
            top=ws.top, branch=ws.branch, commit=ws.base_commit[:12], said=said))
    else:
        st.event(task_id, "note", "running",
                 _("worktree {top} re-opened on branch {branch}").format(top=ws.top, branch=ws.branch))
    return ws.work_path


def close_workspace(task_id: str, status: str, commit: bool = True) -> WorktreeClose | None:
    """Commit the task's result to its branch, write ``result.patch``, remove the worktree.

    Args:
        status: the task's final status. ``succeeded``: commit exactly the files its passing
            verification counted (``changedFiles``); otherwise every changed path but tool
            caches, so unverified work is kept on the branch too.
        commit: False for a verification of a finished task (``verify_task(taskId)``): nothing
            is committed, the worktree is only removed.

    Returns:
        What :func:`~tianshu_mcp.core.git.worktree.close_worktree` returned (``resultBranch``,
        ``resultCommit``, ``resultPatch``, ``patchBytes``, ``error``), None for an inplace task.
    """
    held = _held.pop(task_id, None)
    if held is None:
        return None
    ws, lock = held
    st = store()
    try:
        meta = st.load(task_id)
        changed = meta.changedFiles if meta is not None else None
        files = (changed if status == "succeeded" else None) if commit else []
        brief = str((meta.task if meta is not None else None) or "").strip().splitlines()
        subject = f"tianshu: {task_id}" + (f" {brief[0][:60]}" if brief else "")
        out = close_worktree(ws, st.dir(task_id), files, subject)
        record(task_id, workPath=None, worktreePath=None, resultCommit=out.resultCommit, resultPatch=out.resultPatch)
        what = (_("branch {branch} unchanged").format(branch=ws.branch) if not commit
                else _("result committed to {branch} ({commit})").format(branch=ws.branch, commit=out.resultCommit[:12])
                if out.resultCommit
                else _("no change to commit; branch {branch} stays at the baseline").format(branch=ws.branch))
        st.event(task_id, "note", status, _("{what}; patch {patch} ({bytes} bytes); worktree removed").format(
            what=what, patch=out.resultPatch, bytes=out.patchBytes)
            + (_("; git said: {error}").format(error=out.error) if out.error else ""))
        return out
    finally:
        lock.release()
