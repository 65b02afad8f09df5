"""Bun: the ``bun test`` check of a Bun project (its JUnit report is the counts' source), and
counts of ``bun test``'s console output.

Console form (real outputs in ``tests/data/toolchains/bun/``)::

    calc.test.ts:
    (pass) add > adds small numbers [0.07ms]
    (fail) add > adds wrongly on purpose [0.27ms]
    (skip) add > later
    (todo) add > someday

     1 pass
     1 skip
     1 todo
     2 fail
     2 expect() calls
    Ran 5 tests across 1 file. [57.00ms]

Counts: ``pass`` → passed, ``fail`` → failed, ``skip`` + ``todo`` → skipped, ``error`` (an
unhandled error between tests) → errors. Ids: ``file > describe > test`` from the result lines.
``No tests found!`` (no test file) and ``regex "…" matched 0 tests`` (``-t`` filter) ran nothing.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

from ...core.i18n import _
from ._files import has_file
from .base import CountFormat, Derived, Detection, TestCounts, Toolchain

_COUNT = re.compile(r"^\s*(\d+) (pass|fail|skip|todo|errors?)[ \t]*$", re.M)
_RAN = re.compile(r"^Ran (\d+) tests? across \d+ files?\.", re.M)
_RESULT = re.compile(r"^\((pass|fail)\) (\S[^\n]*?)(?: \[[\d.]+m?s\])?[ \t]*$")
_FILE = re.compile(r"^(\S[^\n]*\.[cm]?[jt]sx?):[ \t]*$")
_NONE = re.compile(r"^No tests found!|matched 0 tests\.", re.M)
TEST_FILE = re.compile(r"(?:\.|_)(?:test|spec)(?:\.|_)|^(?:test|spec)\.").search
REPORT = "bun-junit.xml"


def _parse_bun(text: str) -> TestCounts | None:
    """``bun test``'s summary → counts (module doc); None without one."""
    if not _RAN.search(text):
        return TestCounts("bun") if _NONE.search(text) else None
    c = {"pass": 0, "fail": 0, "skip": 0, "todo": 0, "error": 0}
    for n, kind in _COUNT.findall(text):
        c[kind.rstrip("s") if kind.startswith("error") else kind] += int(n)
    failed_ids: list[str] = []
    passed_ids: list[str] = []
    current = ""
    for line in text.split("\n"):
        f = _FILE.match(line)
        if f:
            current = f.group(1)
            continue
        if line.startswith("("):
            m = _RESULT.match(line)
            if m:
                ident = f"{current} > {m.group(2)}" if current else m.group(2)
                (passed_ids if m.group(1) == "pass" else failed_ids).append(ident)
    return TestCounts(
        "bun",
        passed=c["pass"],
        failed=c["fail"],
        skipped=c["skip"] + c["todo"],
        errors=c["error"],
        failed_ids=failed_ids,
        passed_ids=passed_ids,
    )


def _zero(text: str) -> bool:
    """``No tests found!`` / ``matched 0 tests``, and no test counted."""
    if not _NONE.search(text):
        return False
    counts = _parse_bun(text)
    return counts is None or counts.total == 0


def _npm_test(already: Sequence[Derived]) -> bool:
    return any(d.argv[:3] == ("npm", "run", "test") for d in already)


def _detect(root: Path, already: Sequence[Derived]) -> Detection:
    """``bunfig.toml``, ``bun.lock`` or ``bun.lockb`` and a test file (``*.test.ts``,
    ``*_test.js``, ``*.spec.tsx``, …) → ``bun test --reporter=junit
    --reporter-outfile=bun-junit.xml``, mandatory; the report is the counts' source. Steps aside
    when ``package.json`` has a test script (``npm run test`` already runs the tests)."""
    if not any((root / name).is_file() for name in ("bunfig.toml", "bun.lock", "bun.lockb")):
        return [], []
    if _npm_test(already) or not has_file(root, lambda name: bool(TEST_FILE(name)) and name.endswith(
            (".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts"))):
        return [], []
    argv = ("bun", "test", "--reporter=junit", f"--reporter-outfile={REPORT}")
    note = _("Bun tests detected: {cmd} is a mandatory check; its tests are counted from {reports}.")
    return [Derived("bun-test", argv, junit_xml=REPORT)], [note.format(cmd=" ".join(argv), reports=REPORT)]


_COMMAND = re.compile(r"\bbun\s+test\b")

TOOLCHAIN = Toolchain(
    id="bun",
    order=180,
    detect=_detect,
    test_command=_COMMAND,
    hint=_COMMAND,
    hint_formats=("bun",),
    formats=(CountFormat("bun", _parse_bun, 180),),
    zero=_zero,
)
