"""acceptance.testcount: is_test_check, detect_zero_tests, parse_tests / TestCounts, parse_counts
(docs/acceptance.md §3.2, extended).

The parsers are tested on REAL runner output recorded in ``tests/data/toolchains/<toolchain id>/``
by ``tests/data/toolchains/record_runner_outputs.py`` (pytest, unittest, node --test spec/TAP, jest,
vitest, mocha, go, cargo), and
each runner is also run live here on the same tiny project, so a runner whose output changed shows
up as a difference from its recording. Live tests skip only when the runner's binary is missing.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tianshu_mcp.acceptance.testcount import (
    MAX_IDS,
    TestCounts,
    detect_zero_tests,
    is_test_check,
    parse_counts,
    parse_tests,
)

DATA = Path(__file__).resolve().parent / "data" / "toolchains"


def _load_record() -> Any:
    spec = importlib.util.spec_from_file_location("runner_outputs_record", DATA / "record_runner_outputs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


record = _load_record()
CASES = {Path(c.filename).stem: c for c in record.CASES}

# --- is_test_check ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "argv", "expected"),
    [
        ("unit-tests", ["make", "check"], True),
        ("latest-build", ["make"], True),  # "test" in the name, as in the original
        ("ci", ["npm", "test"], False),  # npm test without "run" only counts via the name
        ("ci", ["npm", "run", "test"], True),
        ("ci", ["npm", "run", "test:unit"], True),
        ("ci", ["python", "-m", "pytest", "-q"], True),
        ("ci", ["node", "--test"], True),
        ("ci", ["go", "test", "./..."], True),
        ("ci", ["cargo", "test"], True),
        ("ci", ["npx", "vitest", "run"], True),
        ("ci", ["npx", "jest", "--ci"], True),
        ("ci", ["npx", "mocha"], True),
        ("ci", ["python", "-m", "unittest", "discover"], True),
        ("build", ["npm", "run", "build"], False),
        ("lint", ["ruff", "check", "."], False),
        ("Typecheck", ["PYTEST_LIKE", "x"], False),
    ],
)
def test_is_test_check(name: str, argv: list[str], expected: bool) -> None:
    assert is_test_check(name, argv) is expected


# --- recorded real outputs --------------------------------------------------------------------

# file stem → (runner, passed, failed, skipped, errors, failed_ids, passed_ids)
EXPECTED: dict[str, tuple[str, int, int, int, int, list[str], list[str]]] = {
    "pytest-pass": ("pytest", 3, 0, 0, 0, [], [
        "tests/test_calc.py::test_add", "tests/test_calc.py::test_add_negative", "tests/test_calc.py::TestMore::test_zero"]),
    "pytest-fail": ("pytest", 3, 2, 1, 1, [
        "tests/test_mixed.py::test_uses_broken", "tests/test_mixed.py::test_bad", "tests/test_mixed.py::test_param[2]"], [
        "tests/test_mixed.py::test_ok", "tests/test_mixed.py::test_param[1]", "tests/test_mixed.py::TestGroup::test_method"]),
    "pytest-fail-q": ("pytest", 3, 2, 1, 1, [
        "tests/test_mixed.py::test_bad", "tests/test_mixed.py::test_param[2]", "tests/test_mixed.py::test_uses_broken"], []),
    "pytest-skipped": ("pytest", 0, 0, 2, 0, [], []),
    "pytest-zero": ("pytest", 0, 0, 0, 0, [], []),
    "pytest-deselected": ("pytest", 0, 0, 0, 0, [], []),
    "pytest-collect-error": ("pytest", 0, 0, 0, 1, ["tests/test_broken.py"], []),
    "unittest-pass": ("unittest", 3, 0, 0, 0, [], [
        "test_add (test_calc.CalcTest.test_add)", "test_mul (test_calc.CalcTest.test_mul)",
        "test_sub (test_calc.CalcTest.test_sub)"]),
    # failures=2 (one is a subTest), errors=1, skipped=1, expected failures=1 (counted as skipped)
    "unittest-fail": ("unittest", 1, 2, 2, 1, [
        "test_error (test_mixed.Mixed.test_error)", "test_bad (test_mixed.Mixed.test_bad)",
        "test_sub (test_mixed.Mixed.test_sub) (i=1)"], []),
    "unittest-fail-v": ("unittest", 1, 2, 2, 1, [
        "test_error (test_mixed.Mixed.test_error)", "test_bad (test_mixed.Mixed.test_bad)",
        "test_sub (test_mixed.Mixed.test_sub) (i=1)"], ["test_ok (test_mixed.Mixed.test_ok)"]),
    "unittest-skipped": ("unittest", 0, 0, 2, 0, [], []),
    "unittest-zero": ("unittest", 0, 0, 0, 0, [], []),
    "node-spec-pass": ("node-spec", 4, 0, 0, 0, [], ["adds numbers", "multiplies", "strings > joins", "other file works"]),
    "node-spec-fail": ("node-spec", 2, 2, 2, 0, ["fails here", "suite A > inner bad"], ["adds numbers", "suite A > inner ok"]),
    "node-spec-skipped": ("node-spec", 0, 0, 2, 0, [], []),
    "node-spec-zero": ("node-spec", 0, 0, 0, 0, [], []),
    "node-tap-pass": ("node-tap", 4, 0, 0, 0, [], ["adds numbers", "multiplies", "strings > joins", "other file works"]),
    "node-tap-fail": ("node-tap", 2, 2, 2, 0, ["fails here", "suite A > inner bad"], ["adds numbers", "suite A > inner ok"]),
    "node-tap-skipped": ("node-tap", 0, 0, 2, 0, [], []),
    "node-tap-zero": ("node-tap", 0, 0, 0, 0, [], []),
    "node-default-fail": ("node-tap", 2, 2, 2, 0, ["fails here", "suite A > inner bad"], ["adds numbers", "suite A > inner ok"]),
    "jest-pass": ("jest", 3, 0, 0, 0, [], ["top level ok", "math › adds 1 + 2", "math › nested › deep ok"]),
    "jest-fail": ("jest", 3, 2, 2, 1, ["math › fails on purpose", "other fails", "broken.test.js"], []),
    "jest-fail-verbose": ("jest", 3, 2, 2, 1, ["math › fails on purpose", "other fails", "broken.test.js"], [
        "top level ok", "math › adds 1 + 2", "other passes"]),
    "jest-skipped": ("jest", 0, 0, 2, 0, [], []),
    "jest-zero": ("jest", 0, 0, 0, 0, [], []),
    "jest-zero-pass": ("jest", 0, 0, 0, 0, [], []),
    "vitest-pass": ("vitest", 3, 0, 0, 0, [], []),
    "vitest-pass-verbose": ("vitest", 3, 0, 0, 0, [], [
        "sum.test.js > math > adds 1 + 2", "sum.test.js > math > nested > deep ok", "sum.test.js > top level ok"]),
    "vitest-fail": ("vitest", 3, 2, 2, 1, [
        "broken.test.js", "mixed.test.js > math > fails on purpose", "other.test.js > other fails"], [
        "mixed.test.js > math > adds 1 + 2", "mixed.test.js > top level ok", "other.test.js > other passes"]),
    "vitest-skipped": ("vitest", 0, 0, 2, 0, [], []),
    "vitest-zero": ("vitest", 0, 0, 0, 0, [], []),
    "vitest-zero-pass": ("vitest", 0, 0, 0, 0, [], []),
    "mocha-pass": ("mocha", 3, 0, 0, 0, [], ["top level works", "Array has length", "Array #indexOf() returns -1 when absent"]),
    "mocha-fail": ("mocha", 2, 2, 2, 0, ["Array fails", 'Array hooks "before all" hook for "never runs"'], [
        "Array works", "Array nested deep ok"]),
    "mocha-skipped": ("mocha", 0, 0, 2, 0, [], []),
    "mocha-zero": ("mocha", 0, 0, 0, 0, [], []),
    "mocha-no-files": ("mocha", 0, 0, 0, 0, [], []),
    "tap-mocha-fail": ("tap", 2, 2, 2, 0, ["Array fails", 'Array hooks "before all" hook for "never runs"'], [
        "Array works", "Array nested deep ok"]),
    # go without -v: a passing package is one unit (id = package path)
    "go-pass": ("go", 2, 0, 0, 0, [], ["x/calc", "x/strs"]),
    "go-pass-v": ("go", 4, 0, 0, 0, [], ["x/calc/TestAdd", "x/calc/TestAddTable/small", "x/calc/TestAddTable/large", "x/strs/TestJoin"]),
    "go-fail": ("go", 1, 2, 0, 0, ["x/a/TestBad", "x/a/TestSub/two"], ["x/b"]),
    "go-fail-v": ("go", 4, 2, 1, 0, ["x/a/TestBad", "x/a/TestSub/two"], ["x/a/TestOk", "x/a/TestSub/one", "x/b/TestB1", "x/b/TestB2"]),
    "go-skipped-v": ("go", 0, 0, 2, 0, [], []),
    "go-zero": ("go", 0, 0, 0, 0, [], []),
    "go-zero-run": ("go", 0, 0, 0, 0, [], []),
    "go-zero-run-v": ("go", 0, 0, 0, 0, [], []),
    "go-build-error": ("go", 1, 0, 0, 1, ["x/broken"], ["x/ok"]),
    "cargo-pass": ("cargo", 2, 0, 0, 0, [], ["tests::it_works", "tests::negative"]),
    "cargo-fail": ("cargo", 1, 1, 1, 0, ["tests::it_fails"], ["tests::it_works"]),
    "cargo-skipped": ("cargo", 0, 0, 2, 0, [], []),
    "cargo-zero": ("cargo", 0, 0, 0, 0, [], []),
    "cargo-filtered": ("cargo", 0, 0, 0, 0, [], []),
    "cargo-multi": ("cargo", 3, 0, 1, 0, [], ["tests::one_is_one", "from_outside", "tests::beta_a"]),
    "cargo-build-error": ("cargo", 0, 0, 0, 1, ["demo"], []),
}

# what the check runner decides for a mandatory test check that exits 0 with this output
VERDICT_IF_EXIT_0 = {
    stem: ("zero" if e[1] + e[2] + e[3] + e[4] == 0 else "contradiction" if e[2] or e[4] else
           "all-skipped" if e[1] == 0 else "pass")
    for stem, e in EXPECTED.items()
}


def _recorded(stem: str) -> tuple[dict[str, str], str]:
    return record.read_recording(record.recorded(stem))


def _as_tuple(c: TestCounts) -> tuple[str, int, int, int, int, list[str], list[str]]:
    return (c.runner, c.passed, c.failed, c.skipped, c.errors, c.failed_ids, c.passed_ids)


def test_every_recording_has_an_expectation_and_a_case() -> None:
    files = {p.stem for p in record.recordings()}
    assert files == set(EXPECTED) == set(CASES)
    runners = {e[0] for e in EXPECTED.values()}
    assert runners == {"pytest", "unittest", "node-spec", "node-tap", "tap", "jest", "vitest", "mocha", "go", "cargo"}
    for runner in ("pytest", "unittest", "node-spec", "node-tap", "jest", "vitest", "mocha", "go", "cargo"):
        stems = [s for s in EXPECTED if s.startswith(runner + "-")]
        verdicts = {VERDICT_IF_EXIT_0[s] for s in stems}
        assert verdicts >= {"zero", "all-skipped", "contradiction"}, runner  # pass / skipped / fail / zero cases
        assert any(VERDICT_IF_EXIT_0[s] == "pass" for s in stems), runner


@pytest.mark.parametrize("stem", sorted(EXPECTED))
def test_recorded_output(stem: str) -> None:
    meta, text = _recorded(stem)
    assert text.startswith("#% recorded by record.py; tool: ")
    argv = meta["argv"].split()
    counts = parse_tests(text, argv)
    assert counts is not None
    assert _as_tuple(counts) == EXPECTED[stem]
    # the header line is ignored
    body = text.split("\n", 1)[1]
    assert parse_tests(body, argv) == counts
    # without the argv hint the same format is found (cargo's compile error needs the hint)
    if stem != "cargo-build-error":
        assert parse_tests(text) == counts
    else:
        assert parse_tests(text) is None
    # the zero-test text rules and the counts agree on every recording
    assert detect_zero_tests(text) is (counts.total == 0), stem
    # the recorded exit code agrees with the counts: a clean run exits 0, a failing one does not
    code = int(meta["exit"])
    if counts.failed or counts.errors:
        assert code != 0, stem
    elif counts.total and code != 0:
        pytest.fail(f"{stem}: exit {code} without failures")


def test_to_json_shape() -> None:
    _, text = _recorded("pytest-fail")
    data = parse_tests(text, ["pytest"]).to_json()  # type: ignore[union-attr]
    assert list(data) == ["runner", "passed", "failed", "skipped", "errors", "total", "failedIds", "passedIds"]
    assert data["total"] == 7 and data["failedIds"][0] == "tests/test_mixed.py::test_uses_broken"
    _, text = _recorded("pytest-skipped")
    data = parse_tests(text).to_json()  # type: ignore[union-attr]
    assert data == {"runner": "pytest", "passed": 0, "failed": 0, "skipped": 2, "errors": 0, "total": 2, "failedIds": []}


def test_test_counts_is_not_collected_and_totals() -> None:
    c = TestCounts("go", passed=1, failed=2, skipped=3, errors=4)
    assert c.total == 10 and TestCounts.__test__ is False


def test_ids_are_capped_and_deduplicated() -> None:
    lines = [f"FAILED t.py::test_{i} - boom" for i in range(MAX_IDS + 50)] + ["FAILED t.py::test_0 - again"]
    c = parse_tests("\n".join(lines) + f"\n{MAX_IDS + 50} failed in 1.00s\n")
    assert c is not None and c.failed == MAX_IDS + 50
    assert len(c.failed_ids) == MAX_IDS and len(set(c.failed_ids)) == MAX_IDS and c.failed_ids[0] == "t.py::test_0"


def test_ansi_and_carriage_returns_are_ignored() -> None:
    text = "\x1b[32m3 passed\x1b[0m, \x1b[31m1 failed\x1b[0m in 0.10s\r\n"
    c = parse_tests(text)
    assert c is not None and (c.passed, c.failed) == (3, 1)
    progress = "running...\rTests:       2 passed, 2 total\n"
    c = parse_tests(progress)
    assert c is not None and c.runner == "jest" and c.passed == 2


def test_argv_hint_orders_formats() -> None:
    # a pytest run whose captured output contains a go-like package line
    text = "ok  \texample.com/m\t0.01s\n==== 2 passed in 0.01s ====\n"
    assert parse_tests(text, ["pytest"]).runner == "pytest"  # type: ignore[union-attr]
    assert parse_tests(text, ["go", "test", "./..."]).runner == "go"  # type: ignore[union-attr]


def test_unittest_expected_failures_are_not_failures() -> None:
    # regression: "expected failures=1" used to be read as "failures=1"
    text = "Ran 3 tests in 0.001s\n\nOK (skipped=1, expected failures=1)\n"
    c = parse_tests(text)
    assert c is not None and (c.passed, c.failed, c.skipped, c.errors) == (1, 0, 2, 0)
    text = "Ran 2 tests in 0.001s\n\nFAILED (unexpected successes=1)\n"
    c = parse_tests(text)
    assert c is not None and (c.passed, c.failed) == (1, 1)


def test_pytest_xfail_xpass_and_warnings() -> None:
    c = parse_tests("==== 1 passed, 1 xfailed, 1 xpassed, 2 warnings in 0.05s ====")
    assert c is not None and (c.passed, c.failed, c.skipped) == (2, 0, 1)
    c = parse_tests("= 1 failed, 2 passed, 1 rerun in 61.20s (0:01:01) =")
    assert c is not None and (c.passed, c.failed) == (2, 1)


def test_generic_tap_with_bail_out() -> None:
    text = "TAP version 13\n1..4\nok 1 - first\nnot ok 2 - second\nok 3 - third # skip no db\nBail out! database down\n"
    c = parse_tests(text)
    assert c is not None and c.runner == "tap"
    assert (c.passed, c.failed, c.skipped, c.errors) == (1, 1, 1, 1)
    assert c.failed_ids == ["second"] and c.passed_ids == ["first"]


def test_go_package_failing_without_a_test_is_an_error() -> None:
    text = "panic: test timed out after 1s\n\ngoroutine 1 [running]:\nFAIL\texample.com/m\t1.005s\nFAIL\n"
    c = parse_tests(text, ["go", "test", "./..."])
    assert c is not None and (c.failed, c.errors, c.failed_ids) == (0, 1, ["example.com/m"])


def test_unrecognised_output() -> None:
    assert parse_tests("") is None
    assert parse_tests("hello world\ncompiled successfully\n") is None
    assert parse_counts("hello world") is None


def test_parse_counts_keeps_its_shape() -> None:
    _, text = _recorded("pytest-fail")
    assert parse_counts(text) == {"runner": "pytest", "passed": 3, "failed": 3, "skipped": 1, "total": 7}
    _, text = _recorded("cargo-multi")
    assert parse_counts(text) == {"runner": "cargo", "passed": 3, "failed": 0, "skipped": 1, "total": 4}


# --- zero-test text rules (inline samples) ----------------------------------------------------

@pytest.mark.parametrize(
    "sample",
    [
        "TAP version 13\nok 1 - a\n1..1\n# tests 10\n# suites 0\n# pass 10\n# fail 0\n",
        "10 passed in 0.52s",
        "===== 10 passed, 2 warnings in 1.03s =====",
        "Ran 3 tests in 0.001s\n\nOK\n",
        "# tests 10\n",
        "running 2 tests\n",
        "10 tests ran\n",
        "",
        "compiled successfully\n",
        "5 skipped in 0.02s",
        "ok 1 - a\n",
    ],
)
def test_real_runs_are_not_flagged(sample: str) -> None:
    assert not detect_zero_tests(sample)


@pytest.mark.parametrize(
    "sample",
    ["# tests 0", "no tests were found", "NO TESTS RAN", "0 tests executed", "0 tests found", "Ran 0 tests in 0.000s\n\nOK",
     "\x1b[1mNo test files found, exiting with code 1\x1b[22m"],
)
def test_spec_rules(sample: str) -> None:
    assert detect_zero_tests(sample)


# --- live runs: the runner today parses like its recording ------------------------------------

LIVE = ["pytest-fail", "unittest-fail-v", "node-spec-fail", "node-tap-fail", "jest-fail-verbose", "vitest-fail",
        "mocha-fail", "go-fail-v", "cargo-multi"]


@pytest.mark.parametrize("stem", LIVE)
def test_live_runner_matches_recording(stem: str) -> None:
    case = CASES[stem]
    if record.case_tool(case) is None:
        pytest.skip(f"{case.argv[0]} is not installed (needed to run {stem} live)")
    code, output = record.run_case(case)
    meta, text = _recorded(stem)
    live = parse_tests(output, case.argv)
    recorded = parse_tests(text, meta["argv"].split())
    assert live is not None and recorded is not None, output[-3000:]
    assert code == int(meta["exit"]), output[-3000:]
    assert (live.runner, live.passed, live.failed, live.skipped, live.errors) == (
        recorded.runner, recorded.passed, recorded.failed, recorded.skipped, recorded.errors), output[-3000:]
    # parallel runners (jest, vitest, cargo, go) may print files/tests in another order
    assert sorted(live.failed_ids) == sorted(recorded.failed_ids)
    assert sorted(live.passed_ids) == sorted(recorded.passed_ids)


def test_pathological_long_line_is_fast() -> None:
    t0 = time.monotonic()
    assert parse_tests("✔ " + " " * 1_000_000 + "x\nℹ tests 1\nℹ pass 1\n") is not None
    assert parse_tests("ok 1 " + "a " * 500_000 + "\n1..1\n") is not None
    assert time.monotonic() - t0 < 2
