"""Holdout checks run on the pristine tree (docs/integrity.md §5).

They run after the visible checks, with their ``files`` written into the pristine tree (never the
project). What comes back is only ``{check: "hidden-<k>", area, passed, exitCode, durationMs,
tests}``: never the name, the command, the files or the output, which stay in ``<home>/holdout/logs/<id>-<round>.log`` (mode
0600), outside the task directory the agent's prompt names. Rework feedback may say only that a hidden check failed and its behaviour area.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Sequence

from ...core.i18n import _
from ..config import CheckDef
from ..runner import run_checks
from .models import HoldoutCheck
from .pristine import PristineTree, write_holdout_files

__all__ = ["run_holdout"]


def run_holdout(checks: Sequence[HoldoutCheck], tree: PristineTree | None, log_path: Path, timeout_ms: int,
                should_stop: Callable[[], bool] | None) -> tuple[list[dict[str, Any]], list[str]]:
    """Run the holdout checks on ``tree``.

    Returns:
        ``(rows, failed areas)``; rows are ``{check: "hidden-<k>", area, passed, exitCode,
        durationMs, tests?, reason?}`` (not even the name: reports are linked from rework feedback).
        Without a tree every check fails ("not run": never a silent pass).
    """
    if tree is None:
        rows = [{"check": f"hidden-{k + 1}", "area": c.area, "passed": False, "exitCode": None, "durationMs": 0,
                 "reason": _("not run: no pristine tree")} for k, c in enumerate(checks)]
        return rows, list(dict.fromkeys(c.area for c in checks))
    for c in checks:
        write_holdout_files(tree, c.files)
    try:
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.close(fd)
        os.chmod(log_path, 0o600)
    except OSError:
        pass
    defs = [CheckDef.make(c.name, c.argv(), timeout_ms=c.timeout_ms) for c in checks]
    results = run_checks(defs, tree.project, log_path, timeout_ms, should_stop=should_stop)
    rows: list[dict[str, Any]] = []
    failed: list[str] = []
    for k, (c, r) in enumerate(zip(checks, results)):
        row: dict[str, Any] = {"check": f"hidden-{k + 1}", "area": c.area, "passed": bool(r.get("passed")),
                               "exitCode": r.get("exitCode"), "durationMs": r.get("durationMs", 0)}
        if isinstance(r.get("tests"), dict):
            row["tests"] = {k: r["tests"].get(k) for k in ("passed", "failed", "skipped", "errors")}
        if not r.get("passed"):
            row["reason"] = _("failed") if r.get("exitCode") not in (None, 0) else _("did not pass")
            if c.area not in failed:
                failed.append(c.area)
        rows.append(row)
    return rows, failed
