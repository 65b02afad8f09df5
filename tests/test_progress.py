"""Progress notifications while ``wait_task`` and ``verify_task`` wait (mcp_server/progress.py,
design note 89): every ``$TIANSHU_MCP_PROGRESS_INTERVAL_S`` seconds to a client that sent a
progress token, none to one that did not, progress increasing, ``total`` the wait's limit in
seconds, the message the waited task's status and last message; a cancelled call stops them.

The ticker on its own with a stand-in request context, then the real stdio server with the
Python SDK's client (``progress_callback``, and a ``message_handler`` that sees every
notification on the wire). The waited task is held running by a scripted agent (or a check) that
waits for a gate file the test creates only after the notifications it asserts arrived, so no
assertion rests on how fast the machine is. The TypeScript SDK's twin is in tests/test_ts_host.py.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import mcp_types as types
import pytest
from conftest import add_scripted_profile, mcp_client, meta_of, text_of
from tianshu_mcp.core.errors import ErrorCode, TianshuError
from tianshu_mcp.mcp_server.progress import (
    PROGRESS_INTERVAL_ENV,
    PROGRESS_INTERVAL_S,
    describe_views,
    progress_interval_s,
    progress_ticker,
)
from tianshu_mcp.mcp_server.taskops import TaskView

pytestmark = pytest.mark.anyio

TICK_S = 0.3
"""The interval the end-to-end tests give the server (``$TIANSHU_MCP_PROGRESS_INTERVAL_S``)."""
QUIET_MS = 2500
"""A wait without a progress token: at least eight intervals of :data:`TICK_S` pass while it waits."""
RUNNING = re.compile(r"^running: round \d+: agent running$")


class _Session:
    """Stands in for the request's ``ServerSession``: records ``report_progress``; ``fail`` makes it raise."""

    def __init__(self, fail: bool = False) -> None:
        self.sent: list[tuple[float, float | None, str | None]] = []
        self.fail = fail
        self.calls = 0

    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        self.calls += 1
        if self.fail:
            raise anyio.BrokenResourceError
        self.sent.append((progress, total, message))


class _Ctx:
    def __init__(self, meta: dict[str, Any] | None, fail: bool = False) -> None:
        self.meta = meta
        self.session = _Session(fail)


async def _until(condition: Any, timeout_s: float = 30.0) -> None:
    with anyio.fail_after(timeout_s):
        while not condition():
            await anyio.sleep(0.01)


def _increasing(values: list[float]) -> bool:
    return all(a < b for a, b in itertools.pairwise(values))


def test_the_interval_comes_from_the_environment_else_15_s(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PROGRESS_INTERVAL_ENV, raising=False)
    assert progress_interval_s() == PROGRESS_INTERVAL_S == 15.0
    monkeypatch.setenv(PROGRESS_INTERVAL_ENV, "0.5")
    assert progress_interval_s() == 0.5  # read at call time, not at import
    for bad in ("0", "-2", "soon", "nan", "inf", " "):
        monkeypatch.setenv(PROGRESS_INTERVAL_ENV, bad)
        assert progress_interval_s() == PROGRESS_INTERVAL_S, bad


def test_the_message_says_what_is_waited_for() -> None:
    running = TaskView({"taskId": "tsk_a", "lastMessage": "round 1: agent running"}, "running")
    queued = TaskView({"taskId": "tsk_b"}, "queued")
    assert describe_views([running]) == "running: round 1: agent running"
    assert describe_views([queued]) == "queued"
    said = TaskView({"lastMessage": "queued: waiting for the project's slot"}, "queued")
    assert describe_views([said]) == "queued: waiting for the project's slot"  # not "queued: queued: …"
    assert describe_views([running, queued]) == "tsk_a running: round 1: agent running; tsk_b queued"
    assert "service" in describe_views(None)  # nothing read yet: the service has not answered
    long = describe_views([TaskView({"lastMessage": "x\n" * 1000}, "running")])
    assert len(long) < 400 and "\n" not in long
    many = describe_views([TaskView({"taskId": f"tsk_{i}"}, "queued") for i in range(8)])
    assert many.endswith("; and 3 more") and "tsk_5" not in many


async def test_no_progress_token_starts_no_ticker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PROGRESS_INTERVAL_ENV, "0.01")
    before = asyncio.all_tasks()
    for ctx in (_Ctx(None), _Ctx({}), _Ctx({"progress_token": True}), None):  # None: a direct call
        async with progress_ticker(ctx, 10, lambda: "waiting"):
            assert asyncio.all_tasks() == before  # no ticker: nothing could ever send


async def test_a_token_gets_increasing_progress_until_the_wait_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PROGRESS_INTERVAL_ENV, "0.02")
    ctx = _Ctx({"progress_token": "tok"})
    before = asyncio.all_tasks()
    said = iter(range(1000))
    async with progress_ticker(ctx, 600, lambda: f"running: step {next(said)}"):
        await _until(lambda: len(ctx.session.sent) >= 4)
    assert asyncio.all_tasks() == before  # the ticker ended with the body
    progress = [p for p, _, _ in ctx.session.sent]
    assert _increasing(progress) and progress[0] > 0
    assert {t for _, t, _ in ctx.session.sent} == {600}
    assert [m for _, _, m in ctx.session.sent][:2] == ["running: step 0", "running: step 1"]  # asked at each tick


async def test_an_error_of_the_wait_is_its_own_and_ends_the_ticker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PROGRESS_INTERVAL_ENV, "0.02")
    ctx = _Ctx({"progressToken": 7})
    before = asyncio.all_tasks()
    with pytest.raises(TianshuError) as caught:  # not wrapped in an exception group
        async with progress_ticker(ctx, 5, lambda: "x"):
            await _until(lambda: len(ctx.session.sent) >= 1)
            raise TianshuError(ErrorCode.TASK_RECORD_CORRUPT, "damaged")
    assert caught.value.code is ErrorCode.TASK_RECORD_CORRUPT
    assert asyncio.all_tasks() == before


async def test_a_cancelled_wait_stops_the_ticker(monkeypatch: pytest.MonkeyPatch) -> None:
    """A client's ``notifications/cancelled`` cancels the handler's scope: the ticker goes with it."""
    monkeypatch.setenv(PROGRESS_INTERVAL_ENV, "0.02")
    ctx = _Ctx({"progress_token": 1})
    before = asyncio.all_tasks()
    with anyio.CancelScope() as scope:
        async with progress_ticker(ctx, 5, lambda: "x"):
            await _until(lambda: len(ctx.session.sent) >= 2)
            scope.cancel()
            await anyio.sleep(3600)  # the wait: cancelled at once
    assert scope.cancelled_caught
    assert asyncio.all_tasks() == before
    sent = len(ctx.session.sent)
    await anyio.lowlevel.checkpoint()
    assert len(ctx.session.sent) == sent


async def test_a_failed_send_or_message_never_fails_the_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PROGRESS_INTERVAL_ENV, "0.02")
    broken = _Ctx({"progress_token": 1}, fail=True)
    before = asyncio.all_tasks()
    async with progress_ticker(broken, 5, lambda: "x"):
        await _until(lambda: broken.session.calls >= 1)
        await _until(lambda: asyncio.all_tasks() == before | {asyncio.current_task()})  # it stopped ticking
    assert broken.session.calls == 1

    def broken_message() -> str:
        raise KeyError("lastMessage")

    ctx = _Ctx({"progress_token": 1})
    async with progress_ticker(ctx, 5, broken_message):
        await _until(lambda: len(ctx.session.sent) >= 2)
    assert {m for _, _, m in ctx.session.sent} == {None}


# --- the real server over stdio ---------------------------------------------------------------

class _Wire:
    """Every ``notifications/progress`` the client received (a ``message_handler``), with the
    moment it arrived (monotonic s)."""

    def __init__(self) -> None:
        self.progress: list[tuple[float, Any]] = []

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ProgressNotification):
            self.progress.append((time.monotonic(), message.params))

    def since(self, moment: float) -> int:
        return sum(1 for at, _ in self.progress if at > moment)


def _gated_agent(home: Path, tmp_path: Path, name: str) -> Path:
    """A scripted agent ``name`` that stays running until the returned gate file exists."""
    gate = tmp_path / f"{name}-gate"
    add_scripted_profile(home, name, "sleep", {"SCRIPTED_TRACE": str(tmp_path / f"{name}-trace.txt"),
                                               "SCRIPTED_SLEEP": "0", "SCRIPTED_GATE": str(gate),
                                               "SCRIPTED_WAIT_S": "600"})
    return gate


class _Notes:
    """A ``progress_callback``: the notifications of one call; opens ``gate`` once ``enough`` arrived
    and one of them said the agent is running."""

    def __init__(self, gate: Path | None = None, enough: int = 3) -> None:
        self.seen: list[tuple[float, float | None, str | None]] = []
        self.gate, self.enough = gate, enough

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.seen.append((progress, total, message))
        if self.gate is not None and len(self.seen) >= self.enough and any(
                RUNNING.match(m or "") for _, _, m in self.seen):
            self.gate.touch()


async def test_wait_task_sends_progress_only_when_asked(ts_daemon: dict[str, Any], calc_repo: Path,
                                                        tmp_path: Path) -> None:
    home = ts_daemon["home"]
    gate = _gated_agent(home, tmp_path, "progress-gated")
    wire = _Wire()
    async with mcp_client(home, env={PROGRESS_INTERVAL_ENV: str(TICK_S)}, message_handler=wire) as client:
        sub = await client.call_tool("run_task", {"projectPath": str(calc_repo), "task": "Fix add",
                                                  "agentId": "progress-gated", "autoVerify": False})
        assert not sub.is_error, text_of(sub)
        task_id = meta_of(sub)["taskId"]
        # no token: a wait of several intervals on a task that cannot end yet, and not one notification
        quiet = meta_of(await client.call_tool("wait_task", {"taskId": task_id, "timeoutMs": QUIET_MS}))
        assert quiet["waitSettled"] is False, quiet
        assert wire.progress == []
        # a token: the notes arrive; the gate opens only after three of them, one saying "running"
        notes = _Notes(gate)
        done = await client.call_tool("wait_task", {"taskId": task_id, "timeoutMs": 300000},
                                      progress_callback=notes)
    meta = meta_of(done)
    assert meta["waitSettled"] is True and meta["status"] == "succeeded", text_of(done)
    assert gate.exists() and len(notes.seen) >= 3, notes.seen
    assert _increasing([p for p, _, _ in notes.seen]), notes.seen
    assert {t for _, t, _ in notes.seen} == {300.0}, notes.seen
    assert any(RUNNING.match(m or "") for _, _, m in notes.seen), notes.seen
    assert len(wire.progress) == len(notes.seen)  # every one on the wire was this call's


async def test_a_batch_wait_names_its_tasks(ts_daemon: dict[str, Any], calc_repo: Path, tmp_path: Path) -> None:
    home = ts_daemon["home"]
    gate = _gated_agent(home, tmp_path, "progress-batch")
    async with mcp_client(home, env={PROGRESS_INTERVAL_ENV: str(TICK_S)}) as client:
        sub = meta_of(await client.call_tool("run_task", {"projectPath": str(calc_repo), "task": "Fix add",
                                                          "agentId": "progress-batch", "autoVerify": False}))
        behind = meta_of(await client.call_tool("run_task", {"projectPath": str(calc_repo), "task": "Look",
                                                                  "agentId": "scripted-noop", "autoVerify": False}))
        notes = _Notes()
        # the second task waits behind the first (one task at a time per project): neither can end
        # before the gate opens, and the batch wait lasts until its timeout, eight intervals and more
        timed_out = meta_of(await client.call_tool("wait_task", {"taskIds": [sub["taskId"], behind["taskId"]],
                                                                 "timeoutMs": QUIET_MS}, progress_callback=notes))
        gate.touch()
        for task_id in (sub["taskId"], behind["taskId"]):
            await client.call_tool("wait_task", {"taskId": task_id, "timeoutMs": 300000})
    assert timed_out["waitSettled"] is False, timed_out
    assert len(notes.seen) >= 2 and _increasing([p for p, _, _ in notes.seen]), notes.seen
    last = notes.seen[-1][2] or ""
    assert f"{sub['taskId']} " in last and f"{behind['taskId']} queued: " in last, notes.seen  # it waits behind


async def test_verify_task_sends_progress_while_its_checks_run(ts_daemon: dict[str, Any], calc_repo: Path,
                                                               tmp_path: Path) -> None:
    home = ts_daemon["home"]
    gate = tmp_path / "verify-gate"
    hold = [sys.executable, "-c", ("import os, sys, time\n"
                                   "deadline = time.time() + 600\n"
                                   "while not os.path.exists(sys.argv[1]) and time.time() < deadline:\n"
                                   "    time.sleep(0.05)\n"), str(gate)]
    notes = _Notes()

    async def note(progress: float, total: float | None, message: str | None) -> None:
        await notes(progress, total, message)
        if len(notes.seen) >= 3:
            gate.touch()

    async with mcp_client(home, env={PROGRESS_INTERVAL_ENV: str(TICK_S)}) as client:
        result = await client.call_tool("verify_task", {
            "projectPath": str(calc_repo), "checksMode": "replace",
            "extraChecks": [{"name": "held", "cmd": hold, "timeoutMs": 600000}]}, progress_callback=note)
        meta = meta_of(result)
        if meta.get("status") not in ("succeeded", "failed", "needs_attention"):  # still queued after ~45 s
            gate.touch()
            meta = meta_of(await client.call_tool("wait_task", {"taskId": meta["taskId"], "timeoutMs": 300000}))
    assert gate.exists() and len(notes.seen) >= 3, notes.seen
    assert _increasing([p for p, _, _ in notes.seen]), notes.seen
    assert len({t for _, t, _ in notes.seen}) == 1 and (notes.seen[0][1] or 0) > 0, notes.seen  # verifyToolWaitMs in s
    assert all(m for _, _, m in notes.seen), notes.seen
    assert meta["taskId"].startswith("vfy_"), meta


async def test_a_cancelled_wait_task_stops_its_progress(ts_daemon: dict[str, Any], calc_repo: Path,
                                                        tmp_path: Path) -> None:
    """The client abandons a wait_task (the SDK sends ``notifications/cancelled``): the server's wait
    and its ticker end; no notification of that call follows a later call of several intervals,
    and the session goes on serving."""
    home = ts_daemon["home"]
    gate = _gated_agent(home, tmp_path, "progress-cancel")
    wire = _Wire()
    notes = _Notes()
    async with mcp_client(home, env={PROGRESS_INTERVAL_ENV: str(TICK_S)}, message_handler=wire) as client:
        task_id = meta_of(await client.call_tool("run_task", {"projectPath": str(calc_repo), "task": "Fix add",
                                                              "agentId": "progress-cancel", "autoVerify": False}))["taskId"]
        async with anyio.create_task_group() as group:

            async def waiting() -> None:
                await client.call_tool("wait_task", {"taskId": task_id, "timeoutMs": 600000}, progress_callback=notes)

            group.start_soon(waiting)
            await _until(lambda: len(notes.seen) >= 2, 300)
            group.cancel_scope.cancel()
        cancelled_at = time.monotonic()
        # a later wait without a token lasts eight intervals and more: a ticker left running would
        # have sent several notifications by its end (one already on its way may still arrive)
        quiet = meta_of(await client.call_tool("wait_task", {"taskId": task_id, "timeoutMs": QUIET_MS}))
        assert quiet["waitSettled"] is False and quiet["status"] in ("queued", "running"), quiet
        assert wire.since(cancelled_at) <= 1, wire.progress
        gate.touch()
        done = meta_of(await client.call_tool("wait_task", {"taskId": task_id, "timeoutMs": 300000}))
    assert done["status"] == "succeeded", done
