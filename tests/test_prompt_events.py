"""A CLI agent that waits for a person shows it in its output; the round's event stream says so
(docs/lifecycle.md §4: ``confirmation_dialog_detected`` / ``awaiting_user_authorization``; docs/lifecycle.md
§4)."""

from __future__ import annotations

import time

import pytest

from conftest import add_scripted_profile, mcp_client, meta_of, run_to_stop
from fixture_project import make_calc_repo
from tianshu_mcp.adapters.prompts import AUTHORIZATION, CONFIRMATION, PromptClassifier, classify_line


@pytest.mark.parametrize(("line", "kind"), [
    ("Apply these edits to calc.py? [y/N]", CONFIRMATION),
    ("Proceed (y/n)", CONFIRMATION),
    ("Do you want to run `rm -rf build`?", CONFIRMATION),
    ("Allow this command to run? (1) yes (2) always (3) no", CONFIRMATION),
    ("Press Enter to continue", CONFIRMATION),
    ("Waiting for your approval…", CONFIRMATION),
    ("To sign in, open https://github.com/login/device and enter the code WDJB-MJHT", AUTHORIZATION),
    ("Please visit https://accounts.example.com/o/oauth2/auth?x=1 to authorize this device", AUTHORIZATION),
    ("Waiting for browser authentication...", AUTHORIZATION),
    ("Log in: open https://claude.ai/oauth in your browser", AUTHORIZATION),
])
def test_prompt_lines_are_recognised(line: str, kind: str) -> None:
    assert classify_line(line) == kind


@pytest.mark.parametrize("line", [
    "Running tests (y coordinates and x coordinates)",
    "Editing calc.py: return a + b",
    "See https://docs.python.org/3/library/re.html for details",
    "Are the tests green? Yes: 2 passed",
    "I will now approve my own plan and write the code.",
    "",
])
def test_ordinary_output_is_not_a_prompt(line: str) -> None:
    assert classify_line(line) is None


def test_a_profile_adds_its_own_patterns() -> None:
    c = PromptClassifier(confirmation=[r"^>>> confirm$"], authorization=[r"token please"])
    assert c.classify(">>> confirm") == CONFIRMATION and c.classify("token please") == AUTHORIZATION
    assert PromptClassifier(confirmation=["(unclosed"]).classify("Proceed (y/n)") == CONFIRMATION  # bad pattern ignored


@pytest.mark.anyio
@pytest.mark.usefixtures("ts_daemon")
async def test_the_event_stream_shows_a_cli_agent_waiting_for_a_person(ts_home, tmp_path, prefect_api) -> None:
    add_scripted_profile(ts_home, "prompter", "prompting")
    repo = make_calc_repo(tmp_path / "calc")
    # the brief itself asks a question: our own log header quotes it and must not count
    sub, meta = await run_to_stop(ts_home, {"projectPath": str(repo), "agentId": "prompter",
                                            "task": "Do you want to fix add? [y/N] test_add_negative"})
    assert meta["status"] == "succeeded", meta
    async with mcp_client(ts_home) as client:
        events = meta_of(await client.call_tool("query_task", {"taskId": sub["taskId"], "eventLimit": 50}))["recentEvents"]
    by = {e["event"]: e for e in events}
    assert by[CONFIRMATION]["data"] == {"round": 0, "line": "Apply these edits to calc.py? [y/N]"}, events
    assert "WDJB-MJHT" in by[AUTHORIZATION]["data"]["line"]
    assert [e["event"] for e in events].count(CONFIRMATION) == 1
    want = {f"tianshu.task.{CONFIRMATION}", f"tianshu.task.{AUTHORIZATION}"}

    def got() -> set[str]:  # Prefect stores events in batches, a moment after they were sent
        feed = prefect_api.post("/events/filter", json={
            "filter": {"event": {"prefix": ["tianshu.task."]},
                       "resource": {"id": [f"prefect.flow-run.{meta['flowRunId']}"]}}, "limit": 50}).json()
        return {e["event"] for e in feed["events"]}

    deadline = time.monotonic() + 60
    while not want <= (seen := got()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert want <= seen, seen


@pytest.mark.anyio
@pytest.mark.usefixtures("ts_daemon")
@pytest.mark.parametrize("limit", [0, 51, -3])
async def test_an_event_limit_outside_1_to_50_is_a_coded_error(ts_home, limit: int) -> None:
    async with mcp_client(ts_home) as client:
        r = await client.call_tool("query_task", {"taskId": "tsk_20260101000000_abcdef", "eventLimit": limit})
    text = r.content[0].text
    assert r.is_error and text.startswith("Error: [INVALID_ARGUMENT]") and "eventLimit" in text, text
