"""The baseline run started with the task, while the agent works (issue 23; design note 50).

Verification integrity compares a round with the test checks' results on the baseline. Run
inside the first round, that baseline run competes with the round's own checks for the
machine's cores; started when the task starts, it is done (and cached per task) by the time the
agent has finished.
"""

from __future__ import annotations

import logging
from pathlib import Path

from .config import resolve_checks
from .engine import VerifyRequest, integrity_policy
from .grading_worktree import run_baseline_checks
from .integrity.judge import test_check_indices
from .integrity.models import IntegrityPolicy

__all__ = ["warm_baseline_run"]

log = logging.getLogger("tianshu_mcp")


def warm_baseline_run(req: VerifyRequest) -> list[str]:
    """Run the round's test checks on the baseline now, while the agent works (issue 23, speed).

    Resolves the checks as :func:`verify_round` will (the same layers, pinned rules and extra
    checks of ``req``), and when verification integrity will judge the round, runs the test checks
    (:func:`.integrity.judge.test_check_indices`) on the baseline worktree through
    :func:`.grading_worktree.run_baseline_checks`, which caches them per task: the first round's
    integrity session then reads the cache instead of running the suite a second time beside the
    round's checks. A round that starts before this run ends waits for it (the cache's file lock).

    Returns:
        The baseline run's notes; ``[]`` when nothing was to run. Never raises: a configuration
        error is left for the verify round to report, and a cancel (``req.should_stop``) stops it.
    """
    if req.baseline is None:
        return []
    try:
        resolved = resolve_checks(req.project_path, req.home, req.acceptance_override, extra_checks=req.extra_checks,
                                  checks_mode=req.checks_mode, project_verify=req.project_verify,
                                  pinned=req.pinned_rules)
        if integrity_policy(req, resolved, req.baseline, []) is IntegrityPolicy.OFF:
            return []
        tests = [resolved.checks[i] for i in test_check_indices(resolved.checks, req.project_path)]
        if not tests:
            return []
        _entries, notes = run_baseline_checks(
            req.project_path, Path(req.baseline_dir) if req.baseline_dir is not None else Path(req.task_dir),
            req.baseline, tests, req.verify_command_timeout_ms or 300_000,
            resolved.verify_concurrency or req.verify_concurrency or 1, req.should_stop)
        return notes
    except Exception as exc:  # noqa: BLE001 - the round runs the baseline itself when this did not
        log.warning("the early baseline run of %s failed: %s", req.task_id, exc)
        return []
