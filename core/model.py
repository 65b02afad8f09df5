"""The task model: statuses, error types, event vocabulary, meta block (docs/agents-tasks.md §2, docs/tools.md
§2.6)."""

from __future__ import annotations

from enum import Enum
from typing import Any, Mapping

from .i18n import _


class TaskStatus(str, Enum):
    """Task statuses as hosts see them (docs/agents-tasks.md §2.1)."""

    QUEUED = "queued"
    RUNNING = "running"
    VERIFY_START = "verify_start"
    FIXING = "fixing"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    NEEDS_ATTENTION = "needs_attention"
    NEEDS_USER = "needs_user"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"


ACTIVE = frozenset({"queued", "running", "verify_start", "fixing"})
TERMINAL = frozenset({"succeeded", "failed", "needs_attention", "cancelled", "interrupted"})
ALL_STATUSES = frozenset(s.value for s in TaskStatus)

ERROR_TYPES = frozenset(
    {"timeout", "spawn", "setup_failed", "agent_failed", "verify_failed", "cancelled", "interrupted",
     "agent_unresolved", "internal"}
)
ABORT_SOURCES = frozenset({"user", "shutdown", "timeout", "internal"})

# Events a host sees in query_task's recentEvents (docs/tools.md §3.4); `note` never appears there.
AGENT_EVENT_NAMES = (
    "task_dispatched",
    "confirmation_dialog_detected",
    "awaiting_user_authorization",
    "file_modification_started",
    "rework_triggered",
    "agent_tool_call",
    "agent_model_retry",
    "agent_stalled",
)


NO_QUESTION: dict[str, Any] = {"needsUserKind": None, "pendingQuestion": None, "needsUserRound": None,
                               "needsUserKey": None, "needsUserFeedback": None, "needsUserQuestion": None,
                               "continueMessage": None, "continueKey": None}
"""The needs_user fields of ``task.json``, cleared (a question answered, cancelled or timed out)."""


def exit_phrase(code: Any) -> str:
    """``exit code 0`` — or ``no exit code (stopped)`` for an agent killed at its time limit or by
    a cancel (a process that never exited by itself has none)."""
    return _("exit code {code}").format(code=code) if code is not None else _("no exit code (stopped)")


def is_wait_settled(status: str) -> bool:
    """A wait stops at a terminal status or at ``needs_user`` (docs/tools.md §3.3)."""
    return status in TERMINAL or status == "needs_user"


# Key order of the meta block for task-derived metas (docs/tools.md §2.6), plus our Prefect links.
_META_KEYS = (
    "taskId", "status", "agentId", "projectPath", "model", "mode", "round", "roundsUsed", "changedFiles",
    "diffstat", "reportFiles", "logFile", "message", "errorType", "cancelReason",
    "cancelRequestedAt", "abortSource", "finishedAt", "reportRound", "verificationSource",
    "latestVerificationVerdict", "agentEndReason", "agentExitCode", "agentDurationMs", "needsUserKind", "pendingQuestion",
    "pendingVisualVerification", "progressSummary", "guiStop", "flowRunId", "flowRunUrl",
    "prefectApiUrl", "idempotencyKey", "dryRun", "dryRunReportFiles", "dryRunPlanDoc",
    "isolation", "worktreePath", "resultBranch", "resultCommit", "resultPatch", "dirtyNotCarried", "mergeCommit",
    "workPool", "repoUrl", "ref", "remoteCommit", "resultPushed", "pushError",
    "targetTests", "holdoutCount", "testIntegrity", "unsupportedClaims",
)


def latest_round(task: Mapping[str, Any]) -> int | None:
    """The number of the task's latest round, or None before its first (docs/tools.md §2.6).

    Rounds have one numbering, from 0: round N's agent log is ``agent-N.log``, its task runs
    ``dispatch-round-N`` / ``verify-round-N``, its report ``report-N.*`` (what
    ``query_info(type=report, round=N)`` reads). The latest is the later of the agent round
    running or last run (``currentRound``) and the latest report (``reportRound``, which a
    manual verification also advances); a record written before ``currentRound`` existed
    falls back to ``roundsUsed - 1``.
    """
    numbers = [v for v in (task.get("currentRound"), task.get("reportRound")) if isinstance(v, int) and v >= 0]
    used = task.get("roundsUsed")
    if not numbers and isinstance(used, int) and used > 0:
        numbers.append(used - 1)
    return max(numbers) if numbers else None


def meta_from_task(task: Mapping[str, Any], status: str) -> dict[str, Any]:
    """Build the meta block of a task (docs/tools.md §2.6).

    Args:
        task: the task's ``task.json`` details (camelCase keys).
        status: the status derived from the flow-run state (the only owner of status).

    Returns:
        An ordered dict: ``ok`` (status == succeeded), ``taskId``, ``status``, …, ``round``
        (:func:`latest_round`, omitted before the first round), ``roundsUsed`` (agent rounds
        used), ``message`` (always present), ``flowRunId``/``flowRunUrl``/
        ``prefectApiUrl``; keys whose value is None are omitted.
    """
    src = dict(task)
    src["status"] = status
    src["round"] = latest_round(task)
    src["roundsUsed"] = int(task.get("roundsUsed") or 0)
    src["message"] = task.get("lastMessage") or ""
    if task.get("reportMd") or task.get("reportJson"):
        src["reportFiles"] = {k: v for k, v in (("md", task.get("reportMd")), ("json", task.get("reportJson")),
                                                 ("html", task.get("reportHtml"))) if v}
    if task.get("dryRunReportMd") or task.get("dryRunReportJson"):
        src["dryRunReportFiles"] = {k: v for k, v in (("md", task.get("dryRunReportMd")),
                                                      ("json", task.get("dryRunReportJson"))) if v}
    src["dryRun"] = True if task.get("dryRun") else None  # only when true (docs/tools.md §2.6)
    meta: dict[str, Any] = {"ok": status == "succeeded"}
    for key in _META_KEYS:
        value = src.get(key)
        if value is not None:
            meta[key] = value
    return meta
