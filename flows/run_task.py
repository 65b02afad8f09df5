"""Flow ``run-task``: one tianshu task = one flow run (00-design §4, 40-agents-tasks §3).

Reads like the seed's loop: baseline → rounds of (dispatch → verify → decide), with a repair plan
between a failed round and the next. Every round is its own named task run
(``dispatch-round-{r}``, ``verify-round-{r}``, ``repair-plan-{r}``), so the Prefect UI shows the
rounds. The final state carries the task status: ``Completed(Succeeded)``, ``Failed(Failed)``,
``Failed(NeedsAttention)``, ``Cancelled`` or ``Cancelled(Interrupted)``; details go to
``task.json`` through :func:`tasks.common.record`.
"""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact
from prefect.states import Cancelled, Completed, Failed, State

from ..acceptance.git import GitFailed
from ..core.errors import TianshuError
from ..core.childenv import adopt_client_env
from ..core.files import read_json_safe
from ..core.i18n import _
from ..core.model import exit_phrase
from ..core.procs import current_record, kill_recorded, save_record
from ..core.settings import data_home
from ..core.taskstore import TaskStore, utc_now
from ..tasks.baseline import capture_baseline_task
from ..tasks.common import AGENT_PROC_FILE, CANCEL_FILE, FLOW_PROC_FILE, record, store
from ..tasks.dispatch import dispatch_round, end_agent_session
from ..tasks.dry_run import dry_run_task
from ..tasks.events import emit
from ..tasks.repair import write_repair_plan
from ..tasks.verify import (
    artifact_key,
    freeze_visual,
    preflight_acceptance,
    run_verify_round,
    start_baseline_run,
    stop_baseline_run,
)
from .isolation import close_workspace, open_workspace
from .needs_user import ask_user, take_answer
from .remote import enter_remote, leave_remote, publish_record, remote_error_type, repo_slot
from .states import INTERRUPTED, NEEDS_ATTENTION, SUCCEEDED, blocked_error_type, quiet_orderly_ends, status_from_state
from .visual_resume import reverify
from .watch import guard_run

quiet_orderly_ends()


def _kill_agent_hook(flow: Any, flow_run: Any, state: Any) -> None:
    """on_cancellation / on_crashed: kill the recorded agent tree (it runs in its own session,
    so Prefect's own process-group kill does not reach it; 50-prefect-lab P3)."""
    task_id = (flow_run.parameters or {}).get("task_id")
    if task_id:
        kill_recorded(TaskStore(data_home()).dir(task_id) / AGENT_PROC_FILE)


def _agent_run(result: dict[str, Any]) -> dict[str, Any]:
    """What the report says about the agent: exit code, duration, output tail, fatal line."""
    return {k: result.get(k) for k in ("exitCode", "durationMs", "outputTail", "fatalLine", "exitMeaning", "usage",
                                       "finalMessage", "toolCalls")}


def _agent_note(agent_run: dict[str, Any]) -> str:
    """``agent exit code 0 after 812 ms``: the agent's own outcome, stated in every round's message."""
    return _("agent {exit} after {ms} ms").format(exit=_exit(agent_run), ms=agent_run.get("durationMs"))


def _exit(agent_run: dict[str, Any]) -> str:
    """``exit code 41 (invalid auth method …)``: the exit phrase with what the profile says the code means."""
    phrase = exit_phrase(agent_run.get("exitCode"))
    return f"{phrase} ({agent_run['exitMeaning']})" if agent_run.get("exitMeaning") else phrase


def _agent_failed_message(agent_run: dict[str, Any], log_file: str | None, verdict: dict[str, Any] | None = None) -> str:
    """The task's message for a failed agent: exit code, the line that says why, where to look."""
    tail = [ln.strip() for ln in str(agent_run.get("outputTail") or "").splitlines()
            if ln.strip() and not ln.startswith(("[exit] ", "===== spawn:"))]  # our own log framing
    line = agent_run.get("fatalLine") or (tail[-1][:300] if tail else "")
    report = _("; report-{round} ({path})").format(round=verdict["round"], path=verdict["mdPath"]) if verdict else ""
    said = _("it said: {line}").format(line=line) if line else _("no output")
    return _("agent failed: {exit} after {ms} ms, {said} (log {log}{report}); no rework round was spent — fix the "
             "agent's setup and rework the task").format(exit=_exit(agent_run),
                                                         ms=agent_run.get("durationMs"), said=said, log=log_file,
                                                         report=report)


def _publish_brief(task_id: str, project_path: str, agent_id: str, meta: dict[str, Any]) -> None:
    """The brief as a markdown artifact of the flow run (what the agent was asked, in the UI)."""
    try:
        context = f"\n\n## Additional context\n\n{meta['context']}" if meta.get("context") else ""
        create_markdown_artifact(key=artifact_key(task_id, "brief"),
                                 markdown=f"# Brief\n\n- project: `{project_path}`\n- agent: `{agent_id}`\n\n"
                                          f"{meta.get('task', '')}{context}",
                                 description=f"The brief of {task_id}")
    except Exception:  # noqa: BLE001 - task.json holds the brief; the artifact is a view
        pass


def _finish(task_id: str, status: str, message: str, error_type: str | None = None, **extra: Any) -> None:
    st = store()
    now = utc_now()
    record(task_id, lastMessage=message, errorType=error_type, finishedAt=now, phase=None, **extra)
    st.event(task_id, status, status, message[:500])


def _cancel_marker(task_id: str) -> dict[str, Any] | None:
    data = read_json_safe(store().dir(task_id) / CANCEL_FILE)
    return data if isinstance(data, dict) else None


def _end_killed(task_id: str) -> State:
    marker = _cancel_marker(task_id) or {}
    if marker.get("source") == "shutdown":
        msg = _("server exited; the agent process was terminated")
        _finish(task_id, "interrupted", msg, "interrupted", abortSource="shutdown")
        return Cancelled(name=INTERRUPTED, message=msg)
    reason = marker.get("reason")
    msg = _("cancelled") + (_(": {reason}").format(reason=reason) if reason else "")
    _finish(task_id, "cancelled", msg, "cancelled", abortSource="user")
    return Cancelled(message=msg)


def _dry_run(task_id: str) -> State:
    """A dry run (10-tools §3.7): the static report only — no agent, no round, no project change;
    ``succeeded`` when nothing blocks, else ``needs_attention``/``verify_failed``."""
    out = dry_run_task.with_options(task_run_name="dry-run")(task_id)
    n = out["number"]
    fields = {"dryRun": True, "dryRunReportMd": out["files"]["md"], "dryRunReportJson": out["files"]["json"],
              "dryRunPlanDoc": out["planDoc"]}
    if out["ready"]:
        msg = _("dry run {n} (dry-run-report-{n}): {message}. No agent ran and the project was not changed; submit "
                "the task without dryRun to dispatch it. Report {path}").format(n=n, message=out["message"],
                                                                                path=out["files"]["md"])
        _finish(task_id, "succeeded", msg, **fields)
        return Completed(name=SUCCEEDED, message=msg)
    msg = _("dry run {n} (dry-run-report-{n}) found what would block the task: {message}. Report {path}").format(
        n=n, message=out["message"], path=out["files"]["md"])
    _finish(task_id, "needs_attention", msg, "verify_failed", **fields)
    return Failed(name=NEEDS_ATTENTION, message=msg)


@flow(
    name="run-task",
    description="Dispatch a brief to an agent, verify against the git baseline, rework on failure.",
    on_cancellation=[_kill_agent_hook],
    on_crashed=[_kill_agent_hook],
    log_prints=False,
    validate_parameters=True,
)
def run_task_flow(
    task_id: str,
    project_path: str,
    agent_id: str,
    auto_verify: bool = True,
    auto_fix_rounds: int = 0,
    task_timeout_ms: int = 1800000,
    feedback: str | None = None,
    remote: dict[str, Any] | None = None,
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
        remote: a remote task's ``{"repoUrl", "ref", "pool", "parallel", "record"}`` (:mod:`.remote`): the
            worker seeds the task from ``record``, works in a worktree of its own clone and
            pushes ``tianshu/<taskId>``; ``project_path`` is then the remote's URL.

    Returns:
        The final state (see module doc). ``round`` in the meta = ``roundsUsed``.
    """
    args = (task_id, project_path, agent_id, auto_verify, auto_fix_rounds, task_timeout_ms, feedback, remote)
    if remote is None:
        return _run_task(*args)
    with repo_slot(task_id, remote):  # strict per-repository limit across workers
        return _run_task(*args)


def _run_task(task_id: str, project_path: str, agent_id: str, auto_verify: bool, auto_fix_rounds: int,
              task_timeout_ms: int, feedback: str | None, remote: dict[str, Any] | None) -> State:
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
                _finish(task_id, "failed", msg, remote_error_type(exc))
                state = Failed(message=msg)
        if state is None:
            state = _run_rounds(task_id, project_path, agent_id, auto_verify, auto_fix_rounds, task_timeout_ms, feedback)
    finally:
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
    """The body of :func:`run_task_flow` (same arguments and result)."""
    st = store()
    meta = st.read(task_id)
    if meta is None:
        return Failed(message=f"task {task_id} has no task.json under {st.root}")
    tdir = st.dir(task_id)
    adopt_client_env(tdir)  # the agent and the checks run with the host's environment
    save_record(tdir / FLOW_PROC_FILE, current_record())
    try:
        work = open_workspace(task_id, project_path, meta)  # project_path itself unless isolation is worktree
    except TianshuError as exc:
        msg = _("the task's worktree could not be made, the agent was not started: {error}").format(error=exc.render())
        _finish(task_id, "needs_attention", msg, "git_failed" if exc.code.value == "GIT_FAILED" else "setup_failed")
        return Failed(name=NEEDS_ATTENTION, message=msg)
    guard_run(task_id, work)
    record(task_id, startedAt=meta.get("startedAt") or utc_now(), phase="running")
    logger = get_run_logger()
    _publish_brief(task_id, project_path, agent_id, meta)
    if meta.get("dryRun"):
        return _dry_run(task_id)
    if auto_verify:
        problem = preflight_acceptance(work, meta.get("acceptanceOverride"), tdir, holdout_project=meta.get("projectPath"))
        if problem:
            msg = _("acceptance configuration is broken, the agent was not started: {problem}").format(problem=problem)
            _finish(task_id, "needs_attention", msg, "verify_failed")
            return Failed(name=NEEDS_ATTENTION, message=msg)
    try:
        baseline = capture_baseline_task(task_id, project_path, work)
    except GitFailed as exc:
        msg = _("the git baseline could not be captured, the agent was not started: {error}").format(error=exc.render())
        _finish(task_id, "needs_attention", msg, "git_failed")
        return Failed(name=NEEDS_ATTENTION, message=msg)
    if auto_verify and (problem := freeze_visual(tdir, work)):
        msg = _("the visual snapshot cannot be read, the agent was not started: {problem}").format(problem=problem)
        _finish(task_id, "needs_attention", msg, "verify_failed", pendingVisualVerification=True)
        return Failed(name=NEEDS_ATTENTION, message=msg)
    if auto_verify:
        start_baseline_run(task_id, baseline)  # the test checks on the baseline, while the agent works
    rnd = int(meta.get("roundsUsed") or 0)  # a manual rework continues the round count
    next_feedback = feedback
    answer: str | None = None
    answered = take_answer(task_id)  # resumed from needs_user: re-run the asking round with the answer
    if answered is not None:
        rnd, next_feedback, answer = answered
    elif auto_verify and (resumed := reverify(task_id, rnd, baseline, auto_fix_rounds, _finish, feedback)) is not None:
        if isinstance(resumed, State):
            return resumed
        next_feedback = "\n\n".join(p for p in (feedback, resumed) if p)
    elif rnd > 0 and meta.get("latestVerificationVerdict") == "failed" and meta.get("reportJson"):
        # a manual rework of a task whose last round failed verification: the agent hears the
        # caller's hint and feedback first, then what failed, as an automatic round would
        try:
            plan = write_repair_plan.with_options(task_run_name=f"repair-plan-{meta.get('reportRound')}")(
                task_id, int(meta.get("reportRound") or 0), meta["reportJson"], meta.get("reportMd") or "")
            next_feedback = "\n\n".join(p for p in (feedback, plan["feedback"]) if p)
        except Exception as exc:  # noqa: BLE001 - the caller's feedback still goes to the agent
            logger.warning("the last report could not be turned into a repair plan: %s", exc)
    while True:
        if _cancel_marker(task_id):
            return _end_killed(task_id)
        running = _("round {round}: agent running").format(round=rnd)
        record(task_id, phase="running", lastMessage=running)
        st.event(task_id, "started", "running", running)
        result = dispatch_round.with_options(task_run_name=f"dispatch-round-{rnd}")(task_id, rnd, next_feedback, answer)
        answer = None
        record(task_id, logFile=result.get("logFile"), agentExitCode=result.get("exitCode"),
               agentDurationMs=result.get("durationMs"))
        st.event(task_id, "agent_exited", "running", f"exit={result.get('exitCode')}")
        logger.info("round %s: agent %s ended (%s) after %s ms", rnd, agent_id, exit_phrase(result.get("exitCode")),
                    result.get("durationMs"))
        if result.get("killed") or result.get("cancelRequested"):
            if result.get("guiStop") is not None:
                record(task_id, guiStop=result["guiStop"])  # a desktop app's stop: clicked, went idle
            return _end_killed(task_id)
        if result.get("question") and meta.get("remoteCommit"):
            # a suspended remote run may resume on another worker, which has neither the question
            # nor the answer's handoff: end the task with the question instead of waiting
            msg = _("the agent asked (round {round}): {question} — a remote task cannot wait for an answer yet; rework "
                    "it with the answer as feedback").format(round=rnd, question=str(result["question"])[:1500])
            _finish(task_id, "needs_attention", msg, "needs_user_unsupported", roundsUsed=rnd + 1)
            return Failed(name=NEEDS_ATTENTION, message=msg)
        if result.get("question"):
            end_agent_session(task_id)  # the flow-run process exits while it waits
            ask_user(task_id, rnd, result["question"], next_feedback, result.get("questionKind"))  # suspends the flow run
        if result.get("hardFailure"):
            etype = result.get("errorType") or "spawn"
            what = (_("the agent's connection was lost: {error}") if etype == "cdp_disconnected"
                    else _("agent could not start: {error}")).format(error=result.get("error"))
            if etype == "setup_failed":  # 40-agents-tasks §3 4.b.3: failed/<errorType>, like spawn
                what = _("setup failed: {error}").format(error=result.get("error"))
            msg = what + (_(" (log {log})").format(log=result["logFile"]) if result.get("logFile") else "")
            _finish(task_id, "failed", msg, etype)
            return Failed(message=msg)
        if result.get("timeout"):
            msg = (_("agent timed out after {ms} ms; its process tree was killed (log {log})").format(
                       ms=task_timeout_ms, log=result.get("logFile"))
                   if result.get("errorType") != "idle_timeout"
                   else _("{error} (log {log})").format(error=result.get("error"), log=result.get("logFile")))
            _finish(task_id, "failed", msg, "idle_timeout" if result.get("errorType") == "idle_timeout" else "timeout",
                    abortSource="timeout", roundsUsed=rnd + 1)
            st.event(task_id, "timeout_killed", "failed", msg)
            return Failed(message=msg)
        agent_run = _agent_run(result)
        if not auto_verify:
            if not result.get("ok"):
                msg = _agent_failed_message(agent_run, result.get("logFile"))
                _finish(task_id, "failed", msg, "agent_failed", roundsUsed=rnd + 1)
                return Failed(message=msg)
            msg = _("done: agent exited 0 in {ms} ms (verification off). Log {log}").format(
                ms=result.get("durationMs"), log=result.get("logFile"))
            _finish(task_id, "succeeded", msg, roundsUsed=rnd + 1)
            return Completed(name=SUCCEEDED, message=msg)

        record(task_id, phase="verify_start", lastMessage=_("round {round}: verifying").format(round=rnd))
        st.event(task_id, "verify_start", "verify_start", _("round {round}: verification started").format(round=rnd))
        verdict = run_verify_round(f"verify-round-{rnd}", task_id, rnd, baseline, agent_run=agent_run)
        record(
            task_id,
            roundsUsed=rnd + 1,
            reportMd=verdict["mdPath"],
            reportJson=verdict["jsonPath"],
            reportHtml=verdict.get("htmlPath"),
            reportRound=verdict["round"],
            verificationSource="auto",
            latestVerificationVerdict="passed" if verdict["passed"] else "failed",
            changedFiles=verdict["changedFiles"],
            diffstat=verdict["diffstat"],
            **(verdict.get("integrity") or {}),  # testIntegrity / unsupportedClaims of this round (or cleared)
        )
        st.event(task_id, "verify_round", "verify_start",
                 (_("round {round}: passed") if verdict["passed"] else _("round {round}: failed")).format(round=rnd))
        if meta.get("remoteCommit"):
            publish_record(task_id)  # a remote task's caller sees the round's report while the task goes on
        logger.info("round %s verification %s (report-%s): %s", rnd, "passed" if verdict["passed"] else "failed",
                    verdict["round"], verdict["message"])
        if _cancel_marker(task_id):
            return _end_killed(task_id)
        # an agent that failed is an agent failure, not a verification failure: no rework round
        # is spent on it (input issue); a recognised fatal line only counts when nothing changed
        if agent_run["exitCode"] != 0 or (agent_run.get("fatalLine") and not verdict["changedFiles"]):
            msg = _agent_failed_message(agent_run, result.get("logFile"), verdict)
            _finish(task_id, "failed", msg, "agent_failed")
            return Failed(message=msg)
        if verdict["blockingIssues"]:
            issues = _("; ").join(f"[{i.get('code')}] {i.get('message')}" for i in verdict["blockingIssues"])
            msg = _("verification blocked (report-{round}; {agent}): {issues}").format(
                round=verdict["round"], agent=_agent_note(agent_run), issues=issues)
            _finish(task_id, "needs_attention", msg, blocked_error_type(verdict["blockingIssues"]),
                    **({"pendingVisualVerification": True} if verdict.get("visualBlocked") else {}))
            return Failed(name=NEEDS_ATTENTION, message=msg)
        if verdict["passed"]:
            msg = _("verification passed (report-{round}, {n} agent round(s); {agent}). {message}").format(
                round=verdict["round"], n=rnd + 1, agent=_agent_note(agent_run), message=verdict["message"])
            _finish(task_id, "succeeded", msg)
            return Completed(name=SUCCEEDED, message=msg)
        if rnd < auto_fix_rounds:  # absolute (40-agents-tasks §3.4d): a reworked, exhausted task gets one round
            record(task_id, phase="fixing", lastMessage=_("round {round} failed verification; rework round {next}").format(
                round=rnd, next=rnd + 1))
            logger.info("round %s failed verification (%s); automatic rework round %s", rnd,
                        ", ".join(verdict["failedChecks"]) or "see the report", rnd + 1)
            emit(
                task_id, "rework_triggered", "fixing",
                _("round {round} failed verification, automatic rework round {next}").format(round=rnd, next=rnd + 1),
                {"round": rnd + 1, "mode": "auto", "failedChecks": verdict["failedChecks"]},
            )
            try:
                plan = write_repair_plan.with_options(task_run_name=f"repair-plan-{rnd}")(
                    task_id, verdict["round"], verdict["jsonPath"], verdict["mdPath"]
                )
            except Exception as exc:  # noqa: BLE001 - an unreadable report ends the task, coded
                msg = _("internal error writing the repair plan: {error}").format(error=exc)
                _finish(task_id, "failed", msg, "internal")
                return Failed(message=msg)
            next_feedback = plan["feedback"]
            rnd += 1
            continue
        if auto_fix_rounds == 0:
            msg = _("verification failed (report-{round}; {agent}); automatic rework is off. Use "
                    "manage_task(action=\"rework\") or read the report. {message}").format(
                round=verdict["round"], agent=_agent_note(agent_run), message=verdict["message"])
            _finish(task_id, "failed", msg, "verify_failed")
            return Failed(message=msg)
        msg = _("verification failed (report-{round}; {agent}); the {max} automatic rework round(s) are used up ({n} "
                "agent rounds in total). Human attention suggested. {message}").format(
            round=verdict["round"], agent=_agent_note(agent_run), max=auto_fix_rounds, n=rnd + 1,
            message=verdict["message"])
        _finish(task_id, "needs_attention", msg)
        return Failed(name=NEEDS_ATTENTION, message=msg)
