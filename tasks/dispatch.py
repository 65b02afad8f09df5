"""Prefect task ``dispatch-round-{r}``: hand the brief to the agent for one round (docs/agents-tasks.md
§1.9–§1.10)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..adapters.drivers import driver_for, end_all_sessions
from ..adapters.fatal import AGENT_TAIL_CHARS, agent_output_tail, agent_text, fatal_line, output_tail
from ..adapters.output.ansi import strip_ansi
from ..adapters.output.formats import OutputReader
from ..adapters.output.liveness import Liveness
from ..adapters.profiles import (
    AgentProfile,
    ResolvedAgent,
    resolve_agent,
    resolve_profile,
)
from ..adapters.prompts import PromptClassifier
from ..adapters.round import AgentRunContext, AgentRunResult, RoundHooks, log_file_path
from ..core.errors import TianshuError
from ..core.files import atomic_write_json, read_json_safe
from ..core.i18n import _
from ..core.procs import kill_recorded, save_record
from ..core.reaper import reap_orphans
from ..core.record import ErrorType
from ..core.settings import data_home
from .common import (
    AGENT_PROC_FILE,
    AGENT_PROFILE_FILE,
    cancel_requested,
    load_task,
    step,
    stop_probe,
    store,
    work_path,
)
from .events import ChangeWatch, EventData, PromptWatch, RoundEvents, TreeSnapshot, emit
from .output_watch import OutputWatch
from .results import RoundResult


@step("dispatch")
def dispatch_round(task_id: str, round: int, feedback: str | None, answer: str | None = None) -> RoundResult:  # noqa: A002
    """Run the task's agent for round ``round`` with the previous round's ``feedback`` (and the
    user's ``answer`` when the round re-runs after asking).

    The profile's ``driver`` runs the round (:mod:`tianshu_mcp.adapters.drivers`). The agent's
    :class:`~tianshu_mcp.core.procs.ProcRecord` is saved to ``agent-proc.json`` so that
    manage_task(cancel) or a cancellation hook in another process can kill its tree; a CLI
    agent's tree is also killed in this task's ``finally`` (a flow process terminated by the
    worker gets there too), an ACP or desktop agent's when the task ends
    (:func:`end_agent_session`), so that its session carries over to the rework round.

    Returns:
        The round's :class:`~tianshu_mcp.tasks.results.RoundResult`; a profile that cannot be
        resolved or a malformed ``agent-profiles.json`` yields ``hard_failure`` with
        ``error_type`` ``agent_unresolved`` / ``setup_failed``.
    """
    st = store()
    meta = load_task(task_id)
    tdir = st.dir(task_id)
    proc_file = tdir / AGENT_PROC_FILE
    try:
        agent = _task_agent(meta.agentId or "", tdir)
    except TianshuError as exc:
        return RoundResult.hard(ErrorType.SETUP_FAILED, exc.render())
    if not agent.ok:
        return RoundResult.hard(ErrorType.AGENT_UNRESOLVED, agent.message)
    ctx = AgentRunContext(
        task_id=task_id,
        project_path=work_path(meta),
        task_dir=tdir,
        round=round,
        task=meta.task or "",
        context=meta.context,
        feedback=feedback,
        timeout_ms=meta.taskTimeoutMs or 0,
        answer=answer,
        model=meta.model,
    )
    emit(task_id, "task_dispatched", "running",
         _("round {round}: brief handed to {agentId}").format(round=round, agentId=agent.id),
         EventData(round=round, agentId=agent.id))
    profile = agent.profile
    assert profile is not None  # an ok agent has its profile
    if ctx.model and profile.driver != "gui":  # said, not silently dropped
        emit(task_id, "note", "running",
             _("round {round}: the model hint '{model}' is not used: a {driver} agent runs the model its profile "
               "sets").format(round=round, model=ctx.model, driver=profile.driver),
             EventData(round=round, model=ctx.model))
    driver = driver_for(profile)
    events = RoundEvents(task_id)
    settings = profile.liveness
    before = TreeSnapshot(work_path(meta))  # one git status for both watches, taken as the first enters
    watch = OutputWatch(task_id, log_file_path(ctx), round, OutputReader(profile.output_format),
                        Liveness(settings.max_retries, settings.window_ms, settings.stall_after_ms),
                        work_path(meta), events, _run_logger(), snapshot=before)
    cancel_probe = stop_probe(tdir)
    hooks = RoundHooks(should_stop=lambda: cancel_probe() or watch.should_stop(),
                       on_start=lambda rec: save_record(proc_file, rec), on_event=events.send)
    try:
        prompts = PromptClassifier(profile.confirmation_patterns, profile.authorization_patterns)
        with ChangeWatch(task_id, work_path(meta), round, events=events, owned_paths=profile.owned_paths,
                         snapshot=before), \
                PromptWatch(task_id, log_file_path(ctx), round, prompts, events=events), watch:
            result = driver.run_round(ctx, agent, hooks)
    finally:
        if not driver.keeps_process:
            kill_recorded(proc_file)
            reap_orphans()  # what escaped the tree (setsid + a cleared environment) dies with the round
    return _outcome(result, tdir, profile, watch)


def _run_logger() -> Any:
    """The Prefect flow-run logger of this task run, or None outside one."""
    try:
        from prefect import get_run_logger

        return get_run_logger()
    except Exception:  # noqa: BLE001 - MissingContextError outside a run: the module logger is used
        return None


def _outcome(result: AgentRunResult, tdir: Path, profile: AgentProfile, watch: OutputWatch) -> RoundResult:
    """The round's result with what its output said: its tail (the agent's own output without our
    spawn header and exit trailer, its last :data:`AGENT_TAIL_CHARS` characters from a line start:
    :func:`~tianshu_mcp.adapters.fatal.agent_output_tail`), the recognised failure line (the line the
    CLI gave up on, a retry loop that ended the round, or a fatal pattern; ANSI codes removed),
    what its exit code means, usage, the final message and the tool-call count (docs/real-agents.md)."""
    cancel = cancel_requested(tdir)
    tail = strip_ansi(output_tail(str(result.log_file)))
    fatal = watch.gave_up.line if watch.gave_up is not None else fatal_line(agent_text(tail), profile.fatal_patterns)
    fields: dict[str, object] = {}
    if watch.stuck is not None and not cancel:
        # the round was ended by its own retry loop, not by a cancel: an agent failure
        fields = {"ok": False, "killed": False, "exit_code": None, "agent_stuck": True,
                  "error": _("the agent kept retrying a failed model call ({retries} retries)").format(
                      retries=watch.stuck.retries)}
        fatal = watch.stuck.line
    code = None if fields else result.exit_code
    return RoundResult.model_validate({
        "ok": result.ok, "exit_code": result.exit_code, "timeout": result.timeout, "killed": result.killed,
        "error": result.error, "duration_ms": result.duration_ms, "log_file": str(result.log_file),
        "hard_failure": result.hard_failure, "error_type": result.error_type, "question": result.question,
        "question_kind": result.question_kind, "gui_stop": result.gui_stop,
        "cancel_requested": cancel, "output_tail": agent_output_tail(result.log_file, AGENT_TAIL_CHARS),
        "fatal_line": fatal,
        "exit_meaning": profile.exit_codes.get(str(code)) if code is not None else None,
        "usage": watch.usage.to_json(), "final_message": watch.final_message, "tool_calls": watch.tool_calls,
        **fields})


def _task_agent(agent_id: str, tdir: Path) -> ResolvedAgent:
    """The task's agent: its snapshot when one exists, else resolved now (and snapshotted).

    Raises:
        TianshuError(CONFIG_INVALID | CONFIG_UNREADABLE): no snapshot and the profiles cannot be read.
    """
    snap = tdir / AGENT_PROFILE_FILE
    raw = read_json_safe(snap)
    if isinstance(raw, dict):
        try:
            return resolve_profile(agent_id, AgentProfile.model_validate(raw))
        except ValueError:  # a snapshot of an older build: resolve anew
            pass
    agent = resolve_agent(agent_id, data_home())
    if agent.ok and agent.profile is not None:
        atomic_write_json(snap, agent.profile.to_json())
    return agent


def end_agent_session(task_id: str) -> None:
    """At the end of a task's flow run: close the agent's session (ACP, desktop) and kill the
    recorded agent tree, then whatever is left below this process. Never raises."""
    end_all_sessions(task_id)
    try:
        kill_recorded(store().dir(task_id) / AGENT_PROC_FILE)
    finally:
        reap_orphans()
