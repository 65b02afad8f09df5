"""Builds the fixture project used by the end-to-end tests and the demo: a real git repository
with a small pytest project whose ``add`` has a bug (``a - b``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

CALC_BUGGY = "def add(a, b):\n    return a - b\n"
WRONG_FIX = "def add(a, b):\n    return abs(a) + abs(b)\n"
"""What the fake agents write when their brief does not name the failing test."""
RIGHT_FIX = "def add(a, b):\n    return a + b\n"
"""What they write once it does."""
TESTS = (
    "from calc import add\n\n\n"
    "def test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_add_negative():\n    assert add(-2, -3) == -5\n"
)


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` and return stdout (raises CalledProcessError on failure)."""
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL).stdout


def make_calc_repo(path: Path, python: str = sys.executable, checks: list[dict] | None = None) -> Path:
    """Create the fixture repository at ``path`` and commit it.

    Args:
        path: directory to create (must not exist or be empty).
        python: interpreter whose pytest runs the checks (``<python> -m pytest -q``).
        checks: acceptance checks to write to ``.tianshu-mcp/acceptance.json`` (default: pytest).

    Returns ``path``.
    """
    path.mkdir(parents=True, exist_ok=True)
    (path / "calc.py").write_text(CALC_BUGGY)
    (path / "tests").mkdir(exist_ok=True)
    (path / "tests" / "test_calc.py").write_text(TESTS)
    (path / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    (path / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n")
    cfg = path / ".tianshu-mcp"
    cfg.mkdir(exist_ok=True)
    checks = checks if checks is not None else [{"name": "pytest", "cmd": [python, "-m", "pytest", "-q", "-p", "no:cacheprovider"], "timeoutMs": 120000}]
    (cfg / "acceptance.json").write_text(json.dumps({"checks": checks}, indent=2) + "\n")
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "fixture@example.invalid")
    git(path, "config", "user.name", "fixture")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "calc with a bug in add")
    return path


def scripted_profile(agent: Path | None = None, mode: str = "normal", python: str = sys.executable,
                     timeout_ms: int = 120000, extra_env: dict[str, str] | None = None) -> dict:
    """An agent-profiles.json entry running ``scripted_agent.py`` in ``mode``."""
    agent = agent or Path(__file__).with_name("scripted_agent.py")
    return {
        "displayName": f"scripted agent ({mode})",
        "command": python,
        "argsTemplate": [str(agent), "<prompt:arg>"],
        "promptMode": "arg",
        "cwd": "task",
        "env": {"SCRIPTED_MODE": mode, **(extra_env or {})},
        "timeoutMs": timeout_ms,
    }


FAKE_ACP = Path(__file__).with_name("fake_acp_agent.py")


def acp_profile(tmp: Path, mode: str = "normal", acp: dict | None = None, **env: str) -> dict:
    """A profile running ``fake_acp_agent.py`` in ``mode`` over ACP, its trace
    (``<tmp>/trace.jsonl``) and session state (``<tmp>/state.json``) under ``tmp``; ``acp``:
    the profile's ``acp`` settings; ``env``: more variables for the agent."""
    raw: dict = {"displayName": "Fake ACP", "driver": "acp", "command": sys.executable, "argsTemplate": [str(FAKE_ACP)],
                 "env": {"FAKE_ACP_MODE": mode, "FAKE_ACP_TRACE": str(tmp / "trace.jsonl"),
                         "FAKE_ACP_STATE": str(tmp / "state.json"), **env}}
    if acp is not None:
        raw["acp"] = acp
    return raw
