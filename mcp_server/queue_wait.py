"""What a queued task is actually waiting for, said in its status and message.

A queued task waits for one of these, in the order they clear:

1. the home's service (Prefect), which creates its flow run: not started yet, or starting;
2. its flow run's creation (the service is up, the submission is being turned into a run);
3. the task ahead of it on the same project (an in-place task's work queue takes one run at a
   time): named by its id;
4. a free slot of the home's global limit (``concurrency.maxRunning`` runs at once): how many run;
5. the worker, which starts the flow run's process (a fraction of a second on a warm home).

The reason is computed from the records when a tool reads the task (:func:`queued_reason`; the
unfinished-records index, no Prefect call) and replaces the stored ``lastMessage`` of a queued
task, which could only say what was true when it was written (docs/tools.md §2.7).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from ..core.i18n import _
from ..core.taskstore import TaskStore
from ..flows.states import RunState


def _order(task: Mapping[str, Any]) -> tuple[int, str, str]:
    seq = task.get("acceptedSeq")
    return (seq if isinstance(seq, int) else 1 << 62, str(task.get("createdAt") or ""), str(task.get("taskId") or ""))


class QueueFacts:
    """What every queued task of one read compares itself with, read at most once per read: the
    home's unfinished records (:meth:`~tianshu_mcp.core.taskstore.TaskStore.unfinished`) and its
    global limit (``concurrency.maxRunning``). A listing of many queued tasks reads them once,
    not once per task."""

    def __init__(self, store: TaskStore, max_running: Callable[[], int]) -> None:
        self._store = store
        self._max_running = max_running
        self._unfinished: list[dict[str, Any]] | None = None
        self._limit: int | None = None

    @property
    def unfinished(self) -> list[dict[str, Any]]:
        """The unfinished records (read on first use)."""
        if self._unfinished is None:
            self._unfinished = self._store.unfinished()
        return self._unfinished

    @property
    def max_running(self) -> int:
        """The global limit (read on first use)."""
        if self._limit is None:
            self._limit = self._max_running()
        return self._limit


def queued_reason(task: Mapping[str, Any], run: RunState | None, facts: QueueFacts,
                  service_ready: bool) -> str | None:
    """The message of a queued local task: what it waits for now (the module doc's list).

    Args:
        task: the task's record (``task.json``), status queued.
        run: its flow run's state, or None when it has none yet (or it was not read).
        facts: the home's unfinished records and global limit (:class:`QueueFacts`; no Prefect call).
        service_ready: the home's service answers (the runtime is connected).

    Returns:
        What it waits for (translated; the message is ``queued: <this>``), or None for a task this module does not describe: a remote
        task (its work pool's workers decide) and a dry run's preview.
    """
    if task.get("workPool"):
        return None
    if not task.get("flowRunId"):
        if not service_ready:
            return _("waiting for the tianshu-mcp service (Prefect) to start and create its flow run")
        return _("its flow run is being created")
    if run is not None and run.type.upper() == "PENDING":
        return _("the worker is starting its flow run")
    max_running = facts.max_running
    others = [t for t in facts.unfinished if t.get("taskId") != task.get("taskId") and not t.get("workPool")]
    if task.get("isolation") != "worktree":
        ahead = sorted((t for t in others if t.get("projectPath") == task.get("projectPath")
                        and t.get("isolation") != "worktree" and _order(t) < _order(task)), key=_order)
        if ahead:
            return _("waiting behind task {taskId} on this project (one task at a time per "
                     "project)").format(taskId=ahead[0].get("taskId"))
    running = sum(1 for t in others if t.get("phase"))
    if running >= max_running:
        return _("waiting for a free slot ({n} tasks running, global limit {limit})").format(
            n=running, limit=max_running)
    return _("waiting for the worker to start its flow run")
