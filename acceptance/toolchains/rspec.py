"""RSpec: the ``rspec`` check of a Ruby project with specs, and counts of RSpec's console output.

RSpec writes JUnit XML only with an extra gem (``rspec_junit_formatter``) and its JSON report
(``--format json``) is one long line, so the derived check keeps the default text formatters,
which every formatter (progress, documentation) ends the same way (real outputs in
``tests/data/toolchains/rspec/``)::

    Finished in 0.16 seconds (files took 0.99 seconds to load)
    5 examples, 2 failures, 1 pending[, 1 error occurred outside of examples]

    Failed examples:

    rspec ./spec/calc_spec.rb:9 # Calc.add adds wrongly on purpose

Counts: failures → failed, pending (``skip``/``xit``/``pending``) → skipped, errors outside of
examples (a spec file that does not load) → errors, passed = examples − failures − pending.
Failed ids: the example's full description (``Calc.add adds wrongly on purpose``; stable when
lines move), and the spec file that failed to load. ``0 examples, 0 failures`` (``No examples
found.``) ran nothing.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

from ...core.i18n import _
from ._files import has_file
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

_SUMMARY = re.compile(
    r"^(\d+) examples?, (\d+) failures?(?:, (\d+) pending)?(?:, (\d+) errors? occurred outside of examples)?[ \t]*$",
    re.M)
_FAILED = re.compile(r"^rspec (\S+) # ([^\n]+?)[ \t]*$", re.M)
_LOAD_ERROR = re.compile(r"^An error occurred while loading (\S+?)\.?(?: - Did you mean\?)?[ \t]*$", re.M)


def _parse_rspec(text: str) -> TestCounts | None:
    """RSpec's summary → counts (module doc); None without one."""
    summaries = _SUMMARY.findall(text)
    if not summaries:
        return None
    examples = sum(int(s[0]) for s in summaries)
    failures = sum(int(s[1]) for s in summaries)
    pending = sum(int(s[2] or 0) for s in summaries)
    errors = sum(int(s[3] or 0) for s in summaries)
    failed_ids = [desc for _loc, desc in _FAILED.findall(text)]
    failed_ids += [path[2:] if path.startswith("./") else path for path in _LOAD_ERROR.findall(text)]
    return TestCounts.from_total("rspec", examples, failed=failures, skipped=pending, outside=errors,
                                 failed_ids=failed_ids)


def _zero(text: str) -> bool:
    """Every summary is ``0 examples, 0 failures`` without an error outside of examples."""
    summaries = _SUMMARY.findall(text)
    return bool(summaries) and all(s[0] == "0" and not int(s[3] or 0) for s in summaries)


def _detect(root: Path, already: Sequence[Derived]) -> Detection:
    """``.rspec``, or ``spec/`` holding ``*_spec.rb`` → ``bundle exec rspec`` (``rspec`` without a
    ``Gemfile``), mandatory; counted from its text summary."""
    if not ((root / ".rspec").is_file() or has_file(root / "spec", lambda name: name.endswith("_spec.rb"))):
        return [], []
    gemfile = read_small(root / "Gemfile")
    argv = ("bundle", "exec", "rspec") if gemfile is not None else ("rspec",)
    note = _("RSpec specs detected: {cmd} is a mandatory check; its tests are counted from its summary.")
    return [Derived("rspec", argv)], [note.format(cmd=" ".join(argv))]


_COMMAND = re.compile(r"\brspec\b")

_BLOCK = re.compile(r"^  \d+\) (.+)$")  # on rstripped lines: no \s*$ after a lazy group
_LOAD = re.compile(r"^An error occurred while loading (\S+?)\.?(?: - |\s*$)")
_FRAME = re.compile(r"^\s*# (\S+?):(\d+)(?::in |\s*$)")
_SECTION_END = re.compile(r"^(?:Finished in |Failed examples:|Pending:|\d+ examples?, )")
_SPEC_FILE = re.compile(r"_spec\.rb$")


def parse_rspec(text: str, ctx: ParseContext) -> list[Finding]:
    """RSpec's ``Failures:`` blocks (``  1) Calc.add adds wrongly``, the lines after
    ``Failure/Error:``, ``# ./spec/x_spec.rb:10:in …`` frames) and ``An error occurred while
    loading ./spec/x_spec.rb`` blocks; the Pending section is not read."""
    out: list[Finding] = []
    block: tuple[str | None, list[str], list[tuple[str, int]]] | None = None
    in_failures = False

    def flush() -> None:
        if block is not None:
            out.append(failure_finding("rspec", block[0], block[1], block[2], ctx, _SPEC_FILE))

    for raw in text.split("\n"):
        line = raw.rstrip()
        if line == "Failures:" or _SECTION_END.match(line):
            flush()
            block, in_failures = None, line == "Failures:"
            continue
        if _LOAD.match(line):
            flush()
            block = (None, [], [])
            continue
        head = _BLOCK.match(line)
        if head and in_failures:
            flush()
            block = (head.group(1), [], [])
            continue
        if block is None:
            continue
        frame = _FRAME.match(line)
        if frame:
            block[2].append((frame.group(1), int(frame.group(2))))
        elif not block[2] and not line.strip().startswith(("Failure/Error:", "(compared using", "rspec ./")):
            block[1].append(line)
    flush()
    return out


TOOLCHAIN = Toolchain(
    id="rspec",
    order=140,
    detect=_detect,
    test_command=_COMMAND,
    hint=_COMMAND,
    hint_formats=("rspec",),
    formats=(CountFormat("rspec", _parse_rspec, 130),),
    zero=_zero,
    directive_argv=re.compile(r"\brspec\b", re.I),
    shape=re.compile(r"^\s*# \./\S+_spec\.rb:\d+:in |^rspec \./\S+_spec\.rb:\d+ # ", re.M),
    directives=parse_rspec,
)
