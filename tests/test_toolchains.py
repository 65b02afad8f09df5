"""The toolchain registry and its engines (docs/toolchains.md): the protocol every module follows, real runs
of machine-readable outputs through the check runner, and JUnit XML as the first source of counts,
failed ids and directives."""

from __future__ import annotations

import ast
import importlib
import os
import pkgutil
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tianshu_mcp.acceptance import toolchains as pkg
from tianshu_mcp.acceptance.config import CheckDef, derive_default_checks
from tianshu_mcp.acceptance.directives import DEFAULT_REGISTRY, extract_directives
from tianshu_mcp.acceptance.runner import ALL_SKIPPED_REASON, ZERO_TEST_REASON, run_check
from tianshu_mcp.acceptance.testcount import is_test_check, parse_tests
from tianshu_mcp.acceptance.toolchains.base import Toolchain
from tianshu_mcp.acceptance.toolchains.registry import count_formats, toolchains

NODE_BIN = Path(__file__).resolve().parent / "toolchains" / "node_modules" / ".bin"
GO = shutil.which("go")


def _run(tmp_path: Path, project: Path, check: CheckDef) -> dict:
    return run_check(check, project, tmp_path / "verify.log", 120_000)


# --- the registry ----------------------------------------------------------------------------------


def test_every_module_of_the_package_is_a_registered_toolchain_with_unique_ids() -> None:
    names = {m.name for m in pkgutil.iter_modules(pkg.__path__)} - {"base", "registry", "formats"}
    names = {n for n in names if not n.startswith("_")}
    registered = toolchains()
    assert len(registered) == len(names), (sorted(names), [t.id for t in registered])
    for name in names:
        module = importlib.import_module(f"{pkg.__name__}.{name}")
        assert isinstance(module.TOOLCHAIN, Toolchain), name
        assert module.TOOLCHAIN.id == name.replace("_", "-"), name
        assert module.__doc__ and module.__doc__.strip(), f"{name} has no module docstring"
    ids = [t.id for t in registered]
    assert len(ids) == len(set(ids)) and [t.order for t in registered] == sorted(t.order for t in registered)
    formats = [f.id for t in registered for f in t.formats]
    assert len(formats) == len(set(formats)) == len(count_formats())
    for tc in registered:  # hints name formats that exist
        assert set(tc.hint_formats) <= set(count_formats()), tc.id


def _code_without_docstrings(path: Path) -> str:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            body[0] = ast.Pass()
    return ast.unparse(tree)


def test_the_engines_name_no_toolchain() -> None:
    """testcount, directives and the config layer iterate the registry: no toolchain's own regex or
    parser lives there any more."""
    root = Path(pkg.__file__).resolve().parent.parent
    for engine in ("testcount.py", "directives.py", "config.py", "config_model.py", "runner.py"):
        text = _code_without_docstrings(root / engine)
        for marker in ("_parse_pytest", "_parse_jest", "_GO_PKG", "_CARGO_", "parse_tsc", "parse_eslint",
                       "detect_pytest(root)", "go.mod", "Cargo.toml", "tsconfig.json", "package.json"):
            assert marker not in text, (engine, marker)
    assert [p.id for p in DEFAULT_REGISTRY][0] == "junit" and DEFAULT_REGISTRY[-1].id == "diffstat"


def test_a_broken_toolchain_module_is_left_out_and_logged(tmp_path: Path) -> None:
    """A module that fails to import never sinks the registry (checked in a fresh interpreter on a
    copy of the package with one broken file added)."""
    code = f"""
import shutil, sys, pathlib, logging
src = pathlib.Path({str(Path(pkg.__file__).resolve().parent)!r})
logging.basicConfig(level=logging.ERROR)
import tianshu_mcp.acceptance.toolchains as p
dst = pathlib.Path({str(tmp_path)!r}) / "tc"
shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
(dst / "zzbroken.py").write_text("raise RuntimeError('boom')\\n")
p.__path__[:] = [str(dst)]
from tianshu_mcp.acceptance.toolchains import registry
ids = [t.id for t in registry.toolchains()]
assert "pytest" in ids and "zzbroken" not in ids, ids
print("ok", len(ids))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.startswith("ok"), proc.stderr[-2000:]
    assert "toolchain module zzbroken could not be imported: RuntimeError: boom" in proc.stderr


def test_derived_checks_keep_their_order_and_names_for_a_mixed_project(tmp_path: Path) -> None:
    (tmp_path / "package.json").write_text('{"scripts": {"test": "jest", "lint": "eslint ."}}')
    (tmp_path / "tsconfig.json").write_text("{}")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "go.mod").write_text("module x\n")
    (tmp_path / "Cargo.toml").write_text("[package]\nname='x'\n")
    checks, notes = derive_default_checks(tmp_path)
    assert [c.name for c in checks][:5] == ["lint", "test", "pytest", "go-test", "cargo-test"]
    assert "typecheck-tsc" not in [c.name for c in checks]  # npm scripts win over tsconfig
    assert any("typecheck/build" in n for n in notes)


# --- machine-readable outputs through the runner (real runs) ----------------------------------------


def _go_module(root: Path, tests: str | None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "go.mod").write_text("module example.com/m\n\ngo 1.19\n")
    (root / "m.go").write_text("package m\n\nfunc Add(a, b int) int { return a + b }\n")
    if tests is not None:
        (root / "m_test.go").write_text(tests)
    return root


@pytest.mark.skipif(GO is None, reason="go is not installed (setup.sh installs golang-go)")
def test_go_test_json_without_any_test_fails_closed_and_its_tests_are_counted(tmp_path: Path) -> None:
    """The case of docs/toolchains.md: ``go test -json ./...`` on a module without a test passed, and passing
    tests were not counted. Real runs of go."""
    env_cache = tmp_path / "gocache"
    os.environ.setdefault("GOCACHE", str(env_cache))
    none = _go_module(tmp_path / "none", None)
    res = _run(tmp_path, none, CheckDef.make("go-test", ["go", "test", "-json", "./..."]))
    assert res["exitCode"] == 0 and res["passed"] is False and res["reason"] == ZERO_TEST_REASON, res
    some = _go_module(tmp_path / "some", "package m\n\nimport \"testing\"\n\n"
                      "func TestA(t *testing.T) { if Add(1, 2) != 3 { t.Fatal(1) } }\n"
                      "func TestB(t *testing.T) { t.Run(\"sub\", func(t *testing.T) {}) }\n"
                      "func TestC(t *testing.T) { t.Skip(\"later\") }\n")
    res = _run(tmp_path, some, CheckDef.make("go-test", ["go", "test", "-json", "./..."]))
    assert res["passed"] is True, res
    assert res["tests"]["runner"] == "go-json" and res["tests"]["passed"] == 2 and res["tests"]["skipped"] == 1, res
    skipped = _go_module(tmp_path / "skipped", "package m\n\nimport \"testing\"\n\n"
                         "func TestC(t *testing.T) { t.Skip(\"later\") }\n")
    res = _run(tmp_path, skipped, CheckDef.make("go-test", ["go", "test", "-json", "./..."]))
    assert res["passed"] is False and res["reason"] == ALL_SKIPPED_REASON, res


@pytest.mark.skipif(not (NODE_BIN / "jest").exists(), reason="tests/toolchains has no node_modules (setup.sh runs npm ci)")
def test_jest_json_zero_and_counts_through_the_runner(tmp_path: Path) -> None:
    project = tmp_path / "js"
    project.mkdir()
    (project / "package.json").write_text('{"name": "x", "private": true}')
    jest = [str(NODE_BIN / "jest"), "--json", "--passWithNoTests", "--rootDir", str(project)]
    res = _run(tmp_path, project, CheckDef.make("unit", jest))
    assert res["passed"] is False and res["reason"] == ZERO_TEST_REASON, res
    (project / "a.test.js").write_text("test('adds', () => expect(1 + 2).toBe(3));\n"
                                       "test.skip('later', () => {});\n")
    res = _run(tmp_path, project, CheckDef.make("unit", jest))
    assert res["passed"] is True and res["tests"]["runner"] == "jest-json", res
    assert (res["tests"]["passed"], res["tests"]["skipped"]) == (1, 1) and res["tests"]["passedIds"] == ["adds"]


# --- directives from the machine-readable forms -------------------------------------------------------

DATA = Path(__file__).resolve().parent / "data" / "toolchains"


def _failed_report(project: Path, *checks: dict) -> dict:
    return {"projectPath": str(project), "checks": list(checks)}


@pytest.mark.skipif(GO is None, reason="go is not installed (setup.sh installs golang-go)")
def test_go_test_json_failures_become_directives_although_the_tail_cannot_hold_them(tmp_path: Path) -> None:
    """Break-test: ``go test -json`` gave no directive. The failing test comes first and 80 passing
    tests after it, so its log line is far outside ``outputTail``; the runner reads the counted text
    whole and stores the items. Real go."""
    os.environ.setdefault("GOCACHE", str(tmp_path / "gocache"))
    passing = "".join(f"func TestP{i}(t *testing.T) {{ t.Log(\"fine {i}\") }}\n" for i in range(80))
    project = _go_module(tmp_path / "m", "package m\n\nimport \"testing\"\n\n"
                         "func TestAdd(t *testing.T) {\n\tif got := Add(1, 2); got != 4 {\n"
                         "\t\tt.Errorf(\"Add(1, 2) = %d, want 4\", got)\n\t}\n}\n" + passing)
    res = _run(tmp_path, project, CheckDef.make("go-test", ["go", "test", "-json", "./..."]))
    assert res["passed"] is False and res["tests"]["runner"] == "go-json" and res["tests"]["failed"] == 1, res
    assert "m_test.go:7" not in res["outputTail"]
    items = extract_directives(_failed_report(project, res))["items"]
    assert items[0]["file"] == "m_test.go" and items[0]["line"] == 7 and items[0]["source"] == "go", items
    assert items[0]["issue"] == "TestAdd failed: Add(1, 2) = 3, want 4"
    assert not any("fine" in i["issue"] for i in items), items  # passing tests' logs are not blamed


@pytest.mark.skipif(not (NODE_BIN / "vitest").exists(), reason="tests/toolchains has no node_modules (setup.sh runs npm ci)")
def test_vitest_json_failures_become_directives(tmp_path: Path) -> None:
    """Break-test: ``vitest run --reporter=json`` gave no directive (it prints no failure block and
    the report is one line longer than the engine's 2,000-character line cut). Real vitest."""
    project = tmp_path / "js"
    project.mkdir()
    (project / "package.json").write_text('{"name": "x", "private": true, "type": "module"}')
    (project / "calc.js").write_text("export const add = (a, b) => a - b;\n")
    (project / "calc.test.js").write_text(
        "import { add } from './calc.js';\n"
        "describe('calc', () => {\n"
        "  test('adds', () => {\n"
        "    expect(add(1, 2)).toBe(3);\n"
        "  });\n"
        + "".join(f"  test('passes {i}', () => expect(1).toBe(1));\n" for i in range(40))
        + "});\n")
    argv = [str(NODE_BIN / "vitest"), "run", "--globals", "--reporter=json", "--root", str(project)]
    res = _run(tmp_path, project, CheckDef.make("unit", argv))
    assert res["passed"] is False and res["tests"]["runner"] == "vitest-json" and res["tests"]["failed"] == 1, res
    items = extract_directives(_failed_report(project, res))["items"]
    assert [(i["file"], i["line"], i["source"]) for i in items] == [("calc.test.js", 4, "vitest")], items
    assert items[0]["issue"].startswith("test 'calc > adds' failed: AssertionError: expected -1 to be 3"), items


def test_go_verbose_logs_belong_to_the_test_that_printed_them() -> None:
    """``go test -v`` (and ``-json``, which is its text in events) prints a test's log after
    ``=== RUN``; a skipped test's log was blamed on the failed test before it, and the failed
    test's own log was lost. The generated ``_testmain.go`` is not the project's code."""
    def items(name: str, cmd: str) -> list[tuple]:
        text = (DATA / "go" / name).read_text().split("\n", 1)[1]
        check = {"name": "test", "cmd": cmd, "passed": False, "outputTail": text}
        return [(i.get("file"), i.get("line"), i["issue"]) for i in
                extract_directives(_failed_report(Path("/tmp/proj"), check))["items"]]

    expected = [("a/a_test.go", 6, "TestBad failed: boom"), ("a/a_test.go", 10, "TestSub/two failed: nope")]
    assert items("go-fail-v.txt", "go test -v ./...") == expected
    assert items("go-fail.txt", "go test ./...") == expected
    assert items("fail.txt", "go test -json ./...") == expected
    assert items("timeout.txt", "go test -json ./...") == [
        ("slow/slow_test.go", 9, "TestSlow panicked: test timed out after 3s")]


# --- JUnit XML as the universal source ----------------------------------------------------------------


def _py_project(root: Path, body: str) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "test_a.py").write_text(body)
    return root


PYTEST_JUNIT = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                "--junitxml=reports/junit.xml", "-o", "junit_family=xunit1"]


def test_junit_xml_counts_take_precedence_and_directives_come_from_it(tmp_path: Path) -> None:
    project = _py_project(tmp_path / "p", "def test_ok():\n    assert True\n\n"
                                          "def test_bad():\n    assert 1 == 2, 'one is not two'\n")
    check = CheckDef.make("unit", PYTEST_JUNIT, junit_xml="reports/*.xml")
    res = _run(tmp_path, project, check)
    assert res["passed"] is False and res["tests"]["runner"] == "junit", res
    assert (res["tests"]["passed"], res["tests"]["failed"]) == (1, 1)
    assert res["tests"]["failedIds"] == ["tests/test_a.py::test_bad"]
    assert res["junit"]["files"] == ["reports/junit.xml"] and "[junit-xml] JUnit XML (reports/*.xml): read 1 file" in res["outputTail"]
    report = {"projectPath": str(project), "checks": [res]}
    items = extract_directives(report)["items"]
    first = items[0]
    # the failing assert (line 5, from the failure's traceback), not the test's ``def`` (the
    # ``line`` attribute, 0-based 3 → 4)
    assert first["source"] == "junit" and first["file"] == "tests/test_a.py" and first["line"] == 5, items
    assert "test_bad" in first["issue"] and "one is not two" in first["issue"]


def test_pytest_default_xunit2_report_still_locates_the_failure(tmp_path: Path) -> None:
    """Break-test: pytest's default ``junit_family`` (xunit2) writes no ``file``/``line``; the
    directive had no location. It now comes from the failure's traceback, deepest own frame
    first (the helper's assert, line 5; the test calls it on line 9). Real pytest."""
    project = _py_project(tmp_path / "p", "from calc import add\n\n\ndef helper(x):\n"
                                          "    assert add(x, 2) == x + 2\n\n\ndef test_add():\n    helper(1)\n")
    (project / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "--rootdir", str(project),
            "--junitxml", "reports/junit.xml", "tests"]
    res = _run(tmp_path, project, CheckDef.make("unit", argv, junit_xml="reports/*.xml"))
    assert res["passed"] is False and res["tests"]["failed"] == 1, res
    failure = res["junit"]["failures"][0]
    assert "file" not in failure and "line" not in failure, failure  # xunit2
    items = extract_directives({"projectPath": str(project), "checks": [res]})["items"]
    assert (items[0]["file"], items[0]["line"], items[0]["source"]) == ("tests/test_a.py", 5, "junit"), items
    assert items[0]["issue"] == "test 'tests.test_a.test_add' failed: assert -1 == (1 + 2)", items


def test_a_stale_report_is_ignored_and_said_so(tmp_path: Path) -> None:
    """A report left by an earlier run (older than the check's start) never counts: here it says
    two tests passed, but this run writes nothing and runs no test: the text rules decide."""
    project = _py_project(tmp_path / "p", "")
    (project / "reports").mkdir()
    old = project / "reports" / "old.xml"
    old.write_text('<testsuite tests="2"><testcase classname="a" name="x"/><testcase classname="a" name="y"/></testsuite>')
    past = time.time() - 3600
    os.utime(old, (past, past))
    check = CheckDef.make("unit", [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"],
                          junit_xml="reports/*.xml")
    res = _run(tmp_path, project, check)
    assert res["junit"]["stale"] == ["reports/old.xml"] and res["junit"]["files"] == []
    assert "ignored 1 stale file older than the check's start: reports/old.xml" in res["outputTail"]
    assert res["passed"] is False, res  # pytest collected nothing: exit 5


def test_junit_zero_and_all_skipped_fail_closed(tmp_path: Path) -> None:
    project = _py_project(tmp_path / "p", "import pytest\n\n@pytest.mark.skip(reason='later')\ndef test_a():\n    pass\n")
    res = _run(tmp_path, project, CheckDef.make("unit", PYTEST_JUNIT, junit_xml="reports/junit.xml"))
    assert res["exitCode"] == 0 and res["passed"] is False and res["reason"] == ALL_SKIPPED_REASON, res
    assert res["tests"]["runner"] == "junit"
    # a command that exits 0 and writes a report of zero tests (no text rule would catch it)
    script = project / "write.py"
    script.write_text("import pathlib; pathlib.Path('reports').mkdir(exist_ok=True); "
                      "pathlib.Path('reports/z.xml').write_text('<testsuites tests=\"0\"></testsuites>')\n")
    res = _run(tmp_path, project, CheckDef.make("build-and-verify", [sys.executable, str(script)],
                                                junit_xml="reports/z.xml"))
    assert res["passed"] is False and res["reason"] == ZERO_TEST_REASON, res


def test_a_check_declaring_junit_xml_is_a_test_check_and_bad_reports_are_named(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    script = project / "w.py"
    script.write_text("import pathlib; pathlib.Path('r').mkdir(exist_ok=True); "
                      "pathlib.Path('r/a.xml').write_text('<!DOCTYPE x [<!ENTITY a \"b\">]><testsuite/>'); "
                      "pathlib.Path('r/b.xml').write_text('<testsuite><testcase name=\"t\"/></testsuite>')\n")
    assert not is_test_check("verify", ["python3", "w.py"])
    res = _run(tmp_path, project, CheckDef.make("verify", ["python3", "w.py"], junit_xml="r/*.xml"))
    assert res["passed"] is True and res["tests"]["passed"] == 1, res
    assert res["junit"]["files"] == ["r/b.xml"] and res["junit"]["errors"][0].startswith("r/a.xml: refused"), res


def test_parse_tests_prefers_the_format_the_command_names() -> None:
    """nextest repeats a failing test's captured libtest summary: with ``cargo nextest`` in the argv
    the nextest form is read first."""
    out = ("    FAIL [   0.004s] demo tests::bad\n"
           "--- STDOUT:              demo tests::bad ---\n\nrunning 1 test\ntest tests::bad ... FAILED\n\n"
           "test result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 2 filtered out; finished in 0.00s\n\n"
           "     PASS [   0.003s] demo tests::good\n"
           "------------\n     Summary [   0.010s] 2 tests run: 1 passed, 1 failed, 0 skipped\n")
    counts = parse_tests(out, ["cargo", "nextest", "run"])
    assert counts is not None and counts.runner == "nextest" and (counts.passed, counts.failed) == (1, 1)


def test_a_trx_file_is_read_by_the_same_collector(tmp_path: Path) -> None:
    """The derived .NET check writes TRX (``TestResults/*.trx``): the collector tells it from JUnit
    by its root element and counts it, with the failed results' details for the directives."""
    from tianshu_mcp.acceptance.toolchains.formats.junit_files import collect_junit

    data = Path(__file__).resolve().parent / "data" / "toolchains" / "dotnet"
    trx = sorted(p for p in data.glob("*.trx"))
    assert trx
    (tmp_path / "TestResults").mkdir()
    for p in trx:
        (tmp_path / "TestResults" / p.name).write_bytes(p.read_bytes())
    res = collect_junit(tmp_path, "TestResults/*.trx", time.time() - 5)
    assert res.counts is not None and res.counts.runner == "junit" and res.counts.total > 0, res
    assert len(res.files) == len(trx) and not res.errors, res
    if res.counts.failed:
        assert res.failures and all(f.id for f in res.failures)


# --- the break-test's inputs (a fresh helper tried them through verify_task) ---------------------


@pytest.mark.parametrize("how", ["nothing", "stale", "truncated", "outside"])
def test_a_declared_report_that_is_missing_or_unusable_fails_closed(tmp_path: Path, how: str) -> None:
    """Exit 0 and ``junitXml`` declared, but no report of this run could be read: the check fails
    (it passed green before, with only a note)."""
    from tianshu_mcp.acceptance.runner import NO_REPORT_REASON

    project = tmp_path / "p"
    (project / "reports").mkdir(parents=True)
    if how == "stale":
        old = project / "reports" / "TEST-old.xml"
        old.write_text('<testsuite><testcase classname="a" name="x"/></testsuite>')
        os.utime(old, (time.time() - 3600, time.time() - 3600))
    script = {"nothing": "pass",
              "stale": "pass",
              "truncated": "open('reports/TEST-t.xml','w').write('<testsuite tests=\"3\"><testcase name=\"a\"')",
              "outside": "import os; os.symlink('/etc/passwd', 'reports/TEST-passwd.xml')"}[how]
    res = _run(tmp_path, project, CheckDef.make("unit", ["python3", "-c", script], junit_xml="reports/*.xml"))
    assert res["exitCode"] == 0 and res["passed"] is False and res["reason"] == NO_REPORT_REASON, res


def test_a_future_dated_report_is_refused_and_the_zero_rule_stands(tmp_path: Path) -> None:
    project = tmp_path / "p"
    (project / "reports").mkdir(parents=True)
    planted = project / "reports" / "TEST-planted.xml"
    planted.write_text('<testsuite><testcase classname="a" name="x"/><testcase classname="a" name="y"/></testsuite>')
    os.utime(planted, (time.time() + 86400, time.time() + 86400))
    res = _run(tmp_path, project, CheckDef.make("unit", ["python3", "-c", "print('# tests 0')"], junit_xml="reports/*.xml"))
    assert res["passed"] is False and "tests" not in res, res
    assert res["junit"]["errors"] == ["reports/TEST-planted.xml: refused, its modification time is in the future"]


@pytest.mark.parametrize("glob", [".", "./.", "reports/**/**/x.xml", "a**/x.xml", "~/x.xml", "reports/**", "r/..", "build/"])
def test_bad_junit_globs_are_refused_by_the_config_layer_and_the_collector(tmp_path: Path, glob: str) -> None:
    """``.`` crashed the runner (IndexError from pathlib), a stacked ``**`` walked a deep tree for
    minutes, ``a**`` and ``~`` passed the config layer and were only noted by the collector."""
    from pydantic import ValidationError

    from tianshu_mcp.acceptance.config_model import AcceptanceCheck
    from tianshu_mcp.acceptance.toolchains.formats.junit_files import collect_junit

    with pytest.raises(ValidationError, match="junitXml"):
        AcceptanceCheck.model_validate({"name": "t", "cmd": ["true"], "junitXml": glob})
    with pytest.raises(ValueError, match="junitXml"):
        collect_junit(tmp_path, glob, time.time())
    res = _run(tmp_path, tmp_path, CheckDef.make("unit", ["true"], junit_xml=glob))
    assert res["passed"] is False and "internal runner error" not in str(res.get("reason")), res
