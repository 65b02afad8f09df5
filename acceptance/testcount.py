"""Test-output heuristics: is a check a test command, did it run zero tests, what did it count.

Source: 20-acceptance §3.2 (``is_test_check``, ``detect_zero_tests`` and its four regexes). The port
deliberately goes beyond the original's four regexes (which let ``Ran 0 tests``, vitest's
``No test files found``, go's ``[no test files]`` and cargo's ``running 0 tests`` pass): see
:func:`detect_zero_tests`. Every extra rule is written so that a real run (``10 passed``,
``Ran 3 tests``, ``# tests 10``, ``running 2 tests``) is never flagged.

:func:`parse_tests` reads passed / failed / skipped / errors and the test ids out of the output of
pytest, unittest, jest, vitest, mocha, ``node --test`` (spec and TAP reporters), TAP in general,
``go test`` and ``cargo test``; the check runner uses it to fail a mandatory test check closed when
nothing ran, when every test was skipped, or when the counts contradict a zero exit code. Every
parser was written against real output of that runner, recorded in
``tests/data/runner_outputs/`` by ``record.py`` there.

Plain Python, no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

__all__ = ["TestCounts", "MAX_IDS", "is_test_check", "detect_zero_tests", "parse_tests", "parse_counts"]

MAX_IDS = 1000
"""At most this many ids are kept in ``failed_ids`` and in ``passed_ids`` (first seen first)."""

_TEST_ARGV_RES = [
    re.compile(p)
    for p in (
        r"\bnode\s+--test\b",
        r"\bnpm\s+run\s+test(?:\b|:)",
        r"\bpytest\b",
        r"\bgo\s+test\b",
        r"\bcargo\s+test\b",
        r"\bvitest\b",
        r"\bjest\b",
        r"\bmocha\b",
        r"\bunittest\b",  # port: so unittest's "Ran 0 tests" (exit 0 on 3.11) is caught too
    )
]


def is_test_check(name: str, argv: Sequence[str]) -> bool:
    """True when a check runs tests (20-acceptance §3.2).

    ``"test" in name.lower()`` (so ``latest-build`` counts, as in the original) or the lower-cased,
    space-joined argv matches ``node --test``, ``npm run test``, ``pytest``, ``go test``,
    ``cargo test``, ``vitest``, ``jest``, ``mocha`` or (port) ``unittest``. ``npm test`` (no ``run``)
    only via the name.
    """
    if "test" in (name or "").lower():
        return True
    joined = " ".join(argv).lower()
    return any(r.search(joined) for r in _TEST_ARGV_RES)


# --- zero-test detection (text rules) ---------------------------------------------------------

# The original's four rules (20-acceptance §3.2), any match → zero tests.
_SPEC_ZERO_RES = [
    re.compile(r"#\s+tests\s+0\b", re.I),  # node:test / TAP summary
    re.compile(r"\bno tests (?:were )?found\b", re.I),  # jest
    re.compile(r"\bno tests ran\b", re.I),  # pytest, unittest (3.12+ "NO TESTS RAN")
    re.compile(r"\b0 tests (?:ran|executed|found)\b", re.I),
]

_VITEST_NONE = re.compile(r"\bno test files found\b", re.I)
_NODE_SPEC_ZERO = re.compile(r"^\s*ℹ\s+tests\s+0\s*$", re.M)
_NODE_SPEC_SOME = re.compile(r"^\s*ℹ\s+tests\s+[1-9]\d*\s*$", re.M)

_PYTEST_COLLECTED0 = re.compile(r"\bcollected 0 items\b", re.I)
_PYTEST_RAN = re.compile(r"\b\d+ (?:passed|failed|errors?|xfailed|xpassed)\b", re.I)
_PYTEST_SUMMARY = re.compile(
    r"^(?:=+ )?((?:\d+ \w+)(?:, \d+ \w+)*|no tests ran) in [\d.]+s(?: \(\d+:\d\d:\d\d\))?(?: =+)?[ \t]*$", re.M
)

_UNITTEST_RAN = re.compile(r"^Ran (\d+) tests? in ", re.M)

_GO_PKG = re.compile(r"^(ok|FAIL|\?)[ ]*\t(\S+)(?:[\t ](.*))?$", re.M)
_GO_WARN_NONE = re.compile(r"testing: warning: no tests to run", re.I)
_GO_RAN = re.compile(r"^\s*--- (?:PASS|FAIL|SKIP):", re.M)

_CARGO_RUNNING = re.compile(r"^running (\d+) tests?\s*$", re.M)

_MOCHA_PASSING = re.compile(r"^\s*(\d+) passing\b", re.M)
_MOCHA_OTHER = re.compile(r"^\s*[1-9]\d* (?:failing|pending)\b", re.M)


def _go_zero(text: str) -> bool:
    pkgs = _GO_PKG.findall(text)
    if pkgs:
        for status, _pkg, rest in pkgs:
            if status == "?" and "[no test files]" in rest:
                continue
            if status == "ok" and "[no tests to run]" in rest:
                continue
            return False
        return True
    return bool(_GO_WARN_NONE.search(text)) and not _GO_RAN.search(text)


def detect_zero_tests(output: str) -> bool:
    """True when a test command's output shows that no test ran (20-acceptance §3.2, extended).

    The original's rules (any match): ``# tests 0``, ``no tests (were) found``, ``no tests ran``,
    ``0 tests ran|executed|found``. Port extensions:

    * pytest: ``collected 0 items`` with no ``N passed/failed/error``; a summary line made only of
      ``deselected``/``warnings`` counts;
    * unittest: every ``Ran N tests`` line has N == 0;
    * vitest: ``No test files found``;
    * go test: every package line is ``? pkg [no test files]`` or ``ok pkg … [no tests to run]``;
      or ``testing: warning: no tests to run`` without any ``--- PASS/FAIL/SKIP``;
    * cargo test: at least one ``running 0 tests`` and no ``running N tests`` with N > 0;
    * node --test spec reporter: ``ℹ tests 0`` (and no ``ℹ tests N>0``);
    * mocha: ``0 passing`` with no ``N passing/failing/pending`` N > 0.

    :func:`parse_tests` complements these rules: the runner also treats parsed counts with a
    total of 0 as "nothing ran".

    Args:
        output: the merged stdout+stderr tail of the check.
    """
    if not output:
        return False
    output = _clean(output)
    if any(r.search(output) for r in _SPEC_ZERO_RES):
        return True
    if _VITEST_NONE.search(output):
        return True
    if _NODE_SPEC_ZERO.search(output) and not _NODE_SPEC_SOME.search(output):
        return True
    # pytest
    if _PYTEST_COLLECTED0.search(output) and not _PYTEST_RAN.search(output):
        return True
    summaries = _PYTEST_SUMMARY.findall(output)
    if summaries:
        last = summaries[-1]
        kinds = {m.group(2).lower() for m in re.finditer(r"(\d+) (\w+)", last)}
        if kinds and kinds <= {"deselected", "warning", "warnings"}:
            return True
    # unittest
    ran = [int(n) for n in _UNITTEST_RAN.findall(output)]
    if ran and all(n == 0 for n in ran):
        return True
    # go
    if _go_zero(output):
        return True
    # cargo
    running = [int(n) for n in _CARGO_RUNNING.findall(output)]
    if running and all(n == 0 for n in running):
        return True
    # mocha
    passing = [int(n) for n in _MOCHA_PASSING.findall(output)]
    if passing and all(n == 0 for n in passing) and not _MOCHA_OTHER.search(output):
        return True
    return False


# --- counts -----------------------------------------------------------------------------------


@dataclass
class TestCounts:
    """What one test run reported.

    ``runner`` names the output format that was recognised: ``pytest``, ``unittest``, ``jest``,
    ``vitest``, ``mocha``, ``node-spec``, ``node-tap`` (``node --test`` with the TAP reporter, the
    default when stdout is not a terminal), ``tap`` (any other TAP producer), ``go`` or ``cargo``.

    * ``passed`` / ``failed``: tests that passed / failed (pytest ``xpassed`` counts as passed,
      unittest ``unexpected successes`` as failed, node ``cancelled`` as failed);
    * ``skipped``: skipped, ignored, pending and todo tests, and expected failures (pytest
      ``xfailed``, unittest ``expected failures``);
    * ``errors``: things that broke outside a test's assertions: pytest/unittest errors (fixtures,
      collection, imports), jest "Test suite failed to run", vitest failed suites and unhandled
      errors, mocha "Error: …" before any test ran, TAP ``Bail out!``, go packages that failed to
      build or failed without a failing test (panic, timeout), cargo crates that did not compile;
    * ``failed_ids``: ids of failed and errored tests (pytest node ids ``tests/test_x.py::test_y``;
      unittest ``test_x (module.Class.test_x)``; jest ``describe › test``; vitest
      ``file > describe > test``; mocha full titles ``describe test``; node ``suite > test``; go
      ``pkg/TestX`` (``TestX`` when no package line was seen); cargo ``tests::it_works``);
    * ``passed_ids``: ids of passed tests, when the output lists them (pytest ``-v``/``-rA``,
      unittest ``-v``, jest's and mocha's tree, vitest's per-test lines, node spec/TAP, go ``-v``,
      cargo).

    ``go test`` without ``-v`` prints nothing for a passing package but ``ok  <pkg>``: each such
    package then counts as **one** passed unit whose id is the package path (its tests are not
    listed), so a plain ``go test ./...`` still shows that something ran.

    Both id lists keep at most :data:`MAX_IDS` entries, in output order, without duplicates.
    """

    __test__ = False  # not a pytest test class

    runner: str
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    errors: int = 0
    failed_ids: list[str] = field(default_factory=list)
    passed_ids: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        """``passed + failed + skipped + errors``."""
        return self.passed + self.failed + self.skipped + self.errors

    def to_json(self) -> dict[str, Any]:
        """``{"runner", "passed", "failed", "skipped", "errors", "total", "failedIds"[, "passedIds"]}``;
        ``passedIds`` only when the output listed passed tests."""
        out: dict[str, Any] = {
            "runner": self.runner,
            "passed": self.passed,
            "failed": self.failed,
            "skipped": self.skipped,
            "errors": self.errors,
            "total": self.total,
            "failedIds": list(self.failed_ids),
        }
        if self.passed_ids:
            out["passedIds"] = list(self.passed_ids)
        return out


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


_MAX_LINE = 2000
"""Lines are cut to this many characters before parsing (no summary line is longer; it keeps
every regex linear on a pathological one-line output)."""


def _clean(text: str, max_line: int | None = None) -> str:
    """Strip ANSI escapes; ``\\r\\n`` → ``\\n``; a line rewritten with ``\\r`` keeps its last
    version; with ``max_line``, longer lines are cut."""
    text = _ANSI.sub("", text).replace("\r\n", "\n")
    if "\r" in text:
        text = "\n".join(line.rsplit("\r", 1)[-1] for line in text.split("\n"))
    if max_line is not None and any(len(line) > max_line for line in text.split("\n")):
        text = "\n".join(line[:max_line] for line in text.split("\n"))
    return text


def _ids(items: Iterable[str]) -> list[str]:
    out: list[str] = []
    seen: set[str] = set()
    for item in items:
        item = item.strip()
        if item and item not in seen:
            seen.add(item)
            out.append(item)
            if len(out) >= MAX_IDS:
                break
    return out


# pytest ---------------------------------------------------------------------------------------

_PYTEST_SHORT = re.compile(r"^(PASSED|FAILED|ERROR|XPASS|XFAIL) (.+?)(?: - .*)?$", re.M)
_PYTEST_VERBOSE = re.compile(
    r"^(\S[^\n]*?::[^\n]*?) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)(?: \([^\n]*\))?(?:\s+\[\s*\d+%\])?[ \t]*$", re.M
)


def _parse_pytest(text: str) -> TestCounts | None:
    summaries = _PYTEST_SUMMARY.findall(text)
    if not summaries:
        return None
    body = summaries[-1]
    c: dict[str, int] = {}
    for n, kind in re.findall(r"(\d+) (\w+)", body):
        c[kind.lower()] = c.get(kind.lower(), 0) + int(n)
    if body != "no tests ran" and not c.keys() & {
        "passed", "failed", "error", "errors", "skipped", "xfailed", "xpassed", "deselected", "warning", "warnings"
    }:
        return None
    failed_ids: list[str] = []
    passed_ids: list[str] = []
    for m in _PYTEST_VERBOSE.finditer(text):
        if m.group(2) in ("FAILED", "ERROR"):
            failed_ids.append(m.group(1))
        elif m.group(2) in ("PASSED", "XPASS"):
            passed_ids.append(m.group(1))
    for m in _PYTEST_SHORT.finditer(text):
        if m.group(1) in ("FAILED", "ERROR"):
            failed_ids.append(m.group(2))
        elif m.group(1) in ("PASSED", "XPASS"):
            passed_ids.append(m.group(2))
    return TestCounts(
        "pytest",
        passed=c.get("passed", 0) + c.get("xpassed", 0),
        failed=c.get("failed", 0),
        skipped=c.get("skipped", 0) + c.get("xfailed", 0),
        errors=c.get("error", 0) + c.get("errors", 0),
        failed_ids=_ids(failed_ids),
        passed_ids=_ids(passed_ids),
    )


# unittest -------------------------------------------------------------------------------------

_UNITTEST_RAN_FULL = re.compile(r"^Ran (\d+) tests? in [\d.]+s\s*$", re.M)
_UNITTEST_STATUS = re.compile(r"^(OK|FAILED|NO TESTS RAN)(?: \(([^)]*)\))?\s*$", re.M)
_UNITTEST_FAIL_HEAD = re.compile(r"^(?:FAIL|ERROR|UNEXPECTED SUCCESS): (.+?)\s*$", re.M)
_UNITTEST_VERBOSE = re.compile(
    r"^(\w+ \([\w.]+\)(?: \([^\n]*\))?) \.\.\. (ok|FAIL|ERROR|skipped\b.*|expected failure|unexpected success)\s*$", re.M
)


def _parse_unittest(text: str) -> TestCounts | None:
    runs = list(_UNITTEST_RAN_FULL.finditer(text))
    if not runs:
        return None
    ran = sum(int(m.group(1)) for m in runs)
    failures = errors = skipped = xfail = xpass = 0
    for m in _UNITTEST_STATUS.finditer(text, runs[0].start()):
        for k, v in re.findall(r"(\w[\w ]*?)=(\d+)", m.group(2) or ""):
            k = k.strip()
            if k == "failures":
                failures += int(v)
            elif k == "errors":
                errors += int(v)
            elif k == "skipped":
                skipped += int(v)
            elif k == "expected failures":
                xfail += int(v)
            elif k == "unexpected successes":
                xpass += int(v)
    failed_ids = [m.group(1) for m in _UNITTEST_FAIL_HEAD.finditer(text)]
    passed_ids = [m.group(1) for m in _UNITTEST_VERBOSE.finditer(text) if m.group(2) == "ok"]
    return TestCounts(
        "unittest",
        passed=max(0, ran - failures - errors - skipped - xfail - xpass),
        failed=failures + xpass,
        skipped=skipped + xfail,
        errors=errors,
        failed_ids=_ids(failed_ids),
        passed_ids=_ids(passed_ids),
    )


# jest -----------------------------------------------------------------------------------------

_JEST_TESTS = re.compile(r"^Tests:\s+(.*\b\d+ total)\s*$", re.M)
_JEST_NONE = re.compile(r"^No tests found, exiting with code \d+", re.M)
_JEST_FILE = re.compile(r"^(PASS|FAIL) +(\S+)")
_JEST_BULLET = re.compile(r"^  ● (.+?)\s*$")
_JEST_GLYPH = re.compile(r"^(\s+)(✓|✕|○|✎|√|×) (?:skipped |todo )?(.+?)(?: \(\d+(?:\.\d+)? m?s\))?\s*$")


def _parse_jest(text: str) -> TestCounts | None:
    m = None
    for m in _JEST_TESTS.finditer(text):
        pass
    if m is None:
        if _JEST_NONE.search(text):
            return TestCounts("jest")
        return None
    c = {k: int(v) for v, k in re.findall(r"(\d+) (\w+)", m.group(1))}
    failed_ids: list[str] = []
    passed_ids: list[str] = []
    errors = 0
    current_file = ""
    in_tree = False
    stack: list[tuple[int, str]] = []
    for line in text.split("\n"):
        fm = _JEST_FILE.match(line)
        if fm:
            current_file = fm.group(2)[2:] if fm.group(2).startswith("./") else fm.group(2)
            in_tree, stack = True, []
            continue
        bm = _JEST_BULLET.match(line)
        if bm:
            in_tree = False
            if bm.group(1) == "Test suite failed to run":
                errors += 1
                failed_ids.append(current_file or bm.group(1))
            else:
                failed_ids.append(bm.group(1))
            continue
        if not in_tree:
            continue
        if not line.strip():
            in_tree = False
            continue
        gm = _JEST_GLYPH.match(line)
        indent = len(line) - len(line.lstrip(" "))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if gm:
            if gm.group(2) in ("✓", "√"):
                passed_ids.append(" › ".join([s for _, s in stack] + [gm.group(3)]))
        else:
            stack.append((indent, line.strip()))
    return TestCounts(
        "jest",
        passed=c.get("passed", 0),
        failed=c.get("failed", 0),
        skipped=c.get("skipped", 0) + c.get("todo", 0) + c.get("pending", 0),
        errors=errors,
        failed_ids=_ids(failed_ids),
        passed_ids=_ids(passed_ids),
    )


# vitest ---------------------------------------------------------------------------------------

_VITEST_TESTS = re.compile(r"^\s*Tests\s+(.+?)\s*\((\d+)\)\s*$", re.M)
_VITEST_FILES = re.compile(r"^\s*Test Files\s+", re.M)
_VITEST_ERRORS = re.compile(r"^\s*Errors\s+(\d+) errors?\b", re.M)
_VITEST_FAILED_SUITES = re.compile(r"Failed Suites (\d+)")
_VITEST_FAIL = re.compile(r"^ FAIL  (.+?)\s*$", re.M)
_VITEST_FILE_LINE = re.compile(r"^ (?:✓|❯|×|↓) (\S+) \(\d+ tests?[^)]*\)")
_VITEST_TEST_LINE = re.compile(r"^( +)(✓|×|↓) (.+?)(?: \d+ms)?\s*$")


def _parse_vitest(text: str) -> TestCounts | None:
    m = None
    for m in _VITEST_TESTS.finditer(text):
        pass
    if m is None or not _VITEST_FILES.search(text):
        if _VITEST_NONE.search(text) and re.search(r"^\s*RUN\s+v\d", text, re.M):
            return TestCounts("vitest")
        return None
    c = {k: int(v) for v, k in re.findall(r"(\d+) (\w+)", m.group(1))}
    errors = sum(int(n) for n in _VITEST_FAILED_SUITES.findall(text))
    errors += sum(int(n) for n in _VITEST_ERRORS.findall(text))
    failed_ids = [re.sub(r" \[ [^\]]* \]$", "", f) for f in _VITEST_FAIL.findall(text)]
    passed_ids: list[str] = []
    current_file = ""
    for line in text.split("\n"):
        fm = _VITEST_FILE_LINE.match(line)
        if fm:
            current_file = fm.group(1)
            continue
        tm = _VITEST_TEST_LINE.match(line)
        if not tm or tm.group(2) != "✓":
            continue
        name = tm.group(3)
        if len(tm.group(1)) == 1:  # verbose reporter: "file > describe > test"
            if " > " in name and not re.search(r"\(\d+ tests?\b", name):
                passed_ids.append(name)
        elif current_file:  # default reporter: tests of a failing file, under its file line
            passed_ids.append(f"{current_file} > {name}")
    return TestCounts(
        "vitest",
        passed=c.get("passed", 0),
        failed=c.get("failed", 0),
        skipped=c.get("skipped", 0) + c.get("todo", 0),
        errors=errors,
        failed_ids=_ids(failed_ids),
        passed_ids=_ids(passed_ids),
    )


# mocha (spec reporter) ------------------------------------------------------------------------

_MOCHA_SUMMARY = re.compile(r"^\s*(\d+) (passing|failing|pending)\b", re.M)
_MOCHA_PASSING_LINE = re.compile(r"^\s*\d+ passing \(\d+(?:\.\d+)?m?s\)\s*$", re.M)
_MOCHA_NO_FILES = re.compile(r"^(?:Error: )?No test files found: ", re.M)
_MOCHA_ITEM = re.compile(r"^( +)(?:(✔|✓) (.+?)(?: \(\d+m?s\))?|(\d+)\) (.+)|- (.+))\s*$")


def _parse_mocha(text: str) -> TestCounts | None:
    pm = _MOCHA_PASSING_LINE.search(text)
    if pm is None:
        if _MOCHA_NO_FILES.search(text):
            return TestCounts("mocha")
        return None
    counts = {"passing": 0, "failing": 0, "pending": 0}
    for n, kind in _MOCHA_SUMMARY.findall(text[pm.start():]):
        counts[kind] += int(n)
    failed_ids: list[str] = []
    passed_ids: list[str] = []
    stack: list[tuple[int, str]] = []
    for line in text[: pm.start()].split("\n"):  # the tree: indented lines before the summary
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        if indent == 0:  # not mocha's (npm banner, console output): the tree starts afresh
            stack = []
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        im = _MOCHA_ITEM.match(line)
        prefix = [s for _, s in stack]
        if im is None:
            stack.append((indent, line.strip()))
        elif im.group(2):
            passed_ids.append(" ".join(prefix + [im.group(3)]))
        elif im.group(4):
            failed_ids.append(" ".join(prefix + [im.group(5)]))
    return TestCounts(
        "mocha",
        passed=counts["passing"],
        failed=counts["failing"],
        skipped=counts["pending"],
        failed_ids=_ids(failed_ids),
        passed_ids=_ids(passed_ids),
    )


# node --test spec reporter --------------------------------------------------------------------

_NODE_SPEC_SUM = re.compile(r"^ℹ (tests|suites|pass|fail|cancelled|skipped|todo) (\d+)\s*$", re.M)
_NODE_SPEC_ITEM = re.compile(r"^( *)(✔|✖|﹣|▶) (.+?)(?: \([\d.]+m?s\))?(?: # (.*))?\s*$")


def _parse_node_spec(text: str) -> TestCounts | None:
    found = _NODE_SPEC_SUM.findall(text)
    if not any(k == "tests" for k, _ in found):
        return None
    c: dict[str, int] = {}
    for k, v in found:
        c[k] = c.get(k, 0) + int(v)
    failed_ids: list[str] = []
    passed_ids: list[str] = []
    stack: list[tuple[int, str]] = []
    for line in text.split("\n"):
        if line.startswith("✖ failing tests:"):
            break
        m = _NODE_SPEC_ITEM.match(line)
        if not m:
            continue
        indent, glyph, name, directive = len(m.group(1)), m.group(2), m.group(3), m.group(4) or ""
        while stack and stack[-1][0] > indent:
            stack.pop()
        if glyph == "▶":
            stack.append((indent, name))
            continue
        if stack and stack[-1][0] == indent and stack[-1][1] == name:
            stack.pop()  # the suite's own result line
            continue
        full = " > ".join([s for i, s in stack if i < indent] + [name])
        todo = directive.upper().startswith("TODO")
        if glyph == "✔" and not todo:
            passed_ids.append(full)
        elif glyph == "✖" and not todo:
            failed_ids.append(full)
    return TestCounts(
        "node-spec",
        passed=c.get("pass", 0),
        failed=c.get("fail", 0) + c.get("cancelled", 0),
        skipped=c.get("skipped", 0) + c.get("todo", 0),
        failed_ids=_ids(failed_ids),
        passed_ids=_ids(passed_ids),
    )


# TAP (node --test's TAP reporter, mocha --reporter tap, any TAP producer) ---------------------

_TAP_LINE = re.compile(r"^( *)(not ok|ok) (\d+)(?: -)?(?: (.*?))?\s*$")
_TAP_DIRECTIVE = re.compile(r"\s+#\s*(SKIP|TODO)\b\S*\s*(.*)$", re.I)
_TAP_VERSION = re.compile(r"^TAP version \d+", re.M)
_TAP_PLAN = re.compile(r"^ *1\.\.\d+", re.M)
_TAP_SUM = re.compile(r"^# (tests|suites|pass|fail|cancelled|skipped|todo) (\d+)\s*$", re.M)
_TAP_BAIL = re.compile(r"^Bail out!", re.M)


@dataclass
class _TapEntry:
    indent: int
    ok: bool
    name: str
    directive: str
    parent: bool = False
    children: list[int] = field(default_factory=list)


def _tap_entries(text: str) -> list[_TapEntry]:
    entries: list[_TapEntry] = []
    yaml_indent: int | None = None
    for line in text.split("\n"):
        stripped = line.strip()
        indent = len(line) - len(line.lstrip(" "))
        if yaml_indent is not None:
            if stripped == "..." and indent <= yaml_indent + 2:
                yaml_indent = None
            continue
        if stripped == "---" and entries:
            yaml_indent = indent
            continue
        m = _TAP_LINE.match(line)
        if not m:
            continue
        name = m.group(4) or ""
        directive = ""
        dm = _TAP_DIRECTIVE.search(name)
        if dm:
            directive = dm.group(1).upper()
            name = name[: dm.start()]
        entries.append(_TapEntry(len(m.group(1)), m.group(2) == "ok", name.strip(), directive))
    # a line followed (before it) by deeper-indented lines is a parent (suite or test with subtests)
    pending: list[int] = []  # indices not yet claimed by a parent
    for i, e in enumerate(entries):
        claimed = [j for j in pending if entries[j].indent > e.indent]
        if claimed:
            e.parent = True
            e.children = claimed
            pending = [j for j in pending if j not in claimed]
        pending.append(i)
    return entries


def _tap_names(entries: list[_TapEntry]) -> list[str]:
    names = [e.name for e in entries]
    for i in range(len(entries) - 1, -1, -1):  # outermost parents are last: prefix downwards
        if entries[i].parent:
            stack = list(entries[i].children)
            while stack:
                j = stack.pop()
                names[j] = f"{entries[i].name} > {names[j]}" if entries[i].name else names[j]
                stack.extend(entries[j].children)
    return names


def _parse_tap(text: str) -> TestCounts | None:
    if not (_TAP_VERSION.search(text) or _TAP_PLAN.search(text)):
        return None
    entries = _tap_entries(text)
    summary: dict[str, int] = {}
    for k, v in _TAP_SUM.findall(text):
        summary[k] = summary.get(k, 0) + int(v)
    if not entries and "tests" not in summary and not _TAP_VERSION.search(text):
        return None
    names = _tap_names(entries)
    passed = failed = skipped = 0
    failed_ids: list[str] = []
    passed_ids: list[str] = []
    for e, name in zip(entries, names):
        if e.parent:
            continue
        if e.directive == "SKIP" or (e.directive == "TODO"):
            skipped += 1
        elif e.ok:
            passed += 1
            passed_ids.append(name)
        else:
            failed += 1
            failed_ids.append(name)
    node = bool(summary.keys() & {"suites", "cancelled", "todo"})
    if node:  # node's own summary is authoritative (it knows what the TAP lines nest)
        passed = summary.get("pass", passed)
        failed = summary.get("fail", failed) + summary.get("cancelled", 0)
        skipped = summary.get("skipped", 0) + summary.get("todo", 0)
    elif "pass" in summary or "fail" in summary:  # e.g. mocha: pass/fail from the summary, skips from lines
        passed = summary.get("pass", passed)
        failed = summary.get("fail", failed)
    return TestCounts(
        "node-tap" if node else "tap",
        passed=passed,
        failed=failed,
        skipped=skipped,
        errors=len(_TAP_BAIL.findall(text)),
        failed_ids=_ids(failed_ids),
        passed_ids=_ids(passed_ids),
    )


# go test --------------------------------------------------------------------------------------

_GO_RESULT = re.compile(r"^( *)--- (PASS|FAIL|SKIP): (\S+) \(")
_GO_PKG_LINE = re.compile(r"^(ok|FAIL|\?)[ ]*\t(\S+)(?:[\t ](.*))?$")


def _parse_go(text: str) -> TestCounts | None:
    lines = text.split("\n")
    if not any(_GO_PKG_LINE.match(x) or _GO_RESULT.match(x) for x in lines) and not _GO_WARN_NONE.search(text):
        return None
    counts = TestCounts("go")
    failed_ids: list[str] = []
    passed_ids: list[str] = []
    pending: list[tuple[str, str]] = []  # (status, name) since the last package line

    def flush(pkg: str) -> bool:
        names = [n for _, n in pending]
        leaves = [(s, n) for s, n in pending if not any(o.startswith(n + "/") for o in names)]
        seen: set[str] = set()
        for status, name in leaves:
            if name in seen:
                continue
            seen.add(name)
            ident = f"{pkg}/{name}" if pkg else name
            if status == "PASS":
                counts.passed += 1
                passed_ids.append(ident)
            elif status == "FAIL":
                counts.failed += 1
                failed_ids.append(ident)
            else:
                counts.skipped += 1
        had = bool(pending)
        pending.clear()
        return had

    for line in lines:
        rm = _GO_RESULT.match(line)
        if rm:
            pending.append((rm.group(2), rm.group(3)))
            continue
        pm = _GO_PKG_LINE.match(line)
        if not pm:
            continue
        status, pkg, rest = pm.group(1), pm.group(2), pm.group(3) or ""
        if status == "?":
            continue
        if "[build failed]" in rest or "[setup failed]" in rest:
            pending.clear()
            counts.errors += 1
            failed_ids.append(pkg)
            continue
        had_tests = flush(pkg)
        if had_tests:
            continue
        if status == "ok" and "[no tests to run]" not in rest:
            counts.passed += 1  # no -v: a passing package is one unit
            passed_ids.append(pkg)
        elif status == "FAIL":
            counts.errors += 1  # failed without a failing test: panic, timeout, TestMain
            failed_ids.append(pkg)
    flush("")
    counts.failed_ids = _ids(failed_ids)
    counts.passed_ids = _ids(passed_ids)
    return counts


# cargo test -----------------------------------------------------------------------------------

_CARGO_RESULT = re.compile(
    r"^test result: (?:ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored(?:; (\d+) measured)?(?:; (\d+) filtered out)?",
    re.M,
)
_CARGO_TEST = re.compile(r"^test (.+?) \.\.\. (ok|FAILED|ignored(?:, .*)?)\s*$", re.M)
_CARGO_NO_COMPILE = re.compile(r"^error: could not compile `", re.M)


def _parse_cargo(text: str, hinted: bool = False) -> TestCounts | None:
    results = _CARGO_RESULT.findall(text)
    compile_errors = len(_CARGO_NO_COMPILE.findall(text))
    if not results and not _CARGO_RUNNING.search(text) and not (hinted and compile_errors):
        return None
    failed_ids: list[str] = []
    passed_ids: list[str] = []
    for name, status in _CARGO_TEST.findall(text):
        if status == "ok":
            passed_ids.append(name)
        elif status == "FAILED":
            failed_ids.append(name)
    if compile_errors:
        failed_ids += re.findall(r"^error: could not compile `([^`]+)`", text, re.M)
    return TestCounts(
        "cargo",
        passed=sum(int(r[0]) for r in results),
        failed=sum(int(r[1]) for r in results),
        skipped=sum(int(r[2]) for r in results),
        errors=compile_errors,
        failed_ids=_ids(failed_ids),
        passed_ids=_ids(passed_ids),
    )


# dispatch -------------------------------------------------------------------------------------

_PARSERS: dict[str, Callable[[str], TestCounts | None]] = {
    "pytest": _parse_pytest,
    "unittest": _parse_unittest,
    "jest": _parse_jest,
    "vitest": _parse_vitest,
    "cargo": _parse_cargo,
    "go": _parse_go,
    "node-spec": _parse_node_spec,
    "tap": _parse_tap,
    "mocha": _parse_mocha,
}

_HINTS: list[tuple[re.Pattern[str], tuple[str, ...]]] = [
    (re.compile(r"\bpytest\b|\bpy\.test\b"), ("pytest",)),
    (re.compile(r"\bunittest\b"), ("unittest",)),
    (re.compile(r"\bvitest\b"), ("vitest",)),
    (re.compile(r"\bjest\b"), ("jest",)),
    (re.compile(r"\bmocha\b"), ("mocha", "tap")),
    (re.compile(r"\bnode\b.*\s--test\b"), ("node-spec", "tap")),
    (re.compile(r"\bgo\s+test\b"), ("go",)),
    (re.compile(r"\bcargo\s+(?:test|nextest)\b"), ("cargo",)),
]


def parse_tests(output: str, argv: Sequence[str] = ()) -> TestCounts | None:
    """Parse a test runner's output into :class:`TestCounts`.

    Formats are tried in this order: those the argv names first (``pytest``, ``unittest``,
    ``vitest``, ``jest``, ``mocha``, ``node --test``, ``go test``, ``cargo test``), then pytest,
    unittest, jest, vitest, cargo, go, node spec reporter, TAP, mocha; the first one that
    recognises its summary wins (one run per output: a script running two runners reports the
    first format found). ANSI colour codes and ``\\r`` rewrites are ignored.

    Args:
        output: the check's merged stdout+stderr (a tail of it is fine: every format's summary is
            at the end; ids listed before the tail are missed).
        argv: the command, used only as a hint for the order.

    Returns:
        The counts, or None when no known format is recognised.

    Example:
        >>> parse_tests("FAILED t.py::test_b - assert 1 == 2\\n1 failed, 2 passed in 0.01s\\n").to_json()
        {'runner': 'pytest', 'passed': 2, 'failed': 1, 'skipped': 0, 'errors': 0, 'total': 3, 'failedIds': ['t.py::test_b']}
    """
    if not output:
        return None
    text = _clean(output, _MAX_LINE)
    joined = " ".join(argv).lower()
    order: list[str] = []
    for pattern, names in _HINTS:
        if joined and pattern.search(joined):
            order += [n for n in names if n not in order]
    hinted_cargo = "cargo" in order
    order += [n for n in _PARSERS if n not in order]
    for name in order:
        parser = _PARSERS[name]
        res = _parse_cargo(text, hinted_cargo) if name == "cargo" else parser(text)
        if res is not None:
            return res
    return None


def parse_counts(output: str) -> dict[str, int | str] | None:
    """Parse test counts from a runner's output (the older, smaller shape).

    Returns:
        ``{"runner", "passed", "failed", "skipped", "total"}`` where ``failed`` includes errors,
        from :func:`parse_tests`; None when nothing matches.
    """
    c = parse_tests(output)
    if c is None:
        return None
    return {"runner": c.runner, "passed": c.passed, "failed": c.failed + c.errors, "skipped": c.skipped, "total": c.total}
