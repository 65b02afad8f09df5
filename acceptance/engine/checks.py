"""Steps 5–6b of a verify round (docs/acceptance.md §3.1–§3.3, docs/integrity.md): ``git-diff-check`` first,
then the command checks under verification integrity (:func:`run_round_checks`, giving a
:class:`CheckRun`), then the opt-in baseline grading (:func:`grade_baseline`: the same checks on the
pre-work baseline, see :mod:`..grading`).

What the checks write into the work tree is not task output: it is attributed here
(:mod:`..check_outputs`) and left out of the change analysis.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ...core.i18n import _
from ...core.procs import stop_requested
from ...core.reaper import reap_orphans
from ..check_outputs import CheckOutputs, Snapshot, attribute, ledger_path, snapshot
from ..check_result import CheckResult
from ..config import ResolvedChecks
from ..git import GIT_CHECK_NAME, Baseline, git_diff_check, run_git
from ..grading.grade import Grading, capture_baseline_state, grade_round, load_baseline_state
from ..integrity.judge import IntegrityOutcome, IntegritySession
from ..integrity.models import IntegrityPolicy
from ..runner import run_checks
from .context import RoundContext
from .request import VerifyRequest
from .setup import RoundConfig

__all__ = ["CheckRun", "run_round_checks", "grade_baseline", "integrity_policy"]


@dataclass
class CheckRun:
    """The round's checks, run (steps 5–6).

    Attributes:
        checks: the check results (:meth:`..check_result.CheckResult.to_json` dicts), ``git-diff-check``
            first, then one per command check in declaration order.
        git_ok: the baseline is a repository and git had not failed before the command checks ran.
        session: the verification integrity session (None when integrity is off or nothing ran).
        integrity: what verification integrity decided (``report["integrity"]``).
        outputs: the files the checks wrote (not task output).
    """

    checks: list[dict[str, Any]]
    git_ok: bool
    session: IntegritySession | None
    integrity: IntegrityOutcome
    outputs: CheckOutputs


def run_round_checks(ctx: RoundContext, cfg: RoundConfig) -> CheckRun:
    """Steps 5–6: ``git-diff-check`` (always first), then the command checks, in the integrity
    session of the round's ``testIntegrity`` policy when there is one. Checks excused by integrity
    get ``notCounted``, its notes ``integrityNote``; its blocking issues go to ``ctx.blocking``.
    Leftover processes of the checks are reaped; the files the checks wrote are attributed."""
    checks: list[dict[str, Any]] = [_git_diff_check(ctx)]
    git_ok = ctx.baseline.is_repo and not ctx.git.failures
    before = ctx.git(lambda: snapshot(ctx.project), None) if git_ok and cfg.check_defs else None
    policy = integrity_policy(ctx.req, cfg.resolved, ctx.baseline, ctx.blocking)
    session = _integrity_session(ctx, cfg, policy)
    integrity = IntegrityOutcome(report={"policy": policy.value, "notes": _integrity_off_notes(ctx.req, policy)})
    if unjudgeable := _unjudgeable_targets(ctx.req, cfg.resolved, ctx.baseline, ctx.blocking):
        integrity.blocking.append(unjudgeable)
    try:
        if session is not None:
            session.start()
        checks.extend(
            run_checks(session.main_defs() if session is not None else cfg.check_defs, ctx.project, ctx.log_path,
                       ctx.default_timeout_ms, concurrency=cfg.concurrency, should_stop=ctx.req.should_stop,
                       tool_dirs=ctx.req.pinned_rules.tool_dirs if ctx.req.pinned_rules is not None else None,
                       extra_env=session.extra_env if session is not None else None)
        )
        if session is not None:
            integrity = session.finish(checks[1:], ctx.log_path)
    finally:
        if session is not None:
            session.close()
    _apply_integrity(checks, integrity, ctx.blocking)
    if cfg.check_defs or session is not None:
        reap_orphans()  # a check's leftover cannot write after the checks were judged
    outputs = _attribute_outputs(ctx, before) if git_ok else CheckOutputs()
    return CheckRun(checks=checks, git_ok=git_ok, session=session, integrity=integrity, outputs=outputs)


def _git_diff_check(ctx: RoundContext) -> dict[str, Any]:
    """The built-in ``git-diff-check`` (§4.3); when git fails, a failed result pointing at the
    blocking ``GIT_FAILED`` issue."""
    failed = CheckResult(name=GIT_CHECK_NAME, cmd="git diff --check", passed=False,
                         reason=_("git failed (see the blocking issue)"))
    return ctx.git(lambda: git_diff_check(ctx.project, ctx.baseline), failed.to_json())


def _integrity_session(ctx: RoundContext, cfg: RoundConfig, policy: IntegrityPolicy) -> IntegritySession | None:
    """The round's integrity session: None when ``policy`` is off or there is nothing to run
    (no command check, no holdout check). A round without a task start records the baseline state
    first ("now" is the baseline)."""
    req = ctx.req
    if policy is IntegrityPolicy.OFF or not (cfg.check_defs or req.holdout_checks):
        return None
    if ctx.fresh_baseline and load_baseline_state(cfg.baseline_dir) is None:
        capture_baseline_state(ctx.project, cfg.baseline_dir)  # a round without a task start: "now" is the baseline
    agent_run = req.agent_run or {}
    return IntegritySession(
        policy=policy, project=ctx.project, task_dir=ctx.task_dir, baseline_dir=cfg.baseline_dir, round_no=ctx.round,
        baseline=ctx.baseline, check_defs=cfg.check_defs, task_text=req.task_text, target_tests=req.target_tests,
        holdout=req.holdout_checks, agent_message=str(agent_run.get("finalMessage") or agent_run.get("outputTail") or ""),
        default_timeout_ms=ctx.default_timeout_ms, concurrency=cfg.concurrency, should_stop=req.should_stop)


def _apply_integrity(checks: list[dict[str, Any]], integrity: IntegrityOutcome,
                     blocking: list[dict[str, str]]) -> None:
    """Mark the command check results integrity excused (``notCounted``) or annotated
    (``integrityNote``; indices count from the first command check) and add its blocking issues."""
    for k in integrity.not_counted:
        checks[1 + k]["notCounted"] = True
    for k, note in integrity.check_notes.items():
        checks[1 + k]["integrityNote"] = note
    blocking.extend(integrity.blocking)


def _attribute_outputs(ctx: RoundContext, before: Snapshot | None) -> CheckOutputs:
    """The files the checks wrote (:func:`..check_outputs.attribute`), compared with ``before``;
    nothing when git fails (recorded)."""
    outputs = CheckOutputs()
    after = ctx.git(lambda: snapshot(ctx.project), None)
    if after is not None:
        outputs = ctx.git(
            lambda: attribute(ledger_path(ctx.req.home, ctx.project, after.root), ctx.project, ctx.baseline, before,
                              after), outputs)
    return outputs


def grade_baseline(ctx: RoundContext, cfg: RoundConfig, run: CheckRun) -> Grading | None:
    """Step 6b, baseline grading (opt-in ``baselineChecks``): the same checks on the pre-work
    baseline, in a temporary worktree (:func:`..grading.grade_round`). Graded results get
    ``baseline`` (their classification) and ``notCounted`` (a failure the policy excuses). The
    policy is ``strict`` when no agent's work is judged. None when grading is off."""
    if not cfg.baseline_checks or cfg.resolved is None:
        return None
    req = ctx.req
    policy = cfg.resolved.baseline_policy if req.agent_work else "strict"
    if stop_requested(req.should_stop):
        grading = Grading({"enabled": True, "policy": policy, "checks": [], "tests": [],
                           "notes": [_("baseline grading skipped: the task was cancelled")]})
    elif cfg.check_defs:
        grading = grade_round(
            project=ctx.project,
            task_dir=cfg.baseline_dir,
            baseline=ctx.baseline,
            check_defs=cfg.check_defs,
            results=run.checks[1:],
            log_path=ctx.log_path,
            policy=policy,
            task_text=req.task_text,
            default_timeout_ms=ctx.default_timeout_ms,
            concurrency=cfg.concurrency,
            should_stop=req.should_stop,
            run_defs=run.session.main_defs() if run.session is not None else None,
        )
        for k, c in enumerate(run.checks[1:]):
            if k in grading.classes:
                c["baseline"] = grading.classes[k]
            if k in grading.not_counted:
                c["notCounted"] = True
    else:
        grading = Grading({"enabled": True, "policy": policy, "checks": [], "tests": [],
                           "notes": [_("baseline grading: no command check to grade")]})
    reap_orphans()  # nor a leftover of the checks run on the baseline
    return grading


def integrity_policy(req: VerifyRequest, resolved: ResolvedChecks | None, baseline: Baseline,
                     blocking: Sequence[Mapping[str, str]]) -> IntegrityPolicy:
    """The round's ``testIntegrity`` (docs/integrity.md): the resolved layers' value for an agent's work on
    a repository with a baseline commit; ``off`` for a health check of a project (nothing to
    compare), a project that is not a repository, a baseline commit that is gone (the round is a
    ``GIT_FAILED`` then), or a round already blocked by its config."""
    if resolved is None or blocking or not req.agent_work or not baseline.is_repo or not baseline.head:
        return IntegrityPolicy.OFF
    if not run_git(["cat-file", "-e", f"{baseline.head}^{{commit}}"], req.project_path).ok:
        return IntegrityPolicy.OFF  # the baseline commit is gone: GIT_FAILED says so, nothing to compare
    return IntegrityPolicy(resolved.test_integrity)


def _unjudgeable_targets(req: VerifyRequest, resolved: ResolvedChecks | None, baseline: Baseline,
                         blocking: Sequence[Mapping[str, str]]) -> dict[str, str] | None:
    """``TARGETS_NOT_JUDGED`` when an agent's round names ``targetTests`` but the project has no
    git baseline commit, so integrity is off although its policy is not: nothing shows the targets
    ran and passed as they were (a skipped or rewritten target passes the checks). Fails closed
    (docs/integrity.md §3); None otherwise, also under ``testIntegrity: off`` (the user's choice)."""
    if not req.agent_work or not req.target_tests or resolved is None or blocking:
        return None
    if IntegrityPolicy(resolved.test_integrity) is IntegrityPolicy.OFF or (baseline.is_repo and baseline.head):
        return None
    names = ", ".join(req.target_tests[:5]) + (_(" … {n} more").format(n=len(req.target_tests) - 5)
                                               if len(req.target_tests) > 5 else "")
    return {"code": "TARGETS_NOT_JUDGED", "message": _(
        "target tests {targets} cannot be judged: the project has no git baseline commit, so nothing shows they "
        "ran and passed as they were; commit the project (git init, git add, git commit) before the task, or "
        "leave targetTests out").format(targets=names)}


def _integrity_off_notes(req: VerifyRequest, policy: IntegrityPolicy) -> list[str]:
    if policy is not IntegrityPolicy.OFF:
        return []
    if not req.agent_work:
        return [_("verification integrity: not an agent's work (a health check of the project)")]
    return [_("verification integrity is off for this round (testIntegrity off, no git baseline commit, or the "
              "round is blocked)")]
