"""wait_task's poll interval (mcp_server/waiting.py, design note 56): quick only in the few
seconds between the flow recording its end and its run's final state, never for a run whose
final state does not come."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from tianshu_mcp.core.taskstore import utc_now
from tianshu_mcp.mcp_server.taskops import TaskView
from tianshu_mcp.mcp_server.waiting import WAIT_ENDING_S, _ending


def _iso(seconds_ago: float) -> str:
    at = datetime.now(timezone.utc) - timedelta(seconds=seconds_ago)
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def test_quick_polls_follow_a_recorded_end_only_for_a_few_seconds() -> None:
    assert _ending(TaskView({"finishedAt": utc_now()}, "running"))
    assert not _ending(TaskView({"finishedAt": _iso(WAIT_ENDING_S + 60)}, "running"))  # its run never ended
    assert not _ending(TaskView({}, "running"))  # still working
    assert not _ending(TaskView({"finishedAt": "not a time"}, "running"))
