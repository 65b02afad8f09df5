""":func:`analyze_changes`: the steps of the change analysis in the order of docs/acceptance.md §4.2
(see the package docstring for the module of each step)."""

from __future__ import annotations

import os
from typing import Iterable, Sequence

from ....core.git.run import _rev, work_tree_root
from ...signals import SignalsReport, scan_changes
from ..baseline import Baseline, _status_entries, parse_porcelain
from ..models import Analysis, Diffstat
from .changeset import ChangeSet
from .scope import drop_outside, normalize_argvs, project_prefix
from .summary import big_files, change_notes, change_warnings
from .tracked import collect_tracked, diff_base, unchanged_pre_existing
from .untracked import collect_untracked, merge_unstaged_renames

__all__ = ["analyze_changes"]


def analyze_changes(
    baseline: Baseline,
    project: str | os.PathLike[str],
    task_text: str = "",
    exclude_untracked: Iterable[str] = (),
    check_argvs: Sequence[Sequence[str]] = (),
    owned_paths: Sequence[str] = (),
) -> Analysis:
    """Net changes since the baseline (docs/acceptance.md §4.2, docs/acceptance.md §8.6). Never modifies the
    repo.

    Tracked rows come from one net diff ``baseline commit → working tree`` with rename detection
    (``-M``; agent commits are merged, a commit reverted in the worktree is not counted): a rename
    is one row for the new path (its own line delta; kept even when 0/0) plus a ``renames`` entry;
    binary rows carry ``binary: true``. Pre-existing dirty files whose content still equals the
    baseline fingerprint are excluded. Untracked files are included whole (new ones, or
    pre-existing ones whose content changed); identical pre-existing ones are excluded. A worktree
    deletion paired with a new untracked file by content (identical, or ≥50 % similar lines) is
    reported as a rename too. Submodules and embedded repositories are reported in
    ``submodules`` (commit before/after) and never descended into. Signals (:mod:`..signals`) are
    scanned over the added/removed lines (new files: all lines), deleted files and ``check_argvs``.

    port: untracked files matching :data:`tianshu_mcp.core.git.status.CACHE_PATH_RE` and those in
    ``exclude_untracked`` (the engine passes the files the acceptance checks themselves created)
    are left out, with a note.

    Args:
        baseline: the pre-work baseline.
        project: project root (the checks' cwd).
        task_text: the task brief (extension-hint note).
        exclude_untracked: untracked files the checks themselves created.
        check_argvs: argv of each acceptance check (files they name are tampering candidates).
        owned_paths: globs of untracked files the agent's CLI keeps for itself (the profile's
            ``ownedPaths``, e.g. ``.aider*``; :func:`.untracked.owned_by_cli`): never the agent's change.

    Returns:
        :class:`Analysis`; a non-repo yields an empty analysis with an explanatory note.

    Raises:
        GitFailed: git failed, or the baseline commit is no longer in the repository.
    """
    root = work_tree_root(project) if baseline.is_repo else None
    if root is None:
        a = Analysis()
        a.notes.append("The project is not a git repository; no change list/diffstat analysis was done.")
        return a
    _changed, untracked_now, _others = parse_porcelain(_status_entries(project))
    unchanged_pre = unchanged_pre_existing(baseline, root)  # 2. unchanged pre-existing dirty files
    cur_head = _rev(project, "HEAD")
    base = diff_base(project, baseline)  # 3. one net diff base → worktree
    cs = collect_tracked(project, root, baseline, base, unchanged_pre, untracked_now)
    collect_untracked(cs, root, baseline, untracked_now, exclude_untracked, owned_paths)  # 4. untracked files
    merge_unstaged_renames(cs, project, root)
    prefix = project_prefix(project, root)
    drop_outside(cs, prefix)
    # 5. totals, big files, lockfiles; the signals
    per_file = cs.file_stats()
    changed_files = cs.changed_files()
    warnings = change_warnings(per_file, cs, prefix)
    scanned = _scan(cs, changed_files, check_argvs, project, prefix)
    notes = change_notes(cs, baseline, project, cur_head, owned_paths, [*changed_files, *cs.untracked_files],
                         task_text)  # 8. notes
    return Analysis(
        changed_files=changed_files,
        untracked_files=cs.untracked_files,
        diffstat=Diffstat(total_add=sum(r.add for r in per_file), total_del=sum(r.del_ for r in per_file),
                          per_file=per_file),
        signals=scanned.signals,
        big_file_changes=big_files(per_file),
        warnings=warnings,
        notes=notes,
        renames=cs.renames,
        submodules=cs.submodules,
        tampering=scanned.tampering,
        outside_project=sorted(cs.outside),
    )


def _scan(cs: ChangeSet, changed_files: Sequence[str], check_argvs: Sequence[Sequence[str]],
          project: str | os.PathLike[str], prefix: str) -> SignalsReport:
    """The signals (:func:`..signals.scan_changes`) over the change set's lines, its changed,
    untracked, rename-source and deleted files, and the check argvs made project-relative."""
    return scan_changes(
        cs.added,
        cs.removed,
        cs.deleted_files,
        [*changed_files, *cs.untracked_files, *(r.from_ for r in cs.renames)],
        normalize_argvs(check_argvs, project),
        project_prefix=prefix,
    )
