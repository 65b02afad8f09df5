"""Sub-projects of one repository (a monorepo): serialised like one project, each task's report
scoped to its own sub-tree, edits elsewhere listed as a signal and not counted (docs/robustness.md §3)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tianshu_mcp.acceptance.engine import verify_round
from tianshu_mcp.acceptance.git import analyze_changes, capture_baseline
from tianshu_mcp.core.paths import project_key, serial_key

from conftest import meta_of, mcp_client
from fixture_project import make_calc_repo, scripted_profile
from test_acceptance_engine import request
from test_gates_cancel import intervals

pytestmark = [pytest.mark.anyio]


def make_monorepo(root: Path) -> Path:
    """``root`` (one git repository) with two calc packages, ``svc-a`` and ``svc-b``."""
    src = make_calc_repo(root.parent / f"{root.name}-src")
    root.mkdir()
    for pkg in ("svc-a", "svc-b"):
        shutil.copytree(src, root / pkg, ignore=shutil.ignore_patterns(".git"))
    for args in (["init", "-q", "-b", "main"], ["config", "user.email", "m@example.invalid"],
                 ["config", "user.name", "m"], ["add", "-A"], ["commit", "-qm", "two packages"]):
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)
    return root


def test_packages_of_one_repository_share_a_serial_key(tmp_path: Path) -> None:
    mono = make_monorepo(tmp_path / "mono")
    a, b = str(mono / "svc-a"), str(mono / "svc-b")
    assert serial_key(a) == serial_key(b) == project_key(str(mono))
    other = make_calc_repo(tmp_path / "other")
    assert serial_key(str(other)) != serial_key(a)
    plain = tmp_path / "plain"
    plain.mkdir()
    assert serial_key(str(plain)) == project_key(str(plain))  # outside git: the project itself


def test_analysis_is_scoped_to_the_projects_sub_tree(tmp_path: Path) -> None:
    mono = make_monorepo(tmp_path / "mono")
    a = mono / "svc-a"
    baseline = capture_baseline(a)
    (mono / "svc-b" / "calc.py").write_text("def add(a, b):\n    return a + b  # B's edit\n")
    (mono / "svc-b" / "new_b.py").write_text("x = 1\n")
    analysis = analyze_changes(baseline, a)
    assert not analysis.has_changes  # B's edits are not A's output
    assert analysis.outside_project == ["svc-b/calc.py", "svc-b/new_b.py"]
    assert any("outside the project's sub-tree svc-a/" in w for w in analysis.warnings)
    (a / "calc.py").write_text("def add(a, b):\n    return a + b  # A's fix\n")
    analysis = analyze_changes(baseline, a)
    assert analysis.changed_files == ["svc-a/calc.py"] and analysis.untracked_files == []
    assert [r.file for r in analysis.diffstat.per_file] == ["svc-a/calc.py"]


def test_a_noop_agent_on_a_fails_the_zero_change_gate_despite_bs_edits(tmp_path: Path) -> None:
    mono = make_monorepo(tmp_path / "mono")
    a = mono / "svc-a"
    baseline = capture_baseline(a)
    (mono / "svc-b" / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    out = verify_round(request(tmp_path, a, baseline=baseline))
    assert not out.passed and "no-changes" in [c["name"] for c in out.report["checks"] if not c["passed"]]


async def test_tasks_on_two_packages_never_overlap(ts_daemon: dict[str, Any], tmp_path: Path) -> None:
    home = ts_daemon["home"]
    trace = tmp_path / "trace.txt"
    profiles = json.loads((home / "agent-profiles.json").read_text())
    profiles["profiles"]["mono-sleep"] = scripted_profile(mode="sleep", extra_env={"SCRIPTED_TRACE": str(trace),
                                                                                   "SCRIPTED_SLEEP": "3"})
    (home / "agent-profiles.json").write_text(json.dumps(profiles))
    mono = make_monorepo(tmp_path / "mono")
    a, b = mono / "svc-a", mono / "svc-b"
    async with mcp_client(home) as client:
        subs = [meta_of(await client.call_tool("run_task", {"projectPath": str(p), "task": "Fix add (test_add_negative)",
                                                            "agentId": "mono-sleep"})) for p in (a, b)]
        done = [meta_of(await client.call_tool("wait_task", {"taskId": s["taskId"], "timeoutMs": 240000})) for s in subs]
    assert [d["status"] for d in done] == ["succeeded", "succeeded"], done
    spans = sorted(intervals(trace, [a, b]), key=lambda s: s[1])
    assert len(spans) == 2 and spans[0][2] <= spans[1][1], spans  # one after the other
    for sub, pkg, other in ((subs[0], "svc-a", "svc-b"), (subs[1], "svc-b", "svc-a")):
        report = json.loads((home / "tasks" / sub["taskId"] / "report-0.json").read_text())
        assert report["analysis"]["changedFiles"] == [f"{pkg}/calc.py"]
        assert not any(f.startswith(other) for f in report["analysis"]["changedFiles"])
