"""``tianshu-mcp config acceptance`` and ``config schema`` (docs/tools.md §5; docs/acceptance.md §8.2)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import CONSOLE, server_env


def run(home: Path, *args: str) -> tuple[int, dict]:
    out = subprocess.run([CONSOLE, "config", *args], env=server_env(home), capture_output=True, text=True,
                         timeout=60, stdin=subprocess.DEVNULL)
    return out.returncode, json.loads(out.stdout)


def test_layers_in_order_with_effective_values(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "acceptance.default.json").write_text(json.dumps({"requireChanges": False, "verifyConcurrency": 9}))
    project = tmp_path / "proj"
    (project / ".tianshu-mcp").mkdir(parents=True)
    (project / ".tianshu-mcp" / "acceptance.json").write_text(json.dumps({"checks": [{"name": "t", "cmd": "pytest -q"}]}))
    task = home / "tasks" / "tsk_20260101000000_abcdef"
    task.mkdir(parents=True)
    (task / "task.json").write_text(json.dumps({"taskId": task.name, "acceptanceOverride": {"requireChanges": True}}))
    code, out = run(home, "acceptance", str(project), "--task", task.name)
    assert code == 0 and out["ok"] is True
    assert [layer["source"] for layer in out["layers"]] == ["global", "project", "override"]
    assert out["appliedOrder"] == ["global", "project", "override"]
    assert out["effective"] == {"checks": 1, "requireChanges": True, "verifyConcurrency": 4, "visual": "(not configured)",
                                "baselineChecks": False, "baselinePolicy": "tolerate-untargeted"}
    assert out["summary"].startswith("effective layers=global>project>override checks=1")


def test_a_broken_layer_is_named_and_the_others_still_parse(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "acceptance.default.json").write_text("{broken")
    project = tmp_path / "proj"
    (project / ".tianshu-mcp").mkdir(parents=True)
    (project / ".tianshu-mcp" / "acceptance.json").write_text(json.dumps({"requireChanges": False}))
    code, out = run(home, "acceptance", str(project))
    assert code == 0 and out["ok"] is False
    g = out["layers"][0]
    assert g["error"]["code"] == "CONFIG_INVALID" and str(home / "acceptance.default.json") in g["error"]["message"]
    assert out["layers"][1]["config"] == {"requireChanges": False}
    assert out["layers"][2]["present"] is False


def test_argument_errors_and_unknown_scope(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    code, out = run(home, "acceptance", "--task")
    # usage errors exit 2 (docs/hosting.md §5: errors exit non-zero), still with the JSON verdict
    assert code == 2 and out["ok"] is False and out["error"] == "--task needs a taskId argument"
    code, out = run(home, "acceptance", "--bogus")
    assert out["error"] == "unknown option: --bogus"
    code, out = run(home, "acceptance", "/a", "/b")
    assert out["error"] == "extra argument: /b"
    code, out = run(home, "nope")
    assert code == 2 and out["ok"] is False and "unknown config subcommand: nope" in out["error"]
    code, out = run(home, "acceptance", str(tmp_path), "--task", "tsk_20260101000000_000000")
    assert out["ok"] is False and "task snapshot unreadable or missing" in out["error"]


def test_unknown_keys_and_grading_switches_are_shown(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    project = tmp_path / "proj"
    (project / ".tianshu-mcp").mkdir(parents=True)
    (project / ".tianshu-mcp" / "acceptance.json").write_text(json.dumps({"chekcs": [], "baselineChecks": True}))
    code, out = run(home, "acceptance", str(project))
    assert out["ok"] is True and out["layers"][1]["unknownKeys"] == ["chekcs"]
    assert out["effective"]["baselineChecks"] is True and out["effective"]["baselinePolicy"] == "tolerate-untargeted"
    (project / ".tianshu-mcp" / "acceptance.json").write_text("{")
    code, out = run(home, "acceptance", str(project))
    assert out["ok"] is False and out["effective"]["checks"].startswith("(blocked")


def test_a_tasks_layers_are_shown_as_pinned_at_its_baseline(tmp_path: Path) -> None:
    from tianshu_mcp.acceptance.pinning import pin_rules

    home = tmp_path / "home"
    project = tmp_path / "proj"
    (project / ".tianshu-mcp").mkdir(parents=True)
    layer = project / ".tianshu-mcp" / "acceptance.json"
    layer.write_text(json.dumps({"checks": [{"name": "t", "cmd": ["pytest", "-q"]}]}))
    task = home / "tasks" / "tsk_20260101000000_abcdef"
    task.mkdir(parents=True)
    (task / "task.json").write_text(json.dumps({"taskId": task.name}))
    assert pin_rules(project, task, home)
    layer.write_text(json.dumps({"checks": [], "requireChanges": False}))  # the agent's edit
    code, out = run(home, "acceptance", str(project), "--task", task.name)
    assert code == 0 and out["effective"]["checks"] == 1 and out["effective"]["requireChanges"] == "(default true)"
    assert out["layers"][1]["path"].endswith("acceptance.json (as of the task's baseline)")
    code, out = run(home, "acceptance", str(project))  # the project as it is now
    assert out["effective"]["checks"] == 0 and out["effective"]["requireChanges"] is False


@pytest.mark.parametrize("bad", ["../../etc", "tsk_nope", "/tmp/x", "tsk_20261203174043_be9f0f/../../x"])
def test_a_task_option_that_is_not_a_task_id_is_a_usage_error(tmp_path: Path, bad: str) -> None:
    """``--task`` names a directory under ``<home>/tasks``: anything but a task id is refused
    before a file is read (exit 2), never resolved as a path."""
    home = tmp_path / "home"
    home.mkdir()
    code, out = run(home, "acceptance", "--task", bad)
    assert code == 2 and out["ok"] is False and "task id" in out["error"], out
