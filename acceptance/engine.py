"""The verify pipeline of one round (20-acceptance §3, without the visual stage).

:func:`verify_round`: allocate the round (never overwrite a report) → baseline (captured if none
was given) → resolve checks (a config error becomes a blocking issue) → ``git-diff-check`` first →
command checks → baseline grading (opt-in ``baselineChecks``: the same checks on the pre-work
baseline, see :mod:`.grading`) → code analysis → zero-change gate → verdict and message → repair
directives (failed rounds) → ``report-<N>.md``/``.json``. Check failures never raise; they are the
verdict. The verdict message is built by :mod:`.verdict`.

Plain Python: no Prefect, no adapters. The Prefect task ``verify-round-{r}`` is a thin wrapper.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Literal, Mapping, Sequence, TypeVar

from ..core.errors import ErrorCode
from ..core.i18n import _
from ..core.procs import stop_requested
from ..core.reaper import reap_orphans
from .check_outputs import CheckOutputs, attribute, ledger_path, snapshot
from .config import (
    AcceptanceCheck,
    AcceptanceConfigError,
    CheckDef,
    PinnedRules,
    ResolvedChecks,
    resolve_checks,
    summarize_resolved,
)
from .git import (
    GIT_CHECK_NAME,
    Analysis,
    Baseline,
    GitFailed,
    analyze_changes,
    capture_baseline,
    git_diff_check,
    run_git,
)
from .grading import Grading, capture_baseline_state, grade_round, load_baseline_state
from .integrity.judge import IntegrityOutcome, IntegritySession
from .integrity.models import HoldoutCheck, IntegrityPolicy
from .repair import extract_repair_directives
from .report import html_report_path, write_report
from .runner import SPAWN_REASON_PREFIX, ZERO_TEST_REASON, run_checks
from .verdict import NO_CHANGES_CHECK, build_message
from .visual.report import visual_html, visual_markdown
from .visual.stage import VisualStage

__all__ = [
    "VerifyRequest",
    "VerifyOutcome",
    "VerificationActiveError",
    "verify_round",
    "next_round",
    "build_message",
    "NO_CHANGES_CHECK",
    "integrity_policy",
]

log = logging.getLogger("tianshu_mcp")
_T = TypeVar("_T")

_REPORT_RE = re.compile(r"^report-(\d+)\.(md|json)$")


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class VerificationActiveError(RuntimeError):
    """A verification of the same task is already running in this process (20-acceptance §3.0)."""


_active: set[str] = set()
_active_lock = threading.Lock()


@dataclass
class VerifyRequest:
    """Input of :func:`verify_round` (20-acceptance §3 request).

    Attributes:
        task_id: task or verify-record id.
        project_path: normalised project root.
        task_dir: ``<home>/tasks/<id>``: receives verify-N.log, report-N.md/json.
        round: requested 0-based round (raised past existing reports).
        baseline: pre-work baseline (None → captured now: a pure health check).
        home: data home (global acceptance layer).
        acceptance_override: the task's ``acceptanceOverride`` (raw dict).
        extra_checks: verify_task ``extraChecks``; ``checks_mode`` ``append``/``replace``.
        project_verify: projects.json ``verify`` entries.
        task_text: the task brief (extension-hint note).
        verify_command_timeout_ms: default per-check timeout, ms.
        verify_concurrency: server default check parallelism (1..4), overridden by the layers.
        should_stop: cancellation probe.
        agent_work: False when no agent task is being judged (a manual or scheduled verification of
            a project): baseline grading then never excuses a failure (policy forced to
            ``strict``), because "it already failed before" is no excuse for a health check.
        baseline_dir: directory holding the baseline's grading files (``baseline-state.json``,
            ``baseline-untracked/``, the ``baseline-checks.json`` cache and log); None → ``task_dir``.
            ``verify_task(baselineRef=<taskId>)`` passes that task's directory.
        agent_run: the agent's outcome for the report (exit code, duration, output tail, fatal line).
        pinned_rules: the acceptance rules as of the task's baseline (the agent's own edits to them
            never judge its work; see :mod:`.pinning`).
        target_tests: ``targetTests`` (issue 23): test ids or names that must exist, run and pass
            (the task's, or a ``verify_task`` call's own); empty → none named.
        holdout_checks: checks the agent never sees (issue 23 §5): the task's or verify record's
            ``holdout.json`` plus the project's registered ones
            (:func:`.integrity.holdout_store.load_holdout`); empty → none.
        agent_owned_paths: globs of untracked files the agent's CLI keeps for itself (its
            profile's ``ownedPaths``, issue 24): never counted as the agent's change.
    """

    task_id: str
    project_path: str
    task_dir: Path
    round: int
    baseline: Baseline | None
    home: Path
    acceptance_override: Mapping[str, Any] | None = None
    extra_checks: Sequence[AcceptanceCheck | CheckDef | Mapping[str, Any]] | None = None
    checks_mode: Literal["append", "replace"] | str = "append"
    task_text: str = ""
    verify_command_timeout_ms: int = 300_000
    verify_concurrency: int = 2
    should_stop: Callable[[], bool] | None = None
    project_verify: Sequence[AcceptanceCheck | CheckDef | Mapping[str, Any]] | None = None
    baseline_dir: Path | None = None
    agent_work: bool = True
    agent_run: Mapping[str, Any] | None = None
    pinned_rules: PinnedRules | None = None
    target_tests: Sequence[str] = ()
    holdout_checks: Sequence[HoldoutCheck] = ()
    agent_owned_paths: Sequence[str] = ()


@dataclass
class VerifyOutcome:
    """Result of :func:`verify_round`.

    ``report`` is the dict written to ``json_path``; ``failed_checks`` = names of failing mandatory
    checks (not passed, not skipped, not optional); ``blocking_issues`` = ``[{code, message}]``.
    """

    round: int
    passed: bool
    report: dict[str, Any]
    md_path: Path
    json_path: Path
    failed_checks: list[str] = field(default_factory=list)
    blocking_issues: list[dict[str, str]] = field(default_factory=list)
    baseline: Baseline | None = None


def next_round(task_dir: str | Path, requested: int) -> int:
    """``max(requested, highest existing report-N.(md|json) + 1)`` (20-acceptance §3.0)."""
    d = Path(task_dir)
    best = requested
    try:
        for p in d.iterdir():
            m = _REPORT_RE.match(p.name)
            if m:
                best = max(best, int(m.group(1)) + 1)
    except OSError:
        pass
    return best


def verify_round(req: VerifyRequest) -> VerifyOutcome:
    """Run one acceptance round and write its report (20-acceptance §3.0–§3.5, §5).

    Args:
        req: see :class:`VerifyRequest`.

    Returns:
        :class:`VerifyOutcome` (round actually used, verdict, report dict and file paths).

    Raises:
        VerificationActiveError: the same ``task_id`` is already being verified in this process.
        OSError: the report cannot be written (task dir not writable).

    A configuration error (any layer unreadable/invalid) does not raise: it becomes
    ``blockingIssues [{code: CONFIG_UNREADABLE|CONFIG_INVALID, message naming the file}]``, no
    command check runs, requireChanges is off and the round fails.
    """
    with _active_lock:
        if req.task_id in _active:
            raise VerificationActiveError(f"Verification already active: {req.task_id}")
        _active.add(req.task_id)
    try:
        return _verify(req)
    finally:
        with _active_lock:
            _active.discard(req.task_id)


def _verify(req: VerifyRequest) -> VerifyOutcome:
    task_dir = Path(req.task_dir)
    task_dir.mkdir(parents=True, exist_ok=True)
    rnd = next_round(task_dir, req.round)
    started_at = _now_iso()
    project = req.project_path
    default_timeout = req.verify_command_timeout_ms or 300_000

    # 2. baseline
    fresh_baseline = req.baseline is None
    git_failures: list[GitFailed] = []  # git refused: a blocking GIT_FAILED, never "clean"/"no changes"

    def git_guard(call: Callable[[], _T], default: _T) -> _T:
        try:
            return call()
        except GitFailed as exc:
            git_failures.append(exc)
            return default

    baseline = req.baseline if req.baseline is not None else git_guard(
        lambda: capture_baseline(project), Baseline(is_repo=False, message="git failed: no baseline"))

    # 3. resolve checks
    blocking: list[dict[str, str]] = []
    resolve_notes: list[str] = []
    resolved: ResolvedChecks | None = None
    try:
        resolved = resolve_checks(
            project,
            req.home,
            req.acceptance_override,
            extra_checks=req.extra_checks,
            checks_mode=req.checks_mode,
            project_verify=req.project_verify,
            pinned=req.pinned_rules,
        )
        resolve_notes = list(resolved.notes)
        log.info("acceptance config layers task=%s %s", req.task_id, summarize_resolved(resolved))
    except AcceptanceConfigError as exc:
        blocking.append({"code": exc.code.value, "message": exc.message})
        resolve_notes = [exc.message]
    except Exception as exc:  # noqa: BLE001 - surfaced as a blocking issue, never raised
        log.exception("resolving acceptance checks failed for %s", req.task_id)
        msg = _("resolving the acceptance configuration failed: {error}").format(error=exc)
        blocking.append({"code": ErrorCode.INTERNAL.value, "message": msg})
        resolve_notes = [msg]
    # 4. the visual snapshot: frozen at the first round, checked before anything runs (even when
    # visual acceptance is off: the agent may not edit its rules or baselines)
    visual = VisualStage(req.task_id, project, task_dir, Path(req.home), rnd,
                         resolved.visual if resolved is not None else None, req.should_stop)
    if not blocking and (issue := visual.integrity()) is not None:
        blocking.append(issue)
    require_changes = resolved.require_changes if resolved is not None and not blocking else False
    check_defs = resolved.checks if resolved is not None and not blocking else []
    concurrency = (
        resolved.verify_concurrency
        if resolved is not None and resolved.verify_concurrency is not None
        else req.verify_concurrency
    ) or 1
    baseline_checks = bool(resolved is not None and not blocking and resolved.baseline_checks)
    baseline_dir = Path(req.baseline_dir) if req.baseline_dir is not None else task_dir
    if baseline_checks and fresh_baseline and baseline.is_repo and load_baseline_state(baseline_dir) is None:
        # a pure health check: "now" is the pre-work state; record it before any check runs
        capture_baseline_state(project, baseline_dir)

    # 5. git-diff-check, always first
    checks: list[dict[str, Any]] = [git_guard(lambda: git_diff_check(project, baseline), {
        "name": GIT_CHECK_NAME, "cmd": "git diff --check", "passed": False, "durationMs": 0, "exitCode": None,
        "outputTail": "", "timeout": False, "reason": _("git failed (see the blocking issue)"), "aborted": False})]

    # 6. command checks (what they write into the work tree is not task output: see .check_outputs)
    log_path = task_dir / f"verify-{rnd}.log"
    git_ok = baseline.is_repo and not git_failures
    before = git_guard(lambda: snapshot(project), None) if git_ok and check_defs else None
    policy = integrity_policy(req, resolved, baseline, blocking)
    if policy is not IntegrityPolicy.OFF and (check_defs or req.holdout_checks):
        if fresh_baseline and load_baseline_state(baseline_dir) is None:
            capture_baseline_state(project, baseline_dir)  # a round without a task start: "now" is the baseline
        session: IntegritySession | None = IntegritySession(
            policy=policy, project=project, task_dir=task_dir, baseline_dir=baseline_dir, round_no=rnd,
            baseline=baseline, check_defs=check_defs, task_text=req.task_text, target_tests=req.target_tests,
            holdout=req.holdout_checks, agent_message=str((req.agent_run or {}).get("finalMessage")
                                                                  or (req.agent_run or {}).get("outputTail") or ""),
            default_timeout_ms=default_timeout, concurrency=concurrency, should_stop=req.should_stop)
    else:
        session = None
    integrity = IntegrityOutcome(report={"policy": policy.value, "notes": _integrity_off_notes(req, policy)})
    try:
        if session is not None:
            session.start()
        checks.extend(
            run_checks(session.main_defs() if session is not None else check_defs, project, log_path, default_timeout,
                       concurrency=concurrency, should_stop=req.should_stop,
                       tool_dirs=req.pinned_rules.tool_dirs if req.pinned_rules is not None else None,
                       extra_env=session.extra_env if session is not None else None)
        )
        if session is not None:
            integrity = session.finish(checks[1:], log_path)
    finally:
        if session is not None:
            session.close()
    for k in integrity.not_counted:
        checks[1 + k]["notCounted"] = True
    for k, note in integrity.check_notes.items():
        checks[1 + k]["integrityNote"] = note
    blocking.extend(integrity.blocking)
    if check_defs or session is not None:
        reap_orphans()  # a check's leftover cannot write after the checks were judged
    outputs = CheckOutputs()
    if git_ok:
        after = git_guard(lambda: snapshot(project), None)
        if after is not None:
            outputs = git_guard(
                lambda: attribute(ledger_path(req.home, project, after.root), project, baseline, before, after), outputs)

    # 6b. baseline grading (opt-in): the same checks on the pre-work baseline, in a temporary worktree
    grading: Grading | None = None
    if baseline_checks and resolved is not None:
        policy = resolved.baseline_policy if req.agent_work else "strict"
        if stop_requested(req.should_stop):
            grading = Grading({"enabled": True, "policy": policy, "checks": [], "tests": [],
                               "notes": [_("baseline grading skipped: the task was cancelled")]})
        elif check_defs:
            grading = grade_round(
                project=project,
                task_dir=baseline_dir,
                baseline=baseline,
                check_defs=check_defs,
                results=checks[1:],
                log_path=log_path,
                policy=policy,
                task_text=req.task_text,
                default_timeout_ms=default_timeout,
                concurrency=concurrency,
                should_stop=req.should_stop,
                run_defs=session.main_defs() if session is not None else None,
            )
            for k, c in enumerate(checks[1:]):
                if k in grading.classes:
                    c["baseline"] = grading.classes[k]
                if k in grading.not_counted:
                    c["notCounted"] = True
        else:
            grading = Grading({"enabled": True, "policy": policy, "checks": [], "tests": [],
                               "notes": [_("baseline grading: no command check to grade")]})

    if grading is not None:
        reap_orphans()  # nor a leftover of the checks run on the baseline

    # 7. the visual stage (when enabled), between integrity checks
    if not blocking and not stop_requested(req.should_stop) and (issue := visual.run()) is not None:
        blocking.append(issue)
    blocking.extend(visual.gates["blocking"])

    # 8. analysis
    try:
        analysis = analyze_changes(baseline, project, req.task_text, exclude_untracked=outputs.made,
                                   check_argvs=[list(d.cmd) for d in check_defs], owned_paths=req.agent_owned_paths)
    except GitFailed as exc:
        git_failures.append(exc)
        analysis = Analysis(warnings=[_("change analysis impossible: {error}").format(error=exc.message)])
    except Exception as exc:  # noqa: BLE001 - analysis is informational; never sink the round
        log.exception("change analysis failed for %s", req.task_id)
        analysis = Analysis(warnings=[_("change analysis failed: {error}").format(error=exc)])
    if git_ok:
        reap_orphans()  # git runs the repository's own filters; what they leave behind dies here too
    analysis.notes.extend(resolve_notes)
    if resolved is not None:
        analysis.warnings.extend(resolved.warnings)
    if grading is not None:
        analysis.notes.extend(_("baseline grading ({policy}): {note}").format(policy=grading.report["policy"], note=n)
                              for n in grading.report["notes"])
    analysis_json = analysis.to_json()

    by_checks = sorted(outputs.made & set(analysis.changed_files))
    if by_checks:
        analysis_json["warnings"].append(
            _("the checks modified tracked file(s) during verification (not counted as task output): {files}").format(
                files=", ".join(by_checks[:20])
                + (_(" … {n} more").format(n=len(by_checks) - 20) if len(by_checks) > 20 else "")))
    if outputs.earlier:
        analysis_json["notes"].append(
            _("file(s) the checks of an earlier verification wrote, unchanged since (not counted as task output): "
              "{files}").format(files=", ".join(outputs.earlier[:20])))
    if outputs.rewritten:
        analysis_json["notes"].append(
            _("the checks rewrote file(s) the task had changed (still the task's output): {files}").format(
                files=", ".join(outputs.rewritten[:20])))
    approved = visual.approved_files()  # a person's baseline approval is not the agent's work
    task_output = analysis.has_changes and not (
        not set(analysis.untracked_files) - approved and set(analysis.changed_files) <= outputs.made | approved
        and {sm.path for sm in analysis.submodules} <= outputs.made)
    if approved & (set(analysis.changed_files) | set(analysis.untracked_files)):
        analysis_json["notes"].append(_("approved visual baselines changed since the baseline (a person's approval, "
                                        "not counted as task output)"))

    # 9. zero-change gate (not when git failed: "no changes" would be a guess)
    if git_failures:
        seen: set[str] = set()
        for exc in git_failures:
            if exc.message not in seen:
                seen.add(exc.message)
                blocking.append({"code": ErrorCode.GIT_FAILED.value, "message": exc.message})
    elif baseline.is_repo and not task_output:
        if require_changes:
            checks.append(
                {
                    "name": NO_CHANGES_CHECK,
                    "cmd": "requireChanges gate",
                    "passed": False,
                    "durationMs": 0,
                    "exitCode": None,
                    "outputTail": _("fail-closed: zero file changes relative to the pre-work baseline"),
                    "timeout": False,
                    "reason": _("requireChanges is on by default, but no task output was detected"),
                }
            )
        else:
            analysis_json["notes"].append(
                _("requireChanges=false: zero changes relative to the pre-work baseline; reported only, not blocking.")
            )
    elif not baseline.is_repo and require_changes:
        analysis_json["notes"].append(
            _("requireChanges=true, but the project is not a git repository; the zero-change gate was skipped.")
        )

    # port: checks that cannot even start are a setup problem, not the agent's: block the round
    # (needs_attention) instead of sending the agent into rework for something it cannot fix
    for c in checks:
        if str(c.get("reason", "")).startswith(SPAWN_REASON_PREFIX) and not c.get("optional"):
            blocking.append({"code": ErrorCode.CHECK_NOT_RUNNABLE.value,
                             "message": _("check '{name}' cannot start ({reason}); fix the acceptance configuration").format(
                                 name=c["name"], reason=c["reason"][len(SPAWN_REASON_PREFIX):])})
    ran = [c for c in checks[1:] if not c.get("skipped") and c.get("name") != NO_CHANGES_CHECK]
    if not baseline.is_repo and not ran and not blocking:
        # port: nothing at all judged the work (no git evidence, no command check): fail closed
        blocking.append({"code": ErrorCode.NOTHING_VERIFIED.value,
                         "message": _("the project is not a git repository and no command check ran, so nothing "
                                      "could judge the work; add checks to {project}/.tianshu-mcp/acceptance.json").format(
                                          project=project)})
    elif baseline.is_repo and not ran and not blocking:
        analysis_json["warnings"].append(
            _("no command check is configured or derived for this project: only the git gates judged this round")
        )

    # 10. the final integrity check
    if not blocking and (issue := visual.integrity()) is not None:
        blocking.append(issue)

    # 11. verdict
    cancelled = stop_requested(req.should_stop) or any(c.get("aborted") for c in checks)
    failed = [
        c for c in checks
        if not c.get("passed") and not c.get("skipped") and not c.get("optional") and not c.get("notCounted")
    ]
    zero_test = [str(c["name"]) for c in checks if c.get("reason") == ZERO_TEST_REASON]
    passed = not cancelled and not blocking and not failed and not visual.gates["failed"]
    message = build_message(
        checks, analysis_json, blocking, cancelled, zero_test,
        [*(grading.bits if grading is not None else ()), *visual.message_bits()],
    )
    report: dict[str, Any] = {
        "round": rnd,
        "taskId": req.task_id,
        "projectPath": project,
        "startedAt": started_at,
        "finishedAt": _now_iso(),
        "passed": passed,
        "verdict": "passed" if passed else "cancelled" if cancelled else "failed",
        "checks": checks,
        "analysis": analysis_json,
        "files": {},
        "message": message,
    }
    if req.agent_run:
        report["agent"] = dict(req.agent_run)
    if blocking:
        report["blockingIssues"] = blocking
    if grading is not None:
        report["baselineGrading"] = grading.report
    report["integrity"] = integrity.report
    if visual.report is not None:
        report["visual"] = visual.report
    if not passed:
        report["repairDirectives"] = extract_repair_directives(report)
    md_path, json_path = write_report(task_dir, report,
                                      visual_section=visual_markdown(report, str(html_report_path(task_dir, rnd))),
                                      visual_html=visual_html(report, task_dir))
    log.info(
        "task %s round %s acceptance: %s (%d checks)", req.task_id, rnd, "passed" if passed else "failed", len(checks)
    )
    return VerifyOutcome(
        round=rnd,
        passed=passed,
        report=report,
        md_path=md_path,
        json_path=json_path,
        failed_checks=[str(c["name"]) for c in failed],
        blocking_issues=blocking,
        baseline=baseline,
    )


def integrity_policy(req: VerifyRequest, resolved: ResolvedChecks | None, baseline: Baseline,
                      blocking: Sequence[Mapping[str, str]]) -> IntegrityPolicy:
    """The round's ``testIntegrity`` (issue 23): the resolved layers' value for an agent's work on
    a repository with a baseline commit; ``off`` for a health check of a project (nothing to
    compare), a project that is not a repository, a baseline commit that is gone (the round is a
    ``GIT_FAILED`` then), or a round already blocked by its config."""
    if resolved is None or blocking or not req.agent_work or not baseline.is_repo or not baseline.head:
        return IntegrityPolicy.OFF
    if not run_git(["cat-file", "-e", f"{baseline.head}^{{commit}}"], req.project_path).ok:
        return IntegrityPolicy.OFF  # the baseline commit is gone: GIT_FAILED says so, nothing to compare
    return IntegrityPolicy(resolved.test_integrity)


def _integrity_off_notes(req: VerifyRequest, policy: IntegrityPolicy) -> list[str]:
    if policy is not IntegrityPolicy.OFF:
        return []
    if not req.agent_work:
        return [_("verification integrity: not an agent's work (a health check of the project)")]
    return [_("verification integrity is off for this round (testIntegrity off, no git baseline commit, or the "
              "round is blocked)")]

