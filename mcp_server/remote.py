"""run_task for a work pool's workers that cannot see the caller's files (docs/isolation.md §2).

A call is *remote* when it names a ``repoUrl`` or a ``workPool`` other than the local one (or
its project's ``projects.json`` entry names a ``workPool``). The task then:

* names a git remote (``repoUrl``; default the entry's ``repoUrl``, else ``projectPath``'s
  remote ``origin``) and a ``ref`` (default ``HEAD``, the remote's default branch);
* always works in a worktree of the worker's clone (``isolation`` ``inplace`` is refused);
* is submitted to deployment ``run-task/pool-<pool>`` (:func:`.setup.pool_deployment`) on the
  repository's queue ``project-<key>-wt`` of that pool (limit ``worktreeParallel``);
* resolves its agent on the worker (a remote machine's agent profiles; the local pool's tasks
  are checked here as usual).

The flow-run parameters carry the brief-side record only (:mod:`tianshu_mcp.flows.remote`); no
path, environment or credential of the caller.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import anyio

from ..acceptance.git import run_git
from ..core import submissions
from ..core.errors import ErrorCode, TianshuError
from ..core.i18n import _
from ..core.idempotency import IdempotencyStore, normalize_key
from ..core.ids import new_task_id
from ..core.paths import SafeProject
from ..core.projects import ProjectRegistry
from ..core.remotes import (
    CALLER_KEYS,
    LOCAL_POOL,
    RemoteSpec,
    check_pool,
    check_ref,
    check_repo_url,
    repo_key,
)
from ..core.settings import load_config
from ..deployments.topology import pool_deployment
from .format import clip, ok_result
from .taskops import TaskView


@dataclass(frozen=True)
class RemoteTarget:
    """Where a remote task runs: ``repo_url`` at ``ref`` on work pool ``pool``; ``key`` names its
    queue; ``parallel`` is its worktree limit (None: config.json's)."""

    repo_url: str
    ref: str
    pool: str
    key: str
    parallel: int | None = None


def remote_target(args: dict[str, Any], home: Any, project: SafeProject | None) -> RemoteTarget | None:
    """The call's remote target, or None for a task on the caller's own work tree.

    Args:
        project: the call's ``projectPath`` through the path gate (None without one): its
            ``projects.json`` entry may name ``workPool``/``repoUrl``, its ``origin`` the remote.

    Raises:
        TianshuError: INVALID_ARGUMENT (a bad ``repoUrl``/``ref``/``workPool``, no remote to
            name, ``isolation: "inplace"``).
    """
    norm = project.norm if project is not None else None
    entry: dict[str, Any] = (ProjectRegistry(home).get(norm) or {}) if norm else {}
    pool = args.get("workPool") or entry.get("workPool") or LOCAL_POOL
    if args.get("repoUrl") is None and pool == LOCAL_POOL:
        return None
    pool = check_pool(str(pool))
    url = args.get("repoUrl") or entry.get("repoUrl") or (_origin(norm) if norm else None)
    if not url:
        raise TianshuError(ErrorCode.INVALID_ARGUMENT,
                           _("a task for work pool {pool} runs where {path} cannot be seen: give repoUrl (a git remote "
                             "the worker can clone), or set repoUrl in the project's projects.json entry, or give the "
                             "repository a remote 'origin'").format(pool=repr(pool),
                                                                    path=args.get("projectPath") or _("the caller")))
    if args.get("dryRun") is True:
        raise TianshuError(ErrorCode.INVALID_ARGUMENT, _("dryRun is not available for a remote task yet (the worker "
                                                         "would inspect its clone, not the ref); run the dry run on a "
                                                         "checkout with projectPath"))
    if args.get("isolation") == "inplace":
        raise TianshuError(ErrorCode.INVALID_ARGUMENT, _("isolation \"inplace\" is not possible for a remote task: the "
                                                         "worker works in a worktree of its own clone and pushes the "
                                                         "result branch"))
    url = check_repo_url(str(url))
    parallel = entry.get("worktreeParallel") if isinstance(entry.get("worktreeParallel"), int) else None
    return RemoteTarget(url, check_ref(str(args.get("ref") or "HEAD")), pool, repo_key(url), parallel)


def _origin(norm: str) -> str | None:
    r = run_git(["remote", "get-url", "origin"], norm)
    return r.stdout.strip() or None if r.ok else None


async def run_remote(handlers: Any, args: dict[str, Any], target: RemoteTarget) -> Any:
    """run_task for ``target``: idempotency claim, then :func:`_accept`; the tool's result."""
    key = normalize_key(args["idempotencyKey"]) if args.get("idempotencyKey") is not None else None
    task_id = new_task_id()
    if key is not None:
        claim = await handlers._claim(key, f"{target.pool}:{target.repo_url}@{target.ref}", args, task_id)
        if claim is not None:
            return claim
    created = False
    try:
        task, lines = await _accept(handlers.service, {**args, **({"idempotencyKey": key} if key else {})}, target, task_id)
        created = True
    finally:
        if key is not None and not created:
            IdempotencyStore(handlers.service.runtime.home).release("run_task", key, task_id)
    meta = TaskView(task, "queued").meta(handlers.service.runtime)
    return ok_result("\n".join(lines), meta)


async def _accept(service: Any, args: dict[str, Any], target: RemoteTarget, task_id: str) -> tuple[dict[str, Any], list[str]]:
    """Write ``task.json`` and the submission entry on the pool's deployment; ``(task, lines)``."""
    home = service.runtime.home
    agent_id = str(args.get("agentId") or "codex")
    if target.pool == LOCAL_POOL and service.runtime.mode != "remote":  # the home's own worker: its agent is here
        from ..adapters.profiles import resolve_agent

        agent = resolve_agent(agent_id, home)
        if not agent.ok:
            raise TianshuError(ErrorCode.INVALID_ARGUMENT, _("agent '{agentId}' is not available: {message}").format(
                agentId=agent_id, message=agent.message))
        agent_id = agent.id
    cfg = load_config(home)
    timeout_ms = int(args.get("taskTimeoutMs") or cfg.default_task_timeout_ms)
    fields = service.task_fields(args, agent_id, timeout_ms)
    fields.update(workspaceMode="remote", projectPath=target.repo_url, displayPath=target.repo_url,
                  projectKey=target.key, isolation="worktree", workPool=target.pool, repoUrl=target.repo_url,
                  ref=target.ref)
    record = service.store.create(task_id, fields)
    limit = target.parallel or cfg.concurrency.worktree_parallel
    remote = RemoteSpec(repoUrl=target.repo_url, ref=target.ref, pool=target.pool, parallel=limit,
                        record={k: v for k, v in record.items() if k not in CALLER_KEYS})
    parameters = {
        "task_id": task_id, "project_path": target.repo_url, "agent_id": agent_id,
        "auto_verify": fields["autoVerify"], "auto_fix_rounds": fields["autoFixRounds"],
        "task_timeout_ms": fields["taskTimeoutMs"],
        "remote": remote.model_dump(mode="json"),  # the flow run's RemoteSpec, as JSON
    }
    tags = [f"tianshu-task:{task_id}", f"project:{target.key}", f"agent:{agent_id}", service.runtime.home_tag,
            f"work-pool:{target.pool}", f"project-name:{os.path.basename(target.repo_url.rstrip('/')) or target.repo_url}",
            f"repo-url:{clip(target.repo_url, 180)}"]
    await anyio.to_thread.run_sync(lambda: submissions.enqueue(
        home, task_id, pool_deployment(target.pool), parameters, tags, f"{target.key}-wt", record["createdAt"],
        queue_limit=limit, work_pool=target.pool,
        name=submissions.flow_run_name(task_id, target.repo_url, fields["task"])))
    task = await service.submit_now(task_id)
    lines = [
        f"task submitted: {task_id}",
        f"agent: {agent_id} (on a worker of work pool {target.pool})",
        f"repository: {target.repo_url} at {target.ref}",
        f"isolation: worktree in the worker's clone on branch tianshu/{task_id}; the worker pushes that branch to "
        f"the repository when the task ends. Up to {limit} tasks of this repository at once.",
        f"queue: work pool {target.pool}; a task no worker takes within remote.queueTimeoutMs "
        f"({cfg.remote.queue_timeout_ms} ms) ends failed (NO_WORKER). Poll with query_task({task_id}) or wait_task.",
        f"brief: {task['task'][:120]}" + ("…" if len(task["task"]) > 120 else ""),
    ]
    return task, lines


def refuse_remote(task: dict[str, Any], action: str) -> None:
    """Refuse ``merge`` or ``verify`` (``verify_task(taskId)``) of a remote task, saying why and
    what to do instead: its worktree and clone live on the worker, its result is the pushed branch.

    Raises:
        TianshuError: INVALID_STATE for a remote task (one with ``workPool``); nothing otherwise.
    """
    if not task.get("workPool"):
        return
    branch = task.get("resultBranch") or f"tianshu/{task['taskId']}"
    names = {"taskId": task["taskId"], "pool": task["workPool"], "branch": branch, "url": task.get("repoUrl")}
    if action == "merge":
        raise TianshuError(ErrorCode.INVALID_STATE, _("task {taskId} ran on a worker of pool {pool}: its result is the "
                                                      "branch {branch} pushed to {url}; merge it there (git fetch "
                                                      "origin {branch} && git merge FETCH_HEAD)").format(**names))
    raise TianshuError(ErrorCode.INVALID_STATE, _("task {taskId} ran on a worker of pool {pool} and its worktree lives "
                                                  "there; verify its pushed branch by projectPath in a checkout, or "
                                                  "rework it (the worker verifies every round)").format(**names))
