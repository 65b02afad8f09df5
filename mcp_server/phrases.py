"""How a task's status reads in tool replies (docs/tools.md §2.7)."""

from __future__ import annotations

from typing import Any

from ..core.i18n import N_, _, ngettext
from ..core.model import exit_phrase
from .taskops import TaskView

_LABELS = {
    "queued": N_("queued"),
    "running": N_("running (the agent is at work)"),
    "verify_start": N_("verifying (acceptance checks running)"),
    "fixing": N_("reworking (writing the repair plan for the next round)"),
    "succeeded": N_("[PASS] task succeeded"),
    "failed": N_("[FAIL] task failed"),
    "needs_attention": N_("[WARN] needs attention (a human should look)"),
    "needs_user": N_('waiting for the user (resume with manage_task(action="continue"))'),
    "cancelled": N_("cancelled"),
    "interrupted": N_("interrupted (server restart/exit)"),
}


def status_phrase(view: TaskView) -> str:
    """``status: <label>`` + `` (N rounds used; last agent run: exit code C after D ms)`` when
    rounds were used / an agent ran (docs/tools.md §2.7; docs/lifecycle.md §8). A queued task's
    label says what it waits for (:attr:`TaskView.waiting_for`)."""
    used = int(view.task.get("roundsUsed") or 0)
    parts = [ngettext("{n} round used", "{n} rounds used", used).format(n=used)] if used else []
    if "agentDurationMs" in view.task and view.status not in ("queued", "running"):
        parts.append(_("last agent run: {exit} after {ms} ms").format(
            exit=exit_phrase(view.task.get("agentExitCode")), ms=view.task.get("agentDurationMs")))
    label = _(_LABELS[view.status]) if view.status in _LABELS else view.status
    if view.status == "queued" and view.waiting_for:
        label = _("queued ({why})").format(why=view.waiting_for)
    return _("status: {label}").format(label=label) + (_(" ({details})").format(details=_("; ").join(parts)) if parts else "")


def submitted_lines(task: dict[str, Any], agent_id: str, agent_message: str, project: Any, isolation: str,
                    parallel: int | None, cfg: Any, flow_run_url: str | None, active_id: str | None,
                    dirty: int | None) -> list[str]:
    """run_task's reply body for a new task (docs/tools.md §2.7 "run_task (new)"): submitted id, agent,
    project (+ symlink note), auto verification and rework, queue or worktree line, brief (first
    120 chars), dry-run line, Prefect link, then the active-task and dirty-repository notes.

    ``project`` is a :class:`~tianshu_mcp.core.paths.SafeProject`; ``cfg`` the
    :class:`~tianshu_mcp.core.settings.ServerConfig`; ``dirty`` the uncommitted-change count.
    """
    rounds = int(task["autoFixRounds"])
    limit = cfg.concurrency.max_running
    lines = [
        _("task submitted: {taskId}").format(taskId=task["taskId"]),
        _("agent: {agentId}").format(agentId=agent_id) + (_(" ({details})").format(details=agent_message) if agent_message else ""),
        _("project: {path}").format(path=project.norm)
        + (_(" (resolved through a symlink from {raw})").format(raw=project.raw) if project.via_symlink else ""),
        _("auto verification: {onoff}").format(onoff=_("on") if task["autoVerify"] else _("off"))
        + (ngettext(", up to {n} automatic rework round", ", up to {n} automatic rework rounds", rounds).format(n=rounds)
           if rounds else _(" (no automatic rework)")),
        (_("queue: one task at a time per project + global limit {limit}. ").format(limit=limit)
         if isolation == "inplace" else
         _("isolation: worktree on branch tianshu/{taskId} from HEAD; up to "
           "{parallel} worktree tasks of this repository at once "
           "+ global limit {limit}. ").format(taskId=task["taskId"], parallel=parallel or cfg.concurrency.worktree_parallel,
                                             limit=limit))
        + _("Poll with query_task({taskId}) every 5-10 s, or wait_task.").format(taskId=task["taskId"]),
        _("brief: {brief}").format(brief=task["task"][:120] + ("…" if len(task["task"]) > 120 else "")),
        *([_("dry run: no agent starts and the project is not changed; the report says what would run and "
             "what would block it")] if task.get("dryRun") else []),
        (_("Prefect flow run: {url}").format(url=flow_run_url) if flow_run_url else
         _("Prefect flow run: being created; the task is already accepted and durable, query_task shows "
           "the link once it exists")),
    ]
    if active_id:
        lines.append(_("note: this project already has an unfinished task {taskId}; "
                       "this one waits behind it.").format(taskId=active_id))
    if dirty and isolation == "worktree":
        lines.append(_("note: the repository has {n} uncommitted change(s); the task's worktree starts at "
                       "HEAD without them (commit them first if the agent needs them).").format(n=dirty))
    elif dirty:
        lines.append(_("note: the repository has {n} uncommitted change(s); they are part of the baseline and "
                       "not attributed to the agent, unless it changes those files too (their whole diff then "
                       "counts).").format(n=dirty))
    return lines
