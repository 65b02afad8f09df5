"""The toolchains added by docs/toolchains.md §4: Maven, Gradle, .NET (+ the TRX format), RSpec,
Minitest, PHPUnit, ExUnit, CTest, Bun and Deno.

For each: detection on a tmp project layout (and a layout it must not claim), the derived argv and
its report glob, command recognition, and the counts, zero-test and all-skipped verdicts of the
engine (``testcount.parse_tests`` / ``detect_zero_tests``, i.e. through the registry) on REAL
outputs under ``tests/data/toolchains/<id>/`` (each folder's README says how each was produced).
Then real runs of the runners installed here (``record_toolchains.py``'s cases, and each derived
check run as derived, its report read by ``formats.junit.collect_junit``); a runner that is missing
is skipped with the package to install.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tianshu_mcp.acceptance.config import derive_default_checks
from tianshu_mcp.acceptance.config_model import to_check_def
from tianshu_mcp.acceptance.directives import extract_directives
from tianshu_mcp.acceptance.testcount import detect_zero_tests, is_test_check, parse_tests
from tianshu_mcp.acceptance.toolchains import registry
from tianshu_mcp.acceptance.toolchains.base import Derived, clean
from tianshu_mcp.acceptance.toolchains.formats.junit import JUnitError
from tianshu_mcp.acceptance.toolchains.formats.junit_files import collect_junit
from tianshu_mcp.acceptance.toolchains.formats.trx import TrxError, is_trx, parse_trx

DATA = Path(__file__).resolve().parent / "data" / "toolchains"
sys.path.insert(0, str(DATA))
import record_toolchains as rec  # noqa: E402

NEW = ("maven", "gradle", "dotnet", "rspec", "minitest", "phpunit", "exunit", "ctest", "bun", "deno")
TC = {t.id: t for t in registry.toolchains()}


def _detect(tc: str, root: Path, already: tuple[Derived, ...] = ()) -> tuple[list[Derived], list[str]]:
    detect = TC[tc].detect
    assert detect is not None
    return detect(root, already)


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return root


# --- detection and derived checks ----------------------------------------------------------------

CSPROJ_TEST = '<Project Sdk="Microsoft.NET.Sdk"><ItemGroup><PackageReference Include="Microsoft.NET.Test.Sdk" /></ItemGroup></Project>'
LAYOUTS: dict[str, tuple[dict[str, str], str, tuple[str, ...], str | None]] = {
    # toolchain: (files, check name, argv, junit glob)
    "maven": ({"pom.xml": rec.POM}, "mvn-test", ("mvn", "-B", "-ntp", "test"), "target/surefire-reports/TEST-*.xml"),
    "gradle": ({"build.gradle.kts": "plugins { java }\n"}, "gradle-test", ("gradle", "cleanTest", "test", "--console=plain"),
               "build/test-results/test/TEST-*.xml"),
    "dotnet": ({"App.sln": "", "src/App/App.csproj": "<Project />", "tests/App.Tests/App.Tests.csproj": CSPROJ_TEST},
               "dotnet-test", ("dotnet", "test", "App.sln", "--nologo", "--logger", "trx", "--results-directory", "TestResults"),
               "TestResults/*.trx"),
    "rspec": (rec.RSPEC, "rspec", ("rspec",), None),
    "minitest": (rec.MINITEST, "minitest", ("rake", "test"), None),
    "phpunit": ({"phpunit.xml.dist": rec.PHPUNIT_XML}, "phpunit", ("phpunit", "--log-junit", ".phpunit.cache/junit.xml"),
                ".phpunit.cache/junit.xml"),
    "exunit": ({"mix.exs": rec.MIX_EXS}, "mix-test", ("mix", "test"), None),
    "ctest": (rec.CTEST, "ctest", ("sh", "-c", "cmake -S . -B build && cmake --build build && ctest --test-dir build "
                                   "--output-on-failure --output-junit ctest-junit.xml"), "build/ctest-junit.xml"),
    "bun": (rec.BUN, "bun-test", ("bun", "test", "--reporter=junit", "--reporter-outfile=bun-junit.xml"), "bun-junit.xml"),
    "deno": (rec.DENO, "deno-test", ("deno", "test", "--no-prompt", "--junit-path=deno-junit.xml"), "deno-junit.xml"),
}
# layouts a toolchain must NOT claim (its marker file without tests, or a neighbour's project)
NOT_MINE: dict[str, dict[str, str]] = {
    "maven": {"build.gradle": ""},
    "gradle": {"pom.xml": rec.POM},
    "dotnet": {"App.sln": "", "src/App/App.csproj": "<Project />"},
    "rspec": {"Gemfile": "gem 'rails'\n", "test/calc_test.rb": "require 'minitest/autorun'\n"},
    "minitest": {"spec/calc_spec.rb": "RSpec.describe('x') {}\n", "test/data.txt": ""},
    "phpunit": {"composer.json": '{"require": {"php": ">=8.1"}}'},
    "exunit": {"lib/calc.ex": "defmodule Calc do end\n"},
    "ctest": {"CMakeLists.txt": "project(calc C)\nadd_executable(calc main.c)\n"},
    "bun": {"bunfig.toml": "", "calc.ts": rec.CALC_TS},
    "deno": {"deno.json": "{}", "main.ts": rec.CALC_TS},
}


@pytest.mark.parametrize("tc", NEW)
def test_detection_and_derived_check(tc: str, tmp_path: Path) -> None:
    files, name, argv, junit = LAYOUTS[tc]
    checks, notes = _detect(tc, _write(tmp_path, files))
    assert [(c.name, c.argv, c.junit_xml, c.optional) for c in checks] == [(name, argv, junit, False)]
    assert len(notes) == 1 and notes[0].strip()
    assert is_test_check("x", argv), argv  # the derived command is recognised as a test command
    # through the config layer: the check it derives survives the JSON round trip (pinning)
    (check,) = [c for c in derive_default_checks(tmp_path)[0] if c.name == name]
    assert (check.cmd, check.junit_xml, check.optional) == (argv, junit, False)
    assert to_check_def(check.to_json()) == check


@pytest.mark.parametrize("tc", NEW)
def test_detection_does_not_claim_other_layouts(tc: str, tmp_path: Path) -> None:
    assert _detect(tc, _write(tmp_path, NOT_MINE[tc])) == ([], [])
    assert _detect(tc, tmp_path / "missing") == ([], [])  # never raises on a missing root


def test_detection_variants(tmp_path: Path) -> None:
    def fresh(name: str, files: dict[str, str]) -> Path:
        return _write(tmp_path / name, files)

    # wrappers and multi-module builds
    mvn = fresh("mvn", {"pom.xml": "<project><modules><module>a</module></modules></project>", "mvnw": "#!/bin/sh\n"})
    os.chmod(mvn / "mvnw", 0o755)
    (check,), _n = _detect("maven", mvn)
    assert check.argv[0] == "./mvnw" and check.junit_xml == "**/target/surefire-reports/TEST-*.xml"
    gr = fresh("gr", {"settings.gradle": "include ':app'\n", "gradlew": "#!/bin/sh\n"})
    os.chmod(gr / "gradlew", 0o755)
    (check,), _n = _detect("gradle", gr)
    assert check.argv[0] == "./gradlew" and check.junit_xml == "**/build/test-results/test/TEST-*.xml"
    # .NET: one test project without a solution; MTP via global.json; ambiguous → a note, no check
    one = fresh("one", {"tests/T/T.fsproj": CSPROJ_TEST})
    assert _detect("dotnet", one)[0][0].argv[:3] == ("dotnet", "test", "tests/T/T.fsproj")
    mtp = fresh("mtp", {"global.json": '{"test": {"runner": "Microsoft.Testing.Platform"}}', "T.csproj": CSPROJ_TEST})
    assert "--report-trx" in _detect("dotnet", mtp)[0][0].argv
    two = fresh("two", {"A.sln": "", "B.sln": "", "t/T.csproj": CSPROJ_TEST})
    checks, notes = _detect("dotnet", two)
    assert checks == [] and "A.sln" in notes[0]
    # Ruby: bundler, Rails, a bare test/ without a Rakefile
    rs = fresh("rs", {**rec.RSPEC, "Gemfile": "gem 'rspec'\n"})
    assert _detect("rspec", rs)[0][0].argv == ("bundle", "exec", "rspec")
    rails = fresh("rails", {"bin/rails": "", "test/models/user_test.rb": "class UserTest < ActiveSupport::TestCase\nend\n"})
    assert _detect("minitest", rails)[0][0].argv == ("bin/rails", "test")
    bare = fresh("bare", {"test/test_calc.rb": "require 'minitest/autorun'\n"})
    assert _detect("minitest", bare)[0][0].argv[:4] == ("ruby", "-Ilib", "-Itest", "-e")
    # PHP through composer.json and vendor/bin; CMake with a configured build dir
    php = fresh("php", {"composer.json": '{"require-dev": {"phpunit/phpunit": "^11"}}', "vendor/bin/phpunit": ""})
    assert _detect("phpunit", php)[0][0].argv[0] == "vendor/bin/phpunit"
    cm = fresh("cm", {**rec.CTEST, "cmake-build-debug/CTestTestfile.cmake": ""})
    (check,), _n = _detect("ctest", cm)
    assert check.argv[2].startswith("cmake --build cmake-build-debug && ctest --test-dir cmake-build-debug")
    assert check.junit_xml == "cmake-build-debug/ctest-junit.xml"
    # Bun/Deno step aside for package.json's test script; Deno prefers a test task
    npm = (Derived("test", ("npm", "run", "test")),)
    assert _detect("bun", fresh("b", rec.BUN), npm) == ([], [])
    assert _detect("deno", fresh("d", rec.DENO), npm) == ([], [])
    task = fresh("t", {**rec.DENO, "deno.json": '{"tasks": {"test": "deno test -A"}}'})
    assert _detect("deno", task)[0][0].argv == ("deno", "task", "test")


@pytest.mark.parametrize(("argv", "tc"), [
    ("mvn -B test", "maven"), ("./mvnw clean verify", "maven"), ("./gradlew test", "gradle"),
    ("gradle :app:test --console=plain", "gradle"), ("dotnet test App.sln", "dotnet"), ("rspec", "rspec"),
    ("bundle exec rspec spec/a_spec.rb", "rspec"), ("rake test", "minitest"), ("ruby -Itest test/a_test.rb", "minitest"),
    ("bin/rails test", "minitest"), ("vendor/bin/phpunit", "phpunit"), ("mix test", "exunit"),
    ("ctest --test-dir build", "ctest"), ("bun test", "bun"), ("deno test -A", "deno"),
])
def test_command_recognition(argv: str, tc: str) -> None:
    assert TC[tc].test_command.search(argv.lower())  # type: ignore[union-attr]
    assert is_test_check("check", argv.split())
    assert registry.hinted_formats(argv.lower())[0] == tc


@pytest.mark.parametrize("argv", ["mvn package", "mvn install -DskipTests", "gradle build", "dotnet build",
                                  "rake build", "mix compile", "cmake --build build", "bun run build", "deno lint"])
def test_commands_that_run_no_test(argv: str) -> None:
    assert not is_test_check("build", argv.split())


# --- counts on real outputs ----------------------------------------------------------------------

# file: (passed, failed, skipped, errors, failed ids (first ones, in order), zero)
EXPECTED: dict[str, tuple[int, int, int, int, list[str], bool] | None] = {
    "maven/fail.txt": (1, 1, 1, 1, ["demo.CalcTest.wrongOnPurpose", "demo.CalcTest.throwsOnPurpose"], False),
    "maven/no-tests.txt": (0, 0, 0, 0, [], True),
    "maven/hive-reactor-surefire2.txt": (2923, 5, 10, 10, [
        "org.apache.hadoop.hive.serde2.avro.TestAvroSerdeUtils.determineSchemaCanReadSchemaFromHDFS",
        "org.apache.hadoop.hive.ql.exec.TestExecDriver.testMapRedPlan3",
        "org.apache.hadoop.hive.ql.io.orc.TestOrcFile.testSnappy[1]"], False),
    "gradle/kmp-check-fail.txt": (0, 4, 0, 0, ["T.t", "T[jvm] > t()[jvm]"], False),
    "gradle/kmp-check-up-to-date.txt": None,
    "dotnet/vstest-normal-ci.txt": (71, 2, 0, 0, [
        "WindowLogger.Presentation.Tests.Forms.MainFormTests.RefreshActivityGrid_WithActivities_ShouldDisplayData"], False),
    "dotnet/vstest-minimal-docs-fail.txt": (2, 1, 0, 0, ["TestDoesNotStartWithUpper"], False),
    "dotnet/vstest-minimal-docs-pass.txt": (3, 0, 0, 0, [], False),
    "rspec/fail.txt": (1, 2, 1, 0, ["Calc.add adds wrongly on purpose", "Calc.add raises on purpose"], False),
    "rspec/pending.txt": (0, 0, 2, 0, [], False),
    "rspec/load-error.txt": (0, 0, 0, 1, ["spec/broken_spec.rb"], False),
    "rspec/zero.txt": (0, 0, 0, 0, [], True),
    "minitest/fail.txt": (1, 1, 1, 1, ["CalcTest#test_adds_wrongly_on_purpose", "CalcTest#test_raises_on_purpose"], False),
    "minitest/fail-verbose.txt": (1, 1, 1, 1, ["CalcTest#test_raises_on_purpose", "CalcTest#test_adds_wrongly_on_purpose"], False),
    "minitest/zero.txt": (0, 0, 0, 0, [], True),
    "phpunit/fail.txt": (1, 1, 2, 1, ["CalcTest::testRaisesOnPurpose", "CalcTest::testAddsWronglyOnPurpose"], False),
    "phpunit/ok.txt": (1, 0, 0, 0, [], False),
    "phpunit/skipped.txt": (0, 0, 2, 0, [], False),
    "phpunit/zero.txt": (0, 0, 0, 0, [], True),
    "exunit/fail.txt": (3, 2, 1, 0, ["CalcTest.test adds wrongly on purpose", "CalcTest.test raises on purpose"], False),
    "exunit/excluded.txt": (0, 0, 6, 0, [], False),
    "exunit/empty-module.txt": (0, 0, 0, 0, [], True),
    "exunit/no-test-files.txt": (0, 0, 0, 0, [], True),
    "ctest/fail.txt": (1, 1, 2, 0, ["fails_on_purpose"], False),
    "ctest/pass.txt": (1, 0, 0, 0, [], False),
    "ctest/skipped.txt": (0, 0, 1, 0, [], False),
    "ctest/zero.txt": (0, 0, 0, 0, [], True),
    "bun/fail.txt": (1, 2, 2, 0, ["calc.test.ts > add > adds wrongly on purpose", "calc.test.ts > add > throws on purpose"], False),
    "bun/skipped.txt": (0, 0, 2, 0, [], False),
    "bun/filter-zero.txt": (0, 0, 0, 0, [], True),
    "bun/no-files.txt": (0, 0, 0, 0, [], True),
    "deno/fail.txt": (1, 2, 1, 0, ["calc_test.ts > adds wrongly on purpose", "calc_test.ts > with steps > inner fails"], False),
    "deno/filter-zero.txt": (0, 0, 0, 0, [], True),
    "deno/no-modules.txt": (0, 0, 0, 0, [], True),
}
ARGV = {"maven": "mvn test", "gradle": "./gradlew check", "dotnet": "dotnet test", "rspec": "rspec",
        "minitest": "rake test", "phpunit": "phpunit", "exunit": "mix test", "ctest": "ctest", "bun": "bun test",
        "deno": "deno test"}


def test_every_recording_has_an_expectation_and_a_readme_line() -> None:
    files = {f"{p.parent.name}/{p.name}" for tc in NEW for p in (DATA / tc).glob("*.txt")}
    assert files == set(EXPECTED)
    for rel in EXPECTED:
        folder, name = rel.split("/")
        assert f"`{name}`" in (DATA / folder / "README.md").read_text(encoding="utf-8"), rel


@pytest.mark.parametrize("rel", sorted(EXPECTED))
@pytest.mark.parametrize("hinted", [True, False], ids=["hinted", "unhinted"])
def test_recorded_output(rel: str, hinted: bool) -> None:
    tc = rel.split("/")[0]
    text = (DATA / rel).read_text(encoding="utf-8")
    counts = parse_tests(text, ARGV[tc].split() if hinted else ())
    want = EXPECTED[rel]
    if want is None:
        assert counts is None and not detect_zero_tests(text)
        return
    assert counts is not None and counts.runner == tc
    passed, failed, skipped, errors, ids, zero = want
    assert (counts.passed, counts.failed, counts.skipped, counts.errors) == (passed, failed, skipped, errors)
    assert counts.failed_ids[: len(ids)] == ids
    assert detect_zero_tests(text) is zero
    if counts.total and counts.passed + counts.failed + counts.errors == 0:  # all skipped: the runner fails it
        assert counts.skipped > 0 and not zero


def test_hive_log_ids_and_the_line_limit() -> None:
    text = (DATA / "maven/hive-reactor-surefire2.txt").read_text(encoding="utf-8")
    counts = parse_tests(text, ["mvn", "install"])
    assert counts is not None and len(counts.failed_ids) == 14  # 15 failure lines, one repeated
    tail = text[len(text) // 2:]  # a tail still counts the modules it shows
    part = parse_tests(tail, ["mvn", "install"])
    assert part is not None and 0 < part.total < counts.total


def test_forms_without_a_whole_recording() -> None:
    """One-line forms whose wording is the runners' (see the folders' READMEs); constructed here,
    not recorded."""
    mtp = "Test run summary: Failed! - T.dll (net9.0|x64)\n  total: 5\n  failed: 1\n  succeeded: 2\n  skipped: 2\n  duration: 1s\n"
    c = parse_tests(mtp, ["dotnet", "test"])
    assert c is not None and (c.passed, c.failed, c.skipped) == (2, 1, 2)
    tl = "Test summary: total: 3, failed: 1, succeeded: 2, skipped: 0, duration: 1.2s\n"
    c = parse_tests(tl, ["dotnet", "test"])
    assert c is not None and (c.passed, c.failed) == (2, 1)
    for line in ("No test is available in /p/T.dll. Make sure that test discoverer & executors are registered.",
                 "No test matches the given testcase filter `Foo` in /p/T.dll", "Test run summary: Zero tests ran\n  total: 0"):
        assert detect_zero_tests(line), line
    assert detect_zero_tests("> No tests found for given includes: [com.acme.NoSuchTest](--tests filter)")
    events = "CalcTest > adds() PASSED\nCalcTest > later() SKIPPED\n\nBUILD SUCCESSFUL in 3s\n"
    assert parse_tests(events, ["./gradlew", "test"]) is not None and parse_tests(events) is None  # events alone: hinted only
    assert detect_zero_tests("Tests are skipped.\n[INFO] BUILD SUCCESS") and not detect_zero_tests(
        "[INFO] No tests to run.\n[INFO] Tests run: 3, Failures: 0, Errors: 0, Skipped: 0")


# --- TRX -----------------------------------------------------------------------------------------

TRX: dict[str, tuple[int, int, int, int, list[str]]] = {
    "trx-xunit.trx": (5, 5, 1, 0, ["DotnetTests.XUnitTests.CalculatorTests.Should be even number(i: 3)"]),
    "trx-xunitv3.trx": (1, 3, 0, 0, ["DotnetTests.XUnitV3Tests.FixtureTests.Failing_Test"]),
    "trx-no-test.trx": (0, 0, 0, 0, []),
    "trx-nunit-silentnotes.trx": (67, 0, 12, 0, []),
}


@pytest.mark.parametrize("name", sorted(TRX))
def test_trx_recordings(name: str) -> None:
    data = (DATA / "dotnet" / name).read_bytes()
    assert is_trx(data)
    c = parse_trx(data, name)
    passed, failed, skipped, errors, ids = TRX[name]
    assert (c.runner, c.passed, c.failed, c.skipped, c.errors) == ("trx", passed, failed, skipped, errors)
    assert c.failed_ids[: len(ids)] == ids
    assert all(not i.startswith(".") for i in c.failed_ids + c.passed_ids)


def test_trx_ids_counters_and_refusals() -> None:
    ns = 'xmlns="http://microsoft.com/schemas/VisualStudio/TeamTest/2010"'
    doc = (f'<?xml version="1.0"?><TestRun {ns}><Results>'
           '<UnitTestResult testId="a" testName="Adds" outcome="Passed"/>'
           '<UnitTestResult testId="b" testName="Data" outcome="Failed" resultType="DataDrivenTest"><InnerResults>'
           '<UnitTestResult testId="b" testName="Data (1)" outcome="Passed"/>'
           '<UnitTestResult testId="b" testName="Data (2)" outcome="Timeout"/></InnerResults></UnitTestResult>'
           '<UnitTestResult testId="c" testName="Broken" outcome="Error"/></Results><TestDefinitions>'
           '<UnitTest id="a"><TestMethod className="Ns.CalcTests, Calc.Tests, Version=1.0.0.0" name="Adds"/></UnitTest>'
           '<UnitTest id="b"><TestMethod className="Ns.CalcTests" name="Data"/></UnitTest></TestDefinitions>'
           '<ResultSummary outcome="Failed"><Counters total="99" passed="99"/></ResultSummary></TestRun>')
    c = parse_trx(doc.encode())
    assert (c.passed, c.failed, c.errors, c.skipped) == (2, 1, 1, 0)  # inner results count, not the parent
    assert c.failed_ids == ["Ns.CalcTests.Data (2)", "Broken"] and c.passed_ids[0] == "Ns.CalcTests.Adds"
    only_counters = f'<TestRun {ns}><ResultSummary><Counters total="4" passed="1" failed="1" timeout="1" notExecuted="1"/></ResultSummary></TestRun>'
    c = parse_trx(only_counters.encode())
    assert (c.passed, c.failed, c.skipped) == (1, 2, 1)
    bomb = ('<?xml version="1.0"?><!DOCTYPE r [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]>'
            f'<TestRun {ns}><Results><UnitTestResult testName="&b;" outcome="Passed"/></Results></TestRun>')
    xxe = f'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]><TestRun {ns}>&x;</TestRun>'
    for bad in (bomb, xxe, "<testsuites/>", f"<TestRun {ns}><Results>", "not xml", "<TestRun>" + "<a>" * 300):
        with pytest.raises(TrxError) as info:
            parse_trx(bad.encode(), "r.trx")
        assert isinstance(info.value, JUnitError) and info.value.source == "r.trx"
    assert not is_trx(b"<?xml version='1.0'?><!-- c --><testsuites/>") and is_trx(b"\xef\xbb\xbf<?xml?>\n<TestRun>")


# --- robustness ----------------------------------------------------------------------------------

FORMATS = {f.id: f for t in NEW for f in TC[t].formats}
LINES = st.sampled_from([
    "Tests run: 3, Failures: 1, Errors: 0, Skipped: 1", "[ERROR] a.B.c -- Time elapsed: 1 s <<< FAILURE!",
    "3 tests completed, 1 failed, 1 skipped", "A > b() FAILED", "Passed!  - Failed:     1, Passed:     2, Skipped:     0, Total:     3",
    "Total tests: 2", "     Passed: 1", "Test run summary: Failed!", "  total: 2", "2 examples, 1 failure, 1 pending",
    "rspec ./spec/a_spec.rb:1 # A b", "2 runs, 2 assertions, 1 failures, 0 errors, 0 skips", "  1) Failure:", "A#test_b [x:1]:",
    "OK (2 tests, 2 assertions)", "Tests: 2, Assertions: 2, Failures: 1.", "There was 1 failure:", "1) A::testB",
    "1 doctest, 2 tests, 1 failure, 1 skipped", "  1) test b (A)", "50% tests passed, 1 tests failed out of 2",
    "The following tests FAILED:", "\t  1 - a (Failed)", " 1 pass", " 1 fail", "Ran 2 tests across 1 file.", "(fail) a > b",
    "ok | 1 passed | 1 failed | 1 ignored", " FAILURES ", "a ... b => ./a_test.ts:1:1", "No tests to run.", "",
])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(LINES, st.text(max_size=80)), max_size=40))
def test_counters_never_raise_and_never_count_negative(lines: list[str]) -> None:
    text = clean("\n".join(lines))
    for fmt in FORMATS.values():
        for parse in (fmt.parse, fmt.hinted or fmt.parse):
            c = parse(text)
            assert c is None or min(c.passed, c.failed, c.skipped, c.errors) >= 0
    for t in NEW:
        TC[t].zero(text)  # type: ignore[misc]


def test_counters_on_a_large_pathological_log() -> None:
    """Long runs of near-miss lines (no timing assertion: a super-linear regex would hang the
    suite past its timeout instead)."""
    text = clean("\n".join(["Tests run: 1, Failures: " + "1" * 1500, "(" * 1900, "a > " * 480 + "FAILED x",
                            "x ... " * 380, " 1 pass" + " " * 1900, "ok | " + "1 passed | " * 180] * 400))
    for fmt in FORMATS.values():
        fmt.parse(text)
    assert not detect_zero_tests(text)


# --- real runs -----------------------------------------------------------------------------------

M2 = Path.home() / ".m2" / "repository"
MAVEN_OFFLINE = ("org/junit/jupiter/junit-jupiter/5.10.2", "org/apache/maven/plugins/maven-surefire-plugin/3.2.5",
                 "org/apache/maven/plugins/maven-compiler-plugin/3.13.0")
INSTALL = {"mvn": "Debian package maven", "rspec": "Debian packages ruby and ruby-rspec",
           "rake": "Debian packages rake and ruby-minitest", "phpunit": "Debian packages php-cli and phpunit",
           "mix": "Debian package elixir", "ctest": "Debian package cmake", "sh": "a POSIX sh",
           "bun": "npm package bun in tests/toolchains (setup.sh)", "deno": "npm package deno in tests/toolchains (setup.sh)"}


def _need(tool: str) -> str:
    exe = rec.tool_path(tool)
    if exe is None:
        pytest.skip(f"{tool} is not installed: install the {INSTALL[tool]}")
    if tool == "mvn" and not all((M2 / d).is_dir() for d in MAVEN_OFFLINE):
        pytest.skip(f"Maven Central is unreachable and ~/.m2 lacks {', '.join(MAVEN_OFFLINE)}")
    if tool == "ctest" and shutil.which("cc") is None:
        pytest.skip("no C compiler: install the Debian package gcc")
    return exe


def _same(got: object, want: object) -> None:
    assert got is not None and want is not None
    g, w = got.to_json(), want.to_json()  # type: ignore[attr-defined]
    g.pop("passedIds", None), w.pop("passedIds", None)
    g["failedIds"], w["failedIds"] = sorted(g["failedIds"]), sorted(w["failedIds"])  # ExUnit runs in random order
    assert g == w


# each derived check on its "fail" project: (tool to look for, report counts (passed, failed, skipped, errors))
DERIVED_LIVE: dict[str, tuple[str, dict[str, str], tuple[int, int, int, int] | None]] = {
    "maven": ("mvn", rec.MAVEN, (1, 1, 1, 1)),
    "rspec": ("rspec", rec.RSPEC, None),
    "minitest": ("rake", rec.MINITEST, None),
    "phpunit": ("phpunit", next(c.files for c in rec.CASES if (c.toolchain, c.name) == ("phpunit", "fail")), (1, 1, 2, 1)),
    "exunit": ("mix", next(c.files for c in rec.CASES if (c.toolchain, c.name) == ("exunit", "fail")), None),
    "ctest": ("ctest", rec.CTEST, (1, 1, 2, 0)),
    "bun": ("bun", rec.BUN, (1, 2, 2, 0)),
    "deno": ("deno", rec.DENO, (2, 3, 1, 0)),  # the report lists steps as test cases
}


# --- repair directives of the console reporters without a JUnit report -------------------------------

CONSOLE_DIRECTIVES: dict[str, tuple[str, list[tuple[str | None, int | None, str]]]] = {
    "rspec/fail.txt": ("rspec", [
        ("spec/calc_spec.rb", 10, "test 'Calc.add adds wrongly on purpose' failed: expected: 5; got: 4"),
        ("spec/calc_spec.rb", 14, "test 'Calc.add raises on purpose' failed: RuntimeError: boom")]),
    "rspec/load-error.txt": ("rspec", [
        ("spec/broken_spec.rb", 1,
         "test file spec/broken_spec.rb failed to load: LoadError: cannot load such file -- no_such_library")]),
    "rspec/pending.txt": ("rspec", []),
    "minitest/fail.txt": ("rake test", [
        ("test/calc_test.rb", 10, "test 'CalcTest#test_adds_wrongly_on_purpose' failed: Expected: 5; Actual: 4"),
        ("test/calc_test.rb", 14, "test 'CalcTest#test_raises_on_purpose' failed: RuntimeError: boom")]),
    "exunit/fail.txt": ("mix test", [
        ("test/calc_test.exs", 10,
         "test 'CalcTest.test adds wrongly on purpose' failed: Assertion with == failed; left: 4; right: 5"),
        ("test/calc_test.exs", 14, "test 'CalcTest.test raises on purpose' failed: ** (RuntimeError) boom")]),
}


def _directives(text: str, cmd: str, project: str = "/tmp/proj") -> list[tuple[str | None, int | None, str]]:
    check = {"name": "test", "cmd": cmd, "passed": False, "outputTail": text}
    items = extract_directives({"projectPath": project, "checks": [check]})["items"]
    return [(i.get("file"), i.get("line"), i["issue"]) for i in items]


@pytest.mark.parametrize("rel", sorted(CONSOLE_DIRECTIVES))
def test_console_reporters_give_located_directives(rel: str) -> None:
    """Break-test: RSpec, Minitest and ExUnit print ``file:line`` for every failure but had no
    directive parser. By command and, under an unrelated command name, by the output's shape."""
    cmd, want = CONSOLE_DIRECTIVES[rel]
    text = (DATA / rel).read_text(encoding="utf-8").split("\n", 1)[1]
    assert _directives(text, cmd) == want
    if want:
        assert _directives(text, "make check") == want


@pytest.mark.parametrize("tc", ["rspec", "minitest", "exunit"])
def test_live_console_directives_match_the_recording(tc: str, tmp_path: Path) -> None:
    """The same runs today: a newer runner whose failure blocks read differently shows up here."""
    case = next(c for c in rec.CASES if (c.toolchain, c.name) == (tc, "fail"))
    _need(case.argv[0])
    _code, text = rec.run_case(case)
    cmd, want = CONSOLE_DIRECTIVES[f"{tc}/fail.txt"]
    assert sorted(_directives(text, cmd)) == sorted(want)  # ExUnit runs its tests in random order


DIRECTIVE_LIVE: dict[str, tuple[str | None, int | None, str]] = {
    "maven": ("src/test/java/demo/CalcTest.java", 13, "test 'demo.CalcTest.wrongOnPurpose' failed: expected: <5> but was: <4>"),
    "phpunit": ("tests/CalcTest.php", 14, "test 'CalcTest.testAddsWronglyOnPurpose' failed: Failed asserting that 4 is identical to 5."),
}


@pytest.mark.parametrize("tc", sorted(DERIVED_LIVE))
def test_live_derived_check(tc: str, tmp_path: Path) -> None:
    """Run the derived check as derived (Maven offline) on the recorded "fail" project: its output
    counts like the recording, and the report its glob names is written by this run and counts."""
    tool, files, report = DERIVED_LIVE[tc]
    _need(tool)
    project = _write(tmp_path / "proj", files)
    (check,), _notes = _detect(tc, project)
    argv = list(check.argv)
    if tc == "maven":
        argv.insert(1, "-o")
    if argv[0] != "sh":
        argv[0] = rec.tool_path(argv[0]) or argv[0]
    started = time.time()
    proc = subprocess.run(argv, cwd=project, env=rec.run_env(tmp_path), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=600)
    text = proc.stdout.decode("utf-8", errors="replace")
    assert proc.returncode != 0, text[-2000:]
    recorded = (DATA / tc / "fail.txt").read_text(encoding="utf-8")
    _same(parse_tests(text, check.argv), parse_tests(recorded, check.argv))
    assert not detect_zero_tests(text)
    if report is None:
        assert check.junit_xml is None
        return
    assert check.junit_xml is not None
    result = collect_junit(project, check.junit_xml, started)
    assert result.files and not result.stale and not result.errors, result.note
    c = result.counts
    assert c is not None and (c.passed, c.failed, c.skipped, c.errors) == report, result.note
    items = extract_directives({"projectPath": str(project), "checks": [
        {"name": check.name, "cmd": " ".join(check.argv), "passed": False, "outputTail": "", "junit": result.to_json()}]})["items"]
    assert items and all(i["source"] == "junit" for i in items), items
    for item in items:  # a located directive names a file of the project; no issue is just the test's name
        assert "file" not in item or (project / item["file"]).is_file(), item
        assert not re.search(r"failed: \S+::\S+$", item["issue"]), item
    if tc in DIRECTIVE_LIVE:
        assert (items[0].get("file"), items[0].get("line"), items[0]["issue"]) == DIRECTIVE_LIVE[tc], items


LIVE = [c for c in rec.CASES if c.name != "fail" and c.toolchain != "maven"]


@pytest.mark.parametrize("case", LIVE, ids=lambda c: f"{c.toolchain}-{c.name}")
def test_live_run_counts_like_its_recording(case: rec.Case) -> None:
    """The installed runner still prints what was recorded (the same counts, ids and verdicts)."""
    _need(case.argv[0])
    for tool in {cmd[0] for cmd in case.setup}:
        _need("ctest" if tool == "cmake" else tool)
    _code, text = rec.run_case(case)
    recorded = (DATA / case.toolchain / f"{case.name}.txt").read_text(encoding="utf-8")
    counts = parse_tests(text, case.argv)
    _same(counts, parse_tests(recorded, case.argv))
    assert detect_zero_tests(text) is detect_zero_tests(recorded)
    assert re.sub(r"\s+", " ", recorded.split("\n", 1)[0]).startswith("#% recorded by record_toolchains.py")
