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
    TestCounts,
    Toolchain,
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

TOOLCHAIN = Toolchain(
    id="rspec",
    order=140,
    detect=_detect,
    test_command=_COMMAND,
    hint=_COMMAND,
    hint_formats=("rspec",),
    formats=(CountFormat("rspec", _parse_rspec, 130),),
    zero=_zero,
)
