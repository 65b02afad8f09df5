"""Ignored files the agent wrote (docs/integrity.md): git's view of a tree leaves them out, but a test run
loads them (an ignored ``calc/__init__.py`` shadows ``calc.py``, an ignored ``conftest.py`` hooks
pytest). :func:`ignored_snapshot` records the ignored entries when the task starts;
:func:`planted` lists the code and test-infrastructure files among those that are new or changed
since. The pristine tree never contains them, so they force a pristine run.

Bytecode caches are not read here: verification's runs load no bytecode from the tree
(``PYTHONPYCACHEPREFIX`` points to verification's own cache, see :func:`.pycache.pycache_home`).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Callable, Mapping

from ..git import run_git

__all__ = ["ignored_snapshot", "planted", "CODE_SUFFIXES", "SKIP_DIRS"]

CODE_SUFFIXES = (".py", ".pyc", ".pyo", ".pth", ".so", ".pyd", ".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", ".jsx", ".tsx",
                 ".go", ".rs", ".json", ".toml", ".ini", ".cfg", ".yml", ".yaml")
"""Ignored files with these endings can change what a test run loads or how it is configured. A
``.pyc`` outside ``__pycache__`` is imported when no source is beside it (breaker finding: the
agent deleted ``calc.py`` and left a fixed ``calc.pyc``); the ones in ``__pycache__`` are never read
(verification's bytecode lives elsewhere) and are not listed."""
SKIP_DIRS = frozenset({"node_modules", ".venv", "venv", ".tox", ".nox", "__pycache__", ".pytest_cache",
                       ".mypy_cache", ".ruff_cache", "target", ".git", ".cache", ".nyc_output", "coverage",
                       ".gradle", ".next", ".turbo", ".parcel-cache"})
"""Dependency and cache directories at the repository's top: not listed (the worktrees link the
dependency ones)."""
MAX_HASH_BYTES = 4 << 20
MAX_WALK_FILES = 5000


def _sig(path: Path) -> str:
    try:
        st = path.stat()
        if st.st_size > MAX_HASH_BYTES:
            return f"size:{st.st_size}:{st.st_mtime_ns}"
        return hashlib.sha1(path.read_bytes()).hexdigest()
    except OSError:
        return "unreadable"


_CACHES_ANYWHERE = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".git"})


def _skipped(rel: str) -> bool:
    """Left out: a dependency or cache directory at the top (``node_modules/…``, ``.venv/…``) and
    bytecode or tool caches anywhere; a ``tests/coverage/conftest.py`` is not left out."""
    parts = rel.rstrip("/").split("/")
    return parts[0] in SKIP_DIRS or any(p in _CACHES_ANYWHERE for p in parts)


def ignored_snapshot(top: str | os.PathLike[str]) -> dict[str, str]:
    """The ignored entries of a repository's work tree: ``{path: sha1}`` for files and
    ``{path/: "dir"}`` for wholly ignored directories (not descended), dependency and cache
    directories left out. Never raises (git failing gives ``{}``)."""
    root = Path(top)
    r = run_git(["ls-files", "--others", "--ignored", "--exclude-standard", "--directory", "-z"], root)
    out: dict[str, str] = {}
    for rel in r.stdout.split("\0") if r.ok else []:
        if not rel or _skipped(rel):
            continue
        out[rel] = "dir" if rel.endswith("/") else _sig(root / rel)
    return out


def planted(top: str | os.PathLike[str], before: Mapping[str, str] | None,
            is_infra: Callable[[str], bool]) -> list[str]:
    """Ignored code or test-infrastructure files that are new or changed since ``before``
    (:func:`ignored_snapshot` at the task's start; None: nothing is known, nothing is listed)."""
    if before is None:
        return []
    root = Path(top)
    found: list[str] = []

    def consider(rel: str) -> None:
        if (rel.endswith(CODE_SUFFIXES) or is_infra(rel)) and before.get(rel) != _sig(root / rel):
            found.append(rel)

    for rel, sig in ignored_snapshot(root).items():
        if sig != "dir":
            consider(rel)
            continue
        if rel in before:
            continue
        walked = 0
        for dirpath, dirnames, filenames in os.walk(root / rel):
            dirnames[:] = [d for d in dirnames if d not in _CACHES_ANYWHERE]
            for name in filenames:
                walked += 1
                if walked > MAX_WALK_FILES:
                    break
                consider(Path(dirpath, name).relative_to(root).as_posix())
    return sorted(found)
