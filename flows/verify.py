"""Flows ``verify`` (manual or scheduled verification) and ``reverify`` (the cron trigger).

``verify`` runs one acceptance round on the project's work queue, so it never overlaps a task on
the same project (docs/architecture.md §4). Its record is a ``vfy_…`` directory; in task mode the report is
also a new round of the target task (the next free ``report-N``, never overwriting one) and the
target's ``task.json`` gets the latest verdict (docs/tools.md §1.2, docs/acceptance.md §3.0).

``reverify`` is what a cron schedule fires (one schedule per project on deployment
``reverify/reverify``): it creates a ``vfy_`` record and a ``verify`` flow run on the project's
queue, then ends; the verification itself shows up as that flow run. Scheduled re-verification
judges the project's current state against HEAD with the zero-change gate off.
"""

from __future__ import annotations

import os

from prefect import flow
from prefect.states import Completed, Failed, State

from ..acceptance.config_model import AcceptanceCheck, AcceptanceConfig
from ..acceptance.git import Baseline, GitFailed, capture_baseline, resolve_commit
from ..core.childenv import adopt_client_env
from ..core.errors import TianshuError
from ..core.files import atomic_write_json, read_json_safe
from ..core.i18n import _
from ..core.record import Isolation
from ..core.settings import home_tag
from ..core.taskstore import utc_now
from ..tasks.common import record, step, store
from ..tasks.verify import join_artifacts, run_verify_round
from . import heartbeats, suspension
from .persistence import NO_RESULTS
from .isolation import close_workspace, open_workspace
from .states import NEEDS_ATTENTION, SUCCEEDED, blocked_error_type, quiet_orderly_ends
from .watch import guard_run

quiet_orderly_ends()
suspension.install()  # the flow starts while Prefect's suspension observer subscribes
heartbeats.install()  # the process ends with its flow run, not up to 1 s later

ARTIFACTS_JOIN_S = 10.0
"""How long the flow waits, before it returns, for its report artifacts still being published, s."""


def baseline_at(project: str, ref: str, sha: str) -> Baseline:
    """A baseline that is commit ``sha`` with a clean worktree: every change since it counts."""
    return Baseline(is_repo=True, head=sha, message=f"baseline {ref} = {sha[:7]} (clean worktree assumed)")


@step("verify-baseline")
def verify_baseline(record_id: str, project_path: str, target_task_id: str | None, baseline_ref: str | None) -> Baseline:
    """Pick the baseline of a verification and store it as the record's ``baseline.json``.

    target task and no ref (or ``"task"``) → the task's pre-work baseline; a ``tsk_`` ref → that
    task's baseline; a git ref → that commit, clean; otherwise → the project as it is now.
    """
    st = store()
    if baseline_ref and baseline_ref.startswith("tsk_"):
        data = read_json_safe(st.dir(baseline_ref) / "baseline.json")
    elif target_task_id and baseline_ref in (None, "task"):
        data = read_json_safe(st.dir(target_task_id) / "baseline.json")
    elif baseline_ref:
        sha = resolve_commit(project_path, baseline_ref)
        if sha is None:
            raise ValueError(_("baselineRef '{ref}' is not a commit of {path}").format(ref=baseline_ref, path=project_path))
        data = baseline_at(project_path, baseline_ref, sha).to_json()
    else:
        data = capture_baseline(project_path).to_json()
    if not isinstance(data, dict):
        raise ValueError(_("the baseline to verify against is missing"))
    atomic_write_json(st.dir(record_id) / "baseline.json", data)
    return Baseline.model_validate(data)


@flow(name="verify", description="One acceptance round on demand (verify_task) or on a schedule.", log_prints=False,
      **NO_RESULTS)
def verify_flow(
    record_id: str,
    project_path: str,
    target_task_id: str | None = None,
    baseline_ref: str | None = None,
    extra_checks: list[AcceptanceCheck] | None = None,
    checks_mode: str = "append",
    acceptance_override: AcceptanceConfig | None = None,
    source: str = "manual",
    target_tests: list[str] | None = None,
) -> State:
    """Verify ``project_path`` for record ``record_id`` (see the module doc); ``source`` is
    ``manual`` (verify_task) or ``scheduled`` (a reverify run); ``target_tests`` is the call's
    ``targetTests`` (None: the target task's own, or none); ``extra_checks`` and ``checks_mode`` are the
    call's ``extraChecks`` (:class:`AcceptanceCheck` ``{name, cmd, timeoutMs?, optional?, junitXml?}``)
    and ``checksMode``; ``acceptance_override`` is the call's ``acceptanceOverride`` layer (None: the
    target task's stored one). Prefect validates the JSON parameters into these models (the MCP
    handler has refused invalid ones with a coded error already). The call's holdout checks are never a
    parameter (Prefect shows parameters): they wait in the record's ``holdout.json``.

    Returns ``Completed(Succeeded)`` when the round passed, ``Failed(NeedsAttention)`` when it was
    blocked (broken config, a check that cannot start), ``Failed`` otherwise.
    """
    st = store()
    target = st.load(target_task_id) if target_task_id else None
    work = project_path
    if target_task_id and target and target.isolation == Isolation.WORKTREE:
        try:  # a worktree task is judged in its worktree, re-opened from its branch
            work = open_workspace(target_task_id, project_path, target)
        except TianshuError as exc:
            msg = _("verification not run: the task's worktree could not be re-opened: {error}").format(error=exc.render())
            record(record_id, lastMessage=msg, finishedAt=utc_now(), phase=None, errorType="git_failed")
            return Failed(name=NEEDS_ATTENTION, message=msg)
    try:
        return _verify(record_id, work, target_task_id, baseline_ref, extra_checks, checks_mode, acceptance_override,
                       source, target_tests)
    finally:
        join_artifacts(ARTIFACTS_JOIN_S)  # the round's report artifacts, published aside
        if work != project_path and target_task_id:
            close_workspace(target_task_id, "verified", commit=False)


def _verify(record_id: str, project_path: str, target_task_id: str | None, baseline_ref: str | None,
            extra_checks: list[AcceptanceCheck] | None, checks_mode: str, acceptance_override: AcceptanceConfig | None,
            source: str, target_tests: list[str] | None = None) -> State:
    """The body of :func:`verify_flow` (``project_path``: where the work is judged)."""
    guard_run(record_id, project_path)
    st = store()
    adopt_client_env(st.dir(record_id))  # the checks run with the host's environment
    record(record_id, startedAt=utc_now(), phase="verify_start")
    try:
        baseline = verify_baseline(record_id, project_path, target_task_id, baseline_ref)
    except (ValueError, GitFailed) as exc:
        text = exc.render() if isinstance(exc, GitFailed) else str(exc)
        msg = _("verification not run: {error}").format(error=text)
        record(record_id, lastMessage=msg, finishedAt=utc_now(), phase=None,
               errorType="git_failed" if isinstance(exc, GitFailed) else "verify_failed")
        return Failed(name=NEEDS_ATTENTION, message=msg)
    report_owner = target_task_id or record_id
    verdict = run_verify_round(
        "verify-round-manual", report_owner, 0, baseline, extra_checks, checks_mode,
        # the layer as the engine reads it: the call's (its wire form) or the task's stored raw one, which
        # may be damaged on disk and is then reported as CONFIG_INVALID by the round
        acceptance_override.to_json() if acceptance_override is not None
        else (st.read(report_owner) or {}).get("acceptanceOverride"),
        str(st.dir(baseline_ref)) if baseline_ref and baseline_ref.startswith("tsk_") else None,
        target_task_id is not None,
        target_tests=target_tests,
        holdout_dir=str(st.dir(record_id)),  # the call's own holdoutChecks (task mode: beside the task's)
    )
    details = verdict.record_fields(source).model_dump(mode="json")
    if target_task_id:
        record(target_task_id, **details)
        st.event(target_task_id, "verify_round", "verify_start",
                 (_("manual verification report-{round}: passed") if verdict.passed
                  else _("manual verification report-{round}: failed")).format(round=verdict.round))
    blocked = bool(verdict.blocking_issues)
    msg = (_("verification blocked (report-{round}): {message}") if blocked
           else _("verification passed (report-{round}): {message}") if verdict.passed
           else _("verification failed (report-{round}): {message}")).format(round=verdict.round,
                                                                            message=verdict.message)
    record(record_id, **details, lastMessage=msg, finishedAt=utc_now(), phase=None,
           errorType=(None if verdict.passed else blocked_error_type(verdict.blocking_issues)),
           summary=verdict.summary)
    if verdict.passed:
        return Completed(name=SUCCEEDED, message=msg)
    return Failed(name=NEEDS_ATTENTION if blocked else "Failed", message=msg)


@flow(name="reverify", description="Scheduled re-verification of a project against HEAD.", log_prints=False,
      **NO_RESULTS)
def reverify_flow(project_path: str) -> State:
    """Queue a ``verify`` flow run for ``project_path`` on its work queue and return.

    The new ``vfy_`` record (``kind: reverify``) appears in query_info(type=tasks); it is handed
    over as a durable submission entry (:mod:`tianshu_mcp.core.submissions`), which the home's
    service turns into a flow run of deployment ``verify`` within a second; that flow run carries
    the report. The zero-change gate is off (a health check, not a task).
    """
    from ..core import submissions
    from ..core.ids import new_verify_id
    from ..core.paths import project_key, serial_key

    if not os.path.isdir(project_path):
        return Failed(message=_("{path} no longer exists; remove its schedule with "
                                "`tianshu-mcp schedule remove {path}`").format(path=project_path))
    record_id = new_verify_id()
    st = store()
    key = project_key(project_path)
    rec = st.create(record_id, {"kind": "reverify", "workspaceMode": "project", "projectPath": project_path,
                                "agentId": "scheduled-verify", "task": f"scheduled re-verification of {project_path}",
                                "autoVerify": True, "autoFixRounds": 0, "projectKey": key, "homeTag": home_tag()})
    submissions.enqueue(
        st.home, record_id, "verify/verify",
        {"record_id": record_id, "project_path": project_path, "baseline_ref": "HEAD",
         "acceptance_override": AcceptanceConfig(requireChanges=False).to_json(), "source": "scheduled"},
        [f"tianshu-task:{record_id}", f"project:{key}", "agent:scheduled-verify", home_tag()], serial_key(project_path),
        rec["createdAt"], name=submissions.flow_run_name(record_id, project_path, _("scheduled verification")))
    return Completed(message=f"queued verification {record_id} for {project_path}")
