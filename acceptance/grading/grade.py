"""Baseline-aware grading (SWE-bench's FAIL_TO_PASS / PASS_TO_PASS idea), opt-in.

When an acceptance layer sets ``baselineChecks: true``, the same command checks also run once per
task on the **pre-work baseline**, in a temporary git worktree, and every check (and every test id
a runner reports) is classified after the agent's work:

============== ===========================================================================
``passing``    passes now (and did not fail at baseline)
``fixed``      failed at baseline, passes now
``regression`` passed at baseline, fails now
``still_failing`` failed at baseline, fails now
``new_failure`` fails now and did not exist at baseline (new check, new test id), or the baseline
               could not say (its run timed out, could not start, ran no test)
============== ===========================================================================

``baselinePolicy`` (see :data:`~tianshu_mcp.acceptance.config.BASELINE_POLICIES`) decides which
failing mandatory checks still fail the round; the others are reported as *not counted*.

Baseline reproduction: :func:`capture_baseline_state` (called before the agent starts) records
``git stash create`` of the tracked dirty state (run on a *copy* of the index, so the user's index,
worktree and stash list are untouched; only unreferenced objects are written) and copies the
pre-existing untracked files into ``<taskDir>/baseline-untracked/`` (≤ 50 MiB). At grading time
``git worktree add --detach <tmp> <head>`` + ``git read-tree --reset -u <stash>`` + the copies
rebuild the pre-work tree; the worktree is always removed afterwards. Without a stored state
the dirty files that are still byte-identical to their baseline hash are copied from the project
(the others cannot be reproduced, and a note says so).

Files in the task dir: ``baseline-state.json``, ``baseline-untracked/``, ``baseline-checks.json``
(the cached baseline results, reused by later rounds: a check runs at most once per task on the
baseline), ``baseline-checks.log``.

Modules (imports point one way, down this list; this one re-exports their public names):

* this module: classification and the verdict policy (:func:`grade_round`, :func:`classify`);
* :mod:`.baseline_runs`: the baseline runs in a temporary worktree and their cache;
* :mod:`.state`: the baseline state captured before the agent starts;
* :mod:`.ids`: test ids parsed from a check's output.

Plain Python: no Prefect, no adapters. Never modifies the project's sources, index, refs or stash.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ...core.i18n import _
from ..config import BASELINE_POLICIES, DEFAULT_BASELINE_POLICY, CheckDef
from ..git import Baseline
from .ids import TestIds, parse_test_ids
from .state import (
    STATE_FILE,
    UNTRACKED_CAP_BYTES,
    UNTRACKED_DIR,
    capture_baseline_state,
    load_baseline_state,
    maybe_capture_baseline_state,
)
from .baseline_runs import (
    CACHE_FILE,
    LOG_FILE,
    WORKTREE_PREFIX,
    check_key,
    outputs_from_log,
    check_status,
    log_sections,
    run_baseline_checks,
)

__all__ = [
    "TestIds",
    "Grading",
    "parse_test_ids",
    "capture_baseline_state",
    "maybe_capture_baseline_state",
    "load_baseline_state",
    "run_baseline_checks",
    "grade_round",
    "classify",
    "is_targeted",
    "log_sections",
    "STATE_FILE",
    "CACHE_FILE",
    "LOG_FILE",
    "UNTRACKED_DIR",
    "UNTRACKED_CAP_BYTES",
    "WORKTREE_PREFIX",
]

log = logging.getLogger("tianshu_mcp")

MAX_TEST_ENTRIES = 200
"""``baselineGrading.tests`` lists at most this many entries (a note gives the rest's count)."""


# --------------------------------------------------------------------------------------------
# Classification and the verdict policy
# --------------------------------------------------------------------------------------------

_FAILING = ("failed", "timeout", "error", "no-tests")


def classify(before: str | None, after: str) -> str:
    """Classification of a check from its baseline and current status.

    ``before`` in ``passed|failed|timeout|error|no-tests|skipped`` or None (absent at baseline);
    ``after`` likewise (not None). Returns ``passing|fixed|regression|still_failing|new_failure``.
    """
    if after not in _FAILING:
        return "fixed" if before == "failed" else "passing"
    if before == "passed":
        return "regression"
    if before == "failed":
        return "still_failing"
    return "new_failure"


def _targets(test_id: str) -> list[str]:
    """Strings whose presence in the task text targets ``test_id``: the id, its file (path and
    base name) and its test name (last ``::``/``/``/``.`` component, parameters stripped)."""
    out = [test_id]
    file_part = test_id.split("::", 1)[0]
    if file_part != test_id:
        out.append(file_part)
        out.append(os.path.basename(file_part))
    last = re.split(r"::|/| > |\.", test_id)[-1]
    last = re.sub(r"\[.*\]$", "", last).strip()
    if len(last) >= 4:
        out.append(last)
    return [t for t in dict.fromkeys(out) if t]


def is_targeted(test_id: str, task_text: str) -> bool:
    """True when the task text names the test (id, file or test name, on token boundaries)."""
    if not task_text:
        return False
    for t in _targets(test_id):
        if re.search(rf"(?<![\w./-]){re.escape(t)}(?![\w/-])", task_text):
            return True
    return False


def _check_targeted(name: str, task_text: str) -> bool:
    return bool(task_text) and re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", task_text, re.I) is not None


@dataclass
class Grading:
    """Outcome of :func:`grade_round`.

    Attributes:
        report: ``report["baselineGrading"]`` (``{enabled, policy, checks, tests, notes}``).
        not_counted: indices (into the graded results) of failing mandatory checks the policy does
            not count.
        bits: message fragments (regressions, new failures, still failing not counted/counted).
        classes: classification per graded result index.
    """

    report: dict[str, Any]
    not_counted: list[int] = field(default_factory=list)
    bits: list[str] = field(default_factory=list)
    classes: dict[int, str] = field(default_factory=dict)


def _skipped(policy: str, note: str) -> Grading:
    return Grading({"enabled": True, "policy": policy, "checks": [], "tests": [], "notes": [note]})


def grade_round(
    *,
    project: str | os.PathLike[str],
    task_dir: str | os.PathLike[str],
    baseline: Baseline,
    check_defs: Sequence[CheckDef],
    results: Sequence[Mapping[str, Any]],
    log_path: str | os.PathLike[str],
    policy: str = DEFAULT_BASELINE_POLICY,
    task_text: str = "",
    default_timeout_ms: int = 300_000,
    concurrency: int = 1,
    should_stop: Callable[[], bool] | None = None,
    run_defs: Sequence[CheckDef] | None = None,
) -> Grading:
    """Grade this round's command checks against their baseline runs.

    Args:
        project: project root.
        task_dir: directory of the baseline's files (state, untracked copies, cache, baseline log):
            the task directory, or the directory of the task whose baseline is used.
        baseline: the pre-work baseline.
        check_defs: the command checks of the round; ``results`` their CheckResults, same order.
        log_path: this round's ``verify-<round>.log`` (full outputs, for test ids).
        policy: ``baselinePolicy``.
        task_text: the task brief (targeting).
        default_timeout_ms, concurrency, should_stop: as for the round's own checks.
        run_defs: the commands as the round ran them (with verification's id-listing flags), to
            find their output in the log; default ``check_defs``.

    Returns:
        :class:`Grading`. Never raises; when grading is impossible (not a repository, unborn
        HEAD) the report says why and nothing is excused.
    """
    policy = policy if policy in BASELINE_POLICIES else DEFAULT_BASELINE_POLICY
    if not baseline.is_repo:
        return _skipped(policy, _("baseline grading skipped: the project is not a git repository"))
    if not baseline.head:
        return _skipped(policy, _("baseline grading skipped: the repository has no commit at baseline (unborn HEAD)"))
    try:
        return _grade(Path(project), Path(task_dir), baseline, check_defs, results, Path(log_path), policy,
                      task_text, default_timeout_ms, concurrency, should_stop, run_defs or check_defs)
    except Exception as exc:  # noqa: BLE001 - grading never sinks the round; nothing is excused
        log.exception("baseline grading failed")
        return _skipped(policy, _("baseline grading failed, every failing check counts: {error}").format(error=exc))


def _grade(
    project: Path,
    tdir: Path,
    baseline: Baseline,
    check_defs: Sequence[CheckDef],
    results: Sequence[Mapping[str, Any]],
    log_path: Path,
    policy: str,
    task_text: str,
    default_timeout_ms: int,
    concurrency: int,
    should_stop: Callable[[], bool] | None,
    run_defs: Sequence[CheckDef],
) -> Grading:
    to_run = [d for d, r in zip(check_defs, results) if not r.get("skipped")]
    entries, notes = run_baseline_checks(project, tdir, baseline, to_run, default_timeout_ms, concurrency, should_stop)
    outputs = outputs_from_log(log_path, run_defs, results)
    g = Grading({"enabled": True, "policy": policy, "checks": [], "tests": [], "notes": list(notes)})
    tests: list[dict[str, Any]] = []
    regress: list[str] = []
    new: list[str] = []
    excused: list[str] = []
    still_counted: list[str] = []
    for i, (d, r) in enumerate(zip(check_defs, results)):
        after = check_status(r)
        if after == "skipped":
            continue
        entry = entries.get(check_key(d))
        before = entry.get("status") if entry else None
        cls = classify(before, after)
        mandatory = not d.optional
        row: dict[str, Any] = {"name": d.name, "before": before or "absent", "after": after, "classification": cls}
        if not mandatory:
            row["optional"] = True
        now_ids = parse_test_ids(outputs[i], list(d.cmd)) if after in ("passed", "failed") else None
        base_ids = TestIds.from_json(entry.get("tests")) if entry else None
        per_test = _classify_tests(d.name, now_ids, base_ids, before, project, task_text)
        tests.extend(per_test)
        if after in _FAILING:
            counted, why = _decide(policy, before, after, r, entry, now_ids, base_ids, per_test, d.name, task_text)
            row["counted"] = counted if mandatory else False
            if why:
                row["note"] = why
            by_cls: dict[str, list[str]] = {"regression": [], "new_failure": [], "still_failing": []}
            for t in per_test:
                by_cls.get(t["classification"], []).append(t["id"])
            if mandatory:
                if cls == "regression" or by_cls["regression"]:
                    regress.append(_label(d.name, by_cls["regression"]))
                if cls == "new_failure" or by_cls["new_failure"]:
                    new.append(_label(d.name, by_cls["new_failure"]))
                if not counted:
                    g.not_counted.append(i)
                    excused.append(_label(d.name, by_cls["still_failing"]))
                elif cls == "still_failing" and not by_cls["regression"] and not by_cls["new_failure"]:
                    still_counted.append(_label(d.name, by_cls["still_failing"]) + (f" ({why})" if why else ""))
        g.report["checks"].append(row)
        g.classes[i] = cls
    if len(tests) > MAX_TEST_ENTRIES:
        g.report["notes"].append(_("{n} more test entries not listed").format(n=len(tests) - MAX_TEST_ENTRIES))
        tests = tests[:MAX_TEST_ENTRIES]
    g.report["tests"] = tests
    sep = _("; ")
    if regress:
        g.bits.append(_("regressions relative to the pre-work baseline: {checks}").format(checks=sep.join(regress)))
    if new:
        g.bits.append(_("new failures (not present at baseline): {checks}").format(checks=sep.join(new)))
    if still_counted:
        g.bits.append(_("still failing before the task, counted: {checks}").format(checks=sep.join(still_counted)))
    if excused:
        g.bits.append(_("still failing before the task (not counted): {checks}").format(checks=sep.join(excused)))
    g.report["notes"] = list(dict.fromkeys(g.report["notes"]))
    return g


def _label(name: str, ids: Sequence[str]) -> str:
    if not ids:
        return name
    shown = ", ".join(ids[:5]) + (_(", +{n} more").format(n=len(ids) - 5) if len(ids) > 5 else "")
    return f"{name} ({shown})"


def _classify_tests(
    check: str, now: TestIds | None, base: TestIds | None, before: str | None, project: Path, task_text: str
) -> list[dict[str, Any]]:
    """Per-test rows: every failing id (``regression``/``still_failing``/``new_failure``) and every
    baseline failure that passes now (``fixed``). Passing tests are not listed."""
    if now is None:
        return []
    rows: list[dict[str, Any]] = []
    base_failed = set(base.failed_ids) if base else set()
    base_passed = set(base.passed_ids) if base else set()
    for tid in dict.fromkeys(now.failed_ids):
        if tid in base_failed:
            cls = "still_failing"
        elif tid in base_passed:
            cls = "regression"
        else:
            cls = "new_failure"
        rows.append({"check": check, "id": tid, "classification": cls, "targeted": is_targeted(tid, task_text)})
    now_failed = set(now.failed_ids)
    now_passed = set(now.passed_ids)
    for tid in dict.fromkeys(base.failed_ids if base else []):
        if tid in now_failed:
            continue
        if tid in now_passed or (not now.passed_ids and (project / tid.split("::", 1)[0]).exists()):
            rows.append({"check": check, "id": tid, "classification": "fixed", "targeted": is_targeted(tid, task_text)})
    return rows


def _decide(
    policy: str,
    before: str | None,
    after: str,
    result: Mapping[str, Any],
    entry: Mapping[str, Any] | None,
    now: TestIds | None,
    base: TestIds | None,
    per_test: Sequence[Mapping[str, Any]],
    name: str,
    task_text: str,
) -> tuple[bool, str]:
    """Whether a failing check counts against the round under ``policy``, and why (or why not)."""
    if policy == "strict":
        return True, ""
    if before != "failed":
        if before in ("timeout", "error", "no-tests"):
            return True, _("the baseline run ended with {status}: not comparable").format(status=before)
        return True, ""
    if after != "failed":
        return True, _("the check ended with {status} now").format(status=after)
    failing = [t for t in per_test if t["classification"] != "fixed"]
    if now is not None and now.failed_ids:
        if base is None or not (base.failed_ids or base.passed_ids):
            return True, _("the baseline run reported no test ids to compare")
        if any(t["classification"] != "still_failing" for t in failing):
            return True, ""
        if not now.complete:
            return True, _("not every failure has a test id")
        if policy != "regressions-only" and any(t["targeted"] for t in failing):
            return True, _("targeted by the task")
        return False, _("every failing test already failed at baseline")
    # no test ids now: compare at check level
    if now is not None and (now.failed_count or 0) > 0:
        return True, _("failures without test ids")
    if base is not None and base.failed_ids:
        return True, _("the baseline run reported failing tests, this run none")
    if policy == "regressions-only":
        return False, _("failed at baseline too (check level)")
    if _check_targeted(name, task_text):
        return True, _("targeted by the task")
    same = entry is not None and entry.get("exitCode") is not None and entry.get("exitCode") == result.get("exitCode")
    if not same:
        return True, _("exit code differs from the baseline run")
    return False, _("failed at baseline too with the same exit code (check level, no test ids)")
