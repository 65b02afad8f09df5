"""Submission order is execution order per project (design note 53).

Acceptance numbers are strictly increasing across processes and threads of one home; submitters
create a queue's flow runs in that order whoever races for them (a withdrawn, a damaged and an
unreadable older entry hold nobody back); Prefect's own work-pool query hands a queue's runs out in
that order; and, end to end, fifty tasks of one project sent by three stdio servers at once beside
two busy loops start in the order they were accepted.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import secrets
import statistics
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from conftest import auth_headers, list_deployment_reads, mcp_client, meta_of, text_of
from fixture_project import make_calc_repo
from test_service import until
from tianshu_mcp.core import submissions
from tianshu_mcp.core.taskstore import TaskStore, utc_now

SAME_SECOND = datetime.now().strftime("%Y%m%d%H%M%S")


def same_second_ids(n: int) -> list[str]:
    """``n`` task ids of one second, in descending id order: accepted in this order, their ids
    sort the other way round."""
    return sorted({f"tsk_{SAME_SECOND}_{secrets.token_hex(3)}" for _ in range(n * 2)}, reverse=True)[:n]


def accept(home: Path, record_id: str, key: str, limit: int = 1, pool: str | None = None,
           deployment: str = "run-task/run-task") -> dict[str, Any]:
    """What run_task does: ``task.json``, then the entry."""
    record = TaskStore(home).create(record_id, {"projectPath": "/nonexistent/fifo", "agentId": "scripted", "task": "x"})
    return submissions.enqueue(home, record_id, deployment,
                               {"task_id": record_id, "project_path": "/nonexistent/fifo", "agent_id": "scripted"},
                               [f"tianshu-task:{record_id}", f"fifo:{pool or key}"], key, record["createdAt"],
                               queue_limit=limit, work_pool=pool)


WRITER = """
import json, sys, threading
from pathlib import Path
from tianshu_mcp.core import submissions
from tianshu_mcp.core.taskstore import TaskStore
home, plan = Path(sys.argv[1]), json.loads(sys.argv[2])
def write(ids):  # as accept() in tests/test_fifo.py
    for i in ids:
        rec = TaskStore(home).create(i, {"projectPath": "/nonexistent/fifo", "agentId": "scripted", "task": "x"})
        submissions.enqueue(home, i, "run-task/run-task", {"task_id": i}, [], "p", rec["createdAt"])
threads = [threading.Thread(target=write, args=(ids,)) for ids in plan]
[t.start() for t in threads]
[t.join() for t in threads]
"""


def test_acceptance_numbers_increase_strictly_across_processes_and_threads(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    ids = same_second_ids(90)
    # 3 processes × 3 threads, each accepting its 10 ids one after the other (as a host does)
    plan = [[ids[w * 10:(w + 1) * 10] for w in range(p * 3, p * 3 + 3)] for p in range(3)]
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(home), json.dumps(writers)])
             for writers in plan]
    for proc in procs:
        assert proc.wait(180) == 0
    entries = {i: submissions.read(home, i) for i in ids}
    seq = {i: e["acceptedSeq"] for i, e in entries.items()}
    assert sorted(seq.values()) == list(range(1, 91))  # no number twice, none skipped
    by_seq = sorted(ids, key=seq.__getitem__)
    stamps = [entries[i]["acceptedAt"] for i in by_seq]
    assert all(a < b for a, b in itertools.pairwise(stamps))  # the scheduled start times increase with it
    assert submissions.pending(home) == by_seq != sorted(ids)  # ids of one second sort at random
    for writers in plan:
        for own in writers:  # each writer's calls keep their order
            assert [seq[i] for i in own] == sorted(seq[i] for i in own)
    for i in ids:  # the record carries its number
        task = TaskStore(home).read(i)
        assert (task["acceptedSeq"], task["acceptedAt"]) == (seq[i], entries[i]["acceptedAt"])
    assert submissions.last_acceptance(home).seq == 90


def test_old_entries_go_first_and_a_lost_counter_continues_after_the_waiting_ones(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    late, early, same_a, same_b = (f"tsk_{SAME_SECOND}_{h}" for h in ("ffffff", "eeeeee", "000001", "000002"))
    for record_id, created in ((late, "2026-01-01T00:00:02.000Z"), (early, "2026-01-01T00:00:01.000Z"),
                               (same_b, "2026-01-01T00:00:03.000Z"), (same_a, "2026-01-01T00:00:03.000Z")):
        submissions.submissions_dir(home).mkdir(exist_ok=True)  # as an earlier version wrote them: no number
        submissions.entry_path(home, record_id).write_text(json.dumps({"id": record_id, "projectKey": "p",
                                                                       "createdAt": created}))
    new = same_second_ids(2)
    accept(home, new[0], "p")
    assert submissions.pending(home) == [early, late, same_a, same_b, new[0]]
    (submissions.submissions_dir(home) / submissions.SEQUENCE_FILE).write_text("{garbage")
    accept(home, new[1], "p")  # rebuilt from the waiting entries: after new[0], never beside it
    assert submissions.read(home, new[1])["acceptedSeq"] == 2
    assert submissions.pending(home)[-2:] == new
    assert not submissions.has_pending(tmp_path) and submissions.has_pending(home)


def test_a_creation_refused_503_is_retried_within_a_fraction_of_a_second() -> None:
    """The API's "database is locked" 503 comes back at once; Prefect's client would wait 2 s, then 4 s."""
    import httpx
    from prefect.exceptions import PrefectHTTPStatusError
    from prefect.settings import PREFECT_CLIENT_MAX_RETRIES
    from tianshu_mcp.hosting.intake import create_flow_run

    class Locked:
        """A client whose first two creations meet a locked database."""

        def __init__(self) -> None:
            self.calls: list[int] = []

        async def create_flow_run_from_deployment(self, deployment_id: str, **kwargs: Any) -> str:
            self.calls.append(PREFECT_CLIENT_MAX_RETRIES.value())  # the client's own retries are off
            if len(self.calls) < 3:
                request = httpx.Request("POST", "http://api/deployments/x/create_flow_run")
                response = httpx.Response(503, request=request, json={"exception_message": "Service Unavailable"})
                raise PrefectHTTPStatusError("locked", request=request, response=response)
            return f"run of {deployment_id} {kwargs}"

    client, usual = Locked(), PREFECT_CLIENT_MAX_RETRIES.value()
    t0 = time.monotonic()
    assert anyio.run(lambda: create_flow_run(client, "d", name="n")) == "run of d {'name': 'n'}"
    assert client.calls == [0, 0, 0] and time.monotonic() - t0 < 1.5
    assert PREFECT_CLIENT_MAX_RETRIES.value() == usual > 0  # everyone else's calls keep them


# --- against the session's Prefect API: who creates what, and what the pool hands out ---------------
def _submitter(api: str, auth: str, home: Path, own: list[str], stop: threading.Event, errors: list[BaseException]) -> None:
    """A client that submits its own entries, youngest first (the old race), until none waits."""
    from prefect.client.orchestration import PrefectClient
    from tianshu_mcp.hosting.intake import submit_one

    async def main() -> None:
        async with PrefectClient(api, auth_string=auth) as client:
            while not stop.is_set() and any(submissions.is_pending(home, i) for i in own):
                for record_id in reversed(own):
                    await submit_one(client, home, record_id, wait_s=0.2)
                await anyio.sleep(0.02)

    try:
        anyio.run(main)
    except BaseException as exc:  # noqa: BLE001 - reported by the test
        errors.append(exc)


def _service(api: str, auth: str, home: Path, stop: threading.Event, errors: list[BaseException]) -> None:
    """The service's rounds: every pending entry, in order."""
    from prefect.client.orchestration import PrefectClient
    from tianshu_mcp.hosting.intake import submit_pending

    async def main() -> None:
        async with PrefectClient(api, auth_string=auth) as client:
            while not stop.is_set() and submissions.has_pending(home):
                await submit_pending(client, home)
                await anyio.sleep(0.05)

    try:
        anyio.run(main)
    except BaseException as exc:  # noqa: BLE001
        errors.append(exc)


class StubService:
    """What ``mcp_server.cancel._withdraw`` uses of a TaskService: the home, the store, reads."""

    def __init__(self, home: Path) -> None:
        self.runtime = SimpleNamespace(home=home)
        self.store = TaskStore(home)

    def read_task(self, record_id: str) -> dict[str, Any]:
        return self.store.read(record_id)

    async def view(self, record_id: str) -> dict[str, Any]:
        return self.store.read(record_id)


@pytest.mark.prefect
def test_racing_submitters_create_each_queue_in_acceptance_order_and_the_pool_hands_it_out_so(
        ts_daemon: dict[str, Any], tmp_path: Path) -> None:
    from prefect.client.orchestration import PrefectClient
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterTags
    from prefect.states import Cancelled
    from tianshu_mcp.hosting import intake
    from tianshu_mcp.deployments.setup import drop_zombie_automation
    from tianshu_mcp.deployments.topology import pool_deployment
    from tianshu_mcp.mcp_server.cancel import _withdraw

    home = tmp_path / "home"
    home.mkdir()
    api, auth = ts_daemon["api"], (ts_daemon["home"] / "prefect" / "credentials").read_text().strip()
    pool = f"fifo-{secrets.token_hex(3)}"  # no worker serves it: its runs stay Scheduled for us to read
    tag = f"fifo:{pool}"
    ids = same_second_ids(20)
    serial = ids[:14]  # queue "a" (limit 1); the rest on "b-wt" (limit 3), accepted in between
    order = [ids[i] for i in (0, 14, 1, 2, 15, 3, 4, 16, 5, 6, 17, 7, 8, 18, 9, 10, 19, 11, 12, 13)]
    for record_id in order:
        accept(home, record_id, "a" if record_id in serial else "b-wt", 1 if record_id in serial else 3, pool,
               pool_deployment(pool))
    wt = [i for i in order if i not in serial]
    withdrawn, damaged, unreadable, cancelled = serial[1], serial[2], serial[3], serial[4]
    bad = submissions.read(home, damaged)
    submissions.entry_path(home, damaged).write_text(json.dumps({**bad, "parameters": ["not", "a", "mapping"]}))
    submissions.entry_path(home, unreadable).write_text("{half an entry")
    store = TaskStore(home)
    anyio.run(_withdraw, StubService(home), cancelled, "changed my mind")  # manage_task(cancel) of a queued task
    assert not submissions.is_pending(home, cancelled)

    async def check(client: Any) -> None:
        runs = await client.read_flow_runs(flow_run_filter=FlowRunFilter(tags=FlowRunFilterTags(all_=[tag])))
        for key, expected in (("a", [i for i in serial if i not in (withdrawn, damaged, unreadable, cancelled)]),
                              ("b-wt", wt)):
            mine = [r for r in runs if r.work_queue_name == f"project-{key}"]
            assert [r.name for r in sorted(mine, key=lambda r: r.created)] == expected  # created in order
            for run in mine:  # scheduled at acceptance
                assert run.expected_start_time == submissions.accepted_at(store.read(run.name))
            # what a worker gets: the queue's oldest runs up to its limit; take the first, ask again
            handed: list[str] = []
            while got := await client.get_scheduled_flow_runs_for_work_pool(pool, [f"project-{key}"]):
                assert [g.flow_run.name for g in got] == expected[len(handed):len(handed) + (1 if key == "a" else 3)]
                handed.append(got[0].flow_run.name)
                await client.set_flow_run_state(got[0].flow_run.id, Cancelled(), force=True)
            assert handed == expected
            print(f"queue {key}: created and handed out in acceptance order: {len(expected)} runs")

    async def check_and_clean_up(checking: bool) -> None:
        async with PrefectClient(api, auth_string=auth) as client:
            try:
                if checking:
                    await check(client)
            finally:
                for run in await client.read_flow_runs(flow_run_filter=FlowRunFilter(tags=FlowRunFilterTags(all_=[tag]))):
                    await client.delete_flow_run(run.id)
                with contextlib.suppress(Exception):
                    dep = await client.read_deployment_by_name(pool_deployment(pool))
                    await client.delete_deployment(dep.id)
                with contextlib.suppress(Exception):
                    await client.delete_work_pool(pool)
                await drop_zombie_automation(client)  # made with the pool, as for a remote task
                intake._READY_POOLS.discard((api, pool))

    # a cancel holds the second entry of "a" while three clients and the service race
    cancel = submissions.entry_lock(home, withdrawn, timeout_s=5)
    cancel.acquire()
    stop, errors = threading.Event(), []
    threads = [threading.Thread(target=_submitter, args=(api, auth, home, order[k::3], stop, errors)) for k in range(3)]
    threads.append(threading.Thread(target=_service, args=(api, auth, home, stop, errors)))
    checking = False
    try:
        for t in threads:
            t.start()
        until(lambda: all(store.read(i).get("flowRunId") for i in [serial[0], *wt]) or errors, 240,
              "the first of 'a' and all of 'b-wt'")
        assert not errors, errors
        assert not [i for i in serial[1:] if store.read(i).get("flowRunId")]  # nothing of "a" passed the held one
        submissions.remove(home, withdrawn)  # what manage_task(cancel) does to a queued task
        store.update(withdrawn, finalStatus="cancelled", finishedAt=utc_now())
        cancel.release()
        until(lambda: not submissions.has_pending(home) or errors, 240, "every entry handled")
        assert not errors, errors
        checking = True
    finally:
        stop.set()
        if cancel.is_locked:
            cancel.release()
        for t in threads:
            t.join(60)
        anyio.run(check_and_clean_up, checking)
    assert store.read(withdrawn)["finalStatus"] == "cancelled"
    assert store.read(cancelled)["finalStatus"] == "cancelled" and not store.read(cancelled).get("flowRunId")
    for record_id in (damaged, unreadable):
        task = store.read(record_id)
        assert task["finalStatus"] == "failed" and "is damaged" in task["lastMessage"] and not task.get("flowRunId")


# --- end to end: 5 bursts of 10 tasks on one project from 3 stdio servers, two busy loops beside --------
BUSY = "while True: pass"


@pytest.mark.extended
@pytest.mark.alone  # two busy loops on purpose: other tests' latency bounds are not theirs to pay
@pytest.mark.prefect
@pytest.mark.timeout(1500)
@pytest.mark.anyio
async def test_fifty_tasks_from_three_stdio_servers_start_in_acceptance_order_under_load(
        ts_daemon: dict[str, Any], tmp_path: Path) -> None:
    import httpx

    home = ts_daemon["home"]
    repo = make_calc_repo(tmp_path / "calc")
    busy = [subprocess.Popen(["python3", "-c", BUSY]) for _ in range(2)]
    sent: list[list[str]] = [[], [], []]  # per stdio server, in the order it sent them
    load = [os.getloadavg()[0]]
    try:
        async with contextlib.AsyncExitStack() as stack:
            clients = [await stack.enter_async_context(mcp_client(home)) for _ in range(3)]
            t0 = time.monotonic()

            async def send(k: int, burst: int, count: int) -> None:
                for n in range(count):
                    r = await clients[k].call_tool("run_task", {
                        "projectPath": str(repo), "task": f"burst {burst}, server {k}, task {n}", "agentId": "scripted-noop",
                        "autoVerify": False, "taskTimeoutMs": 600000})
                    assert not r.is_error, text_of(r)
                    sent[k].append(meta_of(r)["taskId"])

            for burst in range(5):  # 10 tasks: 4 + 3 + 3, the three servers at once
                async with anyio.create_task_group() as tg:
                    for k in range(3):
                        tg.start_soon(send, k, burst, 4 if k == 0 else 3)
            accepted_in = time.monotonic() - t0
        ids = [i for own in sent for i in own]
        assert len(set(ids)) == 50
        store = TaskStore(home)

        def runs() -> list[dict[str, Any]]:
            """The tasks' flow runs (by the ids their records hold: a run's name carries the brief too)."""
            run_ids = [(store.read(i) or {}).get("flowRunId") for i in ids]
            if not all(run_ids):
                return []
            with httpx.Client(base_url=ts_daemon["api"], headers=auth_headers(home), timeout=30) as api:
                resp = api.post("/flow_runs/filter", json={"flow_runs": {"id": {"any_": run_ids}}, "limit": 200})
                resp.raise_for_status()
                return resp.json()

        def all_ended() -> bool:
            found = runs()
            return len(found) == 50 and all(r["state"]["type"] in ("COMPLETED", "FAILED", "CANCELLED", "CRASHED")
                                            for r in found)

        until(all_ended, 1200, "all fifty runs to end", every=2)
        load.append(os.getloadavg()[0])
    finally:
        for proc in busy:
            proc.kill()
            proc.wait(10)
    tasks = {i: store.read(i) for i in ids}
    seq = {i: tasks[i]["acceptedSeq"] for i in ids}
    for own in sent:  # what each server sent one after the other was accepted in that order
        assert [seq[i] for i in own] == sorted(seq[i] for i in own)
    by_seq = sorted(ids, key=seq.__getitem__)
    run_of = {r["name"].split(" · ", 1)[0]: r for r in runs()}  # named "<task id> · <project> · <brief>"

    def stamp(value: str) -> datetime:
        return datetime.fromisoformat(value)

    created = [stamp(run_of[i]["created"]) for i in by_seq]
    started = [stamp(run_of[i]["start_time"]) for i in by_seq]
    recorded = [stamp(tasks[i]["startedAt"]) for i in by_seq if tasks[i].get("startedAt")]
    lag = [(stamp(run_of[i]["created"]) - stamp(tasks[i]["acceptedAt"])).total_seconds() for i in by_seq]
    ended = [stamp(run_of[i]["end_time"]) for i in by_seq]
    out_of_order = [(by_seq[n], by_seq[n + 1]) for n in range(49) if not started[n] < started[n + 1]]
    # did ordered creation ever leave the project's queue idle? (its next run did not exist yet when the last ended)
    starved = [(created[n + 1] - ended[n]).total_seconds() for n in range(49) if created[n + 1] > ended[n]]
    gaps = [(started[n + 1] - ended[n]).total_seconds() for n in range(49)]
    print(f"\nFIFO e2e: 50 tasks accepted in {accepted_in:.1f} s from 3 stdio servers beside 2 busy loops "
          f"(1-min load average {load[0]:.1f} before, {load[-1]:.1f} at the end, 2 cores); "
          f"acceptance -> flow run created: max {max(lag):.2f} s, median {statistics.median(lag):.2f} s; "
          f"all ended {time.monotonic() - t0:.0f} s after the first call; the queue waited for a flow run to be "
          f"created {len(starved)} time(s) (max {max(starved, default=0):.2f} s); end of one run -> start of the next: "
          f"median {statistics.median(gaps):.2f} s, max {max(gaps):.2f} s; "
          f"start order = acceptance order: {not out_of_order} (out of order: {out_of_order})")
    first = stamp(tasks[by_seq[0]]["acceptedAt"])
    print("seq  server  accepted  created  started    ended  (s after the first acceptance)")
    for n, i in enumerate(by_seq):
        server = next(k for k, own in enumerate(sent) if i in own)
        print(f"{seq[i]:>3}  {server:>6}  {(stamp(tasks[i]['acceptedAt']) - first).total_seconds():8.2f}  "
              f"{(created[n] - first).total_seconds():7.2f}  {(started[n] - first).total_seconds():7.2f}  "
              f"{(ended[n] - first).total_seconds():7.2f}")
    assert all(a < b for a, b in itertools.pairwise(created)), "flow runs created out of acceptance order"
    assert not out_of_order, "flow runs started out of acceptance order"
    assert len(recorded) == 50 and all(a < b for a, b in itertools.pairwise(recorded))
    assert all(run_of[i]["expected_start_time"] and stamp(run_of[i]["expected_start_time"]) == stamp(tasks[i]["acceptedAt"])
               for i in ids)


@pytest.mark.prefect
def test_a_deployment_id_is_read_once_per_process_and_forgotten_when_the_creation_answers_404(
        ts_daemon: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``hosting/intake._DEPLOYMENT_IDS`` (design note 80): the second task of a process creates its
    flow run without reading the deployment again; an id that has gone stale (here: planted)
    makes the creation answer 404, the entry stays pending and the next attempt reads the
    deployment and creates the run."""
    from uuid import uuid4

    from prefect.client.orchestration import PrefectClient
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterTags
    from prefect.exceptions import ObjectNotFound
    from tianshu_mcp.deployments.setup import drop_zombie_automation
    from tianshu_mcp.deployments.topology import pool_deployment
    from tianshu_mcp.hosting import intake

    home = tmp_path / "home"
    home.mkdir()
    api, auth = ts_daemon["api"], (ts_daemon["home"] / "prefect" / "credentials").read_text().strip()
    pool = f"ids-{secrets.token_hex(3)}"  # no worker serves it: the runs stay Scheduled
    first, second, third = same_second_ids(3)
    for record_id in (first, second, third):
        accept(home, record_id, "k", 1, pool, pool_deployment(pool))
    monkeypatch.setattr(intake, "_DEPLOYMENT_IDS", {})

    async def main() -> None:
        async with PrefectClient(api, auth_string=auth) as client:
            reads, real = list_deployment_reads(client, monkeypatch)
            try:
                await intake.submit_one(client, home, first)  # makes the pool and its deployment, reads its id
                made = len(reads)
                await intake.submit_one(client, home, second)
                assert len(reads) == made  # the second creation read nothing
                intake._DEPLOYMENT_IDS[(str(client.api_url), pool_deployment(pool))] = uuid4()  # gone meanwhile
                with pytest.raises(ObjectNotFound) as refused:  # as the deployment's read would say it
                    await intake.submit_one(client, home, third)
                assert "404" in repr(refused.value.__cause__)
                assert submissions.is_pending(home, third) and not TaskStore(home).read(third).get("flowRunId")
                await intake.submit_one(client, home, third)
                assert len(reads) > made and set(reads) == {pool_deployment(pool)}
                assert TaskStore(home).read(third)["flowRunId"]
            finally:
                for run in await client.read_flow_runs(flow_run_filter=FlowRunFilter(tags=FlowRunFilterTags(all_=[f"fifo:{pool}"]))):
                    await client.delete_flow_run(run.id)
                with contextlib.suppress(Exception):
                    await client.delete_deployment((await real(pool_deployment(pool))).id)
                with contextlib.suppress(Exception):
                    await client.delete_work_pool(pool)
                await drop_zombie_automation(client)
                intake._READY_POOLS.discard((str(client.api_url), pool))

    anyio.run(main)
