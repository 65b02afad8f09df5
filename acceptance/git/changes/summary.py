"""The warnings and notes of a change analysis (docs/acceptance.md §4.2 steps 5 and 8): big files,
lockfiles and edits outside the project (:func:`change_warnings`), then what was left out and why,
submodules, the baseline's dirty state, the agent's commits and the task's file-type hints
(:func:`change_notes`)."""

from __future__ import annotations

import os
import re
from typing import Sequence

from ....core.git.run import run_git
from ..baseline import UNTRACKED_HASH_CAP, Baseline
from ..models import FileStat
from .changeset import ChangeSet

__all__ = ["BIG_FILE_LINES", "LOCKFILE_RE", "big_files", "change_warnings", "change_notes"]

BIG_FILE_LINES = 500
"""A row with add+del above this is a ``bigFileChanges`` entry (docs/acceptance.md §4.2 step 5)."""

LOCKFILE_RE = re.compile(
    r"(^|/)(package-lock\.json|yarn\.lock|pnpm-lock\.yaml|Cargo\.lock|go\.sum|Pipfile\.lock|poetry\.lock|composer\.lock)$"
)

_EXT_HINTS: list[tuple[re.Pattern[str], str, str]] = [
    (re.compile(r"\btypescript\b", re.I), "typescript", ".ts"),
    (re.compile(r"\bjavascript\b", re.I), "javascript", ".js"),
    (re.compile(r"\bpython\b", re.I), "python", ".py"),
    (re.compile(r"\bgo\b", re.I), "go", ".go"),
    (re.compile(r"\bjava\b", re.I), "java", ".java"),
    (re.compile(r"\bvue\b", re.I), "vue", ".vue"),
    (re.compile(r"\bcss\b|样式", re.I), "css", ".css"),
    (re.compile(r"\bhtml\b|页面", re.I), "html", ".html"),
    (re.compile(r"\brust\b", re.I), "rust", ".rs"),
    (re.compile(r"\bmarkdown\b|文档", re.I), "markdown", ".md"),
    (re.compile(r"\bjson\b", re.I), "json", ".json"),
    (re.compile(r"\bsql\b", re.I), "sql", ".sql"),
    (re.compile(r"\byaml\b|\byml\b", re.I), "yaml", ".yml"),
]


def big_files(per_file: Sequence[FileStat]) -> list[str]:
    """``bigFileChanges``: ``"<file> (+<add> -<del>)"`` for each row over :data:`BIG_FILE_LINES`."""
    return [f"{r.file} (+{r.add} -{r.del_})" for r in per_file if r.add + r.del_ > BIG_FILE_LINES]


def change_warnings(per_file: Sequence[FileStat], cs: ChangeSet, prefix: str) -> list[str]:
    """``analysis.warnings``: each lockfile modified, then the edits outside the project's sub-tree
    ``prefix`` (at most 20 named)."""
    warnings = [
        f"Lockfile modified: {r.file} (confirm the dependency change is intended)" for r in per_file if LOCKFILE_RE.search(r.file)
    ]
    if cs.outside:
        warnings.append(f"Edits outside the project's sub-tree {prefix}/ (not counted as this task's output): "
                        + ", ".join(sorted(cs.outside)[:20]) + (" …" if len(cs.outside) > 20 else ""))
    return warnings


def change_notes(cs: ChangeSet, baseline: Baseline, project: str | os.PathLike[str], cur_head: str | None,
                 owned_paths: Sequence[str], hint_files: Sequence[str], task_text: str) -> list[str]:
    """Step 8: ``cs.notes`` followed by the notes on what was left out, submodules, the baseline's
    dirty state, the agent's commits and a detached HEAD, and the file-type hint of ``task_text``
    over ``hint_files``."""
    notes = cs.notes
    notes.extend(_skip_notes(cs, owned_paths))
    if cs.submodules:
        notes.append(
            "Submodules / embedded repositories changed (reported by commit, their contents are not analysed): "
            + ", ".join(
                f"{s.path} ({(s.before or 'none')[:7]} → {(s.after or 'none')[:7]})"
                + (" [embedded repository, not a registered submodule]" if s.path in cs.embedded else "")
                for s in cs.submodules
            )
            + "."
        )
    notes.extend(_history_notes(baseline, project, cur_head))
    again = sorted(set(baseline.pre_existing_changed) & set(hint_files))
    if again:  # a file dirty before work and changed again: its diff runs from the baseline commit
        notes.append(
            f"{len(again)} tracked file(s) already modified before work started were changed again ("
            + ", ".join(again[:10]) + (", …" if len(again) > 10 else "")
            + "): their whole diff since the baseline commit is counted, the edits made before work "
            "included (the pre-work edits cannot be told apart line by line)."
        )
    hint = _ext_hint_note(task_text, hint_files)
    if hint:
        notes.append(hint)
    return notes


def _skip_notes(cs: ChangeSet, owned_paths: Sequence[str]) -> list[str]:
    """What the analysis left out: unattributable untracked files, index-only removals, tool
    caches, the checks' own files, the files the agent's CLI keeps for itself."""
    notes: list[str] = []
    skipped = cs.skipped
    if skipped.unattributable:
        notes.append(
            f"{skipped.unattributable} untracked file(s) beyond the baseline's {UNTRACKED_HASH_CAP}-file hash cap "
            "cannot be attributed and were left out of this analysis."
        )
    if cs.index_only:
        notes.append(f"{len(cs.index_only)} file(s) were removed from git's index but are unchanged on disk (not "
                     "counted as changes): " + ", ".join(cs.index_only[:20]) + (" …" if len(cs.index_only) > 20 else ""))
    if skipped.cache:
        notes.append(f"{skipped.cache} untracked tool-cache file(s) (__pycache__, .pytest_cache, node_modules, …) were "
                     "ignored.")
    if skipped.check_made:
        notes.append(f"{skipped.check_made} untracked file(s) created by the acceptance checks themselves were ignored.")
    if skipped.owned:
        notes.append(f"{skipped.owned} untracked file(s) the agent's CLI keeps for itself ({', '.join(owned_paths)}) "
                     "were ignored.")
    return notes


def _history_notes(baseline: Baseline, project: str | os.PathLike[str], cur_head: str | None) -> list[str]:
    """The baseline's dirty state, commits the agent made, a detached HEAD."""
    notes: list[str] = []
    if baseline.dirty:
        a_cnt = len(baseline.pre_existing_changed)
        b_cnt = len(baseline.pre_existing_untracked)
        notes.append(
            f"The working tree already had {a_cnt} tracked dirty file(s) + {b_cnt} untracked file(s) before work "
            "started; those left as they were are not counted as this round's changes."
        )
    if cur_head and cur_head != baseline.head:
        notes.append(
            "The agent created git commit(s) during the task; the change list merges baseline → current HEAD, "
            "nothing is lost."
        )
    if cur_head and not run_git(["symbolic-ref", "-q", "HEAD"], project).ok:
        notes.append(f"HEAD is detached (at {cur_head[:7]}).")
    return notes


def _ext_hint_note(task_text: str, files: Sequence[str]) -> str | None:
    if not task_text:
        return None
    missing: list[str] = []
    lowered = [f.lower() for f in files]
    for rx, label, suffix in _EXT_HINTS:
        if rx.search(task_text) and not any(suffix in f for f in lowered):
            missing.append(f"{label} → {suffix}")
    if not missing:
        return None
    return (
        f"Task mentions file type(s) ({', '.join(missing)}) but no changed path has that suffix "
        "(hint only, not a failure)."
    )
