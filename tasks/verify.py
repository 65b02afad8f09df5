"""Prefect task ``verify-round-{r}``: judge a round against the baseline (docs/acceptance.md §3)."""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from prefect import get_run_logger
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.states import Cancelled, Failed, State

from ..acceptance.baseline_warm import WarmSpec, start_in_child
from ..acceptance.config_model import AcceptanceCheck
from ..acceptance.engine import VerifyRequest, verify_round
from ..acceptance.git import Baseline
from ..acceptance.integrity.holdout_store import load_holdout, load_task_holdout
from ..acceptance.integrity.models import HoldoutCheck
from ..acceptance.integrity.reasons import is_agent_failure
from ..acceptance.pinning import load_pinned
from ..acceptance.runner import check_tag
from ..acceptance.visual.errors import VisualError, is_visual_code
from ..acceptance.visual.snapshot import freeze
from ..core.errors import TianshuError
from ..core.files import read_json_safe
from ..core.projects import ProjectRegistry
from ..core.record import TaskRecord
from ..core.settings import data_home, load_config
from .baseline import load_baseline
from .common import AGENT_PROFILE_FILE, load_task, step, stop_probe, store, work_path
from .results import AgentRun, IntegrityFields, UnsupportedClaim, Verdict

_UNSET: Any = object()


def preflight_acceptance(project_path: str, override: dict[str, Any] | None, task_dir: Path | None = None,
                         holdout_project: str | None = None) -> str | None:
    """Resolve the acceptance layers before the agent runs; return the coded error text of a
    broken layer (``[CONFIG_INVALID] …`` naming the file), or None when the config is usable.
    A task whose rules were pinned at its baseline (``task_dir``, a rework) is checked with those.
    With ``task_dir`` and ``holdout_project`` (the task's ``projectPath``), its holdout checks
    (:func:`load_holdout`) must be readable too: a damaged holdout file is never skipped."""
    from ..acceptance.config import AcceptanceConfigError, resolve_checks

    try:
        resolve_checks(project_path, data_home(), override, pinned=load_pinned(task_dir) if task_dir else None)
        if task_dir is not None and holdout_project is not None:
            load_holdout(task_dir, data_home(), holdout_project)
    except AcceptanceConfigError as exc:
        return f"[{exc.code.value}] {exc.message}"
    except TianshuError as exc:
        return f"[{exc.code.value}] {exc.message}"
    return None


def round_holdout(task_dir: Path, project_path: str, extra_dir: str | None = None) -> list[HoldoutCheck]:
    """The holdout checks of a round of the task in ``task_dir`` (``project_path``: its
    ``projectPath``, not its worktree): its own and the project's (:func:`load_holdout`), plus a
    verify record's own (``extra_dir``: the ``vfy_…`` directory of a ``verify_task(taskId)`` call
    that gave ``holdoutChecks``).

    Raises:
        TianshuError: CONFIG_INVALID naming a damaged holdout file.
    """
    checks = load_holdout(task_dir, data_home(), project_path)
    if extra_dir and Path(extra_dir) != task_dir:
        checks += [c for c in load_task_holdout(Path(extra_dir)) if c not in checks]
    return checks


def integrity_fields(report: dict[str, Any]) -> IntegrityFields:
    """``task.json`` fields from a round's ``report["integrity"]`` (docs/integrity.md): ``testIntegrity``
    (the policy: ``protect`` | ``allow-test-edits`` | ``off``) and ``unsupportedClaims``
    (``[{claim, why}]``). A field the report lacks is None, so recording the round clears the
    previous round's value. ``report`` is the round's report document (``report-<n>.json``, built
    by the acceptance engine as JSON; only its ``integrity`` section is read here)."""
    section = report.get("integrity")
    if not isinstance(section, dict):
        return IntegrityFields()
    policy = section.get("policy")
    claims = section.get("unsupportedClaims")
    kept = None
    if isinstance(claims, list):
        kept = [UnsupportedClaim(claim=str(c.get("claim", "")), why=str(c.get("why", "")))
                for c in claims if isinstance(c, dict)]
    return IntegrityFields(testIntegrity=policy if isinstance(policy, str) and policy else None, unsupportedClaims=kept)


def freeze_visual(task_dir: Path, project_path: str) -> str | None:
    """Freeze the task's visual snapshot at its start (docs/visual.md §9): the acceptance rules and
    approved baselines the agent's work will be judged against. Returns the coded error text when
    the frozen snapshot is unreadable (``[SNAPSHOT_INVALID] …``), else None."""
    try:
        freeze(task_dir, project_path)
    except VisualError as exc:
        return f"[{exc.code}] {exc.message}"
    return None


def artifact_key(task_id: str, what: str) -> str:
    """Prefect artifact keys allow lowercase letters, digits and dashes only."""
    return f"{task_id}-{what}".lower().replace("_", "-")


def publish_report_artifacts(task_id: str, report: dict[str, Any], md_path: Path) -> None:
    """Attach the round's markdown report and a table of its checks to the current flow run.

    Each is created in a thread of this run's context (:func:`publish_aside`): one API call each, 60 ms
    on a server busy with the run's events, were both on the way from the checks to the round's
    verdict (design note 77). The flow joins them (:func:`join_artifacts`) before it returns."""
    rnd = report.get("round")
    try:
        markdown = md_path.read_text(encoding="utf-8")
    except OSError:
        markdown = None  # the files on disk are the record; artifacts are a view
    if markdown is not None:
        publish_aside(create_markdown_artifact, key=artifact_key(task_id, f"report-{rnd}"), markdown=markdown,
               description=f"Acceptance report, round {rnd}: {report.get('verdict')}")
    rows = []
    for c in report.get("checks", []):
        tests = c.get("tests") or {}
        rows.append({
            "check": c.get("name"),
            "status": check_tag(c),
            "optional": bool(c.get("optional")),
            "durationMs": c.get("durationMs"),
            "exitCode": c.get("exitCode"),
            "tests": (f"{tests.get('passed', 0)} passed, {tests.get('failed', 0)} failed, "
                      f"{tests.get('skipped', 0)} skipped") if tests else "",
            "reason": c.get("reason") or "",
        })
    publish_aside(create_table_artifact, key=artifact_key(task_id, f"checks-{rnd}"), table=rows,
           description=f"Checks of round {rnd}")


_PUBLISHING: list[threading.Thread] = []
"""Artifact threads of this flow-run process not joined yet (:func:`join_artifacts`)."""


def publish_aside(create: Callable[..., Any], **kwargs: Any) -> None:
    """``create(**kwargs)`` (a Prefect artifact call: the brief, a round's report) in a daemon
    thread carrying this context (the flow and task run it belongs to), so its API call is not
    on the flow's path (design notes 66, 77); :func:`join_artifacts` waits for it. A failure is
    dropped: the files on disk are the record, artifacts are a view."""

    def publish() -> None:
        try:
            create(**kwargs)
        except Exception:  # noqa: BLE001
            pass

    thread = threading.Thread(target=contextvars.copy_context().run, args=(publish,), name="artifact",
                              daemon=True)
    thread.start()
    _PUBLISHING.append(thread)


def join_artifacts(timeout_s: float) -> None:
    """Wait ≤ ``timeout_s`` s in all for the artifacts still being published (a flow
    calls it before it returns, so they belong to a run that is still running)."""
    deadline = time.monotonic() + timeout_s
    while _PUBLISHING:
        _PUBLISHING.pop(0).join(max(0.0, deadline - time.monotonic()))


def _request(task_id: str, meta: TaskRecord, tdir: Path, round: int, baseline: Baseline,  # noqa: A002
             extra_checks: list[AcceptanceCheck] | None = None, checks_mode: str = "append",
             acceptance_override: Any = _UNSET, baseline_dir: str | None = None, agent_work: bool = True,
             agent_run: AgentRun | None = None, target_tests: list[str] | None = None,
             holdout_dir: str | None = None) -> VerifyRequest:
    """The :class:`VerifyRequest` of a round of task ``task_id`` (``meta``: its record; the other
    arguments: :func:`verify_round_task`'s). Raises what :func:`round_holdout` raises."""
    cfg = load_config()
    if meta.projectPath is None:
        raise KeyError("projectPath")
    project = meta.projectPath
    try:
        entry = ProjectRegistry(data_home()).get(project) or {}
    except TianshuError:
        entry = {}  # a corrupt projects.json must not sink verification; the layers still apply
    targets = target_tests if target_tests is not None else meta.targetTests
    holdout = round_holdout(tdir, project, holdout_dir)  # a damaged file raises: never skipped
    return VerifyRequest(
        task_id=task_id,
        project_path=work_path(meta),
        task_dir=tdir,
        round=round,
        baseline=load_baseline(baseline),
        home=data_home(),
        acceptance_override=meta.acceptanceOverride if acceptance_override is _UNSET else acceptance_override,
        extra_checks=extra_checks,
        checks_mode=checks_mode,
        task_text=meta.task or "",
        verify_command_timeout_ms=cfg.verify_command_timeout_ms,
        verify_concurrency=cfg.verify_concurrency,
        should_stop=stop_probe(tdir),
        project_verify=entry.get("verify") if isinstance(entry.get("verify"), list) else None,
        **({"baseline_dir": Path(baseline_dir)} if baseline_dir else {}),
        agent_work=agent_work,
        agent_run=agent_run.model_dump() if agent_run is not None else None,
        pinned_rules=load_pinned(tdir) if agent_work else None,
        target_tests=tuple(t for t in targets or () if isinstance(t, str)),
        holdout_checks=tuple(holdout),
        agent_owned_paths=tuple(_owned_paths(tdir)) if agent_work else (),
        # the brief of the agent's round judged (written by the round's driver, adapters.round)
        brief_file=tdir / f"prompt-{round}.txt" if agent_work and agent_run is not None else None,
    )


def _owned_paths(tdir: Path) -> list[str]:
    """The ``ownedPaths`` of the task's agent profile snapshot ([] without one)."""
    raw = read_json_safe(tdir / AGENT_PROFILE_FILE)
    owned = raw.get("ownedPaths") if isinstance(raw, dict) else None
    return [g for g in owned if isinstance(g, str) and g] if isinstance(owned, list) else []


@dataclass
class _WarmRun:
    """A task's early baseline run: the thread that starts it (the fork request), then the
    thread that watches its child (:func:`..acceptance.baseline_warm.start_in_child`), and the
    event that stops it."""

    starter: threading.Thread
    stop: threading.Event
    watcher: threading.Thread | None = None

    def alive(self) -> bool:
        return self.starter.is_alive() or (self.watcher is not None and self.watcher.is_alive())


_warm_runs: dict[str, _WarmRun] = {}
_warm_lock = threading.Lock()


def start_baseline_run(task_id: str, baseline: Baseline) -> None:
    """Start the task's baseline run in a child process of the flow-run process, while the agent
    works (:func:`..acceptance.baseline_warm.start_in_child`: the test checks on the baseline
    worktree, cached for the rounds). At most one per task; it ends with :func:`stop_baseline_run`
    (a cancel reaches it through the flow's end). Never raises.

    The run's request is built here, before the agent starts (it reads the task's files and
    the project's registry entry); the child is asked for in a thread, so the agent's start does
    not wait for the fork (design note 80). Which of the baseline run and the first round's own
    check takes the baseline lock first does not matter: the other reads its cache."""
    try:
        st = store()
        meta = load_task(task_id)
        tdir = st.dir(task_id)
        spec = WarmSpec.of(_request(task_id, meta, tdir, 0, baseline))
    except Exception as exc:  # noqa: BLE001 - the first round runs the baseline itself
        logging.getLogger("tianshu_mcp").warning("the early baseline run of %s was not started: %s", task_id, exc)
        return
    with _warm_lock:
        if task_id in _warm_runs and _warm_runs[task_id].alive():
            return
        run = _WarmRun(threading.Thread(target=_start_warm, args=(task_id, spec), daemon=True,
                                        name=f"baseline-run-start-{task_id}"), threading.Event())
        _warm_runs[task_id] = run
    run.starter.start()


def _start_warm(task_id: str, spec: WarmSpec) -> None:
    """The starter thread of :func:`start_baseline_run`: fork the child unless the run was
    stopped meanwhile (a child forked as it stops sees the stop at its watcher's first look)."""
    with _warm_lock:
        run = _warm_runs.get(task_id)
    if run is None or run.stop.is_set():
        return
    try:
        run.watcher = start_in_child(spec, run.stop)
    except Exception as exc:  # noqa: BLE001 - the first round runs the baseline itself
        logging.getLogger("tianshu_mcp").warning("the early baseline run of %s was not started: %s", task_id, exc)


def stop_baseline_run(task_id: str, timeout_s: float = 60.0) -> None:
    """Stop the task's early baseline run (if any) and wait up to ``timeout_s`` s for its checks'
    processes and worktree to be gone (0: do not wait; the child ends within seconds by itself,
    :func:`..acceptance.baseline_warm.start_in_child`)."""
    with _warm_lock:
        run = _warm_runs.pop(task_id, None)
    if run is None:
        return
    run.stop.set()
    if timeout_s > 0:
        deadline = time.monotonic() + timeout_s
        run.starter.join(timeout_s)
        if run.watcher is not None:
            run.watcher.join(max(0.0, deadline - time.monotonic()))


@step("verify")
def verify_round_task(
    task_id: str,
    round: int,  # noqa: A002
    baseline: Baseline,
    extra_checks: list[AcceptanceCheck] | None = None,
    checks_mode: str = "append",
    acceptance_override: Any = _UNSET,
    baseline_dir: str | None = None,
    agent_work: bool = True,
    agent_run: AgentRun | None = None,
    target_tests: list[str] | None = None,
    holdout_dir: str | None = None,
) -> Verdict | State:
    """Run one acceptance round for ``task_id`` and publish its report artifacts.

    ``acceptance_override`` defaults to the task's stored ``acceptanceOverride``;
    ``baseline_dir`` is where baseline-aware grading finds the baseline state (default: the
    task's own dir; a verification against another task's baseline passes that task's dir);
    ``agent_work`` is False for a verification of a project with no task (never excuse failures;
    the project's acceptance rules are read as they are now, not as pinned at the baseline);
    ``extra_checks`` are a verify_task call's ``extraChecks`` (appended, or replacing the configured
    checks with ``checks_mode="replace"``); ``agent_run`` (:class:`~tianshu_mcp.tasks.results.AgentRun`) puts the agent's
    outcome in the report; ``target_tests`` (a verify_task call's ``targetTests``) replaces the
    task's stored ``targetTests``; ``holdout_dir`` is a verify record's directory whose
    ``holdout.json`` adds to the task's and the project's holdout checks (:func:`round_holdout`).

    Returns:
        The round's :class:`~tianshu_mcp.tasks.results.Verdict`; a round that did not
        pass returns it as the data of a ``Failed`` state (``Cancelled`` when a cancel stopped it), so the task run is Failed in the UI
        while the flow goes on (docs/lifecycle.md §7). Call it through
        :func:`run_verify_round`.
    """
    from ..acceptance.report import summarize_report

    st = store()
    meta = load_task(task_id)
    tdir = st.dir(task_id)
    outcome = verify_round(_request(task_id, meta, tdir, round, baseline, extra_checks, checks_mode,
                                    acceptance_override, baseline_dir, agent_work, agent_run, target_tests,
                                    holdout_dir))
    report = outcome.report
    analysis = report.get("analysis") or {}
    diff = analysis.get("diffstat") or {}
    publish_report_artifacts(task_id, report, outcome.md_path)
    _log_checks(report)
    blocking = [i for i in outcome.blocking_issues if not is_agent_failure(i.get("code"))]
    own = [i for i in outcome.blocking_issues if is_agent_failure(i.get("code"))]
    cancelled = not outcome.passed and report.get("verdict") == "cancelled"
    verdict = Verdict(
        round=outcome.round, passed=outcome.passed, md_path=str(outcome.md_path), json_path=str(outcome.json_path),
        html_path=(report.get("files") or {}).get("html"), failed_checks=list(outcome.failed_checks),
        # the agent's own failures (TAMPERING, TESTS_REMOVED, TARGET_FAILED, HOLDOUT_FAILED) fail the
        # round like a failing check and are reworked; the rest block it for a person
        blocking_issues=blocking, integrity_issues=own,
        changed_files=list(analysis.get("changedFiles") or []) + list(analysis.get("untrackedFiles") or []),
        diffstat=f"+{diff.get('totalAdd', 0)} -{diff.get('totalDel', 0)}",
        message=report.get("message", ""), summary=summarize_report(report),
        # a visual block (no baseline approved, rules or baselines edited …): a person acts, then a
        # rework re-verifies before any agent round (docs/visual.md §6.5, pendingVisualVerification)
        visual_blocked=any(is_visual_code(str(i.get("code"))) for i in outcome.blocking_issues),
        integrity=integrity_fields(report), cancelled=cancelled)
    if outcome.passed:
        return verdict
    if cancelled:  # stopped by a cancel: no verdict on the work
        return Cancelled(message=f"round {outcome.round} stopped by a cancel", data=verdict)
    failed = ", ".join([*verdict.failed_checks, *(i.code for i in verdict.integrity_issues)]) or ", ".join(
        i.code for i in verdict.blocking_issues)
    return Failed(message=f"round {outcome.round} did not pass" + (f": {failed}" if failed else ""), data=verdict)


def _log_checks(report: dict[str, Any]) -> None:
    """One flow-run log line per check: verdict, exit code, tests counted, duration (ms); a
    failing check at WARNING, the others at INFO."""
    logger = get_run_logger()
    for c in report.get("checks", []):
        verdict = check_tag(c)
        tests = c.get("tests") or {}
        counted = (f", tests {tests.get('passed', 0)} passed / {tests.get('failed', 0)} failed / "
                   f"{tests.get('skipped', 0)} skipped") if tests else ""
        why = f" — {str(c.get('reason'))[:200]}" if c.get("reason") and verdict != "PASS" else ""
        code = f"exit code {c.get('exitCode')}" if c.get("exitCode") is not None else "no command"
        # a failing check is what a person reading the run looks for: WARNING, the rest INFO
        logger.log(logging.WARNING if verdict == "FAIL" else logging.INFO, "check %s: %s (%s%s) in %s ms%s",
                   c.get("name"), verdict, code, counted, c.get("durationMs"), why)


def run_verify_round(task_run_name: str, *args: Any, **kwargs: Any) -> Verdict:
    """Run :func:`verify_round_task` as task run ``task_run_name`` and return its verdict,
    whether the round passed (Completed) or not (Failed/Cancelled with the verdict as data).

    Raises:
        Exception: whatever the task run raised (a crash of the verification itself).
    """
    state = verify_round_task.with_options(task_run_name=task_run_name)(*args, return_state=True, **kwargs)
    value = state.result(raise_on_failure=False)
    if isinstance(value, BaseException):
        raise value
    if not isinstance(value, Verdict):  # pragma: no cover - the task returns a Verdict or a Failed(Verdict)
        raise RuntimeError(f"{task_run_name} ended {state.type.value} without a verdict")
    return value
