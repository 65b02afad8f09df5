"""``deletedTests`` (docs/acceptance.md §8.6): named test definitions removed and not re-added anywhere,
deleted test files, and name-less test markers removed (net count per file): :func:`scan_deleted_tests`."""

from __future__ import annotations

from collections import Counter

from .context import ScanContext, take_match
from .rules import _COUNTED_DEF_RES, _lang, _test_def, is_test_path

__all__ = ["scan_deleted_tests"]

_Def = tuple[str, int]
"""A named test definition: ``(name, indent)``."""
_DefKey = tuple[str, str]
"""A definition matched across files: ``(language, name)``."""


def scan_deleted_tests(ctx: ScanContext) -> dict[str, set[str]]:
    """Count ``deletedTests`` into ``ctx``: named definitions (Python ``def test_*`` and JS
    ``it/test('…')`` in test files, Go ``func Test*`` in ``_test.go``) removed and not re-added
    anywhere (exact name matches anywhere first: a moved test is kept; then an unmatched new
    definition in the same file offsets one removed definition: a rename); a deleted test file
    counts ``max(1, tests not found elsewhere)`` unless all its tests reappear elsewhere; Rust
    ``#[test]`` and Java ``@Test`` markers by net count per file.

    Returns:
        per file, the names of its deleted tests (all unmatched ones for a deleted file): the
        weakenedTests step leaves their bodies alone.
    """
    added_defs, added_by_file = _added_defs(ctx)
    removed_defs = _removed_defs(ctx)
    unmatched: dict[str, list[_Def]] = {}
    for path, defs in removed_defs.items():
        lang = _lang(path) or ""
        for name, indent in defs:
            if not take_match(added_defs, added_by_file, path, (lang, name)):
                unmatched.setdefault(path, []).append((name, indent))
    deleted_names = _removed_tests(ctx, unmatched, added_by_file)
    _deleted_files(ctx, removed_defs, unmatched)
    _counted_markers(ctx)
    return deleted_names


def _added_defs(ctx: ScanContext) -> tuple[Counter[_DefKey], dict[str, Counter[_DefKey]]]:
    """The named test definitions added: in all, and per file."""
    total: Counter[_DefKey] = Counter()
    by_file: dict[str, Counter[_DefKey]] = {}
    for path, lines in ctx.added.items():
        lang = _lang(path)
        for line in lines:
            d = _test_def(path, line, lang)
            if d:
                total[(lang or "", d[0])] += 1
                by_file.setdefault(path, Counter())[(lang or "", d[0])] += 1
    return total, by_file


def _removed_defs(ctx: ScanContext) -> dict[str, list[_Def]]:
    """Per file, the named test definitions removed, in order."""
    out: dict[str, list[_Def]] = {}
    for path, lines in ctx.removed.items():
        lang = _lang(path)
        for line in lines:
            d = _test_def(path, line, lang)
            if d:
                out.setdefault(path, []).append(d)
    return out


def _removed_tests(ctx: ScanContext, unmatched: dict[str, list[_Def]],
                   added_by_file: dict[str, Counter[_DefKey]]) -> dict[str, set[str]]:
    """Hits for the unmatched removed definitions of files still there, less the ones offset by
    new definitions in the same file (a rename); the deleted names per file."""
    deleted_names: dict[str, set[str]] = {}
    for path, defs in unmatched.items():
        if path in ctx.deleted_set:
            deleted_names[path] = {n for n, _indent in defs}
            continue
        # an unmatched new definition in the same file offsets one removed definition (a rename)
        spare = sum(added_by_file.get(path, Counter()).values())
        gone = defs[spare:] if spare < len(defs) else []
        deleted_names[path] = {n for n, _indent in gone}
        for name, _indent in gone:
            ctx.hit("deletedTests", path, f"test removed: {name}")
    return deleted_names


def _deleted_files(ctx: ScanContext, removed_defs: dict[str, list[_Def]], unmatched: dict[str, list[_Def]]) -> None:
    """One hit per deleted test file (counted ``max(1, tests not found elsewhere)``), none when
    every test of it reappears elsewhere (moved)."""
    for path in ctx.deleted:
        if not is_test_path(path):
            continue
        total = len(removed_defs.get(path, []))
        gone_n = len(unmatched.get(path, []))
        if total and not gone_n:
            continue  # every test of the deleted file reappears elsewhere: moved
        detail = "test file deleted" + (f" ({gone_n} test(s) not found elsewhere)" if gone_n else "")
        ctx.hit("deletedTests", path, detail, count=max(1, gone_n))


def _counted_markers(ctx: ScanContext) -> None:
    """Name-less test markers (Rust ``#[test]``, Java ``@Test``) by net count per file still there."""
    for lang_key, rx in _COUNTED_DEF_RES.items():
        for path in dict.fromkeys([*ctx.removed, *ctx.added]):
            if _lang(path) != lang_key or path in ctx.deleted_set:
                continue
            net = (sum(1 for ln in ctx.removed.get(path, ()) if rx.search(ln))
                   - sum(1 for ln in ctx.added.get(path, ()) if rx.search(ln)))
            if net > 0:
                ctx.hit("deletedTests", path, f"{net} test marker(s) removed ({rx.pattern})", count=net)
