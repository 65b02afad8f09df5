"""port: renames git has not recorded (a worktree ``mv``: a deleted tracked file plus a new
untracked file), paired by content: identical first, then line similarity ≥ 50 % for text files up
to 256 KiB. Part of the change analysis (:mod:`.changes`).
"""

from __future__ import annotations

import difflib
import os
import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ...core.git.run import run_git
from .diff import _RawEntry
from .files import _blob_sha, _probe, _read_text

_RENAME_PAIR_BYTES = 256 * 1024
"""port: unstaged renames are matched by similarity only for files up to this size (exact copies of any
size up to 4 MiB are always matched)."""
_RENAME_PAIR_BUDGET = 200
"""port: at most this many (deleted, new) pairs are compared by similarity."""
RENAME_THRESHOLD = 50
"""Minimum similarity (percent) for a rename, as git's default ``-M``."""


def _line_delta(old: list[str], new: list[str]) -> tuple[int, int, list[str], list[str], int]:
    """``(add, del, added_lines, removed_lines, similarity%)`` between two line lists."""
    sm = difflib.SequenceMatcher(None, old, new, autojunk=False)
    add = dele = 0
    plus: list[str] = []
    minus: list[str] = []
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag in ("replace", "delete"):
            dele += i2 - i1
            minus.extend(old[i1:i2])
        if tag in ("replace", "insert"):
            add += j2 - j1
            plus.extend(new[j1:j2])
    return add, dele, plus, minus, round(sm.ratio() * 100)


@dataclass
class _UnstagedRename:
    old: str
    new: str
    similarity: int
    add: int
    dele: int
    binary: bool
    added: list[str]
    removed: list[str]


def _pair_unstaged_renames(
    project: str | os.PathLike[str], root: Path, deletions: Sequence[_RawEntry], new_files: Sequence[str]
) -> list[_UnstagedRename]:
    """port: match files deleted from the worktree with new untracked files (a ``mv`` git has not
    recorded): identical content first (any type), then line similarity ≥ 50 % for text files up to
    256 KiB, best pairs first."""
    if not deletions or not new_files:
        return []
    pairs: list[_UnstagedRename] = []
    by_sha: dict[str, list[_RawEntry]] = {}
    for d in deletions:
        by_sha.setdefault(d.old_sha, []).append(d)
    left_new: list[str] = []
    used_old: set[str] = set()
    for f in new_files:
        sha = _blob_sha(root / f)
        cands = [d for d in by_sha.get(sha or "", []) if d.path not in used_old]
        if cands:
            d = min(cands, key=lambda e: (posixpath.basename(e.path) != posixpath.basename(f), e.path))
            used_old.add(d.path)
            binary, _text = _probe(root / f)
            pairs.append(_UnstagedRename(d.path, f, 100, 0, 0, binary, [], []))
        else:
            left_new.append(f)
    left_old = [d for d in deletions if d.path not in used_old]
    if not left_old or not left_new:
        return pairs
    news: dict[str, list[str]] = {}
    for f in left_new:
        p = root / f
        try:
            size = p.stat().st_size
        except OSError:
            continue
        binary, text = _probe(p)
        if binary or not text or size > _RENAME_PAIR_BYTES:
            continue
        content = _read_text(p, _RENAME_PAIR_BYTES)
        if content is not None:
            news[f] = content.splitlines()
    olds: dict[str, list[str]] = {}
    for d in left_old:
        r = run_git(["cat-file", "-s", d.old_sha], project)
        if not r.ok or not r.stdout.strip().isdigit() or int(r.stdout.strip()) > _RENAME_PAIR_BYTES:
            continue
        blob = run_git(["cat-file", "blob", d.old_sha], project)
        if blob.ok and "\0" not in blob.stdout[:4000]:
            olds[d.path] = blob.stdout.splitlines()
    scored: list[tuple[int, str, str]] = []
    budget = _RENAME_PAIR_BUDGET
    for o, olines in olds.items():
        for n, nlines in news.items():
            if budget <= 0:
                break
            budget -= 1
            sm = difflib.SequenceMatcher(None, olines, nlines, autojunk=False)
            if sm.real_quick_ratio() * 100 < RENAME_THRESHOLD or sm.quick_ratio() * 100 < RENAME_THRESHOLD:
                continue
            sim = round(sm.ratio() * 100)
            if sim >= RENAME_THRESHOLD:
                scored.append((sim, o, n))
    scored.sort(key=lambda t: (-t[0], t[1], t[2]))
    taken_new: set[str] = set()
    for _sim, o, n in scored:
        if o in used_old or n in taken_new:
            continue
        used_old.add(o)
        taken_new.add(n)
        add, dele, plus, minus, sim = _line_delta(olds[o], news[n])
        pairs.append(_UnstagedRename(o, n, sim, add, dele, False, plus, minus))
    return pairs
