"""CTest: the build-and-``ctest`` check of a CMake project with tests (its ``--output-junit``
report is the counts' source, CTest ≥ 3.21), and counts of CTest's console output.

Console form (real outputs in ``tests/data/toolchains/ctest/``)::

    1/4 Test #1: adds .............................   Passed    0.01 sec
    2/4 Test #2: fails_on_purpose .................***Failed    0.01 sec
    3/4 Test #3: skipped_on_purpose ...............***Skipped   0.01 sec
    4/4 Test #4: disabled_one .....................***Not Run (Disabled)   0.00 sec

    67% tests passed, 1 tests failed out of 3

    The following tests did not run:
          3 - skipped_on_purpose (Skipped)
          4 - disabled_one (Disabled)

    The following tests FAILED:
          2 - fails_on_purpose (Failed)

``out of N`` counts skipped tests (``SKIP_RETURN_CODE``, as passed in the percentage) but not
disabled ones. Counts: failed from the summary, skipped = the ``did not run`` entries, passed =
N − failed − the skipped ones among N. Failed ids: the ``FAILED`` entries' names; passed ids: the
``Passed`` result lines. ``No tests were found!!!`` ran nothing.
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
    read_small,
)

_SUMMARY = re.compile(r"^\d+% tests passed, (\d+) tests? failed out of (\d+)[ \t]*$", re.M)
_NONE = re.compile(r"^No tests were found!!!", re.M)
_ENTRY = re.compile(r"^\s+\d+ - (\S[^\n]*?) \(([^)\n]*)\)\s*$")
_RESULT = re.compile(r"^\s*\d+/\d+ Test\s+#\d+: (\S+) \.*\s*(Passed|\*\*\*)")
_SECTIONS = {"The following tests did not run:": "skipped", "The following tests FAILED:": "failed"}
BUILD_DIRS = ("build", "_build", "cmake-build-debug", "cmake-build-release", "out/build")
REPORT = "ctest-junit.xml"


def _parse_ctest(text: str) -> TestCounts | None:
    """CTest's summary → counts (module doc); None without one."""
    summaries = _SUMMARY.findall(text)
    if not summaries:
        return TestCounts("ctest") if _NONE.search(text) else None
    failed = sum(int(s[0]) for s in summaries)
    out_of = sum(int(s[1]) for s in summaries)
    skipped_in_n = not_run = 0
    failed_ids: list[str] = []
    passed_ids: list[str] = []
    section = ""
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped in _SECTIONS:
            section = _SECTIONS[stripped]
            continue
        if section:
            m = _ENTRY.match(line)
            if not m:
                section = "" if stripped else section
                continue
            if section == "failed":
                failed_ids.append(m.group(1))
            elif m.group(2) == "Skipped":
                skipped_in_n += 1
            else:
                not_run += 1
            continue
        r = _RESULT.match(line)
        if r and r.group(2) == "Passed":
            passed_ids.append(r.group(1))
    return TestCounts(
        "ctest",
        passed=max(0, out_of - failed - skipped_in_n),
        failed=failed,
        skipped=skipped_in_n + not_run,
        failed_ids=failed_ids,
        passed_ids=passed_ids,
    )


def _zero(text: str) -> bool:
    """``No tests were found!!!`` or every summary ``out of 0``."""
    counts = _parse_ctest(text)
    return counts is not None and counts.total == 0


_TESTS_DECLARED = re.compile(r"^\s*(?:enable_testing\s*\(|add_test\s*\(|include\s*\(\s*CTest\s*\))", re.M | re.I)


def _build_dir(root: Path) -> str | None:
    """The first configured build directory (one holding ``CTestTestfile.cmake``), or None."""
    for rel in BUILD_DIRS:
        d = root / rel
        if (d / "CTestTestfile.cmake").is_file():
            return rel
        if rel == "out/build" and d.is_dir():  # Visual Studio / presets: out/build/<preset>
            try:
                for sub in sorted(d.iterdir()):
                    if (sub / "CTestTestfile.cmake").is_file():
                        return f"{rel}/{sub.name}"
            except OSError:
                continue
    return None


def _detect(root: Path, already: Sequence[Derived]) -> Detection:
    """``CMakeLists.txt`` declaring tests (``enable_testing()``, ``add_test()``,
    ``include(CTest)``) → build, then ``ctest --test-dir <dir> --output-on-failure --output-junit
    ctest-junit.xml`` (the report lands in the build directory), mandatory. An existing configured
    build directory (``build``, ``_build``, ``cmake-build-*``, ``out/build/<preset>``) is rebuilt
    (``cmake --build``); without one the project is configured into ``build`` first. Run through
    ``sh -c`` (three steps, each must succeed)."""
    cmake = read_small(root / "CMakeLists.txt")
    if cmake is None or not _TESTS_DECLARED.search(cmake):
        return [], []
    existing = _build_dir(root)
    build = existing or "build"
    steps = [] if existing else ["cmake -S . -B build"]
    steps += [f"cmake --build {build}", f"ctest --test-dir {build} --output-on-failure --output-junit {REPORT}"]
    script = " && ".join(steps)
    reports = f"{build}/{REPORT}"
    if existing:
        note = _("CMake tests detected (CMakeLists.txt, build directory {dir}): {cmd} is a mandatory check; "
                 "its tests are counted from {reports}.")
    else:
        note = _("CMake tests detected (CMakeLists.txt, no build directory yet): {cmd} configures, builds and "
                 "runs them as a mandatory check; its tests are counted from {reports}.")
    return [Derived("ctest", ("sh", "-c", script), junit_xml=reports)], [note.format(dir=build, cmd=script,
                                                                                      reports=reports)]


_COMMAND = re.compile(r"\bctest\b")

TOOLCHAIN = Toolchain(
    id="ctest",
    order=170,
    detect=_detect,
    test_command=_COMMAND,
    hint=_COMMAND,
    hint_formats=("ctest",),
    formats=(CountFormat("ctest", _parse_ctest, 160),),
    zero=_zero,
)
