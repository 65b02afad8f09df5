"""Test-output heuristics: is a check a test command, did it run zero tests, what did it count.

Source: docs/acceptance.md §3.2 (``is_test_check``, ``detect_zero_tests`` and its four regexes). The port
deliberately goes beyond the original's four regexes (which let ``Ran 0 tests``, vitest's
``No test files found``, go's ``[no test files]`` and cargo's ``running 0 tests`` pass): every
toolchain adds its own zero-test rule (:mod:`.toolchains`), each written so that a real run
(``10 passed``, ``Ran 3 tests``, ``# tests 10``, ``running 2 tests``) is never flagged.

:func:`parse_tests` reads passed / failed / skipped / errors and the test ids with the count
formats of the registered toolchains (text and machine-readable forms); the check runner uses it to
fail a mandatory test check closed when nothing ran, when every test was skipped, or when the counts
contradict a zero exit code. Every format was written against real output of its runner, recorded
under ``tests/data/``.

This module names no toolchain: it iterates :mod:`.toolchains.registry`. Plain Python, no I/O.
"""

from __future__ import annotations

import re
from typing import Sequence

from .toolchains.base import MAX_IDS, MAX_LINE, TestCounts, clean
from .toolchains.registry import count_formats, hinted_formats, toolchains

__all__ = ["TestCounts", "MAX_IDS", "is_test_check", "detect_zero_tests", "parse_tests", "parse_counts"]


def is_test_check(name: str, argv: Sequence[str]) -> bool:
    """True when a check runs tests (docs/acceptance.md §3.2).

    ``"test" in name.lower()`` (so ``latest-build`` counts, as in the original) or the lower-cased,
    space-joined argv matches a registered toolchain's ``test_command`` (``node --test``,
    ``npm run test``, ``pytest``, ``go test``, ``cargo test``, ``vitest``, ``jest``, ``mocha``,
    ``unittest``, …). ``npm test`` (no ``run``) only via the name.
    """
    if "test" in (name or "").lower():
        return True
    joined = " ".join(argv).lower()
    return any(tc.test_command is not None and tc.test_command.search(joined) for tc in toolchains())


# The original's four rules (docs/acceptance.md §3.2), any match → zero tests.
_SPEC_ZERO_RES = [
    re.compile(r"#\s+tests\s+0\b", re.I),  # node:test / TAP summary
    re.compile(r"\bno tests (?:were )?found\b", re.I),  # jest
    re.compile(r"\bno tests ran\b", re.I),  # pytest, unittest (3.12+ "NO TESTS RAN")
    re.compile(r"\b0 tests (?:ran|executed|found)\b", re.I),
]


def detect_zero_tests(output: str) -> bool:
    """True when a test command's output shows that no test ran (docs/acceptance.md §3.2, extended).

    The original's rules (any match): ``# tests 0``, ``no tests (were) found``, ``no tests ran``,
    ``0 tests ran|executed|found``; then each toolchain's ``zero`` rule (e.g. pytest's
    ``collected 0 items``, unittest's ``Ran 0 tests``, vitest's ``No test files found``, go's
    ``[no test files]`` packages, cargo's ``running 0 tests``, node's ``ℹ tests 0``, mocha's
    ``0 passing``). A rule that raises is skipped.

    :func:`parse_tests` complements these rules: the runner also treats parsed counts with a
    total of 0 as "nothing ran".

    Args:
        output: the merged stdout+stderr tail of the check.
    """
    if not output:
        return False
    output = clean(output)
    if any(r.search(output) for r in _SPEC_ZERO_RES):
        return True
    for tc in toolchains():
        if tc.zero is None:
            continue
        try:
            if tc.zero(output):
                return True
        except Exception:  # noqa: BLE001 - a broken rule must not sink the check
            continue
    return False


def parse_tests(output: str, argv: Sequence[str] = ()) -> TestCounts | None:
    """Parse a test runner's output into :class:`TestCounts`.

    Formats are tried in this order: those the argv names first (each toolchain's ``hint``), then
    every registered format by ``priority`` (pytest, unittest, jest, vitest, cargo, go, node spec
    reporter, TAP, mocha, then the newer ones); the first one that recognises its summary wins
    (one run per output: a script running two runners reports the first format found). ANSI
    colour codes and ``\\r`` rewrites are ignored; a format that raises is skipped.

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
    whole = clean(output)
    cut = clean(whole, MAX_LINE)
    formats = count_formats()
    hinted = [f for f in hinted_formats(" ".join(argv).lower()) if f in formats]
    for fid in hinted + [f for f in formats if f not in hinted]:
        fmt = formats[fid]
        parse = fmt.hinted if fid in hinted and fmt.hinted is not None else fmt.parse
        try:
            res = parse(whole if fmt.whole_lines else cut)
        except Exception:  # noqa: BLE001 - one broken format must not sink the count
            continue
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
