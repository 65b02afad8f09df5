"""Step 8 of a verify round (docs/acceptance.md §4.2): the change analysis of the round
(:func:`..git.analyze_changes`), its notes, and whether there is task output at all — files the
checks wrote and approved visual baselines are not the agent's work (:func:`analyze_round`, giving
:class:`RoundChanges`)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from ...core.i18n import _
from ...core.reaper import reap_orphans
from ..check_outputs import CheckOutputs
from ..git import Analysis, GitFailed, analyze_changes
from ..git.patch import change_patch
from ..grading.grade import Grading
from .checks import CheckRun
from .context import RoundContext
from .setup import RoundConfig

__all__ = ["RoundChanges", "analyze_round"]

log = logging.getLogger("tianshu_mcp")


@dataclass
class RoundChanges:
    """The round's changes (step 8).

    Attributes:
        analysis: the change analysis.
        report: ``report["analysis"]`` (:meth:`..git.models.Analysis.to_json` plus the round's notes
            and warnings; the later steps add theirs).
        task_output: True when a change is the task's output (not only check output or approved
            visual baselines): the zero-change gate's input.
        patch: the change as a patch (:func:`..git.patch.change_patch`, ``""``: no change), or None
            when it could not be made (a warning says why).
    """

    analysis: Analysis
    report: dict[str, Any]
    task_output: bool
    patch: str | None = None


def analyze_round(ctx: RoundContext, cfg: RoundConfig, run: CheckRun, grading: Grading | None) -> RoundChanges:
    """Analyse the changes since the baseline, leaving out the files the checks created; a git
    failure is recorded in ``ctx`` (the analysis is then empty with a warning) and any other error
    becomes a warning (the analysis is informational, it never sinks the round). The resolver's
    notes and warnings, the baseline grading's notes and notes on the checks' own output are added."""
    analysis = _analysis(ctx, cfg, run.outputs)
    if run.git_ok:
        reap_orphans()  # git runs the repository's own filters; what they leave behind dies here too
    analysis.notes.extend(cfg.notes)
    if cfg.resolved is not None:
        analysis.warnings.extend(cfg.resolved.warnings)
    if grading is not None:
        analysis.notes.extend(_("baseline grading ({policy}): {note}").format(policy=grading.report["policy"], note=n)
                              for n in grading.report["notes"])
    report = analysis.to_json()
    _note_check_outputs(report, analysis, run.outputs)
    approved = cfg.visual.approved_files()  # a person's baseline approval is not the agent's work
    task_output = analysis.has_changes and not (
        not set(analysis.untracked_files) - approved and set(analysis.changed_files) <= run.outputs.made | approved
        and {sm.path for sm in analysis.submodules} <= run.outputs.made)
    if approved & (set(analysis.changed_files) | set(analysis.untracked_files)):
        report["notes"].append(_("approved visual baselines changed since the baseline (a person's approval, "
                                 "not counted as task output)"))
    return RoundChanges(analysis=analysis, report=report, task_output=task_output,
                        patch=_patch(ctx, analysis, report) if run.git_ok else None)


def _patch(ctx: RoundContext, analysis: Analysis, report: dict[str, Any]) -> str | None:
    """The round's patch (:func:`..git.patch.change_patch`); a failure is a warning, never the round's."""
    if not (analysis.changed_files or analysis.untracked_files):
        return ""
    try:
        return change_patch(ctx.baseline, ctx.project, analysis)
    except GitFailed as exc:
        report["warnings"].append(_("the change's patch could not be made: {error}").format(error=exc.message))
    except Exception as exc:  # noqa: BLE001 - the patch is informational; never sink the round
        log.exception("patch failed for %s", ctx.req.task_id)
        report["warnings"].append(_("the change's patch could not be made: {error}").format(error=exc))
    return None


def _analysis(ctx: RoundContext, cfg: RoundConfig, outputs: CheckOutputs) -> Analysis:
    """:func:`..git.analyze_changes` of the round, never raising."""
    try:
        return analyze_changes(ctx.baseline, ctx.project, ctx.req.task_text, exclude_untracked=outputs.made,
                               check_argvs=[list(d.cmd) for d in cfg.check_defs],
                               owned_paths=ctx.req.agent_owned_paths)
    except GitFailed as exc:
        ctx.git.failures.append(exc)
        return Analysis(warnings=[_("change analysis impossible: {error}").format(error=exc.message)])
    except Exception as exc:  # noqa: BLE001 - analysis is informational; never sink the round
        log.exception("change analysis failed for %s", ctx.req.task_id)
        return Analysis(warnings=[_("change analysis failed: {error}").format(error=exc)])


def _note_check_outputs(report: dict[str, Any], analysis: Analysis, outputs: CheckOutputs) -> None:
    """Warn about tracked files the checks modified and note the checks' earlier and rewritten
    files (at most 20 named each)."""
    by_checks = sorted(outputs.made & set(analysis.changed_files))
    if by_checks:
        report["warnings"].append(
            _("the checks modified tracked file(s) during verification (not counted as task output): {files}").format(
                files=", ".join(by_checks[:20])
                + (_(" … {n} more").format(n=len(by_checks) - 20) if len(by_checks) > 20 else "")))
    if outputs.earlier:
        report["notes"].append(
            _("file(s) the checks of an earlier verification wrote, unchanged since (not counted as task output): "
              "{files}").format(files=", ".join(outputs.earlier[:20])))
    if outputs.rewritten:
        report["notes"].append(
            _("the checks rewrote file(s) the task had changed (still the task's output): {files}").format(
                files=", ".join(outputs.rewritten[:20])))
