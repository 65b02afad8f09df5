"""``weakenedTests`` (docs/acceptance.md §8.6), removed assertions without a replacement:
:func:`scan_removed_asserts`. (Trivially true assertions added are counted with the other added-line rules,
:mod:`.scan`.)"""

from __future__ import annotations

import re
from collections import Counter
from typing import Sequence

from .context import ScanContext, take_match
from .rules import _ASSERT_RE, _is_comment, _lang, _norm, _snippet, _test_def, is_test_path

__all__ = ["scan_removed_asserts"]


def scan_removed_asserts(ctx: ScanContext, deleted_names: dict[str, set[str]]) -> None:
    """Count into ``ctx``, per test file still there, the removed assertion lines not matched by an
    identical added assertion anywhere (whitespace ignored) nor offset by another added assertion
    in the same file. Lines inside the body of a deleted test (``deleted_names``, from
    :func:`.deleted.scan_deleted_tests`) are left to ``deletedTests``."""
    added_total, added_by_file = _added_asserts(ctx)
    leftovers: dict[str, list[str]] = {}
    for path, lines in _removed_asserts(ctx, deleted_names).items():
        for line in lines:
            if not take_match(added_total, added_by_file, path, _norm(line)):
                leftovers.setdefault(path, []).append(line)
    for path, lines in leftovers.items():
        spare = sum(added_by_file.get(path, Counter()).values())
        net = len(lines) - spare
        if net > 0:
            ctx.hit("weakenedTests", path,
                    f"{net} assertion(s) removed without replacement, e.g. `{_snippet(lines[-net])}`", count=net)


def _added_asserts(ctx: ScanContext) -> tuple[Counter[str], dict[str, Counter[str]]]:
    """The assertions added to test files (whitespace-normalised): in all, and per file."""
    total: Counter[str] = Counter()
    by_file: dict[str, Counter[str]] = {}
    for path, lines in ctx.added.items():
        if not is_test_path(path):
            continue
        lang = _lang(path)
        for line in lines:
            stripped = line.strip()
            if stripped and not _is_comment(stripped, lang) and _ASSERT_RE.search(line):
                total[_norm(line)] += 1
                by_file.setdefault(path, Counter())[_norm(line)] += 1
    return total, by_file


def _removed_asserts(ctx: ScanContext, deleted_names: dict[str, set[str]]) -> dict[str, list[str]]:
    """Per test file still there, the assertion lines removed outside deleted tests' bodies."""
    out: dict[str, list[str]] = {}
    for path, lines in ctx.removed.items():
        if not is_test_path(path) or path in ctx.deleted_set:
            continue
        found = _asserts_outside_deleted(path, lines, deleted_names.get(path, set()))
        if found:
            out[path] = found
    return out


def _asserts_outside_deleted(path: str, lines: Sequence[str], gone: set[str]) -> list[str]:
    """The assertion lines among the removed ``lines`` of ``path``, skipping the body of each
    removed definition named in ``gone`` (deeper-indented lines, and the closing line of a JS/Go test)."""
    lang = _lang(path)
    out: list[str] = []
    body_indent: int | None = None
    for line in lines:
        stripped = line.strip()
        d = _test_def(path, line, lang)
        if d is not None:
            body_indent = d[1] if d[0] in gone else None
            continue
        if body_indent is not None:
            indent = len(line) - len(line.lstrip())
            if not stripped or indent > body_indent:
                continue  # inside a deleted test's body: counted by deletedTests
            if lang != "py" and re.match(r"^[})\];,\s]+$", stripped):
                body_indent = None
                continue  # the closing line of a deleted JS/Go test
            body_indent = None
        if stripped and not _is_comment(stripped, lang) and _ASSERT_RE.search(line):
            out.append(line)
    return out
