"""Jest: counts of its default reporter (``Tests: … total``, the per-test tree), and its repair
directives (``● Suite › test`` blocks with their first ``at … (path:line:col)`` in the project).
"""

from __future__ import annotations

import re
from typing import Any, Sequence

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
from .formats.jest_json import parse_jest_json, report_findings

_JEST_TESTS = re.compile(r"^Tests:\s+(.*\b\d+ total)\s*$", re.M)
_JEST_NONE = re.compile(r"^No tests found, exiting with code \d+", re.M)
_JEST_FILE = re.compile(r"^(PASS|FAIL) +(\S+)")
_JEST_BULLET = re.compile(r"^  ● (.+?)\s*$")
_JEST_GLYPH = re.compile(r"^(\s+)(✓|✕|○|✎|√|×) (?:skipped |todo )?(.+?)(?: \(\d+(?:\.\d+)? m?s\))?\s*$")


def _parse_jest(text: str) -> TestCounts | None:
    m = last_match(_JEST_TESTS, text)
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
        failed_ids=failed_ids,
        passed_ids=passed_ids,
    )


_JEST_FILE_RE = re.compile(r"^\s*(?:FAIL|PASS)\s+(\S+)")
_JEST_BLOCK_RE = re.compile(r"^\s*● (.+?)\s*$")
_JEST_AT_RE = re.compile(r"^\s+at (?:.*? \()?(.+?):(\d+):(\d+)\)?\s*$")
_JEST_END_RE = re.compile(r"^(?:Test Suites:|Tests:|Snapshots:|Time:|Ran all test suites|Summary of all failing tests)")


_JEST_FRAME_LINE_RE = re.compile(r"^(?:>\s*)?\d+\s*\||^\|")


def _jest_message(lines: Sequence[str]) -> str:
    """The first message line, plus ``Expected``/``Received`` lines before the code frame."""
    if not lines:
        return "(no message)"
    parts = [lines[0]]
    for s in lines[1:]:
        if _JEST_FRAME_LINE_RE.match(s):
            break
        if re.match(r"^(?:Expected|Received)\b", s) and len(parts) < 3:
            parts.append(s)
    return "; ".join(parts)


def parse_jest(text: str, ctx: ParseContext) -> list[Finding]:
    """jest ``● Suite › test`` blocks: the message after the title, the first ``at …(path:l:c)``
    frame in the project's own code; ``● Test suite failed to run`` blocks."""
    out: list[Finding] = []
    suite: str | None = None
    block: dict[str, Any] | None = None

    def flush() -> None:
        if block is None:
            return
        title, at = block["title"], block["at"]
        suite_file = ctx.rel(block["suite"]) if block["suite"] else None
        msg = _jest_message(block["lines"])
        file, line = at if at else (suite_file, None)
        if title == "Test suite failed to run":
            out.append(Finding(f"test suite {suite_file or '?'} failed to run: {msg}",
                               "fix the error that stops the test file from loading (import path, syntax, missing module)",
                               file, line))
        else:
            out.append(Finding(f"test '{title}' failed: {msg}", test_action("jest", title, at, suite_file), file, line))

    for raw in text.split("\n"):
        line = raw.rstrip()
        f = _JEST_FILE_RE.match(line)
        if f and not line.startswith("    "):
            flush()
            block, suite = None, f.group(1)
            continue
        b = _JEST_BLOCK_RE.match(line)
        if b:
            flush()
            block = {"title": b.group(1), "suite": suite, "lines": [], "at": None}
            continue
        if _JEST_END_RE.match(line.strip()):
            flush()
            block = None
            continue
        if block is None:
            continue
        a = _JEST_AT_RE.match(line)
        if a:
            if block["at"] is None and ctx.own(a.group(1)):
                block["at"] = (ctx.rel(a.group(1)), int(a.group(2)))
            continue
        if line.strip():
            block["lines"].append(line.strip())
    flush()
    return out or report_findings(text, ctx)  # jest --json without its human blocks (stderr dropped)



INFRA = TestInfra(
    files=("*.test.js", "*.test.mjs", "*.test.cjs", "*.test.ts", "*.test.jsx", "*.test.tsx", "*.spec.js", "*.spec.mjs", "*.spec.cjs", "*.spec.ts", "*.spec.jsx", "*.spec.tsx", "*-test.js", "*_test.js", "*-test.mjs", "test-*.js", "test-*.mjs", "test.js", "test.mjs", "**/test/**", "**/tests/**", "**/__tests__/**", "**/__mocks__/**", "jest.config.*", "jest.setup.*", "setupTests.*", "babel.config.*", ".babelrc", ".babelrc.*"),
    aware=(re.compile(r"\bJEST_WORKER_ID\b|\bprocess\.env\.JEST\b|\bexpect\.getState\(|\bjest\.\w+\("),),
    aware_files=("*.js", "*.mjs", "*.cjs", "*.ts", "*.jsx", "*.tsx"),
)
"""Jest's test infrastructure: test files, ``__tests__``/``__mocks__``, its config and setup files
and the Babel config it transforms them with (docs/integrity.md)."""

TOOLCHAIN = Toolchain(
    id="jest",
    order=70,
    test_command=re.compile(r"\bjest\b"),
    hint=re.compile(r"\bjest\b"),
    hint_formats=("jest-json", "jest"),
    # ``jest --json`` and ``vitest --reporter=json`` share the report's shape (runner ``jest-json``
    # or ``vitest-json``); one long line, so it is read uncut
    formats=(CountFormat("jest-json", parse_jest_json, 25, whole_lines=True, runners=("vitest-json",)), CountFormat("jest", _parse_jest, 30)),
    directive_argv=re.compile(r"\bjest\b", re.I),
    shape=re.compile(r"^\s*● \S|^\{\"numFailedTestSuites\":", re.M),
    directives=parse_jest,
    infra=INFRA,
)
