"""Prefect task ``repair-plan-{r}``: turn a failed round into the next round's brief (docs/agents-tasks.md
§3)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ..acceptance.repair import feedback_text, render_repair_plan
from ..core.files import atomic_write_text, read_json
from .common import step, store


class RepairPlan(BaseModel):
    """A written repair plan: ``planPath`` (``<taskDir>/rework-<taskId>-r<n>.md``) and ``feedback``
    (the next round's brief addition)."""

    model_config = ConfigDict(frozen=True)

    planPath: str
    feedback: str


@step("repair-plan")
def write_repair_plan(task_id: str, failed_round: int, report_json: str, report_md: str) -> RepairPlan:
    """Write ``rework-<taskId>-r<failedRound>.md`` and return the next round's feedback.

    Returns:
        The :class:`RepairPlan` ``{planPath, feedback}``. Raises OSError/ValueError when the report cannot be read
        (the flow turns that into failed/internal).
    """
    st = store()
    meta = st.load(task_id)
    report = read_json(report_json)
    plan = render_repair_plan(report, task_id, (meta.task if meta is not None else None) or "", Path(report_md))
    plan_path = st.dir(task_id) / f"rework-{task_id}-r{failed_round}.md"
    atomic_write_text(plan_path, plan)
    return RepairPlan(planPath=str(plan_path), feedback=feedback_text(report, plan_path))
