"""Shared helpers of the verification-integrity tests (docs/integrity.md): real git repositories in temp
dirs, the task start (baseline, pinned rules, baseline state) and one judged round."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

from tianshu_mcp.acceptance.engine import VerifyOutcome, VerifyRequest, verify_round
from tianshu_mcp.acceptance.git import Baseline, capture_baseline
from tianshu_mcp.acceptance.grading.grade import capture_baseline_state
from tianshu_mcp.acceptance.pinning import load_pinned, pin_rules

PYTEST_CHECK = {"name": "tests", "cmd": [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]}


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` (raises on failure); returns stdout."""
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL).stdout


def init_repo(path: Path, files: Mapping[str, str], checks: Sequence[Mapping[str, Any]] | None = None) -> Path:
    """A committed git repository with ``files`` (and ``.tianshu-mcp/acceptance.json`` with
    ``checks`` when given)."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q")
    git(path, "config", "user.name", "Test")
    git(path, "config", "user.email", "test@example.com")
    git(path, "config", "commit.gpgsign", "false")
    for rel, text in files.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text)
    if checks is not None:
        (path / ".tianshu-mcp").mkdir(exist_ok=True)
        (path / ".tianshu-mcp" / "acceptance.json").write_text(json.dumps({"checks": list(checks)}))
    git(path, "add", "-A")
    git(path, "commit", "-qm", "init")
    return path


class Task:
    """A task started on ``project``: its baseline is captured now (as the flow does before the
    agent runs); :meth:`judge` verifies a round against it."""

    def __init__(self, project: Path, root: Path, brief: str = "") -> None:
        self.project = project
        self.home = root / "home"
        self.dir = root / "task"
        self.home.mkdir(parents=True, exist_ok=True)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.brief = brief
        self.baseline: Baseline = capture_baseline(str(project))
        pin_rules(project, self.dir, self.home)
        capture_baseline_state(project, self.dir)
        self.round = 0

    def judge(self, *, override: Mapping[str, Any] | None = None, targets: Sequence[str] = (),
              holdout: Sequence[Any] = (), message: str = "Done.") -> VerifyOutcome:
        """One verify round of the agent's current tree (round numbers go up)."""
        out = verify_round(VerifyRequest(
            task_id="tsk_integrity", project_path=str(self.project), task_dir=self.dir, round=self.round,
            baseline=self.baseline, home=self.home, task_text=self.brief, pinned_rules=load_pinned(self.dir),
            acceptance_override=dict(override) if override else None, target_tests=tuple(targets),
            holdout_checks=tuple(holdout), agent_run={"exitCode": 0, "durationMs": 5, "outputTail": message}))
        self.round = out.round + 1
        return out


def edit(path: Path, old: str, new: str) -> None:
    """Replace ``old`` (which must be there) by ``new`` in a file."""
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new))


def env_python() -> str:
    """The interpreter running the tests (pytest is installed there)."""
    return os.fspath(sys.executable)
