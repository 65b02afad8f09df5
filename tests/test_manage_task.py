"""manage_task, every action and rule of docs/tools.md §3.6 (docs/lifecycle.md §2 and §8).

Covered elsewhere and named in docs/lifecycle.md §2: cancel of a queued and of a running
task and of a final one (test_gates_cancel), of a needs_user task and continue's rules
(test_needs_user), an exhausted task's single extra round (test_e2e_run_task)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from conftest import add_scripted_profile, mcp_client, meta_of, run_to_stop, task_runs, text_of
from fixture_project import make_calc_repo

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("ts_daemon")]

BRANCH_VIOLATIONS = [
    ({"action": "cancel", "message": "x"}, "action=cancel does not accept: message"),
    ({"action": "cancel", "message": ""}, "action=cancel does not accept: message"),  # present counts, even empty
    ({"action": "cancel", "feedback": "f", "repairHint": "h"}, "action=cancel does not accept: feedback, repairHint"),
    ({"action": "continue", "message": "m", "reason": "r"}, "action=continue does not accept: reason"),
    ({"action": "continue", "message": "m", "feedback": "f"}, "action=continue does not accept: feedback"),
    ({"action": "continue", "message": "m", "repairHint": "h"}, "action=continue does not accept: repairHint"),
    ({"action": "continue"}, "action=continue needs a non-empty message"),
    ({"action": "continue", "message": " \n\t"}, "action=continue needs a non-empty message"),
    ({"action": "rework", "reason": "r"}, "action=rework does not accept: reason"),
    ({"action": "rework", "message": "m", "feedback": "f"}, "action=rework does not accept: message"),
]


@pytest.mark.parametrize(("args", "expected"), BRANCH_VIOLATIONS)
async def test_every_branch_argument_violation_is_a_coded_error(ts_home: Path, args: dict[str, Any],
                                                                expected: str) -> None:
    async with mcp_client(ts_home) as client:
        r = await client.call_tool("manage_task", {"taskId": "tsk_20260101000000_abcdef", **args})
    assert r.is_error and text_of(r).startswith("Error: [INVALID_ARGUMENT]") and expected in text_of(r), text_of(r)


@pytest.mark.parametrize("action", ["cancel", "continue", "rework"])
async def test_an_unknown_task_is_task_not_found_for_every_action(ts_home: Path, action: str) -> None:
    args = {"taskId": "tsk_20260101000000_abcdef", "action": action, **({"message": "yes"} if action == "continue" else {})}
    async with mcp_client(ts_home) as client:
        r = await client.call_tool("manage_task", args)
    assert r.is_error and "[TASK_NOT_FOUND]" in text_of(r), text_of(r)


async def test_rework_feeds_the_hint_first_then_the_feedback_once_and_rounds_continue(ts_home: Path,
                                                                                     tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path / "calc")
    sub, meta = await run_to_stop(ts_home, {"projectPath": str(repo), "task": "Fix add", "agentId": "scripted-noop"})
    assert meta["status"] == "failed" and meta["roundsUsed"] == 1, meta
    tid = sub["taskId"]
    tdir = ts_home / "tasks" / tid
    async with mcp_client(ts_home) as client:
        r = await client.call_tool("manage_task", {"taskId": tid, "action": "rework", "feedback": "  FEEDBACK-ONE  ",
                                                   "repairHint": "HINT-ONE: calc.py:2 use +"})
        assert not r.is_error, text_of(r)
        assert "with feedback, with a structured repair hint (25 chars)" in text_of(r) and "rounds used 1" in text_of(r)
        once = meta_of(await client.call_tool("wait_task", {"taskId": tid, "timeoutMs": 180000}))
        assert once["status"] == "failed" and once["roundsUsed"] == 2, once
        r = await client.call_tool("manage_task", {"taskId": tid, "action": "rework"})
        assert not r.is_error, text_of(r)
        twice = meta_of(await client.call_tool("wait_task", {"taskId": tid, "timeoutMs": 180000}))
    assert twice["status"] == "failed" and twice["roundsUsed"] == 3 and twice["round"] == twice["reportRound"] == 2, twice
    prompt1 = (tdir / "prompt-1.txt").read_text()
    assert prompt1.index("HINT-ONE") < prompt1.index("FEEDBACK-ONE") and "FEEDBACK-ONE  " not in prompt1  # trimmed
    prompt2 = (tdir / "prompt-2.txt").read_text()
    assert "HINT-ONE" not in prompt2 and "FEEDBACK-ONE" not in prompt2  # consumed by one round only
    # and, like an automatic round, each manual one hears what failed last time, after the caller's words
    assert prompt1.index("FEEDBACK-ONE") < prompt1.index("no-changes") and "no-changes" in prompt2
    events = [json.loads(line) for line in (tdir / "task.jsonl").read_text().splitlines()]
    assert [e["data"]["mode"] for e in events if e["event"] == "rework_triggered"] == ["manual", "manual"]


async def test_rework_from_succeeded_and_from_cancelled(ts_home: Path, tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path / "calc")
    sub, meta = await run_to_stop(ts_home, {"projectPath": str(repo), "task": "Fix add: test_add_negative fails",
                                            "agentId": "scripted"})
    assert meta["status"] == "succeeded" and meta["roundsUsed"] == 1, meta
    # the previous run's process still ending (under load a cancel's forced final state comes
    # before its process is done): the rework resets nothing until it has exited
    ending, exited = _previous_run_still_ending(ts_home / "tasks" / sub["taskId"], tmp_path / "exited", 2.0)
    async with mcp_client(ts_home) as client:
        r = await client.call_tool("manage_task", {"taskId": sub["taskId"], "action": "rework", "feedback": "polish"})
        assert exited.exists() and ending.wait(5) == 0, "the rework went ahead while the previous run's process ran"
        assert not r.is_error and meta_of(r)["status"] == "queued" and "finishedAt" not in meta_of(r), text_of(r)
        again = meta_of(await client.call_tool("wait_task", {"taskId": sub["taskId"], "timeoutMs": 180000}))
    assert again["status"] == "succeeded" and again["roundsUsed"] == 2 and again["round"] == again["reportRound"] == 1, again

    # a cancelled task: its agent was stuck; the profile is fixed, then the task is reworked
    other = make_calc_repo(tmp_path / "other")
    add_scripted_profile(ts_home, "flaky-hang", "hang")
    async with mcp_client(ts_home) as client:
        tid = meta_of(await client.call_tool("run_task", {"projectPath": str(other), "task": "Fix add",
                                                          "agentId": "flaky-hang"}))["taskId"]
        await _wait_status(client, tid, "running")
        r = await client.call_tool("manage_task", {"taskId": tid, "action": "cancel", "reason": "stuck"})
        assert meta_of(r)["status"] == "cancelled", text_of(r)
        add_scripted_profile(ts_home, "flaky-hang", "normal")
        r = await client.call_tool("manage_task", {"taskId": tid, "action": "rework",
                                                   "feedback": "try again: test_add_negative"})
        assert not r.is_error, text_of(r)
        assert "cancelReason" not in meta_of(r) and "errorType" not in meta_of(r)
        done = meta_of(await client.call_tool("wait_task", {"taskId": tid, "timeoutMs": 180000}))
    assert done["status"] == "succeeded" and done["roundsUsed"] == 1, done  # the cancelled round never finished


def _previous_run_still_ending(task_dir: Path, exited: Path, seconds: float) -> tuple[Any, Path]:
    """A stand-in for a flow-run process still ending: recorded in ``flow-proc.json``, it exits
    by itself after ``seconds`` and leaves ``exited`` behind."""
    import subprocess
    import sys

    from tianshu_mcp.core.procs import record_of, save_record

    proc = subprocess.Popen([sys.executable, "-c", "import sys, time; time.sleep(float(sys.argv[2])); "
                             "open(sys.argv[1], 'w').write('gone')", str(exited), str(seconds)],
                            start_new_session=True)
    save_record(task_dir / "flow-proc.json", record_of(proc.pid))
    return proc, exited


def test_a_previous_run_that_does_not_exit_is_killed_before_the_rework(tmp_path: Path, monkeypatch: Any) -> None:
    """One that never exits is killed after PREVIOUS_RUN_EXIT_S (it would otherwise write its old
    end over the reworked task)."""
    import subprocess
    import sys
    from types import SimpleNamespace

    from tianshu_mcp.core.procs import record_of, save_record
    from tianshu_mcp.mcp_server import taskops

    from tianshu_mcp.core.ids import new_task_id

    home = tmp_path / "home"
    service = taskops.TaskService(SimpleNamespace(home=home))  # type: ignore[arg-type]
    task_id, never_ran = new_task_id(), new_task_id()
    (home / "tasks" / task_id).mkdir(parents=True)
    stuck = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    try:
        save_record(home / "tasks" / task_id / "flow-proc.json", record_of(stuck.pid))
        monkeypatch.setattr(taskops, "PREVIOUS_RUN_EXIT_S", 0.5)
        service._end_previous_process(task_id)
        assert stuck.wait(5) is not None
    finally:
        stuck.kill()
    service._end_previous_process(never_ran)  # no record at all: nothing to wait for, no error


async def _wait_status(client: Any, task_id: str, status: str, within_s: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + within_s
    while True:
        meta = meta_of(await client.call_tool("query_task", {"taskId": task_id}))
        if meta["status"] == status:
            return meta
        assert time.monotonic() < deadline, f"{task_id} never reached {status}: {meta}"
        await anyio.sleep(0.2)


async def test_cancel_while_verifying_kills_the_check_and_rework_is_refused_while_active(
        ts_home: Path, tmp_path: Path, prefect_api: Any) -> None:
    marker = tmp_path / "check-started"
    code = f"import os, time; open({str(marker)!r}, 'w').write(str(os.getpid())); time.sleep(600)"
    repo = make_calc_repo(tmp_path / "calc", checks=[{"name": "slow", "cmd": ["python3", "-c", code]}])
    async with mcp_client(ts_home) as client:
        tid = meta_of(await client.call_tool("run_task", {"projectPath": str(repo), "task": "Fix add",
                                                          "agentId": "scripted"}))["taskId"]
        await _wait_status(client, tid, "verify_start")
        deadline = time.monotonic() + 60
        while not marker.exists() or not marker.read_text():
            assert time.monotonic() < deadline, "the check never started"
            await anyio.sleep(0.1)
        check = psutil.Process(int(marker.read_text()))
        r = await client.call_tool("manage_task", {"taskId": tid, "action": "rework"})
        assert r.is_error and "[INVALID_STATE]" in text_of(r) and "verify_start" in text_of(r), text_of(r)
        r = await client.call_tool("manage_task", {"taskId": tid, "action": "cancel", "reason": "wrong branch"})
        meta = meta_of(r)
    assert meta["status"] == "cancelled" and meta["cancelReason"] == "wrong branch", text_of(r)
    assert meta["errorType"] == "cancelled" and meta["abortSource"] == "user"
    deadline = time.monotonic() + 30
    while check.is_running() and check.status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the check survived the cancel"
        await anyio.sleep(0.1)
    # a round stopped by a cancel is no verdict on the work: not a FAIL report, not a failed task run
    tdir = ts_home / "tasks" / tid
    report = json.loads((tdir / "report-0.json").read_text())
    assert report["verdict"] == "cancelled" and not report["passed"], report["verdict"]
    md = (tdir / "report-0.md").read_text()
    assert "**[CANCELLED]**" in md and "[ABORTED] slow" in md and "[FAIL] slow" not in md
    runs = {tr["name"]: tr["state"]["type"] for tr in task_runs(prefect_api, meta["flowRunId"])}
    assert runs["verify-round-0"] == "CANCELLED", runs


async def test_the_agents_outcome_is_in_every_reply_also_without_a_change_or_a_verdict(ts_home: Path,
                                                                                       tmp_path: Path) -> None:
    """docs/lifecycle.md §8: exit code and duration in the meta, the status line, the message and the
    report — for a no-change failure and for NOTHING_VERIFIED."""
    repo = make_calc_repo(tmp_path / "calc")
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    for project, agent, status, code in ((repo, "scripted-noop", "failed", "no-changes"),
                                         (plain, "scripted", "needs_attention", "NOTHING_VERIFIED")):
        sub, meta = await run_to_stop(ts_home, {"projectPath": str(project), "task": "Fix add", "agentId": agent})
        assert meta["status"] == status and code in meta["message"], meta
        assert meta["agentExitCode"] == 0 and isinstance(meta["agentDurationMs"], int), meta
        assert f"agent exit code 0 after {meta['agentDurationMs']} ms" in meta["message"]
        async with mcp_client(ts_home) as client:
            for tool, args in (("query_task", {"taskId": sub["taskId"]}),
                               ("wait_task", {"taskId": sub["taskId"], "timeoutMs": 1000})):
                r = await client.call_tool(tool, args)
                assert f"last agent run: exit code 0 after {meta['agentDurationMs']} ms" in text_of(r), text_of(r)
        report = (ts_home / "tasks" / sub["taskId"] / "report-0.md").read_text()
        assert f"- Exit code: 0 after {meta['agentDurationMs']} ms" in report


async def test_a_rework_of_a_task_still_queued_says_it_is_in_progress(ts_home: Path, tmp_path: Path) -> None:
    """A task accepted behind another of its work tree is queued and will run: the refusal says
    it is in progress, never "submit a new task instead" (a host would submit a duplicate). The
    first task hangs, so the second stays queued however slow the machine is."""
    repo = make_calc_repo(tmp_path / "calc")
    async with mcp_client(ts_home) as client:
        first = meta_of(await client.call_tool("run_task", {"projectPath": str(repo), "task": "hang",
                                                            "agentId": "scripted-hang"}))["taskId"]
        second = meta_of(await client.call_tool("run_task", {"projectPath": str(repo), "task": "noop",
                                                             "agentId": "scripted-noop", "autoVerify": False}))["taskId"]
        try:
            r = await client.call_tool("manage_task", {"taskId": second, "action": "rework", "feedback": "again"})
            assert r.is_error and "[INVALID_STATE]" in text_of(r) and "still in progress" in text_of(r), text_of(r)
            assert "status=queued" in text_of(r) and "submit a new task" not in text_of(r), text_of(r)
        finally:
            for tid in (second, first):
                await client.call_tool("manage_task", {"taskId": tid, "action": "cancel", "reason": "test over"})
        for tid in (second, first):
            done = meta_of(await client.call_tool("wait_task", {"taskId": tid, "timeoutMs": 180000}))
            assert done["status"] == "cancelled", done


async def test_the_prefect_ui_retry_is_a_manual_rework_without_feedback_and_runs_are_named(
        ts_home: Path, tmp_path: Path, prefect_api: Any) -> None:
    # a newcomer's UI list of runs named each by task id only, and its Retry button silently ran
    # the agent again; the retry is now a manual rework without feedback, said as such
    repo = make_calc_repo(tmp_path / "calc")
    brief = "Fix add\nso that test_add_negative passes (a second line the name leaves out)"
    sub, meta = await run_to_stop(ts_home, {"projectPath": str(repo), "task": brief, "agentId": "scripted-noop",
                                            "autoFixRounds": 0})
    assert (meta["status"], meta["round"], meta["roundsUsed"]) == ("failed", 0, 1), meta
    tid, run_id = sub["taskId"], meta["flowRunId"]
    run = prefect_api.get(f"/flow_runs/{run_id}").json()
    assert run["name"] == f"{tid} · calc · Fix add", run["name"]
    # exactly what the UI's Retry sends (its retryFlowRun: set_state, not forced)
    resp = prefect_api.post(f"/flow_runs/{run_id}/set_state", json={
        "state": {"type": "SCHEDULED", "name": "AwaitingRetry", "message": "Retry from the UI"}, "force": False})
    resp.raise_for_status()
    assert resp.json()["status"] == "ACCEPT", resp.json()
    tdir = ts_home / "tasks" / tid

    def retried() -> list[dict[str, Any]]:
        events = [json.loads(line) for line in (tdir / "task.jsonl").read_text().splitlines()]
        return [e for e in events if e["event"] == "rework_triggered"]

    deadline = time.monotonic() + 120
    while not retried():
        assert time.monotonic() < deadline, "the retried flow run never started"
        await anyio.sleep(0.2)
    (event,) = retried()
    assert event["data"] == {"mode": "retry"} and "Retry" in event["detail"], event
    async with mcp_client(ts_home) as client:
        again = meta_of(await client.call_tool("wait_task", {"taskId": tid, "timeoutMs": 180000}))
    assert (again["status"], again["round"], again["roundsUsed"], again["reportRound"]) == ("failed", 1, 2, 1), again
    # the agent heard what failed in round 0, as after manage_task(rework) with no feedback
    assert "no-changes" in (tdir / "prompt-1.txt").read_text()
    names = [tr["name"] for tr in task_runs(prefect_api, run_id)]
    assert "dispatch-round-1" in names and "verify-round-1" in names, names
