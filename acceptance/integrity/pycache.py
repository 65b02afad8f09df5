"""Verification's own bytecode cache (docs/integrity.md): every run of a round sets ``PYTHONPYCACHEPREFIX`` to
:func:`pycache_home`, so an agent's planted ``__pycache__`` is never loaded; :func:`prune_pycache`
drops the bytecode of worktrees that are gone."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

__all__ = ["bytecode_env", "pycache_home", "prune_pycache"]


def pycache_home() -> Path:
    """Verification's bytecode cache: ``<system temp>/tianshu-pycache-<uid>``, made mode 0700.
    A directory of that name owned by another user (who could plant bytecode in it) is not used:
    a fresh private temporary directory is, for this process. Never raises."""
    path = Path(tempfile.gettempdir()) / f"tianshu-pycache-{os.getuid()}"
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        st = path.lstat()
        if st.st_uid == os.getuid() and not path.is_symlink() and not st.st_mode & 0o022:
            return path
    except OSError:
        pass
    global _private_pycache
    if _private_pycache is None:
        _private_pycache = Path(tempfile.mkdtemp(prefix="tianshu-pycache-"))
    return _private_pycache


_private_pycache: Path | None = None


def bytecode_env(prefix: Path | None = None) -> dict[str, str]:
    """The variables every Python run of verification gets: bytecode written to and read from
    ``prefix`` (default :func:`pycache_home`) only, never from the tree, and writing switched back
    on (an empty ``PYTHONDONTWRITEBYTECODE``). With writing off, as many containers and CI
    images set it, every run compiled pytest, its plugins and the standard library from source
    again: a second of CPU per run (docs/design-notes.md, note 61)."""
    return {"PYTHONPYCACHEPREFIX": str(prefix if prefix is not None else pycache_home()), "PYTHONDONTWRITEBYTECODE": ""}


def prune_pycache(prefix: Path) -> None:
    """Drop the bytecode of worktrees that are gone (their temporary paths never come back)."""
    mirror = prefix / Path(tempfile.gettempdir()).resolve().relative_to("/")
    try:
        for entry in mirror.glob("tianshu-baseline-*"):
            if not (Path("/") / entry.relative_to(prefix)).exists():
                shutil.rmtree(entry, ignore_errors=True)
    except OSError:
        pass
