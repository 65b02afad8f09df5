"""The demo's fixture project: a real git repository with a small pytest project whose ``add`` has a
bug (``a - b``), and the agent profile of the scripted agent that fixes it (:mod:`.scripted_agent`).

Shipped inside the package so that ``tianshu-mcp demo`` runs from an installed wheel (no source
checkout); the end-to-end tests build the same project through ``tests/fixture_project.py``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ...core.git.run import run_git

CALC_BUGGY = "def add(a, b):\n    return a - b\n"
WRONG_FIX = "def add(a, b):\n    return abs(a) + abs(b)\n"
"""What the fake agents write when their brief does not name the failing test."""
RIGHT_FIX = "def add(a, b):\n    return a + b\n"
"""What they write once it does."""
SCRIPTED_AGENT = Path(__file__).with_name("scripted_agent.py")
"""The scripted CLI agent (a script run as ``python scripted_agent.py <prompt>``)."""
TESTS = (
    "from calc import add\n\n\n"
    "def test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_add_negative():\n    assert add(-2, -3) == -5\n"
)
UNITTEST_TESTS = (
    "import unittest\n\nfrom calc import add\n\n\n"
    "class CalcTest(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n"
    "    def test_add_negative(self):\n        self.assertEqual(add(-2, -3), -5)\n"
)
"""The same two tests for the standard library's unittest: the demo's project when the interpreter
has no pytest (an installed wheel: pytest is a test extra, not a dependency)."""


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` through the one git runner (:func:`~tianshu_mcp.core.git.run.run_git`) and
    return stdout.

    Raises:
        subprocess.CalledProcessError: git failed or timed out (its stderr attached).
    """
    r = run_git(list(args), repo)
    if r.status != 0:
        raise subprocess.CalledProcessError(-1 if r.status is None else r.status, " ".join(("git:", *args)), r.stdout,
                                            r.stderr)
    return r.stdout


def make_calc_repo(path: Path, python: str = sys.executable, checks: list[dict] | None = None,
                   runner: str = "pytest") -> Path:
    """Create the fixture repository at ``path`` and commit it.

    Args:
        path: directory to create (must not exist or be empty).
        python: interpreter whose pytest (or unittest) runs the checks (``<python> -m pytest -q``).
        checks: acceptance checks to write to ``.tianshu-mcp/acceptance.json`` (default: the runner's).
        runner: ``"pytest"`` (tests as functions) or ``"unittest"`` (a ``TestCase``, run with
            ``<python> -m unittest discover -v``: no pytest needed).

    Returns ``path``.
    """
    path.mkdir(parents=True, exist_ok=True)
    (path / "calc.py").write_text(CALC_BUGGY)
    (path / "tests").mkdir(exist_ok=True)
    (path / "tests" / "test_calc.py").write_text(TESTS if runner == "pytest" else UNITTEST_TESTS)
    if runner == "unittest":
        (path / "tests" / "__init__.py").write_text("")
        checks = checks if checks is not None else [{"name": "unittest", "cmd": [
            python, "-m", "unittest", "discover", "-v", "-s", "tests", "-t", "."], "timeoutMs": 120000}]
    (path / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    (path / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n")
    cfg = path / ".tianshu-mcp"
    cfg.mkdir(exist_ok=True)
    checks = checks if checks is not None else [{"name": "pytest", "cmd": [python, "-m", "pytest", "-q", "-p", "no:cacheprovider"], "timeoutMs": 120000}]
    (cfg / "acceptance.json").write_text(json.dumps({"checks": checks}, indent=2) + "\n")
    return commit_new_repo(path, "calc with a bug in add")


def commit_new_repo(path: Path, message: str) -> Path:
    """``git init`` ``path`` (branch ``main``, a fixture identity) and commit everything in it as
    ``message``; returns ``path``. Raises CalledProcessError when git fails."""
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "fixture@example.invalid")
    git(path, "config", "user.name", "fixture")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", message)
    return path


def scripted_profile(agent: Path | None = None, mode: str = "normal", python: str = sys.executable,
                     timeout_ms: int = 120000, extra_env: dict[str, str] | None = None) -> dict:
    """An agent-profiles.json entry running ``scripted_agent.py`` (default: the one beside this
    module, :data:`SCRIPTED_AGENT`) in ``mode`` with ``python``; ``timeout_ms`` in ms."""
    agent = agent or SCRIPTED_AGENT
    return {
        "displayName": f"scripted agent ({mode})",
        "command": python,
        "argsTemplate": [str(agent), "<prompt:arg>"],
        "promptMode": "arg",
        "cwd": "task",
        "env": {"SCRIPTED_MODE": mode, **(extra_env or {})},
        "timeoutMs": timeout_ms,
    }
