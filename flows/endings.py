"""How a run-task flow ends: one :func:`finish` writes the ending (record, status event, final
state) and :func:`ending_message` words it for the reason :func:`.policy.decide` gave.

The message is what a host reads first (``message`` in every answer), so each one says what
happened, the round, the agent's exit and where to look (report, log).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prefect.states import State

from ..core.i18n import _
from ..core.model import exit_phrase
from ..core.taskstore import utc_now
from ..tasks.common import record, store
from ..tasks.results import RoundResult, Verdict
from .policy import Reason
from .states import state_for


def finish(task_id: str, status: str, message: str, error_type: str | None = None, **fields: Any) -> State:
    """End the task: ``task.json`` (message, error type, finishedAt, phase cleared, ``fields``),
    the status event (its webhook) and the final flow-run state (:func:`.states.state_for`).

    Raises:
        ValueError: ``status`` is not final, or a field the record does not declare.
    """
    status = getattr(status, "value", status)
    record(task_id, lastMessage=message, errorType=getattr(error_type, "value", error_type), finishedAt=utc_now(),
           phase=None, **fields)
    store().event(task_id, status, status, message[:500])
    return state_for(status, message)


def exit_words(result: RoundResult) -> str:
    """``exit code 41 (invalid auth method …)``: the exit phrase with what the profile says the code means."""
    phrase = exit_phrase(result.exit_code)
    return f"{phrase} ({result.exit_meaning})" if result.exit_meaning else phrase


def agent_note(result: RoundResult) -> str:
    """``agent exit code 0 after 812 ms``: the agent's own outcome, stated in every round's message."""
    return _("agent {exit} after {ms} ms").format(exit=exit_words(result), ms=result.duration_ms)


def agent_failed_message(result: RoundResult, verdict: Verdict | None = None) -> str:
    """The task's message for a failed agent: exit code, the line that says why, where to look."""
    tail = [ln.strip() for ln in result.output_tail.splitlines()
            if ln.strip() and not ln.startswith(("[exit] ", "===== spawn:"))]  # our own log framing
    line = result.fatal_line or (tail[-1][:300] if tail else "")
    report = _("; report-{round} ({path})").format(round=verdict.round, path=verdict.md_path) if verdict else ""
    said = _("it said: {line}").format(line=line) if line else _("no output")
    return _("agent failed: {exit} after {ms} ms, {said} (log {log}{report}); no rework round was spent — fix the "
             "agent's setup and rework the task").format(exit=exit_words(result), ms=result.duration_ms, said=said,
                                                         log=result.log_file, report=report)


@dataclass(frozen=True)
class EndingFacts:
    """What an ending message may quote: the round, the task's limits, the agent's round and
    the verification's verdict (None when the round was not verified)."""

    round: int
    task_timeout_ms: int
    auto_fix_rounds: int
    result: RoundResult
    verdict: Verdict | None = None


def _log(result: RoundResult) -> str:
    return _(" (log {log})").format(log=result.log_file) if result.log_file else ""


def ending_message(reason: Reason, f: EndingFacts) -> str:
    """The task's final message for ``reason`` (see :class:`.policy.Reason`)."""
    r, v = f.result, f.verdict
    if reason is Reason.REMOTE_QUESTION:
        return _("the agent asked (round {round}): {question} — a remote task cannot wait for an answer yet; rework "
                 "it with the answer as feedback").format(round=f.round, question=str(r.question)[:1500])
    if reason is Reason.HARD_FAILURE:
        what = (_("the agent's connection was lost: {error}") if r.error_type == "cdp_disconnected"
                else _("setup failed: {error}") if r.error_type == "setup_failed"  # docs/agents-tasks.md §3 4.b.3
                else _("agent could not start: {error}"))
        return what.format(error=r.error) + _log(r)
    if reason is Reason.TIMEOUT:
        return _("agent timed out after {ms} ms; its process tree was killed (log {log})").format(
            ms=f.task_timeout_ms, log=r.log_file)
    if reason is Reason.IDLE_TIMEOUT:
        return _("{error} (log {log})").format(error=r.error, log=r.log_file)
    if reason is Reason.AGENT_FAILED:
        return agent_failed_message(r, v)
    if reason is Reason.DONE_UNVERIFIED:
        return _("done: agent exited 0 in {ms} ms (verification off). Log {log}").format(ms=r.duration_ms,
                                                                                      log=r.log_file)
    assert v is not None, reason  # the rest end a verified round
    if reason is Reason.BLOCKED:
        return _("verification blocked (report-{round}; {agent}): {issues}").format(
            round=v.round, agent=agent_note(r), issues=v.blocking_text(_("; ")))
    if reason is Reason.PASSED:
        return _("verification passed (report-{round}, {n} agent round(s); {agent}). {message}").format(
            round=v.round, n=f.round + 1, agent=agent_note(r), message=v.message)
    if reason is Reason.REWORK_OFF:
        return _("verification failed (report-{round}; {agent}); automatic rework is off. Use "
                 "manage_task(action=\"rework\") or read the report. {message}").format(
            round=v.round, agent=agent_note(r), message=v.message)
    return _("verification failed (report-{round}; {agent}); the {max} automatic rework round(s) are used up ({n} "
             "agent rounds in total). Human attention suggested. {message}").format(
        round=v.round, agent=agent_note(r), max=f.auto_fix_rounds, n=f.round + 1, message=v.message)
