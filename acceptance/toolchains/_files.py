"""A bounded search for project files, shared by the ``detect`` functions of several toolchains
(test files of RSpec, Minitest, Bun and Deno, .NET project files).

Not a toolchain (the registry skips modules whose name starts with ``_``). Never raises: an
unreadable directory is skipped.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Iterator

SKIP_DIRS = frozenset({"node_modules", "vendor", "bin", "obj", "target", "build", "dist", "deps", "_build",
                       "TestResults", "packages", "__pycache__"})
"""Directories never searched (dependencies, build output); hidden directories are skipped too."""


def walk_files(start: Path, wanted: Callable[[str], bool], *, max_depth: int = 6,
               max_entries: int = 5000) -> Iterator[Path]:
    """Files below ``start`` whose name satisfies ``wanted``, in a stable order (sorted per
    directory, breadth of one directory at a time).

    Args:
        start: the directory to search (nothing when it is not one).
        wanted: ``file name -> bool``.
        max_depth: directories deeper than this below ``start`` are not entered.
        max_entries: stop after looking at this many files (a huge tree costs a bounded time).
    """
    if not start.is_dir():
        return
    seen = 0
    for dirpath, dirs, files in os.walk(start, onerror=lambda _exc: None):
        depth = len(Path(dirpath).relative_to(start).parts)
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith(".") and depth < max_depth)
        for name in sorted(files):
            seen += 1
            if seen > max_entries:
                return
            if wanted(name):
                yield Path(dirpath) / name


def has_file(start: Path, wanted: Callable[[str], bool], **limits: int) -> bool:
    """Whether :func:`walk_files` finds at least one file."""
    return next(walk_files(start, wanted, **limits), None) is not None
