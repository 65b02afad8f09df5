"""Minitest: the ``rake test`` check of a Ruby project with Minitest tests (``bin/rails test`` in a
Rails app), and counts of Minitest's console output.

Minitest writes JUnit XML only through an extra gem (``minitest-reporters``), so the derived check
is counted from the summary every run ends with (real outputs in ``tests/data/toolchains/minitest/``)::

    4 runs, 2 assertions, 1 failures, 1 errors, 1 skips

with the failures listed above it as ``  1) Failure:`` / ``  2) Error:`` followed by the test's
``Class#test_name``; ``-v`` adds ``Class#test_name = 0.00 s = .`` per test. Counts: failures →
failed, errors → errors, skips → skipped, passed = runs − the three; a ``rake test`` running
several test tasks prints several summaries, which are summed. ``0 runs`` ran nothing.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

from ...core.i18n import _
from ._files import walk_files
from .base import (
    CountFormat,
    Derived,
    Detection,
    Finding,
    ParseContext,
    TestCounts,
    Toolchain,
    failure_finding,
    read_small,
)

_SUMMARY = re.compile(r"^(\d+) runs, (\d+) assertions, (\d+) failures, (\d+) errors, (\d+) skips[ \t]*$", re.M)
_HEAD = re.compile(r"^\s*\d+\) (?:Failure|Error):\s*$")
_ID = re.compile(r"^(\S+#\S+?)(?::| \[[^\n]*\]:)\s*$")
_VERBOSE = re.compile(r"^(\S+#\S+) = [\d.]+ s = ([.FES])\s*$", re.M)
_USES_MINITEST = re.compile(r"minitest|Minitest::Test|ActiveSupport::TestCase|ActionDispatch::IntegrationTest|test_helper")


def _parse_minitest(text: str) -> TestCounts | None:
    """Minitest's summary → counts (module doc); None without one."""
    summaries = _SUMMARY.findall(text)
    if not summaries:
        return None
    runs, _asserts, failures, errors, skips = (sum(int(s[i]) for s in summaries) for i in range(5))
    failed_ids: list[str] = []
    lines = text.split("\n")
    for i, line in enumerate(lines[:-1]):
        if _HEAD.match(line):
            m = _ID.match(lines[i + 1])
            if m:
                failed_ids.append(m.group(1))
    passed_ids = [name for name, mark in _VERBOSE.findall(text) if mark == "."]
    return TestCounts.from_total("minitest", runs, failed=failures, skipped=skips, errors=errors,
                                 failed_ids=failed_ids, passed_ids=passed_ids)


def _zero(text: str) -> bool:
    """Every summary says ``0 runs``."""
    summaries = _SUMMARY.findall(text)
    return bool(summaries) and all(s[0] == "0" for s in summaries)


def _is_test_file(name: str) -> bool:
    return name.endswith("_test.rb") or (name.startswith("test_") and name.endswith(".rb"))


def _detect(root: Path, already: Sequence[Derived]) -> Detection:
    """``test/`` holding ``*_test.rb``/``test_*.rb`` that use Minitest (or Rails' test case) →
    ``bin/rails test`` in a Rails app, else ``rake test`` when the ``Rakefile`` defines a test
    task (``bundle exec`` with a ``Gemfile``), else ``ruby -Ilib -Itest`` loading every test
    file; mandatory, counted from its summary."""
    files = list(walk_files(root / "test", _is_test_file, max_entries=2000))
    if not files or not any(_USES_MINITEST.search(read_small(f, 64 << 10) or "") for f in files[:20]):
        return [], []
    bundle = ("bundle", "exec") if (root / "Gemfile").is_file() else ()
    rakefile = read_small(root / "Rakefile") or ""
    if (root / "bin" / "rails").is_file():
        argv: tuple[str, ...] = ("bin/rails", "test")
    elif re.search(r"TestTask|task\s*\(?\s*:test\b|task\s+test:", rakefile):
        argv = (*bundle, "rake", "test")
    else:
        loader = 'Dir.glob("./test/**/{*_test,test_*}.rb").sort.each { |f| require f }'
        argv = (*bundle, "ruby", "-Ilib", "-Itest", "-e", loader)
    note = _("Minitest tests detected (test/): {cmd} is a mandatory check; its tests are counted from its summary.")
    return [Derived("minitest", argv)], [note.format(cmd=" ".join(argv))]


_COMMAND = re.compile(r"\brake\s+test\b|\brails\s+test\b|\bruby\b[^;&|]*\s-i\s*test\b")

_LOCATED_ID = re.compile(r"^(\S+#\S+?) \[(\S+?):(\d+)\]:\s*$")
_FRAME = re.compile(r"^\s+(\S+?\.rb):(\d+):in ")
_TEST_FILE = re.compile(r"(?:^|/)test_[^/]*\.rb$|_test\.rb$")


def parse_minitest(text: str, ctx: ParseContext) -> list[Finding]:
    """Minitest's ``  1) Failure:`` blocks (``Class#test [path:line]:`` then the message) and
    ``  2) Error:`` blocks (``Class#test:``, ``Exception: message``, indented backtrace frames)."""
    out: list[Finding] = []
    block: tuple[str, list[str], list[tuple[str, int]], list[tuple[str, int]]] | None = None
    lines = text.split("\n")

    def flush() -> None:
        if block is not None:
            title, message, frames, located = block
            out.append(failure_finding("minitest", title, message, located + frames, ctx, _TEST_FILE))

    for i, raw in enumerate(lines):
        line = raw.rstrip()
        if _HEAD.match(line) and i + 1 < len(lines):
            flush()
            block = None
            located, plain = _LOCATED_ID.match(lines[i + 1].rstrip()), _ID.match(lines[i + 1].rstrip())
            if located:
                block = (located.group(1), [], [], [(located.group(2), int(located.group(3)))])
            elif plain:
                block = (plain.group(1), [], [], [])
            continue
        if block is None or (block[1] == [] and (_LOCATED_ID.match(line) or _ID.match(line))):
            continue
        if not line.strip() or _SUMMARY.match(line):
            flush()
            block = None
            continue
        frame = _FRAME.match(line)
        if frame:
            block[2].append((frame.group(1), int(frame.group(2))))
        elif not block[2]:
            block[1].append(line)
    flush()
    return out


TOOLCHAIN = Toolchain(
    id="minitest",
    order=145,
    detect=_detect,
    test_command=_COMMAND,
    hint=_COMMAND,
    hint_formats=("minitest",),
    formats=(CountFormat("minitest", _parse_minitest, 135),),
    zero=_zero,
    directive_argv=re.compile(r"\brake\s+test\b|\brails\s+test\b|\bminitest\b", re.I),
    shape=re.compile(r"^\s*\d+\) (?:Failure|Error):\s*\n\S+#\S+", re.M),
    directives=parse_minitest,
)
