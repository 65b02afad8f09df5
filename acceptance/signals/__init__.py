"""Suspicious signals over a round's changes: counted, never blocking (docs/acceptance.md §4.4,
docs/acceptance.md §8.6).

Two families:

* **markers** (§4.4, exact original rules): ``todo``, ``consoleDebug``, ``commentedBlock``,
  ``secretLike``; plus ``debugLeftover`` (Python ``breakpoint()``/``pdb``, a stray top-level
  ``print(`` in non-test Python source, JS ``debugger`` statements, Rust ``dbg!``, Ruby
  ``binding.pry``/``byebug``);
* **agent tampering** (each hit also listed in ``tampering: [{kind, file, detail}]``):
  ``skippedOrOnlyTests`` (focused or skipped tests added), ``deletedTests`` (test files deleted,
  test definitions removed and not re-added anywhere), ``weakenedTests`` (assertions removed from
  test files without a replacement, trivially true assertions added) and ``acceptanceTampering``
  (the project's ``.tianshu-mcp/acceptance.json``, files named in the check argvs, test-runner or CI
  configuration edited).

Inputs are the analysis' per-file added and removed lines (``git diff -U0``; new untracked files
contribute all their lines), deleted files, changed files and the check argvs. Paths are POSIX,
relative to the repository's top level. Plain Python, no I/O.

One module per concept:

* :mod:`.models`: the counts, the tampering hits, the signal kinds and labels;
* :mod:`.markers`: the §4.4 markers (:func:`scan_signals`);
* :mod:`.rules`: the per-language rules (test files, debug leftovers, skipped/deleted/weakened
  tests, tampered configuration);
* :mod:`.context`: the state one scan passes between its steps;
* :mod:`.deleted`, :mod:`.weakened`, :mod:`.tampering`: the steps of ``deletedTests``, removed
  assertions and ``acceptanceTampering``;
* :mod:`.scan`: :func:`scan_changes`, the steps in order.
"""

from __future__ import annotations

from .markers import scan_signals
from .models import (
    MARKER_KINDS,
    MAX_TAMPERING_ITEMS,
    SIGNAL_LABELS,
    TAMPERING_KINDS,
    Signals,
    SignalsReport,
    TamperingItem,
)
from .rules import is_test_path
from .scan import scan_changes

__all__ = [
    "Signals",
    "TamperingItem",
    "SignalsReport",
    "scan_signals",
    "scan_changes",
    "is_test_path",
    "TAMPERING_KINDS",
    "MARKER_KINDS",
    "SIGNAL_LABELS",
    "MAX_TAMPERING_ITEMS",
]
