"""What ``git status`` says, read without writing: the porcelain entries and tool caches.

Used by the acceptance baseline and change analysis (:mod:`tianshu_mcp.acceptance.git`) and by the
task worktrees (:mod:`.worktree`): both need the same reading of a working tree.
"""

from __future__ import annotations

import os
import re

from .run import _checked, _rev

CACHE_PATH_RE = re.compile(
    r"(^|/)(__pycache__|\.pytest_cache|\.mypy_cache|\.ruff_cache|\.hypothesis|\.tox|\.nox|\.venv|node_modules)/"
    r"|\.py[co]$"
)
"""port: untracked tool caches (pytest/mypy/ruff caches, ``__pycache__``, ``.venv``, ``node_modules``)
that a repo without a .gitignore accumulates when tests run; never hashed nor counted as task output."""


def status_entries(project: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """``[(XY, path)]`` from ``git status --porcelain=v1 -z --no-renames --untracked-files=all
    --ignore-submodules=dirty`` (per-path entries, never C-quoted; a nested repository is one
    ``?? dir/`` entry).

    Raises:
        GitFailed: git status failed (e.g. a clean/smudge filter program such as ``git-lfs`` is
            missing, a corrupt index): never read as a clean working tree.
    """
    r = _checked(
        ["status", "--porcelain=v1", "-z", "--no-renames", "--untracked-files=all", "--ignore-submodules=dirty"],
        project,
    )
    fields = r.stdout.split("\0")
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(fields):
        entry = fields[i]
        i += 1
        if len(entry) < 4:
            continue
        code, path = entry[:2], entry[3:]
        if "R" in code or "C" in code:  # defensive: a rename carries its source as the next field
            i += 1
        out.append((code, path))
    return out


def worktree_status(project: str | os.PathLike[str]) -> tuple[str | None, list[tuple[str, str]]]:
    """``(HEAD sha or None on an unborn branch, [(XY, path)] uncommitted entries)``, read
    without writing (``GIT_OPTIONAL_LOCKS=0``: no index refresh).

    Raises:
        GitFailed: git refused (see :func:`status_entries`).
    """
    return _rev(project, "HEAD"), status_entries(project)
