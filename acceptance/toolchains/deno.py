"""Deno: the ``deno test`` check of a Deno project (its JUnit report is the counts' source), and
counts of ``deno test``'s console output.

Console form (real outputs in ``tests/data/toolchains/deno/``)::

    running 4 tests from ./calc_test.ts
    adds small numbers ... ok (1ms)
    adds wrongly on purpose ... FAILED (7ms)
    later ... ignored (0ms)
    with steps ...
      inner ok ... ok (0ms)
      inner fails ... FAILED (4ms)
    with steps ... FAILED (due to 1 failed step) (7ms)

     FAILURES

    adds wrongly on purpose => ./calc_test.ts:11:6
    with steps ... inner fails => ./calc_test.ts:21:11

    FAILED | 1 passed (1 step) | 2 failed (1 step) | 1 ignored (69ms)

Counts come from the last line (steps are not tests): ``passed``, ``failed``, ``ignored`` →
skipped (``filtered out`` and ``measured`` tests did not run as tests). Failed ids:
``file > test`` (``file > test > step`` for a step) from the ``FAILURES`` list; passed ids from the
top-level ``… ok`` lines. ``error: No test modules found`` and ``ok | 0 passed | 0 failed`` ran
nothing.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Sequence

from ...core.i18n import _
from ._files import has_file
from .base import (
    CountFormat,
    Derived,
    Detection,
    TestCounts,
    Toolchain,
    read_small,
)

_SUMMARY = re.compile(r"^(?:ok|FAILED) \| (\d+) passed[^|\n]*\| (\d+) failed[^|\n]*((?:\| [^|\n]*)*)$", re.M)
_IGNORED = re.compile(r"\| (\d+) ignored\b")
_RUNNING = re.compile(r"^running \d+ tests? from (\S+)[ \t]*$")
_OK = re.compile(r"^(\S[^\n]*?) \.\.\. ok(?: \([^)\n]*\))?[ \t]*$")
_FAILURE = re.compile(r"^(\S[^\n]*?) => (\S+?):\d+:\d+[ \t]*$")
_NONE = re.compile(r"No test modules found", re.I)
CONFIG_FILES = ("deno.json", "deno.jsonc")
TEST_FILE = re.compile(r"(?:^|[._])test\.(?:[cm]?[jt]sx?)$").search
REPORT = "deno-junit.xml"


def _file(path: str) -> str:
    return path[2:] if path.startswith("./") else path


def _parse_deno(text: str) -> TestCounts | None:
    """``deno test``'s summary → counts (module doc); None without one."""
    summaries = _SUMMARY.findall(text)
    if not summaries:
        return TestCounts("deno") if _NONE.search(text) else None
    passed = sum(int(s[0]) for s in summaries)
    failed = sum(int(s[1]) for s in summaries)
    ignored = sum(int(n) for s in summaries for n in _IGNORED.findall(" " + s[2]))
    failed_ids: list[str] = []
    passed_ids: list[str] = []
    current = ""
    in_failures = False
    for line in text.split("\n"):
        if line.strip() == "FAILURES":
            in_failures = True
            continue
        if in_failures:
            m = _FAILURE.match(line)
            if m:
                failed_ids.append(f"{_file(m.group(2))} > {m.group(1).replace(' ... ', ' > ')}")
            continue
        r = _RUNNING.match(line)
        if r:
            current = _file(r.group(1))
            continue
        m = _OK.match(line)
        if m:
            passed_ids.append(f"{current} > {m.group(1)}" if current else m.group(1))
    return TestCounts("deno", passed=passed, failed=failed, skipped=ignored,
                      failed_ids=failed_ids, passed_ids=passed_ids)


def _zero(text: str) -> bool:
    """``No test modules found`` or every summary ``0 passed | 0 failed`` without ignored tests."""
    counts = _parse_deno(text)
    return counts is not None and counts.total == 0


def _test_task(root: Path) -> bool:
    """``deno.json(c)`` defines a ``test`` task (a loose read: ``deno.jsonc`` may hold comments)."""
    for name in CONFIG_FILES:
        text = read_small(root / name)
        if not text:
            continue
        try:
            data = json.loads(text)
        except ValueError:
            return re.search(r'"tasks"\s*:\s*\{[^}]*"test"\s*:', text) is not None
        tasks = data.get("tasks") if isinstance(data, dict) else None
        return isinstance(tasks, dict) and "test" in tasks
    return False


def _detect(root: Path, already: Sequence[Derived]) -> Detection:
    """``deno.json``/``deno.jsonc`` and a test file (``*_test.ts``, ``*.test.js``, ``test.ts``, …)
    → ``deno test --no-prompt --junit-path=deno-junit.xml`` (the report is the counts' source),
    or ``deno task test`` when the config defines that task (it knows the permissions the tests
    need); mandatory. Steps aside when ``package.json`` has a test script."""
    config = next((name for name in CONFIG_FILES if (root / name).is_file()), None)
    if config is None or any(d.argv[:3] == ("npm", "run", "test") for d in already):
        return [], []
    if not has_file(root, lambda name: bool(TEST_FILE(name))):
        return [], []
    if _test_task(root):
        argv: tuple[str, ...] = ("deno", "task", "test")
        derived = Derived("deno-test", argv)
        note = _("Deno tests detected ({file}): {cmd} is a mandatory check; its tests are counted from its summary.")
        return [derived], [note.format(file=config, cmd=" ".join(argv))]
    argv = ("deno", "test", "--no-prompt", f"--junit-path={REPORT}")
    note = _("Deno tests detected ({file}): {cmd} is a mandatory check; its tests are counted from {reports}.")
    return [Derived("deno-test", argv, junit_xml=REPORT)], [note.format(file=config, cmd=" ".join(argv),
                                                                         reports=REPORT)]


_COMMAND = re.compile(r"\bdeno\s+(?:test|task\s+test)\b")

TOOLCHAIN = Toolchain(
    id="deno",
    order=185,
    detect=_detect,
    test_command=_COMMAND,
    hint=_COMMAND,
    hint_formats=("deno",),
    formats=(CountFormat("deno", _parse_deno, 190),),
    zero=_zero,
)
