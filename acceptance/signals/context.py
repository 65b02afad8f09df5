"""The state of one :func:`.scan.scan_changes` call, passed between its steps: the changed lines and
the hits so far (:class:`ScanContext`), and the matching of a removed line or test against the
added ones (:func:`take_match`: a moved test or assertion is no hit)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Hashable, Mapping, Sequence, TypeVar

from .markers import scan_signals
from .models import MAX_TAMPERING_ITEMS, TAMPERING_KINDS, Signals, SignalsReport, TamperingItem

__all__ = ["ScanContext", "take_match"]

_K = TypeVar("_K", bound=Hashable)

_FIELD_BY_KIND = {(info.alias or name): name for name, info in Signals.model_fields.items()}


@dataclass
class ScanContext:
    """One scan of a round's changes.

    Attributes:
        added: per file, the added lines.
        removed: per file, the removed lines.
        deleted: the deleted files, duplicates dropped, in order.
        signals: the counts so far (the §4.4 markers of all added lines from the start).
        items: per tampering kind, its hits so far.
    """

    added: Mapping[str, Sequence[str]]
    removed: Mapping[str, Sequence[str]]
    deleted: list[str]
    signals: Signals
    items: dict[str, list[TamperingItem]] = field(default_factory=lambda: {k: [] for k in TAMPERING_KINDS})
    deleted_set: set[str] = field(init=False)

    def __post_init__(self) -> None:
        self.deleted_set = set(self.deleted)

    @classmethod
    def start(cls, added: Mapping[str, Sequence[str]], removed: Mapping[str, Sequence[str]],
              deleted_files: Sequence[str]) -> ScanContext:
        """A scan with the §4.4 markers counted over all added lines, files in ``added`` order."""
        signals = scan_signals([ln for lines in added.values() for ln in lines])
        return cls(added=added, removed=removed, deleted=list(dict.fromkeys(deleted_files)), signals=signals)

    def hit(self, kind: str, file: str, detail: str, count: int = 1) -> None:
        """Count ``count`` hits of tampering ``kind`` and list one item for them."""
        name = _FIELD_BY_KIND[kind]
        setattr(self.signals, name, getattr(self.signals, name) + count)
        self.items[kind].append(TamperingItem(kind=kind, file=file, detail=detail))

    def report(self) -> SignalsReport:
        """The counts and the tampering hits (in :data:`TAMPERING_KINDS` order, at most
        :data:`MAX_TAMPERING_ITEMS`)."""
        tampering = [it for k in TAMPERING_KINDS for it in self.items[k]][:MAX_TAMPERING_ITEMS]
        return SignalsReport(signals=self.signals, tampering=tampering)


def take_match(total: Counter[_K], by_file: Mapping[str, Counter[_K]], path: str, key: _K) -> bool:
    """Match one removed ``key`` of ``path`` against the added ones: False when none is left in
    ``total``; else one is used up, from ``path``'s own added ones first, else from the first
    other file that has one."""
    if total[key] <= 0:
        return False
    total[key] -= 1
    own = by_file.get(path)
    if own is not None and own[key] > 0:
        own[key] -= 1
    else:
        for other in by_file.values():
            if other[key] > 0:
                other[key] -= 1
                break
    return True
