"""Suspicious signals over a round's changes: counted, never blocking (20-acceptance §4.4, issue §6).

Two families:

* **markers** (§4.4, exact original rules): ``todo``, ``consoleDebug``, ``commentedBlock``,
  ``secretLike``; plus ``debugLeftover`` (Python ``breakpoint()``/``pdb``, a stray top-level
  ``print(`` in non-test Python source, JS ``debugger`` statements, Rust ``dbg!``, Ruby
  ``binding.pry``/``byebug``);
* **agent tampering** (each hit also listed in ``tampering: [{kind, file, detail}]``):
  ``skippedOrOnlyTests`` (focused or skipped tests added), ``deletedTests`` (test files deleted,
  test definitions removed and not re-added anywhere), ``weakenedTests`` (assertions removed from
  test files without a replacement, trivially true assertions added) and ``acceptanceTampering``
  (the project's ``.tianshu-mcp/acceptance.json``, files named in the check argvs, test-runner or CI
  configuration edited).

Inputs are the analysis' per-file added and removed lines (``git diff -U0``; new untracked files
contribute all their lines), deleted files, changed files and the check argvs. Paths are POSIX,
relative to the repository's top level. Plain Python, no I/O.

This module holds the models, the §4.4 markers and :func:`scan_changes`; the per-language rules
(test files, debug leftovers, skipped/deleted/weakened tests, tampered configuration) live in
:mod:`.signals_rules`.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Iterable, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from ..core.i18n import N_
from .signals_rules import (
    _ACCEPTANCE_FILE_RE,
    _ASSERT_RE,
    _COUNTED_DEF_RES,
    _MAKEFILE_RE,
    _OUTCOME_HOOK_RE,
    _SKIP_RES,
    _STARTUP_HOOK_RE,
    _TRIVIAL_RES,
    _argv_paths,
    _config_edit,
    _debug_leftover,
    _is_comment,
    _lang,
    _norm,
    _snippet,
    _test_def,
    is_test_path,
)

__all__ = [
    "Signals",
    "TamperingItem",
    "SignalsReport",
    "scan_signals",
    "scan_changes",
    "is_test_path",
    "TAMPERING_KINDS",
    "MARKER_KINDS",
    "SIGNAL_LABELS",
    "MAX_TAMPERING_ITEMS",
]

TAMPERING_KINDS = ("skippedOrOnlyTests", "deletedTests", "weakenedTests", "acceptanceTampering")
"""Signals whose hits are listed in ``tampering`` (in this order)."""
MARKER_KINDS = ("todo", "consoleDebug", "commentedBlock", "secretLike", "debugLeftover")
"""The other (non-tampering) signal counts."""
SIGNAL_LABELS = {
    "todo": N_("TODO/FIXME/HACK hits"),
    "consoleDebug": N_("console.log/debugger hits"),
    "commentedBlock": N_("commented-out code blocks"),
    "secretLike": N_("secret/token-like literals"),
    "debugLeftover": N_("debug leftovers (breakpoint/pdb/stray print/debugger)"),
    "skippedOrOnlyTests": N_("focused or skipped tests added"),
    "deletedTests": N_("tests deleted"),
    "weakenedTests": N_("tests weakened (assertions removed or trivially true)"),
    "acceptanceTampering": N_("acceptance, check or CI configuration edited"),
}
"""Human labels of the ``signals`` counts (reports; English msgids: show them through ``_``)."""
MAX_TAMPERING_ITEMS = 100
"""At most this many ``tampering`` entries are listed; the counts in ``signals`` stay exact."""


class Signals(BaseModel):
    """Suspicious-marker counts; informational, never fail a round.

    JSON keys: ``todo, consoleDebug, commentedBlock, secretLike`` (20-acceptance §4.4) and
    ``debugLeftover, skippedOrOnlyTests, deletedTests, weakenedTests, acceptanceTampering`` (port).
    """

    model_config = ConfigDict(populate_by_name=True)

    todo: int = 0
    console_debug: int = Field(0, alias="consoleDebug")
    commented_block: int = Field(0, alias="commentedBlock")
    secret_like: int = Field(0, alias="secretLike")
    debug_leftover: int = Field(0, alias="debugLeftover")
    skipped_or_only_tests: int = Field(0, alias="skippedOrOnlyTests")
    deleted_tests: int = Field(0, alias="deletedTests")
    weakened_tests: int = Field(0, alias="weakenedTests")
    acceptance_tampering: int = Field(0, alias="acceptanceTampering")


class TamperingItem(BaseModel):
    """One agent-tampering hit: ``{kind, file, detail}`` (``kind`` ∈ :data:`TAMPERING_KINDS`)."""

    kind: str
    file: str
    detail: str


class SignalsReport(BaseModel):
    """Result of :func:`scan_changes`: ``signals`` (all counts) and ``tampering`` (the hits of the
    tampering kinds, at most :data:`MAX_TAMPERING_ITEMS`)."""

    signals: Signals = Field(default_factory=Signals)
    tampering: list[TamperingItem] = Field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        """``{"signals": {...camelCase counts}, "tampering": [{kind, file, detail}]}``."""
        return {
            "signals": self.signals.model_dump(by_alias=True),
            "tampering": [t.model_dump() for t in self.tampering],
        }


# --------------------------------------------------------------------------------------------
# §4.4 markers (exact original rules)
# --------------------------------------------------------------------------------------------

_TODO_RE = re.compile(r"\b(TODO|FIXME|HACK|XXX)\b", re.I)
_CONSOLE_RE = re.compile(r"\bconsole\.(log|debug|info|warn|error)\s*\(|\bdebugger\s*;?")
_SECRET_RE = re.compile(
    r"(['\"]?(?:api[_-]?key|secret|token|passwd|password|authorization|access[_-]?key|pwd)['\"]?\s*[:=]\s*['\"][^'\"]{6,}['\"])",
    re.I,
)
_LONG_LITERAL_RE = re.compile(r"['\"][A-Za-z0-9+/=]{32,}['\"]")
_COMMENT_PREFIXES = ("//", "#", "--", ";", "*")
_BLOCK_START_RE = re.compile(r"^(/\*|<!--)")


def scan_signals(lines: Iterable[str]) -> Signals:
    """Count the four §4.4 markers over changed lines (``scanChangedLinesForSignals``).

    Per line (trailing whitespace stripped): todo, consoleDebug, secretLike (at most one per line)
    and commentedBlock (one per run of ≥3 consecutive comment lines; the run continues across file
    boundaries). The other counts of the returned :class:`Signals` are 0.
    """
    s = Signals()
    in_block = False
    run = 0
    for raw in lines:
        line = raw.rstrip()
        if _TODO_RE.search(line):
            s.todo += 1
        if _CONSOLE_RE.search(line):
            s.console_debug += 1
        if _SECRET_RE.search(line):
            s.secret_like += 1
        elif len(line) > 40 and _LONG_LITERAL_RE.search(line):
            s.secret_like += 1
        stripped = line.strip()
        if _BLOCK_START_RE.match(stripped):
            in_block = True
        if in_block or stripped.startswith(_COMMENT_PREFIXES):
            run += 1
            if run == 3:
                s.commented_block += 1
        else:
            run = 0
        if "*/" in stripped or "-->" in stripped:
            in_block = False
    return s


# --------------------------------------------------------------------------------------------
# scan_changes
# --------------------------------------------------------------------------------------------


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
    deleted = [f for f in dict.fromkeys(deleted_files)]
    deleted_set = set(deleted)
    all_added = [ln for lines in added.values() for ln in lines]
    s = scan_signals(all_added)
    items: dict[str, list[TamperingItem]] = {k: [] for k in TAMPERING_KINDS}

    # debugLeftover, skippedOrOnlyTests, trivial assertions (added lines)
    for path, lines in added.items():
        lang = _lang(path)
        test_file = is_test_path(path)
        for line in lines:
            stripped = line.strip()
            if not stripped or _is_comment(stripped, lang):
                continue
            if _debug_leftover(path, line, lang):
                s.debug_leftover += 1
            if lang and any(r.search(line) for r in _SKIP_RES.get(lang, ())):
                s.skipped_or_only_tests += 1
                items["skippedOrOnlyTests"].append(
                    TamperingItem(kind="skippedOrOnlyTests", file=path, detail=f"focused/skipped test added: `{_snippet(line)}`")
                )
            if test_file and any(r.search(line) for r in _TRIVIAL_RES):
                s.weakened_tests += 1
                items["weakenedTests"].append(
                    TamperingItem(kind="weakenedTests", file=path, detail=f"trivially true assertion added: `{_snippet(line)}`")
                )

    # deletedTests: named definitions
    added_defs: Counter[tuple[str, str]] = Counter()
    added_defs_by_file: dict[str, Counter[tuple[str, str]]] = {}
    for path, lines in added.items():
        lang = _lang(path)
        for line in lines:
            d = _test_def(path, line, lang)
            if d:
                added_defs[(lang or "", d[0])] += 1
                added_defs_by_file.setdefault(path, Counter())[(lang or "", d[0])] += 1
    removed_defs: dict[str, list[tuple[str, int]]] = {}
    for path, lines in removed.items():
        lang = _lang(path)
        for line in lines:
            d = _test_def(path, line, lang)
            if d:
                removed_defs.setdefault(path, []).append(d)
    # exact name matches anywhere first (a moved test is kept)
    unmatched: dict[str, list[tuple[str, int]]] = {}
    for path, defs in removed_defs.items():
        lang = _lang(path) or ""
        for name, indent in defs:
            if added_defs[(lang, name)] > 0:
                added_defs[(lang, name)] -= 1
                if path in added_defs_by_file and added_defs_by_file[path][(lang, name)] > 0:
                    added_defs_by_file[path][(lang, name)] -= 1
                else:
                    for other in added_defs_by_file.values():
                        if other[(lang, name)] > 0:
                            other[(lang, name)] -= 1
                            break
            else:
                unmatched.setdefault(path, []).append((name, indent))
    deleted_names: dict[str, set[str]] = {}
    for path, defs in unmatched.items():
        if path in deleted_set:
            deleted_names[path] = {n for n, _ in defs}
            continue
        # an unmatched new definition in the same file offsets one removed definition (a rename)
        spare = sum(added_defs_by_file.get(path, Counter()).values())
        gone = defs[spare:] if spare < len(defs) else []
        deleted_names[path] = {n for n, _ in gone}
        for name, _ in gone:
            s.deleted_tests += 1
            items["deletedTests"].append(TamperingItem(kind="deletedTests", file=path, detail=f"test removed: {name}"))
    for path in deleted:
        if not is_test_path(path):
            continue
        total = len(removed_defs.get(path, []))
        gone_n = len(unmatched.get(path, []))
        if total and not gone_n:
            continue  # every test of the deleted file reappears elsewhere: moved
        s.deleted_tests += max(1, gone_n)
        detail = "test file deleted" + (f" ({gone_n} test(s) not found elsewhere)" if gone_n else "")
        items["deletedTests"].append(TamperingItem(kind="deletedTests", file=path, detail=detail))
    # deletedTests: name-less markers by net count per file
    for lang_key, rx in _COUNTED_DEF_RES.items():
        for path in dict.fromkeys([*removed, *added]):
            if _lang(path) != lang_key or path in deleted_set:
                continue
            net = sum(1 for ln in removed.get(path, ()) if rx.search(ln)) - sum(1 for ln in added.get(path, ()) if rx.search(ln))
            if net > 0:
                s.deleted_tests += net
                items["deletedTests"].append(
                    TamperingItem(kind="deletedTests", file=path, detail=f"{net} test marker(s) removed ({rx.pattern})")
                )

    # weakenedTests: removed assertions without a replacement
    added_asserts: Counter[str] = Counter()
    added_asserts_by_file: dict[str, Counter[str]] = {}
    for path, lines in added.items():
        if not is_test_path(path):
            continue
        lang = _lang(path)
        for line in lines:
            stripped = line.strip()
            if stripped and not _is_comment(stripped, lang) and _ASSERT_RE.search(line):
                added_asserts[_norm(line)] += 1
                added_asserts_by_file.setdefault(path, Counter())[_norm(line)] += 1
    removed_asserts: dict[str, list[str]] = {}
    for path, lines in removed.items():
        if not is_test_path(path) or path in deleted_set:
            continue
        lang = _lang(path)
        gone = deleted_names.get(path, set())
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
                removed_asserts.setdefault(path, []).append(line)
    leftovers: dict[str, list[str]] = {}
    for path, lines in removed_asserts.items():
        for line in lines:
            key = _norm(line)
            if added_asserts[key] > 0:
                added_asserts[key] -= 1
                own = added_asserts_by_file.get(path)
                if own is not None and own[key] > 0:
                    own[key] -= 1
                else:
                    for other in added_asserts_by_file.values():
                        if other[key] > 0:
                            other[key] -= 1
                            break
            else:
                leftovers.setdefault(path, []).append(line)
    for path, lines in leftovers.items():
        spare = sum(added_asserts_by_file.get(path, Counter()).values())
        net = len(lines) - spare
        if net > 0:
            s.weakened_tests += net
            items["weakenedTests"].append(
                TamperingItem(
                    kind="weakenedTests",
                    file=path,
                    detail=f"{net} assertion(s) removed without replacement, e.g. `{_snippet(lines[-net])}`",
                )
            )

    # acceptanceTampering: one per file
    argv_paths, uses_make = _argv_paths(check_argvs, project_prefix.strip("/"))
    for path in dict.fromkeys([*changed_files, *deleted]):
        why: str | None = None
        if _ACCEPTANCE_FILE_RE.search(path):
            why = "acceptance configuration (.tianshu-mcp/acceptance.json) edited"
        elif path in argv_paths:
            why = "file named in an acceptance check command was " + ("deleted" if path in deleted_set else "edited")
        elif uses_make and _MAKEFILE_RE.search(path):
            why = "Makefile edited while a check runs make"
        elif _STARTUP_HOOK_RE.search(path):
            why = "Python start-up hook (sitecustomize, usercustomize, a .pth file) added or edited: it runs in every check"
        elif path.rsplit("/", 1)[-1] == "conftest.py" and any(_OUTCOME_HOOK_RE.search(ln) for ln in added.get(path, ())):
            # breaker: a conftest.py hook turned failing tests into passes with no signal at all
            why = "pytest hook that can rewrite test outcomes added to conftest.py"
        else:
            why = _config_edit(path, [*added.get(path, ()), *removed.get(path, ())])
        if why:
            s.acceptance_tampering += 1
            items["acceptanceTampering"].append(TamperingItem(kind="acceptanceTampering", file=path, detail=why))

    tampering = [it for k in TAMPERING_KINDS for it in items[k]][:MAX_TAMPERING_ITEMS]
    return SignalsReport(signals=s, tampering=tampering)
