""":func:`scan_changes`: every signal over a round's changes, its steps in order — the §4.4 markers
(:mod:`.markers`), the added-line rules (:func:`scan_added_lines`), ``deletedTests``
(:mod:`.deleted`), removed assertions (:mod:`.weakened`) and ``acceptanceTampering``
(:mod:`.tampering`), sharing one :class:`.context.ScanContext`."""

from __future__ import annotations

from typing import Mapping, Sequence

from .context import ScanContext
from .deleted import scan_deleted_tests
from .models import SignalsReport
from .rules import _SKIP_RES, _TRIVIAL_RES, _debug_leftover, _is_comment, _lang, _snippet, is_test_path
from .tampering import scan_tampering
from .weakened import scan_removed_asserts

__all__ = ["scan_changes", "scan_added_lines"]


def scan_changes(
    added: Mapping[str, Sequence[str]],
    removed: Mapping[str, Sequence[str]],
    deleted_files: Sequence[str],
    changed_files: Sequence[str],
    check_argvs: Sequence[Sequence[str]] = (),
    *,
    project_prefix: str = "",
) -> SignalsReport:
    """Count every signal over a round's changes. Never raises for odd input; never blocks.

    Args:
        added: per file, the added lines (``+`` lines of ``git diff -U0``; all lines of a new file).
        removed: per file, the removed lines (``-`` lines; all lines of a deleted file).
        deleted_files: files deleted since the baseline.
        changed_files: every changed path (tracked, untracked, rename sources and targets, deletions).
        check_argvs: the argv of each acceptance check of the round.
        project_prefix: the project's path relative to the repository top level (``""`` when the
            project is the top level); relative argv tokens are resolved against it.

    Returns:
        :class:`SignalsReport`. Rules:

        * ``todo``/``consoleDebug``/``commentedBlock``/``secretLike``: §4.4 over all added lines,
          files concatenated in ``added`` order;
        * ``debugLeftover``: per added non-comment line: Python ``breakpoint()``, ``pdb``/``ipdb``
          ``set_trace`` and imports, a top-level ``print(`` in a non-test, non-script ``.py`` file;
          JS/TS ``debugger`` statement; Rust ``dbg!``; Ruby ``binding.pry``/``byebug``;
        * ``skippedOrOnlyTests``: per added non-comment line, language-scoped: ``it/describe/test
          .only|.skip(``, ``fit(``/``fdescribe(``/``xit(``…, ``pytest.mark.skip|skipif|xfail``,
          ``pytest.skip(``, ``unittest.skip*``, ``self.skipTest(``, Go ``t.Skip*(``, Rust
          ``#[ignore]``, Java ``@Disabled``/``@Ignore``;
        * ``deletedTests``: named test definitions (Python ``def test_*`` and JS ``it/test('…')`` in
          test files, Go ``func Test*`` in ``_test.go``) removed and not re-added anywhere (a
          removed definition offset by a new one in the same file is a rename), Rust ``#[test]``
          and Java ``@Test`` markers by net count per file; a deleted test file counts
          ``max(1, tests not found elsewhere)`` unless all its tests reappear elsewhere;
        * ``weakenedTests``: in test files, removed assertion lines not matched by an identical added
          assertion anywhere nor offset by another added assertion in the same file (lines inside
          a deleted test's body are left to ``deletedTests``), plus each trivially true assertion
          added (``assert True``, ``assert x == x``, ``expect(true).toBe(true)``…);
        * ``acceptanceTampering``: one per changed file that is the project's
          ``.tianshu-mcp/acceptance.json``, a file named in a check argv (a Makefile when a check
          runs ``make``), a test-runner/CI config (pytest.ini, jest/vitest configs, CI workflows),
          or whose changed lines touch pytest/coverage settings (pyproject.toml, setup.cfg,
          tox.ini), collection hooks (conftest.py) or test/check scripts (package.json).
    """
    ctx = ScanContext.start(added, removed, deleted_files)
    scan_added_lines(ctx)
    deleted_names = scan_deleted_tests(ctx)
    scan_removed_asserts(ctx, deleted_names)
    scan_tampering(ctx, changed_files, check_argvs, project_prefix)
    return ctx.report()


def scan_added_lines(ctx: ScanContext) -> None:
    """The rules over each added non-comment line: ``debugLeftover``, ``skippedOrOnlyTests``
    (language-scoped, :data:`.rules._SKIP_RES`) and, in test files, trivially true assertions
    (``weakenedTests``)."""
    for path, lines in ctx.added.items():
        lang = _lang(path)
        test_file = is_test_path(path)
        for line in lines:
            stripped = line.strip()
            if not stripped or _is_comment(stripped, lang):
                continue
            if _debug_leftover(path, line, lang):
                ctx.signals.debug_leftover += 1
            if lang and any(r.search(line) for r in _SKIP_RES.get(lang, ())):
                ctx.hit("skippedOrOnlyTests", path, f"focused/skipped test added: `{_snippet(line)}`")
            if test_file and any(r.search(line) for r in _TRIVIAL_RES):
                ctx.hit("weakenedTests", path, f"trivially true assertion added: `{_snippet(line)}`")
