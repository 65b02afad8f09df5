"""Prefect task ``dispatch-round-{r}``: hand the brief to the agent for one round (40-agents-tasks §1.9–§1.10)."""

from __future__ import annotations

from typing import Any

from prefect import task

from ..adapters.cli import AgentRunContext, log_file_path, question_file_path, read_question, run_cli_agent
from ..adapters.fatal import fatal_line, output_tail
from ..adapters.profiles import resolve_agent
from ..core.errors import TianshuError
from ..core.procs import kill_recorded, reap_orphans, save_record
from ..core.settings import data_home
from .common import AGENT_PROC_FILE, cancel_requested, stop_probe, store
from ..adapters.prompts import PromptClassifier
from .events import ChangeWatch, PromptWatch, emit


@task(name="dispatch", retries=0)
def dispatch_round(task_id: str, round: int, feedback: str | None) -> dict[str, Any]:  # noqa: A002
    """Run the task's agent for round ``round`` with the previous round's ``feedback``.

    The agent's :class:`~tianshu_mcp.core.procs.ProcRecord` is saved to ``agent-proc.json`` so that
    manage_task(cancel) or a cancellation hook in another process can kill its tree; the tree is
    also killed in this task's ``finally`` (a flow process terminated by the worker gets there
    too).

    Returns:
        ``{"ok", "exitCode", "timeout", "killed", "error", "durationMs", "logFile",
        "hardFailure", "errorType", "cancelRequested", "outputTail" (last 2000 chars of the log),
        "fatalLine" (:func:`tianshu_mcp.adapters.fatal.fatal_line`, or None), "question" (what the agent
        asked the user through ``TIANSHU_MCP_QUESTION_FILE``, or None)}``; a profile that cannot be resolved or a
        malformed ``agent-profiles.json`` yields ``hardFailure`` with ``errorType``
        ``agent_unresolved`` / ``setup_failed``.
    """
    st = store()
    meta = st.read(task_id) or {}
    tdir = st.dir(task_id)
    proc_file = tdir / AGENT_PROC_FILE
    try:
        agent = resolve_agent(meta["agentId"], data_home())
    except TianshuError as exc:
        return {"ok": False, "hardFailure": True, "errorType": "setup_failed", "error": exc.render(),
                "killed": False, "timeout": False, "exitCode": None}
    if not agent.ok:
        return {"ok": False, "hardFailure": True, "errorType": "agent_unresolved", "error": agent.message,
                "killed": False, "timeout": False, "exitCode": None}
    ctx = AgentRunContext(
        task_id=task_id,
        project_path=meta["projectPath"],
        task_dir=tdir,
        round=round,
        task=meta["task"],
        context=meta.get("context"),
        feedback=feedback,
        timeout_ms=int(meta.get("taskTimeoutMs") or 0),
    )
    emit(task_id, "task_dispatched", "running", f"round {round}: brief handed to {agent.id}",
         {"round": round, "agentId": agent.id})
    try:
        profile = agent.profile
        prompts = PromptClassifier(profile.confirmation_patterns if profile else (),
                                   profile.authorization_patterns if profile else ())
        with ChangeWatch(task_id, meta["projectPath"], round), PromptWatch(task_id, log_file_path(ctx), round, prompts):
            result = run_cli_agent(
                ctx,
                agent,
                should_stop=stop_probe(tdir),
                on_start=lambda rec: save_record(proc_file, rec),
            )
    finally:
        kill_recorded(proc_file)
        reap_orphans()  # what escaped the tree (setsid + a cleared environment) dies with the round
    out = {
        "ok": result.ok,
        "exitCode": result.exit_code,
        "timeout": result.timeout,
        "killed": result.killed,
        "error": result.error,
        "durationMs": result.duration_ms,
        "logFile": str(result.log_file),
        "hardFailure": bool(result.hard_failure),
        "errorType": result.error_type,
    }
    out["cancelRequested"] = cancel_requested(tdir)
    tail = output_tail(result.log_file)
    out["outputTail"] = tail[-2000:]
    out["fatalLine"] = fatal_line(tail, agent.profile.fatal_patterns if agent.profile is not None else ())
    out["question"] = read_question(question_file_path(ctx))
    return out

