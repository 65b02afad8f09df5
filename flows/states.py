"""A task's status, derived in one place (docs/design-notes.md note 52; docs/architecture.md §4).

The flow-run state is the only owner of a task's status. RUNNING is refined by the phase the flow
wrote to ``task.json`` (``running`` while the agent works, ``verify_start`` while verifying,
``fixing`` while writing the repair plan). A record whose flow run does not exist (not created
yet, never created, deleted in the UI) is the only case where ``task.json`` says the status
itself (``finalStatus``). :func:`derive_status` is the whole rule; :func:`state_for` is its
inverse, used by the flows to end a task.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from ..core.model import TERMINAL
from ..tasks.results import Issue

if TYPE_CHECKING:
    from prefect.states import State

# Custom state names the run-task flow ends with.
SUCCEEDED = "Succeeded"
NEEDS_ATTENTION = "NeedsAttention"
INTERRUPTED = "Interrupted"

_PHASES = frozenset({"running", "verify_start", "fixing"})


def status_from_state(state_type: str | None, state_name: str | None, phase: str | None) -> str:
    """Return the tianshu status for a flow-run state.

    Args:
        state_type: Prefect ``StateType`` value (``SCHEDULED``, ``RUNNING``, …) or None (no run).
        state_name: the state's name (``Scheduled``, ``Late``, ``NeedsAttention``, …).
        phase: the phase last written by the flow (``running``/``verify_start``/``fixing``).

    Returns:
        One of the statuses of docs/agents-tasks.md §2.1. SCHEDULED/PENDING → queued;
        RUNNING/CANCELLING → the phase; PAUSED → needs_user; COMPLETED → succeeded;
        FAILED → failed or needs_attention (by name); CANCELLED → cancelled or interrupted
        (name ``Interrupted``); CRASHED → interrupted.
    """
    st = (state_type or "").upper()
    if st in ("", "SCHEDULED", "PENDING"):
        return "queued"
    if st in ("RUNNING", "CANCELLING"):
        return phase if phase in _PHASES else "running"
    if st == "PAUSED":
        return "needs_user"
    if st == "COMPLETED":
        return "succeeded"
    if st == "FAILED":
        return "needs_attention" if state_name == NEEDS_ATTENTION else "failed"
    if st == "CANCELLED":
        return "interrupted" if state_name == INTERRUPTED else "cancelled"
    if st == "CRASHED":
        return "interrupted"
    return "running"


@dataclass(frozen=True)
class RunState:
    """A flow run's state as read from Prefect: type (``RUNNING``…), name, message, timestamp."""

    type: str
    name: str
    message: str | None = None
    timestamp: str | None = None


class Repair(str, Enum):
    """What the reader writes back to ``task.json`` after deriving the status (the flow could
    not: it was killed, deleted, never created, or its question was never answered)."""

    NONE = "none"
    RECORD_END = "record_end"  # the run is final but the record has no finishedAt: complete it from the state
    UNANSWERED = "unanswered"  # a needs_user run failed by Prefect's pause timeout: failed / timeout
    NEVER_SUBMITTED = "never_submitted"  # no flow run and no submission entry: interrupted
    RUN_DELETED = "run_deleted"  # its flow run is gone (deleted in the UI): cancelled
    DAMAGED_RUN_ID = "damaged_run_id"  # flowRunId is not a UUID: shown interrupted, nothing written


@dataclass(frozen=True)
class Derived:
    """The derived status and the repair to apply."""

    status: str
    repair: Repair = Repair.NONE


def derive_status(task: Mapping[str, Any], run: RunState | None, *, run_id_valid: bool = True,
                  waiting: bool = False) -> Derived:
    """The status of a task or verification record (every row of the table in
    docs/design-notes.md note 52).

    Args:
        task: its ``task.json``.
        run: its flow run's state; None when it has no flow run or the run was not found.
        run_id_valid: ``flowRunId`` is a UUID (a damaged one is shown, not trusted).
        waiting: no flow run yet, but a submission entry waits for one (or it was accepted in
            the last minute).
    """
    if task.get("flowRunId") and not run_id_valid:
        return Derived("interrupted", Repair.DAMAGED_RUN_ID)
    if run is None:
        if task.get("finalStatus"):
            return Derived(str(task["finalStatus"]))
        if not task.get("flowRunId"):
            return Derived("queued") if waiting else Derived("interrupted", Repair.NEVER_SUBMITTED)
        return Derived("cancelled", Repair.RUN_DELETED)
    status = status_from_state(run.type, run.name, task.get("phase"))
    if status == "failed" and not task.get("finishedAt") and task.get("needsUserKey"):
        return Derived(status, Repair.UNANSWERED)
    if status in TERMINAL and not task.get("finishedAt"):
        return Derived(status, Repair.RECORD_END)
    return Derived(status)


def state_for(status: str, message: str) -> State:
    """The final flow-run state that :func:`status_from_state` reads back as ``status`` (a
    terminal status): succeeded → ``Completed(Succeeded)``, failed → ``Failed``, needs_attention
    → ``Failed(NeedsAttention)``, cancelled → ``Cancelled``, interrupted → ``Cancelled(Interrupted)``.

    Raises:
        ValueError: ``status`` is not terminal.
    """
    from prefect.states import Cancelled, Completed, Failed

    makers = {"succeeded": lambda: Completed(name=SUCCEEDED, message=message),
              "failed": lambda: Failed(message=message),
              "needs_attention": lambda: Failed(name=NEEDS_ATTENTION, message=message),
              "cancelled": lambda: Cancelled(message=message),
              "interrupted": lambda: Cancelled(name=INTERRUPTED, message=message)}
    if status not in makers:
        raise ValueError(f"{status!r} is not a final status")
    return makers[status]()


def blocked_error_type(blocking: Sequence[Issue]) -> str:
    """``errorType`` of a round blocked by ``blocking`` issues: ``git_failed`` when git refused
    (the repository needs a person, not the acceptance config), else ``verify_failed``."""
    return "git_failed" if any(i.code == "GIT_FAILED" for i in blocking) else "verify_failed"


class OrderlyEndFilter(logging.Filter):
    """Drops the ERROR tracebacks Prefect logs for ends we chose (docs/lifecycle.md §7).

    ``python -m prefect.engine`` asks for the flow's result, so a flow that *returns* a Failed or
    Cancelled state (an orderly ``failed``/``needs_attention``/``cancelled``/``interrupted`` end)
    raises ``FailedRun``/``CancelledRun`` and Prefect logs "Engine execution exited with
    unexpected exception" with a traceback; a task run that *returns* a Failed state (a round
    that did not pass) logs "Task run failed with state: …" with an empty traceback. Both are
    dropped; the final state's own "Finished in state …" line stays. A flow or task that raised
    (a real crash) keeps its traceback: its exception is never ``FailedRun``/``CancelledRun``.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        msg = str(record.msg)
        exc = record.exc_info[1] if record.exc_info else None
        if msg.startswith("Engine execution exited with unexpected exception"):
            from prefect.exceptions import CancelledRun, FailedRun

            return not isinstance(exc, (FailedRun, CancelledRun))
        if msg.startswith("Task run failed with state:"):
            return exc is not None
        return True


def quiet_orderly_ends() -> None:
    """Install :class:`OrderlyEndFilter` on Prefect's flow-run and task-run loggers (idempotent);
    called when a flow module is imported in the flow-run process."""
    for name in ("prefect.flow_runs", "prefect.task_runs"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, OrderlyEndFilter) for f in logger.filters):
            logger.addFilter(OrderlyEndFilter())
