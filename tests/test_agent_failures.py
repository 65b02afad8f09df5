"""An agent that fails is an agent failure, not a verification failure (docs/robustness.md §4): no rework
round is burnt, the task says the exit code and the agent's own line, every report shows the
agent's exit code and output tail."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tianshu_mcp.adapters.fatal import fatal_line
from tianshu_mcp.adapters.profiles import AgentProfile

from conftest import meta_of, mcp_client
from fixture_project import make_calc_repo, scripted_profile

pytestmark = [pytest.mark.anyio]


@pytest.mark.parametrize("line", [
    "Error: 401 Unauthorized - invalid x-api-key",
    "anthropic.AuthenticationError: invalid api key",
    "Not logged in · Please run /login",
    "API error 429 Too Many Requests",
    "You exceeded your current quota, please check your plan and billing details. insufficient_quota",
    "Error: model 'gpt-9' not found",
])
def test_default_patterns_recognise_real_cli_failures(line: str) -> None:
    assert fatal_line(f"working…\n{line}\nbye\n") == line


def test_ordinary_output_is_not_fatal_and_profiles_add_patterns() -> None:
    text = "edited calc.py\nall 12 tests passed\nauthored by bot"
    assert fatal_line(text) is None
    assert fatal_line("ERR_BUDGET_GONE for org", ["err_budget_gone"]) == "ERR_BUDGET_GONE for org"
    with pytest.raises(ValueError):
        AgentProfile.model_validate({"command": "x", "argsTemplate": ["<prompt:arg>"], "fatalPatterns": ["("]})


@pytest.mark.parametrize("mode,exit_code,said", [("auth-fail", 1, "401 Unauthorized"),
                                                  ("quota-zero", 0, "429 Too Many Requests"),
                                                  ("crash", 1, "RuntimeError: segmentation in the planner")])
async def test_failed_agents_end_agent_failed_without_rework(ts_daemon: dict[str, Any], tmp_path: Path,
                                                              mode: str, exit_code: int, said: str) -> None:
    home = ts_daemon["home"]
    profiles = json.loads((home / "agent-profiles.json").read_text())
    profiles["profiles"][f"fail-{mode}"] = scripted_profile(mode=mode)
    (home / "agent-profiles.json").write_text(json.dumps(profiles))
    repo = make_calc_repo(tmp_path / "calc")
    async with mcp_client(home) as client:
        sub = meta_of(await client.call_tool("run_task", {"projectPath": str(repo), "task": "Fix add",
                                                          "agentId": f"fail-{mode}", "autoFixRounds": 2}))
        done = meta_of(await client.call_tool("wait_task", {"taskId": sub["taskId"], "timeoutMs": 180000}))
    task = json.loads((home / "tasks" / sub["taskId"] / "task.json").read_text())
    assert done["status"] == "failed" and task["errorType"] == "agent_failed", task
    assert task["roundsUsed"] == 1  # no rework round burnt on it
    assert f"exit code {exit_code}" in task["lastMessage"] and said in task["lastMessage"]
    report = json.loads((home / "tasks" / sub["taskId"] / "report-0.json").read_text())
    assert report["agent"]["exitCode"] == exit_code and said in report["agent"]["outputTail"]
    md = (home / "tasks" / sub["taskId"] / "report-0.md").read_text()
    assert "## Agent" in md and f"Exit code: {exit_code}" in md


async def test_a_working_agents_report_shows_its_exit_code(ts_daemon: dict[str, Any], tmp_path: Path) -> None:
    home = ts_daemon["home"]
    repo = make_calc_repo(tmp_path / "calc")
    async with mcp_client(home) as client:
        sub = meta_of(await client.call_tool("run_task", {"projectPath": str(repo), "task": "Fix add (test_add_negative)",
                                                          "agentId": "scripted"}))
        done = meta_of(await client.call_tool("wait_task", {"taskId": sub["taskId"], "timeoutMs": 180000}))
    assert done["status"] == "succeeded"
    report = json.loads((home / "tasks" / sub["taskId"] / "report-0.json").read_text())
    assert report["agent"]["exitCode"] == 0 and "scripted agent" in report["agent"]["outputTail"]


async def test_a_crashing_agent_on_a_non_git_project_without_checks_is_an_agent_failure(
        ts_daemon: dict[str, Any], tmp_path: Path) -> None:
    """Observed: the reply said only NOTHING_VERIFIED; the agent's crash is the news."""
    home = ts_daemon["home"]
    profiles = json.loads((home / "agent-profiles.json").read_text())
    profiles["profiles"]["fail-crash-plain"] = scripted_profile(mode="crash")
    (home / "agent-profiles.json").write_text(json.dumps(profiles))
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "notes.txt").write_text("no git, no checks\n")
    async with mcp_client(home) as client:
        sub = meta_of(await client.call_tool("run_task", {"projectPath": str(plain), "task": "tidy the notes",
                                                          "agentId": "fail-crash-plain"}))
        done = meta_of(await client.call_tool("wait_task", {"taskId": sub["taskId"], "timeoutMs": 180000}))
    task = json.loads((home / "tasks" / sub["taskId"] / "task.json").read_text())
    assert done["status"] == "failed" and task["errorType"] == "agent_failed", task
    assert "exit code 1" in task["lastMessage"] and "RuntimeError" in task["lastMessage"]


def test_the_failure_line_is_the_agents_last_word_not_our_framing() -> None:
    """A warning that matches early, the agent's final error later, and our [exit] trailer quoting
    the error last: the agent's final error is the line (docs/real-agents.md, codex-acp and gemini --acp)."""
    from tianshu_mcp.adapters.fatal import agent_text

    log = ("\n===== spawn: /bin/agent Fix the 401 handling\nin api.py (cwd=/p) @ 2026-12-03T10:00:00.000Z =====\n"
           "[agent] Warning: Model metadata for `scripted-model` not found. Defaulting to fallback metadata\n"
           "Error: 401 Unauthorized - invalid x-api-key\n"
           "[exit] code=1 duration=10ms (session/prompt failed: 401 API key not valid)\n")
    assert fatal_line(agent_text(log)) == "Error: 401 Unauthorized - invalid x-api-key"
    assert "Fix the 401" not in agent_text(log)
