"""Prefect task ``dry-run-{n}``: what the task would do, without doing it (docs/tools.md §3.7).

Composes the agent's side (the profile resolved, the invocation a round would use) with the
acceptance side (:mod:`tianshu_mcp.acceptance.dry_run`: checks, git, the project's plan file). No
agent starts, no check runs, the project is not written (git is read without index refresh).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from prefect import get_run_logger
from pydantic import BaseModel, ConfigDict

from ..acceptance.dry_run import (
    acceptance_preflight,
    check_plan,
    finding,
    git_preflight,
    judge_preflight,
    next_dry_run_number,
    write_report,
)
from ..adapters.cli import AgentRunContext, build_invocation
from ..adapters.profiles import resolve_agent
from ..core.errors import TianshuError
from ..core.i18n import _
from ..core.record import TaskRecord
from ..core.settings import data_home, load_config
from ..core.taskstore import utc_now
from .common import load_task, step, store


class AgentPreview(BaseModel):
    """The report's ``agent`` section: ``{"id", "ok", "message"}``, and for a usable agent also
    ``{"argv", "cwd", "timeoutMs", "promptMode"}`` (the invocation round 0 would use). The report
    writes the keys that were set (``model_dump(exclude_unset=True)``)."""

    model_config = ConfigDict(frozen=True)

    id: str
    ok: bool
    message: str | None = None
    argv: list[str] | None = None
    cwd: str | None = None
    timeoutMs: int | None = None
    promptMode: str | None = None


class DryRunResult(BaseModel):
    """What ``dry-run-{n}`` returns to the flow.

    Attributes:
        number: ``n`` of ``dry-run-report-<n>``.
        ready: no error finding.
        files: ``{"md", "json"}`` → the report's paths.
        planDoc: the project-relative plan path, or None.
        message: the one-line summary.
    """

    model_config = ConfigDict(frozen=True)

    number: int
    ready: bool
    files: dict[str, str]
    planDoc: str | None = None
    message: str


def agent_preview(meta: TaskRecord, home: Path) -> tuple[AgentPreview, list[dict[str, Any]]]:
    """``(agent, findings)``: the invocation round 0 would use (:class:`AgentPreview`), its prompt
    shown as ``<prompt: N chars>`` (built in a scratch directory: the task's own prompt files are
    not touched), and the findings (:func:`~tianshu_mcp.acceptance.dry_run.finding` objects
    ``{severity, code, message, path?}``, the report's JSON as the acceptance side builds it)."""
    agent_id = meta.agentId or ""
    try:
        agent = resolve_agent(agent_id, home)
    except TianshuError as exc:
        return AgentPreview(id=agent_id, ok=False, message=exc.render()), [finding("error", "agent_unavailable", exc.render())]
    if not agent.ok or agent.profile is None:
        return (AgentPreview(id=agent_id, ok=False, message=agent.message),
                [finding("error", "agent_unavailable", _("agent '{agentId}' is not usable: {message}").format(
                    agentId=agent_id, message=agent.message))])
    with tempfile.TemporaryDirectory(prefix="tianshu-dry-run-") as scratch:
        ctx = AgentRunContext(task_id=meta.taskId, project_path=_project(meta), task_dir=Path(scratch),
                              round=0, task=meta.task or "", context=meta.context,
                              timeout_ms=meta.taskTimeoutMs or 0)
        try:
            inv = build_invocation(ctx, agent)
        except (OSError, ValueError) as exc:
            return (AgentPreview(id=agent.id, ok=False, message=str(exc)),
                    [finding("error", "agent_unavailable", _("the invocation cannot be built: {error}").format(error=exc))])
        argv = [a if a != inv.prompt else f"<prompt: {len(inv.prompt)} chars>" for a in inv.argv]
        argv = [a.replace(scratch, "<task dir>") for a in argv]
    return AgentPreview(id=agent.id, ok=True, message=agent.message, argv=argv, cwd=inv.cwd,
                        timeoutMs=inv.timeout_ms, promptMode=agent.profile.prompt_mode), []


def _project(meta: TaskRecord) -> str:
    """The task's ``projectPath`` (KeyError without one: not a task's record)."""
    if meta.projectPath is None:
        raise KeyError("projectPath")
    return meta.projectPath


@step("dry-run")
def dry_run_task(task_id: str) -> DryRunResult:
    """Write ``dry-run-report-<n>.md/json`` for ``task_id``.

    Returns:
        The :class:`DryRunResult` ``{number, ready, files: {md, json}, planDoc, message}``.
    """
    st = store()
    meta = load_task(task_id)
    tdir = st.dir(task_id)
    home = data_home()
    project = _project(meta)
    agent, findings = agent_preview(meta, home)
    acceptance, found = acceptance_preflight(project, home, meta.acceptanceOverride,
                                             load_config(home).verify_command_timeout_ms)
    findings += found
    git, found = git_preflight(project)
    findings += found + judge_preflight(acceptance, git)
    plan, found = check_plan(project)
    findings += found
    errors = [f for f in findings if f["severity"] == "error"]
    warnings = [f for f in findings if f["severity"] == "warning"]
    number = next_dry_run_number(tdir)
    report = {"kind": "dry-run", "taskId": task_id, "number": number, "createdAt": utc_now(),
              "verdict": "blocked" if errors else "ready", "projectPath": project, "agent": agent.model_dump(mode="json", exclude_unset=True),
              "autoFixRounds": meta.autoFixRounds if meta.autoFixRounds is not None else 0, "acceptance": acceptance, "git": git, "plan": plan,
              "findings": findings}
    files = write_report(tdir, report)
    logger = get_run_logger()
    for f in findings:
        logger.info("dry run: [%s] %s: %s", f["severity"], f["code"], f["message"])
    summary = (_("{n} error(s): {errors}").format(
                   n=len(errors), errors=_("; ").join(f"[{f['code']}] {f['message']}" for f in errors[:5])) if errors
               else _("ready: {n} check(s) would run").format(n=len(acceptance.get("checks") or []))
               + (_(", {n} warning(s): {codes}").format(n=len(warnings), codes=", ".join(f["code"] for f in warnings))
                  if warnings else ""))
    return DryRunResult(number=number, ready=not errors, files=files, planDoc=plan["path"] if plan else None,
                        message=summary)
