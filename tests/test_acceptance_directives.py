"""Repair directives from real tool output (docs/acceptance.md §6, extended by
docs/acceptance.md §8.7).

The recorded outputs in ``tests/data/toolchains/<toolchain id>/`` come from the real tools
(``tests/data/toolchains/record_directive_outputs.py`` regenerates them); the live tests build
the same tiny broken projects in a temp dir and parse what the installed tools print today.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from tianshu_mcp.acceptance.directives import (
    DEFAULT_REGISTRY,
    MAX_ITEMS,
    NO_ITEMS_REASON,
    OutputParser,
    extract_directives,
    strip_ansi,
)
from tianshu_mcp.acceptance.engine import VerifyRequest, verify_round
from tianshu_mcp.acceptance.git import capture_baseline
from tianshu_mcp.acceptance.repair import (
    FEEDBACK_MAX_DIRECTIVES,
    extract_repair_directives,
    feedback_text,
    render_repair_plan,
)

OUTPUTS = Path(__file__).resolve().parent / "data" / "toolchains"


def _load_record() -> Any:
    spec = importlib.util.spec_from_file_location("tianshu_tests_record_outputs", OUTPUTS / "record_directive_outputs.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


record = _load_record()
CASES = {c.id: c for c in record.CASES}

_TSC = [("src/a.ts", 1, "TS2322: Type 'string' is not assignable"), ("src/a.ts", 3, "TS2339: Property 'foo'"),
        ("src/a.ts", 5, "TS2304: Cannot find name 'missing'"), ("src/util/b.ts", 1, "TS7006")]
_ESLINT = [("src/app.js", 1, "no-unused-vars: 'fs' is defined but never used"), ("src/app.js", 2, "prefer-const"),
           ("src/app.js", 4, "no-undef: 'missing' is not defined"), ("src/broken.js", 1, "Parsing error: Unexpected token ="),
           ("src/app.js", 4, "eqeqeq: Expected '==='")]  # the warning last
_RUFF = [("pkg/mod.py", 1, "F401: `os` imported but unused"), ("pkg/mod.py", 7, "F821: Undefined name `undefined_name`"),
         ("pkg/mod.py", 8, "F841: Local variable `y`")]
_MYPY = [("app/m.py", 8, "assignment: Incompatible types in assignment"), ("app/m.py", 9, "arg-type: Argument 2 to \"add\""),
         ("app/m.py", 13, "union-attr: Item \"None\""), ("app/m.py", 13, "return-value"),
         ("app/m.py", 16, "name-defined: Name \"undefined_fn\" is not defined")]
_PYTEST = [("tests/test_calc.py", 5, "tests/test_calc.py::test_add failed: AssertionError: add is wrong"),
           ("calc.py", 6, "tests/test_calc.py::test_div failed: ZeroDivisionError: division by zero"),
           ("tests/test_calc.py", 14, "tests/test_calc.py::TestThing::test_method failed: assert [1, 2] == [1, 3]")]
_VITEST = [("src/sum.test.js", 5, "test 'math > adds numbers' failed: AssertionError: expected +0 to be 4"),
           ("src/sum.test.js", 13, "test 'top level throws' failed: Error: boom")]
_CARGO_BUILD = [("src/main.rs", 8, "E0425: cannot find value `foo`"), ("src/main.rs", 7, "E0308: mismatched types"),
                ("src/main.rs", 2, "unused_variables: unused variable: `unused`")]  # the warning last

# (file, line, a piece of the issue) per recorded case, in the expected order
EXPECT: dict[str, list[tuple[str, int, str]]] = {
    "tsc-plain": _TSC,
    "tsc-pretty": _TSC,
    "eslint-stylish": _ESLINT,
    "eslint-color": _ESLINT,
    "eslint-unix": _ESLINT,
    "eslint-compact": _ESLINT,
    "eslint-npm-run-lint": _ESLINT,
    "ruff-concise": _RUFF,
    "ruff-full": _RUFF,
    "ruff-color": _RUFF,
    "mypy-default": _MYPY,
    "mypy-columns": _MYPY,
    "pytest-long": _PYTEST,
    "pytest-short": _PYTEST,
    "pytest-line": _PYTEST,
    "pytest-color": _PYTEST,
    "pytest-collect-error": [("tests/test_broken.py", 1, "collecting tests/test_broken.py failed: ModuleNotFoundError: "
                                                         "No module named 'nonexistent_module_xyz'")],
    "jest-fail": [("sum.test.js", 5, "test 'math › adds numbers' failed: expect(received).toBe(expected)"),
                  ("sum.test.js", 13, "test 'top level throws' failed: boom"),
                  ("broken.test.js", 1, "test suite broken.test.js failed to run: Cannot find module './nope'")],
    "vitest-fail": _VITEST,
    "vitest-color": _VITEST,
    "go-build": [("pkg/calc/calc.go", 4, "undefined: c"), ("main.go", 3, "imported and not used: \"os\""),
                 ("main.go", 6, "undefined: fmt"), ("main.go", 6, "undefined: foo")],
    "go-vet": [("main.go", 6, "fmt.Printf format %d has arg \"s\" of wrong type string")],
    "go-test": [("broken/broken_test.go", 6, "undefined: nope"), ("calc/calc_test.go", 7, "TestAdd failed: Add(2, 2) = 0, want 4"),
                ("idx/idx.go", 4, "TestAt panicked: runtime error: index out of range [3] with length 1")],
    "cargo-build": _CARGO_BUILD,
    "cargo-color": _CARGO_BUILD,
    "cargo-clippy": [("src/lib.rs", 2, "clippy::needless_return: unneeded `return` statement")],
    "cargo-test": [("src/lib.rs", 16, "test tests::it_panics failed: boom 1"),
                   ("src/lib.rs", 11, "test tests::it_works failed: assertion `left == right` failed; left: 0; right: 4")],
    "cargo-run-panic": [("src/main.rs", 3, "thread 'main' panicked: index out of bounds: the len is 1 but the index is 3")],
    "git-diff-check": [("notes.txt", 1, "trailing whitespace."), ("notes.txt", 2, "leftover conflict marker")],
}
SOURCE = {"git": "git-diff-check"}


def report_for(text: str, project: str, name: str, cmd: str, **extra: Any) -> dict[str, Any]:
    """A failed round's report with one failing check (as the engine stores it)."""
    check = {"name": name, "cmd": cmd, "passed": False, "durationMs": 1, "exitCode": 1,
             "outputTail": text[-4000:], "timeout": False, "aborted": False}
    r: dict[str, Any] = {"round": 0, "taskId": "t", "projectPath": project, "passed": False, "verdict": "failed",
                         "checks": [check], "analysis": {}, "files": {}, "message": "Failed checks: x."}
    r.update(extra)
    return r


def recorded_report(case_id: str, name: str | None = None, cmd: str | None = None, project: str | None = None) -> dict[str, Any]:
    header, text = record.read_recorded(record.recorded(case_id))
    case = CASES[case_id]
    return report_for(text, project or header["project"], name if name is not None else case.tool,
                      cmd if cmd is not None else header["cmd"])


def triples(items: list[dict[str, Any]]) -> list[tuple[Any, Any]]:
    return [(i.get("file"), i.get("line")) for i in items]


def assert_expected(items: list[dict[str, Any]], case_id: str) -> None:
    """Exactly the expected (file, line) pairs, each issue holding its piece. Order-insensitive:
    jest suites and cargo tests run in parallel, so their blocks come in any order (the ranking
    itself is tested below)."""
    want = EXPECT[case_id]
    assert sorted(triples(items)) == sorted((f, n) for f, n, _ in want), items
    left = list(items)
    for f, n, piece in want:
        hit = next((i for i in left if (i.get("file"), i.get("line")) == (f, n) and piece in i["issue"]), None)
        assert hit is not None, (f, n, piece, items)
        left.remove(hit)
        assert hit["source"] == SOURCE.get(CASES[case_id].tool, CASES[case_id].tool)
        assert hit["action"]


# --- recorded real output ------------------------------------------------------------------------


def test_every_recorded_file_has_a_case_and_a_version_header() -> None:
    files = {record.case_id_of(p) for p in record.recordings()}
    assert files == set(CASES) == set(EXPECT)
    for cid in files:
        header, text = record.read_recorded(record.recorded(cid))
        assert re.match(rf"^{CASES[cid].tool} \d", header["tool"]), header
        assert header["cmd"] and header["project"].startswith("/") and header["exit"] != "0"
        assert text.startswith(f"# tool: {header['tool']}\n")


@pytest.mark.parametrize("case_id", sorted(EXPECT))
def test_recorded_output_parses(case_id: str) -> None:
    rd = extract_repair_directives(recorded_report(case_id))
    assert_expected(rd["items"], case_id)
    assert rd["sources"] == [SOURCE.get(CASES[case_id].tool, CASES[case_id].tool)]
    assert "fallbackReason" not in rd


@pytest.mark.parametrize("case_id", sorted(EXPECT))
def test_content_shape_alone_selects_the_parser(case_id: str) -> None:
    # a check whose name and command say nothing about the tool (e.g. `make check`): the output's
    # shape picks the parser, and no other parser claims lines of it
    rd = extract_directives(recorded_report(case_id, name="check", cmd="make check"))
    assert_expected(rd["items"], case_id)


def test_tool_specific_actions() -> None:
    ruff = extract_directives(recorded_report("ruff-concise"))["items"]
    assert ruff[0]["action"] == "fix ruff F401 at this line: remove the unused import"
    assert ruff[0]["issue"] == "F401: `os` imported but unused"  # the fixable marker [*] is dropped
    tsc = extract_directives(recorded_report("tsc-plain"))["items"]
    assert tsc[2]["action"] == ("fix this type error (per the TS2304 diagnostic): define or import the missing name "
                                "(check the spelling)")
    eslint = extract_directives(recorded_report("eslint-stylish"))["items"]
    assert eslint[0]["action"] == "fix eslint no-unused-vars at this line: remove the unused variable or import, or use it"
    assert eslint[3]["action"] == "fix the syntax error at this line"
    mypy = extract_directives(recorded_report("mypy-default"))["items"]
    assert mypy[2]["action"].startswith("fix mypy [union-attr] at this line: handle None")
    pyt = extract_directives(recorded_report("pytest-long"))["items"]
    assert pyt[0]["action"].startswith("make tests/test_calc.py::test_add pass: fix the code under test")
    assert pyt[1]["action"].startswith("fix the error raised here, which makes tests/test_calc.py::test_div fail")
    cargo = extract_directives(recorded_report("cargo-build"))["items"]
    assert [i["issue"].split(":")[0] for i in cargo] == ["E0425", "E0308", "unused_variables"]  # the warning last
    assert cargo[2]["action"].startswith("fix unused_variables at this line: remove the variable, or prefix it with `_`")
    clippy = extract_directives(recorded_report("cargo-clippy"))["items"]
    assert clippy[0]["action"] == "fix clippy::needless_return at this line: apply clippy's suggestion (remove `return`)"
    go = extract_directives(recorded_report("go-vet"))["items"]
    assert go[0]["action"] == "fix the go vet finding at this line: make the format verbs and the arguments match"
    # an unknown code falls back to the tool's generic action
    rd = extract_directives(report_for("x.py:3:1: PLR0913 Too many arguments in function definition (6 > 5)\n",
                                       "/p", "lint", "ruff check ."))
    assert rd["items"][0]["action"] == "fix ruff PLR0913 at this line (see `ruff rule PLR0913`)"


def test_pytest_prefers_the_full_message_to_the_cut_summary_line() -> None:
    # pytest cuts short-summary lines to the terminal width; the section's E line is whole
    _h, text = record.read_recorded(record.recorded("pytest-long"))
    text = text.replace("FAILED tests/test_calc.py::test_add - AssertionError: add is wrong",
                        "FAILED tests/test_calc.py::test_add - AssertionError: add i...")
    items = extract_directives(report_for(text, "/tmp/tianshu-outputs/pytest-long", "pytest", "pytest -q"))["items"]
    assert items[0]["issue"] == "tests/test_calc.py::test_add failed: AssertionError: add is wrong"


def test_header_lines_are_ignored() -> None:
    header = "# tool: go 1.19.8 linux/amd64\n# cmd: go vet ./...\n# project: /p\n# exit: 2\n"
    for cid in ("go-vet", "ruff-concise", "tsc-plain"):
        assert extract_directives(report_for(header, "/p", CASES[cid].tool, "x"))["items"] == []


def test_runner_tail_cut_mid_output() -> None:
    # the engine keeps the last 4000 chars: a section cut in the middle still parses, the rest survives
    _h, text = record.read_recorded(record.recorded("pytest-long"))
    cut = text[text.index("a = 1, b = 0"):]
    items = extract_directives(report_for(cut, "/tmp/tianshu-outputs/pytest-long", "pytest", "pytest -q"))["items"]
    # test_add's section is gone (file only), test_div's cut section keeps its location
    assert triples(items) == [("tests/test_calc.py", None), ("calc.py", 6), ("tests/test_calc.py", 14)]


# --- colours, paths, dedupe, ordering --------------------------------------------------------------


@pytest.mark.parametrize("coloured,plain", [("tsc-pretty", "tsc-plain"), ("eslint-color", "eslint-stylish"),
                                            ("ruff-color", "ruff-full"), ("pytest-color", "pytest-long"),
                                            ("vitest-color", "vitest-fail"), ("cargo-color", "cargo-build")])
def test_ansi_coloured_output_gives_the_same_directives(coloured: str, plain: str) -> None:
    _h, text = record.read_recorded(record.recorded(coloured))
    assert "\x1b[" in text  # really coloured
    a = extract_directives(recorded_report(coloured))["items"]
    b = extract_directives(recorded_report(plain))["items"]
    assert [(i.get("file"), i.get("line"), i["issue"]) for i in a] == [(i.get("file"), i.get("line"), i["issue"]) for i in b]


def test_ansi_hyperlinks_and_crlf_are_stripped() -> None:
    link = "\x1b]8;;file:///p/pkg/mod.py\x1b\\pkg/mod.py\x1b]8;;\x1b\\"
    text = f"\x1b[1m{link}\x1b[0m:1:8: \x1b[31mF401\x1b[0m [*] `os` imported but unused\r\nFound 1 error.\r\n"
    assert strip_ansi(text) == "pkg/mod.py:1:8: F401 [*] `os` imported but unused\nFound 1 error.\n"
    items = extract_directives(report_for(text, "/p", "lint", "ruff check ."))["items"]
    assert triples(items) == [("pkg/mod.py", 1)]


def test_absolute_paths_inside_and_outside_the_project() -> None:
    # eslint's unix format prints absolute paths: inside the project they become relative
    inside = extract_directives(recorded_report("eslint-unix"))["items"]
    assert inside[0]["file"] == "src/app.js"
    # the same output judged against another project keeps them as printed
    outside = extract_directives(recorded_report("eslint-unix", project="/somewhere/else"))["items"]
    assert outside[0]["file"] == "/tmp/tianshu-outputs/eslint-unix/src/app.js"
    # pytest --tb=line prints absolute locations
    line = extract_directives(recorded_report("pytest-line"))["items"]
    assert line[1]["file"] == "calc.py"
    # a path equal to the root, ./ prefixes, backslashes, Windows drive paths
    text = ("/p(1,1): error TS5083: Cannot read file.\n"
            "./src/x.ts(2,3): error TS2304: Cannot find name 'a'.\n"
            "src\\y.ts(4,1): error TS2304: Cannot find name 'b'.\n")
    items = extract_directives(report_for(text, "/p", "typecheck", "tsc --noEmit"))["items"]
    assert triples(items) == [("/p", 1), ("src/x.ts", 2), ("src/y.ts", 4)]
    win = "C:\\work\\proj\\src\\a.ts(3,5): error TS2322: Type 'x' is not assignable.\n"
    items = extract_directives(report_for(win, "C:\\work\\proj", "typecheck", "tsc"))["items"]
    assert triples(items) == [("src/a.ts", 3)]


def test_dedupe_across_checks() -> None:
    # `npm run lint` (stylish) and `eslint --format unix` report the same five problems
    _h, stylish = record.read_recorded(record.recorded("eslint-npm-run-lint"))
    _h, unix = record.read_recorded(record.recorded("eslint-unix"))
    unix = unix.replace("/tmp/tianshu-outputs/eslint-unix/", "/tmp/tianshu-outputs/eslint-npm-run-lint/")
    report = report_for(stylish, "/tmp/tianshu-outputs/eslint-npm-run-lint", "lint", "npm run lint")
    report["checks"].append({**report["checks"][0], "name": "eslint-unix", "cmd": "eslint --format unix .", "outputTail": unix})
    report["checks"].append({**report["checks"][0], "name": "again", "cmd": "npm run lint"})  # the very same output
    items = extract_directives(report)["items"]
    assert triples(items) == [(f, n) for f, n, _ in _ESLINT]


def test_errors_before_warnings_then_signals_and_the_cap() -> None:
    many = "".join(f"pkg/m{i}.py:{i + 1}:1: F401 [*] `os` imported but unused\n" for i in range(60))
    _h, eslint = record.read_recorded(record.recorded("eslint-stylish"))
    report = report_for(eslint, "/tmp/tianshu-outputs/eslint-stylish", "lint", "eslint .",
                        analysis={"bigFileChanges": ["gen.ts (+900 -0)"], "changedFiles": ["package-lock.json"],
                                  "untrackedFiles": [], "signals": {"todo": 2}})
    small = extract_directives(report)
    sev = [i["source"] for i in small["items"]]
    assert sev == ["eslint"] * 5 + ["diffstat"] * 3
    assert small["items"][3]["issue"].startswith("Parsing error") and small["items"][4]["issue"].startswith("eqeqeq")
    assert small["sources"] == ["eslint", "diffstat"]
    # an optional check's errors come after the mandatory ones
    report["checks"].append({**report["checks"][0], "name": "opt", "cmd": "ruff check .", "optional": True,
                             "outputTail": "pkg/o.py:1:8: F401 [*] `os` imported but unused\n"})
    mixed = extract_directives(report)["items"]
    # (the optional check's error ranks with the warnings, after them by check order)
    assert [i["source"] for i in mixed] == ["eslint"] * 5 + ["ruff"] + ["diffstat"] * 3
    # the cap keeps the first MAX_ITEMS and counts the rest
    report["checks"].append({**report["checks"][0], "name": "ruff", "cmd": "ruff check .", "outputTail": many})
    capped = extract_directives(report)
    assert len(capped["items"]) == MAX_ITEMS and capped["omitted"] == 60 + 5 + 1 + 3 - MAX_ITEMS
    assert "diffstat" not in capped["sources"]


# --- failure isolation and fallback -------------------------------------------------------------


def _boom(text: str, ctx: Any) -> list[Any]:
    raise RuntimeError("parser exploded")


BROKEN = OutputParser("broken", _boom, re.compile(r"."), re.compile(r"."))


def test_a_broken_parser_does_not_sink_the_others() -> None:
    report = recorded_report("ruff-concise")
    rd = extract_directives(report, registry=(BROKEN, *DEFAULT_REGISTRY))
    assert triples(rd["items"]) == [(f, n) for f, n, _ in _RUFF] and "fallbackReason" not in rd
    assert rd["sources"] == ["ruff"]
    # alone, its error becomes the fallback reason
    rd = extract_directives(report, registry=(BROKEN,))
    assert rd["items"] == [] and rd["sources"] == []
    assert rd["fallbackReason"] == (
        "structured extraction failed (broken on check 'ruff': RuntimeError: parser exploded)"
    )
    # a malformed analysis breaks only the diffstat source (the public API never raises)
    report["analysis"] = {"bigFileChanges": 5}
    rd = extract_repair_directives(report)
    assert rd["sources"] == ["ruff"] and len(rd["items"]) == 3


def test_fallback_reason_when_nothing_parses() -> None:
    rd = extract_repair_directives(report_for("Segmentation fault (core dumped)\n", "/p", "build", "make"))
    assert rd == {"items": [], "sources": [], "fallbackReason": NO_ITEMS_REASON}
    assert "cannot be turned into directly actionable" in rd["fallbackReason"]
    # a check without output (e.g. a timeout) and a passing check with parseable output
    report = report_for("", "/p", "build", "make")
    report["checks"].append({"name": "lint", "cmd": "ruff check .", "passed": True,
                             "outputTail": "a.py:1:8: F401 [*] `os` imported but unused\n"})
    rd = extract_repair_directives(report)
    assert rd["items"] == [] and "no failing command check printed any output" in rd["fallbackReason"]


# --- feedback text and repair plan ------------------------------------------------------------------


def _two_check_report() -> dict[str, Any]:
    _h, ruff = record.read_recorded(record.recorded("ruff-concise"))
    _h, pyt = record.read_recorded(record.recorded("pytest-long"))
    many = "".join(f"pkg/m{i}.py:{i + 1}:1: F401 [*] `os` imported but unused\n" for i in range(9))
    report = report_for(ruff + many, "/tmp/tianshu-outputs/pytest-long", "lint", "ruff check .",
                        files={"md": "/h/report-0.md", "json": "/h/report-0.json"})
    report["checks"].append({**report["checks"][0], "name": "pytest", "cmd": "pytest -q", "outputTail": pyt})
    report["repairDirectives"] = extract_repair_directives(report)
    return report


def test_feedback_text_leads_with_directives() -> None:
    report = _two_check_report()
    fb = feedback_text(report, "/h/rework-t-r0.md")
    lines = fb.splitlines()
    assert lines[0].startswith("Fix these first")
    directive_lines = lines[1:1 + FEEDBACK_MAX_DIRECTIVES]
    assert all(re.match(r"^- \S+:\d+ — .+ → .+$", ln) for ln in directive_lines), directive_lines
    assert directive_lines[0] == ("- pkg/mod.py:1 — F401: `os` imported but unused → fix ruff F401 at this line: "
                                  "remove the unused import")
    assert lines[1 + FEEDBACK_MAX_DIRECTIVES] == "- … and 5 more (see the repair plan and the output tails below)"
    # the checks take turns: the noisy linter does not crowd the failing tests out of the first lines
    assert directive_lines[1].startswith("- tests/test_calc.py:5 — tests/test_calc.py::test_add failed")
    assert sum("::" in ln for ln in directive_lines) == 3
    # then, as before: the plan path, the failing checks and their output tails
    rest = "\n".join(lines[2 + FEEDBACK_MAX_DIRECTIVES:])
    assert "Repair plan: `/h/rework-t-r0.md`" in rest and "### pytest — `pytest -q` — exit 1" in rest
    assert "test_method" in rest and "Full acceptance report: /h/report-0.md" in rest
    assert fb.index("Fix these first") < fb.index("[Previous round failed acceptance")


def test_feedback_without_directives_and_for_older_reports() -> None:
    report = report_for("Segmentation fault\n", "/p", "build", "make")
    report["repairDirectives"] = extract_repair_directives(report)
    fb = feedback_text(report, "/h/plan.md")
    assert fb.startswith("[Previous round failed acceptance")
    assert f"No structured repair directives: {NO_ITEMS_REASON}." in fb and "Segmentation fault" in fb
    # a failed report stored without directives gets them computed
    older = recorded_report("go-vet")
    assert feedback_text(older, "/h/plan.md").splitlines()[1].startswith("- main.go:6 — fmt.Printf format %d")


def test_repair_plan_section_2_5() -> None:
    report = _two_check_report()
    plan = render_repair_plan(report, "t", "Fix the linter and the tests", "/h/report-0.md")
    assert "## 2.5 Structured repair directives (directly actionable)" in plan
    assert "(sources: ruff, pytest)" in plan
    assert ("- `calc.py:6` — tests/test_calc.py::test_div failed: ZeroDivisionError: division by zero → "
            "**fix the error raised here, which makes tests/test_calc.py::test_div fail") in plan
    assert plan.index("## 2. Failing checks") < plan.index("## 2.5 Structured") < plan.index("## 3. Passed checks")
    report = report_for("Segmentation fault\n", "/p", "build", "make")
    report["repairDirectives"] = extract_repair_directives(report)
    plan = render_repair_plan(report, "t", "x", "/h/report-0.md")
    assert "## 2.5 Structured repair directives (unavailable, fall back to the full report)" in plan
    assert f"Reason: {NO_ITEMS_REASON}" in plan and "Read the full failing output in section 2" in plan


# --- live: the tools installed now --------------------------------------------------------------

LIVE = {
    "tsc": "tsc-plain",
    "eslint": "eslint-stylish",
    "ruff": "ruff-full",
    "mypy": "mypy-columns",
    "pytest": "pytest-short",
    "jest": "jest-fail",
    "vitest": "vitest-fail",
    "go": "go-test",
    "cargo": "cargo-test",
}


@pytest.mark.parametrize("tool", sorted(LIVE))
def test_live_toolchain(tool: str, tmp_path: Path) -> None:
    case = CASES[LIVE[tool]]
    exe = record.which(case.argv[0])
    if exe is None:
        pytest.skip(f"{case.argv[0]} is not installed (looked on {record.tool_path()})")
    project = tmp_path / "proj"
    record.build(case, project)
    code, output, argv = record.run(case, project, tmp_path / "formatters", tmp_path / "cache", timeout=120)
    assert code != 0, output
    report = report_for(output, str(project), case.tool, " ".join(argv))
    rd = extract_repair_directives(report)
    assert_expected(rd["items"], case.id)


def test_verify_round_stores_directives_and_feeds_them_back(tmp_path: Path) -> None:
    # the engine end to end: a ruff check and the derived pytest check fail; report.json carries the
    # directives of both and the feedback leads with them
    ruff = record.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed")
    repo = tmp_path / "repo"
    record.build(CASES["pytest-long"], repo)
    from fixture_project import git  # noqa: PLC0415 - tests/ is on sys.path (conftest)

    git(repo, "init", "-q")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false", "commit", "-qm", "init")
    baseline = capture_baseline(repo)
    (repo / "calc.py").write_text("import os\n\n\ndef add(a, b):\n    return a - b\n\n\ndef div(a, b):\n    return a / b\n")
    req = VerifyRequest(
        task_id="tsk_20260101000000_dirdir", project_path=str(repo), task_dir=tmp_path / "home" / "tasks" / "t",
        round=0, baseline=baseline, home=tmp_path / "home", verify_command_timeout_ms=120_000,
        extra_checks=[{"name": "lint", "cmd": [ruff, "check", "--isolated", "--no-cache", "."]},
                      {"name": "pytest", "cmd": [str(Path(sys.executable).parent / "pytest"), "-q", "-p", "no:cacheprovider"]}],
        checks_mode="replace",
    )
    out = verify_round(req)
    assert out.passed is False
    stored = json.loads(out.json_path.read_text())["repairDirectives"]
    assert stored["sources"] == ["ruff", "pytest"]
    assert ("calc.py", 1, "F401: `os` imported but unused") in [(i.get("file"), i.get("line"), i["issue"]) for i in stored["items"]]
    assert ("calc.py", 9) in triples(stored["items"])  # test_div's ZeroDivisionError, now on line 9
    fb = feedback_text(out.report, tmp_path / "plan.md")
    assert fb.splitlines()[1] == "- calc.py:1 — F401: `os` imported but unused → fix ruff F401 at this line: remove the unused import"


def test_directives_leave_out_failures_baseline_grading_tolerates() -> None:
    # pins a finding: the agent was sent to fix a legacy test that already failed and was not counted
    from tianshu_mcp.acceptance.repair import _without_tolerated

    report = {"baselineGrading": {"enabled": True, "tests": [
        {"check": "pytest", "id": "tests/test_legacy.py::test_legacy_thing", "classification": "still_failing", "targeted": False},
        {"check": "pytest", "id": "tests/test_calc.py::test_add_negative", "classification": "still_failing", "targeted": True},
    ]}}
    rd = {"items": [
        {"file": "tests/test_legacy.py", "line": 2, "issue": "test_legacy_thing failed: assert 1 == 2", "action": "a", "source": "pytest"},
        {"file": "tests/test_calc.py", "line": 9, "issue": "test_add_negative failed: assert 1 == -5", "action": "b", "source": "pytest"},
    ], "sources": ["pytest"]}
    out = _without_tolerated(rd, report)
    assert [i["file"] for i in out["items"]] == ["tests/test_calc.py"] and out["sources"] == ["pytest"]
    only_legacy = {"items": rd["items"][:1], "sources": ["pytest"]}
    out = _without_tolerated(only_legacy, report)
    assert out["items"] == [] and "already failing before the task" in out["fallbackReason"]
