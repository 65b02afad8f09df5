"""acceptance.signals: suspicious markers and agent-tampering signals (docs/acceptance.md §4.4,
docs/acceptance.md §8.6).

Pure functions over synthetic added/removed lines; each signal has positive and negative cases.
"""

from __future__ import annotations

import pytest

from tianshu_mcp.acceptance.signals import (
    MAX_TAMPERING_ITEMS,
    TAMPERING_KINDS,
    is_test_path,
    scan_changes,
    scan_signals,
)


def scan(
    added: dict[str, list[str]] | None = None,
    removed: dict[str, list[str]] | None = None,
    deleted: list[str] | None = None,
    changed: list[str] | None = None,
    argvs: list[list[str]] | None = None,
    prefix: str = "",
):
    added = added or {}
    removed = removed or {}
    changed = changed if changed is not None else sorted({*added, *removed})
    return scan_changes(added, removed, deleted or [], changed, argvs or [], project_prefix=prefix)


def kinds(report) -> list[tuple[str, str]]:
    return [(t.kind, t.file) for t in report.tampering]


# --- shape ---------------------------------------------------------------------------------------


def test_report_json_shape() -> None:
    r = scan({"a.py": ["x = 1"]})
    data = r.to_json()
    assert list(data["signals"]) == [
        "todo", "consoleDebug", "commentedBlock", "secretLike", "debugLeftover",
        "skippedOrOnlyTests", "deletedTests", "weakenedTests", "acceptanceTampering",
    ]
    assert all(v == 0 for v in data["signals"].values())
    assert data["tampering"] == []
    assert TAMPERING_KINDS == ("skippedOrOnlyTests", "deletedTests", "weakenedTests", "acceptanceTampering")


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("tests/test_a.py", True),
        ("pkg/test_a.py", True),
        ("pkg/a_test.py", True),
        ("conftest.py", True),
        ("src/a.test.ts", True),
        ("src/__tests__/a.tsx", True),
        ("web/a.spec.mjs", True),
        ("pkg/a_test.go", True),
        ("src/test/java/FooTest.java", True),
        ("tests/data.json", False),
        ("src/app.py", False),
        ("src/contest.py", False),
        ("latest/app.ts", False),
    ],
)
def test_is_test_path(path: str, expected: bool) -> None:
    assert is_test_path(path) is expected


# --- the §4.4 markers keep their exact rules ---------------------------------------------------


def test_marker_counts_keep_original_rules() -> None:
    lines = ["x = 1  # TODO later", "console.log(1)", 'token = "abcdefgh"', "// a", "// b", "// c"]
    r = scan({"a.js": lines})
    s = r.signals
    assert (s.todo, s.console_debug, s.secret_like, s.commented_block) == (1, 1, 1, 1)
    assert scan_signals(lines).model_dump() == {**s.model_dump(), "debug_leftover": 0}  # same four counts


def test_commented_block_run_continues_across_files() -> None:
    r = scan({"a.py": ["# one", "# two"], "b.py": ["# three"]})
    assert r.signals.commented_block == 1


# --- debugLeftover --------------------------------------------------------------------------------


def test_debug_leftover_positive() -> None:
    r = scan(
        {
            "src/app.py": ["    breakpoint()", "import pdb", "pdb.set_trace()", "    print(value)", "from ipdb import set_trace"],
            "web/app.ts": ["  debugger;"],
            "src/lib.rs": ["    dbg!(x);"],
        }
    )
    assert r.signals.debug_leftover == 7
    assert r.tampering == []  # a leftover is not tampering


def test_debug_leftover_negative() -> None:
    r = scan(
        {
            "tests/test_app.py": ["    print(result)"],  # printing in a test is not a leftover
            "scripts/release.py": ["print('done')"],  # nor in a script
            "pkg/__main__.py": ["print(main())"],
            "src/app.py": ["    # breakpoint()", "log = printer.print(x)", "msg = 'print(x)'", "def debugger(): pass"],
            "web/app.ts": ["const debuggerEnabled = true;", "// debugger;"],
            "main.go": ['\tfmt.Println("debug")'],  # Go println is deliberately not counted
            "README.md": ["print(x)", "breakpoint()"],
        }
    )
    assert r.signals.debug_leftover == 0


# --- skippedOrOnlyTests ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "line"),
    [
        ("src/a.test.ts", "it.only('adds', () => {"),
        ("src/a.test.ts", "describe.only('suite', () => {"),
        ("src/a.test.ts", "test.only('x', () => {})"),
        ("src/a.spec.js", "fit('focused', () => {"),
        ("src/a.spec.js", "fdescribe('focused', () => {"),
        ("src/a.spec.js", "it.skip('later', () => {"),
        ("tests/test_a.py", "@pytest.mark.skip(reason='flaky')"),
        ("tests/test_a.py", "@pytest.mark.skipif(True, reason='x')"),
        ("tests/test_a.py", "@pytest.mark.xfail"),
        ("tests/test_a.py", "    pytest.skip('nope')"),
        ("tests/test_a.py", "@unittest.skip('x')"),
        ("tests/test_a.py", "        self.skipTest('x')"),
        ("pkg/a_test.go", '\tt.Skip("later")'),
        ("tests/it.rs", "#[ignore]"),
        ("src/test/java/FooTest.java", "  @Disabled"),
    ],
)
def test_skipped_or_only_positive(path: str, line: str) -> None:
    r = scan({path: [line]})
    assert r.signals.skipped_or_only_tests == 1
    assert kinds(r) == [("skippedOrOnlyTests", path)]
    assert line.strip() in r.tampering[0].detail


@pytest.mark.parametrize(
    ("path", "line"),
    [
        ("src/model.py", "model.fit(X, y)"),
        ("src/model.py", "fit(X, y)"),  # fit( is only a focus marker in JS/TS
        ("src/a.test.ts", "// it.only('commented out', ...)"),
        ("src/a.test.ts", "const summit = fit2(x)"),
        ("src/a.test.ts", "it('normal', () => {"),
        ("tests/test_a.py", "# @pytest.mark.skip"),
        ("tests/test_a.py", "@pytest.mark.parametrize('x', [1])"),
        ("README.md", "use it.only( to focus"),
    ],
)
def test_skipped_or_only_negative(path: str, line: str) -> None:
    assert scan({path: [line]}).signals.skipped_or_only_tests == 0


# --- deletedTests ----------------------------------------------------------------------------------


def test_deleted_test_function_counted() -> None:
    r = scan(removed={"tests/test_calc.py": ["def test_add():", "    assert add(1, 2) == 3"]})
    assert r.signals.deleted_tests == 1
    assert kinds(r) == [("deletedTests", "tests/test_calc.py")]
    assert "test_add" in r.tampering[0].detail
    assert r.signals.weakened_tests == 0  # the body's assertion belongs to the deleted test


def test_deleted_js_and_go_tests() -> None:
    r = scan(
        removed={
            "src/a.test.ts": ["  it('adds numbers', () => {", "    expect(add(1, 2)).toBe(3);", "  });"],
            "pkg/a_test.go": ["func TestAdd(t *testing.T) {"],
        }
    )
    assert r.signals.deleted_tests == 2
    assert r.signals.weakened_tests == 0


def test_moved_test_is_not_deleted() -> None:
    r = scan(
        added={"tests/test_new_home.py": ["def test_add():", "    assert add(1, 2) == 3"]},
        removed={"tests/test_calc.py": ["def test_add():", "    assert add(1, 2) == 3"]},
    )
    assert r.signals.deleted_tests == 0 and r.signals.weakened_tests == 0


def test_renamed_test_in_same_file_is_not_deleted() -> None:
    r = scan(
        added={"tests/test_calc.py": ["def test_add_two_numbers():"]},
        removed={"tests/test_calc.py": ["def test_add():"]},
    )
    assert r.signals.deleted_tests == 0


def test_removed_helper_def_is_not_a_test() -> None:
    r = scan(removed={"src/db.py": ["def test_connection():"], "tests/test_a.py": ["def helper():"]})
    assert r.signals.deleted_tests == 0


def test_deleted_test_file() -> None:
    r = scan(
        removed={"tests/test_calc.py": ["import calc", "def test_add():", "    assert calc.add(1, 1) == 2", "def test_sub():"]},
        deleted=["tests/test_calc.py"],
    )
    assert r.signals.deleted_tests == 2
    assert kinds(r) == [("deletedTests", "tests/test_calc.py")]
    assert "test file deleted (2 test(s) not found elsewhere)" == r.tampering[0].detail
    assert r.signals.weakened_tests == 0


def test_deleted_test_file_whose_tests_moved_is_not_counted() -> None:
    r = scan(
        added={"tests/test_math.py": ["def test_add():"]},
        removed={"tests/test_calc.py": ["def test_add():"]},
        deleted=["tests/test_calc.py"],
    )
    assert r.signals.deleted_tests == 0


def test_deleted_non_test_file_is_not_counted() -> None:
    r = scan(removed={"src/calc.py": ["def add(a, b):"]}, deleted=["src/calc.py", "tests/fixtures/data.json"])
    assert r.signals.deleted_tests == 0


def test_rust_test_markers_by_net_count() -> None:
    r = scan(removed={"src/lib.rs": ["#[test]", "fn adds() {", "#[test]"]}, added={"src/lib.rs": ["#[test]"]})
    assert r.signals.deleted_tests == 1


# --- weakenedTests ---------------------------------------------------------------------------------


def test_removed_assertion_without_replacement() -> None:
    r = scan(removed={"tests/test_calc.py": ["    assert add(2, 2) == 4", "    self.assertEqual(sub(3, 1), 2)"]})
    assert r.signals.weakened_tests == 2
    assert kinds(r) == [("weakenedTests", "tests/test_calc.py")]
    assert r.tampering[0].detail.startswith("2 assertion(s) removed without replacement")


def test_moved_assertion_is_not_weakening() -> None:
    r = scan(
        added={"tests/test_calc.py": ["        assert add(2, 2) == 4"]},
        removed={"tests/test_calc.py": ["    assert add(2, 2) == 4"]},
    )
    assert r.signals.weakened_tests == 0


def test_assertion_moved_to_another_test_file_is_not_weakening() -> None:
    r = scan(
        added={"tests/test_b.py": ["    assert add(2, 2) == 4"]},
        removed={"tests/test_a.py": ["    assert add(2, 2) == 4"]},
    )
    assert r.signals.weakened_tests == 0


def test_changed_assertion_is_a_replacement() -> None:
    r = scan(
        added={"src/a.test.ts": ["  expect(add(2, 2)).toEqual(4);"]},
        removed={"src/a.test.ts": ["  expect(add(2, 2)).toBe(4);"]},
    )
    assert r.signals.weakened_tests == 0


def test_removed_assertion_outside_test_files_is_ignored() -> None:
    r = scan(removed={"src/calc.py": ["    assert x > 0"]})
    assert r.signals.weakened_tests == 0


@pytest.mark.parametrize(
    "line",
    [
        "    assert True",
        "    assert 1 == 1",
        "    assert result == result",
        "        self.assertTrue(True)",
        "  expect(true).toBe(true);",
        "  expect(1).toEqual(1);",
        "  expect(true).toBeTruthy();",
    ],
)
def test_trivial_assertion_added(line: str) -> None:
    path = "src/a.test.ts" if "expect" in line else "tests/test_a.py"
    r = scan({path: [line]})
    assert r.signals.weakened_tests == 1
    assert kinds(r) == [("weakenedTests", path)]
    assert "trivially true assertion" in r.tampering[0].detail


@pytest.mark.parametrize("line", ["    assert result is True", "    assert add(1, 1) == 2", "  expect(value).toBe(true);"])
def test_real_assertion_is_not_trivial(line: str) -> None:
    path = "src/a.test.ts" if "expect" in line else "tests/test_a.py"
    assert scan({path: [line]}).signals.weakened_tests == 0


def test_assertion_replaced_by_trivial_counts_once() -> None:
    r = scan(added={"tests/test_a.py": ["    assert True"]}, removed={"tests/test_a.py": ["    assert add(1, 1) == 2"]})
    assert r.signals.weakened_tests == 1


# --- acceptanceTampering ---------------------------------------------------------------------


def test_acceptance_json_edit_is_tampering() -> None:
    r = scan(added={".tianshu-mcp/acceptance.json": ['{"checks": []}']})
    assert r.signals.acceptance_tampering == 1
    assert kinds(r) == [("acceptanceTampering", ".tianshu-mcp/acceptance.json")]


def test_other_tianshu_files_are_not_tampering() -> None:
    r = scan(added={".tianshu-mcp/dry-run-plan.json": ["{}"]})
    assert r.signals.acceptance_tampering == 0


def test_file_named_in_check_argv() -> None:
    argvs = [["bash", "scripts/check.sh"], ["./tools/lint.sh", "--strict"], ["pytest", "--config=ci/pytest.cfg", "tests/"]]
    r = scan(
        added={"scripts/check.sh": ["exit 0"], "tools/lint.sh": ["true"], "ci/pytest.cfg": ["x"], "tests/test_new.py": ["def test_x(): pass"]},
        argvs=argvs,
    )
    files = {f for k, f in kinds(r) if k == "acceptanceTampering"}
    assert files == {"scripts/check.sh", "tools/lint.sh", "ci/pytest.cfg"}  # a new test under tests/ is fine
    assert r.signals.acceptance_tampering == 3


def test_argv_paths_resolved_against_project_prefix() -> None:
    r = scan(added={"app/scripts/check.sh": ["exit 0"], "scripts/check.sh": ["x"]}, argvs=[["sh", "scripts/check.sh"]], prefix="app")
    assert [f for _, f in kinds(r)] == ["app/scripts/check.sh"]


def test_deleted_check_script_is_tampering() -> None:
    r = scan(removed={"scripts/check.sh": ["pytest -q"]}, deleted=["scripts/check.sh"], argvs=[["bash", "scripts/check.sh"]])
    assert r.signals.acceptance_tampering == 1 and "deleted" in r.tampering[0].detail


def test_makefile_when_a_check_runs_make() -> None:
    assert scan(added={"Makefile": ["test:", "\ttrue"]}, argvs=[["make", "test"]]).signals.acceptance_tampering == 1
    assert scan(added={"Makefile": ["test:", "\ttrue"]}, argvs=[["pytest"]]).signals.acceptance_tampering == 0


@pytest.mark.parametrize(
    ("path", "lines"),
    [
        ("pytest.ini", ["addopts = -k 'not slow'"]),
        ("pyproject.toml", ['addopts = "--deselect tests/test_a.py::test_x"']),
        ("setup.cfg", ["[tool:pytest]"]),
        ("package.json", ['    "test": "echo ok",']),
        ("conftest.py", ["collect_ignore = ['tests/test_slow.py']"]),
        ("vitest.config.ts", ["export default {}"]),
        (".github/workflows/ci.yml", ["run: true"]),
    ],
)
def test_test_config_edits_are_tampering(path: str, lines: list[str]) -> None:
    r = scan(added={path: lines})
    assert r.signals.acceptance_tampering == 1, r.tampering
    assert r.tampering[0].kind == "acceptanceTampering"


@pytest.mark.parametrize(
    ("path", "lines"),
    [
        ("pyproject.toml", ['version = "1.2.0"', 'dependencies = ["httpx"]']),
        ("package.json", ['    "lodash": "^4.17.21",', '  "version": "1.0.1",']),
        ("conftest.py", ["@pytest.fixture", "def client():"]),
        ("src/app.py", ["x = 1"]),
    ],
)
def test_ordinary_config_edits_are_not_tampering(path: str, lines: list[str]) -> None:
    assert scan(added={path: lines}).signals.acceptance_tampering == 0


@pytest.mark.parametrize(("path", "lines"), [
    ("tests/conftest.py", ["@pytest.hookimpl(hookwrapper=True)", "def pytest_runtest_makereport(item, call):",
                           "    rep = (yield).get_result()", "    rep.outcome = 'passed'"]),
    ("conftest.py", ["def pytest_sessionfinish(session, exitstatus):", "    session.exitstatus = 0"]),
    ("sitecustomize.py", ["import builtins"]),
    ("lib/evil.pth", ["import os"]),
])
def test_hooks_that_can_rewrite_test_outcomes_are_tampering(path: str, lines: list[str]) -> None:
    """Breaker finding: a conftest.py hook made failing tests pass and no signal said so."""
    r = scan(added={path: lines})
    assert r.signals.acceptance_tampering == 1 and r.tampering[0].file == path, r.tampering


def test_tampering_list_is_capped_but_counts_are_exact() -> None:
    lines = [f"@pytest.mark.skip(reason='{i}')" for i in range(MAX_TAMPERING_ITEMS + 20)]
    r = scan({"tests/test_a.py": lines})
    assert r.signals.skipped_or_only_tests == MAX_TAMPERING_ITEMS + 20
    assert len(r.tampering) == MAX_TAMPERING_ITEMS


def test_tampering_order_follows_kinds() -> None:
    r = scan(
        added={".tianshu-mcp/acceptance.json": ["{}"], "tests/test_a.py": ["@pytest.mark.skip"]},
        removed={"tests/test_b.py": ["def test_gone():"]},
    )
    assert [t.kind for t in r.tampering] == ["skippedOrOnlyTests", "deletedTests", "acceptanceTampering"]
