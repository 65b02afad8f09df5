"""Flakes are named, never laundered (docs/integrity.md §6).

A test check that failed is run up to :data:`~.judge.FLAKE_RERUNS` more times on the same tree
(a re-run that fails exactly the same tests ends the re-runs: the failure reproduced). A failing
test that passes in a re-run is *flaky now*. A red that turns green only on retry never
makes a round pass, unless every failing test of the check was already flaky at the baseline: seen
both failing and passing across the baseline's runs (the cached one, and fresh re-runs on a new
baseline worktree when the cached one did not see it fail). The report lists every flaky test
either way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from ..config import CheckDef
from ..git import Baseline
from ..grading.ids import TestIds, parse_test_ids
from ..grading.baseline_runs import outputs_from_log, check_status, rerun_on_baseline
from ..runner import run_checks
from .inventory import Evidence

__all__ = ["FlakeVerdict", "judge_flakes", "CHECK_LEVEL"]

CHECK_LEVEL = "*"
"""The "id" of a failure without test ids (the whole check)."""


@dataclass
class FlakeVerdict:
    """Of one failing check on one tree.

    Attributes:
        flaky: failing ids that passed in a re-run (:data:`CHECK_LEVEL` for the whole check).
        at_baseline: those of them that were flaky at the baseline too.
        excused: every failure was flaky now and at the baseline: the failure does not count.
    """

    flaky: list[str] = field(default_factory=list)
    at_baseline: list[str] = field(default_factory=list)
    excused: bool = False


def _outcomes(runs: list[tuple[str, TestIds | None]]) -> tuple[set[str], set[str]]:
    failed: set[str] = set()
    passed: set[str] = set()
    for status, ids in runs:
        if ids is not None:
            failed |= set(ids.failed_ids)
            passed |= set(ids.passed_ids)
        if status == "passed":
            passed.add(CHECK_LEVEL)
        elif status == "failed":
            failed.add(CHECK_LEVEL)
    return failed, passed


def _entry_runs(entry: Mapping[str, Any] | None) -> list[tuple[str, TestIds | None]]:
    if not entry:
        return []
    runs = [(str(entry.get("status")), TestIds.from_json(entry.get("tests")))]
    runs += [(str(r.get("status")), TestIds.from_json(r.get("tests"))) for r in entry.get("reruns") or []]
    return runs


def judge_flakes(check: CheckDef, cwd: Path, first: Evidence, log_path: Path, timeout_ms: int,
                 should_stop: Callable[[], bool] | None, reruns: int, extra_env: Mapping[str, str] | None = None,
                 *, base_entry: Mapping[str, Any] | None,
                 project: Path, baseline_dir: Path, baseline: Baseline, base_def: CheckDef,
                 wt: str | None = None) -> FlakeVerdict:
    """Re-run a failed check and decide whether its failure is an excused, known flake.

    Args:
        check: the command as run on ``cwd``; ``first``: its first run's evidence.
        log_path: where the re-runs' output goes.
        base_entry: the check's cached baseline entry; ``base_def``: its definition (for fresh
            baseline re-runs, in a new worktree of ``project`` from ``baseline_dir``'s state).
        wt: the worktree path to rewrite to ``project`` in outputs (a pristine tree).
        extra_env: added to the re-runs' environment (as for the round's runs).

    Returns:
        :class:`FlakeVerdict`. Never raises (a re-run that cannot start is simply not a pass).
    """
    failing = set(first.ids.failed_ids) if first.ids and first.ids.failed_ids else {CHECK_LEVEL}
    runs: list[tuple[str, TestIds | None]] = []
    for _k in range(reruns):
        res = run_checks([check], cwd, log_path, timeout_ms, should_stop=should_stop, extra_env=extra_env)[0]
        text = outputs_from_log(log_path, [check], [res], wt=wt, project=str(project) if wt else None)[0]
        st = check_status(res)
        ids = parse_test_ids(text, list(check.cmd)) if st in ("passed", "failed") else None
        runs.append((st, ids))
        if st == "passed":
            break
        if st == "failed" and ids is not None and ids.failed_ids and set(ids.failed_ids) == failing:
            break  # the same tests failed again: a reproduced failure, not a flake (no third run)
    _f, passed_again = _outcomes(runs)
    if CHECK_LEVEL in passed_again:
        passed_again |= failing
    flaky = sorted(failing & passed_again)
    verdict = FlakeVerdict(flaky=flaky)
    if not flaky or set(flaky) != failing:
        return verdict
    base_runs = _entry_runs(base_entry)
    b_failed, b_passed = _outcomes(base_runs)
    if not set(flaky) <= b_failed & b_passed:
        fresh = rerun_on_baseline(project, baseline_dir, baseline, base_def, reruns, timeout_ms, should_stop)
        f2, p2 = _outcomes(_entry_runs(fresh))
        b_failed |= f2
        b_passed |= p2
    verdict.at_baseline = sorted(set(flaky) & b_failed & b_passed)
    verdict.excused = set(flaky) <= set(verdict.at_baseline)
    return verdict
