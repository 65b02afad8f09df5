"""Forgetting one worktree: git's registration of it, then its directory, by reading files.

``git worktree remove`` deletes the directory first and the registration
(``<common dir>/worktrees/<name>``) last; a git killed between the two (a forced cancel kills a
flow run's children while it cleans up) leaves a registration pointing at nothing
(``git worktree list``: *prunable*) in the user's repository. Here the registration is found by
reading the worktree's ``.git`` file and the ``gitdir`` files of the common dir, and goes first,
so no git process can be cut off half-way: what a kill leaves is a directory, which the sweeps
find. Used for the task worktrees (:mod:`.worktree`) and the temporary baseline and pristine
worktrees of acceptance.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from .run import run_git


def admin_dirs(project_top: str, path: Path) -> list[Path]:
    """git's registration directories (``<common dir>/worktrees/<name>``) whose ``gitdir`` file
    points into ``path``: among those of the project's common dir and the one ``path/.git``
    names. Found by reading files, so a git killed half-way cannot hide one; an entry that
    points elsewhere (the user's own worktrees) is never returned."""
    candidates: list[Path] = []
    try:
        head = (path / ".git").read_text(errors="replace").strip() if (path / ".git").is_file() else ""
    except OSError:
        head = ""
    if head.startswith("gitdir:"):
        named = Path(head[len("gitdir:"):].strip())
        candidates.append(named if named.is_absolute() else path / named)
    r = run_git(["rev-parse", "--path-format=absolute", "--git-common-dir"], project_top)
    admin = (Path(r.stdout.strip()) if r.ok else Path(project_top) / ".git") / "worktrees"
    candidates += sorted(admin.iterdir()) if admin.is_dir() else []
    found: list[Path] = []
    for entry in candidates:
        try:
            target = (entry / "gitdir").read_text().strip()
        except OSError:
            continue
        target_dir = os.path.dirname(target if os.path.isabs(target) else os.path.join(entry, target))
        if os.path.realpath(target_dir) == os.path.realpath(path) and entry.parent.name == "worktrees" \
                and os.path.realpath(entry) not in {os.path.realpath(f) for f in found}:
            found.append(entry)
    return found


def forget_worktree(project_top: str, path: Path) -> None:
    """Forget git's registration of *this* worktree only (``git worktree prune`` would also
    forget the user's own worktrees on an unmounted disk), then remove its directory.

    The registration goes first: the directory is what the sweep looks for, so a process killed
    half-way (a forced cancel kills the flow run's children) leaves a directory the sweep removes,
    never a registration pointing at nothing (``git worktree list``: *prunable*)."""
    for entry in admin_dirs(project_top, path):
        shutil.rmtree(entry, ignore_errors=True)
    shutil.rmtree(path, ignore_errors=True)
