"""Concurrency gates (work pool limit = maxRunning, one queue per project with limit 1) and
cancellation (docs/architecture.md §4–§5; docs/main-job.md §6 and §10)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from conftest import mcp_client, meta_of, text_of
from fixture_project import make_calc_repo, scripted_profile

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("ts_daemon")]


def intervals(trace: Path, repos: list[Path]) -> list[tuple[str, float, float]]:
    """(repo, start, end) of every sleep-mode agent run in ``repos`` from the trace file."""
    starts: dict[str, list[float]] = {}
    out = []
    wanted = {str(r) for r in repos}
    for line in trace.read_text().splitlines():
        kind, cwd, ts = line.split(" ")
        if cwd not in wanted:
            continue
        if kind == "start":
            starts.setdefault(cwd, []).append(float(ts))
        else:
            out.append((cwd, starts[cwd].pop(0), float(ts)))
    return out


def max_overlap(spans: list[tuple[str, float, float]]) -> int:
    events = sorted([(s, 1) for _, s, _ in spans] + [(e, -1) for _, _, e in spans])
    cur = best = 0
    for _, d in events:
        cur += d
        best = max(best, cur)
    return best


async def submit(client: Any, repo: Path, agent: str) -> dict[str, Any]:
    r = await client.call_tool("run_task", {"projectPath": str(repo), "task": "Fix add", "agentId": agent, "autoVerify": False})
    assert not r.is_error, text_of(r)
    return meta_of(r)


async def wait_all(client: Any, ids: list[str]) -> list[dict[str, Any]]:
    out = []
    for task_id in ids:
        r = await client.call_tool("wait_task", {"taskId": task_id, "timeoutMs": 120000})
        out.append(meta_of(r))
    return out


async def test_one_project_runs_serially_and_the_second_waits_queued(ts_home: Path, tmp_path: Path) -> None:
    # the first agent is held until the test has seen the second task queued behind it, so the
    # observation does not depend on how fast the machine polls
    gate = tmp_path / "gate"
    profiles = json.loads((ts_home / "agent-profiles.json").read_text())
    profiles["profiles"]["scripted-gated"] = scripted_profile(
        mode="sleep", extra_env={"SCRIPTED_TRACE": str(ts_home / "sleep-trace.txt"), "SCRIPTED_SLEEP": "0.5",
                                 "SCRIPTED_GATE": str(gate)})
    (ts_home / "agent-profiles.json").write_text(json.dumps(profiles))
    repo = make_calc_repo(tmp_path / "serial")
    async with mcp_client(ts_home) as client:
        a = await submit(client, repo, "scripted-gated")
        b = await submit(client, repo, "scripted-gated")
        assert b["projectActiveTask"]["taskId"] == a["taskId"]
        saw_b_queued_while_a_running = False
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not saw_b_queued_while_a_running:
            qa = meta_of(await client.call_tool("query_task", {"taskId": a["taskId"]}))
            qb = meta_of(await client.call_tool("query_task", {"taskId": b["taskId"]}))
            saw_b_queued_while_a_running = qa["status"] == "running" and qb["status"] == "queued"
            await anyio.sleep(0.2)
        gate.touch()
        done = await wait_all(client, [a["taskId"], b["taskId"]])
    assert saw_b_queued_while_a_running
    assert [d["status"] for d in done] == ["succeeded", "succeeded"]
    spans = intervals(ts_home / "sleep-trace.txt", [repo])
    assert len(spans) == 2 and max_overlap(spans) == 1


async def test_projects_run_side_by_side_never_above_max_running(ts_home: Path, tmp_path: Path) -> None:
    # each agent waits until two agents have started: two projects must run side by side (or the
    # first two never finish), whatever the machine's load; the third must wait for a free slot
    trace = tmp_path / "trace.txt"
    profiles = json.loads((ts_home / "agent-profiles.json").read_text())
    profiles["profiles"]["scripted-meet"] = scripted_profile(
        mode="sleep", extra_env={"SCRIPTED_TRACE": str(trace), "SCRIPTED_SLEEP": "1", "SCRIPTED_RENDEZVOUS": "2"})
    (ts_home / "agent-profiles.json").write_text(json.dumps(profiles))
    repos = [make_calc_repo(tmp_path / f"p{i}") for i in range(3)]
    async with mcp_client(ts_home) as client:
        ids = [(await submit(client, repo, "scripted-meet"))["taskId"] for repo in repos]
        done = await wait_all(client, ids)
    assert all(d["status"] == "succeeded" for d in done)
    spans = intervals(trace, repos)
    assert len(spans) == 3
    assert max_overlap(spans) == 2  # side by side, and capped by concurrency.maxRunning = 2


def _tree_pids(home: Path) -> list[int]:
    path = home / "hang-pids.txt"
    return [int(p) for line in path.read_text().splitlines() for p in line.split()] if path.exists() else []


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def test_cancel_queued_at_once_and_running_with_its_whole_tree(ts_home: Path, tmp_path: Path) -> None:
    # how long a cancel takes is bench/bench_gate.py's (manage_task(cancel)); here: what it does
    repo = make_calc_repo(tmp_path / "cancel")
    (ts_home / "hang-pids.txt").unlink(missing_ok=True)
    async with mcp_client(ts_home) as client:
        running = await submit(client, repo, "scripted-hang")
        queued = await submit(client, repo, "scripted-hang")
        # wait until the first agent and its SIGTERM-ignoring grandchild exist
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(_tree_pids(ts_home)) < 2:
            await anyio.sleep(0.2)
        pids = _tree_pids(ts_home)
        assert len(pids) == 2 and all(_alive(p) for p in pids)

        r = await client.call_tool("manage_task", {"taskId": queued["taskId"], "action": "cancel", "reason": "not needed"})
        assert not r.is_error and meta_of(r)["status"] == "cancelled"

        r = await client.call_tool("manage_task", {"taskId": running["taskId"], "action": "cancel", "reason": "stop"})
        meta = meta_of(r)
        assert meta["status"] == "cancelled", text_of(r)
        assert not any(_alive(p) for p in pids)  # dead when the answer comes
        assert meta["errorType"] == "cancelled" and meta["cancelReason"] == "stop" and meta["abortSource"] == "user"
        # cancelling a final task is a no-op, not an error
        r = await client.call_tool("manage_task", {"taskId": running["taskId"], "action": "cancel"})
        assert not r.is_error and "already final" in text_of(r)
    assert len(_tree_pids(ts_home)) == 2  # the queued task never started an agent


async def test_a_profile_edit_mid_task_does_not_change_or_break_it(ts_home: Path, tmp_path: Path) -> None:
    # the task keeps the profile its first round ran with: a half-saved agent-profiles.json
    # (invalid JSON) written while round 0 runs neither fails nor changes round 1
    gate, trace = tmp_path / "gate", tmp_path / "trace.txt"
    path = ts_home / "agent-profiles.json"
    profiles = json.loads(path.read_text())
    profiles["profiles"]["scripted-held"] = scripted_profile(
        mode="sleep", extra_env={"SCRIPTED_TRACE": str(trace), "SCRIPTED_SLEEP": "0", "SCRIPTED_GATE": str(gate)})
    path.write_text(json.dumps(profiles))
    good = path.read_text()
    repo = make_calc_repo(tmp_path / "calc")
    try:
        async with mcp_client(ts_home) as client:
            sub = await client.call_tool("run_task", {"projectPath": str(repo), "task": "Fix add", "agentId": "scripted-held",
                                                      "autoFixRounds": 1})
            tid = meta_of(sub)["taskId"]
            with anyio.fail_after(180):
                while not (trace.exists() and "start" in trace.read_text()):
                    await anyio.sleep(0.2)
            path.write_text('{"profiles": {"scripted-held": ')  # an editor's half-saved file
            gate.touch()
            done = meta_of(await client.call_tool("wait_task", {"taskId": tid, "timeoutMs": 180000}))
    finally:
        path.write_text(good)
    assert done["status"] == "succeeded" and done["roundsUsed"] == 2, done
    assert trace.read_text().count("start") == 2
