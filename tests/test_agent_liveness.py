"""Agents stuck on their model, end to end (docs/real-agents.md §2, §4): a retry loop on a 429 ends the round
as an agent failure in seconds, not at the task's timeout; aider's rejected key (exit 0, its own
``.aider*`` files written) is an agent failure, not a verification failure; a silent agent is
reported as stalled; tool calls read from structured output reach ``query_task.recentEvents``."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import mcp_client, meta_of
from fixture_project import make_calc_repo, scripted_profile

pytestmark = [pytest.mark.anyio]

STREAMS = Path(__file__).parent / "data" / "agent_streams"


def _register(home: Path, agent_id: str, raw: dict[str, Any]) -> None:
    profiles = json.loads((home / "agent-profiles.json").read_text())
    profiles["profiles"][agent_id] = raw
    (home / "agent-profiles.json").write_text(json.dumps(profiles))


async def _run(home: Path, repo: Path, agent: str) -> tuple[dict[str, Any], dict[str, Any]]:
    async with mcp_client(home) as client:
        sub = meta_of(await client.call_tool("run_task", {"projectPath": str(repo), "task": "Fix add (test_add_negative)",
                                                          "agentId": agent}))
        done = meta_of(await client.call_tool("wait_task", {"taskId": sub["taskId"], "timeoutMs": 180000}))
        query = meta_of(await client.call_tool("query_task", {"taskId": sub["taskId"], "eventLimit": 50}))
    return done, query


async def test_a_429_retry_loop_ends_the_round_as_an_agent_failure(ts_daemon: dict[str, Any], tmp_path: Path) -> None:
    home = ts_daemon["home"]
    _register(home, "retry-429", {**scripted_profile(mode="retry-429"), "timeoutMs": 600000})
    repo = make_calc_repo(tmp_path / "calc")
    started = time.monotonic()
    done, query = await _run(home, repo, "retry-429")
    assert done["status"] == "failed" and done["errorType"] == "agent_failed", done
    assert "Attempt 3 failed with status 429" in done["message"], done["message"]  # the CLI's own line
    assert time.monotonic() - started < 150  # ended by its retry loop, far from its 600 s timeout
    events = [e["event"] for e in query["recentEvents"]]
    assert events.count("agent_model_retry") >= 3, events
    assert (repo / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"


async def test_aiders_rejected_key_is_an_agent_failure_despite_its_own_files(ts_daemon: dict[str, Any],
                                                                            tmp_path: Path) -> None:
    home = ts_daemon["home"]
    aider_like = {**scripted_profile(mode="aider-401"), "ownedPaths": [".aider*"],
                  "fatalPatterns": [r"api provider is not able to authenticate you"]}
    _register(home, "aider-401", aider_like)
    repo = make_calc_repo(tmp_path / "calc")
    done, query = await _run(home, repo, "aider-401")
    assert done["status"] == "failed" and done["errorType"] == "agent_failed", done
    assert "exit code 0" in done["message"] and "not able to authenticate you" in done["message"], done["message"]
    assert done["roundsUsed"] == 1
    report = json.loads(Path(done["reportFiles"]["json"]).read_text())
    analysis = report["analysis"]
    assert not analysis["changedFiles"] and not analysis["untrackedFiles"], analysis  # .aider* are aider's files
    assert any(".aider*" in note for note in analysis["notes"]), analysis["notes"]
    # nor are they "the agent started changing files"
    assert "file_modification_started" not in [e["event"] for e in query["recentEvents"]], query["recentEvents"]


async def test_a_silent_agent_is_reported_as_stalled(ts_daemon: dict[str, Any], tmp_path: Path) -> None:
    home = ts_daemon["home"]
    _register(home, "silent", {**scripted_profile(mode="silent", extra_env={"SCRIPTED_SILENT_S": "6"}),
                               "liveness": {"stallAfterMs": 2000}})
    repo = make_calc_repo(tmp_path / "calc")
    done, query = await _run(home, repo, "silent")
    stalled = [e for e in query["recentEvents"] if e["event"] == "agent_stalled"]
    assert stalled, query["recentEvents"]
    assert "printed nothing and changed nothing" in stalled[0]["detail"]
    assert "thinking" in stalled[0]["data"]["lastLine"]  # the last line it printed before going quiet
    assert done["status"] == "succeeded", done  # silence is reported, never acted on


async def test_tool_calls_of_structured_output_reach_recent_events(ts_daemon: dict[str, Any], tmp_path: Path) -> None:
    """A CLI printing Claude Code's stream-json (a recorded run of the real release, replayed)."""
    home = ts_daemon["home"]
    replay = tmp_path / "replay.py"
    replay.write_text(
        "import sys, pathlib\n"
        f"sys.stdout.write(pathlib.Path({str(STREAMS / 'claude-success.jsonl')!r}).read_text())\n"
        "p = pathlib.Path('calc.py'); p.write_text(p.read_text().replace('a - b', 'a + b'))\n")
    _register(home, "replay-claude", {"command": sys.executable, "argsTemplate": [str(replay), "<prompt:arg>"],
                                      "outputFormat": "claude-stream-json"})
    repo = make_calc_repo(tmp_path / "calc")
    done, query = await _run(home, repo, "replay-claude")
    assert done["status"] == "succeeded", done
    calls = [e for e in query["recentEvents"] if e["event"] == "agent_tool_call"]
    assert calls and calls[0]["data"]["tool"] == "Edit" and calls[0]["data"]["files"] == ["/tmp/rec/proj/calc.py"]
    report = json.loads(Path(done["reportFiles"]["json"]).read_text())
    assert report["agent"]["usage"] == {"inputTokens": 2400, "outputTokens": 160, "costUsd": pytest.approx(0.0128)}
    assert report["agent"]["finalMessage"] == "Fixed add."
    assert done["progressSummary"].startswith("round 0: Edit")


def test_a_rounds_watches_share_one_git_status_taken_before_the_agent(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The change watch and the output watch start from one ``git status`` (design note 85): one
    call when both are entered, the owned paths still left out of the change watch's view, and
    the output watch's start state is the same snapshot."""
    from tianshu_mcp.adapters.output.formats import OutputReader
    from tianshu_mcp.adapters.output.liveness import Liveness
    from tianshu_mcp.tasks import events as ev
    from tianshu_mcp.tasks.output_watch import OutputWatch

    repo = make_calc_repo(tmp_path / "calc")
    (repo / ".aider.chat.history.md").write_text("the CLI's own file\n")
    (repo / "notes.txt").write_text("the user's own change\n")
    calls: list[str] = []
    real = ev._tree_state

    def counted(project: str) -> Any:
        calls.append(project)
        return real(project)

    monkeypatch.setattr(ev, "_tree_state", counted)

    class Quiet(ev.RoundEvents):
        def send(self, *args: Any, **kwargs: Any) -> None:  # no task record here: nothing to write
            calls.append("sent")

    before = ev.TreeSnapshot(str(repo))
    change = ev.ChangeWatch("t", str(repo), 1, interval_s=3600, events=Quiet("t"), owned_paths=(".aider*",),
                            snapshot=before)
    output = OutputWatch("t", tmp_path / "agent-1.log", 1, OutputReader("text"), Liveness(3, 60000, 600000),
                         str(repo), Quiet("t"), interval_s=3600, snapshot=before)
    with change, output:
        assert calls == [str(repo)]
        assert {row[0] for row in change._start} == {"notes.txt"}
        assert output._tree == before.state and {row[0] for row in before.state} == {"notes.txt", ".aider.chat.history.md"}
    assert "sent" not in calls  # nothing changed while they watched
