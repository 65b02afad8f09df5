"""Net changes since the baseline: :func:`analyze_changes` (20-acceptance §4.2, issue §6).

One net diff ``baseline commit → working tree`` (:mod:`.git_diff`), untracked files counted whole,
unrecorded renames paired by content (:mod:`.git_renames`), pre-existing dirty files that are
unchanged excluded by their baseline fingerprint (:mod:`.git_baseline`), submodules reported by
commit, changes outside a monorepo project's sub-tree listed apart, and the signals of
:mod:`.signals` scanned over the added and removed lines. The result is an :class:`.git_models.Analysis`.
Part of the git side of acceptance (see :mod:`.git`, which re-exports the public names).
"""

from __future__ import annotations

import fnmatch
import os
import re
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..core.i18n import _
from .git_baseline import (
    CACHE_PATH_RE,
    DELETED_HASH,
    UNTRACKED_HASH_CAP,
    Baseline,
    _status_entries,
    parse_porcelain,
)
from .git_diff import (
    _ZERO_SHA_RE,
    GITLINK_MODE,
    _changed_lines,
    _numstat,
    _raw,
    _RawEntry,
)
from .git_files import (
    _count_lines,
    _fingerprint,
    _probe,
    _read_text,
    _same_blob,
    _sub_head,
)
from .git_models import Analysis, Diffstat, FileStat, Rename, Submodule
from .git_renames import _pair_unstaged_renames
from .git_run import (
    GitFailed,
    _empty_tree,
    _rev,
    _toplevel,
    _valid_commit,
    is_git_repo,
    run_git,
)
from .signals import scan_changes

BIG_FILE_LINES = 500
"""A row with add+del above this is a ``bigFileChanges`` entry (20-acceptance §4.2 step 5)."""

LOCKFILE_RE = re.compile(
    r"(^|/)(package-lock\.json|yarn\.lock|pnpm-lock\.yaml|Cargo\.lock|go\.sum|Pipfile\.lock|poetry\.lock|composer\.lock)$"
)

_SIGNAL_READ_CAP = 4 * 1024 * 1024


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


def _project_prefix(project: str | os.PathLike[str], root: Path) -> str:
    """The project's path relative to the repository top level, POSIX (``""`` at the top)."""
    try:
        rel = os.path.relpath(os.path.realpath(project), os.path.realpath(root))
    except ValueError:
        return ""
    rel = rel.replace(os.sep, "/")
    return "" if rel == "." or rel.startswith("..") else rel


def _normalize_argvs(check_argvs: Sequence[Sequence[str]], project: str | os.PathLike[str]) -> list[list[str]]:
    """Check argvs with absolute tokens inside the project made project-relative."""
    proj = os.path.realpath(project)
    out: list[list[str]] = []
    for argv in check_argvs:
        row: list[str] = []
        for tok in argv:
            t = str(tok)
            if os.path.isabs(t):
                real = os.path.realpath(t)
                if real == proj or real.startswith(proj.rstrip(os.sep) + os.sep):
                    t = os.path.relpath(real, proj).replace(os.sep, "/")
            row.append(t)
        out.append(row)
    return out


def owned_by_cli(path: str, globs: Sequence[str]) -> bool:
    """True when ``path`` (repo-relative, ``/``-separated) matches one of ``globs``: a glob with a
    ``/`` matches the whole path, one without matches the first path component (``.aider*``
    covers ``.aider.chat.history.md`` and ``.aider.tags.cache.v4/cache.db`` at the root)."""
    first = path.split("/", 1)[0]
    return any(fnmatch.fnmatchcase(path, g) if "/" in g else fnmatch.fnmatchcase(first, g) for g in globs)


def analyze_changes(
    baseline: Baseline,
    project: str | os.PathLike[str],
    task_text: str = "",
    exclude_untracked: Iterable[str] = (),
    check_argvs: Sequence[Sequence[str]] = (),
    owned_paths: Sequence[str] = (),
) -> Analysis:
    """Net changes since the baseline (20-acceptance §4.2, issue §6). Never modifies the repo.

    Tracked rows come from one net diff ``baseline commit → working tree`` with rename detection
    (``-M``; agent commits are merged, a commit reverted in the worktree is not counted): a rename
    is one row for the new path (its own line delta; kept even when 0/0) plus a ``renames`` entry;
    binary rows carry ``binary: true``. Pre-existing dirty files whose content still equals the
    baseline fingerprint are excluded. Untracked files are included whole (new ones, or
    pre-existing ones whose content changed); identical pre-existing ones are excluded. A worktree
    deletion paired with a new untracked file by content (identical, or ≥50 % similar lines) is
    reported as a rename too. Submodules and embedded repositories are reported in
    ``submodules`` (commit before/after) and never descended into. Signals (:mod:`.signals`) are
    scanned over the added/removed lines (new files: all lines), deleted files and ``check_argvs``.

    port: untracked files matching :data:`CACHE_PATH_RE` and those in ``exclude_untracked`` (the
    engine passes the files the acceptance checks themselves created) are left out, with a note.

    Args:
        baseline: the pre-work baseline.
        project: project root (the checks' cwd).
        task_text: the task brief (extension-hint note).
        exclude_untracked: untracked files the checks themselves created.
        check_argvs: argv of each acceptance check (files they name are tampering candidates).
        owned_paths: globs of untracked files the agent's CLI keeps for itself (the profile's
            ``ownedPaths``, e.g. ``.aider*``; :func:`owned_by_cli`): never the agent's change.

    Returns:
        :class:`Analysis`; a non-repo yields an empty analysis with an explanatory note.
    """
    if not baseline.is_repo or not is_git_repo(project):
        a = Analysis()
        a.notes.append("The project is not a git repository; no change list/diffstat analysis was done.")
        return a
    root = _toplevel(project)
    entries = _status_entries(project)
    _changed, untracked_now, _others = parse_porcelain(entries)
    notes: list[str] = []

    # 2. pre-existing dirty files that are unchanged since the baseline
    unchanged_pre: set[str] = set()
    for f in baseline.pre_existing_changed:
        base_hash = baseline.pre_dirty_hashes.get(f) or baseline.pre_untracked_hashes.get(f)
        if not base_hash:
            continue
        if base_hash == DELETED_HASH:
            if not os.path.lexists(root / f):
                unchanged_pre.add(f)
            continue
        if _fingerprint(root, f) == base_hash:
            unchanged_pre.add(f)

    # 3. tracked diff since the baseline: one net diff base → worktree
    cur_head = _rev(project, "HEAD")
    base: str
    if baseline.head and _valid_commit(project, baseline.head):
        base = baseline.head
    elif baseline.head is None:
        base = _empty_tree(project)  # port: the baseline repo had no commit yet
    else:
        # input issue: measuring against whatever HEAD is now let `rm -rf .git && git init` pass
        raise GitFailed(_("the baseline commit {commit} is no longer in the repository at {project} "
                          "(its history was replaced or rewritten and pruned): the work cannot be measured against "
                          "the pre-work state").format(commit=baseline.head[:12], project=project))
    raw = _raw(project, [base])
    stats = _numstat(project, [base])
    for e in raw:  # a pre-existing untracked file the agent only staged or committed, unchanged
        h = baseline.pre_untracked_hashes.get(e.path)
        if h and e.path not in unchanged_pre and _fingerprint(root, e.path) == h:
            unchanged_pre.add(e.path)

    def excluded(e: _RawEntry) -> bool:
        if e.path not in unchanged_pre:
            return False
        return e.old_path is None or e.old_path in unchanged_pre

    rows: dict[str, list[Any]] = {}
    renames: list[Rename] = []
    submodules: list[Submodule] = []
    deletions: list[_RawEntry] = []
    skip_lines: set[str] = set(unchanged_pre)
    untracked_set = set(untracked_now)
    index_only: list[str] = []
    for e in raw:
        if GITLINK_MODE in (e.old_mode, e.new_mode):
            skip_lines.add(e.path)
            if e.path in unchanged_pre:
                continue
            before = e.old_sha if e.old_mode == GITLINK_MODE and not _ZERO_SHA_RE.match(e.old_sha) else None
            after: str | None = None
            if e.new_mode == GITLINK_MODE:
                after = e.new_sha if not _ZERO_SHA_RE.match(e.new_sha) else _sub_head(root / e.path)
            if before != after:
                submodules.append(Submodule(path=e.path, before=before, after=after))
            continue
        if excluded(e):
            continue
        if e.status == "D" and e.path in untracked_set and _same_blob(root / e.path, e.old_sha):
            index_only.append(e.path)  # removed from the index only (`git rm --cached`): the file is unchanged
            skip_lines.add(e.path)
            continue
        add, dele, binary = stats.get(e.path, (0, 0, False))
        is_rename = e.status == "R" and e.old_path is not None
        if not is_rename and add == 0 and dele == 0 and not binary and e.status not in ("A", "D") \
                and e.old_mode == e.new_mode:
            continue  # stat-only: the content and the mode are what they were
        rows[e.path] = [add, dele, binary]
        if is_rename:
            renames.append(Rename(from_=e.old_path or "", to=e.path, similarity=e.score if e.score is not None else 100))
        if e.status == "D":
            deletions.append(e)
    added, removed = _changed_lines(project, [base], skip_lines)

    # 4. untracked files (and embedded repositories)
    pre_untracked = set(baseline.pre_existing_untracked)
    unattributable_set = (
        set([f for f in baseline.pre_existing_untracked if not CACHE_PATH_RE.search(f)][UNTRACKED_HASH_CAP:])
        if baseline.untracked_hash_truncated
        else set()
    )
    unattributable = 0
    index_only_set = set(index_only)
    excluded_untracked = set(exclude_untracked)
    n_cache = n_check_made = n_owned = 0
    untracked_files: list[str] = []
    new_untracked: list[str] = []
    embedded: list[str] = []
    untracked_rows: dict[str, FileStat] = {}
    for f in untracked_now:
        if f in rows or f in index_only_set:
            continue
        if CACHE_PATH_RE.search(f):
            n_cache += 1
            continue
        if f in excluded_untracked:
            n_check_made += 1
            continue
        if owned_paths and owned_by_cli(f, owned_paths):
            n_owned += 1
            continue
        if f in unattributable_set:
            unattributable += 1
            continue
        path = root / f
        if f.endswith("/"):  # git lists a nested repository as one directory entry: not descended into
            fp = _fingerprint(root, f)
            if f in pre_untracked and fp == (baseline.pre_untracked_hashes.get(f) or baseline.pre_dirty_hashes.get(f)):
                continue
            sub = f.rstrip("/")
            submodules.append(Submodule(path=sub, before=None, after=_sub_head(root / sub)))
            embedded.append(sub)
            continue
        if f in pre_untracked:
            base_hash = baseline.pre_untracked_hashes.get(f) or baseline.pre_dirty_hashes.get(f)
            if base_hash and _fingerprint(root, f) == base_hash:
                continue
            notes.append(
                f"Untracked file {f} existed before work started but its content changed; it is counted whole "
                "in this round's changes (line-level attribution is not possible)."
            )
        else:
            new_untracked.append(f)
        untracked_files.append(f)
        binary, is_text = _probe(path)
        if binary:
            untracked_rows[f] = FileStat(file=f, add=0, del_=0, binary=True)
        else:
            untracked_rows[f] = FileStat(file=f, add=_count_lines(path), del_=0)
        if is_text:
            content = _read_text(path, _SIGNAL_READ_CAP)
            if content is not None:
                added[f] = content.split("\n")

    # port: a worktree move git has not recorded (deleted tracked file + new untracked file)
    unstaged = _pair_unstaged_renames(project, root, deletions, new_untracked)
    for p in unstaged:
        rows.pop(p.old, None)
        untracked_rows.pop(p.new, None)
        untracked_files.remove(p.new)
        rows[p.new] = [p.add, p.dele, p.binary]
        renames.append(Rename(from_=p.old, to=p.new, similarity=p.similarity))
        removed.pop(p.old, None)
        added.pop(p.new, None)
        if p.added:
            added[p.new] = p.added
        if p.removed:
            removed[p.new] = p.removed
    if unstaged:
        notes.append(
            f"{len(unstaged)} rename(s) not recorded by git were detected by content: "
            + ", ".join(f"{p.old} → {p.new}" for p in unstaged)
            + "."
        )
    paired_old = {p.old for p in unstaged}
    deleted_files = [e.path for e in deletions if e.path not in paired_old]

    # a project that is a sub-tree of its repository (a monorepo package): changes elsewhere in the
    # repository are not this task's output; they are listed as a signal and left out of the
    # change list, the diffstat and the zero-change gate (input issue: repository-level gate)
    prefix = _project_prefix(project, root)
    outside: list[str] = []
    if prefix:
        def inside(path: str) -> bool:
            return path == prefix or path.startswith(prefix + "/")

        for f in [f for f in rows if not inside(f)]:
            rows.pop(f)
            outside.append(f)
        for f in [f for f in untracked_files if not inside(f)]:
            untracked_files.remove(f)
            untracked_rows.pop(f, None)
            outside.append(f)
        renames = [r for r in renames if inside(r.to)]
        submodules = [sm for sm in submodules if inside(sm.path)]
        for table in (added, removed):
            for f in [f for f in table if not inside(f)]:
                table.pop(f)
        deleted_files = [f for f in deleted_files if inside(f)]

    per_file = [FileStat(file=f, add=a_, del_=d_, binary=True if b_ else None) for f, (a_, d_, b_) in rows.items()]
    per_file += list(untracked_rows.values())
    changed_files = list(rows)
    for s in submodules:
        if s.path not in embedded and s.path not in rows:
            changed_files.append(s.path)

    # 5. totals, big files, lockfiles
    total_add = sum(r.add for r in per_file)
    total_del = sum(r.del_ for r in per_file)
    big = [f"{r.file} (+{r.add} -{r.del_})" for r in per_file if r.add + r.del_ > BIG_FILE_LINES]
    warnings = [
        f"Lockfile modified: {r.file} (confirm the dependency change is intended)" for r in per_file if LOCKFILE_RE.search(r.file)
    ]
    if outside:
        warnings.append(f"Edits outside the project's sub-tree {prefix}/ (not counted as this task's output): "
                        + ", ".join(sorted(outside)[:20]) + (" …" if len(outside) > 20 else ""))
    scanned = scan_changes(
        added,
        removed,
        deleted_files,
        [*changed_files, *untracked_files, *(r.from_ for r in renames)],
        _normalize_argvs(check_argvs, project),
        project_prefix=_project_prefix(project, root),
    )

    # 8. notes
    if unattributable:
        notes.append(
            f"{unattributable} untracked file(s) beyond the baseline's {UNTRACKED_HASH_CAP}-file hash cap cannot be "
            "attributed and were left out of this analysis."
        )
    if index_only:
        notes.append(f"{len(index_only)} file(s) were removed from git's index but are unchanged on disk (not "
                     "counted as changes): " + ", ".join(index_only[:20]) + (" …" if len(index_only) > 20 else ""))
    if n_cache:
        notes.append(f"{n_cache} untracked tool-cache file(s) (__pycache__, .pytest_cache, node_modules, …) were ignored.")
    if n_check_made:
        notes.append(f"{n_check_made} untracked file(s) created by the acceptance checks themselves were ignored.")
    if n_owned:
        notes.append(f"{n_owned} untracked file(s) the agent's CLI keeps for itself ({', '.join(owned_paths)}) were "
                     "ignored.")
    if submodules:
        notes.append(
            "Submodules / embedded repositories changed (reported by commit, their contents are not analysed): "
            + ", ".join(
                f"{s.path} ({(s.before or 'none')[:7]} → {(s.after or 'none')[:7]})"
                + (" [embedded repository, not a registered submodule]" if s.path in embedded else "")
                for s in submodules
            )
            + "."
        )
    if baseline.dirty:
        a_cnt = len(baseline.pre_existing_changed)
        b_cnt = len(baseline.pre_existing_untracked)
        notes.append(
            f"The working tree already had {a_cnt} tracked dirty file(s) + {b_cnt} untracked file(s) before work "
            "started; this report attributes only net changes relative to the baseline."
        )
    if cur_head and cur_head != baseline.head:
        notes.append(
            "The agent created git commit(s) during the task; the change list merges baseline → current HEAD, "
            "nothing is lost."
        )
    if cur_head and not run_git(["symbolic-ref", "-q", "HEAD"], project).ok:
        notes.append(f"HEAD is detached (at {cur_head[:7]}).")
    hint = _ext_hint_note(task_text, [*changed_files, *untracked_files])
    if hint:
        notes.append(hint)
    return Analysis(
        changed_files=changed_files,
        untracked_files=untracked_files,
        diffstat=Diffstat(total_add=total_add, total_del=total_del, per_file=per_file),
        signals=scanned.signals,
        big_file_changes=big,
        warnings=warnings,
        notes=notes,
        renames=renames,
        submodules=submodules,
        tampering=scanned.tampering,
        outside_project=sorted(outside),
    )
