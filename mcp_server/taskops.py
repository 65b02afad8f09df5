"""Task operations over Prefect and the task directory, used by the tool handlers.

The flow-run state owns status (docs/architecture.md §4); ``task.json`` owns details. Everything here talks
to Prefect through one long-lived async client (≈8 ms per read instead of ≈55 ms with a client
per call, docs/prefect-facts.md §8), re-made when the runtime reconnects to a restarted service.

Accepting a task never waits for Prefect: :meth:`TaskService.submit` writes ``task.json`` and a
durable submission entry (:mod:`tianshu_mcp.core.submissions`) and answers ``queued``; the flow
run is created as soon as the API answers. Until then the task reads ``queued`` with a message
saying so. A task whose flow run no longer exists (deleted in the Prefect UI) is finished as
``cancelled`` and its agent tree killed; ``finalStatus`` in ``task.json`` records such endings
that have no flow-run state to read.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..acceptance.integrity.holdout_store import save_task_holdout
from ..acceptance.integrity.models import HoldoutCheck
from ..adapters.profiles import ResolvedAgent
from ..core import submissions
from ..core.childenv import save_client_env
from ..core.errors import ErrorCode, TianshuError
from ..core.git import run_git
from ..core.i18n import N_, _
from ..core.ids import new_task_id
from ..core.model import NO_QUESTION, TERMINAL, meta_from_task
from ..core.paths import SafeProject, serial_key
from ..core.procs import kill_recorded, recorded_alive
from ..core.settings import load_config
from ..core.taskstore import TaskStore, age_s, utc_now
from ..deployments.topology import RUN_TASK_DEPLOYMENT
from ..flows.states import Repair, RunState, derive_status
from ..flows.watch import DELETED_MESSAGE
from ..tasks.common import AGENT_PROC_FILE, AGENT_PROFILE_FILE, CANCEL_FILE, FLOW_PROC_FILE
from .format import clip
from .queue_wait import QueueFacts, queued_reason
from .run_states import StateReader, read_states
from .runtime import Runtime

log = logging.getLogger("tianshu_mcp")

@dataclass
class TaskView:
    """A task as tools show it: ``task`` (task.json), ``status`` and the raw flow-run ``state``."""

    task: dict[str, Any]
    status: str
    state_type: str | None = None
    state_name: str | None = None
    waiting_for: str | None = None  # a queued task: what it waits for (:mod:`.queue_wait`), shown in its status

    def meta(self, runtime: Runtime) -> dict[str, Any]:
        """The task meta block (docs/tools.md §2.6) with ``flowRunId``/``flowRunUrl``/``prefectApiUrl``."""
        task = dict(self.task)
        if task.get("flowRunId"):
            task["flowRunUrl"] = runtime.flow_run_url(task["flowRunId"])
        task["prefectApiUrl"] = runtime.api_url
        return meta_from_task(task, self.status)


def dirty_count(project: str) -> int | None:
    """Number of ``git status --porcelain`` lines, or None when not a git repo (docs/tools.md §3.1 rule 6)."""
    out = run_git(["status", "--porcelain"], project, timeout_ms=20_000)  # GIT_OPTIONAL_LOCKS=0: no index refresh
    if not out.ok:
        return None
    return len([ln for ln in out.stdout.splitlines() if ln.strip()])


def _uuid(value: Any) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value)) if value else None
    except ValueError:
        return None


def _recent(created_at: str | None, seconds: float = 60.0) -> bool:
    """True when an ISO ``createdAt`` is less than ``seconds`` old (a submit still in flight)."""
    age = age_s(created_at)
    return age is not None and age < seconds


PREVIOUS_RUN_EXIT_S = 10.0
"""How long a rework waits for the previous run's flow-run process to exit before killing it, s."""
CLIENT_WAIT_S = 30.0
"""How long a tool call waits for a starting service before PREFECT_UNAVAILABLE (hosts give up at ≈60 s)."""
WAITING_FOR_SERVICE = N_("accepted; waiting for the tianshu-mcp service (Prefect) to create its flow run")
"""A new task's ``lastMessage`` (English msgid; written translated with ``_``)."""


class TaskService:
    """Submit, read, list and cancel tasks.

    Args:
        runtime: the process runtime (topology, readiness, URLs).
    """

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.store = TaskStore(runtime.home)
        self._client: Any = None
        self._client_gen = -1
        self._reader: StateReader | None = None  # service mode's plain-HTTP state reads (run_states)
        self._reader_gen = -1

    # --- Prefect client ----------------------------------------------------------------------
    async def client(self, timeout_s: float | None = None) -> Any:
        """The long-lived Prefect client of the current connection. Raises PREFECT_UNAVAILABLE (or
        the connection's own coded error)."""
        generation = await self.runtime.wait_ready(timeout_s if timeout_s is not None else CLIENT_WAIT_S)
        await self.runtime.prefect()
        if self._client is None or self._client_gen != generation:
            await self.close()
            from prefect.client.orchestration import PrefectClient

            client = PrefectClient(self.runtime.api_url, auth_string=self.runtime.auth)
            await client.__aenter__()
            self._client, self._client_gen = client, generation
        return self._client

    async def state_reader(self, timeout_s: float | None = None) -> StateReader:
        """The plain-HTTP state reader of the current connection to the home's service (no
        Prefect import; :mod:`.run_states`). Raises as :meth:`client`."""
        generation = await self.runtime.wait_ready(timeout_s if timeout_s is not None else CLIENT_WAIT_S)
        if self._reader is None or self._reader_gen != generation:
            if self._reader is not None:
                await self._reader.aclose()
            self._reader, self._reader_gen = StateReader(self.runtime.api_url, self.runtime.auth or ""), generation
        return self._reader

    async def close(self) -> None:
        """Close the Prefect client and the state reader."""
        if self._reader is not None:
            reader, self._reader = self._reader, None
            await reader.aclose()
        if self._client is not None:
            try:
                await self._client.__aexit__(None, None, None)
            except Exception:  # noqa: BLE001
                pass
            self._client = None

    # --- submit ------------------------------------------------------------------------------
    async def submit(self, project: SafeProject, args: dict[str, Any], agent: ResolvedAgent,
                     task_id: str | None = None, worktree_parallel: int | None = None,
                     holdout: Sequence[HoldoutCheck] = (), serial: str | None = None) -> TaskView:
        """Accept a task: ``task.json`` + a submission entry of deployment ``run-task`` on the
        project's queue; answer at once (no Prefect call on this path on the home's own service,
        whose submitter creates the flow run a moment later: :meth:`submit_now`).

        ``args["isolation"] == "worktree"`` puts it on the repository's worktree queue
        (``project-<key>-wt``, limit ``worktree_parallel``) instead of the work tree's (limit 1).
        ``holdout`` (validated ``holdoutChecks``) go to ``<taskDir>/holdout.json`` (0600) before the
        flow run can exist; ``task.json`` only counts them (``holdoutCount``). ``serial``: the
        project's :func:`~tianshu_mcp.core.paths.serial_key` when the caller has it already
        (computed here otherwise: a git call)."""
        cfg = load_config(self.runtime.home)
        task_id = task_id or new_task_id()
        timeout_ms = args.get("taskTimeoutMs") or agent.profile.timeout_ms or cfg.default_task_timeout_ms
        fields = self.task_fields(args, agent.id, int(timeout_ms))
        fields.update(workspaceMode="project", projectPath=project.norm, displayPath=project.raw, projectKey=project.key)
        worktree = args.get("isolation") == "worktree"
        fields["isolation"] = "worktree" if worktree else "inplace"
        parameters = {
            "task_id": task_id,
            "project_path": project.norm,
            "agent_id": agent.id,
            "auto_verify": fields["autoVerify"],
            "auto_fix_rounds": fields["autoFixRounds"],
            "task_timeout_ms": fields["taskTimeoutMs"],
        }
        tags = [f"tianshu-task:{task_id}", f"project:{project.key}", f"agent:{agent.id}", self.runtime.home_tag,
                f"project-name:{os.path.basename(project.norm) or project.norm}", f"project-path:{clip(project.norm, 180)}"]
        limit = worktree_parallel or cfg.concurrency.worktree_parallel
        queue = (serial or serial_key(project.norm)) + ("-wt" if worktree else "")
        with submissions.accepting(self.runtime.home) as accepted:  # the record holds its number from the start
            record = self.store.create(task_id, {**fields, "acceptedSeq": accepted.seq, "acceptedAt": accepted.at_iso})
            save_client_env(self.store.dir(task_id))
            if holdout:
                save_task_holdout(self.store.dir(task_id), holdout)
            submissions.write_entry(self.runtime.home, task_id, RUN_TASK_DEPLOYMENT, parameters, tags, queue,
                                    record["createdAt"], accepted, queue_limit=limit if worktree else 1,
                                    name=submissions.flow_run_name(task_id, project.norm, args["task"]))
        return TaskView(await self.submit_now(task_id), "queued", None, None)

    def task_fields(self, args: dict[str, Any], agent_id: str, timeout_ms: int) -> dict[str, Any]:
        """The brief-side fields of a new ``task.json`` from run_task's arguments (the caller adds
        where the task works: project fields, or a remote task's repository and pool)."""
        fields: dict[str, Any] = {
            "agentId": agent_id,
            "task": args["task"],
            "autoVerify": args.get("autoVerify", True),
            "autoFixRounds": int(args.get("autoFixRounds", 0)),
            "taskTimeoutMs": int(timeout_ms),
            "homeTag": self.runtime.home_tag,
            "lastMessage": _(WAITING_FOR_SERVICE),
        }
        for key in ("context", "model", "mode", "reasoningLevel", "acceptanceOverride", "idempotencyKey", "targetTests"):
            if args.get(key) is not None:
                fields[key] = args[key]
        if args.get("holdoutChecks"):  # the checks themselves never enter task.json (holdout.json)
            fields["holdoutCount"] = len(args["holdoutChecks"])
        if args.get("dryRun") is True:
            fields["dryRun"] = True
        return fields

    async def submit_now(self, record_id: str) -> dict[str, Any]:
        """Hand the accepted entry to the submitters and return the current ``task.json``.

        On this home's own service the answer does not wait for the flow run: this process's
        submitter thread is woken at once (:meth:`Runtime.kick`) and the service's intake drains
        too, both in acceptance order (:func:`~tianshu_mcp.hosting.intake.submit_pending`).
        Measured: creating inline within ≈0.7 s made the answer ≈120 ms median and up to the
        budget when the database refused writes for a moment (design notes 53 and 55).

        With a remote Prefect server no service drains the entries — a host that starts a server
        per call would leave them forever — so this call waits for the API (≤ 25 s) and the
        creation (≤ 20 s) itself, older entries of the queue first (waiting ≤ 10 s for one
        another process is submitting)."""
        import anyio

        if self.runtime.mode == "remote" and await self.runtime.settle(25.0):
            with anyio.move_on_after(20.0):
                try:
                    client = await self.client(0.1)  # first: Prefect is imported through the runtime
                    from ..hosting.intake import submit_one

                    await submit_one(client, self.runtime.home, record_id, wait_s=10.0, first_only=False)
                except Exception as exc:  # noqa: BLE001 - the background submitters retry
                    log.info("flow run of %s not created inline (%s); submitting in the background", record_id, exc)
        if submissions.is_pending(self.runtime.home, record_id):
            self.runtime.kick()
        return self.read_task(record_id)

    # --- read --------------------------------------------------------------------------------
    def read_task(self, task_id: str) -> dict[str, Any]:
        """``task.json`` of ``task_id``. Raises TASK_NOT_FOUND."""
        task = self.store.read(task_id)
        if task is None:
            if self.store.exists_dir(task_id):
                raise TianshuError(ErrorCode.TASK_RECORD_CORRUPT,
                                   _("task {taskId} exists but {path} is unreadable or corrupt").format(
                                       taskId=task_id, path=self.store.path(task_id)))
            raise TianshuError(ErrorCode.TASK_NOT_FOUND, _("task not found: {taskId}").format(taskId=clip(task_id)))
        problem = self.store.problem(task_id, task)
        if problem:
            raise TianshuError(ErrorCode.TASK_RECORD_CORRUPT, _("task {taskId}: {path} is damaged ({problem})").format(
                taskId=task_id, path=self.store.path(task_id), problem=problem))
        return task

    async def views(self, tasks: list[dict[str, Any]], wait_s: float | None = None) -> list[TaskView]:
        """Attach the flow-run status to each task (one batched Prefect read; none when no task
        has a flow run yet). ``wait_s``: how long to wait for a starting service (default
        :data:`CLIENT_WAIT_S`) before PREFECT_UNAVAILABLE."""
        if self.runtime.mode == "remote":  # no service submits for us: whoever reads does
            for t in tasks:
                if not t.get("flowRunId") and submissions.is_pending(self.runtime.home, t["taskId"]):
                    t.update(await self.submit_now(t["taskId"]))
        ids = [u for u in (_uuid(t.get("flowRunId")) for t in tasks) if u is not None]
        states: dict[str, RunState] = {}
        remote = any(t.get("workPool") for t in tasks)
        if ids and self.runtime.mode == "service" and not remote:
            states = await read_states(self.runtime, await self.state_reader(wait_s), ids)
        elif ids:
            client = await self.client(wait_s)  # first: Prefect is imported through the runtime
            states = await read_states(self.runtime, client, ids)
            if remote:
                from .remote_sync import (
                    sync_remote,  # a remote task's details come from its artifacts
                )

                tasks = await sync_remote(self, client, tasks, states)
        facts = QueueFacts(self.store, lambda: load_config(self.runtime.home).concurrency.max_running)
        return [self._view_of(t, states, facts) for t in tasks]

    def _view_of(self, t: dict[str, Any], states: dict[str, RunState], facts: QueueFacts | None = None) -> TaskView:
        """The task's status (:func:`~tianshu_mcp.flows.states.derive_status`), with what the
        derivation says to write back applied; a queued one's wait from ``facts`` (one read for
        all the views of a call)."""
        run_id = t.get("flowRunId")
        run = states.get(run_id) if run_id else None
        waiting = not run_id and (submissions.is_pending(self.runtime.home, t["taskId"]) or _recent(t.get("createdAt")))
        derived = derive_status(t, run, run_id_valid=_uuid(run_id) is not None if run_id else True, waiting=waiting)
        status, repair = derived.status, derived.repair
        st_type, st_name = (run.type, run.name) if run else (None, None)
        if repair is Repair.DAMAGED_RUN_ID:
            return TaskView(t, status, "CRASHED", "Crashed")  # a damaged record: show it, don't sink the list
        if status == "queued" and waiting and self.runtime.error is not None:
            t = {**t, "lastMessage": _("{waiting}, but the service cannot start: {error}").format(
                waiting=_(WAITING_FOR_SERVICE), error=self.runtime.error.render())}
        if repair is Repair.NEVER_SUBMITTED:
            fresh = self.store.read(t["taskId"]) or t  # its flow run may have been created since t was read
            if fresh.get("flowRunId"):
                return TaskView(fresh, "queued")
            return self._finish_missing(t, status, _("interrupted: the task was accepted but never submitted"))
        if repair is Repair.RUN_DELETED:
            return self._finish_missing(t, status, _(DELETED_MESSAGE))
        if repair is Repair.UNANSWERED:
            return TaskView(self._finish_unanswered(t, run.timestamp if run else None), status, st_type, st_name)
        if repair is Repair.RECORD_END and run is not None:
            # the run ended without the flow writing its details (killed, crashed, swept):
            # complete task.json from the final state so no stale "running" message remains
            fields = {"finishedAt": run.timestamp or utc_now(), "lastMessage": run.message or status, "phase": None}
            if status in ("interrupted", "cancelled") and not t.get("errorType"):
                fields["errorType"] = status
            try:  # unless the flow recorded its own end after t was read: then t is stale, not the record
                t = self.store.update_unless_set(t["taskId"], "finishedAt", **fields)
            except (OSError, ValueError):
                t = {**t, **{k: v for k, v in fields.items() if v is not None}}
        if status == "running" and not t.get("phase") and not t.get("finishedAt") and not t.get("workPool"):
            # the flow run started and its flow has not written yet: the stored message is the queue's
            t = {**t, "lastMessage": _("started: its flow run is starting")}
        if status == "queued" and not (waiting and self.runtime.error is not None):
            facts = facts or QueueFacts(self.store, lambda: load_config(self.runtime.home).concurrency.max_running)
            reason = queued_reason(t, run, facts, self.runtime.ready)
            if reason is not None:
                return TaskView({**t, "lastMessage": _("queued: {why}").format(why=reason)}, status, st_type, st_name,
                                reason)
        return TaskView(t, status, st_type, st_name)

    def _finish_unanswered(self, t: dict[str, Any], ended_at: str | None) -> dict[str, Any]:
        """A needs_user task whose wait ran out (Prefect failed its paused run after
        ``needsUserTimeoutMs``): ``failed``/``timeout`` with a message saying so, the question
        cleared, the status event (and webhook) written. Returns the updated ``task.json``."""
        msg = _("no answer to the agent's question of round {round} within needsUserTimeoutMs "
                "({ms} ms); the task ended. Rework it to run "
                "the round again (give the answer as feedback).").format(
                    round=t.get("needsUserRound", 0), ms=load_config(self.runtime.home).needs_user_timeout_ms)
        try:
            t = self.store.update(t["taskId"], finishedAt=ended_at or utc_now(), lastMessage=msg, errorType="timeout",
                                  abortSource="timeout", phase=None, **NO_QUESTION)
            self.store.event(t["taskId"], "failed", "failed", msg)
        except (OSError, ValueError):
            t = {**t, "lastMessage": msg, "errorType": "timeout"}
        return t

    def _finish_missing(self, t: dict[str, Any], status: str, msg: str) -> TaskView:
        """A task with no flow run to read (deleted in the UI, or never submitted): kill whatever
        of its agent still runs and record the final status in ``task.json``."""
        task_id = t["taskId"]
        kill_recorded(self.store.dir(task_id) / AGENT_PROC_FILE)
        try:
            t = self.store.update(task_id, finalStatus=status, lastMessage=msg, errorType=status,
                                  finishedAt=t.get("finishedAt") or utc_now(), phase=None)
            self.store.event(task_id, status, status, msg)
        except (OSError, ValueError):
            t = {**t, "finalStatus": status, "lastMessage": msg}
        return TaskView(t, status)

    async def view(self, task_id: str) -> TaskView:
        """One task with its status. Raises TASK_NOT_FOUND, PREFECT_UNAVAILABLE."""
        return (await self.views([self.read_task(task_id)]))[0]

    async def list_tasks(self, project_norm: str | None, status: str | None, limit: int,
                         skipped: list[str] | None = None) -> list[TaskView]:
        """Tasks newest first, filtered by normalised project path and exact status. Damaged
        records are left out; their ids (and why) are appended to ``skipped`` when given."""
        tasks = []
        for record_id in self.store.list_ids(("tsk_", "vfy_")):
            task = self.store.read_cached(record_id)
            problem = "task.json unreadable" if task is None else self.store.problem(record_id, task)
            if problem:
                if skipped is not None and self.store.exists_dir(record_id):
                    skipped.append(f"{record_id} ({problem})")
                continue
            tasks.append(task)
        if project_norm is not None:
            tasks = [t for t in tasks if t.get("projectPath") == project_norm]
        tasks.sort(key=lambda t: t.get("createdAt", ""), reverse=True)
        views = await self.views(tasks) if tasks else []
        if status:
            views = [v for v in views if v.status == status]
        return views[:limit]

    # --- cancel ------------------------------------------------------------------------------
    async def cancel(self, task_id: str, reason: str | None, source: str = "user", wait_s: float = 30.0) -> tuple[TaskView, bool, str]:
        """Cancel a task (docs/agents-tasks.md §2.7): :func:`.cancel.cancel_task`. Returns ``(view, settled,
        text)``."""
        from .cancel import cancel_task

        return await cancel_task(self, task_id, reason, source, wait_s)

    # --- verify ------------------------------------------------------------------------------
    async def submit_verify(self, record_id: str, project_norm: str, project_key_: str, params: dict[str, Any],
                            fields: dict[str, Any], holdout: Sequence[HoldoutCheck] = ()) -> TaskView:
        """Accept a ``vfy_`` record: ``task.json`` + a submission entry of deployment
        ``verify/verify`` on the project's queue (so it never overlaps a task on the same
        project); answers at once, like :meth:`submit`. The call's ``holdout`` checks go to the
        record's ``holdout.json`` (0600) before the entry is queued."""
        record = self.store.create(record_id, {
            "kind": "verify", "workspaceMode": "project", "projectPath": project_norm, "projectKey": project_key_,
            "agentId": "manual-verify", "autoVerify": True, "autoFixRounds": 0, "homeTag": self.runtime.home_tag,
            "lastMessage": _(WAITING_FOR_SERVICE), **fields})
        save_client_env(self.store.dir(record_id))
        if holdout:
            save_task_holdout(self.store.dir(record_id), holdout)
        tags = [f"tianshu-task:{record_id}", f"project:{project_key_}", "agent:manual-verify", self.runtime.home_tag]
        submissions.enqueue(self.runtime.home, record_id, "verify/verify",
                            {"record_id": record_id, "project_path": project_norm, **params}, tags, serial_key(project_norm),
                            record["createdAt"], name=submissions.flow_run_name(record_id, project_norm, _("manual verification")))
        return TaskView(await self.submit_now(record_id), "queued")

    async def wait_final(self, task_id: str, timeout_s: float,
                         on_view: Callable[[TaskView], None] | None = None) -> TaskView:
        """Poll a task or record every 0.5 s until it is final or ``timeout_s`` passes (a service
        still starting counts as not final yet); ``on_view`` is given each view read (the
        progress message of a waiting call).

        Raises:
            TianshuError: a read's coded error; ``PREFECT_UNAVAILABLE`` only once ``timeout_s`` passed.
        """
        import anyio

        deadline = anyio.current_time() + timeout_s
        while True:
            try:
                view = await self.view(task_id)
            except TianshuError as exc:
                if exc.code != ErrorCode.PREFECT_UNAVAILABLE or anyio.current_time() >= deadline:
                    raise
                await anyio.sleep(0.5)
                continue
            if on_view is not None:
                on_view(view)
            if view.status in TERMINAL or anyio.current_time() >= deadline:
                return view
            await anyio.sleep(0.5)

    # --- rework ------------------------------------------------------------------------------
    def _end_previous_process(self, task_id: str) -> None:
        """Before a rework resets the record: the flow-run process of the task's previous run
        may still be ending (a cancel that forced the final state under load returns while it
        runs its last steps), and its ending would write the old end over the reset record and
        its final state over ``AwaitingRework``. Wait up to :data:`PREVIOUS_RUN_EXIT_S` s for it
        to exit, then kill it (its run is final already). Never raises."""
        path = self.store.dir(task_id) / FLOW_PROC_FILE
        deadline = time.monotonic() + PREVIOUS_RUN_EXIT_S
        while recorded_alive(path):
            if time.monotonic() >= deadline:
                log.warning("task %s: the previous run's process still runs %.0f s after its end; killed before the "
                            "rework", task_id, PREVIOUS_RUN_EXIT_S)
                kill_recorded(path)
                return
            time.sleep(0.1)

    async def rework(self, task_id: str, feedback: str | None, repair_hint: str | None) -> TaskView:
        """Re-queue a final task on the same flow run (docs/agents-tasks.md §2.8, docs/architecture.md §4).

        The flow run's ``feedback`` parameter is replaced and its state forced to
        ``Scheduled(AwaitingRework)``; the next run continues at round ``roundsUsed`` against the
        stored baseline. Raises INVALID_STATE when the task is not final.
        """
        view = await self.view(task_id)
        if view.status not in TERMINAL:  # also a queued task whose flow run is not created yet: it will run
            raise TianshuError(ErrorCode.INVALID_STATE,
                               _("task is still in progress (status={status}); cannot rework").format(status=view.status))
        if not view.task.get("flowRunId"):
            raise TianshuError(ErrorCode.INVALID_STATE, _("task {taskId} never got a flow run ({status}); "
                                                          "submit a new task instead").format(taskId=task_id, status=view.status))
        import anyio

        client = await self.client()  # first: Prefect is imported through the runtime
        from prefect.exceptions import ObjectNotFound, PrefectHTTPStatusError
        from prefect.states import Scheduled

        try:
            flow_run = await client.read_flow_run(view.task["flowRunId"])
        except (ObjectNotFound, ValueError) as exc:
            raise TianshuError(ErrorCode.INVALID_STATE, _("task {taskId}'s flow run no longer exists (deleted in the "
                                                          "Prefect UI?); it cannot be reworked — submit a new task").format(
                                                              taskId=task_id)) from exc
        parts = []
        if repair_hint and repair_hint.strip():
            parts.append("## Structured repair hint\n" + repair_hint.strip())
        if feedback and feedback.strip():
            parts.append(feedback.strip())
        params = dict(flow_run.parameters or {})
        params["feedback"] = "\n\n".join(parts) or None
        try:
            await client.update_flow_run(flow_run.id, parameters=params)
        except PrefectHTTPStatusError as exc:
            if exc.response.status_code != 422:
                raise
            raise TianshuError(ErrorCode.INVALID_ARGUMENT, _("feedback/repairHint: the Prefect API refused them as the "
                                                             "flow run's parameters ({detail}); send less").format(
                                                                 detail=clip(exc.response.text))) from exc
        await anyio.to_thread.run_sync(self._end_previous_process, task_id)
        (self.store.dir(task_id) / CANCEL_FILE).unlink(missing_ok=True)
        (self.store.dir(task_id) / AGENT_PROFILE_FILE).unlink(missing_ok=True)  # a rework runs the current profile
        save_client_env(self.store.dir(task_id))  # the reworking host's environment
        self.store.update(task_id, finishedAt=None, errorType=None, abortSource=None, cancelReason=None,
                          cancelRequestedAt=None, phase=None, lastMessage=_("manual rework queued"),
                          remoteFinal=None, **NO_QUESTION)  # a remote task's record is read again  # a question left unanswered (timed out) is not re-asked
        detail = ("rework requested, feedback: " + feedback.strip()[:200]) if feedback and feedback.strip() else "rework requested (no extra feedback)"
        if repair_hint:
            detail += f", structured hint {len(repair_hint)} chars"
        self.store.event(task_id, "rework_triggered", "queued", detail, {"mode": "manual"})
        await client.set_flow_run_state(flow_run.id, Scheduled(name="AwaitingRework"), force=True)
        return await self.view(task_id)
