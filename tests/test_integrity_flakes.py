"""Flakes are named, never laundered (docs/integrity.md §6, §8.5), on real pytest runs.

The flaky tests are deterministic: each counts its runs in a file of the tree it runs in (ignored
by git), so every tree — the project, a baseline worktree, a pristine tree — sees run 1 fail and
runs 2 and 3 pass: "fails 1 run in 3".
"""

from __future__ import annotations

from pathlib import Path

from tianshu_mcp.acceptance.integrity.reasons import CHECK_FAILED, verdict_reasons

from integrity_helpers import PYTEST_CHECK, Task, edit, init_repo

COUNTER = '''
from pathlib import Path


def runs(name):
    """How many times this tree ran the test ``name`` (this run included)."""
    p = Path(__file__).resolve().parent.parent / f".runs-{name}"
    n = (int(p.read_text()) if p.exists() else 0) + 1
    p.write_text(str(n))
    return n
'''

BASE = {
    ".gitignore": "__pycache__/\n.runs-*\n",
    "conftest.py": "import os, sys\nsys.path.insert(0, os.path.dirname(__file__))\n",
    "calc.py": "def add(a, b):\n    return a - b\n",
    "tests/counter.py": COUNTER,
    "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
                          "def test_add_zero():\n    assert add(0, 0) == 0\n",
}
FLAKY_TEST = ("import sys, os\nsys.path.insert(0, os.path.dirname(__file__))\nfrom counter import runs\n\n\n"
              "def test_sometimes():\n    assert runs('sometimes') % 3 != 1\n")
BRIEF = "Fix add() so that tests/test_calc.py::test_add passes."


def _fix(project: Path) -> None:
    edit(project / "calc.py", "a - b", "a + b")


def test_a_test_flaky_at_the_baseline_and_after_is_named_and_does_not_fail_the_round(tmp_path: Path) -> None:
    project = init_repo(tmp_path / "p", {**BASE, "tests/test_flaky.py": FLAKY_TEST}, [PYTEST_CHECK])
    task = Task(project, tmp_path, BRIEF)
    _fix(project)
    out = task.judge()
    flaky = out.report["integrity"]["flaky"]
    assert out.passed, out.report["message"]
    assert [f["ids"] for f in flaky] == [["tests/test_flaky.py::test_sometimes"]]
    assert flaky[0]["flakyAtBaseline"] == ["tests/test_flaky.py::test_sometimes"] and flaky[0]["excused"] is True
    check = out.report["checks"][1]
    assert check["notCounted"] is True and "already flaky at the baseline" in check["integrityNote"]
    assert "[FLAKY]" in out.md_path.read_text()


def test_a_test_made_flaky_by_the_change_fails_the_round_although_it_passes_on_retry(tmp_path: Path) -> None:
    project = init_repo(tmp_path / "p", BASE, [PYTEST_CHECK])
    task = Task(project, tmp_path, BRIEF)
    # the agent's "fix" is right only from the second call on in each tree: red, then green on retry
    (project / "calc.py").write_text(
        "from pathlib import Path\n\n\ndef add(a, b):\n    p = Path(__file__).parent / '.runs-calc'\n"
        "    n = (int(p.read_text()) if p.exists() else 0) + 1\n    p.write_text(str(n))\n"
        "    return a + b if n % 3 != 1 else a - b\n")
    out = task.judge()
    assert not out.passed
    assert CHECK_FAILED in verdict_reasons(out.report)
    flaky = out.report["integrity"]["flaky"]
    assert flaky and flaky[0]["excused"] is False and flaky[0]["flakyAtBaseline"] == []
    assert "not flaky at the baseline" in out.report["checks"][1]["integrityNote"]


def test_a_test_broken_only_at_the_baseline_is_fixed_and_the_round_passes(tmp_path: Path) -> None:
    project = init_repo(tmp_path / "p", BASE, [PYTEST_CHECK])
    task = Task(project, tmp_path, BRIEF)
    _fix(project)
    out = task.judge()
    assert out.passed, out.report["message"]
    assert out.report["integrity"]["flaky"] == []
    assert [t["status"] for t in out.report["integrity"]["targets"]] == ["passed"]
