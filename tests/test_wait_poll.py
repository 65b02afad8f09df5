"""wait_task's poll interval (mcp_server/waiting.py, design note 56): quick only in the few
seconds between the flow recording its end and its run's final state, never for a run whose
final state does not come."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from tianshu_mcp.core.taskstore import utc_now
from tianshu_mcp.mcp_server.taskops import TaskView
from tianshu_mcp.mcp_server.waiting import WAIT_ENDING_S, _ending, _sleep_unless_changed


def _iso(seconds_ago: float) -> str:
    at = datetime.now(timezone.utc) - timedelta(seconds=seconds_ago)
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def test_quick_polls_follow_a_recorded_end_only_for_a_few_seconds() -> None:
    assert _ending(TaskView({"finishedAt": utc_now()}, "running"))
    assert not _ending(TaskView({"finishedAt": _iso(WAIT_ENDING_S + 60)}, "running"))  # its run never ended
    assert not _ending(TaskView({}, "running"))  # still working
    assert not _ending(TaskView({"finishedAt": "not a time"}, "running"))


class _Store:
    def __init__(self, home: Path) -> None:
        from tianshu_mcp.core.taskstore import TaskStore

        self.store = TaskStore(home)


@pytest.mark.anyio
async def test_a_waited_record_that_changes_ends_the_sleep_between_polls(tmp_path: Path) -> None:
    """The end of a task is written to its record first: a wait between two polls looks at the
    waited records and polls at once when one changed (design note 77), instead of noticing
    the end up to 0.5 s late. An unchanged record, or one that does not exist, sleeps the whole
    interval; so does a record of a task that is not waited for."""
    import time

    import anyio

    from tianshu_mcp.core.ids import new_task_id

    holder = _Store(tmp_path / "home")
    store = holder.store
    waited, other, missing = new_task_id(), new_task_id(), new_task_id()
    for task_id in (waited, other):
        store.create(task_id, {"projectPath": str(tmp_path), "agentId": "scripted", "task": "Fix add"})

    t0 = time.monotonic()
    await _sleep_unless_changed(holder, [waited, missing], 0.3)  # type: ignore[arg-type]
    assert time.monotonic() - t0 >= 0.3  # nothing changed: the whole interval

    started, woke = anyio.Event(), anyio.Event()

    async def sleeper() -> None:
        started.set()  # the sleep reads the records' signatures before it first yields
        await _sleep_unless_changed(holder, [waited, missing], 120.0)  # type: ignore[arg-type]
        woke.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(sleeper)
        await started.wait()
        store.update(other, lastMessage="another task's record")
        with anyio.move_on_after(0.3):
            await woke.wait()
        assert not woke.is_set()  # not a waited record
        store.update(waited, finishedAt=utc_now())
        with anyio.fail_after(60):  # a deadline, not a timing: it wakes long before its 120 s
            await woke.wait()


@pytest.mark.anyio
async def test_a_record_written_while_the_poll_read_the_run_is_not_missed(tmp_path: Path) -> None:
    """The flow writes ``finishedAt`` while the wait's poll is reading the run's state: the sleep
    after that poll compares with the records as the poll read them, not as they are when it
    begins, and so wakes at once (it slept a whole 0.5 s interval: a bench's slowest waits)."""
    import anyio

    from tianshu_mcp.core.ids import new_task_id
    from tianshu_mcp.mcp_server.waiting import _signature

    holder = _Store(tmp_path / "home")
    waited = new_task_id()
    holder.store.create(waited, {"projectPath": str(tmp_path), "agentId": "scripted", "task": "Fix add"})
    read_as = _signature(holder, [waited])  # type: ignore[arg-type]  # the poll reads the record...
    holder.store.update(waited, finishedAt=utc_now())  # ...and the flow ends meanwhile
    with anyio.fail_after(60):  # a deadline, not a timing: without `since` it sleeps its 120 s
        await _sleep_unless_changed(holder, [waited], 120.0, read_as)  # type: ignore[arg-type]


# --- a service that is still starting (a cold home on a loaded machine) ------------------------

STARTING_SCRIPT = r'''
import json, sys, time
from pathlib import Path
import anyio
from tianshu_mcp.core.errors import TianshuError
from tianshu_mcp.core.settings import load_config
from tianshu_mcp.mcp_server import waiting
from tianshu_mcp.mcp_server.runtime import Runtime
from tianshu_mcp.mcp_server.taskops import TaskService

home, task_id, timeout_ms, mode = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
connect = mode == "connect"
waiting.STARTING_POLL_S = 0.3  # one read waits this long for the connection before waiting again
runtime = Runtime(home, load_config(home))  # not connected yet: "still starting"
service = TaskService(runtime)
tries = []
views = service.views
async def counting(tasks, wait_s=None):
    try:
        return await views(tasks, wait_s)
    except TianshuError as exc:
        tries.append(exc.code.value)
        raise
service.views = counting

async def main():
    async def connect_after_a_failed_read():
        while not tries:
            await anyio.sleep(0.05)
        runtime.start_background()  # the connection arrives while the call waits
    if mode in ("dead", "query"):  # connected, then the service stops answering (as after a kill -9)
        runtime.start_background()
        while not runtime.ready:
            await anyio.sleep(0.05)
        import socket
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            dead = s.getsockname()[1]
        runtime.api_url = f"http://127.0.0.1:{dead}/api"  # nothing listens there any more
    if mode == "fresh":  # a new server's first call: Prefect's client not imported yet, connecting now
        assert "prefect.client.orchestration" not in sys.modules
        runtime.start_background()
    t0 = time.monotonic()
    if mode == "query":  # what query_task reads: one view; then, reconnected, the next one
        try:
            await service.view(task_id)
            out = {"ok": True}
        except TianshuError as exc:
            out = {"ok": False, "code": exc.code.value, "message": exc.message}
        out["waited_s"] = time.monotonic() - t0
        deadline = time.monotonic() + 60
        while not runtime.ready and time.monotonic() < deadline:
            await anyio.sleep(0.05)
        out["next_status"] = (await service.view(task_id)).status
        print(json.dumps(out))
        return
    async with anyio.create_task_group() as tg:
        if connect:
            tg.start_soon(connect_after_a_failed_read)
        try:
            result = await waiting.wait_task(service, runtime, {"taskId": task_id, "timeoutMs": timeout_ms})
            out = {"ok": True, "text": result.content[0].text, "meta": result.structured_content}
        except TianshuError as exc:
            out = {"ok": False, "code": exc.code.value, "message": exc.message}
    out.update(tries=tries, waited_s=time.monotonic() - t0)
    print(json.dumps(out))
anyio.run(main)
'''


def _wait_while_starting(home: Path, task_id: str, timeout_ms: int, mode: str) -> dict:
    import json
    import subprocess
    import sys

    from conftest import server_env

    r = subprocess.run([sys.executable, "-c", STARTING_SCRIPT, str(home), task_id, str(timeout_ms), mode],
                       capture_output=True, text=True, timeout=300,
                       env=server_env(home))
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.anyio
async def test_wait_task_waits_for_a_starting_service_within_its_own_timeout(ts_daemon: dict, tmp_path: Path) -> None:
    """A wait that begins while this process is still connecting (the service starting, Prefect
    still importing) keeps waiting, up to its own timeoutMs, instead of failing after the
    client's 30 s: once connected it answers; never connected, it times out when its own time is up."""
    from conftest import mcp_client, meta_of
    from fixture_project import make_calc_repo

    repo = make_calc_repo(tmp_path / "calc")
    async with mcp_client(ts_daemon["home"]) as client:
        sub = meta_of(await client.call_tool("run_task", {"projectPath": str(repo), "task": "noop",
                                                          "agentId": "scripted-noop", "autoVerify": False}))
        done = meta_of(await client.call_tool("wait_task", {"taskId": sub["taskId"], "timeoutMs": 120000}))
    assert done["status"] == "succeeded", done

    late = _wait_while_starting(ts_daemon["home"], sub["taskId"], 120000, "connect")
    assert late["ok"] and "succeeded" in late["text"], late
    assert late["tries"] and set(late["tries"]) == {"PREFECT_UNAVAILABLE"}, late  # it did wait for the connection

    # never connected: when its own time is up it is a wait that timed out (the host waits again),
    # not an error, and it claims no status it could not read
    never = _wait_while_starting(ts_daemon["home"], sub["taskId"], 1500, "never")
    assert never["ok"] and "wait timed out" in never["text"] and "still connecting" in never["text"], never
    assert never["meta"]["waitSettled"] is False and never["meta"]["serviceNotReady"] is True, never
    assert never["meta"]["taskId"] == sub["taskId"] and "status" not in never["meta"], never
    from jsonschema import Draft202012Validator

    from tianshu_mcp.mcp_server.outputs import output_schema

    Draft202012Validator(output_schema("wait_task", strict=True)).validate(never["meta"])
    assert len(never["tries"]) >= 2 and never["waited_s"] >= 1.5, never  # retried until its own timeout, no longer

    # a new server's first call is a short wait on a task that ended long ago: it imports
    # Prefect's client first (≈1 s, design note 79) where it needs one, which is not the service
    # being slow, and connects meanwhile, so the wait answers settled within its own time (5 s:
    # 1 s was missed once beside two busy processes and the whole suite, while connecting)
    fresh = _wait_while_starting(ts_daemon["home"], sub["taskId"], 5000, "fresh")
    assert fresh["ok"] and fresh["meta"]["waitSettled"] is True and fresh["meta"]["status"] == "succeeded", fresh

    # connected, then the service stops answering (its address dead, as after a kill -9): the
    # wait answers within its own time, not after Prefect's client has retried the dead
    # address for ≈ 18 s, and never with an error; the runtime reconnects meanwhile
    gone = _wait_while_starting(ts_daemon["home"], sub["taskId"], 1500, "dead")
    assert gone["ok"] and "wait" in gone["text"], gone
    assert gone["meta"]["waitSettled"] or gone["meta"].get("serviceNotReady") is True, gone
    assert gone["waited_s"] < 10, gone

    # a query (one read) is cut too: PREFECT_UNAVAILABLE after READ_LIMIT_S (5 s), not after the
    # client's ≈ 18 s of retries; the server connects again meanwhile and the next query answers
    asked = _wait_while_starting(ts_daemon["home"], sub["taskId"], 0, "query")
    assert not asked["ok"] and asked["code"] == "PREFECT_UNAVAILABLE" and "ask again" in asked["message"], asked
    assert asked["waited_s"] < 12, asked
    assert asked["next_status"] == "succeeded", asked
