"""run_task's agent-specific argument gates (docs/tools.md §1.3 (8) and the project-less order): each
desktop adapter takes only its own hints; a hint sent to the wrong agent is a coded error."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import mcp_client, meta_of, text_of
from fixture_project import make_calc_repo
from tianshu_mcp.adapters.arg_gates import check_agent_args, check_project_less
from tianshu_mcp.adapters.profiles import AgentProfile
from tianshu_mcp.core.errors import ErrorCode, TianshuError


def gui(vendor: str) -> AgentProfile:
    return AgentProfile.model_validate({"driver": "gui", "adapter": f"{vendor}-gui", "command": sys.executable})


CLI = AgentProfile.model_validate({"command": sys.executable, "argsTemplate": ["<prompt:arg>"]})

REFUSED = [
    ("codex-cli", CLI, {"allowCreateProject": True}, "allowCreateProject is ZCode-only"),
    ("kimi", gui("kimicode"), {"allowCreateProject": False}, "allowCreateProject is ZCode-only"),
    ("zc", gui("zcode"), {"mode": "Code"}, "ZCode does not support the mode parameter"),
    ("cx", gui("codex"), {"mode": "Work"}, "Codex does not support the mode parameter"),
    ("km", gui("kimicode"), {"mode": "Work"}, "Kimi Code does not support the mode parameter"),
    ("mm", gui("minimax"), {"mode": "Design"}, "MiniMax Code does not support the mode parameter"),
    ("qd", gui("qoder"), {"mode": "Code"}, "Qoder CN does not support the mode parameter"),
    ("od", gui("opendesign"), {"mode": "Design", "designDirection": "calm"}, "Open Design does not support the mode"),
    ("cli", CLI, {"modelSource": "custom"}, "modelSource is a Qoder CN-only parameter"),
    ("zc", gui("zcode"), {"reasoningLevel": "xhigh", "model": "a/b"}, "only supported by the Qoder CN adapter"),
    ("cli", CLI, {"reasoningLevel": "关闭思考"}, "only supported by the Qoder CN adapter"),
    ("cli", CLI, {"designDirection": "bold"}, "designDirection is an Open Design-only parameter"),
    ("od", gui("opendesign"), {}, "Open Design needs designDirection"),
    ("cli", CLI, {"contextWindow": "200k"}, "contextWindow is a MiniMax Code-only parameter"),
    ("zc", gui("zcode"), {"model": "claude-sonnet"}, "ZCode's model must be written provider/model"),
    ("cx", gui("codex"), {"planDoc": "docs/missing-plan.md"}, "planDoc must name an existing file"),
    ("cx", gui("codex"), {"designSystem": "/nonexistent/ds.md"}, "designSystem must name an existing file"),
]


@pytest.mark.parametrize("agent_id, profile, args, message", REFUSED, ids=[f"{r[0]}-{r[3][:20]}" for r in REFUSED])
def test_a_hint_for_another_agent_is_refused(agent_id: str, profile: AgentProfile, args: dict[str, Any], message: str,
                                             tmp_path: Path) -> None:
    with pytest.raises(TianshuError) as err:
        check_agent_args(agent_id, profile, {"task": "x", **args}, str(tmp_path))
    assert err.value.code == ErrorCode.INVALID_ARGUMENT and message in err.value.message


ACCEPTED = [
    ("cli", CLI, {"mode": "Code", "reasoningLevel": "high", "model": "gpt"}),  # CLI agents accept mode
    ("tw", gui("traework"), {"mode": "Work"}),
    ("zc", gui("zcode"), {"allowCreateProject": True, "model": "zhipu/glm-4.6"}),
    ("qd", gui("qoder"), {"modelSource": "custom", "reasoningLevel": "极高"}),
    ("od", gui("opendesign"), {"designDirection": "calm, editorial"}),
    ("mm", gui("minimax"), {"contextWindow": "1M"}),
    ("cx", gui("codex"), {"planDoc": "calc.py", "designSystem": None}),
]


@pytest.mark.parametrize("agent_id, profile, args", ACCEPTED, ids=[r[0] + "-" + ",".join(r[2]) for r in ACCEPTED])
def test_each_adapter_takes_its_own_hints(agent_id: str, profile: AgentProfile, args: dict[str, Any], tmp_path: Path) -> None:
    (tmp_path / "calc.py").write_text("")
    check_agent_args(agent_id, profile, {"task": "x", **args}, str(tmp_path))


@pytest.mark.parametrize("profile, args, message", [
    (CLI, {}, "needs projectPath; project-less dispatch is only supported for ZCode"),
    (gui("zcode"), {"autoVerify": True}, "does not support autoVerify=true"),
    (gui("zcode"), {"autoFixRounds": 2}, "does not support autoFixRounds>0"),
    (gui("zcode"), {"mode": "Code"}, "ZCode does not support the mode parameter"),
    (gui("zcode"), {"acceptanceOverride": {"checks": []}}, "does not support acceptanceOverride"),
    (gui("zcode"), {"dryRun": True}, "does not support dryRun"),
])
def test_the_project_less_order(profile: AgentProfile, args: dict[str, Any], message: str) -> None:
    with pytest.raises(TianshuError) as err:
        check_project_less("a", profile, args)
    assert err.value.code == ErrorCode.INVALID_ARGUMENT and message in err.value.message


@pytest.mark.anyio
async def test_the_gates_through_the_mcp_client(ts_home: Path, tmp_path: Path) -> None:
    profiles = json.loads((ts_home / "agent-profiles.json").read_text())
    profiles["profiles"]["my-zcode"] = {"driver": "gui", "adapter": "zcode-gui", "command": sys.executable}
    (ts_home / "agent-profiles.json").write_text(json.dumps(profiles))
    repo = make_calc_repo(tmp_path / "calc")

    def tasks() -> set[str]:
        return {p.name for p in (ts_home / "tasks").glob("tsk_*")}

    before = tasks()
    async with mcp_client(ts_home) as client:
        r = await client.call_tool("run_task", {"projectPath": str(repo), "task": "x", "agentId": "my-zcode",
                                                "model": "sonnet"})
        assert r.is_error and "[INVALID_ARGUMENT]" in text_of(r) and "provider/model" in text_of(r)
        r = await client.call_tool("run_task", {"projectPath": str(repo), "task": "x", "agentId": "scripted",
                                                "contextWindow": "1M"})
        assert r.is_error and "MiniMax Code-only" in text_of(r)
        r = await client.call_tool("run_task", {"task": "x", "agentId": "scripted"})
        assert r.is_error and "project-less dispatch is only supported for ZCode" in text_of(r)
        r = await client.call_tool("run_task", {"task": "x", "agentId": "my-zcode", "autoFixRounds": 1})
        assert r.is_error and "autoFixRounds>0" in text_of(r)
        r = await client.call_tool("run_task", {"task": "x", "agentId": "zcode"})  # built-in: not on this OS
        assert not r.is_error and meta_of(r)["ok"] is False
    assert tasks() == before  # nothing was dispatched
