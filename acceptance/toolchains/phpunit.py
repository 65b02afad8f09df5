"""PHPUnit: the ``phpunit --log-junit`` check of a PHP project (its JUnit XML report is the counts'
source), and counts of PHPUnit's console output.

Console forms (PHPUnit 9 recorded in ``tests/data/toolchains/phpunit/``; 10 and 11 end the same
way, with more kinds such as ``Deprecations``):

* ``OK (3 tests, 5 assertions)``;
* ``Tests: 5, Assertions: 2, Errors: 1, Failures: 1, Skipped: 1, Incomplete: 1.`` after
  ``ERRORS!``/``FAILURES!``/``OK, but incomplete, skipped, or risky tests!``;
* ``No tests executed!``.

Counts: failures → failed, errors → errors, skipped + incomplete → skipped, passed = tests − the
rest (risky tests, warnings, deprecations and notices ran: they count as passed unless they also
failed). Failed ids: the ``1) Class::testMethod`` entries of the ``There was 1 error:`` / ``There
were 2 failures:`` sections (not of the warning, risky, skipped or incomplete sections).
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
    TestCounts,
    Toolchain,
    read_json_object,
)

_OK = re.compile(r"^OK \((\d+) tests?, \d+ assertions?\)[ \t]*$", re.M)
_TESTS = re.compile(r"^Tests: (\d+), Assertions: \d+((?:, [A-Za-z][A-Za-z ]*: \d+)*)\.?[ \t]*$", re.M)
_KIND = re.compile(r", ([A-Za-z][A-Za-z ]*): (\d+)")
_NONE = re.compile(r"^No tests executed!", re.M)
_SECTION = re.compile(r"^There (?:was|were) \d+ ([a-zA-Z ]+?):\s*$")
_ENTRY = re.compile(r"^\d+\) (\S[^\n]*?)\s*$")
_FAILING_SECTIONS = ("error", "errors", "failure", "failures")
CONFIG_FILES = ("phpunit.xml", "phpunit.xml.dist", "phpunit.dist.xml")
REPORT = ".phpunit.cache/junit.xml"


def _parse_phpunit(text: str) -> TestCounts | None:
    """PHPUnit's summary → counts (module doc); None without one."""
    oks = _OK.findall(text)
    full = _TESTS.findall(text)
    if not oks and not full:
        return TestCounts("phpunit") if _NONE.search(text) else None
    kinds: dict[str, int] = {}
    tests = sum(int(n) for n in oks)
    for n, rest in full:
        tests += int(n)
        for kind, count in _KIND.findall(rest):
            kinds[kind.lower()] = kinds.get(kind.lower(), 0) + int(count)
    failed, errors = kinds.get("failures", 0), kinds.get("errors", 0)
    skipped = kinds.get("skipped", 0) + kinds.get("incomplete", 0)
    failed_ids: list[str] = []
    section = ""
    for line in text.split("\n"):
        s = _SECTION.match(line)
        if s:
            section = s.group(1).strip().lower()
            continue
        if line.startswith(("--", "FAILURES!", "ERRORS!", "OK", "Tests: ")):
            section = ""
        elif section in _FAILING_SECTIONS:
            m = _ENTRY.match(line)
            if m:
                failed_ids.append(m.group(1))
    return TestCounts.from_total("phpunit", tests, failed=failed, skipped=skipped, errors=errors,
                                 failed_ids=failed_ids)


def _zero(text: str) -> bool:
    """``No tests executed!`` and no summary counting a test."""
    if not _NONE.search(text):
        return False
    counts = _parse_phpunit(text)
    return counts is None or counts.total == 0


def _requires_phpunit(root: Path) -> bool:
    data = read_json_object(root / "composer.json")
    return data is not None and any(isinstance(data.get(k), dict) and "phpunit/phpunit" in data[k] for k in ("require-dev", "require"))


def _detect(root: Path, already: Sequence[Derived]) -> Detection:
    """``phpunit.xml``/``phpunit.xml.dist``/``phpunit.dist.xml``, or ``composer.json`` requiring
    ``phpunit/phpunit`` → ``vendor/bin/phpunit --log-junit .phpunit.cache/junit.xml``
    (``phpunit`` when ``vendor/bin/phpunit`` is absent), mandatory; the report (PHPUnit creates
    its directory; ``.phpunit.cache`` is PHPUnit 10's cache directory, commonly ignored) is the
    counts' source."""
    config = next((name for name in CONFIG_FILES if (root / name).is_file()), None)
    if config is None and not _requires_phpunit(root):
        return [], []
    exe = "vendor/bin/phpunit" if (root / "vendor" / "bin" / "phpunit").is_file() else "phpunit"
    argv = (exe, "--log-junit", REPORT)
    note = _("PHPUnit tests detected ({file}): {cmd} is a mandatory check; its tests are counted from {reports}.")
    return [Derived("phpunit", argv, junit_xml=REPORT)], [note.format(file=config or "composer.json",
                                                                       cmd=" ".join(argv), reports=REPORT)]


_COMMAND = re.compile(r"\bphpunit\b|\bartisan\s+test\b|\bparatest\b")

TOOLCHAIN = Toolchain(
    id="phpunit",
    order=150,
    detect=_detect,
    test_command=_COMMAND,
    hint=_COMMAND,
    hint_formats=("phpunit",),
    formats=(CountFormat("phpunit", _parse_phpunit, 140),),
    zero=_zero,
)
