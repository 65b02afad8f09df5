"""Status derived in one place (flows/states.py): one test row per row of the table in
docs/design-notes.md note 52, and the final states the flows write read back as their status."""

from __future__ import annotations

import pytest
from tianshu_mcp.flows.states import Derived, Repair, RunState, derive_status, state_for

RUN = "0b0c6d54-5a1c-4a64-9a55-0d8a7f0f7e11"
BASE = {"taskId": "tsk_20261203000000_aaaaaa", "createdAt": "2026-12-03T00:00:00.000Z", "projectPath": "/p"}
DONE = {"finishedAt": "2026-12-03T00:01:00.000Z"}

ROWS = [
    # (row, record fields, run state, run id valid, waiting, derived)
    ("no flow run yet, its submission waits", {}, None, True, True, Derived("queued")),
    ("no flow run and none will come", {}, None, True, False, Derived("interrupted", Repair.NEVER_SUBMITTED)),
    ("withdrawn before its flow run existed", {"finalStatus": "cancelled"}, None, True, False, Derived("cancelled")),
    ("its flow run was deleted in the UI", {"flowRunId": RUN}, None, True, False, Derived("cancelled", Repair.RUN_DELETED)),
    ("deleted, and already recorded so", {"flowRunId": RUN, "finalStatus": "cancelled"}, None, True, False,
     Derived("cancelled")),
    ("a damaged flowRunId", {"flowRunId": "not-a-uuid"}, None, False, False, Derived("interrupted", Repair.DAMAGED_RUN_ID)),
    ("Scheduled", {"flowRunId": RUN}, RunState("SCHEDULED", "Scheduled"), True, False, Derived("queued")),
    ("Late", {"flowRunId": RUN}, RunState("SCHEDULED", "Late"), True, False, Derived("queued")),
    ("Pending", {"flowRunId": RUN}, RunState("PENDING", "Pending"), True, False, Derived("queued")),
    ("Running, agent", {"flowRunId": RUN, "phase": "running"}, RunState("RUNNING", "Running"), True, False,
     Derived("running")),
    ("Running, verifying", {"flowRunId": RUN, "phase": "verify_start"}, RunState("RUNNING", "Running"), True, False,
     Derived("verify_start")),
    ("Running, repair plan", {"flowRunId": RUN, "phase": "fixing"}, RunState("RUNNING", "Running"), True, False,
     Derived("fixing")),
    ("Running, a remote task fetching", {"flowRunId": RUN, "phase": "fetching"}, RunState("RUNNING", "Running"), True,
     False, Derived("running")),
    ("Cancelling", {"flowRunId": RUN, "phase": "running"}, RunState("CANCELLING", "Cancelling"), True, False,
     Derived("running")),
    ("Paused (the agent asks)", {"flowRunId": RUN, "needsUserKey": "needs-user-1"}, RunState("PAUSED", "Suspended"),
     True, False, Derived("needs_user")),
    ("Completed(Succeeded)", {"flowRunId": RUN, **DONE}, RunState("COMPLETED", "Succeeded"), True, False,
     Derived("succeeded")),
    ("Failed", {"flowRunId": RUN, **DONE}, RunState("FAILED", "Failed"), True, False, Derived("failed")),
    ("Failed(NeedsAttention)", {"flowRunId": RUN, **DONE}, RunState("FAILED", "NeedsAttention"), True, False,
     Derived("needs_attention")),
    ("Cancelled", {"flowRunId": RUN, **DONE}, RunState("CANCELLED", "Cancelled"), True, False, Derived("cancelled")),
    ("Cancelled(Interrupted)", {"flowRunId": RUN, **DONE}, RunState("CANCELLED", "Interrupted"), True, False,
     Derived("interrupted")),
    ("Crashed", {"flowRunId": RUN, **DONE}, RunState("CRASHED", "Crashed"), True, False, Derived("interrupted")),
    ("a final run the flow did not record (killed)", {"flowRunId": RUN}, RunState("FAILED", "Failed"), True, False,
     Derived("failed", Repair.RECORD_END)),
    ("a crashed run the flow did not record", {"flowRunId": RUN}, RunState("CRASHED", "Crashed"), True, False,
     Derived("interrupted", Repair.RECORD_END)),
    ("a question nobody answered in time", {"flowRunId": RUN, "needsUserKey": "needs-user-1"},
     RunState("FAILED", "Failed"), True, False, Derived("failed", Repair.UNANSWERED)),
]


@pytest.mark.parametrize(("row", "fields", "run", "valid", "waiting", "want"), ROWS, ids=[r[0] for r in ROWS])
def test_each_row_of_the_status_table(row: str, fields: dict, run: RunState | None, valid: bool, waiting: bool,
                                      want: Derived) -> None:
    assert derive_status({**BASE, **fields}, run, run_id_valid=valid, waiting=waiting) == want


@pytest.mark.parametrize("status", ["succeeded", "failed", "needs_attention", "cancelled", "interrupted"])
def test_the_final_state_a_flow_writes_reads_back_as_its_status(status: str) -> None:
    state = state_for(status, "m")
    run = RunState(state.type.value, state.name, state.message)
    assert derive_status({**BASE, "flowRunId": RUN, **DONE}, run) == Derived(status)


def test_only_final_statuses_have_a_final_state() -> None:
    for status in ("queued", "running", "needs_user", "done"):
        with pytest.raises(ValueError):
            state_for(status, "m")


def test_a_reader_with_a_stale_copy_keeps_the_end_the_flow_recorded(tmp_path) -> None:
    """A query reads ``task.json``, the flow records its end (finishedAt, message) and sets the
    final state, then the query reads that state: the record-end repair must not overwrite the
    flow's finishedAt with the state's later timestamp (the webhook carries the flow's; observed
    30 ms apart between a delivered ``done`` and query_task)."""
    from types import SimpleNamespace

    from tianshu_mcp.core.ids import new_task_id
    from tianshu_mcp.core.taskstore import TaskStore
    from tianshu_mcp.mcp_server.taskops import TaskService

    home = tmp_path / "home"
    store, task_id = TaskStore(home), new_task_id()
    store.create(task_id, {"projectPath": "/work/proj", "agentId": "scripted", "task": "Fix add",
                           "flowRunId": "6f1c1d9e-2b1a-4e8e-9a53-1c1d9e2b1a4e"})
    stale = store.read(task_id)  # the query's copy: no finishedAt yet
    flows_end = store.update(task_id, finishedAt="2026-12-04T14:23:40.926Z", lastMessage="succeeded in round 1")
    service = TaskService(SimpleNamespace(home=home, error=None))  # type: ignore[arg-type]
    view = service._view_of(stale, {stale["flowRunId"]: RunState("COMPLETED", "Succeeded", "done",
                                                                 "2026-12-04T14:23:40.956Z")})
    assert view.status == "succeeded"
    assert store.read(task_id)["finishedAt"] == flows_end["finishedAt"] == view.task["finishedAt"]
    assert view.task["lastMessage"] == "succeeded in round 1"

    killed = new_task_id()  # no end recorded by anyone (a killed run): the repair completes it
    store.create(killed, {"projectPath": "/work/proj", "agentId": "scripted", "task": "Fix add",
                          "flowRunId": "7f1c1d9e-2b1a-4e8e-9a53-1c1d9e2b1a4e"})
    view = service._view_of(store.read(killed), {"7f1c1d9e-2b1a-4e8e-9a53-1c1d9e2b1a4e": RunState(
        "CRASHED", "Crashed", "the process died", "2026-12-04T14:23:41.000Z")})
    assert store.read(killed)["finishedAt"] == "2026-12-04T14:23:41.000Z" == view.task["finishedAt"]
    assert view.task["lastMessage"] == "the process died"
