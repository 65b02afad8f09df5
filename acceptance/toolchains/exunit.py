"""ExUnit: the ``mix test`` check of an Elixir project, and counts of ExUnit's console output.

ExUnit writes JUnit XML only through an extra dependency (``junit_formatter``), so the derived
check is counted from the summary (real outputs in ``tests/data/toolchains/exunit/``)::

    Finished in 0.3 seconds (0.00s async, 0.3s sync)
    1 doctest, 5 tests, 2 failures, 1 skipped

(``N properties`` for StreamData, ``N excluded`` for tests a tag filter left out, ``N invalid`` for
tests whose ``setup_all`` failed). An umbrella project prints one summary per app: they are
summed. A test module without tests ends with ``0 failures`` alone; a project without test files
prints ``There are no tests to run``.

Counts: doctests + properties + tests are the total; failures → failed, skipped + excluded →
skipped, invalid → errors, passed = the rest. Failed ids: ``CalcTest.test adds wrongly`` from
``  1) test adds wrongly (CalcTest)`` (the JUnit formatter's ``classname.name``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

from ...core.i18n import _
from .base import (
    CountFormat,
    Derived,
    Detection,
    Finding,
    ParseContext,
    TestCounts,
    Toolchain,
    failure_finding,
)

_SUMMARY = re.compile(
    r"^(?:(\d+) doctests?, )?(?:(\d+) propert(?:y|ies), )?(\d+) tests?, (\d+) failures?((?:, \d+ \w+)*)[ \t]*$", re.M)
_EXTRA = re.compile(r", (\d+) (skipped|excluded|invalid)")
_FINISHED_ZERO = re.compile(r"^Finished in [^\n]*\n+0 failures[ \t]*$", re.M)
_NO_FILES = re.compile(r"^There are no tests to run\b", re.M)
_FAILED = re.compile(r"^\s+\d+\) ((?:test|doctest|property|describe)\b[^\n]*?) \(([\w.]+)\)\s*$", re.M)


def _parse_exunit(text: str) -> TestCounts | None:
    """ExUnit's summary → counts (module doc); None without one."""
    summaries = _SUMMARY.findall(text)
    if not summaries:
        if _FINISHED_ZERO.search(text) or _NO_FILES.search(text):
            return TestCounts("exunit")
        return None
    total = failures = skipped = invalid = 0
    for doctests, props, tests, fails, extra in summaries:
        total += int(doctests or 0) + int(props or 0) + int(tests)
        failures += int(fails)
        for n, kind in _EXTRA.findall(extra):
            if kind == "invalid":
                invalid += int(n)
            else:
                skipped += int(n)
    failed_ids = [f"{module}.{name}" for name, module in _FAILED.findall(text)]
    return TestCounts.from_total("exunit", total, failed=failures, errors=invalid,
                                 skipped=min(skipped, max(0, total - failures - invalid)), failed_ids=failed_ids)


def _zero(text: str) -> bool:
    """``There are no tests to run``, or ``0 failures`` alone / ``0 tests`` in every summary."""
    counts = _parse_exunit(text)
    return counts is not None and counts.total == 0


def _detect(root: Path, already: Sequence[Derived]) -> Detection:
    """``mix.exs`` → ``mix test``, mandatory; counted from its summary."""
    if not (root / "mix.exs").is_file():
        return [], []
    note = _("Elixir project detected (mix.exs): mix test is a mandatory check; its tests are counted from its summary.")
    return [Derived("mix-test", ("mix", "test"))], [note]


_COMMAND = re.compile(r"\bmix\s+test\b")

_BLOCK = re.compile(r"^\s+\d+\) (test .+) \((\S+)\)$")  # on rstripped lines
_AT = re.compile(r"^\s+(\S+?\.exs?):(\d+)\s*$")
_FRAME = re.compile(r"^\s+(?:\([\w.]+ [\d.]+\) )?(\S+?\.exs?):(\d+): ")
_TEST_FILE = re.compile(r"_test\.exs$")


def parse_exunit(text: str, ctx: ParseContext) -> list[Finding]:
    """ExUnit's ``  1) test adds (CalcTest)`` blocks: the test's ``test/x_test.exs:9`` line, the
    message (``Assertion with == failed``, ``left:``/``right:``, ``** (RuntimeError) boom``; not
    ``code:``), and the ``stacktrace:`` frames, the first own one being the failing line."""
    out: list[Finding] = []
    block: tuple[str, list[str], list[tuple[str, int]], list[tuple[str, int]]] | None = None
    in_stack = False

    def flush() -> None:
        if block is not None:
            title, message, frames, declared = block
            out.append(failure_finding("exunit", title, message, frames + declared, ctx, _TEST_FILE))

    for raw in text.split("\n"):
        line = raw.rstrip()
        head = _BLOCK.match(line)
        if head:
            flush()
            block, in_stack = (f"{head.group(2)}.{head.group(1)}", [], [], []), False
            continue
        if block is None:
            continue
        if not line.strip():
            if in_stack:
                flush()
                block = None
            continue
        if line.strip() == "stacktrace:":
            in_stack = True
            continue
        frame = _FRAME.match(line)
        if in_stack and frame:
            block[2].append((frame.group(1), int(frame.group(2))))
            continue
        at = _AT.match(line)
        if at and not block[1] and not block[3]:
            block[3].append((at.group(1), int(at.group(2))))
        elif not in_stack and not line.strip().startswith("code:"):
            block[1].append(line)
    flush()
    return out


TOOLCHAIN = Toolchain(
    id="exunit",
    order=160,
    detect=_detect,
    test_command=_COMMAND,
    hint=_COMMAND,
    hint_formats=("exunit",),
    formats=(CountFormat("exunit", _parse_exunit, 150),),
    zero=_zero,
    directive_argv=re.compile(r"\bmix\s+test\b", re.I),
    shape=re.compile(r"^\s+\d+\) test .+ \(\S+\)\s*\n\s+\S+\.exs:\d+\s*$", re.M),
    directives=parse_exunit,
)
