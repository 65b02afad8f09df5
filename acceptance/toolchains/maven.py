"""Maven: the ``mvn test`` check of a ``pom.xml`` project (its Surefire JUnit XML reports are the
counts' source), and counts of Surefire's console output.

Console forms (Surefire 2.x and 3.x, recorded in ``tests/data/toolchains/maven/``):

* per test class ``Tests run: 4, Failures: 1, Errors: 0, Skipped: 1, Time elapsed: 1.5 s <<<
  FAILURE! -- in demo.CalcTest`` (2.x: ``… 1.5 sec <<< FAILURE! - in …``);
* per failed test ``demo.CalcTest.wrongOnPurpose -- Time elapsed: 0.9 s <<< FAILURE!`` (3.x) or
  ``wrongOnPurpose(demo.CalcTest)  Time elapsed: 0.9 sec  <<< ERROR!`` (2.x);
* per module, after ``Results:``, ``Tests run: 4, Failures: 1, Errors: 0, Skipped: 1`` (with a
  ``[INFO]``/``[WARNING]``/``[ERROR]`` prefix in Maven 3.5+);
* ``No tests to run.`` (Surefire found no test class), ``Tests are skipped.`` (``-DskipTests``),
  ``No tests were executed!`` / ``No tests matching pattern … were executed!`` (a filter matched
  nothing).

Counts: the module summaries are summed (a reactor build prints one per module); without any (a
tail that lost them) the per-class lines are summed. Failures → failed, errors → errors, skipped →
skipped, passed = run − the three. Failed ids: ``package.Class.method``, like the Surefire XML.
"""

from __future__ import annotations

import os
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
    read_small,
)

_LEVEL = r"(?:\[(?:INFO|WARNING|ERROR)\] )?"
_RUN = re.compile(
    rf"^{_LEVEL}Tests run: (\d+), Failures: (\d+), Errors: (\d+), Skipped: (\d+)(,[ \t]*Time elapsed:[^\n]*)?[ \t]*$",
    re.M,
)
_FAILED_3 = re.compile(rf"^{_LEVEL}(\S[^\n]*?) -- Time elapsed: \S+ s <<< (?:FAILURE|ERROR)!\s*$")
_FAILED_2 = re.compile(r"^(\S+?)\((\S+?)\)\s+Time elapsed: \S+ sec\s+<<< (?:FAILURE|ERROR)!\s*$")
_NONE = re.compile(rf"^{_LEVEL}(?:No tests to run\.|Tests are skipped\.|No tests (?:matching pattern .* )?were executed!)",
                   re.M)


def _parse_maven(text: str) -> TestCounts | None:
    """Surefire's console output → counts (module doc); None when it has no Surefire line."""
    runs = _RUN.findall(text)
    if not runs:
        return TestCounts("maven") if _NONE.search(text) else None
    summaries = [r for r in runs if not r[4]] or runs
    run = sum(int(r[0]) for r in summaries)
    failures = sum(int(r[1]) for r in summaries)
    errors = sum(int(r[2]) for r in summaries)
    skipped = sum(int(r[3]) for r in summaries)
    failed_ids: list[str] = []
    for line in text.split("\n"):
        if "<<< " not in line or "Tests run:" in line:
            continue
        m = _FAILED_3.match(line)
        if m:
            failed_ids.append(m.group(1))
            continue
        m = _FAILED_2.match(line)
        if m:
            failed_ids.append(f"{m.group(2)}.{m.group(1)}")
    return TestCounts.from_total("maven", run, failed=failures, skipped=skipped, errors=errors,
                                 failed_ids=failed_ids)


def _zero(text: str) -> bool:
    """``No tests to run.`` and the like, and no module ran a test."""
    if not _NONE.search(text):
        return False
    return not any(int(r[0]) > 0 for r in _RUN.findall(text))


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _detect(root: Path, already: Sequence[Derived]) -> Detection:
    """``pom.xml`` → ``mvn -B -ntp test`` (``./mvnw`` when the project has an executable wrapper),
    mandatory; its Surefire reports (``**/`` for a multi-module build) are the counts' source."""
    pom = read_small(root / "pom.xml")
    if pom is None:
        return [], []
    exe = "./mvnw" if _executable(root / "mvnw") else "mvn"
    multi = re.search(r"<modules>\s*<module>", pom) is not None
    reports = ("**/" if multi else "") + "target/surefire-reports/TEST-*.xml"
    argv = (exe, "-B", "-ntp", "test")
    note = _("Maven project detected (pom.xml): {cmd} is a mandatory check; its tests are counted from {reports}.")
    return [Derived("mvn-test", argv, junit_xml=reports)], [note.format(cmd=" ".join(argv), reports=reports)]


# ``mvn [opts] test|verify|install`` without ``-DskipTests``/``-Dmaven.test.skip`` in the same
# command (argv lower-cased)
_COMMAND = re.compile(
    r"\b(?:mvnw?|mvnd)(?:\.cmd)?\b(?![^;&|]*-d(?:skiptests|maven\.test\.skip)\b)[^;&|]*\s(?:test|verify|install)\b"
)

TOOLCHAIN = Toolchain(
    id="maven",
    order=120,
    detect=_detect,
    test_command=_COMMAND,
    hint=_COMMAND,
    hint_formats=("maven",),
    formats=(CountFormat("maven", _parse_maven, 110),),
    zero=_zero,
)
