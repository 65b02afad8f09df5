"""Tracked changes since the baseline (docs/acceptance.md §4.2 steps 2–3): pre-existing dirty files that
are unchanged (:func:`unchanged_pre_existing`), the commit the work is measured against
(:func:`diff_base`) and one net diff ``base → working tree`` (:func:`collect_tracked`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

from ....core.git.run import GitFailed, _empty_tree, _valid_commit
from ....core.i18n import _
from ..baseline import DELETED_HASH, Baseline
from ..diff import _ZERO_SHA_RE, GITLINK_MODE, _changed_lines, _numstat, _raw, _RawEntry
from ..files import _fingerprint, _same_blob, _sub_head
from ..models import Rename, Submodule
from .changeset import ChangeSet

__all__ = ["unchanged_pre_existing", "diff_base", "collect_tracked"]


def unchanged_pre_existing(baseline: Baseline, root: Path) -> set[str]:
    """Step 2: the files dirty before the work started whose content still equals their baseline
    fingerprint (a pre-existing deletion: still deleted)."""
    unchanged: set[str] = set()
    for f in baseline.pre_existing_changed:
        base_hash = baseline.pre_dirty_hashes.get(f) or baseline.pre_untracked_hashes.get(f)
        if not base_hash:
            continue
        if base_hash == DELETED_HASH:
            if not os.path.lexists(root / f):
                unchanged.add(f)
            continue
        if _fingerprint(root, f) == base_hash:
            unchanged.add(f)
    return unchanged


def diff_base(project: str | os.PathLike[str], baseline: Baseline) -> str:
    """The tree the net diff starts from: the baseline commit, or the empty tree when the baseline
    repository had no commit yet (port).

    Raises:
        GitFailed: the baseline commit is no longer in the repository (docs/robustness.md: measuring
            against whatever HEAD is now let ``rm -rf .git && git init`` pass).
    """
    if baseline.head and _valid_commit(project, baseline.head):
        return baseline.head
    if baseline.head is None:
        return _empty_tree(project)  # port: the baseline repo had no commit yet
    raise GitFailed(_("the baseline commit {commit} is no longer in the repository at {project} "
                      "(its history was replaced or rewritten and pruned): the work cannot be measured against "
                      "the pre-work state").format(commit=baseline.head[:12], project=project))


def collect_tracked(project: str | os.PathLike[str], root: Path, baseline: Baseline, base: str,
                    unchanged_pre: set[str], untracked_now: Sequence[str]) -> ChangeSet:
    """Step 3: the rows of one net diff ``base → working tree`` with rename detection, and its
    added/removed lines. Left out: unchanged pre-existing files (``unchanged_pre``, to which
    pre-existing untracked files the agent only staged or committed are added), stat-only rows,
    files removed from the index only (``index_only``). Submodules are reported by commit.

    Raises:
        GitFailed: git failed.
    """
    raw = _raw(project, [base])
    stats = _numstat(project, [base])
    for e in raw:  # a pre-existing untracked file the agent only staged or committed, unchanged
        h = baseline.pre_untracked_hashes.get(e.path)
        if h and e.path not in unchanged_pre and _fingerprint(root, e.path) == h:
            unchanged_pre.add(e.path)
    cs = ChangeSet()
    skip_lines: set[str] = set(unchanged_pre)
    untracked_set = set(untracked_now)
    for e in raw:
        if GITLINK_MODE in (e.old_mode, e.new_mode):
            skip_lines.add(e.path)
            if e.path not in unchanged_pre and (sub := _submodule(e, root)) is not None:
                cs.submodules.append(sub)
            continue
        if _excluded(e, unchanged_pre):
            continue
        if e.status == "D" and e.path in untracked_set and _same_blob(root / e.path, e.old_sha):
            cs.index_only.append(e.path)  # removed from the index only (`git rm --cached`): the file is unchanged
            skip_lines.add(e.path)
            continue
        _add_row(cs, e, stats.get(e.path, (0, 0, False)))
    cs.added, cs.removed = _changed_lines(project, [base], skip_lines)
    return cs


def _excluded(e: _RawEntry, unchanged_pre: set[str]) -> bool:
    """An unchanged pre-existing file (a rename: both of its paths)."""
    if e.path not in unchanged_pre:
        return False
    return e.old_path is None or e.old_path in unchanged_pre


def _submodule(e: _RawEntry, root: Path) -> Submodule | None:
    """The submodule change of a gitlink row (commit before/after; a work-tree side is read from
    the submodule's HEAD), None when its commit did not change."""
    before = e.old_sha if e.old_mode == GITLINK_MODE and not _ZERO_SHA_RE.match(e.old_sha) else None
    after: str | None = None
    if e.new_mode == GITLINK_MODE:
        after = e.new_sha if not _ZERO_SHA_RE.match(e.new_sha) else _sub_head(root / e.path)
    return Submodule(path=e.path, before=before, after=after) if before != after else None


def _add_row(cs: ChangeSet, e: _RawEntry, stat: tuple[int, int, bool]) -> None:
    """The row of one diff entry (a rename also in ``renames``, a deletion in ``deletions``);
    nothing for a stat-only change (the content and the mode are what they were)."""
    add, dele, binary = stat
    is_rename = e.status == "R" and e.old_path is not None
    if not is_rename and add == 0 and dele == 0 and not binary and e.status not in ("A", "D") \
            and e.old_mode == e.new_mode:
        return  # stat-only: the content and the mode are what they were
    cs.rows[e.path] = (add, dele, binary)
    if is_rename:
        cs.renames.append(Rename(from_=e.old_path or "", to=e.path, similarity=e.score if e.score is not None else 100))
    if e.status == "D":
        cs.deletions.append(e)
