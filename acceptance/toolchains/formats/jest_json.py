"""The Jest JSON report (``jest --json``, ``vitest run --reporter=json``): test counts and ids
(docs/toolchains.md §2).

Both runners print one report object on stdout (jest: one line, after its human summary on
stderr; vitest: one line, nothing else)::

    {"numFailedTestSuites":1,"numFailedTests":1,"numPassedTests":3,"numPendingTests":1,
     "numRuntimeErrorTestSuites":0,"numTodoTests":1,"numTotalTests":6,…,"success":false,
     "testResults":[{"name":"/abs/path/x.test.js","status":"failed","message":"…",
       "assertionResults":[{"ancestorTitles":["math"],"title":"adds","fullName":"math adds",
                            "status":"passed"},…]},…]}

Jest's object starts with ``numFailedTestSuites`` and has ``numRuntimeErrorTestSuites``,
``openHandles`` and ``wasInterrupted``; vitest's starts with ``numTotalTestSuites`` and has none of
those: that tells the runner ids ``jest-json`` and ``vitest-json`` apart. Recorded real outputs:
``tests/data/toolchains/jest/`` and ``tests/data/toolchains/vitest/``.

Finding the report: the merged output may hold npm banners, jest's human summary, console output
(which may itself print JSON) around it. Candidates are the ``{`` that open an object whose first
key is one of the ``num…`` counters; the last :data:`MAX_CANDIDATES` of them are decoded with
:mod:`json`'s C decoder (linear each, so the whole search is linear), last first; the first that
decodes to an object with an integer ``numTotalTests`` and a ``testResults`` list is the report.
When none decodes (the report's line was cut by the engine's line limit, or the output was cut
after the report began), the counters of the last candidate's head are read alone: counts without
ids (and, for vitest, without errors).

Counting rules:

* ``passed`` = ``numPassedTests``, ``failed`` = ``numFailedTests``, ``skipped`` =
  ``numPendingTests + numTodoTests`` (jest's ``pending`` is a skipped test; vitest counts its
  skipped tests there too); each taken from the assertions when the counter is missing;
* ``errors``: test files that failed without a failing test (``status: "failed"``: jest's "Test
  suite failed to run", a vitest file that failed to import, a failing ``afterAll``); in the
  head-only fallback jest's ``numRuntimeErrorTestSuites``;
* ids: jest ``describe › test`` (as jest's text form); vitest ``file > describe > test`` (as
  vitest's text form); an errored file is its path. Paths are made relative to the deepest
  directory common to all test files of the report (the report has only absolute paths; this
  keeps worktree paths out of ids). At most :data:`~..base.MAX_IDS` of each.
* zero tests: ``jest --json --passWithNoTests`` and ``vitest --reporter=json`` without test files
  write a report with ``numTotalTests: 0``: counts with ``total == 0``. Without
  ``--passWithNoTests`` jest writes no report at all (only ``No tests found, exiting with code 1``,
  which jest's text form and the spec zero rules catch): None here.
"""

from __future__ import annotations

import json
import re
from collections import deque
from typing import Any, Callable

from ..base import Finding, ParseContext, TestCounts, strip_ansi, test_action

JEST_RUNNER = "jest-json"
VITEST_RUNNER = "vitest-json"
MAX_CANDIDATES = 20
"""At most this many report candidates (from the end of the text) are decoded."""

_CANDIDATE = re.compile(r'\{\s*"num(?:Failed|Passed|Pending|Total|Todo|RuntimeError)[A-Za-z]*"\s*:')
_HEAD_COUNTER = re.compile(r'"(num[A-Za-z]+)"\s*:\s*(\d{1,12})')
_HEAD_CHARS = 1000
"""The counters sit in the report's first few hundred characters (before ``snapshot``)."""
_DECODER = json.JSONDecoder(strict=False)  # a raw control character in a test name or message
_JEST_KEYS = ("numRuntimeErrorTestSuites", "openHandles", "wasInterrupted")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _report(text: str, starts: list[int]) -> dict[str, Any] | None:
    for start in reversed(starts):
        try:
            obj, _end = _DECODER.raw_decode(text, start)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict) and _int(obj.get("numTotalTests")) is not None \
                and isinstance(obj.get("testResults"), list):
            return obj
    return None


def _head_counts(text: str, starts: list[int]) -> TestCounts | None:
    """The counters of the last candidate whose head has them (report not decodable)."""
    for start in reversed(starts):
        head = text[start:start + _HEAD_CHARS]
        cut = head.find('"snapshot"')
        if cut > 0:
            head = head[:cut]
        found = {k: int(v) for k, v in _HEAD_COUNTER.findall(head)}
        if not {"numTotalTests", "numPassedTests", "numFailedTests"} <= found.keys():
            continue
        jest = "numRuntimeErrorTestSuites" in found
        return TestCounts(
            JEST_RUNNER if jest else VITEST_RUNNER,
            passed=found["numPassedTests"],
            failed=found["numFailedTests"],
            skipped=found.get("numPendingTests", 0) + found.get("numTodoTests", 0),
            errors=found.get("numRuntimeErrorTestSuites", 0),
        )
    return None


def _parts(path: str) -> list[str]:
    return [p for p in path.replace("\\", "/").split("/")]


def _relativizer(names: list[str]) -> Callable[[str], str]:
    """A function making each test-file path relative to the files' deepest common directory."""
    split = [_parts(n) for n in names if n]
    if not split:
        return lambda name: name
    common = split[0][:-1]
    for parts in split[1:]:
        dirs = parts[:-1]
        n = 0
        while n < len(common) and n < len(dirs) and common[n] == dirs[n]:
            n += 1
        common = common[:n]
    k = len(common)

    def rel(name: str) -> str:
        parts = _parts(name)
        return "/".join(parts[k:]) if len(parts) > k else name

    return rel


def _str_list(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _counts(report: dict[str, Any]) -> TestCounts:
    jest = any(k in report for k in _JEST_KEYS)
    runner = JEST_RUNNER if jest else VITEST_RUNNER
    suites = [s for s in report.get("testResults", []) if isinstance(s, dict)]
    rel = _relativizer([s["name"] for s in suites if isinstance(s.get("name"), str)])
    tally = {"passed": 0, "failed": 0, "skipped": 0}
    errors = 0
    failed_ids: list[str] = []
    passed_ids: list[str] = []
    for suite in suites:
        name = suite.get("name")
        file = rel(name) if isinstance(name, str) else ""
        raw = suite.get("assertionResults")
        assertions = [a for a in raw if isinstance(a, dict)] if isinstance(raw, list) else []
        suite_failed_tests = 0
        for a in assertions:
            status = a.get("status")
            title = a.get("title")
            path = _str_list(a.get("ancestorTitles")) + [title if isinstance(title, str) else ""]
            ident = " › ".join(path) if jest else " > ".join([file] + path if file else path)
            if status == "passed":
                tally["passed"] += 1
                passed_ids.append(ident)
            elif status == "failed":
                tally["failed"] += 1
                suite_failed_tests += 1
                failed_ids.append(ident)
            elif status in ("pending", "skipped", "todo", "disabled"):
                tally["skipped"] += 1
        if suite.get("status") == "failed" and suite_failed_tests == 0:
            errors += 1
            failed_ids.append(file or "(test file)")
    passed = _int(report.get("numPassedTests"))
    failed = _int(report.get("numFailedTests"))
    pending = _int(report.get("numPendingTests"))
    todo = _int(report.get("numTodoTests"))
    return TestCounts(
        runner,
        passed=tally["passed"] if passed is None else passed,
        failed=tally["failed"] if failed is None else failed,
        skipped=tally["skipped"] if pending is None and todo is None else (pending or 0) + (todo or 0),
        errors=errors,
        failed_ids=failed_ids,
        passed_ids=passed_ids,
    )


_AT = re.compile(r"^\s+at (?:.*? \()?(.+?):(\d+):(\d+)\)?\s*$", re.M)
_MESSAGE_LINES = 3
"""A directive's issue keeps at most this many non-empty message lines (before the stack)."""


def _message(text: str) -> str:
    lines: list[str] = []
    for line in strip_ansi(text).split("\n"):
        if _AT.match(line):
            break
        if line.strip():
            lines.append(line.strip())
            if len(lines) >= _MESSAGE_LINES:
                break
    return "; ".join(lines) or "(no message)"


def _own_frame(text: str, ctx: ParseContext) -> tuple[str, int] | None:
    for m in _AT.finditer(strip_ansi(text)):
        if ctx.own(m.group(1)):
            return ctx.rel(m.group(1)), int(m.group(2))
    return None


def report_findings(text: str, ctx: ParseContext) -> list[Finding]:
    """Repair directives from the Jest JSON report found in ``text`` (``jest --json``, ``vitest
    run --reporter=json``), for when the output has no human-readable failure blocks. Each failed
    test: its message's first lines, located at the first stack frame in the project's own code,
    else the report's ``location`` (``--testLocationInResults``, vitest ``includeTaskLocation``) in
    the test file, else the test file; each test file that failed without a failing test: its
    message. ``[]`` when ``text`` holds no decodable report. Never raises."""
    starts = list(deque((m.start() for m in _CANDIDATE.finditer(text)), maxlen=MAX_CANDIDATES))
    report = _report(text, starts) if starts else None
    if report is None:
        return []
    runner, sep = ("jest", " › ") if any(k in report for k in _JEST_KEYS) else ("vitest", " > ")
    out: list[Finding] = []
    for result in report["testResults"]:
        if not isinstance(result, dict):
            continue
        name = result.get("name")
        test_file = ctx.rel(name) if isinstance(name, str) and name else None
        failing = [a for a in result.get("assertionResults") or []
                   if isinstance(a, dict) and a.get("status") == "failed"]
        for a in failing:
            title = sep.join(_str_list(a.get("ancestorTitles")) + [str(a.get("title") or "")])
            messages = "\n".join(_str_list(a.get("failureMessages")))
            at = _own_frame(messages, ctx)
            loc = a.get("location")
            if at is None and test_file and isinstance(loc, dict) and _int(loc.get("line")):
                at = (test_file, int(loc["line"]))
            file, line = at if at else (test_file, None)
            out.append(Finding(f"test '{title}' failed: {_message(messages)}",
                               test_action(runner, title, at, test_file), file, line, source=runner))
        if not failing and result.get("status") == "failed":
            message = str(result.get("message") or "")
            file, line = _own_frame(message, ctx) or (test_file, None)
            out.append(Finding(f"test file {test_file} failed: {_message(message)}",
                               "fix the error that stops the test file from loading (import path, syntax, missing module)",
                               file, line, source=runner))
    return out


def parse_jest_json(text: str) -> TestCounts | None:
    """Count tests from a ``jest --json`` / ``vitest run --reporter=json`` report found in
    ``text`` (see the module doc for how it is found and counted).

    Args:
        text: the (ANSI-cleaned) merged output, or a tail of it.

    Returns:
        ``TestCounts`` with runner ``jest-json`` or ``vitest-json``; ``total == 0`` for a report
        of zero tests; None when ``text`` holds no report. Never raises.
    """
    starts = list(deque((m.start() for m in _CANDIDATE.finditer(text)), maxlen=MAX_CANDIDATES))
    if not starts:
        return None
    report = _report(text, starts)
    if report is None:
        return _head_counts(text, starts)
    return _counts(report)
