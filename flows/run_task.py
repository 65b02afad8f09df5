"""Flow ``run-task``: one tianshu task = one flow run (docs/architecture.md §4, docs/agents-tasks.md §3).

Reads like the fix loop of docs/agents-tasks.md §3: baseline → rounds of (dispatch → verify → decide), with a
repair plan between a failed round and the next. Every round is its own named task run
(``dispatch-round-{r}``, ``verify-round-{r}``, ``repair-plan-{r}``), so the Prefect UI shows the
rounds. The final state carries the task status: ``Completed(Succeeded)``, ``Failed(Failed)``,
``Failed(NeedsAttention)``, ``Cancelled`` or ``Cancelled(Interrupted)``; details go to
``task.json`` through :func:`tasks.common.record`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact
from prefect.states import Failed, State

from ..acceptance.engine.context import next_round
from ..acceptance.git import Baseline, GitFailed
from ..core.childenv import adopt_client_env
from ..core.errors import TianshuError
from ..core.i18n import _
from ..core.model import NO_QUESTION, TaskStatus, exit_phrase
from ..core.procs import current_record, kill_recorded, save_record
from ..core.record import (
    AbortSource,
    ErrorType,
    Phase,
    RoundVerdict,
    TaskRecord,
    VerificationSource,
)
from ..core.remotes import RemoteSpec
from ..core.settings import data_home
from ..core.taskstore import TaskStore, utc_now
from ..tasks.baseline import capture_baseline_task
from ..tasks.common import (
    AGENT_PROC_FILE,
    CANCEL_FILE,
    FLOW_PROC_FILE,
    CancelMarker,
    read_cancel,
    record,
    store,
)
from ..tasks.dispatch import dispatch_round, end_agent_session
from ..tasks.dry_run import dry_run_task
from ..tasks.events import EventData, emit
from ..tasks.repair import write_repair_plan
from ..tasks.results import RoundResult, Verdict
from ..tasks.verify import (
    artifact_key,
    freeze_visual,
    join_artifacts,
    preflight_acceptance,
    publish_aside,
    run_verify_round,
    start_baseline_run,
    stop_baseline_run,
)
from . import heartbeats, suspension
from .persistence import NO_RESULTS
from .endings import EndingFacts, ending_message, finish
from .isolation import close_workspace, open_workspace
from .needs_user import ask_user, take_answer
from .policy import (
    Action,
    AgentEnd,
    Budget,
    Next,
    Policy,
    Reason,
    RoundOutcome,
    VerdictKind,
    decide,
)
from .remote import (
    enter_remote,
    leave_remote,
    publish_record,
    remote_error_type,
    repo_slot,
)
from .states import blocked_error_type, quiet_orderly_ends, status_from_state
from .visual_resume import reverify
from .watch import guard_run

quiet_orderly_ends()
suspension.install()  # the flow starts while Prefect's suspension observer subscribes
heartbeats.install()  # the process ends with its flow run, not up to 1 s later

ARTIFACTS_JOIN_S = 10.0
"""How long the flow waits, before it returns, for its artifacts still being published, s."""


def _kill_agent_hook(flow: Any, flow_run: Any, state: Any) -> None:
    """on_cancellation / on_crashed: kill the recorded agent tree (it runs in its own session,
    so Prefect's own process-group kill does not reach it; docs/prefect-facts.md P3)."""
    task_id = (flow_run.parameters or {}).get("task_id")
    if task_id:
        kill_recorded(TaskStore(data_home()).dir(task_id) / AGENT_PROC_FILE)


def _publish_brief(task_id: str, project_path: str, agent_id: str) -> None:
    """The brief as a markdown artifact of the flow run (what the agent was asked, in the UI)."""
    try:
        meta = store().load(task_id)
        if meta is None:
            return
        context = f"\n\n## Additional context\n\n{meta.context}" if meta.context else ""
        create_markdown_artifact(key=artifact_key(task_id, "brief"),
                                 markdown=f"# Brief\n\n- project: `{project_path}`\n- agent: `{agent_id}`\n\n"
                                          f"{meta.task or ''}{context}",
                                 description=f"The brief of {task_id}")
    except Exception:  # noqa: BLE001 - task.json holds the brief; the artifact is a view
        pass


def _retried_outside(task_id: str) -> TaskRecord:
    """Make a retry from outside a manual rework without feedback; returns the record after it.

    manage_task's rework clears the task's ending before it re-queues the flow run; a flow run
    that starts while ``task.json`` still holds an ending (``finishedAt``) was re-queued by
    someone else: the Prefect UI's Retry button, or a state set through Prefect's API. It is
    taken as a manual rework with no feedback (docs/lifecycle.md, "Retry in the Prefect UI"):
    the ending and a stale cancel request are cleared, the event says where the rework came
    from, and the next round is numbered after the task's last. The flow run's ``feedback``
    parameter is left out: it is the previous manual rework's, which its round consumed.
    """
    (store().dir(task_id) / CANCEL_FILE).unlink(missing_ok=True)
    msg = _("rework from a retry of the flow run outside tianshu-mcp (the Prefect UI's Retry); no feedback")
    record(task_id, finishedAt=None, errorType=None, abortSource=None, cancelReason=None, cancelRequestedAt=None,
           phase=None, finalStatus=None, lastMessage=msg, **NO_QUESTION)
    store().event(task_id, "rework_triggered", "queued", msg, {"mode": "retry"})
    get_run_logger().info("task %s: the flow run was retried from outside (the Prefect UI's Retry): a manual rework "
                          "without feedback", task_id)
    meta = store().load(task_id)
    assert meta is not None  # loaded a moment ago, and a task directory is never removed under its run
    return meta


def _cancel_marker(task_id: str) -> CancelMarker | None:
    return read_cancel(store().dir(task_id))


def _end_killed(task_id: str) -> State:
    """End a task stopped by a cancel (``cancelled``) or by the service's shutdown (``interrupted``)."""
    marker = _cancel_marker(task_id) or CancelMarker()
    if marker.source == "shutdown":
        return finish(task_id, TaskStatus.INTERRUPTED, _("server exited; the agent process was terminated"),
                      ErrorType.INTERRUPTED, abortSource=AbortSource.SHUTDOWN)
    reason = marker.reason
    msg = _("cancelled") + (_(": {reason}").format(reason=reason) if reason else "")
    return finish(task_id, TaskStatus.CANCELLED, msg, ErrorType.CANCELLED, abortSource=AbortSource.USER)


def _dry_run(task_id: str) -> State:
    """A dry run (docs/tools.md §3.7): the static report only — no agent, no round, no project change;
    ``succeeded`` when nothing blocks, else ``needs_attention``/``verify_failed``."""
    out = dry_run_task.with_options(task_run_name="dry-run")(task_id)
    n = out.number
    fields = {"dryRun": True, "dryRunReportMd": out.files["md"], "dryRunReportJson": out.files["json"],
              "dryRunPlanDoc": out.planDoc}
    if out.ready:
        msg = _("dry run {n} (dry-run-report-{n}): {message}. No agent ran and the project was not changed; submit "
                "the task without dryRun to dispatch it. Report {path}").format(n=n, message=out.message,
                                                                                path=out.files["md"])
        return finish(task_id, TaskStatus.SUCCEEDED, msg, **fields)
    msg = _("dry run {n} (dry-run-report-{n}) found what would block the task: {message}. Report {path}").format(
        n=n, message=out.message, path=out.files["md"])
    return finish(task_id, TaskStatus.NEEDS_ATTENTION, msg, ErrorType.VERIFY_FAILED, **fields)


@flow(
    name="run-task",
    description="Dispatch a brief to an agent, verify against the git baseline, rework on failure.",
    on_cancellation=[_kill_agent_hook],
    on_crashed=[_kill_agent_hook],
    log_prints=False,
    validate_parameters=True,
    **NO_RESULTS,
)
def run_task_flow(
    task_id: str,
    project_path: str,
    agent_id: str,
    auto_verify: bool = True,
    auto_fix_rounds: int = 0,
    task_timeout_ms: int = 1800000,
    feedback: str | None = None,
    remote: RemoteSpec | None = None,
) -> State:
    """Run task ``task_id`` to a final state.

    Args:
        task_id: ``tsk_…``; its directory already holds ``task.json`` (written by run_task).
        project_path: normalised absolute project path (also a UI-visible parameter).
        agent_id: the agent profile id.
        auto_verify: verify after each agent round (default True).
        auto_fix_rounds: rework rounds allowed after a failed verification (0..10).
        task_timeout_ms: the agent's wall-clock limit per round, ms.
        feedback: manual rework feedback for the first round of this run.
        remote: a remote task's :class:`~tianshu_mcp.core.remotes.RemoteSpec` ``{"repoUrl", "ref",
            "pool", "parallel", "record"}`` (:mod:`.remote`; Prefect validates the JSON into it): the
            worker seeds the task from ``record``, works in a worktree of its own clone and
            pushes ``tianshu/<taskId>``; ``project_path`` is then the remote's URL.

    Returns:
        The final state (see module doc). The meta's ``round`` is the latest round's number,
        ``roundsUsed`` the agent rounds used (docs/tools.md §2.6).
    """
    args = (task_id, project_path, agent_id, auto_verify, auto_fix_rounds, task_timeout_ms, feedback, remote)
    if remote is None:
        return _run_task(*args)
    with repo_slot(task_id, remote):  # strict per-repository limit across workers
        return _run_task(*args)


def _run_task(task_id: str, project_path: str, agent_id: str, auto_verify: bool, auto_fix_rounds: int,
              task_timeout_ms: int, feedback: str | None, remote: RemoteSpec | None) -> State:
    """The body of :func:`run_task_flow` (same arguments and result): the rounds, then the
    workspace's close and, for a remote task, the push and the published record."""
    state: State | None = None
    try:
        if remote is not None:
            try:
                project_path = enter_remote(task_id, remote)
            except TianshuError as exc:
                msg = _("the remote repository could not be prepared, the agent was not started: {error}").format(
                    error=exc.render())
                state = finish(task_id, TaskStatus.FAILED, msg, remote_error_type(exc))
        if state is None:
            # the brief's artifact beside the flow: its API call is not on the way to the agent (note 66)
            publish_aside(_publish_brief, task_id=task_id, project_path=project_path, agent_id=agent_id)
            state = _run_rounds(task_id, project_path, agent_id, auto_verify, auto_fix_rounds, task_timeout_ms, feedback)
    finally:
        join_artifacts(ARTIFACTS_JOIN_S)  # the brief and the rounds' reports, published aside
        end_agent_session(task_id)  # an ACP or desktop agent's session lives across rounds, not past the task
        # done by now unless the task ended (or suspended) before its first verify; not waited for:
        # a flow run that lingers past its end races a rework that reruns it (the child stops and
        # removes its worktree by itself, also when this process is gone)
        stop_baseline_run(task_id, timeout_s=0)
        if state is not None:  # a final state (a needs_user suspension leaves by an exception)
            try:
                close_workspace(task_id, status_from_state(state.type.value, state.name, None))
            except Exception as exc:  # noqa: BLE001 - the task's end stands; the sweep removes what is left
                get_run_logger().warning("the task's worktree could not be closed: %s", exc)
        if remote is not None:
            state = leave_remote(task_id, state)  # push the result branch, publish the record
    return state


def _run_rounds(task_id: str, project_path: str, agent_id: str, auto_verify: bool, auto_fix_rounds: int,
                task_timeout_ms: int, feedback: str | None) -> State:
    """The body of :func:`run_task_flow` (same arguments and result): prepare, find the first
    round, then run rounds until :func:`.policy.decide` ends the task."""
    st = store()
    meta = st.load(task_id)
    if meta is None:
        return Failed(message=f"task {task_id} has no readable task.json under {st.root}")
    # a final local task run again without manage_task: the Prefect UI's Retry (a remote task's
    # worker keeps its own record across a rework, ending included: not a sign there)
    if meta.finishedAt and not meta.remoteCommit:
        feedback = None
        meta = _retried_outside(task_id)
    prepared = _prepare(task_id, project_path, agent_id, auto_verify, meta)
    if isinstance(prepared, State):
        return prepared
    first = _first_round(task_id, meta, prepared, auto_verify, auto_fix_rounds, feedback)
    if isinstance(first, State):
        return first
    limits = _Limits(agent_id, auto_fix_rounds, task_timeout_ms, Policy(auto_verify, bool(meta.remoteCommit)))
    return _rounds(task_id, prepared, first, limits)


@dataclass(frozen=True)
class _Limits:
    """The task's fixed settings for its rounds."""

    agent_id: str
    auto_fix_rounds: int
    task_timeout_ms: int
    policy: Policy


@dataclass(frozen=True)
class _Start:
    """Where the rounds start: the round's number, its feedback, the user's answer (resumed) and
    ``used``, the agent rounds used before it (``roundsUsed``).

    A round's number is the task's one round numbering (docs/tools.md §2.6): its agent log,
    task runs and report all carry it. It equals ``used`` unless a manual verification took a
    report number in between, which a later agent round skips."""

    round: int
    feedback: str | None
    answer: str | None = None
    used: int = 0


def _prepare(task_id: str, project_path: str, agent_id: str, auto_verify: bool, meta: TaskRecord) -> State | Baseline:
    """Before the first agent round: the workspace, the acceptance preflight, the git baseline,
    the visual snapshot and the baseline's own check run. Returns the baseline, or the final
    state of a task that cannot start (needs_attention, the agent never ran)."""
    tdir = store().dir(task_id)
    adopt_client_env(tdir)  # the agent and the checks run with the host's environment
    save_record(tdir / FLOW_PROC_FILE, current_record())
    try:
        work = open_workspace(task_id, project_path, meta)  # project_path itself unless isolation is worktree
    except TianshuError as exc:
        msg = _("the task's worktree could not be made, the agent was not started: {error}").format(error=exc.render())
        return finish(task_id, TaskStatus.NEEDS_ATTENTION, msg,
                      ErrorType.GIT_FAILED if exc.code.value == "GIT_FAILED" else ErrorType.SETUP_FAILED)
    guard_run(task_id, work)
    record(task_id, startedAt=meta.startedAt or utc_now(), phase=Phase.RUNNING,  # no queued message stays
           lastMessage=_("started: preparing the workspace and the git baseline before the agent starts"))
    if meta.dryRun:
        return _dry_run(task_id)
    if auto_verify:
        problem = preflight_acceptance(work, meta.acceptanceOverride, tdir, holdout_project=meta.projectPath)
        if problem:
            msg = _("acceptance configuration is broken, the agent was not started: {problem}").format(problem=problem)
            return finish(task_id, TaskStatus.NEEDS_ATTENTION, msg, ErrorType.VERIFY_FAILED)
    try:
        baseline = capture_baseline_task(task_id, project_path, work)
    except GitFailed as exc:
        msg = _("the git baseline could not be captured, the agent was not started: {error}").format(error=exc.render())
        return finish(task_id, TaskStatus.NEEDS_ATTENTION, msg, ErrorType.GIT_FAILED)
    if auto_verify and (problem := freeze_visual(tdir, work)):
        msg = _("the visual snapshot cannot be read, the agent was not started: {problem}").format(problem=problem)
        return finish(task_id, TaskStatus.NEEDS_ATTENTION, msg, ErrorType.VERIFY_FAILED, pendingVisualVerification=True)
    if auto_verify:
        start_baseline_run(task_id, baseline)  # the test checks on the baseline, while the agent works
    return baseline


def _first_round(task_id: str, meta: TaskRecord, baseline: Baseline, auto_verify: bool,
                 auto_fix_rounds: int, feedback: str | None) -> State | _Start:
    """The first round of this flow run: a resumed question's round with the answer, a visual
    re-verification (which may end the task), a manual rework's next round with its feedback
    and the last report's repair plan, or round ``roundsUsed`` with the caller's feedback."""
    used = meta.roundsUsed or 0  # a manual rework continues the round count
    answered = take_answer(task_id)  # resumed from needs_user: re-run the asking round with the answer
    if answered is not None:
        return _Start(*answered, used=used)
    if auto_verify and (resumed := reverify(task_id, used, baseline, auto_fix_rounds, finish, feedback)) is not None:
        return resumed if isinstance(resumed, State) else _Start(used, "\n\n".join(p for p in (feedback, resumed) if p),
                                                                 used=used)
    # the next number of the task's rounds: past any report a manual verification wrote meanwhile
    rnd = next_round(store().dir(task_id), used)
    if used > 0 and meta.latestVerificationVerdict == RoundVerdict.FAILED and meta.reportJson:
        # a manual rework of a task whose last round failed verification: the agent hears the
        # caller's hint and feedback first, then what failed, as an automatic round would
        try:
            plan = write_repair_plan.with_options(task_run_name=f"repair-plan-{meta.reportRound}")(
                task_id, meta.reportRound or 0, meta.reportJson, meta.reportMd or "")
            return _Start(rnd, "\n\n".join(p for p in (feedback, plan.feedback) if p), used=used)
        except Exception as exc:  # noqa: BLE001 - the caller's feedback still goes to the agent
            get_run_logger().warning("the last report could not be turned into a repair plan: %s", exc)
    return _Start(rnd, feedback, used=used)


def _rounds(task_id: str, baseline: Baseline, start: _Start, limits: _Limits) -> State:
    """Run rounds from ``start`` until the policy ends the task; returns its final state."""
    rnd, feedback, answer = start.round, start.feedback, start.answer
    used = start.used  # agent rounds used before this one (the budget counts them, not numbers)
    while True:
        if _cancel_marker(task_id):
            return _end_killed(task_id)
        result = _dispatch(task_id, rnd, limits.agent_id, feedback, answer)
        answer = None
        budget = Budget(used, limits.auto_fix_rounds)
        outcome = _outcome_of(result)
        step = decide(outcome, budget, limits.policy)
        verdict: Verdict | None = None
        if step.action is Action.VERIFY:
            verdict = _verify(task_id, rnd, used + 1, baseline, result, limits.policy.remote)
            step = decide(_verified(outcome, verdict, task_id), budget, limits.policy)
        if step.action is Action.REWORK:
            assert verdict is not None  # only a verified round is reworked
            plan = _rework(task_id, rnd, verdict)
            if isinstance(plan, State):
                return plan
            feedback, rnd, used = plan, rnd + 1, used + 1
            continue
        if step.action is Action.ASK_USER:
            end_agent_session(task_id)  # the flow-run process exits while it waits
            ask_user(task_id, rnd, str(result.question), feedback, result.question_kind)  # suspends the flow run
        return _end(task_id, step, EndingFacts(rnd, limits.task_timeout_ms, limits.auto_fix_rounds, result, verdict),
                    used + 1)


def _dispatch(task_id: str, rnd: int, agent_id: str, feedback: str | None, answer: str | None) -> RoundResult:
    """One agent round as task run ``dispatch-round-<rnd>``; its outcome recorded and logged."""
    st = store()
    running = _("round {round}: agent running").format(round=rnd)
    record(task_id, phase=Phase.RUNNING, lastMessage=running, currentRound=rnd)
    st.event(task_id, "started", "running", running)
    result = dispatch_round.with_options(task_run_name=f"dispatch-round-{rnd}")(task_id, rnd, feedback, answer)
    record(task_id, logFile=result.log_file, agentExitCode=result.exit_code, agentDurationMs=result.duration_ms)
    st.event(task_id, "agent_exited", "running", f"exit={result.exit_code}")
    get_run_logger().info("round %s: agent %s ended (%s) after %s ms", rnd, agent_id, exit_phrase(result.exit_code),
                          result.duration_ms)
    if (result.killed or result.cancel_requested) and result.gui_stop is not None:
        record(task_id, guiStop=result.gui_stop)  # a desktop app's stop: clicked, went idle
    return result


def _outcome_of(result: RoundResult) -> RoundOutcome:
    """The policy's view of an agent round."""
    if result.killed or result.cancel_requested:
        end = AgentEnd.KILLED
    elif result.question:
        end = AgentEnd.QUESTION
    elif result.hard_failure:
        end = AgentEnd.HARD_FAILURE
    elif result.timeout:
        end = AgentEnd.IDLE_TIMEOUT if result.error_type == ErrorType.IDLE_TIMEOUT else AgentEnd.TIMEOUT
    else:
        end = AgentEnd.EXITED
    return RoundOutcome(end, ok=result.ok, exit_code=result.exit_code, fatal_line=bool(result.fatal_line),
                        error_type=result.error_type)


def _verify(task_id: str, rnd: int, used: int, baseline: Baseline, result: RoundResult, remote: bool) -> Verdict:
    """Verify round ``rnd`` as task run ``verify-round-<rnd>``; its verdict recorded (with
    ``roundsUsed`` = ``used``, the agent rounds used so far) and logged."""
    st = store()
    record(task_id, phase=Phase.VERIFY_START, lastMessage=_("round {round}: verifying").format(round=rnd))
    st.event(task_id, "verify_start", "verify_start", _("round {round}: verification started").format(round=rnd))
    verdict = run_verify_round(f"verify-round-{rnd}", task_id, rnd, baseline, agent_run=result.agent_run())
    # testIntegrity / unsupportedClaims of this round (or cleared) come with the verdict's fields
    record(task_id, roundsUsed=used, **verdict.record_fields(VerificationSource.AUTO).model_dump(mode="json"))
    st.event(task_id, "verify_round", "verify_start",
             (_("round {round}: passed") if verdict.passed else _("round {round}: failed")).format(round=rnd))
    if remote:
        publish_record(task_id)  # a remote task's caller sees the round's report while the task goes on
    get_run_logger().log(logging.INFO if verdict.passed else logging.WARNING,
                         "round %s verification %s (report-%s): %s", rnd, "passed" if verdict.passed else "failed",
                         verdict.round, verdict.message)
    return verdict


def _verified(outcome: RoundOutcome, verdict: Verdict, task_id: str) -> RoundOutcome:
    """``outcome`` with the verification's verdict (and a cancel that arrived meanwhile)."""
    kind = (VerdictKind.BLOCKED if verdict.blocking_issues else VerdictKind.PASSED if verdict.passed
            else VerdictKind.FAILED)
    return replace(outcome, verdict=kind, changed_files=bool(verdict.changed_files),
                   git_refused=blocked_error_type(verdict.blocking_issues) == ErrorType.GIT_FAILED,
                   cancel_requested=bool(_cancel_marker(task_id)))


def _rework(task_id: str, rnd: int, verdict: Verdict) -> State | str:
    """Start automatic rework round ``rnd + 1``: the event, then the repair plan as task run
    ``repair-plan-<rnd>``. Returns the plan's feedback, or the final state when it cannot be
    written (failed / internal)."""
    record(task_id, phase=Phase.FIXING, lastMessage=_("round {round} failed verification; rework round {next}").format(
        round=rnd, next=rnd + 1))
    get_run_logger().info("round %s failed verification (%s); automatic rework round %s", rnd,
                          ", ".join(verdict.failed_checks) or "see the report", rnd + 1)
    emit(task_id, "rework_triggered", "fixing",
         _("round {round} failed verification, automatic rework round {next}").format(round=rnd, next=rnd + 1),
         EventData(round=rnd + 1, mode="auto", failedChecks=verdict.failed_checks))
    try:
        plan = write_repair_plan.with_options(task_run_name=f"repair-plan-{rnd}")(
            task_id, verdict.round, verdict.json_path, verdict.md_path)
    except Exception as exc:  # noqa: BLE001 - an unreadable report ends the task, coded
        return finish(task_id, TaskStatus.FAILED, _("internal error writing the repair plan: {error}").format(error=exc),
                      ErrorType.INTERNAL)
    return plan.feedback


def _end(task_id: str, step: Next, facts: EndingFacts, used: int) -> State:
    """Carry out an ending step of the policy (``used``: ``roundsUsed`` when the step spends
    its round)."""
    if step.action is Action.END_CANCELLED:
        return _end_killed(task_id)
    assert step.status is not None and step.reason is not None
    msg = ending_message(step.reason, facts)
    timed_out = step.reason in (Reason.TIMEOUT, Reason.IDLE_TIMEOUT)
    visual = step.reason is Reason.BLOCKED and facts.verdict is not None and facts.verdict.visual_blocked
    # task.json fields beside the ending's own: each written only when it applies (None would delete it)
    state = finish(task_id, step.status, msg, step.error_type,
                   **({"roundsUsed": used} if step.spends_round else {}),
                   **({"abortSource": AbortSource.TIMEOUT} if timed_out else {}),
                   **({"pendingVisualVerification": True} if visual else {}))
    if step.reason is Reason.TIMEOUT or step.reason is Reason.IDLE_TIMEOUT:
        store().event(task_id, "timeout_killed", "failed", msg)
    return state
