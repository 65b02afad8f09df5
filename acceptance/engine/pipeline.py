""":func:`verify_round`: the steps of one verify round in the order of docs/acceptance.md §3.1 (see the
package docstring for the module of each step), one verification per task at a time (§3.0)."""

from __future__ import annotations

import threading

from ...core.procs import stop_requested
from .changes import analyze_round
from .checks import grade_baseline, run_round_checks
from .gates import apply_gates
from .outcome import conclude
from .request import VerifyOutcome, VerifyRequest
from .setup import open_round, resolve_round

__all__ = ["VerificationActiveError", "verify_round"]


class VerificationActiveError(RuntimeError):
    """A verification of the same task is already running in this process (docs/acceptance.md §3.0)."""


_active: set[str] = set()
_active_lock = threading.Lock()


def verify_round(req: VerifyRequest) -> VerifyOutcome:
    """Run one acceptance round and write its report (docs/acceptance.md §3.0–§3.5, §5).

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
    ctx = open_round(req)  # 1–2. the round and its baseline
    cfg = resolve_round(ctx)  # 3–4. the checks and the visual snapshot
    run = run_round_checks(ctx, cfg)  # 5–6. git-diff-check, then the command checks
    grading = grade_baseline(ctx, cfg, run)  # 6b. the same checks on the baseline (opt-in)
    # 7. the visual stage (when enabled), between integrity checks
    if not ctx.blocking and not stop_requested(req.should_stop) and (issue := cfg.visual.run()) is not None:
        ctx.blocking.append(issue)
    ctx.blocking.extend(cfg.visual.gates["blocking"])
    changes = analyze_round(ctx, cfg, run, grading)  # 8. the change analysis
    apply_gates(ctx, cfg, run.checks, changes)  # 9–10. the gates and the final integrity check
    return conclude(ctx, cfg, run, grading, changes)  # 11. verdict and report
