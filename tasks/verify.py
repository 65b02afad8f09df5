"""Prefect task ``verify-round-{r}``: judge the round against the baseline (20-acceptance §3)."""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.artifacts import create_markdown_artifact

from ..acceptance.engine import VerifyRequest, verify_round
from ..core.settings import data_home, load_config
from .baseline import load_baseline
from .common import cancel_requested, store


def preflight_acceptance(project_path: str, override: dict[str, Any] | None) -> str | None:
    """Resolve the acceptance layers before the agent runs; return the coded error text of a
    broken layer (``[CONFIG_INVALID] …`` naming the file), or None when the config is usable."""
    from ..acceptance.config import AcceptanceConfigError, resolve_checks

    try:
        resolve_checks(project_path, data_home(), override)
    except AcceptanceConfigError as exc:
        return f"[{exc.code.value}] {exc.message}"
    return None


def artifact_key(task_id: str, what: str) -> str:
    """Prefect artifact keys allow lowercase letters, digits and dashes only."""
    return f"{task_id}-{what}".lower().replace("_", "-")


@task(name="verify", retries=0)
def verify_round_task(task_id: str, round: int, baseline: dict[str, Any]) -> dict[str, Any]:  # noqa: A002
    """Run one acceptance round and publish its markdown report as a flow-run artifact.

    Returns:
        ``{"round", "passed", "mdPath", "jsonPath", "failedChecks", "blockingIssues",
        "changedFiles", "diffstat", "message"}``.
    """
    st = store()
    meta = st.read(task_id) or {}
    tdir = st.dir(task_id)
    cfg = load_config()
    outcome = verify_round(
        VerifyRequest(
            task_id=task_id,
            project_path=meta["projectPath"],
            task_dir=tdir,
            round=round,
            baseline=load_baseline(baseline),
            home=data_home(),
            acceptance_override=meta.get("acceptanceOverride"),
            task_text=meta.get("task", ""),
            verify_command_timeout_ms=cfg.verify_command_timeout_ms,
            verify_concurrency=cfg.verify_concurrency,
            should_stop=lambda: cancel_requested(tdir),
        )
    )
    report = outcome.report
    analysis = report.get("analysis") or {}
    diff = analysis.get("diffstat") or {}
    try:
        create_markdown_artifact(
            key=artifact_key(task_id, f"report-{outcome.round}"),
            markdown=outcome.md_path.read_text(encoding="utf-8"),
            description=f"Acceptance report, round {outcome.round}: {report.get('verdict')}",
        )
    except Exception:  # noqa: BLE001 - the report on disk is the record; the artifact is a view
        pass
    return {
        "round": outcome.round,
        "passed": outcome.passed,
        "mdPath": str(outcome.md_path),
        "jsonPath": str(outcome.json_path),
        "failedChecks": list(outcome.failed_checks),
        "blockingIssues": list(outcome.blocking_issues),
        "changedFiles": list(analysis.get("changedFiles") or []) + list(analysis.get("untrackedFiles") or []),
        "diffstat": f"+{diff.get('totalAdd', 0)} -{diff.get('totalDel', 0)}",
        "message": report.get("message", ""),
    }
