"""Git baseline, change analysis and the built-in ``git-diff-check`` (docs/acceptance.md §4).

This module holds :func:`git_diff_check` and re-exports the git side of acceptance, split by
concept (imports point one way, down this list):

* :mod:`tianshu_mcp.core.git`: running ``git`` (:func:`run_git`, :class:`GitFailed`), repository
  probes and the porcelain status (shared with the task worktrees);
* :mod:`.files`: file fingerprints, git blob ids and content probes;
* :mod:`.baseline`: the pre-work :class:`Baseline` (§4.1);
* :mod:`.models`: the :class:`Analysis` shapes (``report.json.analysis``);
* :mod:`.diff`: reading ``git diff`` (numstat, raw, ``-U0`` lines);
* :mod:`.renames`: unrecorded renames paired by content;
* :mod:`.changes`: :func:`analyze_changes` (§4.2), signals from :mod:`..signals`.

Everything runs plain ``git`` argv (no shell, no GitPython): stdin at EOF, own session, output to
temp files (never a pipe a grandchild could hold), a timeout (default 120000 ms) that kills the
whole group, ``-c core.quotepath=off`` and NUL-separated (``-z``) porcelain/numstat so paths with
spaces or non-ASCII characters arrive verbatim. ``GIT_OPTIONAL_LOCKS=0`` keeps ``git status`` from
refreshing the index: nothing here ever writes to the repository.

Paths in :class:`Baseline` and :class:`Analysis` are relative to the repository's top level
(git porcelain's convention), POSIX separators.

Deliberate deviations from the original (each marked ``port:`` in the code):
* the tracked change list is one net diff ``baseline commit → working tree`` with rename detection
  (``-M``): a rename is one row for the new path carrying its own line delta, plus a ``renames``
  entry; a worktree ``mv`` git has not recorded (deleted file + new untracked file) is paired by
  content; a commit the agent made and reverted in the worktree is not counted;
* submodules (and repositories nested inside the work tree) are reported by commit
  (``submodules``), never descended into; ``--ignore-submodules=dirty`` keeps their content out;
* signals cover more than §4.4 (debug leftovers and agent tampering, see :mod:`.signals`), computed
  from added *and* removed lines;
* a pre-existing deletion that is still deleted is recorded (hash ``"deleted"``) and excluded
  like any unchanged pre-existing dirty file;
* a baseline taken in a repository without commits diffs against the empty tree, so files the
  agent committed or staged are not lost; ``git-diff-check`` does the same instead of failing;
* ``+``-lines are attributed by tracking diff headers, so an added line that itself starts with
  ``++`` still counts;
* untracked tool caches (:data:`CACHE_PATH_RE`) and files the acceptance checks themselves created
  (passed by the engine) are not task output: a repo without a .gitignore would otherwise pass the
  zero-change gate just because pytest wrote ``.pytest_cache``.
"""

from __future__ import annotations

import os
from typing import Any

from ...core.git.run import (
    _BASE_ARGS as _BASE_ARGS,
    _DIFF_OPTS,
    GIT_TIMEOUT_MS,
    GitFailed,
    GitResult,
    _checked,
    _empty_tree,
    _git_env as _git_env,
    _rev,
    _toplevel as _toplevel,
    _valid_commit,
    git_failed,
    is_git_repo,
    resolve_commit,
    run_git,
)
from ...core.git.status import CACHE_PATH_RE, worktree_status
from ..check_result import CheckResult
from ..signals import Signals, SignalsReport, TamperingItem, scan_signals
from .baseline import (
    DELETED_HASH,
    _status_entries as _status_entries,
    NON_REPO_MESSAGE,
    UNTRACKED_HASH_CAP,
    Baseline,
    capture_baseline,
    list_untracked,
    parse_porcelain,
)
from .changes import BIG_FILE_LINES, LOCKFILE_RE, analyze_changes
from .files import MAX_HASH_BYTES, _fingerprint as _fingerprint, file_sha1
from .models import Analysis, Diffstat, FileStat, Rename, Submodule

__all__ = [
    "Baseline",
    "Analysis",
    "Diffstat",
    "FileStat",
    "Signals",
    "SignalsReport",
    "TamperingItem",
    "Rename",
    "Submodule",
    "GitResult",
    "GitFailed",
    "run_git",
    "capture_baseline",
    "analyze_changes",
    "git_diff_check",
    "scan_signals",
    "parse_porcelain",
    "is_git_repo",
    "list_untracked",
    "MAX_HASH_BYTES",
    "UNTRACKED_HASH_CAP",
    "BIG_FILE_LINES",
    "CACHE_PATH_RE",
    "DELETED_HASH",
    "GIT_CHECK_NAME",
    "GIT_TIMEOUT_MS",
    "LOCKFILE_RE",
    "NON_REPO_MESSAGE",
    "file_sha1",
    "git_failed",
    "resolve_commit",
    "worktree_status",
]


# --------------------------------------------------------------------------------------------
# git-diff-check (§4.3)
# --------------------------------------------------------------------------------------------

GIT_CHECK_NAME = "git-diff-check"


def git_diff_check(project: str | os.PathLike[str], baseline: Baseline) -> dict[str, Any]:
    """The built-in whitespace check (docs/acceptance.md §4.3), a CheckResult dict (§1.3).

    With a valid baseline commit: ``git diff --check <base> HEAD`` when HEAD moved (returned if it
    fails), then ``git diff --check HEAD``. Without one: ``git diff --check HEAD`` (port: against the
    empty tree when the repo has no commit, instead of failing). A non-repo gives a skip result.
    ``outputTail`` = last 2000 chars of stdout + last 2000 of stderr; ``durationMs`` sums the calls.
    Untracked files are not checked.

    Raises:
        GitFailed: git failed for another reason than whitespace problems (exit 2).
    """
    if not baseline.is_repo or not is_git_repo(project):
        return CheckResult.skip(GIT_CHECK_NAME, "git diff --check", "not a git repository, skipped").to_json()
    base = baseline.head if baseline.head and _valid_commit(project, baseline.head) else None
    cmd = f"git diff --check (base={base[:7]})" if base else "git diff --check"
    cur_head = _rev(project, "HEAD")
    if base is None and baseline.head is None and cur_head:
        base = _empty_tree(project)  # port: baseline had no commit; check what the agent committed too
    total_ms = 0
    result: GitResult | None = None
    if base and cur_head and cur_head != base:
        r1 = _checked(["diff", "--check", "-M", *_DIFF_OPTS, base, cur_head, "--"], project, ok_status=(0, 2))
        total_ms += r1.duration_ms
        if r1.status != 0:
            result = r1
    if result is None:
        target = cur_head or _empty_tree(project)
        r2 = _checked(["diff", "--check", "-M", *_DIFF_OPTS, target, "--"], project, ok_status=(0, 2))
        total_ms += r2.duration_ms
        result = r2
    return CheckResult(
        name=GIT_CHECK_NAME,
        cmd=cmd,
        passed=result.status == 0,
        duration_ms=total_ms,
        exit_code=result.status,
        output_tail=result.stdout[-2000:] + result.stderr[-2000:],
        timeout=result.timed_out,
    ).to_json()
