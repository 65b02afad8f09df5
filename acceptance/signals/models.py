"""The shapes of the change signals (docs/acceptance.md §4.4, docs/acceptance.md §8.6): the counts
(:class:`Signals`), the tampering hits (:class:`TamperingItem`), the result of a scan
(:class:`SignalsReport`), and the signal kinds with their labels."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ...core.i18n import N_

__all__ = [
    "Signals",
    "TamperingItem",
    "SignalsReport",
    "TAMPERING_KINDS",
    "MARKER_KINDS",
    "SIGNAL_LABELS",
    "MAX_TAMPERING_ITEMS",
]

TAMPERING_KINDS = ("skippedOrOnlyTests", "deletedTests", "weakenedTests", "acceptanceTampering")
"""Signals whose hits are listed in ``tampering`` (in this order)."""
MARKER_KINDS = ("todo", "consoleDebug", "commentedBlock", "secretLike", "debugLeftover")
"""The other (non-tampering) signal counts."""
SIGNAL_LABELS = {
    "todo": N_("TODO/FIXME/HACK hits"),
    "consoleDebug": N_("console.log/debugger hits"),
    "commentedBlock": N_("commented-out code blocks"),
    "secretLike": N_("secret/token-like literals"),
    "debugLeftover": N_("debug leftovers (breakpoint/pdb/stray print/debugger)"),
    "skippedOrOnlyTests": N_("focused or skipped tests added"),
    "deletedTests": N_("tests deleted"),
    "weakenedTests": N_("tests weakened (assertions removed or trivially true)"),
    "acceptanceTampering": N_("acceptance, check or CI configuration edited"),
}
"""Human labels of the ``signals`` counts (reports; English msgids: show them through ``_``)."""
MAX_TAMPERING_ITEMS = 100
"""At most this many ``tampering`` entries are listed; the counts in ``signals`` stay exact."""


class Signals(BaseModel):
    """Suspicious-marker counts; informational, never fail a round.

    JSON keys: ``todo, consoleDebug, commentedBlock, secretLike`` (docs/acceptance.md §4.4) and
    ``debugLeftover, skippedOrOnlyTests, deletedTests, weakenedTests, acceptanceTampering`` (port).
    """

    model_config = ConfigDict(populate_by_name=True)

    todo: int = 0
    console_debug: int = Field(0, alias="consoleDebug")
    commented_block: int = Field(0, alias="commentedBlock")
    secret_like: int = Field(0, alias="secretLike")
    debug_leftover: int = Field(0, alias="debugLeftover")
    skipped_or_only_tests: int = Field(0, alias="skippedOrOnlyTests")
    deleted_tests: int = Field(0, alias="deletedTests")
    weakened_tests: int = Field(0, alias="weakenedTests")
    acceptance_tampering: int = Field(0, alias="acceptanceTampering")


class TamperingItem(BaseModel):
    """One agent-tampering hit: ``{kind, file, detail}`` (``kind`` ∈ :data:`TAMPERING_KINDS`)."""

    kind: str
    file: str
    detail: str


class SignalsReport(BaseModel):
    """Result of :func:`scan_changes`: ``signals`` (all counts) and ``tampering`` (the hits of the
    tampering kinds, at most :data:`MAX_TAMPERING_ITEMS`)."""

    signals: Signals = Field(default_factory=Signals)
    tampering: list[TamperingItem] = Field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        """``{"signals": {...camelCase counts}, "tampering": [{kind, file, detail}]}``."""
        return {
            "signals": self.signals.model_dump(by_alias=True),
            "tampering": [t.model_dump() for t in self.tampering],
        }
