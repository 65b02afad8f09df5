"""Scanning the package's source with ``ast`` (nothing imported or run): the shared loop of the
tests that hold a rule over every module of some layers."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable

ROOT = Path(__file__).resolve().parent.parent


def offenders(layers: Iterable[str], find: Callable[[str], list[int]], skip: Iterable[Path] = ()) -> list[str]:
    """``"<path>:<line>"`` for each line ``find(source)`` reports in the ``*.py`` files under the
    folders ``layers`` (relative to the repository root), files in ``skip`` left out."""
    skipped = set(skip)
    return [
        f"{path.relative_to(ROOT)}:{line}"
        for layer in layers
        for path in sorted((ROOT / layer).rglob("*.py"))
        if path not in skipped
        for line in find(path.read_text(encoding="utf-8"))
    ]
