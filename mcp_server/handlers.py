"""Tool handlers: arguments (already schema-checked) → service → text + meta (docs/tools.md §1–§3).

Each handler returns a ``CallToolResult`` built by :mod:`.format`; semantic failures raise
:class:`~tianshu_mcp.core.errors.TianshuError`, which the server renders as
``Error: [CODE] message``.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import deque
from pathlib import Path
from typing import Any, Awaitable, Callable

import anyio
import mcp_types as types

from ..adapters.arg_gates import check_agent_args, check_project_less
from ..adapters.fatal import agent_output
from ..adapters.profiles import resolve_agent
from ..core.errors import ErrorCode, TianshuError
from ..core.files import read_text_tail
from ..core.i18n import _
from ..core.idempotency import IdempotencyStore, digest, key_digest, normalize_key
from ..core.files import read_json_safe
from ..core.ids import new_task_id, new_verify_id
from ..core.model import TERMINAL
from ..core.paths import check_project_path, serial_key
from ..core.projects import ProjectRegistry
from ..core.settings import check_config, load_config
from .format import clip, ok_result
from .info import branch_whitelist, query_info
from .integrity_args import check_holdout_checks, holdout_digest, integrity_args
from .phrases import status_phrase, submitted_lines
from .progress import describe_views, progress_ticker
from .resume import continue_task
from .isolation import merge_task, refuse_gone_result, resolve_isolation
from .remote import refuse_remote, remote_target, run_remote
from .taskops import TaskService, TaskView, dirty_count
from .tasks_ext import declared
from .waiting import wait_task


LOG_TAIL_BYTES = 256 * 1024
"""How much of an agent log's end query_task reads for its tail, bytes."""


def _soon(fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
    """Run ``fn(*args)`` in a worker thread now and return a future of its result; an error
    becomes a None result (the caller may return before it waits, and a count it cannot get is
    left out of the answer)."""
    def guarded() -> Any:
        try:
            return fn(*args)
        except Exception:  # noqa: BLE001 - see the docstring
            return None

    return asyncio.get_running_loop().run_in_executor(None, guarded)


def _check_holdout_files(home: Any, project: str, task_dir: Any = None) -> None:
    """The project's registered holdout checks (and a verified task's own) must be readable before
    anything is written: a damaged file is CONFIG_INVALID naming it, never a round that skips them."""
    from ..acceptance.integrity.holdout_store import load_holdout, load_project_holdout

    if task_dir is not None:
        load_holdout(task_dir, home, project)
    else:
        load_project_holdout(home, project)


def _validate_override(override: Any) -> None:
    from ..acceptance.config import AcceptanceConfigError, parse_layer

    try:
        parse_layer(override, "override", "acceptanceOverride")
    except AcceptanceConfigError as exc:
        raise TianshuError(ErrorCode.INVALID_ARGUMENT, _("acceptanceOverride invalid — {detail}").format(detail=exc.message)) from exc


def agent_log_tail(task_dir: Path, task: dict[str, Any], lines: int) -> str | None:
    """query_task's agent log tail: the last ``lines`` lines the agent itself wrote (never our
    spawn header, whose argv quotes the whole brief), or None without a log.

    The log is the round at work's, ``agent-<currentRound>.log``, once it exists: ``logFile``
    names the last round that ended, and a tester watching a rework round saw the previous
    round's output until it ended. Else ``logFile``, else ``agent-<roundsUsed - 1>.log`` (a
    damaged ``logFile`` is never opened as an fd). Reads at most :data:`LOG_TAIL_BYTES` bytes.
    """
    used = task["roundsUsed"] if isinstance(task.get("roundsUsed"), int) else 0
    log_file = task.get("logFile") if isinstance(task.get("logFile"), str) and task.get("logFile") else str(
        task_dir / f"agent-{max(used - 1, 0)}.log")
    current = task.get("currentRound")
    if isinstance(current, int) and current >= 0 and (task_dir / f"agent-{current}.log").is_file():
        log_file = str(task_dir / f"agent-{current}.log")
    raw = read_text_tail(log_file, LOG_TAIL_BYTES)
    if raw is None or lines <= 0:
        return None
    return "\n".join(agent_output(raw).splitlines()[-lines:])


class Handlers:
    """The tools' behaviour. ``service`` does the Prefect and task-dir work."""

    def __init__(self, service: TaskService) -> None:
        self.service = service
        self.runtime = service.runtime

    def table(self) -> dict[str, Callable[[dict[str, Any], Any], Awaitable[types.CallToolResult]]]:
        """``{tool name: handler(args, ctx)}``."""
        return {
            "run_task": self.run_task,
            "query_task": self.query_task,
            "manage_task": self.manage_task,
            "verify_task": self.verify_task,
            "query_info": self.query_info,
            "wait_task": self.wait_task,
        }

    # --- run_task ----------------------------------------------------------------------------
    async def run_task(self, args: dict[str, Any], ctx: Any = None) -> types.CallToolResult:
        """docs/tools.md §1.2–§1.3 and §3.1: validate, gate, resolve the agent, submit the flow run."""
        if not args["task"].strip():
            raise TianshuError(ErrorCode.INVALID_ARGUMENT, _("task: the brief must not be blank"))
        if "acceptanceOverride" in args:
            _validate_override(args["acceptanceOverride"])
        targets, holdout = integrity_args(args)  # INVALID_ARGUMENT naming targetTests[i] / holdoutChecks[i].…
        if targets is not None:
            args = {**args, "targetTests": targets}
        home = self.runtime.home
        check_config(home)  # a broken config.json refuses (CONFIG_INVALID) before anything is written
        raw_path = args.get("projectPath")
        project = check_project_path(raw_path, home) if raw_path is not None else None
        target = await anyio.to_thread.run_sync(remote_target, args, home, project)
        if target is not None:  # a work pool's worker clones repoUrl (docs/isolation.md §2)
            if holdout:
                raise TianshuError(ErrorCode.INVALID_ARGUMENT, "holdoutChecks: not available for a remote task yet (they "
                                                               "would have to travel to the worker with the task); "
                                                               "register them on the worker's data home with "
                                                               "`tianshu-mcp holdout add`")
            return await run_remote(self, args, target)
        agent_id = args.get("agentId") or "codex"
        if project is None:
            agent = resolve_agent(agent_id, home)
            if not agent.ok:
                return self._agent_unavailable(agent_id, "", agent.message)
            check_project_less(agent.id, agent.profile, args)
            raise TianshuError(
                ErrorCode.INVALID_ARGUMENT,
                _("agent '{agentId}': dispatch into ZCode's default workspace (no projectPath) is not available in "
                  "this build; give projectPath").format(agentId=agent_id),
            )
        # the work tree's uncommitted files for the answer, counted while the rest is checked
        # (a read-only `git status` that starts before the task is accepted)
        dirty_soon = _soon(dirty_count, project.norm)
        serial_soon = _soon(serial_key, project.norm)  # its queue: the repository's top level (a git call too)
        await anyio.to_thread.run_sync(_check_holdout_files, home, project.norm)
        try:
            registered = ProjectRegistry(home).register(project.norm, project.raw)
        except TianshuError as exc:
            raise TianshuError(exc.code, _("project registration failed, nothing dispatched: {detail}").format(
                detail=exc.message)) from exc
        if args.get("agentId") is None and registered.get("defaultAgentId"):
            agent_id = str(registered["defaultAgentId"])
        task_id = new_task_id()
        key = normalize_key(args["idempotencyKey"]) if args.get("idempotencyKey") is not None else None
        if key is not None:
            claim = await self._claim(key, project.norm, args, task_id)
            if claim is not None:
                return claim
        created = False
        try:
            agent = resolve_agent(agent_id, home)
            if not agent.ok:
                return self._agent_unavailable(agent_id, project.norm, agent.message)
            check_agent_args(agent.id, agent.profile, args, project.norm)
            isolation, parallel = await anyio.to_thread.run_sync(resolve_isolation, args, registered, project.norm)
            dirty = await dirty_soon
            active = self.service.store.unfinished_inplace(project.norm) if isolation == "inplace" else None
            payload = {**args, "agentId": agent.id, "isolation": isolation}
            if key is not None:
                payload["idempotencyKey"] = key
            view = await self.service.submit(project, payload, agent, task_id=task_id, worktree_parallel=parallel,
                                             holdout=holdout, serial=await serial_soon)
            created = True
        finally:
            if key is not None and not created:
                IdempotencyStore(home).release("run_task", key, task_id)
        task = view.task
        url = self.runtime.flow_run_url(task["flowRunId"]) if task.get("flowRunId") else None
        lines = submitted_lines(task, agent.id, agent.message, project, isolation, parallel, load_config(home), url,
                                active["taskId"] if active else None, dirty)
        meta = view.meta(self.runtime)
        if active:
            meta["projectActiveTask"] = {"taskId": active["taskId"]}
        return ok_result("\n".join(lines), meta)

    async def _replayed_view(self, task_id: str, wait_s: float = 10.0) -> TaskView:
        """The view of a task another call has just bound a key to: its folder may not exist yet
        (that call is still creating it); wait for it ≤ ``wait_s`` s, then report it queued."""
        deadline = time.monotonic() + wait_s
        while not self.service.store.exists(task_id) and time.monotonic() < deadline:
            await anyio.sleep(0.05)
        return await self.service.view(task_id)

    async def _claim(self, key: str, norm: str, args: dict[str, Any], task_id: str) -> types.CallToolResult | None:
        """Idempotency pre-check (docs/tools.md §3.2): None on a miss (key now bound to ``task_id``),
        a replay result on a hit; raises IDEMPOTENCY_CONFLICT when the arguments differ."""
        fields = ("agentId", "task", "context", "model", "reasoningLevel", "modelSource", "planDoc", "designSystem",
                  "designDirection", "mode", "allowCreateProject", "autoVerify", "autoFixRounds", "taskTimeoutMs",
                  "acceptanceOverride", "dryRun", "isolation", "targetTests")
        hashed = {k: args.get(k) for k in fields}
        if args.get("holdoutChecks") is not None:  # only a digest of them: idempotency.json never holds them in clear
            hashed["holdoutDigest"] = holdout_digest(check_holdout_checks(args["holdoutChecks"]))
        dig = digest({"workspaceMode": "project", "projectPath": norm, "args": hashed})
        store = IdempotencyStore(self.runtime.home)
        found = await anyio.to_thread.run_sync(
            lambda: store.claim("run_task", key, dig, task_id, exists=self.service.store.exists))
        if found.kind == "miss":
            return None
        if found.kind == "conflict":
            raise TianshuError(ErrorCode.IDEMPOTENCY_CONFLICT,
                               _("idempotencyKey is already bound to task {taskId} with different arguments; "
                                 "use a new key or the same arguments").format(taskId=found.task_id))
        view = await self._replayed_view(found.task_id)
        self.service.store.event(found.task_id, "note", view.status, f"idempotent replay (key {key_digest(key)})")
        nxt = (_('the task is final; use manage_task(taskId="{taskId}", action="rework") or a new key')
               if view.status in TERMINAL else _("poll with query_task({taskId}).")).format(taskId=found.task_id)
        meta = view.meta(self.runtime)
        meta["idempotencyReplay"] = "hit"
        return ok_result(_("idempotent replay: this idempotencyKey already maps to task {taskId} (no new task).").format(
            taskId=found.task_id) + "\n" + "\n".join([
                status_phrase(view), _("agent: {agentId}").format(agentId=view.task.get("agentId")),
                _("project: {path}").format(path=view.task.get("projectPath")), nxt]), meta)

    def _agent_unavailable(self, agent_id: str, project: str, reason: str) -> types.CallToolResult:
        return ok_result(
            _("agent '{agentId}' is not available: {reason}").format(agentId=agent_id, reason=reason),
            {"ok": False, "projectPath": project, "agentId": agent_id, "message": reason},
        )

    # --- verify_task -------------------------------------------------------------------------
    async def verify_task(self, args: dict[str, Any], ctx: Any = None) -> types.CallToolResult:
        """One acceptance round without an agent (docs/tools.md §1.2, §1.3, §3; docs/architecture.md §4)."""
        from ..acceptance.git import resolve_commit

        if "acceptanceOverride" in args:
            _validate_override(args["acceptanceOverride"])
        if args.get("extraChecks"):
            from ..acceptance.config import AcceptanceConfigError, parse_layer

            try:
                parse_layer({"checks": args["extraChecks"]}, "extraChecks", "extraChecks")
            except AcceptanceConfigError as exc:
                message = re.sub(r"\bchecks\.(\d+)\.?", r"extraChecks[\1].", exc.message, count=1)
                raise TianshuError(ErrorCode.INVALID_ARGUMENT, message.replace(
                    "extraChecks acceptance config extraChecks is invalid: ", "")) from exc
        targets, holdout = integrity_args(args)  # INVALID_ARGUMENT naming targetTests[i] / holdoutChecks[i].…
        key = normalize_key(args["idempotencyKey"]) if args.get("idempotencyKey") is not None else None
        target: dict[str, Any] | None = None
        ref = args.get("baselineRef")
        if "taskId" in args:  # task mode wins over projectPath
            task_id = args["taskId"]
            if not task_id.startswith("tsk_"):
                if task_id.startswith("vfy_") and self.service.store.exists(task_id):
                    raise TianshuError(ErrorCode.INVALID_ARGUMENT, _("{taskId} is a verification record, not a task; "
                                                                     "give its projectPath instead").format(taskId=task_id))
                raise TianshuError(ErrorCode.TASK_NOT_FOUND, _("task not found: {taskId}").format(taskId=clip(task_id)))
            target = self.service.read_task(task_id)
            refuse_remote(target, "verify")
            await anyio.to_thread.run_sync(refuse_gone_result, target)
            norm = str(target["projectPath"])
            if ref in (None, "task") and not (self.service.store.dir(task_id) / "baseline.json").is_file():
                raise TianshuError(ErrorCode.INVALID_STATE, _("task {taskId} has no saved pre-work baseline "
                                                              "(it never started); give baselineRef or verify by projectPath").format(
                                                                  taskId=task_id))
        elif args.get("projectPath") is not None:
            norm = check_project_path(args["projectPath"], self.runtime.home).norm
        else:
            raise TianshuError(ErrorCode.INVALID_ARGUMENT, _("verify_task needs taskId or projectPath (one of them)"))
        if ref is not None and ref != "task":
            if ref.startswith("tsk_"):
                if not (self.service.store.exists(ref) and (self.service.store.dir(ref) / "baseline.json").is_file()):
                    raise TianshuError(ErrorCode.INVALID_ARGUMENT,
                                       _("baselineRef '{ref}' names no task with a saved baseline").format(ref=ref))
                other = (self.service.store.read(ref) or {}).get("projectPath")
                if other != norm:
                    raise TianshuError(ErrorCode.INVALID_ARGUMENT,
                                       _("baselineRef '{ref}' is a task of another project ({other}), not of {project}").format(
                                           ref=ref, other=other, project=norm))
            elif await anyio.to_thread.run_sync(resolve_commit, norm, ref) is None:
                raise TianshuError(ErrorCode.INVALID_ARGUMENT,
                                   _("baselineRef '{ref}' is not a valid git ref (project {project})").format(ref=ref, project=norm))
        elif ref == "task" and target is None:
            raise TianshuError(ErrorCode.INVALID_ARGUMENT, _("baselineRef 'task' needs taskId"))
        await anyio.to_thread.run_sync(_check_holdout_files, self.runtime.home, norm,
                                       self.service.store.dir(target["taskId"]) if target else None)

        record_id = new_verify_id()
        if key is not None:
            dig = digest({"taskId": args.get("taskId"), "projectPath": norm if target is None else None,
                          "checksMode": args.get("checksMode"), "extraChecks": args.get("extraChecks"),
                          "baselineRef": ref, "acceptanceOverride": args.get("acceptanceOverride"),
                          "targetTests": targets, "holdoutDigest": holdout_digest(holdout)})
            store = IdempotencyStore(self.runtime.home)
            found = await anyio.to_thread.run_sync(lambda: store.claim(
                "verify_task", key, dig, record_id, kind="verify", exists=self.service.store.exists))
            if found.kind == "conflict":
                raise TianshuError(ErrorCode.IDEMPOTENCY_CONFLICT,
                                   _("idempotencyKey is already bound to verification {taskId} with different "
                                     "arguments; use a new key or the same arguments").format(taskId=found.task_id))
            if found.kind == "hit":
                await self._replayed_view(found.task_id)
                return await self._verify_replay(found.task_id, target)
        from ..core.paths import project_key

        override = args.get("acceptanceOverride")
        if target is None and ref is None and "requireChanges" not in (override or {}):
            # the baseline is the project as it is now: nothing can have changed since, so the
            # zero-change gate would always fail; a health check runs without it
            override = {**(override or {}), "requireChanges": False}
        params: dict[str, Any] = {
            "target_task_id": target["taskId"] if target else None,
            "baseline_ref": ref,
            "extra_checks": args.get("extraChecks"),
            "checks_mode": args.get("checksMode", "append"),
            "acceptance_override": override,
        }
        if targets is not None:  # by taskId without them: the task's own (tasks.verify)
            params["target_tests"] = targets
        fields: dict[str, Any] = {"task": _("manual verification of {target}").format(target=target["taskId"] if target else norm)}
        if target:
            fields["targetTaskId"] = target["taskId"]
        if key is not None:
            fields["idempotencyKey"] = key
        if args.get("acceptanceOverride") is not None:
            fields["acceptanceOverride"] = args["acceptanceOverride"]
        if targets is not None:
            fields["targetTests"] = targets
        if holdout:
            fields["holdoutCount"] = len(holdout)
        try:
            await self.service.submit_verify(record_id, norm, project_key(norm), params, fields, holdout=holdout)
        except Exception:
            if key is not None:
                IdempotencyStore(self.runtime.home).release("verify_task", key, record_id)
            raise
        # a tasks-extension client polls tasks/get instead: answer with the task at once
        wait_s = 0.0 if declared(ctx) else load_config(self.runtime.home).verify_tool_wait_ms / 1000
        newest: deque[TaskView] = deque(maxlen=1)  # the newest read of the record: what progress notifications say
        async with progress_ticker(ctx, wait_s, lambda: describe_views(list(newest))):
            view = await self.service.wait_final(record_id, wait_s, on_view=newest.append)
        if view.status not in TERMINAL:
            meta = view.meta(self.runtime)
            meta["message"] = _('verification {taskId} is still {status}; poll it with wait_task(taskId="{taskId}")').format(
                taskId=record_id, status=view.status)
            return ok_result(_("verification still in progress ({status}) after {secs} s: {taskId}\n"
                               'poll with wait_task(taskId="{taskId}") or query_task(taskId="{taskId}")').format(
                                   status=view.status, secs=f"{wait_s:.0f}", taskId=record_id), meta)
        return await self.verify_result(view, target)

    async def verify_result(self, record: TaskView, target: dict[str, Any] | None, replay: bool = False) -> types.CallToolResult:
        """The result of a finished verification ``record`` (a vfy_ view); ``target``: the verified task."""
        rec = record.task
        report = read_json_safe(rec.get("reportJson") or "") if rec.get("reportJson") else None
        if not isinstance(report, dict):
            return ok_result(_("verification {taskId} ended {status}: {message}").format(
                taskId=rec["taskId"], status=record.status, message=rec.get("lastMessage", "")),
                             record.meta(self.runtime))
        checks = [c for c in report.get("checks", []) if not c.get("skipped")]
        failed = [c for c in checks if not c.get("passed") and not c.get("optional") and not c.get("notCounted")]
        excused = [c for c in checks if not c.get("passed") and c.get("notCounted")]
        passed_n = len([c for c in checks if c.get("passed")])
        rnd = report.get("round")
        if replay:
            what = _("idempotent replay: this idempotencyKey already maps to verification report-{round} (not re-run).").format(
                round=rnd)
        elif report.get("blockingIssues"):
            issue = report["blockingIssues"][0]
            what = _("manual verification blocked (report-{round}): [{code}] {message}").format(
                round=rnd, code=issue.get("code"), message=issue.get("message"))
        elif report.get("passed"):
            what = (_("manual verification passed (report-{round}): {passed}/{total} checks passed").format(
                round=rnd, passed=passed_n, total=len(checks))
                    + (_(", {n} failing check(s) not counted (already failing at the baseline)").format(n=len(excused))
                       if excused else "") + _("."))
        else:
            what = _("manual verification failed (report-{round}): {n} check(s) did not pass.").format(round=rnd, n=len(failed))
        head = ("[PASS] " if report.get("passed") else "[FAIL] ") + what
        analysis = report.get("analysis") or {}
        diff = analysis.get("diffstat") or {}
        changed = len(analysis.get("changedFiles") or []) + len(analysis.get("untrackedFiles") or [])
        lines = [head, _("{n} file(s) changed, diffstat +{add} -{del_}.").format(
                     n=changed, add=diff.get("totalAdd", 0), del_=diff.get("totalDel", 0)),
                 _("message: {message}").format(message=report.get("message", "")),
                 _("report: {path}").format(path=rec.get("reportMd")), _("json: {path}").format(path=rec.get("reportJson"))]
        if target is not None:
            meta = (await self.service.view(target["taskId"])).meta(self.runtime)
        else:
            meta = record.meta(self.runtime)
        meta.update(reportRound=rnd, verificationSource="manual",
                    latestVerificationVerdict="passed" if report.get("passed") else "failed", verifyId=rec["taskId"])
        if replay:
            meta["idempotencyReplay"] = "hit"
            if target is None:
                meta["ok"] = bool(report.get("passed"))
        return ok_result("\n".join(lines), meta)

    async def _verify_replay(self, record_id: str, target: dict[str, Any] | None) -> types.CallToolResult:
        view = await self.service.view(record_id)
        if view.status not in TERMINAL:
            meta = {"ok": True, "taskId": record_id, "status": view.status, "idempotencyReplay": "in_progress",
                    "message": _("idempotent replay: the verification for this key is still running")}
            return ok_result(_("the verification for this idempotencyKey is still running (not started again): {taskId}").format(
                taskId=record_id), meta)
        return await self.verify_result(view, target, replay=True)

    # --- query_task --------------------------------------------------------------------------
    async def query_task(self, args: dict[str, Any], ctx: Any = None) -> types.CallToolResult:
        """Status, last message, agent log tail (``tailLines``, 40) and events (``eventLimit``, 10)."""
        view = await self.service.view(args["taskId"])
        task = view.task
        tail_n = int(args.get("tailLines", 40))
        limit = int(args.get("eventLimit", 10))
        lines = [status_phrase(view)]
        if task.get("lastMessage"):
            lines.append(_("last message: {message}").format(message=task["lastMessage"]))
        tail = agent_log_tail(self.service.store.dir(task["taskId"]), task, tail_n)
        if tail:
            lines.append(_("--- agent log tail ({n} lines) ---").format(n=len(tail.splitlines())) + f"\n{tail}")
        else:
            lines.append(_("(no agent log yet)"))
        events = self.service.store.recent_agent_events(task["taskId"], limit)
        if events:
            lines.append(_("--- recent events ({n}, oldest first) ---").format(n=len(events)))
            lines.extend(f"[{e['ts']}] {e['event']}" + (f" — {e['detail']}" if e.get("detail") else "") for e in events)
        meta = view.meta(self.runtime)
        meta["recentEvents"] = events
        return ok_result("\n".join(lines), meta)

    # --- manage_task -------------------------------------------------------------------------
    async def manage_task(self, args: dict[str, Any], ctx: Any = None) -> types.CallToolResult:
        """cancel / continue / rework with the branch whitelists of docs/tools.md §1.2."""
        action = args["action"]
        allowed = {
            "cancel": ("taskId", "action", "reason"),
            "continue": ("taskId", "action", "message"),
            "rework": ("taskId", "action", "feedback", "repairHint"),
            "merge": ("taskId", "action"),
        }[action]
        branch_whitelist(f"action={action}", args, allowed)
        task_id = args["taskId"]
        if task_id.startswith("vfy_"):
            self.service.read_task(task_id)  # TASK_NOT_FOUND first
            raise TianshuError(ErrorCode.INVALID_ARGUMENT, _("{taskId} is a verification record, not a task: "
                                                             "manage_task(action={action}) applies to tasks (tsk_…); "
                                                             "run verify_task again instead").format(taskId=task_id, action=action))
        if action == "cancel":
            view, settled, text = await self.service.cancel(task_id, args.get("reason"))
            return ok_result(text, view.meta(self.runtime))
        if action == "merge":
            merged, text = await merge_task(self.service, task_id)
            view = await self.service.view(task_id)
            return ok_result(text, {**view.meta(self.runtime), "merge": merged.model_dump()})
        if action == "continue":
            view = await continue_task(self.service, task_id, args.get("message") or "")
            return ok_result(_("task {taskId} continued with your answer; it is queued to re-run its round.\n"
                               'current status: {status}. Poll with wait_task(taskId="{taskId}").').format(
                                   taskId=task_id, status=view.status),
                             view.meta(self.runtime))
        await anyio.to_thread.run_sync(refuse_gone_result, self.service.read_task(task_id))
        view = await self.service.rework(task_id, args.get("feedback"), args.get("repairHint"))
        hint = args.get("repairHint")
        text = (_("task {taskId} re-queued (manual rework)").format(taskId=task_id)
                + (_(", with feedback") if args.get("feedback") else "")
                + (_(", with a structured repair hint ({n} chars)").format(n=len(hint)) if hint else "") + _(".") + "\n"
                + _("current status: {status}, rounds used {n}.").format(status=view.status, n=int(view.task.get("roundsUsed") or 0))
                + "\n" + _("Poll with query_task({taskId}) for the new round.").format(taskId=task_id))
        return ok_result(text, view.meta(self.runtime))

    # --- query_info --------------------------------------------------------------------------
    async def query_info(self, args: dict[str, Any], ctx: Any = None) -> types.CallToolResult:
        """type=tasks | report | profiles; see :func:`.info.query_info`."""
        return await query_info(self.service, self.runtime, args)

    # --- wait_task ---------------------------------------------------------------------------
    async def wait_task(self, args: dict[str, Any], ctx: Any = None) -> types.CallToolResult:
        """Wait for a stop point (terminal or needs_user); see :func:`.waiting.wait_task`."""
        return await wait_task(self.service, self.runtime, args, ctx)
