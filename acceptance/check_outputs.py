"""What the acceptance checks themselves wrote into the work tree: never the task's output.

A check may write files (a formatter, a snapshot update, a coverage or build file that is not
ignored). Such files must not let an agent that did nothing pass the zero-change gate (20-acceptance
§3.4), neither in the round whose checks wrote them nor in any later round of the same task.

Fingerprints (:func:`snapshot`) are taken of every path ``git status`` lists, right before and
right after the command checks. A path whose fingerprint the checks changed is *check output*
when its state before the checks was one the task did not make:

* the state the checks of an earlier round left (the ledger below), or
* its state at the baseline (a tracked file equal to the baseline commit, a file that was dirty
  or untracked at the baseline with the same content, or a path that did not exist).

A path the task had changed and the checks then rewrote (a formatter reformatting the agent's
file) stays the task's output. The ledger ``<taskDir>/check-outputs.json`` ``{path: fingerprint}``
remembers check output across rounds: a path still holding the fingerprint the checks left is
check output in every later round; once anyone else changes it, it is the task's again.

Paths are relative to the repository's top level, as git prints them. Fingerprints are those of
the baseline (SHA-1 of the bytes, ``gitlink:<sha>`` for a nested repository, ``deleted``), with
``stat:<size>:<mtime ns>`` for what the baseline does not hash (files over 4 MiB).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.files import atomic_write_json, read_json_safe
from .git import (
    CACHE_PATH_RE,
    DELETED_HASH,
    Baseline,
    _checked,
    _empty_tree,
    _fingerprint,
    _rev,
    _status_entries,
    _toplevel,
    _valid_commit,
)

LEDGER_FILE = "check-outputs.json"
"""The ledger of check output in the task directory: ``{"files": {path: fingerprint}}``."""


def fingerprint(root: Path, rel: str) -> str:
    """The fingerprint of ``root/rel`` now (see the module doc); ``"deleted"`` when absent."""
    path = root / rel.rstrip("/")
    if not os.path.lexists(path):
        return DELETED_HASH
    fp = _fingerprint(root, rel)
    if fp is not None:
        return fp
    try:
        st = os.lstat(path)
    except OSError:
        return DELETED_HASH
    return f"stat:{st.st_size}:{st.st_mtime_ns}"


def snapshot(project: str | os.PathLike[str]) -> dict[str, str]:
    """``{path: fingerprint}`` of every path ``git status`` lists now (changed, deleted and
    untracked; caches skipped). A path absent from it is clean (equal to HEAD) or not there.

    Raises:
        GitFailed: git status failed.
    """
    root = _toplevel(project)
    return {p: fingerprint(root, p) for _code, p in _status_entries(project) if not CACHE_PATH_RE.search(p)}


@dataclass
class CheckOutputs:
    """Result of :func:`attribute`.

    Attributes:
        made: paths whose current state is check output (excluded from the task's changes).
        touched: paths the checks of this round changed, sorted.
        rewritten: touched paths that were the task's output before the checks (still counted).
        earlier: check output of earlier rounds that this round's checks did not touch.
    """

    made: set[str] = field(default_factory=set)
    touched: list[str] = field(default_factory=list)
    rewritten: list[str] = field(default_factory=list)
    earlier: list[str] = field(default_factory=list)


def load_ledger(task_dir: str | os.PathLike[str]) -> dict[str, str]:
    """The ledger of ``task_dir`` (``{}`` when absent or unreadable: nothing was written by checks)."""
    data: Any = read_json_safe(Path(task_dir) / LEDGER_FILE)
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict):
        return {}
    return {str(k): str(v) for k, v in files.items() if isinstance(k, str) and isinstance(v, str)}


def _committed(project: str | os.PathLike[str], baseline: Baseline) -> set[str]:
    """Paths that commits made since the baseline changed (``set()`` when HEAD did not move)."""
    head = _rev(project, "HEAD")
    if head is None or head == baseline.head:
        return set()
    if baseline.head is None:
        base = _empty_tree(project)
    elif _valid_commit(project, baseline.head):
        base = baseline.head
    else:
        return set()
    out = _checked(["diff", "--name-only", "-z", "--no-relative", "--no-renames", base, head, "--"], project).stdout
    return {p for p in out.split("\0") if p}


def attribute(
    task_dir: str | os.PathLike[str],
    project: str | os.PathLike[str],
    baseline: Baseline,
    before: dict[str, str] | None,
    after: dict[str, str],
) -> CheckOutputs:
    """Decide which changed paths are check output and update the ledger (see the module doc).

    Args:
        task_dir: the task directory holding the ledger.
        project: project root.
        baseline: the task's pre-work baseline.
        before: :func:`snapshot` right before this round's checks (None when no check ran).
        after: :func:`snapshot` now (after the checks).

    Returns:
        :class:`CheckOutputs`.

    Raises:
        GitFailed: git failed while listing commits since the baseline.
        OSError: the ledger cannot be written.
    """
    ledger = load_ledger(task_dir)
    dirty_at_baseline = set(baseline.pre_existing_changed) | set(baseline.pre_existing_untracked)
    committed: set[str] | None = None
    result = CheckOutputs()
    touched = sorted(p for p in (set(before or {}) | set(after)) if before is not None and before.get(p) != after.get(p))
    for p in touched:
        state = (before or {}).get(p)
        if state is not None:
            neutral = state == ledger.get(p) or state == baseline.pre_dirty_hashes.get(p)
        elif p in dirty_at_baseline:
            neutral = False  # clean or absent now, not at the baseline: the task changed it
        else:
            if committed is None:
                committed = _committed(project, baseline)
            neutral = p not in committed
        if p in after and neutral:
            ledger[p] = after[p]
        else:
            ledger.pop(p, None)
            if p in after:
                result.rewritten.append(p)
    ledger = {p: fp for p, fp in ledger.items() if after.get(p) == fp}
    result.made = set(ledger)
    result.touched = touched
    result.earlier = sorted(set(ledger) - set(touched))
    if ledger or (Path(task_dir) / LEDGER_FILE).exists():
        atomic_write_json(Path(task_dir) / LEDGER_FILE, {"files": ledger})
    return result
