"""How a task's status reads in tool replies (10-tools §2.7)."""

from __future__ import annotations

from ..core.model import exit_phrase
from .taskops import TaskView

_LABELS = {
    "queued": "queued (waiting for the project's slot and the global limit)",
    "running": "running (the agent is at work)",
    "verify_start": "verifying (acceptance checks running)",
    "fixing": "reworking (writing the repair plan for the next round)",
    "succeeded": "[PASS] task succeeded",
    "failed": "[FAIL] task failed",
    "needs_attention": "[WARN] needs attention (a human should look)",
    "needs_user": 'waiting for the user (resume with manage_task(action="continue"))',
    "cancelled": "cancelled",
    "interrupted": "interrupted (server restart/exit)",
}


def status_phrase(view: TaskView) -> str:
    """``status: <label>`` + `` (N rounds used; last agent run: exit code C after D ms)`` when
    rounds were used / an agent ran (10-tools §2.7; lifecycle issue, must-show 8)."""
    used = int(view.task.get("roundsUsed") or 0)
    parts = [f"{used} round{'s' if used != 1 else ''} used"] if used else []
    if "agentDurationMs" in view.task and view.status not in ("queued", "running"):
        parts.append(f"last agent run: {exit_phrase(view.task.get('agentExitCode'))} after {view.task.get('agentDurationMs')} ms")
    return f"status: {_LABELS.get(view.status, view.status)}" + (f" ({'; '.join(parts)})" if parts else "")
