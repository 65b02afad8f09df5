"""What the acceptance checks themselves wrote into the work tree: never the task's output.

A check may write files (a formatter, a snapshot update, a coverage or build file that is not
ignored, a submodule checkout, even a commit). Such changes must not let an agent that did nothing
pass the zero-change gate (docs/acceptance.md §3.4), neither in the round whose checks made them nor
in any later verification of the project.

Snapshots (:func:`snapshot`: HEAD plus the fingerprint of every path ``git status`` lists) are
taken right before and right after the command checks. A path the checks changed — its
fingerprint differs, or a commit the checks made touched it — is *check output* when its state
before the checks was one the task did not make:

* the state the checks of an earlier verification left (the ledger below), or
* its state at the baseline (a tracked file equal to the baseline commit and not committed since,
  a file that was dirty or untracked at the baseline with the same content, or a path that did
  not exist).

A path the task had changed and the checks then rewrote (a formatter reformatting the agent's
file) stays the task's output. The ledger ``<home>/check-outputs/<repository key>.json``
``{"files": {path: fingerprint}}`` remembers check output per repository, across rounds, tasks
and verify_task runs (docs/robustness.md §10: a verify_task between two rounds rewrote a check's file and the
next round counted it): a path still holding the fingerprint the checks left is check output;
once anyone else changes it, it is no longer.

Paths are relative to the repository's top level, as git prints them; fingerprints are those of
the baseline (:func:`.git._fingerprint`), ``deleted`` for a missing path and ``dir`` for a plain
directory.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.files import atomic_write_json, read_json_safe
from ..core.paths import norm_path, project_key
from .git import (
    CACHE_PATH_RE,
    DELETED_HASH,
    MAX_HASH_BYTES,
    _BASE_ARGS,
    Baseline,
    _checked,
    _empty_tree,
    _fingerprint,
    _git_env,
    _rev,
    _status_entries,
    _toplevel,
    _valid_commit,
)

LEDGER_DIR = "check-outputs"
"""Under the data home: one ledger per repository, ``<project_key of its top level>.json``."""


def fingerprint(root: Path, rel: str) -> str:
    """The fingerprint of ``root/rel`` now (:func:`.git._fingerprint`); ``"deleted"`` when absent,
    ``"dir"`` for a plain directory."""
    path = root / rel.rstrip("/")
    if not os.path.lexists(path):
        return DELETED_HASH
    return _fingerprint(root, rel) or "dir"


@dataclass(frozen=True)
class Snapshot:
    """``head`` (HEAD's sha, None when unborn) and ``files`` ``{path: fingerprint}`` of every
    path ``git status`` lists (changed, deleted, untracked; caches skipped). A path absent from
    ``files`` is clean (equal to HEAD) or not there; ``root`` is the repository's top level."""

    head: str | None
    files: dict[str, str]
    root: Path


def snapshot(project: str | os.PathLike[str]) -> Snapshot:
    """The project's state now (see :class:`Snapshot`; ``root`` = the repository's top level).
    Raises GitFailed."""
    root = _toplevel(project)
    files = {p: fingerprint(root, p) for _code, p in _status_entries(project) if not CACHE_PATH_RE.search(p)}
    return Snapshot(head=_rev(project, "HEAD"), files=files, root=root)


@dataclass
class CheckOutputs:
    """Result of :func:`attribute`.

    Attributes:
        made: paths whose current state is check output (excluded from the task's changes).
        touched: paths the checks of this round changed, sorted.
        rewritten: touched paths that were the task's output before the checks (still counted).
        earlier: check output of earlier verifications that this round's checks did not touch.
    """

    made: set[str] = field(default_factory=set)
    touched: list[str] = field(default_factory=list)
    rewritten: list[str] = field(default_factory=list)
    earlier: list[str] = field(default_factory=list)


def ledger_path(home: str | os.PathLike[str], project: str | os.PathLike[str], root: Path | None = None) -> Path:
    """``<home>/check-outputs/<key>.json`` of the repository holding ``project`` (top level ``root``
    when already known). Raises GitFailed."""
    top = norm_path(os.path.realpath(root if root is not None else _toplevel(project)))
    return Path(home) / LEDGER_DIR / f"{project_key(top)}.json"


def load_ledger(path: str | os.PathLike[str]) -> dict[str, str]:
    """The ledger at ``path`` (``{}`` when absent or unreadable: nothing was written by checks)."""
    data: Any = read_json_safe(path)
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict):
        return {}
    return {str(k): str(v) for k, v in files.items() if isinstance(k, str) and isinstance(v, str)}


def _changed_between(project: str | os.PathLike[str], base: str | None, head: str) -> set[str]:
    """Paths that differ between commits ``base`` (None: the empty tree) and ``head``."""
    if base is not None and not _valid_commit(project, base):
        return set()
    out = _checked(["diff", "--name-only", "-z", "--no-relative", "--no-renames", base or _empty_tree(project),
                    head, "--"], project).stdout
    return {p for p in out.split("\0") if p}


def _committed_fingerprint(project: str | os.PathLike[str], rev: str | None, rel: str) -> str | None:
    """The fingerprint (as :func:`fingerprint` would give on disk) of ``rel`` in commit ``rev``;
    None when it cannot be told (a file over 4 MiB, a submodule)."""
    if rev is None:
        return DELETED_HASH
    listing = _checked(["ls-tree", "-z", rev, "--", rel], project).stdout
    if not listing:
        return DELETED_HASH
    mode, kind, _rest = listing.split(" ", 2)
    if kind != "blob":
        return None
    try:
        raw = subprocess.run([*_BASE_ARGS, "cat-file", "blob", f"{rev}:{rel}"], cwd=os.fspath(project),
                             capture_output=True, stdin=subprocess.DEVNULL, env=_git_env(), timeout=60,
                             check=True).stdout  # the bytes, not text: the fingerprint is of the bytes
    except (OSError, subprocess.SubprocessError):
        return None
    if mode == "120000":
        return "link:" + os.fsdecode(raw)
    if len(raw) > MAX_HASH_BYTES:
        return None
    return hashlib.sha1(raw).hexdigest()  # noqa: S324 - content fingerprint, as file_sha1


def attribute(
    ledger_file: str | os.PathLike[str],
    project: str | os.PathLike[str],
    baseline: Baseline,
    before: Snapshot | None,
    after: Snapshot,
) -> CheckOutputs:
    """Decide which changed paths are check output and update the ledger (see the module doc).

    Args:
        ledger_file: :func:`ledger_path` of the project.
        project: project root.
        baseline: the pre-work baseline the round is judged against.
        before: :func:`snapshot` right before this round's checks (None when no check ran).
        after: :func:`snapshot` now (after the checks).

    Returns:
        :class:`CheckOutputs`.

    Raises:
        GitFailed: git failed while listing commits.
        OSError: the ledger cannot be written.
    """
    root = after.root
    ledger = load_ledger(ledger_file)
    dirty_at_baseline = set(baseline.pre_existing_changed) | set(baseline.pre_existing_untracked)
    result = CheckOutputs()
    committed_by_checks: set[str] = set()
    committed_before: set[str] = set()
    if before is not None:
        if after.head and after.head != before.head:
            committed_by_checks = _changed_between(project, before.head, after.head)
        if before.head and before.head != baseline.head:
            committed_before = _changed_between(project, baseline.head, before.head)
        changed = {p for p in set(before.files) | set(after.files) if before.files.get(p) != after.files.get(p)}
        result.touched = sorted(changed | committed_by_checks)

    def now(p: str) -> str:
        return after.files[p] if p in after.files else fingerprint(root, p)

    for p in result.touched:
        state = before.files.get(p) if before is not None else None
        if state is not None:
            neutral = state == ledger.get(p) or state == baseline.pre_dirty_hashes.get(p)
        elif p in dirty_at_baseline:
            neutral = False  # clean or absent before the checks, not at the baseline: the task changed it
        elif p in committed_before:
            # committed since the baseline: by earlier checks (the ledger holds what they left) or the task
            neutral = p in ledger and before is not None and ledger[p] == _committed_fingerprint(project, before.head, p)
        else:
            neutral = True
        still_changed = p in after.files or p in committed_by_checks
        if still_changed and neutral:
            ledger[p] = now(p)
        else:
            ledger.pop(p, None)
            if still_changed:
                result.rewritten.append(p)
    ledger = {p: fp for p, fp in ledger.items() if now(p) == fp}
    result.made = set(ledger)
    result.earlier = sorted(set(ledger) - set(result.touched))
    if ledger or os.path.exists(ledger_file):
        atomic_write_json(ledger_file, {"files": ledger})
    return result
