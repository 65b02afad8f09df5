"""Test inventory (docs/integrity.md §2): the tests that ran at the baseline must still run, with a real
outcome, after the round.

:class:`Evidence` is what one run of one check showed (its status, the test ids it listed, its
counts); :func:`compare` finds the baseline tests that no longer ran: gone, skipped, xfail, todo,
deselected or filtered all look the same from here (not in the ran set), which is the point. Ids
are compared when both runs listed every test they ran; otherwise the counts are (a pristine tree
runs the baseline's own test files, so fewer tests there means the agent's code made some vanish).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ...core.i18n import _
from ..grading.ids import TestIds

__all__ = ["Evidence", "InventoryResult", "compare", "MAX_LISTED"]

MAX_LISTED = 50
"""At most this many removed ids are listed in the report (the count is always given)."""

_FAILING = ("failed", "timeout", "error", "no-tests")


@dataclass
class Evidence:
    """One run of one check.

    Attributes:
        status: ``passed|failed|timeout|error|no-tests|skipped`` (see :func:`..grading.baseline_runs.check_status`).
        ids: the test ids its output listed (None: none recognised).
        counts: its :class:`~..toolchains.base.TestCounts` JSON (``passed``, ``failed``, ``skipped``,
            ``errors``), None when no count was recognised.
    """

    status: str
    ids: TestIds | None = None
    counts: Mapping[str, Any] | None = None

    @classmethod
    def from_entry(cls, entry: Mapping[str, Any]) -> "Evidence":
        """From a baseline cache entry (``{status, tests, counts}``)."""
        counts = entry.get("counts")
        return cls(str(entry.get("status") or "error"), TestIds.from_json(entry.get("tests")),
                   counts if isinstance(counts, Mapping) else None)

    @property
    def ran(self) -> set[str]:
        """Ids that ran with a real outcome (passed, failed or errored)."""
        if self.ids is None:
            return set()
        return set(self.ids.passed_ids) | set(self.ids.failed_ids)

    @property
    def ran_count(self) -> int | None:
        """``passed + failed + errors`` of the counts (None: no count)."""
        if self.counts is None:
            return None
        return int(self.counts.get("passed") or 0) + int(self.counts.get("failed") or 0) + int(
            self.counts.get("errors") or 0)

    @property
    def complete(self) -> bool:
        """True when the ids cover every test the counts say ran."""
        n = self.ran_count
        return self.ids is not None and n is not None and len(self.ran) >= n


@dataclass
class InventoryResult:
    """Baseline tests that no longer ran, for one check.

    Attributes:
        level: ``ids`` (compared by id), ``counts`` (by count) or ``none`` (not comparable).
        removed: ids that ran at the baseline and not now (``ids`` level), sorted.
        baseline_ran / now_ran: ran counts (None: unknown).
        note: why nothing could be compared, or what was seen.
    """

    level: str = "none"
    removed: list[str] = field(default_factory=list)
    baseline_ran: int | None = None
    now_ran: int | None = None
    note: str = ""

    @property
    def lost(self) -> bool:
        """True when baseline tests no longer ran."""
        if self.level == "ids":
            return bool(self.removed)
        return self.level == "counts" and self.baseline_ran is not None and (self.now_ran or 0) < self.baseline_ran

    def to_json(self, check: str) -> dict[str, Any]:
        """``{check, level, removed (≤ MAX_LISTED), removedCount, baselineRan, nowRan, note}``."""
        n = len(self.removed) if self.level == "ids" else max(0, (self.baseline_ran or 0) - (self.now_ran or 0))
        return {"check": check, "level": self.level, "removed": self.removed[:MAX_LISTED], "removedCount": n,
                "baselineRan": self.baseline_ran, "nowRan": self.now_ran, "note": self.note}


def compare(base: Evidence, now: Evidence) -> InventoryResult:
    """Which baseline tests did not run now (see the module doc).

    Returns:
        :class:`InventoryResult`; ``level`` ``none`` when the baseline run is not comparable
        (timed out, could not start, ran nothing, listed and counted nothing) or the run now
        timed out or could not start.
    """
    out = InventoryResult(baseline_ran=base.ran_count if base.ran_count is not None else (len(base.ran) or None),
                          now_ran=now.ran_count if now.ran_count is not None else (len(now.ran) or None))
    if base.status not in ("passed", "failed"):
        out.note = _("the baseline run ended {status}: no inventory to compare").format(status=base.status)
        return out
    if not base.ran and not base.ran_count:
        out.note = _("the baseline run listed and counted no test")
        return out
    if now.status in ("timeout", "error", "skipped"):
        out.note = _("this run ended {status}: no inventory to compare").format(status=now.status)
        return out
    if base.complete and now.complete:
        out.level = "ids"
        out.removed = sorted(base.ran - now.ran)
        return out
    out.level = "counts"
    if now.ran_count is None and not now.ran:
        out.now_ran = 0
        out.note = _("this run reported no test count at all")
    return out
