"""Test-output heuristics: is a check a test command, did it run zero tests, what did it count.

Source: 20-acceptance §3.2 (``is_test_check``, ``detect_zero_tests`` and its four regexes). The port
deliberately goes beyond the original's four regexes (which let ``Ran 0 tests``, vitest's
``No test files found``, go's ``[no test files]`` and cargo's ``running 0 tests`` pass): see
:func:`detect_zero_tests`. Every extra rule is written so that a real run (``10 passed``,
``Ran 3 tests``, ``# tests 10``, ``running 2 tests``) is never flagged.

Plain Python, no I/O.
"""

from __future__ import annotations

import re
from typing import Sequence

__all__ = ["is_test_check", "detect_zero_tests", "parse_counts"]

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
_PYTEST_SUMMARY = re.compile(r"^=*\s*((?:\d+ \w+(?:, )?)+) in [\d.]+s\b", re.M)

_UNITTEST_RAN = re.compile(r"^Ran (\d+) tests? in ", re.M)

_GO_PKG = re.compile(r"^(ok|FAIL|\?)[ \t]+(\S+)(.*)$", re.M)
_GO_WARN_NONE = re.compile(r"testing: warning: no tests to run", re.I)
_GO_RAN = re.compile(r"^\s*--- (?:PASS|FAIL|SKIP):", re.M)

_CARGO_RUNNING = re.compile(r"^running (\d+) tests?\s*$", re.M)

_MOCHA_PASSING = re.compile(r"^\s*(\d+) passing\b", re.M)
_MOCHA_OTHER = re.compile(r"^\s*[1-9]\d* (?:failing|pending)\b", re.M)


def _go_zero(text: str) -> bool:
    pkgs = _GO_PKG.findall(text)
    pkgs = [p for p in pkgs if p[0] != "?" or "[no test files]" in p[2]]
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

    Args:
        output: the merged stdout+stderr tail of the check.
    """
    if not output:
        return False
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


def _counts(passed: int, failed: int, skipped: int, runner: str) -> dict[str, int | str]:
    return {"runner": runner, "passed": passed, "failed": failed, "skipped": skipped, "total": passed + failed + skipped}


def parse_counts(output: str) -> dict[str, int | str] | None:
    """Parse test counts from a runner's output.

    Returns:
        ``{"runner", "passed", "failed", "skipped", "total"}`` (``failed`` includes errors) for the
        first format recognised, in this order: pytest, unittest, jest, vitest, cargo, node TAP,
        node spec reporter, mocha, go (``-v`` only); None when nothing matches.
    """
    if not output:
        return None
    summaries = _PYTEST_SUMMARY.findall(output)
    if summaries:
        c = {m.group(2).lower(): int(m.group(1)) for m in re.finditer(r"(\d+) (\w+)", summaries[-1])}
        if c.keys() & {"passed", "failed", "error", "errors", "skipped", "xfailed", "xpassed", "deselected"}:
            return _counts(
                c.get("passed", 0) + c.get("xpassed", 0),
                c.get("failed", 0) + c.get("error", 0) + c.get("errors", 0),
                c.get("skipped", 0) + c.get("xfailed", 0),
                "pytest",
            )
    if re.search(r"\bno tests ran\b", output, re.I) and re.search(r"\bin [\d.]+s\b", output):
        return _counts(0, 0, 0, "pytest")
    ran = _UNITTEST_RAN.findall(output)
    if ran:
        total = sum(int(n) for n in ran)
        failed = skipped = 0
        for m in re.finditer(r"^(?:OK|FAILED)(?: \(([^)]*)\))?\s*$", output, re.M):
            for k, v in re.findall(r"(\w+)=(\d+)", m.group(1) or ""):
                if k in ("failures", "errors", "unexpected_successes"):
                    failed += int(v)
                elif k in ("skipped", "expected_failures"):
                    skipped += int(v)
        return _counts(max(0, total - failed - skipped), failed, skipped, "unittest")
    m = re.search(r"^Tests:\s+(.+?)\s*$", output, re.M)
    if m and "total" in m.group(1):
        c = {k: int(v) for v, k in re.findall(r"(\d+) (\w+)", m.group(1))}
        return _counts(c.get("passed", 0), c.get("failed", 0), c.get("skipped", 0) + c.get("todo", 0), "jest")
    m = re.search(r"^\s*Tests\s+(.+?)\((\d+)\)\s*$", output, re.M)
    if m:
        c = {k: int(v) for v, k in re.findall(r"(\d+) (\w+)", m.group(1))}
        return _counts(c.get("passed", 0), c.get("failed", 0), c.get("skipped", 0) + c.get("todo", 0), "vitest")
    results = re.findall(r"test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored", output)
    if results:
        return _counts(
            sum(int(r[0]) for r in results), sum(int(r[1]) for r in results), sum(int(r[2]) for r in results), "cargo"
        )
    tap = {k: int(v) for k, v in re.findall(r"^# (pass|fail|skipped|todo|cancelled) (\d+)\s*$", output, re.M)}
    if "pass" in tap or "fail" in tap:
        return _counts(tap.get("pass", 0), tap.get("fail", 0) + tap.get("cancelled", 0), tap.get("skipped", 0) + tap.get("todo", 0), "node-tap")
    spec = {k: int(v) for k, v in re.findall(r"^\s*ℹ (pass|fail|skipped|todo|cancelled) (\d+)\s*$", output, re.M)}
    if "pass" in spec or "fail" in spec:
        return _counts(spec.get("pass", 0), spec.get("fail", 0) + spec.get("cancelled", 0), spec.get("skipped", 0) + spec.get("todo", 0), "node-spec")
    mocha = {k: int(v) for v, k in re.findall(r"^\s*(\d+) (passing|failing|pending)\b", output, re.M)}
    if "passing" in mocha:
        return _counts(mocha.get("passing", 0), mocha.get("failing", 0), mocha.get("pending", 0), "mocha")
    go = re.findall(r"^\s*--- (PASS|FAIL|SKIP):", output, re.M)
    if go:
        return _counts(go.count("PASS"), go.count("FAIL"), go.count("SKIP"), "go")
    return None
