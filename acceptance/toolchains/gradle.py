"""Gradle: the ``gradle test`` check of a Gradle build (its JUnit XML results are the counts'
source), and counts of the test task's console output.

Gradle prints little about tests by default: a failing test as ``CalcTest > adds() FAILED`` (with
``testLogging`` events also ``PASSED``/``SKIPPED``), and after a test task with failures
``4 tests completed, 1 failed, 1 skipped``. A passing run prints no count at all: the JUnit XML
reports (``build/test-results/test/TEST-*.xml``) are then the only count, which is why the derived
check declares them. ``No tests found for given includes: […]`` (a ``--tests`` filter matched
nothing) and Gradle 9's ``… the test task did not discover any tests to execute`` say that nothing
ran. Real outputs: ``tests/data/toolchains/gradle/`` (from public repositories: Gradle cannot run
here).

Counts: the ``N tests completed`` lines are summed (one per test task); without any, the
``PASSED``/``FAILED``/``SKIPPED`` event lines are counted. Failed ids: the event's test name as
printed (``CalcTest > adds()``).
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
    unique_ids,
)

_SUMMARY = re.compile(r"^(\d+) tests? completed(?:, (\d+) failed)?(?:, (\d+) skipped)?[ \t]*$", re.M)
# ``Class > method() PASSED`` (JVM) or ``T.t FAILED`` (Kotlin/JS, native); not ``> Task :x FAILED``
_EVENT = re.compile(r"^(?!BUILD )(?!> )([^\s>][^\n]*? > [^\n]*?|[^\s>]\S*) (PASSED|FAILED|SKIPPED)[ \t]*$")
_NONE = re.compile(r"No tests found for given includes: |did not discover any tests to execute")
_BUILD_FILES = ("build.gradle", "build.gradle.kts", "settings.gradle", "settings.gradle.kts")


def _counts(text: str, events_alone: bool) -> TestCounts | None:
    events: list[tuple[str, str]] = []
    for line in text.split("\n"):
        if line.rstrip().endswith(("PASSED", "FAILED", "SKIPPED")):
            m = _EVENT.match(line)
            if m:
                events.append((m.group(1), m.group(2)))
    failed_ids = unique_ids(name for name, status in events if status == "FAILED")
    passed_ids = unique_ids(name for name, status in events if status == "PASSED")
    summaries = _SUMMARY.findall(text)
    if summaries:
        total = sum(int(s[0]) for s in summaries)
        failed = sum(int(s[1] or 0) for s in summaries)
        skipped = sum(int(s[2] or 0) for s in summaries)
        return TestCounts.from_total("gradle", total, failed=failed, skipped=skipped, failed_ids=failed_ids,
                                     passed_ids=passed_ids)
    if events and events_alone:
        return TestCounts("gradle", passed=sum(1 for _n, s in events if s == "PASSED"),
                          failed=sum(1 for _n, s in events if s == "FAILED"),
                          skipped=sum(1 for _n, s in events if s == "SKIPPED"),
                          failed_ids=failed_ids, passed_ids=passed_ids)
    return TestCounts("gradle") if _NONE.search(text) else None


def _parse_gradle(text: str) -> TestCounts | None:
    """The test task's console output → counts (module doc); None without an ``N tests
    completed`` summary (or a no-test message)."""
    return _counts(text, events_alone=False)


def _parse_gradle_hinted(text: str) -> TestCounts | None:
    """As :func:`_parse_gradle`, and when the command is Gradle's, ``testLogging`` event lines
    alone count too (a passing run prints no summary)."""
    return _counts(text, events_alone=True)


def _zero(text: str) -> bool:
    """A filter that matched nothing / no test discovered, and no test counted."""
    if not _NONE.search(text):
        return False
    counts = _parse_gradle_hinted(text)
    return counts is None or counts.total == 0


def _detect(root: Path, already: Sequence[Derived]) -> Detection:
    """A Gradle build (``build.gradle[.kts]``/``settings.gradle[.kts]``) → ``./gradlew cleanTest
    test --console=plain`` (``gradle`` without an executable wrapper), mandatory. ``cleanTest``
    makes the test task run even when Gradle finds it up to date (an up-to-date task writes no
    report and no count). Its JUnit XML results (``**/`` in a multi-project build) are the counts'
    source."""
    present = [name for name in _BUILD_FILES if (root / name).is_file()]
    if not present:
        return [], []
    wrapper = root / "gradlew"
    exe = "./gradlew" if wrapper.is_file() and os.access(wrapper, os.X_OK) else "gradle"
    settings = (read_small(root / "settings.gradle") or "") + (read_small(root / "settings.gradle.kts") or "")
    multi = re.search(r"^\s*include\b", settings, re.M) is not None
    reports = ("**/" if multi else "") + "build/test-results/test/TEST-*.xml"
    argv = (exe, "cleanTest", "test", "--console=plain")
    note = _("Gradle build detected ({file}): {cmd} is a mandatory check; its tests are counted from {reports}.")
    return [Derived("gradle-test", argv, junit_xml=reports)], [note.format(file=present[0], cmd=" ".join(argv),
                                                                            reports=reports)]


# ``gradle[w] [opts] [:module:]test|check`` (argv lower-cased)
_COMMAND = re.compile(r"\bgradlew?(?:\.bat)?\b[^;&|]*\s(?::?[\w-]+:)*(?:test|check|alltests)\b")

TOOLCHAIN = Toolchain(
    id="gradle",
    order=125,
    detect=_detect,
    test_command=_COMMAND,
    hint=_COMMAND,
    hint_formats=("gradle",),
    formats=(CountFormat("gradle", _parse_gradle, 170, hinted=_parse_gradle_hinted),),
    zero=_zero,
)
