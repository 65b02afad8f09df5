"""Verification integrity's parts (docs/integrity.md), each on its own: which files are test
infrastructure, the pristine tree (whole files, package.json keys, Rust test modules, symlinked
test directories), the no-count rule, inventory, targets, test-aware code, claims, and a
10,000-test inventory."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tianshu_mcp.acceptance.config import CheckDef
from tianshu_mcp.acceptance.git import capture_baseline
from tianshu_mcp.acceptance.grading.grade import capture_baseline_state
from tianshu_mcp.acceptance.grading.ids import TestIds, parse_test_ids
from tianshu_mcp.acceptance.grading.baseline_runs import WORKTREE_PREFIX
from tianshu_mcp.acceptance.integrity.awareness import scan_added_lines
from tianshu_mcp.acceptance.integrity.claims import check_claims
from tianshu_mcp.acceptance.integrity.infra import InfraKind, glob_regex, id_argv, infra_rules
from tianshu_mcp.acceptance.integrity.inventory import Evidence, compare
from tianshu_mcp.acceptance.integrity.models import HoldoutCheck
from tianshu_mcp.acceptance.integrity.pristine import agent_changes, pristine_tree
from tianshu_mcp.acceptance.integrity.targets import brief_targets, judge_target, match
from tianshu_mcp.acceptance.runner import NO_COUNT_REASON, names_runner, run_check

from integrity_helpers import git, init_repo


@pytest.mark.parametrize("path,kind", [
    ("tests/test_calc.py", "file"), ("pkg/conftest.py", "file"), ("calc_test.py", "file"), ("pytest.ini", "file"),
    ("pyproject.toml", "file"), ("setup.cfg", "file"), ("tox.ini", "file"), ("sitecustomize.py", "file"),
    ("pytest.toml", "file"), ("cheatplug-0.1.dist-info/entry_points.txt", "file"),
    ("test/a.test.js", "file"), ("src/calc.spec.ts", "file"), ("src/__tests__/x.js", "file"), ("jest.config.js", "file"),
    ("vitest.config.ts", "file"), (".mocharc.yml", "file"), (".npmrc", "file"), ("babel.config.js", "file"),
    ("calc_test.go", "file"), ("pkg/testdata/in.txt", "file"), ("tests/it.rs", "file"), ("Cargo.toml", "file"),
    (".cargo/config.toml", "file"), ("Makefile", "file"), (".tianshu-mcp/acceptance.json", "file"),
    ("tests", "file"),  # a symlink or directory that holds tests
    ("package.json", "json-keys"), ("src/lib.rs", "embedded"),
    ("calc.py", None), ("src/index.js", None), ("calc.go", None), ("README.md", None), ("pkg/util.py", None),
])
def test_every_toolchain_declares_its_test_infrastructure(path: str, kind: str | None) -> None:
    got = infra_rules([], ".").kind(path)
    assert (got.value if got else None) == kind


def test_files_a_check_names_are_test_infrastructure(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "run_tests.sh").write_text("#!/bin/sh\n")
    (tmp_path / "preload.js").write_text("")
    rules = infra_rules([["bash", "scripts/run_tests.sh"], ["node", "--require=./preload.js", "--test"]], tmp_path)
    assert rules.kind("scripts/run_tests.sh") is InfraKind.FILE and rules.kind("preload.js") is InfraKind.FILE
    assert glob_regex("**/tests/**").fullmatch("a/b/tests/c/d.py") and not glob_regex("*.py").fullmatch("a.pyc")


def test_id_listing_flags_change_only_reporting() -> None:
    assert id_argv([sys.executable, "-m", "pytest", "-q"]) == [sys.executable, "-m", "pytest", "-rA", "-q"]
    assert id_argv(["go", "test", "./..."]) == ["go", "test", "-v", "./..."]
    assert id_argv(["npm", "test"]) == ["npm", "test"]
    assert names_runner([sys.executable, "-m", "pytest"]) and names_runner(["cargo", "test"])
    assert not names_runner([sys.executable, "-c", "import pytest", "/tmp/pytest-of-root/x"])


def test_a_known_runner_that_prints_no_count_fails_closed(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text("import os\nos._exit(0)\n")
    (tmp_path / "test_a.py").write_text("def test_a():\n    assert False\n")
    r = run_check(CheckDef.make("tests", [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]),
                  tmp_path, tmp_path / "v.log", 60_000)
    assert r["exitCode"] == 0 and r["passed"] is False and r["reason"] == NO_COUNT_REASON


PKG = {"name": "calc", "version": "1.0.0", "scripts": {"test": "node --test"}, "dependencies": {}}
LIB = ("pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n\n#[cfg(test)]\nmod tests {\n    use super::*;\n"
       "    #[test]\n    fn adds() {\n        assert_eq!(add(2, 3), 5);\n    }\n}\n")


def test_the_pristine_tree_keeps_test_infrastructure_at_the_baseline(tmp_path: Path) -> None:
    project = init_repo(tmp_path / "p", {
        ".gitignore": "node_modules\n", "calc.py": "x = 1\n", "tests/test_calc.py": "def test_x():\n    assert 1\n",
        "package.json": json.dumps(PKG, indent=2), "src/lib.rs": LIB, "suites/unit/test_more.py": "def test_m(): pass\n"})
    os.symlink("suites/unit", project / "unit_tests")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "link")
    tdir = tmp_path / "task"
    baseline = capture_baseline(str(project))
    capture_baseline_state(project, tdir)
    # the agent: source fixes, test edits, a new test file, a script swap, a new dependency, a Rust test edit
    (project / "calc.py").write_text("x = 2\n")
    (project / "tests" / "test_calc.py").write_text("def test_x():\n    assert True  # weakened\n")
    (project / "tests" / "test_new.py").write_text("def test_new(): pass\n")
    (project / "conftest.py").write_text("# new hook\n")
    pkg = dict(PKG, scripts={"test": "echo ok"}, dependencies={"left-pad": "1.3.0"})
    (project / "package.json").write_text(json.dumps(pkg))
    (project / "src" / "lib.rs").write_text(LIB.replace("a - b", "a + b").replace("assert_eq!(add(2, 3), 5)", "assert!(true)"))
    (project / "suites" / "unit" / "test_more.py").write_text("import pytest\npytest.skip('x', allow_module_level=True)\n")
    (project / "notes.md").write_text("new doc\n")
    before = git(project, "status", "--porcelain")
    rules = infra_rules([], project)
    changes = agent_changes(project, baseline, rules)
    with pristine_tree(project, tdir, baseline, rules, changes) as tree:
        assert tree is not None and tree.differs
        root = tree.project
        assert (root / "calc.py").read_text() == "x = 2\n" and (root / "notes.md").read_text() == "new doc\n"
        assert (root / "tests" / "test_calc.py").read_text() == "def test_x():\n    assert 1\n"
        assert not (root / "tests" / "test_new.py").exists() and not (root / "conftest.py").exists()
        merged = json.loads((root / "package.json").read_text())
        assert merged["scripts"] == {"test": "node --test"} and merged["dependencies"] == {"left-pad": "1.3.0"}
        rs = (root / "src" / "lib.rs").read_text()
        assert "a + b" in rs and "assert_eq!(add(2, 3), 5)" in rs and "assert!(true)" not in rs
        assert (root / "suites" / "unit" / "test_more.py").read_text() == "def test_m(): pass\n"
        assert sorted(tree.restored) == ["suites/unit/test_more.py", "tests/test_calc.py"]
        assert sorted(tree.excluded) == ["conftest.py", "tests/test_new.py"]
        assert tree.merged == ["package.json (scripts, jest, mocha, vitest, ava, c8, nyc, tap, babel, node-options, config)",
                               "src/lib.rs (test modules)"]
        wt = tree.top
    assert not wt.exists() and git(project, "status", "--porcelain") == before
    assert not any(p.name.startswith(WORKTREE_PREFIX) for p in Path(os.path.dirname(wt.parent)).iterdir()
                   if p == wt.parent)


def test_a_test_directory_linking_outside_the_repository_is_said(tmp_path: Path) -> None:
    outside = tmp_path / "shared_tests"
    outside.mkdir()
    project = init_repo(tmp_path / "p", {"calc.py": "x = 1\n"})
    os.symlink(outside, project / "tests")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "link")
    changes = agent_changes(project, capture_baseline(str(project)), infra_rules([], project))
    assert any("links outside the repository" in n for n in changes.notes)


def _ev(status: str, passed: list[str], failed: list[str], counts: tuple[int, int, int] | None) -> Evidence:
    c = None if counts is None else {"passed": counts[0], "failed": counts[1], "skipped": counts[2], "errors": 0}
    return Evidence(status, TestIds("pytest", passed, failed, None), c)


def test_inventory_by_ids_then_by_counts() -> None:
    base = _ev("failed", ["t::a", "t::b"], ["t::c"], (2, 1, 0))
    assert compare(base, _ev("passed", ["t::a", "t::b", "t::c"], [], (3, 0, 0))).lost is False
    gone = compare(base, _ev("passed", ["t::a", "t::b"], [], (2, 0, 1)))
    assert gone.level == "ids" and gone.removed == ["t::c"] and gone.lost
    by_count = compare(_ev("failed", [], ["t::c"], (2, 1, 0)), _ev("passed", [], [], (2, 0, 1)))
    assert by_count.level == "counts" and by_count.lost and (by_count.baseline_ran, by_count.now_ran) == (3, 2)
    silent = compare(base, Evidence("passed", None, None))
    assert silent.lost and silent.now_ran == 0
    assert compare(Evidence("timeout", None, None), silent and Evidence("passed", None, None)).level == "none"


def test_a_10000_test_inventory_is_compared_by_id() -> None:
    ids = [f"tests/test_big.py::test_case[{i}]" for i in range(10_000)]
    out = "\n".join(f"PASSED {i}" for i in ids) + "\n10000 passed in 9.10s\n"
    now = "\n".join(f"PASSED {i}" for i in ids if not i.endswith("[777]")) + "\n9999 passed, 1 deselected in 9.0s\n"
    base_ids, now_ids = parse_test_ids(out, ["pytest"]), parse_test_ids(now, ["pytest"])
    assert base_ids is not None and len(base_ids.passed_ids) == 10_000
    res = compare(Evidence("passed", base_ids, {"passed": 10_000, "failed": 0, "errors": 0}),
                  Evidence("passed", now_ids, {"passed": 9_999, "failed": 0, "errors": 0}))
    assert res.level == "ids" and res.removed == ["tests/test_big.py::test_case[777]"]


@pytest.mark.parametrize("target,test_id,hit", [
    ("tests/test_calc.py::test_add", "tests/test_calc.py::test_add", True),
    ("test_add", "tests/test_calc.py::test_add", True),
    ("test_add", "tests/test_calc.py::test_add_zero", False),
    ("tests/test_calc.py", "tests/test_calc.py::TestX::test_y", True),
    ("test_add", "test_add (test_calc.TestCalc.test_add)", True),
    ("TestCalc", "tests/test_calc.py::TestCalc::test_add", True),
    ("adds numbers", "calc > adds numbers", True),
    ("TestAdd", "example.com/calc/TestAdd", True),
    ("tests/test_calc.py::test_add", "tests/test_other.py::test_add", False),
])
def test_target_matching(target: str, test_id: str, hit: bool) -> None:
    assert match(target, test_id) is hit


def test_brief_targets_and_their_verdicts() -> None:
    ids = ["tests/test_calc.py::test_add", "tests/test_calc.py::test_sub", "tests/test_io.py::test_read"]
    assert [t.target for t in brief_targets("fix test_add please", ids)] == ["tests/test_calc.py::test_add"]
    assert [t.target for t in brief_targets("tests/test_calc.py is red", ids)] == ids[:2]
    assert judge_target("test_add", [ids[0]], [])[0] == "passed"
    assert judge_target("test_add", [], [ids[0]])[0] == "failed"
    assert judge_target("test_gone", ids, [])[0] == "missing"


def test_only_added_lines_of_production_code_count_as_test_aware(tmp_path: Path) -> None:
    project = init_repo(tmp_path / "p", {"calc.py": "import sys\n\n\ndef add(a, b):\n    return a - b\n",
                                         "lib.rs": LIB, "main.go": "package main\n"})
    (project / "calc.py").write_text("import sys\n\n\ndef add(a, b):\n    if 'pytest' in sys.modules:\n"
                                     "        return a + b\n    return a - b\n")
    (project / "lib.rs").write_text(LIB.replace("    a - b\n", "    if cfg!(test) { a + b } else { a - b }\n")
                                    .replace("use super::*;", "use super::*;\n    #[cfg(test)]\n    fn helper() {}"))
    (project / "new.go").write_text("package main\n\nimport \"testing\"\n\nfunc ok() bool { return testing.Testing() }\n")
    rules = infra_rules([], project)
    hits = scan_added_lines(project, git(project, "rev-parse", "HEAD").strip(), ["calc.py", "lib.rs", "new.go"],
                            {"new.go"}, rules)
    assert [(h.file, h.line) for h in hits] == [("calc.py", 5), ("lib.rs", 2), ("new.go", 3), ("new.go", 5)]


@pytest.mark.parametrize("rel, line, hit", [
    # production code that defeats the assertions (breaker findings) …
    ("calc.py", "class _Num(int): __eq__ = lambda s,o: True", True),
    ("calc.py", "importlib.import_module('unit'+'test').TestCase.assertEqual = lambda self,*a,**k: None", True),
    ("calc.py", "setattr(case, 'assertTrue', lambda *a: None)", True),
    ("lib.js", "const a=require('node:assert'); a.strictEqual=()=>{};", True),
    ("lib.js", "assert.deepStrictEqual = function () {};", True),
    # … and ordinary production lines that look alike
    ("calc.py", "conn.assert_hostname = False", False),
    ("calc.py", "if self.failures == 0: return True", False),
    ("lib.js", "res.ok = false;", False),
    ("lib.js", "options.equal = compare;", False),
    ("lib.js", "if (a.strictEqual === undefined) {}", False),
])
def test_production_code_defeating_assertions_is_test_aware(tmp_path: Path, rel: str, line: str, hit: bool) -> None:
    project = init_repo(tmp_path / "p", {rel: "// start\n" if rel.endswith(".js") else "# start\n"})
    (project / rel).write_text((project / rel).read_text() + line + "\n")
    hits = scan_added_lines(project, git(project, "rev-parse", "HEAD").strip(), [rel], set(), infra_rules([], project))
    assert bool(hits) is hit, hits


def test_a_two_line_always_equal_is_found_on_its_first_line(tmp_path: Path) -> None:
    project = init_repo(tmp_path / "p", {"calc.py": "x = 1\n"})
    (project / "calc.py").write_text("x = 1\n\n\nclass N(int):\n    def __eq__(self, other):\n        return True\n")
    hits = scan_added_lines(project, git(project, "rev-parse", "HEAD").strip(), ["calc.py"], set(),
                            infra_rules([], project))
    assert [(h.file, h.line) for h in hits] == [("calc.py", 5)]


def test_claims_are_compared_with_the_evidence() -> None:
    msg = ("I fixed the sign bug in calc.py. I added a test test_add_negative. All tests pass. "
           "Also updated docs in README.md. 12 tests pass.")
    claims = {c.claim: c.why for c in check_claims(msg, failing=[], passed_count=10, ran_ids=["t.py::test_add_negative"],
                                                   changed_files=["calc.py"])}
    assert claims["All tests pass"] == "" and claims["added a test test_add_negative"] == ""
    assert "README.md was not changed" in claims["updated docs in README.md"]
    assert claims["12 tests pass"] == "10 tests passed, not 12"
    bad = check_claims("All tests pass.", failing=["tests"], passed_count=1, ran_ids=[], changed_files=[])
    assert bad[0].why.startswith("checks or tests failed")


@pytest.mark.parametrize("bad", [
    {"name": "x", "cmd": [], "area": "a"}, {"name": "x", "cmd": "  ", "area": "a"}, {"name": "x", "cmd": ["a"]},
    {"name": "x", "cmd": ["a"], "area": "a", "files": {"../x": ""}}, {"name": "x", "cmd": ["a"], "area": "a", "files": {"/x": ""}},
    {"name": "x", "cmd": ["a"], "area": "a", "files": {".git/hooks/pre-commit": ""}},
    {"name": "x\ny", "cmd": ["a"], "area": "a"}, {"name": "x", "cmd": ["a"], "area": "a", "extra": 1},
    {"name": "x", "cmd": ["a"], "area": "a", "files": {"big": "x" * (1 << 20 + 1)}},
])
def test_a_bad_holdout_check_is_refused(bad: dict) -> None:
    with pytest.raises(ValueError):
        HoldoutCheck.model_validate(bad)


def test_files_git_is_told_to_ignore_are_still_the_agents_changes(tmp_path: Path) -> None:
    """assume-unchanged and skip-worktree hide an edit from ``git diff``; an ignored conftest in a
    nested ``coverage`` directory is planted code all the same (breaker findings)."""
    from tianshu_mcp.acceptance.integrity.ignored import ignored_snapshot

    project = init_repo(tmp_path / "p", {".gitignore": "coverage/\n", "calc.py": "x = 1\n",
                                         "tests/test_calc.py": "def test_x():\n    assert 0\n"})
    before = ignored_snapshot(project)
    baseline = capture_baseline(str(project))
    (project / "tests" / "test_calc.py").write_text("def test_x():\n    assert 1\n")
    git(project, "update-index", "--assume-unchanged", "tests/test_calc.py")
    (project / "tests" / "coverage").mkdir()
    (project / "tests" / "coverage" / "conftest.py").write_text("import calc\n")
    assert git(project, "diff", "--name-only", "HEAD") == ""
    changes = agent_changes(project, baseline, infra_rules([], project), before)
    assert "tests/test_calc.py" in changes.infra and "tests/coverage/conftest.py" in changes.infra
    assert changes.ignored == ["tests/coverage/conftest.py"]
