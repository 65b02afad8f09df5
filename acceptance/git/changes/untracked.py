"""Untracked changes since the baseline (docs/acceptance.md §4.2 step 4, docs/acceptance.md §8.6): untracked
files counted whole, embedded repositories reported by commit (:func:`collect_untracked`), and worktree
moves git has not recorded paired by content (:func:`merge_unstaged_renames`)."""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path
from typing import Iterable, Sequence

from ..baseline import CACHE_PATH_RE, UNTRACKED_HASH_CAP, Baseline
from ..files import _count_lines, _fingerprint, _probe, _read_text, _sub_head
from ..models import FileStat, Rename, Submodule
from ..renames import _pair_unstaged_renames
from .changeset import ChangeSet

__all__ = ["owned_by_cli", "collect_untracked", "merge_unstaged_renames"]

_SIGNAL_READ_CAP = 4 * 1024 * 1024


def owned_by_cli(path: str, globs: Sequence[str]) -> bool:
    """True when ``path`` (repo-relative, ``/``-separated) matches one of ``globs``: a glob with a
    ``/`` matches the whole path, one without matches the first path component (``.aider*``
    covers ``.aider.chat.history.md`` and ``.aider.tags.cache.v4/cache.db`` at the root)."""
    first = path.split("/", 1)[0]
    return any(fnmatch.fnmatchcase(path, g) if "/" in g else fnmatch.fnmatchcase(first, g) for g in globs)


def collect_untracked(cs: ChangeSet, root: Path, baseline: Baseline, untracked_now: Sequence[str],
                      exclude_untracked: Iterable[str], owned_paths: Sequence[str]) -> None:
    """Step 4: add the untracked files to ``cs``, counted whole (their lines go to ``cs.added`` for
    the signals). Left out and counted in ``cs.skipped``: tool caches, files the checks created
    (``exclude_untracked``), files the agent's CLI owns (``owned_paths``), pre-existing files beyond
    the baseline's hash cap. Pre-existing files whose content is unchanged are left out; changed
    ones are counted with a note. A nested repository is one ``submodules`` entry."""
    pre_untracked = set(baseline.pre_existing_untracked)
    unattributable = (
        set([f for f in baseline.pre_existing_untracked if not CACHE_PATH_RE.search(f)][UNTRACKED_HASH_CAP:])
        if baseline.untracked_hash_truncated
        else set()
    )
    index_only = set(cs.index_only)
    excluded = set(exclude_untracked)
    for f in untracked_now:
        if f in cs.rows or f in index_only or _skipped(cs, f, excluded, owned_paths, unattributable):
            continue
        base_hash = baseline.pre_untracked_hashes.get(f) or baseline.pre_dirty_hashes.get(f)
        if f.endswith("/"):  # git lists a nested repository as one directory entry: not descended into
            fp = _fingerprint(root, f)
            if not (f in pre_untracked and fp == base_hash):
                sub = f.rstrip("/")
                cs.submodules.append(Submodule(path=sub, before=None, after=_sub_head(root / sub)))
                cs.embedded.append(sub)
            continue
        if f in pre_untracked:
            if base_hash and _fingerprint(root, f) == base_hash:
                continue
            cs.notes.append(
                f"Untracked file {f} existed before work started but its content changed; it is counted whole "
                "in this round's changes (line-level attribution is not possible)."
            )
        else:
            cs.new_untracked.append(f)
        _add_file(cs, root, f)


def _skipped(cs: ChangeSet, f: str, excluded: set[str], owned_paths: Sequence[str], unattributable: set[str]) -> bool:
    """True (and counted in ``cs.skipped``) for an untracked file that is not the task's output."""
    if CACHE_PATH_RE.search(f):
        cs.skipped.cache += 1
    elif f in excluded:
        cs.skipped.check_made += 1
    elif owned_paths and owned_by_cli(f, owned_paths):
        cs.skipped.owned += 1
    elif f in unattributable:
        cs.skipped.unattributable += 1
    else:
        return False
    return True


def _add_file(cs: ChangeSet, root: Path, f: str) -> None:
    """One untracked file counted whole: its row (binary: no line count) and, for text, its lines
    (at most :data:`_SIGNAL_READ_CAP` bytes read)."""
    path = root / f
    cs.untracked_files.append(f)
    binary, is_text = _probe(path)
    if binary:
        cs.untracked_rows[f] = FileStat(file=f, add=0, del_=0, binary=True)
    else:
        cs.untracked_rows[f] = FileStat(file=f, add=_count_lines(path), del_=0)
    if is_text:
        content = _read_text(path, _SIGNAL_READ_CAP)
        if content is not None:
            cs.added[f] = content.split("\n")


def merge_unstaged_renames(cs: ChangeSet, project: str | os.PathLike[str], root: Path) -> None:
    """port: a worktree move git has not recorded (deleted tracked file + new untracked file,
    identical or ≥ 50 % similar lines) becomes one rename row for the new path, with a note; then
    ``cs.deleted_files`` = the deletions left unpaired."""
    unstaged = _pair_unstaged_renames(project, root, cs.deletions, cs.new_untracked)
    for p in unstaged:
        cs.rows.pop(p.old, None)
        cs.untracked_rows.pop(p.new, None)
        cs.untracked_files.remove(p.new)
        cs.rows[p.new] = (p.add, p.dele, p.binary)
        cs.renames.append(Rename(from_=p.old, to=p.new, similarity=p.similarity))
        cs.removed.pop(p.old, None)
        cs.added.pop(p.new, None)
        if p.added:
            cs.added[p.new] = p.added
        if p.removed:
            cs.removed[p.new] = p.removed
    if unstaged:
        cs.notes.append(
            f"{len(unstaged)} rename(s) not recorded by git were detected by content: "
            + ", ".join(f"{p.old} → {p.new}" for p in unstaged)
            + "."
        )
    paired_old = {p.old for p in unstaged}
    cs.deleted_files = [e.path for e in cs.deletions if e.path not in paired_old]
