"""Steps 1–4 of a verify round (docs/acceptance.md §3.0–§3.1): the round is allocated and its baseline
taken (:func:`open_round`), then its checks are resolved and the visual snapshot checked
(:func:`resolve_round`, giving a :class:`RoundConfig`)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from ...core.errors import ErrorCode
from ...core.i18n import _
from ..config import AcceptanceConfigError, CheckDef, ResolvedChecks, resolve_checks, summarize_resolved
from ..git import Baseline, capture_baseline
from ..grading.grade import capture_baseline_state, load_baseline_state
from ..visual.stage import VisualStage
from .context import GitGuard, RoundContext, next_round, now_iso
from .request import VerifyRequest

__all__ = ["RoundConfig", "open_round", "resolve_round"]

log = logging.getLogger("tianshu_mcp")


@dataclass
class RoundConfig:
    """The round's resolved acceptance configuration (steps 3–4).

    Attributes:
        resolved: the resolved layers; None when the configuration is broken (a blocking issue).
        notes: notes for ``analysis.notes`` (the resolver's, or the configuration error's message).
        visual: the round's visual stage (its snapshot checked even when visual acceptance is off).
        require_changes: the zero-change gate switch (off for a blocked round).
        check_defs: the command checks to run (none for a blocked round).
        concurrency: check parallelism (the layers' ``verifyConcurrency``, else the server's; ≥ 1).
        baseline_checks: baseline grading is on (``baselineChecks``, never for a blocked round).
        baseline_dir: the directory of the baseline's grading files.
    """

    resolved: ResolvedChecks | None
    notes: list[str]
    visual: VisualStage
    require_changes: bool
    check_defs: list[CheckDef]
    concurrency: int
    baseline_checks: bool
    baseline_dir: Path


def open_round(req: VerifyRequest) -> RoundContext:
    """Steps 1–2: create the task directory, allocate the round (:func:`next_round`, never
    overwriting a report) and take the baseline when the request has none (a git failure is
    recorded in the context and the baseline is then "not a repository")."""
    task_dir = Path(req.task_dir)
    task_dir.mkdir(parents=True, exist_ok=True)
    rnd = next_round(task_dir, req.round)
    started_at = now_iso()
    git = GitGuard()
    baseline = req.baseline if req.baseline is not None else git(
        lambda: capture_baseline(req.project_path), Baseline(is_repo=False, message="git failed: no baseline"))
    return RoundContext(req=req, task_dir=task_dir, round=rnd, started_at=started_at, baseline=baseline,
                        fresh_baseline=req.baseline is None, git=git)


def resolve_round(ctx: RoundContext) -> RoundConfig:
    """Steps 3–4: resolve the acceptance layers (an error becomes a blocking issue in ``ctx``),
    freeze and check the visual snapshot before anything runs (even when visual acceptance is off:
    the agent may not edit its rules or baselines), and, for baseline grading of a fresh baseline,
    record the pre-work state before any check runs."""
    req = ctx.req
    resolved, notes = _resolve(ctx)
    visual = VisualStage(req.task_id, ctx.project, ctx.task_dir, Path(req.home), ctx.round,
                         resolved.visual if resolved is not None else None, req.should_stop)
    if not ctx.blocking and (issue := visual.integrity()) is not None:
        ctx.blocking.append(issue)
    usable = resolved if resolved is not None and not ctx.blocking else None
    concurrency = (
        resolved.verify_concurrency
        if resolved is not None and resolved.verify_concurrency is not None
        else req.verify_concurrency
    ) or 1
    cfg = RoundConfig(
        resolved=resolved,
        notes=notes,
        visual=visual,
        require_changes=usable.require_changes if usable is not None else False,
        check_defs=usable.checks if usable is not None else [],
        concurrency=concurrency,
        baseline_checks=bool(usable is not None and usable.baseline_checks),
        baseline_dir=Path(req.baseline_dir) if req.baseline_dir is not None else ctx.task_dir,
    )
    if (cfg.baseline_checks and ctx.fresh_baseline and ctx.baseline.is_repo
            and load_baseline_state(cfg.baseline_dir) is None):
        # a pure health check: "now" is the pre-work state; record it before any check runs
        capture_baseline_state(ctx.project, cfg.baseline_dir)
    return cfg


def _resolve(ctx: RoundContext) -> tuple[ResolvedChecks | None, list[str]]:
    """The resolved layers and their notes; a configuration error (or any other failure) is a
    blocking issue in ``ctx`` and its message the only note (never raised). The layers are None
    when resolving them failed."""
    req = ctx.req
    resolved: ResolvedChecks | None = None
    try:
        resolved = resolve_checks(
            ctx.project,
            req.home,
            req.acceptance_override,
            extra_checks=req.extra_checks,
            checks_mode=req.checks_mode,
            project_verify=req.project_verify,
            pinned=req.pinned_rules,
        )
        notes = list(resolved.notes)
        log.info("acceptance config layers task=%s %s", req.task_id, summarize_resolved(resolved))
        return resolved, notes
    except AcceptanceConfigError as exc:
        ctx.blocking.append({"code": exc.code.value, "message": exc.message})
        return resolved, [exc.message]
    except Exception as exc:  # noqa: BLE001 - surfaced as a blocking issue, never raised
        log.exception("resolving acceptance checks failed for %s", req.task_id)
        msg = _("resolving the acceptance configuration failed: {error}").format(error=exc)
        ctx.blocking.append({"code": ErrorCode.INTERNAL.value, "message": msg})
        return resolved, [msg]
