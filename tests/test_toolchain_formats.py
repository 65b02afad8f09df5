"""acceptance.toolchains.formats: the machine-readable and parallel test outputs (docs/toolchains.md
§2): ``go test -json`` (go_json), the Jest JSON report of jest and vitest (jest_json),
``cargo nextest run`` (nextest) and ``pytest -n N`` (pytest_xdist).

Every parser is tested on REAL outputs under ``tests/data/toolchains/<go|jest|vitest|cargo|pytest>/``
(recorded by ``record_formats.py`` there, or taken from public repositories: each folder's README
says which), in the two forms the engine may hand them: ANSI-cleaned, and with lines cut at
``MAX_LINE`` as ``testcount.parse_tests`` does. Then the edge cases the recordings do not show, the
zero-test / all-skipped shapes, and a hypothesis fuzz (never raises, counts never negative). One
live ``go test -json`` run checks that the recording still matches the installed Go.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tianshu_mcp.acceptance.toolchains.base import MAX_IDS, MAX_LINE, TestCounts, clean
from tianshu_mcp.acceptance.toolchains.formats.go_json import (
    go_json_zero,
    parse_go_json,
)
from tianshu_mcp.acceptance.toolchains.formats.jest_json import parse_jest_json
from tianshu_mcp.acceptance.toolchains.formats.nextest import parse_nextest
from tianshu_mcp.acceptance.toolchains.pytest import XDIST_RESULT

DATA = Path(__file__).resolve().parent / "data" / "toolchains"
FOLDERS = ("go", "jest", "vitest", "cargo", "pytest")


def parse_pytest_xdist(text: str) -> TestCounts | None:
    """The xdist verbose form (``[gwN]`` lines) as the engine counts it; None without such a line."""
    from tianshu_mcp.acceptance.testcount import parse_tests

    return parse_tests(text, ["pytest", "-n", "2", "-v"]) if XDIST_RESULT.search(text) else None


PARSERS = {"go": parse_go_json, "jest": parse_jest_json, "vitest": parse_jest_json,
           "cargo": parse_nextest, "pytest": parse_pytest_xdist}


def _read(rel: str) -> str:
    return (DATA / rel).read_text(encoding="utf-8")


def _parse(rel: str, cut: bool = False) -> TestCounts | None:
    folder = rel.split("/", 1)[0]
    return PARSERS[folder](clean(_read(rel), MAX_LINE if cut else None))


# --- recorded real outputs ---------------------------------------------------------------------

# file → (runner, passed, failed, skipped, errors, failed_ids, passed_ids); None: format not recognised
EXPECTED: dict[str, tuple[str, int, int, int, int, list[str], list[str]] | None] = {
    "go/pass.txt": ("go-json", 4, 0, 0, 0, [], [
        "x/calc/TestAdd", "x/calc/TestAddTable/small", "x/calc/TestAddTable/large", "x/strs/TestJoin"]),
    "go/fail.txt": ("go-json", 4, 2, 1, 0, ["x/a/TestBad", "x/a/TestSub/two"], [
        "x/a/TestOk", "x/a/TestSub/one", "x/b/TestB1", "x/b/TestB2"]),
    "go/subtests.txt": ("go-json", 4, 1, 1, 0, ["x/deep/TestTree/b"], [
        "x/deep/TestTree/a/x", "x/deep/TestTree/with_space", "x/deep/TestParallel/p1", "x/deep/TestParallel/p2"]),
    "go/skipped.txt": ("go-json", 0, 0, 2, 0, [], []),
    "go/no-test-files.txt": ("go-json", 0, 0, 0, 0, [], []),
    "go/zero-run.txt": ("go-json", 0, 0, 0, 0, [], []),
    "go/build-error.txt": ("go-json", 1, 0, 0, 1, ["x/broken"], ["x/ok/TestFine"]),
    "go/panic.txt": ("go-json", 2, 1, 0, 0, ["x/boom/TestPanics"], ["x/boom/TestFine", "x/ok/TestOk"]),
    "go/timeout.txt": ("go-json", 1, 0, 0, 1, ["x/slow/TestSlow"], ["x/slow/TestQuick"]),
    "go/go1.26-build-fail.txt": ("go-json", 0, 0, 0, 1, ["example.com/m"], []),
    "go/go1.25-attributes.txt": ("go-json", 1, 0, 0, 0, [], [
        "gotest.tools/gotestsum/testjson/internal/withattributes/TestSomeAttributes"]),
    "jest/pass.txt": ("jest-json", 3, 0, 0, 0, [], ["math › adds 1 + 2", "math › nested › deep ok", "top level ok"]),
    "jest/fail.txt": ("jest-json", 3, 2, 2, 1, ["math › fails on purpose", "other fails", "broken.test.js"], [
        "math › adds 1 + 2", "top level ok", "other passes"]),
    "jest/skipped.txt": ("jest-json", 0, 0, 2, 0, [], []),
    "jest/zero.txt": None,  # jest writes no report without --passWithNoTests
    "jest/zero-pass.txt": ("jest-json", 0, 0, 0, 0, [], []),
    "jest/console.txt": ("jest-json", 2, 0, 0, 0, [], ["logs braces", "logs more"]),
    "vitest/pass.txt": ("vitest-json", 3, 0, 0, 0, [], [
        "sum.test.js > math > adds 1 + 2", "sum.test.js > math > nested > deep ok", "sum.test.js > top level ok"]),
    "vitest/fail.txt": ("vitest-json", 3, 2, 2, 1, [
        "broken.test.js", "mixed.test.js > math > fails on purpose", "other.test.js > other fails"], [
        "mixed.test.js > math > adds 1 + 2", "mixed.test.js > top level ok", "other.test.js > other passes"]),
    "vitest/skipped.txt": ("vitest-json", 0, 0, 2, 0, [], []),
    "vitest/zero.txt": ("vitest-json", 0, 0, 0, 0, [], []),
    "vitest/zero-pass.txt": ("vitest-json", 0, 0, 0, 0, [], []),
    "vitest/console.txt": ("vitest-json", 2, 0, 0, 0, [], ["noisy.test.js > logs braces", "noisy.test.js > logs more"]),
    "vitest/nested.txt": ("vitest-json", 4, 1, 0, 0, ["other.test.js > other fails"], [
        "other.test.js > other passes", "unit/sum.test.js > math > adds 1 + 2",
        "unit/sum.test.js > math > nested > deep ok", "unit/sum.test.js > top level ok"]),
    "cargo/nextest-0.9.72-fail.txt": ("nextest", 1, 1, 0, 0, [
        "rustaceanvim-460-repro::bin/rustaceanvim-460-repro tests::test_main"], [
        "rustaceanvim-460-repro::bin/rustaceanvim-460-repro tests::test_ok"]),
    "cargo/nextest-0.9.146-pass.txt": ("nextest", 1, 0, 2, 0, [], ["nextest-probe tests::plain"]),
    "cargo/nextest-snapshot-replay_output_not_captured.txt": (
        "nextest", 0, 1, 31, 0, ["fixture-project::basic test_failure_assert"], []),
    "cargo/nextest-snapshot-rerun_tests_outstanding.txt": (
        "nextest", 1, 0, 31, 0, [], ["fixture-project::basic test_success"]),
    "cargo/nextest-snapshot-rerun_all_pass.txt": ("nextest", 0, 0, 0, 0, [], []),
    "cargo/nextest-summary-lines.txt": ("nextest", 0, 0, 0, 0, [], []),  # its last line: 0 tests run
    "pytest/xdist-pass-v.txt": ("pytest", 3, 0, 0, 0, [], [
        "tests/test_calc.py::test_add_negative", "tests/test_calc.py::test_add", "tests/test_calc.py::TestMore::test_zero"]),
    "pytest/xdist-fail-v.txt": ("pytest", 3, 2, 1, 1, [
        "tests/test_mixed.py::test_uses_broken", "tests/test_mixed.py::test_bad", "tests/test_mixed.py::test_param[2]"], [
        "tests/test_mixed.py::test_ok", "tests/test_mixed.py::test_param[1]", "tests/test_mixed.py::TestGroup::test_method"]),
    "pytest/xdist-fail-q.txt": None,  # no [gwN] line: the plain pytest form counts it
    "pytest/xdist-fail-ra.txt": None,
    "pytest/xdist-skipped-q.txt": None,
    "pytest/xdist-zero-q.txt": None,
    "pytest/xdist-collect-error-q.txt": None,
}

ZERO = {"go/no-test-files.txt", "go/zero-run.txt", "jest/zero-pass.txt", "vitest/zero.txt", "vitest/zero-pass.txt",
        "cargo/nextest-snapshot-rerun_all_pass.txt", "cargo/nextest-summary-lines.txt"}
ALL_SKIPPED = {"go/skipped.txt", "jest/skipped.txt", "vitest/skipped.txt"}


# first lines of the recordings of record_runner_outputs.py and record_directive_outputs.py, which
# share these folders (tested in test_acceptance_testcount.py and test_acceptance_directives.py)
OTHER_RECORDERS = ("#% recorded by record.py;", "# tool: ")


def _recordings() -> list[str]:
    return sorted(f"{p.parent.name}/{p.name}" for folder in FOLDERS for p in (DATA / folder).glob("*.txt")
                  if not p.read_text(encoding="utf-8").startswith(OTHER_RECORDERS))


def test_every_recording_has_an_expectation_and_a_readme_line() -> None:
    assert set(_recordings()) == set(EXPECTED)
    for rel in EXPECTED:
        folder, name = rel.split("/")
        assert name in (DATA / folder / "README.md").read_text(encoding="utf-8"), f"{rel} not in its README"


@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_recorded_output(rel: str) -> None:
    got = _parse(rel)
    want = EXPECTED[rel]
    if want is None:
        assert got is None
        return
    assert got is not None
    runner, passed, failed, skipped, errors, failed_ids, passed_ids = want
    assert (got.runner, got.passed, got.failed, got.skipped, got.errors) == (runner, passed, failed, skipped, errors)
    assert got.failed_ids == failed_ids
    assert got.passed_ids == passed_ids


@pytest.mark.parametrize("rel", sorted(r for r, w in EXPECTED.items() if w is not None))
def test_counts_survive_the_engine_line_limit(rel: str) -> None:
    """The engine cuts lines at MAX_LINE: go-json, nextest and xdist read the same; a Jest report
    on one long line falls back to its head counters (same totals, no ids, no vitest errors)."""
    full, cut = _parse(rel), _parse(rel, cut=True)
    assert full is not None and cut is not None
    assert (cut.runner, cut.passed, cut.failed, cut.skipped) == (full.runner, full.passed, full.failed, full.skipped)
    if rel.split("/")[0] in ("go", "cargo", "pytest"):
        assert cut == full
    elif cut.runner == "jest-json":
        assert cut.errors == full.errors


@pytest.mark.parametrize("rel", sorted(ZERO))
def test_zero_test_runs_count_zero(rel: str) -> None:
    got = _parse(rel)
    assert got is not None and got.total == 0


@pytest.mark.parametrize("rel", sorted(ALL_SKIPPED))
def test_all_skipped_runs(rel: str) -> None:
    got = _parse(rel)
    assert got is not None and got.passed + got.failed + got.errors == 0 and got.skipped > 0


@pytest.mark.parametrize("rel", sorted(r for r in EXPECTED if r.startswith("go/")))
def test_go_json_zero(rel: str) -> None:
    assert go_json_zero(clean(_read(rel))) is (rel in ZERO)


def test_go_json_zero_is_false_for_other_outputs() -> None:
    assert not go_json_zero("")
    assert not go_json_zero("ok  \tx/a\t0.01s\n")  # the plain form is not this one's business
    assert not go_json_zero(_read("jest/zero-pass.txt"))


# --- go test -json: edge cases -------------------------------------------------------------------


def _ev(action: str, pkg: str | None = "p", test: str | None = None, **extra: Any) -> str:
    ev: dict[str, Any] = {"Action": action}
    if pkg is not None:
        ev["Package"] = pkg
    if test is not None:
        ev["Test"] = test
    ev.update(extra)
    return json.dumps(ev)


def test_go_json_tail_with_a_cut_first_line_and_noise() -> None:
    text = _read("go/fail.txt")
    lines = text.split("\n")
    cut_first = lines[5][len(lines[5]) // 2:]  # a tail starts in the middle of an event
    noisy = "\n".join([cut_first, "go: downloading example.com/x v1.0.0", *lines[6:], "make: *** [test] Error 1"])
    got = parse_go_json(clean(noisy))
    assert got is not None
    # the events before the cut are gone; what remains is counted the same way
    assert "x/b/TestB1" in got.passed_ids and "x/a/TestBad" in got.failed_ids


def test_go_json_parent_failing_after_passing_subtests_is_an_error() -> None:
    text = "\n".join([
        _ev("run", test="TestP"), _ev("run", test="TestP/a"), _ev("pass", test="TestP/a"),
        _ev("fail", test="TestP"), _ev("fail"),
    ])
    got = parse_go_json(text)
    assert got is not None
    assert (got.passed, got.failed, got.errors, got.failed_ids) == (1, 0, 1, ["p/TestP"])


def test_go_json_build_fail_without_a_package_verdict_is_an_error() -> None:
    text = _ev("build-output", pkg=None, ImportPath="x/y [x/y.test]", Output="boom\n") + "\n" + \
        _ev("build-fail", pkg=None, ImportPath="x/y [x/y.test]")
    got = parse_go_json(text)
    assert got is not None and (got.errors, got.failed_ids) == (1, ["x/y"])


def test_go_json_events_without_package_and_a_cut_off_run() -> None:
    text = "\n".join([_ev("run", pkg=None, test="TestA"), _ev("pass", pkg=None, test="TestA"),
                      _ev("run", pkg=None, test="TestB")])  # killed while TestB ran: no verdict
    got = parse_go_json(text)
    assert got is not None and (got.passed, got.failed, got.errors, got.passed_ids) == (1, 0, 0, ["TestA"])


def test_go_json_not_recognised() -> None:
    assert parse_go_json("") is None
    assert parse_go_json(clean(_read("go/build-error.txt")).split("{", 1)[0]) is None  # plain lines only
    assert parse_go_json('{"foo": 1}\n{"Action": 3}\n') is None


def test_go_json_ids_are_capped() -> None:
    text = "\n".join(_ev("fail", test=f"T{i}") for i in range(MAX_IDS + 50))
    got = parse_go_json(text)
    assert got is not None and got.failed == MAX_IDS + 50 and len(got.failed_ids) == MAX_IDS


# --- Jest JSON report: edge cases ----------------------------------------------------------------


def _report_of(rel: str) -> dict[str, Any]:
    text = _read(rel)
    start = text.index('{"num')
    obj, _ = json.JSONDecoder().raw_decode(text, start)
    return obj


def test_jest_json_pretty_printed_between_npm_banner_and_trailing_text() -> None:
    report = json.dumps(_report_of("jest/fail.txt"), indent=2)
    text = f"\n> proj@1.0.0 test\n> jest --json\n\n{report}\nnpm ERR! Test failed.\n"
    got = parse_jest_json(text)
    assert got is not None
    assert (got.runner, got.passed, got.failed, got.skipped, got.errors) == ("jest-json", 3, 2, 2, 1)


def test_jest_json_a_logged_report_after_the_real_one_is_not_taken_for_it() -> None:
    """The last decodable report wins; a console line that only looks like one has no
    testResults list of the right type and is skipped."""
    real = json.dumps(_report_of("vitest/fail.txt"))
    text = real + '\n{"numTotalTests": "many", "testResults": 3}\n'
    got = parse_jest_json(text)
    assert got is not None and (got.runner, got.failed, got.errors) == ("vitest-json", 2, 1)


def test_jest_json_report_cut_after_its_head() -> None:
    report = json.dumps(_report_of("jest/fail.txt"))
    got = parse_jest_json(report[: len(report) // 2])
    assert got is not None and (got.runner, got.passed, got.failed, got.skipped, got.errors) == (
        "jest-json", 3, 2, 2, 1)
    assert got.failed_ids == []


def test_jest_json_missing_counters_come_from_the_assertions() -> None:
    report = _report_of("jest/fail.txt")
    for key in ("numPassedTests", "numFailedTests", "numPendingTests", "numTodoTests"):
        del report[key]
    got = parse_jest_json(json.dumps(report))
    assert got is not None and (got.passed, got.failed, got.skipped, got.errors) == (3, 2, 2, 1)


def test_jest_json_not_recognised() -> None:
    assert parse_jest_json("") is None
    assert parse_jest_json(_read("jest/zero.txt")) is None
    assert parse_jest_json('{"numTotalTests": 1}') is None  # no testResults, no counters
    assert parse_jest_json(_read("go/pass.txt")) is None


# --- nextest: edge cases -------------------------------------------------------------------------

SUMMARY_LINES = [line for line in _read("cargo/nextest-summary-lines.txt").split("\n") if "Summary" in line]


@pytest.mark.parametrize(("line", "want"), [
    (SUMMARY_LINES[0], (5, 0, 0, 0)),
    (SUMMARY_LINES[1], (5, 3, 2, 1)),  # 2 failed + 1 timed out; 1 exec failed; 2 skipped
    (SUMMARY_LINES[-1], (0, 0, 0, 0)),
])
def test_nextest_summary_grammar(line: str, want: tuple[int, int, int, int]) -> None:
    got = parse_nextest(line)
    assert got is not None and (got.passed, got.failed, got.skipped, got.errors) == want


def test_nextest_stress_summaries_are_not_test_summaries() -> None:
    assert all("stress run iterations" not in line or parse_nextest(line) is None for line in SUMMARY_LINES)


def test_nextest_no_tests_to_run_without_a_summary() -> None:
    text = "    Starting 0 tests across 0 binaries (7 binaries skipped)\nerror: no tests to run\n" \
           "(hint: use `--no-tests` to customize)\n"
    got = parse_nextest(text)
    assert got is not None and got.total == 0


def test_nextest_retries_keep_the_final_outcome() -> None:
    text = "\n".join([
        "    Starting 2 tests across 1 binary",
        "  TRY 1 FAIL [   0.006s] demo flaky::rand",
        "  TRY 2 PASS [   0.003s] demo flaky::rand",
        "     SIGSEGV [   0.100s] ( 2/2) demo tests::crash",
        "        SLOW [>  1.000s] (─────) demo tests::crash",
        "     Summary [   0.009s] 2 tests run: 1 passed (1 flaky), 1 failed, 0 skipped",
        "     SIGSEGV [   0.100s] ( 2/2) demo tests::crash",
    ])
    got = parse_nextest(text)
    assert got is not None and (got.passed, got.failed) == (1, 1)
    assert got.passed_ids == ["demo flaky::rand"] and got.failed_ids == ["demo tests::crash"]


def test_nextest_cut_off_run_counts_its_status_lines() -> None:
    text = "    Starting 3 tests across 1 binary\n        PASS [   0.1s] demo a\n        FAIL [   0.1s] demo b\n"
    got = parse_nextest(text)
    assert got is not None and (got.passed, got.failed, got.failed_ids) == (1, 1, ["demo b"])


def test_nextest_not_recognised() -> None:
    assert parse_nextest("") is None
    assert parse_nextest(_read("pytest/xdist-fail-v.txt")) is None
    assert parse_nextest("running 2 tests\ntest result: ok. 2 passed; 0 failed; 0 ignored\n") is None


# --- pytest -n 2 -----------------------------------------------------------------------------------


@pytest.mark.parametrize("rel", sorted(r for r in EXPECTED if r.startswith("pytest/")))
def test_the_plain_pytest_form_counts_xdist_runs(rel: str) -> None:
    """The finding behind pytest_xdist: the existing pytest counter counts every xdist recording
    right (only the -v passed ids were missing, which parse_pytest_xdist adds)."""
    from tianshu_mcp.acceptance.testcount import parse_tests

    want = {
        "xdist-pass-v": (3, 0, 0, 0), "xdist-fail-v": (3, 2, 1, 1), "xdist-fail-q": (3, 2, 1, 1),
        "xdist-fail-ra": (3, 2, 1, 1), "xdist-skipped-q": (0, 0, 2, 0), "xdist-zero-q": (0, 0, 0, 0),
        "xdist-collect-error-q": (1, 0, 0, 1),
    }[Path(rel).stem]
    got = parse_tests(_read(rel), ["python", "-m", "pytest", "-n", "2"])
    assert got is not None and (got.passed, got.failed, got.skipped, got.errors) == want
    xdist = parse_pytest_xdist(clean(_read(rel)))
    if xdist is not None:
        assert (xdist.passed, xdist.failed, xdist.skipped, xdist.errors) == want
        assert set(got.failed_ids) == set(xdist.failed_ids)


# --- fuzz --------------------------------------------------------------------------------------------

_FRAGMENTS = st.sampled_from([
    '{"Action":"run","Package":"p","Test":"T/a"}', '{"Action":"fail","Package":"p"}',
    '{"Action":"pass","Test":"T"}', '{"Action":"build-fail","ImportPath":"x [x.test]"}',
    '{"Action":"fail","Package":"p","FailedBuild":"q"}', "FAIL\tx [build failed]", '{"Action":',
    '{"numTotalTests":3,"numPassedTests":1,"numFailedTests":-1,"testResults":[{"assertionResults":[null,{}]}]}',
    '{"numFailedTests":1,"numPassedTests":2,"numTotalTests":3', '"testResults":[', "]}", "{", "}",
    "     Summary [   0.1s] 3/4 tests run: 1 passed (1 flaky), 1 failed, 1 exec failed, 1 timed out, 2 skipped",
    "        FAIL [   0.1s] (1/2) a b", "  TRY 9 SIGKILL [ x] a b", "error: no tests to run",
    "    Starting 0 tests across 1 binary", "[gw0] [ 50%] PASSED t.py::x", "1 passed, 1 failed in 0.1s",
    "no tests ran in 0.01s", "FAILED t.py::y - boom", "\x1b[31m", "\r", "\n", " ", "/", "\\",
    # huge numbers (int() refuses more than 4300 digits) and deep names
    "     Summary [ 0.1s] " + "9" * 5000 + " tests run: " + "9" * 5000 + " passed, 1 skipped",
    "9" * 5000 + " passed in 0.1s", '{"numTotalTests":' + "9" * 5000 + ',"numPassedTests":1}',
    '{"Action":"pass","Package":"p","Test":"' + "a/" * 200 + '"}', "[" * 3000 + "]" * 3000,
])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(_FRAGMENTS, st.text(max_size=40)), max_size=30))
def test_fuzz_never_raises(parts: list[str]) -> None:
    text = "\n".join(parts)
    for parse in (parse_go_json, parse_jest_json, parse_nextest, parse_pytest_xdist):
        for variant in (text, "".join(parts), clean(text, MAX_LINE)):
            got = parse(variant)
            assert got is None or isinstance(got, TestCounts)
            if got is not None:
                assert min(got.passed, got.failed, got.skipped, got.errors) >= 0
                assert len(got.failed_ids) <= MAX_IDS and len(got.passed_ids) <= MAX_IDS
    assert isinstance(go_json_zero(text), bool)


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet='{}[]":,0123456789abcnumTotalTestsResults \n\\', max_size=400))
def test_fuzz_json_shaped_noise(text: str) -> None:
    for parse in (parse_go_json, parse_jest_json):
        got = parse(text)
        assert got is None or min(got.passed, got.failed, got.skipped, got.errors) >= 0


# --- live ------------------------------------------------------------------------------------------


def _load_recorder() -> Any:
    spec = importlib.util.spec_from_file_location("toolchain_formats_record", DATA / "record_formats.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(shutil.which("go") is None, reason="go is not installed")
@pytest.mark.parametrize("name", ["fail", "no-test-files"])
def test_live_go_json_matches_its_recording(name: str) -> None:
    recorder = _load_recorder()
    case = next(c for folder, c in recorder.CASES if folder == "go" and c.name == name)
    _code, text = recorder.rec.run_case(case)
    got, want = parse_go_json(clean(text)), _parse(f"go/{name}.txt")
    assert got is not None and want is not None
    assert (got.passed, got.failed, got.skipped, got.errors) == (want.passed, want.failed, want.skipped, want.errors)
    assert sorted(got.failed_ids) == sorted(want.failed_ids)
