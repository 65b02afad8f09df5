"""Step 11 of a verify round (docs/acceptance.md §3.1, §5): the verdict, its message
(:func:`..verdict.build_message`), the report dict, repair directives for a failed round and the
``report-<N>.md``/``.json`` files (:func:`conclude`, giving the :class:`VerifyOutcome`)."""

from __future__ import annotations

import logging
from typing import Any

from ...core.procs import stop_requested
from ..grading.grade import Grading
from ..repair import extract_repair_directives
from ..report import html_report_path, write_report
from ..runner import ZERO_TEST_REASON
from ..verdict import build_message
from ..visual.report import visual_html, visual_markdown
from .changes import RoundChanges
from .checks import CheckRun
from .context import RoundContext, now_iso
from .request import VerifyOutcome
from .setup import RoundConfig

__all__ = ["conclude"]

log = logging.getLogger("tianshu_mcp")


def conclude(ctx: RoundContext, cfg: RoundConfig, run: CheckRun, grading: Grading | None,
             changes: RoundChanges) -> VerifyOutcome:
    """The verdict and the report of the round, written to ``report-<N>.md``/``.json``.

    ``passed`` = not cancelled (a stop request or an aborted check), no blocking issue, no failed
    mandatory counted check, no visual defect; ``verdict`` ``passed``/``cancelled``/``failed``.

    Raises:
        OSError: the report cannot be written.
    """
    checks, visual = run.checks, cfg.visual
    cancelled = stop_requested(ctx.req.should_stop) or any(c.get("aborted") for c in checks)
    failed = [
        c for c in checks
        if not c.get("passed") and not c.get("skipped") and not c.get("optional") and not c.get("notCounted")
    ]
    zero_test = [str(c["name"]) for c in checks if c.get("reason") == ZERO_TEST_REASON]
    passed = not cancelled and not ctx.blocking and not failed and not visual.gates["failed"]
    message = build_message(
        checks, changes.report, ctx.blocking, cancelled, zero_test,
        [*(grading.bits if grading is not None else ()), *visual.message_bits()],
    )
    report = _report(ctx, cfg, run, grading, changes, passed=passed, cancelled=cancelled, message=message)
    html_path = str(html_report_path(ctx.task_dir, ctx.round))
    md_path, json_path = write_report(ctx.task_dir, report, visual_section=visual_markdown(report, html_path),
                                      visual_html=visual_html(report, ctx.task_dir), patch=changes.patch,
                                      brief_file=ctx.req.brief_file)
    log.info("task %s round %s acceptance: %s (%d checks)", ctx.req.task_id, ctx.round,
             "passed" if passed else "failed", len(checks))
    return VerifyOutcome(
        round=ctx.round,
        passed=passed,
        report=report,
        md_path=md_path,
        json_path=json_path,
        failed_checks=[str(c["name"]) for c in failed],
        blocking_issues=ctx.blocking,
        baseline=ctx.baseline,
    )


def _report(ctx: RoundContext, cfg: RoundConfig, run: CheckRun, grading: Grading | None, changes: RoundChanges, *,
            passed: bool, cancelled: bool, message: str) -> dict[str, Any]:
    """The report dict (``report-<N>.json``), keys in their order of docs/acceptance.md §5; a failed
    round gets ``repairDirectives``."""
    report: dict[str, Any] = {
        "round": ctx.round,
        "taskId": ctx.req.task_id,
        "projectPath": ctx.project,
        "startedAt": ctx.started_at,
        "finishedAt": now_iso(),
        "passed": passed,
        "verdict": "passed" if passed else "cancelled" if cancelled else "failed",
        "checks": run.checks,
        "analysis": changes.report,
        "files": {},
        "message": message,
    }
    if ctx.req.agent_run:
        report["agent"] = dict(ctx.req.agent_run)
    if ctx.blocking:
        report["blockingIssues"] = ctx.blocking
    if grading is not None:
        report["baselineGrading"] = grading.report
    report["integrity"] = run.integrity.report
    if cfg.visual.report is not None:
        report["visual"] = cfg.visual.report
    if not passed:
        report["repairDirectives"] = extract_repair_directives(report)
    return report
