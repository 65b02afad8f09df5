"""Vitest: counts of its default reporter, the zero-test rule (``No test files found``) and its
repair directives (``FAIL path > suite > test`` blocks with their first ``❯ path:line:col``).
"""

from __future__ import annotations

import re
from typing import Any

from .base import (
    CountFormat,
    Finding,
    ParseContext,
    TestCounts,
    TestInfra,
    Toolchain,
    last_match,
    test_action,
)
from .formats.jest_json import report_findings

_VITEST_NONE = re.compile(r"\bno test files found\b", re.I)
_VT_FAIL_RE = re.compile(r"^\s*FAIL\s+(\S+)(?:\s+>\s+(.+?))?(?:\s+\[\s*\S+\s*\])?\s*$")
_VT_FRAME_RE = re.compile(r"^\s*❯\s+(?:\S+\s+)?(\S+?):(\d+):(\d+)\s*$")
_VT_END_RE = re.compile(r"^\s*(?:⎯{3,}|Test Files\b|Tests\b\s+\d)")

_VITEST_TESTS = re.compile(r"^\s*Tests\s+(.+?)\s*\((\d+)\)\s*$", re.M)
_VITEST_FILES = re.compile(r"^\s*Test Files\s+", re.M)
_VITEST_ERRORS = re.compile(r"^\s*Errors\s+(\d+) errors?\b", re.M)
_VITEST_FAILED_SUITES = re.compile(r"Failed Suites (\d+)")
_VITEST_FAIL = re.compile(r"^ FAIL  (.+?)\s*$", re.M)
_VITEST_FILE_LINE = re.compile(r"^ (?:✓|❯|×|↓) (\S+) \(\d+ tests?[^)]*\)")
_VITEST_TEST_LINE = re.compile(r"^( +)(✓|×|↓) (.+?)(?: \d+ms)?\s*$")


def _parse_vitest(text: str) -> TestCounts | None:
    m = last_match(_VITEST_TESTS, text)
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
        failed_ids=failed_ids,
        passed_ids=passed_ids,
    )


def parse_vitest(text: str, ctx: ParseContext) -> list[Finding]:
    """vitest ``FAIL path > suite > test`` blocks: the first line after the header is the message,
    the first ``❯ [fn] path:l:c`` frame in the project's own code the location."""
    out: list[Finding] = []
    block: dict[str, Any] | None = None

    def flush() -> None:
        if block is None:
            return
        path, title = block["file"], block["title"]
        at = block["at"]
        msg = block["msg"] or "(no message)"
        test_file = ctx.rel(path)
        file, line = (at if at else (test_file, None))
        if title:
            out.append(Finding(f"test '{title}' failed: {msg}", test_action("vitest", title, at, test_file), file, line))
        else:
            out.append(Finding(f"test file {test_file} failed: {msg}",
                               "fix the error that stops the test file from loading (import path, syntax, missing module)",
                               file, line))

    for raw in text.split("\n"):
        line = raw.rstrip()
        f = _VT_FAIL_RE.match(line)
        if f and (f.group(2) or "[" in line):
            flush()
            block = {"file": f.group(1), "title": (f.group(2) or "").strip(), "msg": "", "at": None}
            continue
        if block is None:
            continue
        if _VT_END_RE.match(line):
            flush()
            block = None
            continue
        fr = _VT_FRAME_RE.match(line)
        if fr:
            if block["at"] is None and ctx.own(fr.group(1)):
                block["at"] = (ctx.rel(fr.group(1)), int(fr.group(2)))
            continue
        s = line.strip()
        if s and not block["msg"]:
            block["msg"] = s
    flush()
    return out or report_findings(text, ctx)  # vitest --reporter=json prints no failure block


def _zero(text: str) -> bool:
    """``No test files found``."""
    return bool(_VITEST_NONE.search(text))



INFRA = TestInfra(
    files=("*.test.js", "*.test.mjs", "*.test.cjs", "*.test.ts", "*.test.jsx", "*.test.tsx", "*.spec.js", "*.spec.mjs", "*.spec.cjs", "*.spec.ts", "*.spec.jsx", "*.spec.tsx", "*-test.js", "*_test.js", "*-test.mjs", "test-*.js", "test-*.mjs", "test.js", "test.mjs", "**/test/**", "**/tests/**", "**/__tests__/**", "**/__mocks__/**", "vitest.config.*", "vitest.workspace.*", "vite.config.*", "vitest.setup.*"),
    aware=(re.compile(r"\bprocess\.env\.VITEST\w*|import\.meta\.vitest|\bimport\.meta\.env\.VITEST"),),
    aware_files=("*.js", "*.mjs", "*.cjs", "*.ts", "*.jsx", "*.tsx"),
)
"""Vitest's test infrastructure: test files, its (and Vite's) config and setup files (docs/integrity.md)."""

TOOLCHAIN = Toolchain(
    id="vitest",
    order=75,
    test_command=re.compile(r"\bvitest\b"),
    hint=re.compile(r"\bvitest\b"),
    hint_formats=("jest-json", "vitest"),
    formats=(CountFormat("vitest", _parse_vitest, 40),),
    zero=_zero,
    directive_argv=re.compile(r"\bvitest\b", re.I),
    shape=re.compile(r"^\s*FAIL\s+\S+\s+>\s|^\s*❯\s+(?:\S+\s+)?\S+:\d+:\d+\s*$|^\{\"numTotalTestSuites\":", re.M),
    directives=parse_vitest,
    infra=INFRA,
)
