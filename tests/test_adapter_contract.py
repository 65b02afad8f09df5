"""The contract every agent driver must keep (docs/agent-adapters.md §7), one suite parametrised over the
drivers (through :func:`tianshu_mcp.adapters.drivers.driver_for`, the path dispatch takes):

* a callback that raises (event sink, process-record sink) never reaches the driver;
* an abort kills the agent's whole process tree and reports ``killed``;
* an agent that cannot start is a hard failure (``spawn``) — and, end to end through the MCP
  client, no verification round is spent on it.

A new driver joins by adding a :class:`Harness` to :data:`HARNESSES`.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest

from conftest import mcp_client, meta_of, pid_running
from fake_desktop import free_port, gui_profile
from fixture_project import WRONG_FIX, acp_profile, make_calc_repo, scripted_profile
from tianshu_mcp.adapters.drivers import driver_for
from tianshu_mcp.adapters.profiles import AgentProfile, ResolvedAgent, resolve_profile
from tianshu_mcp.adapters.round import AgentRunContext, AgentRunResult, RoundHooks
from tianshu_mcp.core.procs import ProcRecord, tree_alive


@dataclass
class Harness:
    """How to make a driver's profiles: ``working`` (fixes calc.py), ``hanging`` (runs until
    stopped), both taking the test's tmp dir."""

    name: str
    working: Callable[[Path], dict[str, Any]]
    hanging: Callable[[Path], dict[str, Any]]


HARNESSES = [
    Harness("spawn", lambda tmp: scripted_profile(extra_env={"SCRIPTED_PIDFILE": str(tmp / "pids.txt")}),
            lambda tmp: scripted_profile(mode="hang", extra_env={"SCRIPTED_PIDFILE": str(tmp / "pids.txt")})),
    Harness("acp", lambda tmp: acp_profile(tmp), lambda tmp: acp_profile(tmp, "hang")),
    Harness("gui", lambda tmp: gui_profile(tmp / "app", free_port()),
            lambda tmp: gui_profile(tmp / "app", free_port(), "hang")),
]


@pytest.fixture(params=HARNESSES, ids=[h.name for h in HARNESSES])
def harness(request: pytest.FixtureRequest) -> Harness:
    return request.param


class Runner:
    """Runs rounds of one task through the driver of a profile."""

    def __init__(self, tmp: Path, raw: dict[str, Any], task_id: str) -> None:
        self.tmp, self.task_id = tmp, task_id
        self.repo = make_calc_repo(tmp / f"repo-{task_id}")
        self.task_dir = tmp / f"task-{task_id}"
        self.task_dir.mkdir()
        self.agent: ResolvedAgent = resolve_profile(task_id, AgentProfile.model_validate(raw))
        assert self.agent.ok, self.agent.message
        assert self.agent.profile is not None
        self.driver = driver_for(self.agent.profile)
        self.records: list[ProcRecord] = []

    def run(self, hooks: RoundHooks) -> AgentRunResult:
        ctx = AgentRunContext(self.task_id, str(self.repo), self.task_dir, 0, "Fix add() in calc.py", timeout_ms=120000)
        return self.driver.run_round(ctx, self.agent, hooks)

    def close(self) -> None:
        self.driver.end_session(self.task_id)


@pytest.fixture
def runners(tmp_path: Path) -> Any:
    made: list[Runner] = []

    def make(raw: dict[str, Any], task_id: str = "tsk_contract") -> Runner:
        r = Runner(tmp_path, raw, task_id)
        made.append(r)
        return r

    yield make
    for r in made:
        r.close()


def test_raising_callbacks_never_reach_the_driver(harness: Harness, runners: Any, tmp_path: Path) -> None:
    r = runners(harness.working(tmp_path))
    calls: list[str] = []

    def sink(name: str, detail: str, data: dict[str, Any]) -> None:
        calls.append(name)
        raise RuntimeError("the event store is down")

    def on_start(rec: ProcRecord) -> None:
        r.records.append(rec)
        raise OSError("disk full")

    res = r.run(RoundHooks(should_stop=lambda: 1 / 0 > 0, on_start=on_start, on_event=sink))
    assert (res.ok, res.exit_code, res.hard_failure) == (True, 0, False), res
    assert (r.repo / "calc.py").read_text() == WRONG_FIX
    assert r.records, "on_start was not called"


def test_abort_kills_the_whole_tree(harness: Harness, runners: Any, tmp_path: Path) -> None:
    r = runners(harness.hanging(tmp_path))
    stop = threading.Event()
    out: list[AgentRunResult] = []
    th = threading.Thread(target=lambda: out.append(r.run(RoundHooks(should_stop=stop.is_set, on_start=r.records.append))))
    th.start()
    deadline = time.monotonic() + 120
    while not r.records:
        assert time.monotonic() < deadline and th.is_alive(), "the agent never started"
        time.sleep(0.05)
    stop.set()  # as soon as it runs: wherever the agent is in its start-up, the abort must hold
    th.join(timeout=60)
    assert out and out[0].killed and not out[0].ok, out
    r.close()
    deadline = time.monotonic() + 30
    while any(tree_alive(rec) for rec in r.records):
        assert time.monotonic() < deadline, "the agent's tree outlived the abort"
        time.sleep(0.05)
    pids = tmp_path / "pids.txt"
    if pids.exists():  # the scripted agent's SIGTERM-proof grandchild too

        for pid in (int(p) for p in pids.read_text().split()):
            assert not pid_running(pid)


def test_an_agent_that_cannot_start_is_a_spawn_hard_failure(harness: Harness, runners: Any, tmp_path: Path) -> None:
    raw = harness.working(tmp_path)
    broken = tmp_path / "not-executable"
    broken.write_text("#!/bin/sh\nexit 0\n")  # exists, resolves, but has no execute bit
    raw["command"] = str(broken)
    r = runners(raw)
    res = r.run(RoundHooks())
    assert (res.ok, res.hard_failure, res.error_type, res.exit_code) == (False, True, "spawn", None), res


async def _run_to_its_end(home: Path, tmp_path: Path, agent_id: str,
                          profile: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Register ``profile`` as ``agent_id``, run_task on a fresh calc repository with 2 rework
    rounds, then wait_task: ``(submitted, final meta)``."""
    profiles = json.loads((home / "agent-profiles.json").read_text())
    profiles["profiles"][agent_id] = profile
    (home / "agent-profiles.json").write_text(json.dumps(profiles))
    repo = make_calc_repo(tmp_path / "calc")
    async with mcp_client(home) as client:
        sub = meta_of(await client.call_tool("run_task", {"projectPath": str(repo), "task": "Fix add",
                                                          "agentId": agent_id, "autoFixRounds": 2}))
        done = meta_of(await client.call_tool("wait_task", {"taskId": sub["taskId"], "timeoutMs": 180000}))
    return sub, done


@pytest.mark.anyio
async def test_a_hard_failure_spends_no_verification_round(harness: Harness, ts_daemon: dict[str, Any],
                                                           tmp_path: Path) -> None:
    home = ts_daemon["home"]
    raw = harness.working(tmp_path)
    broken = tmp_path / "not-executable"
    broken.write_text("#!/bin/sh\nexit 0\n")
    raw["command"] = str(broken)
    sub, done = await _run_to_its_end(home, tmp_path, f"broken-{harness.name}", raw)
    assert done["status"] == "failed" and done["errorType"] == "spawn", done
    assert done["roundsUsed"] == 0 and not done.get("reportFiles"), done
    assert not list((home / "tasks" / sub["taskId"]).glob("report-*")), "a verification round ran"


@pytest.mark.anyio
async def test_a_setup_failure_spends_no_verification_round(ts_daemon: dict[str, Any], tmp_path: Path) -> None:
    # the other hard failure: the agent starts but its session cannot be set up (an ACP agent whose
    # initialize answers an error → errorType setup_failed), end to end through the MCP client
    home = ts_daemon["home"]
    sub, done = await _run_to_its_end(home, tmp_path, "broken-acp-init", acp_profile(tmp_path, "init-fail"))
    # docs/agents-tasks.md §3 4.b.3: a hardFailure ends failed/<errorType>, no round spent
    assert done["errorType"] == "setup_failed" and done["status"] == "failed", done
    assert "the model backend is down" in json.dumps(done, ensure_ascii=False), done  # the agent's own reason
    assert done["roundsUsed"] == 0 and not done.get("reportFiles"), done
    tdir = home / "tasks" / sub["taskId"]
    assert not list(tdir.glob("report-*")), "a verification round ran"
    events = [json.loads(line)["event"] for line in (tdir / "task.jsonl").read_text().splitlines()]
    assert "verify_start" not in events and "rework_triggered" not in events and events.count("task_dispatched") == 1
    trace = [json.loads(line)["event"] for line in (tmp_path / "trace.jsonl").read_text().splitlines()]
    assert trace == ["initialize"], trace  # no session, no prompt



def test_ending_a_cli_tasks_sessions_loads_neither_acp_nor_playwright() -> None:
    import subprocess
    import sys

    code = ("import sys; from tianshu_mcp.adapters.drivers import end_all_sessions; end_all_sessions('tsk_x'); "
            "print(sorted(m for m in ('acp', 'playwright', 'tianshu_mcp.adapters.acp.driver', 'tianshu_mcp.adapters.cdp.driver') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]"
