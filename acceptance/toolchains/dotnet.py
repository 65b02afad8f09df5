""".NET: the ``dotnet test`` check of a solution or project with a test project (its TRX results
are the counts' source, :mod:`.formats.trx`), and counts of ``dotnet test``'s console output.

The JUnit logger of ``dotnet test`` is a NuGet package (``JunitXml.TestLogger``) a project may not
reference; the TRX logger is built into the SDK (VSTest: ``--logger trx``; Microsoft.Testing.Platform,
chosen in ``global.json``: ``--report-trx``), so the derived check writes TRX files.

Console forms (real outputs in ``tests/data/toolchains/dotnet/``, from public repositories: the
SDK cannot be installed here):

* VSTest, minimal verbosity (the default), one line per test assembly:
  ``Failed!  - Failed:     1, Passed:     2, Skipped:     0, Total:     3, Duration: 31 ms - X.dll (net8.0)``;
* VSTest, normal verbosity: ``Total tests: 6`` then ``     Passed: 4`` / ``     Failed: 2`` /
  ``    Skipped: 1`` (assemblies run in parallel interleave their blocks: each count line belongs to
  the last ``Total tests:`` above it);
* Microsoft.Testing.Platform (``dotnet test`` in .NET 10 with MTP, or the test app itself):
  ``Test run summary: Failed!`` then ``  total: 5`` / ``  failed: 1`` / ``  succeeded: 2`` /
  ``  skipped: 2`` (/ ``  error: 1``);
* the terminal logger's ``Test summary: total: 3, failed: 1, succeeded: 2, skipped: 0, …``.

Failed ids: ``  Failed Namespace.Class.Method [12 ms]`` (VSTest), ``failed Namespace.Class.Method
(270ms)`` (MTP), ``[xUnit.net …]     Namespace.Class.Method [FAIL]``. No test: ``No test is
available in …``, ``No test matches the given testcase filter …``, MTP's ``Zero tests ran``.
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
    TestCounts,
    Toolchain,
    read_json_object,
    read_small,
)

_VSTEST = re.compile(
    r"^\s*(?:Passed|Failed)!\s+-\s+Failed:\s+(\d+),\s+Passed:\s+(\d+),\s+Skipped:\s+(\d+),\s+Total:\s+(\d+)", re.M)
_TOTAL_TESTS = re.compile(r"^\s*Total tests:\s*(\d+)\s*$")
_BLOCK_LINE = re.compile(r"^\s+(Passed|Failed|Skipped):\s*(\d+)\s*$")
_MTP_HEAD = re.compile(r"^\s*Test run summary:\s*(.*)$")
_MTP_LINE = re.compile(r"^\s*(total|failed|succeeded|skipped|error):\s*(\d+)\s*$")
_MTP_INLINE = re.compile(r"\b(total|failed|succeeded|skipped|error):\s*(\d+)")
_TL = re.compile(r"^\s*Test summary: total: (\d+)[,;] failed: (\d+)[,;] succeeded: (\d+)[,;] skipped: (\d+)", re.M)
_FAILED_IDS = (
    re.compile(r"^\s+Failed (\S[^\n]*?) \[[^\]\n]*\]\s*$"),
    re.compile(r"^\s*failed (\S[^\n]*?) \([\d.]+\s*[a-z]*s?[^)]*\)\s*$"),
    re.compile(r"^\[xUnit\.net [\d:.]+\]\s+(\S[^\n]*?) \[FAIL\]\s*$"),
)
_PASSED_ID = re.compile(r"^\s+Passed (\S[^\n]*?) \[[^\]\n]*\]\s*$")
_NONE = re.compile(r"No test is available in |No test matches the given testcase filter|Zero tests ran", re.I)


def _blocks(lines: list[str]) -> tuple[dict[str, int], bool]:
    """Sum the ``Total tests:`` blocks (VSTest, normal verbosity) and the ``Test run summary:``
    blocks (MTP): ``{"total", "passed", "failed", "skipped", "errors"}`` and whether any was seen."""
    sums = {"total": 0, "passed": 0, "failed": 0, "skipped": 0, "errors": 0}
    seen = False
    mode = ""  # "vstest" after a Total tests: line, "mtp" inside a summary block
    for line in lines:
        m = _TOTAL_TESTS.match(line)
        if m:
            seen, mode = True, "vstest"
            sums["total"] += int(m.group(1))
            continue
        h = _MTP_HEAD.match(line)
        if h:
            seen, mode = True, "mtp"
            for key, n in _MTP_INLINE.findall(h.group(1)):  # a summary on one line
                sums[{"succeeded": "passed", "error": "errors"}.get(key, key)] += int(n)
            continue
        if mode == "vstest":
            b = _BLOCK_LINE.match(line)
            if b:
                sums[b.group(1).lower()] += int(b.group(2))
        elif mode == "mtp":
            b = _MTP_LINE.match(line)
            if b:
                key = {"succeeded": "passed", "error": "errors"}.get(b.group(1), b.group(1))
                sums[key] += int(b.group(2))
            elif line.strip():
                mode = ""
    return sums, seen


def _parse_dotnet(text: str) -> TestCounts | None:
    """``dotnet test``'s console output → counts (module doc); None when no form is recognised."""
    lines = text.split("\n")
    failed_ids: list[str] = []
    passed_ids: list[str] = []
    for line in lines:
        if "ailed " in line or "[FAIL]" in line:
            for pattern in _FAILED_IDS:
                m = pattern.match(line)
                if m:
                    failed_ids.append(m.group(1))
                    break
        elif "Passed " in line:
            m = _PASSED_ID.match(line)
            if m:
                passed_ids.append(m.group(1))
    counts = TestCounts("dotnet", failed_ids=failed_ids, passed_ids=passed_ids)
    vstest = _VSTEST.findall(text)
    if vstest:
        counts.failed = sum(int(v[0]) for v in vstest)
        counts.passed = sum(int(v[1]) for v in vstest)
        counts.skipped = sum(int(v[2]) for v in vstest)
        return counts
    sums, seen = _blocks(lines)
    if seen:
        counts.failed, counts.skipped, counts.errors = sums["failed"], sums["skipped"], sums["errors"]
        counts.passed = sums["passed"] or max(0, sums["total"] - sums["failed"] - sums["skipped"] - sums["errors"])
        return counts
    tl = _TL.findall(text)
    if tl:
        counts.failed = sum(int(t[1]) for t in tl)
        counts.passed = sum(int(t[2]) for t in tl)
        counts.skipped = sum(int(t[3]) for t in tl)
        return counts
    return TestCounts("dotnet") if _NONE.search(text) else None


def _zero(text: str) -> bool:
    """``No test is available in …`` and the like, and no assembly ran a test."""
    if not _NONE.search(text):
        return False
    counts = _parse_dotnet(text)
    return counts is None or counts.total == 0


_PROJECT_EXT = (".csproj", ".fsproj", ".vbproj")
_TEST_MARKERS = re.compile(r"Microsoft\.NET\.Test\.Sdk|<IsTestProject>\s*true|\bxunit\b|\bNUnit\b|MSTest|"
                           r"TUnit|Microsoft\.Testing\.Platform|EnableMSTestRunner|TestingPlatformDotnetTestSupport",
                           re.I)


def _test_projects(root: Path) -> list[Path]:
    """Project files (``*.csproj``/``*.fsproj``/``*.vbproj``) up to 4 levels below the root that
    reference the test SDK or a test framework."""
    found: list[Path] = []
    for path in walk_files(root, lambda name: name.endswith(_PROJECT_EXT), max_depth=4):
        if _TEST_MARKERS.search(read_small(path, 256 << 10) or ""):
            found.append(path)
    return found


def _uses_mtp(root: Path) -> bool:
    """``global.json`` selects Microsoft.Testing.Platform for ``dotnet test`` (.NET 10)."""
    data = read_json_object(root / "global.json") or {}
    runner = data["test"].get("runner") if isinstance(data.get("test"), dict) else None
    return isinstance(runner, str) and "testing.platform" in runner.lower()


def _detect(root: Path, already: Sequence[Derived]) -> Detection:
    """A test project (a ``*.csproj``/``*.fsproj``/``*.vbproj`` referencing the test SDK or a test
    framework, up to 4 levels down) → ``dotnet test [<the solution or project>] --logger trx
    --results-directory TestResults`` (``--report-trx`` under Microsoft.Testing.Platform),
    mandatory; the TRX files are the counts' source. The target: the only solution at the root,
    else the only project at the root, else the only test project; several → no check (a note)."""
    tests = _test_projects(root)
    if not tests:
        return [], []
    try:
        names = sorted(p.name for p in root.iterdir() if p.is_file())
    except OSError:
        return [], []
    solutions = [n for n in names if n.endswith((".sln", ".slnx"))]
    projects = [n for n in names if n.endswith(_PROJECT_EXT)]
    if len(solutions) == 1:
        target: list[str] = [solutions[0]]
    elif not solutions and len(projects) == 1:
        target = []
    elif not solutions and not projects and len(tests) == 1:
        target = [tests[0].relative_to(root).as_posix()]
    else:
        what = ", ".join((solutions or projects or [t.relative_to(root).as_posix() for t in tests])[:4])
        return [], [_(".NET test projects detected, but no single solution or project to test ({what}): "
                      "declare the dotnet test check.").format(what=what)]
    report = ("--report-trx",) if _uses_mtp(root) else ("--logger", "trx")
    argv = ("dotnet", "test", *target, "--nologo", *report, "--results-directory", "TestResults")
    note = _(".NET test project detected ({project}): {cmd} is a mandatory check; its tests are counted from "
             "TestResults/*.trx.")
    return ([Derived("dotnet-test", argv, junit_xml="TestResults/*.trx")],
            [note.format(project=tests[0].relative_to(root).as_posix(), cmd=" ".join(argv))])


_COMMAND = re.compile(r"\bdotnet\s+(?:test|vstest)\b")

TOOLCHAIN = Toolchain(
    id="dotnet",
    order=130,
    detect=_detect,
    test_command=_COMMAND,
    hint=_COMMAND,
    hint_formats=("dotnet",),
    formats=(CountFormat("dotnet", _parse_dotnet, 120),),
    zero=_zero,
)
