"""acceptance.testcount: is_test_check, detect_zero_tests, parse_counts (20-acceptance §3.2, extended).

Python outputs are produced here by really running pytest / unittest (and node --test when node is
installed) on tiny temp projects; jest/vitest/go/cargo/mocha use recorded outputs.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tianshu_mcp.acceptance.testcount import detect_zero_tests, is_test_check, parse_counts


def _run(argv: list[str], cwd: Path) -> tuple[int, str]:
    p = subprocess.run(argv, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout + p.stderr


def _tests(tmp: Path, n_pass: int, n_fail: int = 0, n_skip: int = 0) -> Path:
    lines = ["import unittest", "", "class T(unittest.TestCase):"]
    for i in range(n_pass):
        lines += [f"    def test_ok_{i}(self):", "        self.assertTrue(True)"]
    for i in range(n_fail):
        lines += [f"    def test_bad_{i}(self):", "        self.assertEqual(1, 2)"]
    for i in range(n_skip):
        lines += [f"    @unittest.skip('later')", f"    def test_skip_{i}(self):", "        pass"]
    if not (n_pass or n_fail or n_skip):
        lines += ["    pass"]
    (tmp / "test_sample.py").write_text("\n".join(lines) + "\n")
    return tmp


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


# --- real Python outputs ------------------------------------------------------------------------


def test_real_pytest_zero_and_some(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], empty)
    assert code == 5 and detect_zero_tests(out)

    some = tmp_path / "some"
    some.mkdir()
    _tests(some, 3, 0, 1)
    code, out = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], some)
    assert code == 0 and not detect_zero_tests(out), out
    assert parse_counts(out) == {"runner": "pytest", "passed": 3, "failed": 0, "skipped": 1, "total": 4}

    code, out = _run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-k", "nothing_matches"], some)
    assert code == 5 and detect_zero_tests(out), out  # all deselected

    code, out = _run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-k", "ok_1"], some)
    assert code == 0 and not detect_zero_tests(out), out  # "1 passed, 3 deselected"


def test_real_pytest_verbose_collected_zero(tmp_path: Path) -> None:
    code, out = _run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider"], tmp_path)
    assert "collected 0 items" in out and detect_zero_tests(out)


def test_real_pytest_failures_counted(tmp_path: Path) -> None:
    _tests(tmp_path, 2, 1)
    code, out = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], tmp_path)
    assert code == 1 and not detect_zero_tests(out)
    assert parse_counts(out) == {"runner": "pytest", "passed": 2, "failed": 1, "skipped": 0, "total": 3}


def test_real_unittest_zero_and_some(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out = _run([sys.executable, "-m", "unittest"], empty)
    # Python 3.11 exits 0 with "Ran 0 tests ... OK"; 3.12+ exits 5 with "NO TESTS RAN"
    assert "Ran 0 tests" in out and detect_zero_tests(out)
    assert parse_counts(out) == {"runner": "unittest", "passed": 0, "failed": 0, "skipped": 0, "total": 0}

    some = tmp_path / "some"
    some.mkdir()
    _tests(some, 3, 1, 1)
    code, out = _run([sys.executable, "-m", "unittest", "-v"], some)
    assert code == 1 and "Ran 5 tests" in out and not detect_zero_tests(out)
    assert parse_counts(out) == {"runner": "unittest", "passed": 3, "failed": 1, "skipped": 1, "total": 5}


@pytest.mark.skipif(shutil.which("node") is None, reason="node not installed")
def test_real_node_test_zero_and_some(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out = _run(["node", "--test"], empty)
    assert code == 0 and detect_zero_tests(out), out
    some = tmp_path / "some"
    some.mkdir()
    (some / "a.test.js").write_text(
        "const test = require('node:test');\nconst assert = require('node:assert');\n"
        + "".join(f"test('t{i}', () => assert.ok(true));\n" for i in range(10))
    )
    code, out = _run(["node", "--test", "--test-reporter=tap"], some)
    assert code == 0 and "# tests 10" in out and not detect_zero_tests(out), out
    counts = parse_counts(out)
    assert counts is not None and counts["passed"] == 10 and counts["failed"] == 0


# --- recorded outputs ---------------------------------------------------------------------------

JEST_NONE = """No tests found, exiting with code 1
Run with `--passWithNoTests` to exit with code 0
In /tmp/proj
  4 files checked.
  testMatch: **/__tests__/**/*.[jt]s?(x), **/?(*.)+(spec|test).[tj]s?(x) - 0 matches
  testPathIgnorePatterns: /node_modules/ - 4 matches
"""
JEST_NONE_PASS = "No tests found, exiting with code 0\n"
JEST_REAL = """PASS  ./sum.test.js
  ✓ adds 1 + 2 to equal 3 (2 ms)
  ✓ adds 2 + 2 (1 ms)

Test Suites: 1 passed, 1 total
Tests:       1 skipped, 2 passed, 3 total
Snapshots:   0 total
Time:        0.412 s
Ran all test suites.
"""
VITEST_NONE = """
 RUN  v1.6.0 /tmp/proj

include: **/*.{test,spec}.?(c|m)[jt]s?(x)
exclude:  **/node_modules/**, **/dist/**
watch exclude:  **/node_modules/**, **/dist/**

No test files found, exiting with code 0
"""
VITEST_REAL = """
 RUN  v1.6.0 /tmp/proj

 ✓ src/sum.test.ts  (3 tests) 2ms

 Test Files  1 passed (1)
      Tests  1 failed | 2 passed (3)
   Start at  10:00:00
   Duration  301ms (transform 20ms, setup 0ms, collect 15ms, tests 2ms)
"""
GO_NONE = """?   \texample.com/m\t[no test files]
?   \texample.com/m/internal/util\t[no test files]
"""
GO_RUN_NONE = """testing: warning: no tests to run
PASS
ok  \texample.com/m\t0.002s [no tests to run]
"""
GO_REAL = """?   \texample.com/m/cmd\t[no test files]
ok  \texample.com/m\t0.003s
ok  \texample.com/m/internal/util\t(cached)
"""
GO_VERBOSE = """=== RUN   TestAdd
--- PASS: TestAdd (0.00s)
=== RUN   TestSub
--- FAIL: TestSub (0.00s)
    sub_test.go:9: got 1 want 2
FAIL
FAIL\texample.com/m\t0.002s
FAIL
"""
CARGO_NONE = """   Compiling demo v0.1.0 (/tmp/demo)
    Finished `test` profile [unoptimized + debuginfo] target(s) in 0.48s
     Running unittests src/lib.rs (target/debug/deps/demo-3c1f0a7b2e9d4f11)

running 0 tests

test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

   Doc-tests demo

running 0 tests

test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

"""
CARGO_REAL = """     Running unittests src/lib.rs (target/debug/deps/demo-3c1f0a7b2e9d4f11)

running 2 tests
test tests::adds ... ok
test tests::subs ... ok

test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

   Doc-tests demo

running 0 tests

test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

"""
CARGO_ONE = "running 1 test\ntest it_works ... ok\n\ntest result: ok. 1 passed; 0 failed; 1 ignored; 0 measured\n"
MOCHA_NONE = "\n\n  0 passing (1ms)\n\n"
MOCHA_REAL = "\n  Array\n    ✓ works\n\n  3 passing (8ms)\n  1 pending\n"
NODE_SPEC_NONE = "ℹ tests 0\nℹ suites 0\nℹ pass 0\nℹ fail 0\nℹ cancelled 0\nℹ skipped 0\nℹ todo 0\nℹ duration_ms 4.1\n"
NODE_SPEC_REAL = "✔ t1 (0.5ms)\nℹ tests 10\nℹ suites 0\nℹ pass 9\nℹ fail 1\nℹ cancelled 0\nℹ skipped 0\nℹ todo 0\n"
TAP_REAL = "TAP version 13\nok 1 - a\n1..1\n# tests 10\n# suites 0\n# pass 10\n# fail 0\n"


@pytest.mark.parametrize(
    "sample",
    [JEST_NONE, JEST_NONE_PASS, VITEST_NONE, GO_NONE, GO_RUN_NONE, CARGO_NONE, MOCHA_NONE, NODE_SPEC_NONE],
    ids=["jest", "jest-pass", "vitest", "go-no-files", "go-no-run", "cargo", "mocha", "node-spec"],
)
def test_recorded_zero_outputs(sample: str) -> None:
    assert detect_zero_tests(sample)


@pytest.mark.parametrize(
    "sample",
    [
        JEST_REAL,
        VITEST_REAL,
        GO_REAL,
        GO_VERBOSE,
        CARGO_REAL,
        CARGO_ONE,
        MOCHA_REAL,
        NODE_SPEC_REAL,
        TAP_REAL,
        "10 passed in 0.52s",
        "===== 10 passed, 2 warnings in 1.03s =====",
        "Ran 3 tests in 0.001s\n\nOK\n",
        "# tests 10\n",
        "running 2 tests\n",
        "10 tests ran\n",
        "",
        "compiled successfully\n",
        "5 skipped in 0.02s",
    ],
)
def test_real_runs_are_not_flagged(sample: str) -> None:
    assert not detect_zero_tests(sample)


@pytest.mark.parametrize(
    "sample",
    ["# tests 0", "no tests were found", "NO TESTS RAN", "0 tests executed", "0 tests found", "Ran 0 tests in 0.000s\n\nOK"],
)
def test_spec_rules(sample: str) -> None:
    assert detect_zero_tests(sample)


def test_parse_counts_recorded() -> None:
    assert parse_counts(JEST_REAL) == {"runner": "jest", "passed": 2, "failed": 0, "skipped": 1, "total": 3}
    assert parse_counts(VITEST_REAL) == {"runner": "vitest", "passed": 2, "failed": 1, "skipped": 0, "total": 3}
    assert parse_counts(CARGO_REAL) == {"runner": "cargo", "passed": 2, "failed": 0, "skipped": 0, "total": 2}
    assert parse_counts(CARGO_ONE) == {"runner": "cargo", "passed": 1, "failed": 0, "skipped": 1, "total": 2}
    assert parse_counts(MOCHA_REAL) == {"runner": "mocha", "passed": 3, "failed": 0, "skipped": 1, "total": 4}
    assert parse_counts(NODE_SPEC_REAL) == {"runner": "node-spec", "passed": 9, "failed": 1, "skipped": 0, "total": 10}
    assert parse_counts(GO_VERBOSE) == {"runner": "go", "passed": 1, "failed": 1, "skipped": 0, "total": 2}
    assert parse_counts("hello world") is None
    assert parse_counts("") is None
