"""The real agent CLIs end to end (docs/real-agents.md, the ``real_agents`` tier): every built-in CLI and ACP
profile, the real releases (pinned, installed by ``scripts/install-real-agents.sh``), driven
through a real MCP client against a service of their own, with the scripted model endpoint as
their model (the one fake: no model is reachable here).

Per agent: a fix that succeeds; a rework round (the first answer is wrong, the verification's
feedback gets the right one); a rejected key (401) and an exhausted quota (429), each ending
``agent_failed`` with the CLI's own line within 60 s of the first failed model call whatever the
CLI's retry policy; a cancel while the model hangs, which kills the agent's whole tree.

Run: ``.venv/bin/python -m pytest -m real_agents tests/test_real_agents.py`` (the first run installs
the CLIs, a few minutes; README, "Real agents").
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from tianshu_mcp.core.procs import is_alive

from conftest import CONSOLE, mcp_client, meta_of, prefect_ui_login, server_env, stop_server, text_of, wait_daemon
from fixture_project import make_calc_repo
from model_endpoint import Edit, Hold, ModelEndpoint, Plan, Say, Script
from real_agents import agent_home, install

pytestmark = [pytest.mark.real_agents, pytest.mark.anyio]

CLI_AGENTS = ("claude", "codex", "gemini", "qwen", "opencode", "aider")
ACP_AGENTS = ("claude-acp", "codex-acp", "gemini-acp", "opencode-acp")
AGENTS = CLI_AGENTS + ACP_AGENTS
BRIEF = "Fix add() in calc.py so that the tests in tests/test_calc.py pass."
FEEDBACK = "Feedback from the previous round"
"""What a rework round's brief carries (:data:`tianshu_mcp.adapters.round.FEEDBACK_HEADER`)."""
CLI_LINES = {401: ("api key", "authenticat", "401", "unauthori"), 429: ("rate limit", "429", "quota", "rate-limit")}
"""Words one of which the CLI's own line for a 401 / a 429 contains (each CLI words it its own way)."""


class Tier:
    """The tier's service and endpoint."""

    def __init__(self, home: Path, endpoint: ModelEndpoint, env: dict[str, str]) -> None:
        self.home, self.endpoint, self.env = home, endpoint, env


@pytest.fixture(scope="module")
def tier(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tier]:
    """Install the CLIs, start the endpoint and a service whose environment points every CLI at it."""
    paths = install()
    root = tmp_path_factory.mktemp("real-agents")
    home = root / "data"
    home.mkdir()
    (home / "config.json").write_text(json.dumps({"concurrency": {"maxRunning": 2}, "defaultTaskTimeoutMs": 600000}))
    with ModelEndpoint() as endpoint:
        env = server_env(home)
        env.update(agent_home(root / "agent-home", endpoint.url))
        env["PATH"] = os.pathsep.join([*paths, env["PATH"]])
        # the host's PWD is elsewhere (docs/real-agents.md: opencode run took its project from $PWD and
        # refused every file of the real one); every agent must still work in its project
        elsewhere = root / "host-cwd"
        elsewhere.mkdir()
        env["PWD"] = str(elsewhere)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        log = open(root / "daemon.log", "wb")
        proc = subprocess.Popen([CONSOLE, "server"], env=env, cwd=elsewhere, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_daemon(home, proc)
            yield Tier(home, endpoint, env)
        finally:
            stop_server(proc)
            log.close()


def _fix(repo: Path) -> Plan:
    return Plan([Edit(str(repo / "calc.py"), "    return a - b", "    return a + b"), Say("Fixed add: it adds now.")])


async def _run(tier: Tier, repo: Path, agent: str, timeout_ms: int = 300000,
               **extra: Any) -> tuple[dict[str, Any], dict[str, Any], float]:
    async with mcp_client(tier.home, env=tier.env) as client:
        sub = meta_of(await client.call_tool("run_task", {"projectPath": str(repo), "task": BRIEF, "agentId": agent,
                                                          **extra}))
        done = meta_of(await client.call_tool("wait_task", {"taskId": sub["taskId"], "timeoutMs": timeout_ms}))
        ended = time.monotonic()
        while done["status"] not in ("succeeded", "failed", "needs_attention", "cancelled", "interrupted"):
            done = meta_of(await client.call_tool("wait_task", {"taskId": sub["taskId"], "timeoutMs": timeout_ms}))
            ended = time.monotonic()
    return sub, done, ended


def _record(line: str) -> None:
    """One line of the tier's results table (test-artifacts/real-agents-failures.tsv), for the record."""
    from test_run_history import ARTIFACTS

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with open(ARTIFACTS / "real-agents-failures.tsv", "a", encoding="utf-8") as fh:
        fh.write(line + "\n")


def _task_events(tier: Tier, task_id: str) -> list[dict[str, Any]]:
    path = tier.home / "tasks" / task_id / "task.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("agent", AGENTS)
async def test_a_fix_succeeds(tier: Tier, tmp_path: Path, agent: str) -> None:
    repo = make_calc_repo(tmp_path / "calc")
    tier.endpoint.script = Script([_fix(repo)])
    sub, done, _ = await _run(tier, repo, agent)
    assert done["status"] == "succeeded", done
    assert "return a + b" in (repo / "calc.py").read_text()
    events = [e["event"] for e in _task_events(tier, sub["taskId"])]
    assert "agent_tool_call" in events or agent == "aider", events  # aider has no structured output


@pytest.mark.parametrize("agent", AGENTS)
async def test_a_rework_round_fixes_what_the_first_missed(tier: Tier, tmp_path: Path, agent: str) -> None:
    repo = make_calc_repo(tmp_path / "calc")
    wrong = Plan([Edit(str(repo / "calc.py"), "    return a - b", "    return abs(a) + abs(b)"), Say("Fixed add.")])
    right = Plan([Edit(str(repo / "calc.py"), "    return abs(a) + abs(b)", "    return a + b"), Say("Fixed negatives.")],
                 match=FEEDBACK)
    tier.endpoint.script = Script([wrong, right])
    _, done, _ = await _run(tier, repo, agent, autoFixRounds=2)
    assert done["status"] == "succeeded", done
    assert done["roundsUsed"] == 2, done


@pytest.mark.parametrize("status", [401, 429])
@pytest.mark.parametrize("agent", AGENTS)
async def test_a_model_error_is_an_agent_failure_with_the_clis_own_line(tier: Tier, tmp_path: Path, agent: str,
                                                                       status: int) -> None:
    repo = make_calc_repo(tmp_path / "calc")
    tier.endpoint.script = Script([_fix(repo)], fail=status)
    tier.endpoint.calls.clear()
    sub, done, ended = await _run(tier, repo, agent)
    first = tier.endpoint.first_failed_at()
    assert first is not None, "the CLI never called the model"
    assert done["status"] == "failed" and done.get("errorType") == "agent_failed", done
    message = str(done.get("message") or "").lower()
    assert any(word in message for word in CLI_LINES[status]), done["message"]
    _record(f"{agent}\t{status}\t{ended - first:.1f} s\t{done['message'][:160]}")
    assert ended - first <= 60, f"{ended - first:.1f} s from the first failed model call to the task's end"


@pytest.mark.parametrize("agent", AGENTS)
async def test_a_cancel_kills_the_agents_tree(tier: Tier, tmp_path: Path, agent: str) -> None:
    repo = make_calc_repo(tmp_path / "calc")
    tier.endpoint.script = Script([_fix(repo)], hang=True)
    tier.endpoint.calls.clear()
    async with mcp_client(tier.home, env=tier.env) as client:
        sub = meta_of(await client.call_tool("run_task", {"projectPath": str(repo), "task": BRIEF, "agentId": agent}))
        with anyio.fail_after(180):
            while not tier.endpoint.model_calls():
                await anyio.sleep(0.2)
        tree = _processes_in(repo)
        assert tree, "no agent process runs in the project"
        r = await client.call_tool("manage_task", {"taskId": sub["taskId"], "action": "cancel"})
        assert not r.is_error, text_of(r)
        done = meta_of(await client.call_tool("wait_task", {"taskId": sub["taskId"], "timeoutMs": 120000}))
    assert done["status"] == "cancelled", done
    with anyio.fail_after(30):
        while [p for p in tree if is_alive(p)]:
            await anyio.sleep(0.2)


def _processes_in(repo: Path) -> list[psutil.Process]:
    """Processes whose working directory is inside ``repo`` (the agent and its children)."""
    out = []
    for proc in psutil.process_iter(["cwd"]):
        cwd = proc.info.get("cwd")
        if cwd and (cwd == str(repo) or cwd.startswith(str(repo) + os.sep)):
            out.append(proc)
    return out



@pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="Debian chromium is not installed")
async def test_progress_shows_while_the_agent_works(tier: Tier, tmp_path: Path) -> None:
    """Claude Code's stream-json, read as it comes: the tool call is in ``query_task.recentEvents``
    and in the Prefect flow-run log while the agent still works (its model holds its last answer);
    a real browser shows the log."""
    from playwright.async_api import async_playwright

    from test_run_history import ARTIFACTS

    repo = make_calc_repo(tmp_path / "calc")
    tier.endpoint.hold()
    tier.endpoint.script = Script([Plan([Edit(str(repo / "calc.py"), "    return a - b", "    return a + b"),
                                         Hold("Fixed add.")])])
    async with mcp_client(tier.home, env=tier.env) as client:
        sub = meta_of(await client.call_tool("run_task", {"projectPath": str(repo), "task": BRIEF, "agentId": "claude"}))
        with anyio.fail_after(180):
            while True:
                query = meta_of(await client.call_tool("query_task", {"taskId": sub["taskId"], "eventLimit": 20}))
                calls = [e for e in query.get("recentEvents") or [] if e["event"] == "agent_tool_call"]
                if calls:
                    break
                await anyio.sleep(0.3)
        assert query["status"] == "running" and calls[0]["data"]["tool"] == "Edit", query
        ui = json.loads((tier.home / "prefect" / "service.json").read_text())["apiUrl"][: -len("/api")]
        credentials = (tier.home / "prefect" / "credentials").read_text().strip()
        shots = ARTIFACTS / "ui"
        shots.mkdir(parents=True, exist_ok=True)
        try:
            async with async_playwright() as p:
                browser = await p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
                try:
                    page = await browser.new_page(viewport={"width": 1400, "height": 1000})
                    await prefect_ui_login(page, ui, credentials)
                    await page.goto(f"{ui}/runs/flow-run/{query['flowRunId']}", wait_until="networkidle", timeout=120000)
                    await page.get_by_text("round 0: Edit").first.wait_for(timeout=60000)
                    await page.get_by_text("Running").first.wait_for(timeout=60000)
                    await page.screenshot(path=str(shots / "flow-run-log-with-agent-progress.png"), full_page=True)
                finally:
                    await browser.close()
        finally:
            tier.endpoint.release()
        done = meta_of(await client.call_tool("wait_task", {"taskId": sub["taskId"], "timeoutMs": 300000}))
    assert done["status"] == "succeeded", done
    assert (shots / "flow-run-log-with-agent-progress.png").stat().st_size > 10000


def _gemini_variant(tier: Tier, agent_id: str, home: Path | None = None, args: list[str] | None = None) -> None:
    """Register a copy of the built-in ``gemini`` profile (its ``exitCodes`` included) with another
    HOME or command line."""
    from tianshu_mcp.adapters.profiles import builtin_profiles

    raw = builtin_profiles()["gemini"].to_json()
    if home is not None:
        raw["env"] = {**raw.get("env", {}), "HOME": str(home)}
    if args is not None:
        raw["argsTemplate"] = args
    path = tier.home / "agent-profiles.json"
    profiles = json.loads(path.read_text()) if path.exists() else {"profiles": {}}
    profiles["profiles"][agent_id] = raw
    path.write_text(json.dumps(profiles))


@pytest.mark.parametrize("code,setup,meaning", [
    (41, "no-settings", "invalid auth method"),
    (42, "interactive", "input error"),
    (53, "one-turn", "turn limit"),
    (55, "untrusted", "not trusted"),
])
async def test_gemini_exit_codes_say_what_they_mean(tier: Tier, tmp_path: Path, code: int, setup: str,
                                                    meaning: str) -> None:
    """Gemini CLI 0.61's own exit codes, each provoked for real, end the task ``agent_failed`` with
    what the code means (the built-in profile's ``exitCodes``)."""
    repo = make_calc_repo(tmp_path / "calc")
    tier.endpoint.script = Script([_fix(repo)])
    home = tmp_path / "gemini-home"
    base = ["--approval-mode", "auto_edit", "--skip-trust", "--output-format", "stream-json", "--prompt=<prompt:arg>"]
    if setup == "no-settings":
        home.mkdir()
        _gemini_variant(tier, f"gemini-{code}", home=home)
    elif setup == "one-turn":
        (home / ".gemini").mkdir(parents=True)
        (home / ".gemini" / "settings.json").write_text(json.dumps(
            {"security": {"auth": {"selectedType": "gemini-api-key"}}, "model": {"maxSessionTurns": 1}}))
        _gemini_variant(tier, f"gemini-{code}", home=home)
    elif setup == "interactive":
        _gemini_variant(tier, f"gemini-{code}", args=["--approval-mode", "auto_edit", "--skip-trust",
                                                      "--prompt-interactive=<prompt:arg>"])
    else:
        _gemini_variant(tier, f"gemini-{code}", args=[a for a in base if a != "--skip-trust"])
    _, done, _ = await _run(tier, repo, f"gemini-{code}")
    assert done["status"] == "failed" and done["errorType"] == "agent_failed", done
    assert f"exit code {code} (" in done["message"] and meaning in done["message"], done["message"]
