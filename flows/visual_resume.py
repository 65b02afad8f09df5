"""A task blocked by visual acceptance, reworked: verify first, before any agent round
(docs/agents-tasks.md §3 step 2; docs/visual.md §6.5).

A round whose verification was *blocked* by the visual stage (no approved baseline, the rules or a
baseline edited, a page server that cannot start …) leaves the task ``needs_attention`` with
``pendingVisualVerification``. A person resolves it (approves baselines with the task's id, fixes
the environment) and reworks the task; the flow then re-verifies the agent's existing work: it may
pass as it stands, and no agent round is spent on a block the agent did not cause.
"""

from __future__ import annotations

from typing import Any

from prefect.states import Completed, Failed, State

from ..acceptance.git import Baseline
from ..core.i18n import _
from ..tasks.common import record, store
from ..tasks.repair import write_repair_plan
from ..tasks.verify import run_verify_round
from .states import NEEDS_ATTENTION, SUCCEEDED


def reverify(task_id: str, rnd: int, baseline: Baseline, auto_fix_rounds: int,
             finish: Any, feedback: str | None = None) -> State | str | None:
    """Re-verify a task with ``pendingVisualVerification`` at round ``rnd`` (= roundsUsed).

    Args:
        finish: the flow's ``_finish(task_id, status, message, error_type, **fields)``.
        feedback: the caller's rework feedback: with it, a passing re-verification still goes on
            to the agent round the caller asked for (its feedback is never dropped).

    Returns:
        A final state (succeeded, blocked again → needs_attention, out of rounds → failed), or the
        repair feedback (str) for the agent round that follows, or None when there was nothing to
        re-verify (no flag).
    """
    st = store()
    if not (st.read(task_id) or {}).get("pendingVisualVerification"):
        return None
    record(task_id, phase="verify_start",
           lastMessage=_("round {round}: re-verifying the agent's work after a visual block").format(round=rnd))
    st.event(task_id, "verify_start", "verify_start",
             _("round {round}: re-verification (pendingVisualVerification)").format(round=rnd))
    verdict = run_verify_round(f"reverify-round-{rnd}", task_id, rnd, baseline)
    fields = verdict.record_fields("auto")
    record(task_id, **fields.model_dump(mode="json", exclude={"changedFiles", "diffstat"}))
    st.event(task_id, "verify_round", "verify_start",
             (_("round {round} re-verification: passed") if verdict.passed
              else _("round {round} re-verification: failed")).format(round=rnd))
    if verdict.blocking_issues:
        msg = _("re-verification still blocked (report-{round}): {issues}").format(
            round=verdict.round, issues=verdict.blocking_text(_("; ")))
        finish(task_id, "needs_attention", msg, "verify_failed", pendingVisualVerification=verdict.visual_blocked)
        return Failed(name=NEEDS_ATTENTION, message=msg)
    record(task_id, pendingVisualVerification=None)
    if verdict.passed and feedback and feedback.strip():
        return ""  # the work passes as it stands; the agent round runs for the caller's feedback
    if verdict.passed:
        msg = _("re-verification passed (report-{round}; no agent round spent). {message}").format(
            round=verdict.round, message=verdict.message)
        finish(task_id, "succeeded", msg)
        return Completed(name=SUCCEEDED, message=msg)
    if rnd > auto_fix_rounds:
        msg = _("re-verification failed (report-{round}) and no rework round is left ({n} used, autoFixRounds "
                "{max}). {message}").format(round=verdict.round, n=rnd, max=auto_fix_rounds,
                                            message=verdict.message)
        finish(task_id, "failed", msg, "verify_failed")
        return Failed(message=msg)
    plan = write_repair_plan.with_options(task_run_name=f"repair-plan-{verdict.round}")(
        task_id, verdict.round, verdict.json_path, verdict.md_path)
    return plan.feedback
