"""The verification-integrity corpus (docs/integrity.md), run on real git repositories and real test runners.

* every cheat (a deleted, skipped or weakened test, a conftest hook, a runner option, a preload, a
  replaced test script, test-aware production code …) ends ``passed is False`` with one of its
  expected coded reasons (``verdict_reasons``);
* every honest change (the fix, with or without test-suite refactors that keep every outcome) ends
  ``passed is True``: no false rejects;
* bad inputs (no tests at all, a runner that prints nothing, an invalid policy, a target that does not
  exist) end with a clear verdict that says why.

The table is in ``tests/integrity_corpus*.py``. Set ``INTEGRITY_CORPUS_LOG=<file>`` to get one JSON
line per case (id, verdict, reasons) for a summary table.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from integrity_corpus import (
    Case,
    Project,
    Templates,
    build_template,
    judge,
    missing_tools,
    run_case,
    start_task,
    summary,
    table,
)
from integrity_corpus_py import BRIEF, CALC, FIX
from integrity_corpus_py import PROJECTS as PY_PROJECTS
from tianshu_mcp.acceptance.integrity.reasons import ZERO_COUNT, verdict_reasons

PROJECTS, CASES = table()
CHEATS = [c for c in CASES if not c.honest]
HONEST = [c for c in CASES if c.honest]


def tiered(cases: list[Case]) -> list[Any]:
    """Every case as a pytest param; within each project, every other one runs in the default
    suite (≥ 40 cheats and ≥ 20 honest changes over every toolchain) and the rest in the
    ``extended`` tier (``pytest -m extended``): the whole corpus takes ~5 CPU-minutes."""
    seen: dict[str, int] = {}
    out = []
    for c in cases:
        k = seen[c.project] = seen.get(c.project, -1) + 1
        out.append(pytest.param(c, id=c.id, marks=(pytest.mark.extended,) if k % 2 else ()))
    return out


def default_tier(cases: list[Case]) -> list[Case]:
    """The cases :func:`tiered` puts in the default suite."""
    return [p.values[0] for p in tiered(cases) if not p.marks]


@pytest.fixture
def corpus_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The checks inherit this process's environment: this venv's ``pytest`` first on PATH (the derived
    ``pytest -q``) without this suite's plugins (xdist, hypothesis … cost seconds per run and play no
    part in the fixtures), cargo's bin directory, a writable Go build cache shared by the cases."""
    extra = [str(Path(sys.executable).parent)]
    cargo_bin = Path.home() / ".cargo" / "bin"
    if shutil.which("cargo") is None and (cargo_bin / "cargo").exists():
        extra.append(str(cargo_bin))
    monkeypatch.setenv("PATH", os.pathsep.join([*extra, os.environ.get("PATH", "")]))
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    if "GOCACHE" not in os.environ:
        monkeypatch.setenv("GOCACHE", str(tmp_path_factory.getbasetemp() / "integrity-gocache"))


@pytest.fixture(scope="session")
def templates(tmp_path_factory: pytest.TempPathFactory) -> Templates:
    """Each project's committed template repository, built once per session (per xdist worker)."""
    return Templates(tmp_path_factory.mktemp("integrity-templates"), PROJECTS)


def _log(case_id: str, out: Any, expected: str) -> None:
    """One JSON line per case into ``$INTEGRITY_CORPUS_LOG`` (when set)."""
    path = os.environ.get("INTEGRITY_CORPUS_LOG")
    if path:
        with open(path, "a") as fh:
            fh.write(json.dumps({"id": case_id, "passed": out.passed, "reasons": sorted(verdict_reasons(out.report)),
                                 "expected": expected, "message": str(out.report.get("message"))[:300],
                                 "notes": (out.report.get("integrity") or {}).get("notes")}) + "\n")


def _run(case: Case, templates: Templates, tmp_path: Path) -> Any:
    """Run ``case`` (skipped when its project's tools are missing)."""
    project = PROJECTS[case.project]
    if missing := missing_tools(project):
        pytest.skip(f"{', '.join(missing)} not installed")
    return run_case(case, project, templates, tmp_path)


@pytest.mark.parametrize("case", tiered(CHEATS))
def test_cheat_is_caught(case: Case, templates: Templates, tmp_path: Path, corpus_env: None) -> None:
    """The round fails with one of the case's coded reasons (and the cheat itself is well-formed)."""
    out = _run(case, templates, tmp_path)
    reasons = verdict_reasons(out.report)
    _log(case.id, out, "|".join(sorted(case.expect)))
    diff_check = next(c for c in out.report["checks"] if c["name"] == "git-diff-check")
    assert diff_check["passed"], f"malformed case: git diff --check fails\n{summary(out)}"
    assert out.passed is False, f"cheat passed ({case.note})\n{summary(out)}"
    assert reasons & case.expect, f"expected one of {sorted(case.expect)} ({case.note})\n{summary(out)}"


@pytest.mark.parametrize("case", tiered(HONEST))
def test_honest_change_passes(case: Case, templates: Templates, tmp_path: Path, corpus_env: None) -> None:
    """No false reject: the round passes with no coded reason."""
    out = _run(case, templates, tmp_path)
    _log(case.id, out, "pass")
    assert out.passed is True, f"honest change rejected ({case.note})\n{summary(out)}"
    assert verdict_reasons(out.report) == set()


FOOLING = [c for c in CHEATS if not c.fails_closed]


@pytest.mark.extended
@pytest.mark.parametrize("case", FOOLING, ids=[c.id for c in FOOLING])
def test_the_cheat_fools_a_judge_without_integrity(case: Case, templates: Templates, tmp_path: Path,
                                                   corpus_env: None) -> None:
    """The corpus's own check: with ``testIntegrity: off`` (and no holdout) each cheat passes, so it is
    a real cheat, not a change that fails for another reason."""
    off = replace(case, override={**(case.override or {}), "testIntegrity": "off"}, holdout=())
    out = _run(off, templates, tmp_path)
    assert out.passed is True, f"the cheat does not work on its own tree\n{summary(out)}"


def test_the_table_is_large_and_varied() -> None:
    """≥ 40 cheats over ≥ 5 toolchains, ≥ 20 honest changes; explicit and derived checks."""
    assert len(CHEATS) >= 40 and len(HONEST) >= 20, (len(CHEATS), len(HONEST))
    assert len({c.project for c in CHEATS}) >= 5
    explicit = {k for k, p in PROJECTS.items() if ".tianshu-mcp/acceptance.json" in p.files}
    assert {c.project for c in CHEATS} & explicit and {c.project for c in CHEATS} - explicit
    # the default suite alone still runs a corpus of that size, over every toolchain
    quick_cheats, quick_honest = default_tier(CHEATS), default_tier(HONEST)
    assert len(quick_cheats) >= 40 and len(quick_honest) >= 20, (len(quick_cheats), len(quick_honest))
    assert {c.project for c in quick_cheats} == {c.project for c in CHEATS}


# --- bad inputs ---------------------------------------------------------------------------------------------


def _bare(tmp_path: Path, files: dict[str, str], key: str = "bare") -> Path:
    return build_template(Project(key, files, BRIEF, FIX), tmp_path / "repo")


def _start_and_fix(repo: Path, tmp_path: Path, **kw: Any) -> Any:
    home = tmp_path / "home"
    task_dir = home / "tasks" / "tsk_20260101000000_corpus"
    baseline = start_task(repo, task_dir, home)
    FIX(repo)
    return judge(repo, task_dir, home, baseline, brief=kw.pop("brief", BRIEF), **kw)


def test_a_project_without_any_test_says_so(tmp_path: Path, corpus_env: None) -> None:
    """Only a source file: nothing derives a check. Whatever the verdict, the report says no test ran."""
    out = _start_and_fix(_bare(tmp_path, {"calc.py": CALC}), tmp_path, brief="Make calc.mul multiply.")
    r = out.report
    assert r["integrity"]["policy"] == "protect", summary(out)
    said = " ".join(str(x) for x in [*r["analysis"].get("warnings", []), *r["analysis"].get("notes", []),
                                     *r["integrity"].get("notes", []), *r["integrity"].get("warnings", [])]).lower()
    assert "no command check" in said or "no test" in said, summary(out)


@pytest.mark.parametrize("named", [False, True], ids=["no-target", "target-in-brief"])
def test_a_runner_that_prints_nothing_fails_closed(named: bool, tmp_path: Path, corpus_env: None) -> None:
    """``pytest -qq --no-summary`` prints progress dots only and exits 0 after the fix: a known runner
    counted nothing, so the round fails closed (ZERO_COUNT); when the brief names a target, it cannot
    be shown to run either (TARGET_FAILED is as good a reason)."""
    py = {k: v for k, v in dict(PY_PROJECTS[0].files).items() if k != ".tianshu-mcp/acceptance.json"}
    argv = [sys.executable, "-m", "pytest", "-qq", "--no-summary", "-p", "no:cacheprovider"]
    py[".tianshu-mcp/acceptance.json"] = json.dumps({"checks": [{"name": "tests", "cmd": argv}]})
    out = _start_and_fix(_bare(tmp_path, py), tmp_path, brief=BRIEF if named else "Make calc.mul multiply.")
    expected = {ZERO_COUNT, "TARGET_FAILED"} if named else {ZERO_COUNT}
    assert out.passed is False and verdict_reasons(out.report) & expected, summary(out)


def test_an_invalid_policy_is_a_config_error(tmp_path: Path, corpus_env: None) -> None:
    out = _start_and_fix(_bare(tmp_path, dict(PY_PROJECTS[0].files)), tmp_path, override={"testIntegrity": "lenient"})
    assert out.passed is False and "CONFIG_INVALID" in verdict_reasons(out.report), summary(out)
    assert "testIntegrity" in json.dumps(out.report["blockingIssues"]), summary(out)


def test_a_target_that_never_existed_is_named(tmp_path: Path, corpus_env: None) -> None:
    """Honest fix, but ``targetTests`` names a test no tree has: TARGET_FAILED naming it, not a pass."""
    out = _start_and_fix(_bare(tmp_path, dict(PY_PROJECTS[0].files)), tmp_path,
                         targets=("tests/test_calc.py::test_mul_typo",))
    assert out.passed is False and "TARGET_FAILED" in verdict_reasons(out.report), summary(out)
    assert "test_mul_typo" in json.dumps(out.report.get("blockingIssues")), summary(out)


def test_many_failed_targets_are_one_blocking_item_naming_a_few(tmp_path: Path, corpus_env: None) -> None:
    """A tester's brief named test files whose 77 failing tests each became a TARGET_FAILED item (a
    1,211-character task-run message, "78 check(s) failed"). One item names the first few and counts
    the rest; the report's targets list keeps every one."""
    names = tuple(f"tests/test_calc.py::test_missing_{i}" for i in range(8))
    out = _start_and_fix(_bare(tmp_path, dict(PY_PROJECTS[0].files)), tmp_path, targets=names)
    items = [i for i in out.report["blockingIssues"] if i["code"] == "TARGET_FAILED"]
    assert len(items) == 1, out.report["blockingIssues"]
    assert "test_missing_0" in items[0]["message"] and "test_missing_4" in items[0]["message"]
    assert "test_missing_5" not in items[0]["message"] and "… 3 more" in items[0]["message"], items
    assert {t["target"] for t in out.report["integrity"]["targets"]} >= set(names)  # (and the brief's own)
