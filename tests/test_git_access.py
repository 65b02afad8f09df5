"""git is started in one place: :mod:`tianshu_mcp.core.git.run` (docs/design-notes.md, "One git
runner"). Every other module asks :func:`~tianshu_mcp.core.git.run_git`, so the hardening (stdin at
EOF, own session, output to temp files, a group-killing timeout, the scrubbed environment with
``GIT_OPTIONAL_LOCKS=0`` and ``GIT_NO_REPLACE_OBJECTS=1``) cannot be forgotten at a new call site.

Pure ``ast``: an argv literal (list or tuple) whose first element is the string ``"git"`` is a
git process about to start; outside the runner there must be none.
"""

from __future__ import annotations

import ast

from source_scan import ROOT, offenders

LAYERS = ("core", "adapters", "acceptance", "tasks", "flows", "deployments", "hosting", "mcp_server", "console")
RUNNER = ROOT / "core" / "git" / "run.py"


def git_argv_literals(source: str) -> list[int]:
    """Line numbers of list/tuple literals whose first element is the constant ``"git"``."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.List, ast.Tuple)) and node.elts:
            first = node.elts[0]
            if isinstance(first, ast.Constant) and first.value == "git":
                lines.append(node.lineno)
    return lines


def test_only_the_runner_starts_git() -> None:
    found = offenders(LAYERS, git_argv_literals, skip=[RUNNER])
    assert not found, "git started outside core/git/run.py:\n  " + "\n  ".join(found)


def test_the_scan_sees_each_way_of_writing_a_git_argv() -> None:
    assert git_argv_literals('subprocess.run(["git", "status"])') == [1]
    assert git_argv_literals('BASE = ("git", "-c", "x")\nsubprocess.Popen([*BASE, "log"])') == [1]
    assert git_argv_literals('subprocess.run(["gitk"])\nrun_git(["status"], p)') == []
    assert git_argv_literals(RUNNER.read_text(encoding="utf-8")), "the runner itself builds the one git argv"
