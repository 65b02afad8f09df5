"""idempotencyKey under races (issue: never a duplicate): one connection, several servers,
threads and processes on one store; a corrupt store fails closed; a bad entry breaks no other key."""

from __future__ import annotations

import json
import multiprocessing
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import pytest

from tianshu_mcp.core.errors import ErrorCode, TianshuError
from tianshu_mcp.core.idempotency import STALE_MS, IdempotencyStore

from conftest import meta_of, mcp_client
from fixture_project import make_calc_repo

pytestmark = [pytest.mark.anyio]


def _claim_in_process(home: str, task_id: str, out: Any) -> None:
    out.put(IdempotencyStore(Path(home)).claim("run_task", "k", "d", task_id).kind)


def test_threads_and_processes_bind_a_key_once(tmp_path: Path) -> None:
    store = IdempotencyStore(tmp_path)
    with ThreadPoolExecutor(20) as pool:
        kinds = list(pool.map(lambda i: store.claim("run_task", "t", "d", f"tsk_{i}").kind, range(20)))
    assert kinds.count("miss") == 1 and kinds.count("hit") == 19
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_claim_in_process, args=(str(tmp_path), f"tsk_p{i}", out)) for i in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    kinds = [out.get(timeout=10) for _ in procs]
    assert kinds.count("miss") == 1 and kinds.count("hit") == 5


def test_a_young_binding_without_its_task_is_a_hit_an_old_one_is_replaced(tmp_path: Path) -> None:
    store = IdempotencyStore(tmp_path)
    assert store.claim("run_task", "k", "d", "tsk_first", exists=lambda _: False).kind == "miss"
    # the first caller has not created its task folder yet: still a hit on its task
    hit = store.claim("run_task", "k", "d", "tsk_second", exists=lambda _: False)
    assert (hit.kind, hit.task_id) == ("hit", "tsk_first")
    data = json.loads(store.path.read_text())
    data["entries"][0]["createdAtMs"] -= STALE_MS + 1000  # its caller died long ago
    store.path.write_text(json.dumps(data))
    again = store.claim("run_task", "k", "d", "tsk_third", exists=lambda _: False)
    assert (again.kind, again.task_id) == ("miss", "tsk_third")


@pytest.mark.parametrize("content", [b'{"version": 1, "entries": [{"scope": "run_task", "ke', b"\x00\x01", b"[]",
                                     b'{"entries": 5}'])
def test_a_corrupt_store_fails_closed_and_is_left_alone(tmp_path: Path, content: bytes) -> None:
    store = IdempotencyStore(tmp_path)
    store.path.write_bytes(content)
    with pytest.raises(TianshuError) as info:
        store.claim("run_task", "k", "d", "tsk_x")
    assert info.value.code == ErrorCode.IDEMPOTENCY_STORE_CORRUPT and str(store.path) in info.value.message
    assert store.path.read_bytes() == content  # never silently reset


def test_a_bad_entry_breaks_no_other_key(tmp_path: Path) -> None:
    store = IdempotencyStore(tmp_path)
    assert store.claim("run_task", "good", "d", "tsk_good").kind == "miss"
    data = json.loads(store.path.read_text())
    data["entries"].append({"scope": "run_task", "key": "bad", "digest": "d", "taskId": "tsk_bad", "createdAtMs": "x"})
    data["entries"].append("not an entry")
    store.path.write_text(json.dumps(data))
    assert store.claim("run_task", "good", "d", "tsk_other").task_id == "tsk_good"
    assert store.claim("run_task", "other", "d", "tsk_new").kind == "miss"


async def _run_many(home: Path, repo: Path, key: str, n: int) -> list[dict[str, Any]]:
    args = {"projectPath": str(repo), "task": "Fix add", "agentId": "scripted", "idempotencyKey": key}
    results: list[dict[str, Any]] = []
    async with mcp_client(home) as client:
        async def one() -> None:
            results.append(meta_of(await client.call_tool("run_task", args)))
        async with anyio.create_task_group() as tg:
            for _ in range(n):
                tg.start_soon(one)
    return results


def _tasks_with_key(home: Path, key: str) -> list[str]:
    found = []
    for task_json in (home / "tasks").glob("tsk_*/task.json"):
        try:
            if json.loads(task_json.read_text()).get("idempotencyKey") == key:
                found.append(task_json.parent.name)
        except (OSError, ValueError):
            continue
    return found


@pytest.mark.parametrize("n", [2, 20])
async def test_concurrent_identical_calls_on_one_connection_make_one_task(ts_daemon: dict[str, Any], tmp_path: Path,
                                                                          n: int) -> None:
    home = ts_daemon["home"]
    key = f"race-one-connection-{n}-{time.time_ns()}"
    results = await _run_many(home, make_calc_repo(tmp_path / "calc"), key, n)
    ids = {r["taskId"] for r in results}
    assert len(ids) == 1 and _tasks_with_key(home, key) == list(ids)
    assert sorted(r.get("idempotencyReplay", "miss") for r in results) == ["hit"] * (n - 1) + ["miss"]


async def test_ten_and_ten_across_two_servers_make_one_task(ts_daemon: dict[str, Any], tmp_path: Path) -> None:
    home = ts_daemon["home"]
    key = f"race-two-servers-{time.time_ns()}"
    repo = make_calc_repo(tmp_path / "calc")
    both: list[list[dict[str, Any]]] = []

    async def server() -> None:
        both.append(await _run_many(home, repo, key, 10))

    async with anyio.create_task_group() as tg:
        tg.start_soon(server)
        tg.start_soon(server)
    results = [r for rs in both for r in rs]
    assert len(results) == 20 and len({r["taskId"] for r in results}) == 1
    assert len(_tasks_with_key(home, key)) == 1


@pytest.mark.parametrize("how", ["held", "directory"])
def test_an_unusable_lock_is_coded_not_internal(tmp_path: Path, how: str) -> None:
    store = IdempotencyStore(tmp_path)
    store.lock.timeout = 0.5
    lock_path = tmp_path / ".idempotency.lock"
    if how == "directory":
        lock_path.mkdir()
        with pytest.raises(TianshuError) as info:
            store.claim("run_task", "k", "d", "tsk_x")
    else:
        ctx = multiprocessing.get_context("spawn")
        ready, done = ctx.Event(), ctx.Event()
        holder = ctx.Process(target=_hold_lock, args=(str(lock_path), ready, done))
        holder.start()
        try:
            assert ready.wait(60)
            with pytest.raises(TianshuError) as info:
                store.claim("run_task", "k", "d", "tsk_x")
        finally:
            done.set()
            holder.join(30)
    assert info.value.code == ErrorCode.IDEMPOTENCY_STORE_CORRUPT and ".idempotency.lock" in info.value.message


def _hold_lock(path: str, ready: Any, done: Any) -> None:
    from filelock import FileLock

    with FileLock(path):
        ready.set()
        done.wait(60)
