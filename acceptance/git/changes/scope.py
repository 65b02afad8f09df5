"""Where a project sits in its repository: a project that is a sub-tree of its repository (a
monorepo package) owns only the changes under it (:func:`drop_outside`); check argvs are made
project-relative for the signals (:func:`normalize_argvs`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

from .changeset import ChangeSet

__all__ = ["project_prefix", "drop_outside", "normalize_argvs"]


def project_prefix(project: str | os.PathLike[str], root: Path) -> str:
    """The project's path relative to the repository top level, POSIX (``""`` at the top)."""
    try:
        rel = os.path.relpath(os.path.realpath(project), os.path.realpath(root))
    except ValueError:
        return ""
    rel = rel.replace(os.sep, "/")
    return "" if rel == "." or rel.startswith("..") else rel


def drop_outside(cs: ChangeSet, prefix: str) -> None:
    """Changes elsewhere in the repository than the project's sub-tree ``prefix`` are not this
    task's output: they move to ``cs.outside`` (a signal) and leave the change list, the diffstat,
    the lines and the zero-change gate (docs/robustness.md §3: repository-level gate). Nothing for a project
    at the top level (``prefix`` ``""``)."""
    if not prefix:
        return

    def inside(path: str) -> bool:
        return path == prefix or path.startswith(prefix + "/")

    for f in [f for f in cs.rows if not inside(f)]:
        cs.rows.pop(f)
        cs.outside.append(f)
    for f in [f for f in cs.untracked_files if not inside(f)]:
        cs.untracked_files.remove(f)
        cs.untracked_rows.pop(f, None)
        cs.outside.append(f)
    cs.renames = [r for r in cs.renames if inside(r.to)]
    cs.submodules = [sm for sm in cs.submodules if inside(sm.path)]
    for table in (cs.added, cs.removed):
        for f in [f for f in table if not inside(f)]:
            table.pop(f)
    cs.deleted_files = [f for f in cs.deleted_files if inside(f)]


def normalize_argvs(check_argvs: Sequence[Sequence[str]], project: str | os.PathLike[str]) -> list[list[str]]:
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
