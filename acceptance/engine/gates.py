"""Steps 9–10 of a verify round (docs/acceptance.md §3.1, §4.2): the gates that block or fail a round
whatever its checks said — git failures, the zero-change gate (``requireChanges``), checks that
cannot start, a round where nothing judged the work — and the final visual integrity check
(:func:`apply_gates`)."""

from __future__ import annotations

from typing import Any

from ...core.errors import ErrorCode
from ...core.i18n import _
from ..check_result import CheckResult
from ..runner import SPAWN_REASON_PREFIX
from ..verdict import NO_CHANGES_CHECK
from .changes import RoundChanges
from .context import RoundContext
from .setup import RoundConfig

__all__ = ["apply_gates"]


def apply_gates(ctx: RoundContext, cfg: RoundConfig, checks: list[dict[str, Any]], changes: RoundChanges) -> None:
    """Apply the round's gates, in this order: git failures (blocking ``GIT_FAILED``) or else the
    zero-change gate; checks that cannot start (blocking ``CHECK_NOT_RUNNABLE``); nothing verified
    (blocking ``NOTHING_VERIFIED``, or a warning in a repository); the final visual integrity check.
    Blocking issues go to ``ctx.blocking``, a failed gate to ``checks``, notes and warnings to
    ``changes.report``."""
    _change_gate(ctx, cfg, checks, changes)
    _not_runnable(ctx, checks)
    _nothing_verified(ctx, checks, changes)
    # 10. the final integrity check
    if not ctx.blocking and (issue := cfg.visual.integrity()) is not None:
        ctx.blocking.append(issue)


def _change_gate(ctx: RoundContext, cfg: RoundConfig, checks: list[dict[str, Any]], changes: RoundChanges) -> None:
    """Step 9, the zero-change gate (not when git failed: "no changes" would be a guess; the git
    failures block the round instead). With ``requireChanges`` on, a repository without task output
    gets a failed ``requireChanges`` gate result; off, a note. A project that is not a repository
    skips the gate (noted when it was on)."""
    notes = changes.report["notes"]
    if ctx.git.failures:
        ctx.blocking.extend(ctx.git.blocking_issues())
    elif ctx.baseline.is_repo and not changes.task_output:
        if cfg.require_changes:
            checks.append(CheckResult(
                name=NO_CHANGES_CHECK,
                cmd="requireChanges gate",
                passed=False,
                output_tail=_("fail-closed: zero file changes relative to the pre-work baseline"),
                reason=_("requireChanges is on by default, but no task output was detected"),
                aborted=None,
            ).to_json())
        else:
            notes.append(
                _("requireChanges=false: zero changes relative to the pre-work baseline; reported only, not blocking.")
            )
    elif not ctx.baseline.is_repo and cfg.require_changes:
        notes.append(
            _("requireChanges=true, but the project is not a git repository; the zero-change gate was skipped.")
        )


def _not_runnable(ctx: RoundContext, checks: list[dict[str, Any]]) -> None:
    """port: checks that cannot even start are a setup problem, not the agent's: block the round
    (needs_attention) instead of sending the agent into rework for something it cannot fix."""
    for c in checks:
        if str(c.get("reason", "")).startswith(SPAWN_REASON_PREFIX) and not c.get("optional"):
            ctx.blocking.append({"code": ErrorCode.CHECK_NOT_RUNNABLE.value,
                                 "message": _("check '{name}' cannot start ({reason}); fix the acceptance configuration").format(
                                     name=c["name"], reason=c["reason"][len(SPAWN_REASON_PREFIX):])})


def _nothing_verified(ctx: RoundContext, checks: list[dict[str, Any]], changes: RoundChanges) -> None:
    """port: nothing at all judged the work (no git evidence, no command check): fail closed; in a
    repository only the git gates judged the round (a warning)."""
    ran = [c for c in checks[1:] if not c.get("skipped") and c.get("name") != NO_CHANGES_CHECK]
    if not ctx.baseline.is_repo and not ran and not ctx.blocking:
        ctx.blocking.append({"code": ErrorCode.NOTHING_VERIFIED.value,
                             "message": _("the project is not a git repository and no command check ran, so nothing "
                                          "could judge the work; add checks to {project}/.tianshu-mcp/acceptance.json").format(
                                              project=ctx.project)})
    elif ctx.baseline.is_repo and not ran and not ctx.blocking:
        changes.report["warnings"].append(
            _("no command check is configured or derived for this project: only the git gates judged this round")
        )
