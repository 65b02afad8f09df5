"""Mocha (spec reporter): counts and the zero-test rule (``0 passing``); its TAP reporter is
counted by :mod:`.tap`.
"""

from __future__ import annotations

import re

from .base import CountFormat, TestCounts, TestInfra, Toolchain

_MOCHA_PASSING = re.compile(r"^\s*(\d+) passing\b", re.M)
_MOCHA_OTHER = re.compile(r"^\s*[1-9]\d* (?:failing|pending)\b", re.M)

_MOCHA_SUMMARY = re.compile(r"^\s*(\d+) (passing|failing|pending)\b", re.M)
_MOCHA_PASSING_LINE = re.compile(r"^\s*\d+ passing \(\d+(?:\.\d+)?m?s\)\s*$", re.M)
_MOCHA_NO_FILES = re.compile(r"^(?:Error: )?No test files found: ", re.M)
_MOCHA_ITEM = re.compile(r"^( +)(?:(✔|✓) (.+?)(?: \(\d+m?s\))?|(\d+)\) (.+)|- (.+))$")  # on rstripped lines


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
        im = _MOCHA_ITEM.match(line.rstrip())  # no trailing \s*$ after a lazy group: linear
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
        failed_ids=failed_ids,
        passed_ids=passed_ids,
    )


def _zero(text: str) -> bool:
    """``0 passing`` with no ``N passing/failing/pending`` N > 0."""
    passing = [int(n) for n in _MOCHA_PASSING.findall(text)]
    return bool(passing) and all(n == 0 for n in passing) and not _MOCHA_OTHER.search(text)



INFRA = TestInfra(files=("*.test.js", "*.test.mjs", "*.test.cjs", "*.test.ts", "*.test.jsx", "*.test.tsx", "*.spec.js", "*.spec.mjs", "*.spec.cjs", "*.spec.ts", "*.spec.jsx", "*.spec.tsx", "*-test.js", "*_test.js", "*-test.mjs", "test-*.js", "test-*.mjs", "test.js", "test.mjs", "**/test/**", "**/tests/**", "**/__tests__/**", "**/__mocks__/**", ".mocharc", ".mocharc.*"))
"""Mocha's test infrastructure: test files and its rc files (docs/integrity.md)."""

TOOLCHAIN = Toolchain(
    id="mocha",
    order=85,
    test_command=re.compile(r"\bmocha\b"),
    hint=re.compile(r"\bmocha\b"),
    hint_formats=("mocha", "tap"),
    formats=(CountFormat("mocha", _parse_mocha, 90),),
    zero=_zero,
    infra=INFRA,
)
