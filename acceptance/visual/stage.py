"""The visual parts of a verify round, in the order of docs/acceptance.md §3.1 (steps 4, 7, 10).

:class:`VisualStage` is what :func:`tianshu_mcp.acceptance.engine.verify_round` calls: the snapshot
freeze + integrity check before the commands (unconditional: an agent that edits the visual rules
is caught even when visual acceptance is off), the visual stage itself after them (only when the
merged ``visual`` block is enabled, under the ``task:<id>`` and project locks), and the final
integrity check. Every failure becomes the round's configuration error (a blocking issue: the task
waits for a person, no agent round is spent); per-item failures are results (see :mod:`.engine`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable, Mapping

from . import snapshot
from .config import VisualConfigError, parse_visual
from .errors import VisualError
from .locks import project_key, visual_locks

log = logging.getLogger("tianshu_mcp")


class VisualStage:
    """The visual side of one verify round.

    Args:
        task_id: the task (or verify record) id; project: its project root; task_dir: its directory
        (``visual-snapshot.json``, ``visual/<round>/``); home: the data home (locks); rnd: the round;
        merged: the merged acceptance ``visual`` block (None: not configured); should_stop: cancel probe.
    """

    def __init__(self, task_id: str, project: str, task_dir: Path, home: Path, rnd: int,
                 merged: Mapping[str, Any] | None, should_stop: Callable[[], bool] | None = None) -> None:
        self.task_id = task_id
        self.project = project
        self.task_dir = Path(task_dir)
        self.home = Path(home)
        self.round = rnd
        self.merged = merged
        self.should_stop = should_stop
        self.report: dict[str, Any] | None = None
        self.gates: dict[str, list[Any]] = {"blocking": [], "failed": [], "uncertain": [], "warnings": []}

    def integrity(self) -> dict[str, str] | None:
        """Freeze (first time) and check the snapshot: None when intact, else the blocking issue
        ``{code: VISUAL_INTEGRITY|SNAPSHOT_INVALID, message}``."""
        try:
            snapshot.check(self.task_dir, self.project)
        except VisualError as exc:
            return {"code": exc.code, "message": exc.message}
        except Exception as exc:  # noqa: BLE001 - never sink the round; block it
            log.exception("visual snapshot check failed for %s", self.task_id)
            return {"code": "VISUAL_INTERNAL", "message": f"visual snapshot check failed: {exc}"}
        return None

    def run(self) -> dict[str, str] | None:
        """Step 7: integrity, then (enabled) the visual stage into ``<taskDir>/visual/<round>/``, then
        integrity again. Returns the round-level blocking issue or None; results in :attr:`report`
        (``{results, artifactDirectory, artifactBytes}``) and their gating in :attr:`gates`."""
        issue = self.integrity()
        if issue is not None or self.merged is None:
            return issue
        try:
            cfg = parse_visual(self.merged)
        except VisualConfigError as exc:
            return {"code": "CONFIG_INVALID", "message": f"the visual block is invalid: {exc}"}
        if not cfg.enabled:
            return None
        from .engine import gate, run_visual  # the browser stack loads only when a round runs the visual stage

        keys = [f"task:{self.task_id}", project_key(self.project)]
        try:
            with visual_locks(self.home, keys, "verify"):
                self.report = run_visual(cfg, self.project, self.task_dir / "visual" / str(self.round), self.task_dir,
                                         self.should_stop)
        except VisualError as exc:
            return {"code": exc.code, "message": exc.message}
        except Exception as exc:  # noqa: BLE001
            log.exception("the visual stage failed for %s", self.task_id)
            return {"code": "VISUAL_INTERNAL", "message": f"the visual stage failed: {type(exc).__name__}: {exc}"}
        self.gates = gate(self.report["results"])
        return self.integrity()

    def approved_files(self) -> set[str]:
        """Project-relative baseline PNGs and manifests of the frozen snapshot (written by a person's
        approval, never by the agent: the integrity check sees to that). They are not the agent's
        output, so they never satisfy the zero-change gate."""
        try:
            snap = snapshot.load_snapshot(self.task_dir)
        except VisualError:
            return set()
        return {k for k, v in (snap or {}).get("baselines", {}).items() if v}

    def message_bits(self) -> list[str]:
        """The visual parts of the verdict message (docs/visual.md §6.5, English)."""
        bits = []
        if self.gates["failed"]:
            bits.append("visual defects: " + ", ".join(self.gates["failed"]))
        if self.gates["uncertain"]:
            bits.append("AI content judgement uncertain (warning only): " + ", ".join(self.gates["uncertain"]))
        if self.gates["warnings"]:
            bits.append("optional content checks did not pass (do not affect the verdict): " + ", ".join(self.gates["warnings"]))
        return bits

