"""Work pool, work queues and deployments (docs/architecture.md §4).

* work pool ``tianshu`` (type process), concurrency limit = ``concurrency.maxRunning``;
* one work queue per project, ``project-<key>``, concurrency limit 1, created on demand;
* deployment ``run-task`` (flow ``run-task``) whose entrypoint is a module path, so any worker
  with this package installed can load it (no source storage, no Docker).

Registration goes through the client API, never ``Flow.deploy()``/``serve()``, which print to
stdout (docs/prefect-facts.md P5).
"""

from __future__ import annotations

import logging
from typing import Any

from prefect.client.orchestration import PrefectClient
from prefect.client.schemas.actions import WorkPoolCreate, WorkPoolUpdate
from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound
from prefect.utilities.callables import parameter_schema

from .topology import WORK_POOL, pool_deployment

log = logging.getLogger("tianshu_mcp")

RUN_TASK_ENTRYPOINT = "tianshu_mcp.flows.run_task:run_task_flow"
VERIFY_ENTRYPOINT = "tianshu_mcp.flows.verify:verify_flow"
REVERIFY_ENTRYPOINT = "tianshu_mcp.flows.verify:reverify_flow"


def queue_name(project_key: str) -> str:
    """The work queue of a project: ``project-<16 hex>``."""
    return f"project-{project_key}"


def locked_job_template() -> dict[str, Any]:
    """The process work pool's base job template with nothing a flow run could abuse.

    Prefect's default template lets a flow run's (or a deployment's) job variables set the
    worker's ``command``, its ``env`` and its ``working_dir`` — any API client could make the
    worker run a program. Here the job configuration holds only ``name``, ``labels`` and
    ``stream_output``, the variables schema declares only those and forbids every other key
    (the API refuses such a flow run with 422), and since the configuration has no ``env``
    mapping, the worker merges no job-variable environment either (docs/hosting.md §4, locked-down API).
    """
    from prefect.workers.process import ProcessWorker  # here: a stdio server imports this module (0.15 s)

    template = ProcessWorker.get_default_base_job_template()
    keep = ("name", "labels", "stream_output")
    template["job_configuration"] = {k: v for k, v in template["job_configuration"].items() if k in keep}
    props = template["variables"]["properties"]
    template["variables"]["properties"] = {k: v for k, v in props.items() if k in keep}
    template["variables"]["additionalProperties"] = False
    return template


KEEP_LIMIT = object()


async def ensure_work_pool(client: PrefectClient, max_running: int | None | object, pool_name: str = WORK_POOL) -> None:
    """Create work pool ``pool_name`` (process type) with :func:`locked_job_template`, or bring an
    existing pool's concurrency limit and template back to ours.

    Args:
        max_running: the pool's concurrency limit (None: unlimited; ``KEEP_LIMIT``: keep an existing
            pool's limit, none for a new pool).
    """
    template = locked_job_template()
    try:
        pool = await client.read_work_pool(pool_name)
    except ObjectNotFound:
        limit = None if max_running is KEEP_LIMIT else max_running
        try:
            await client.create_work_pool(
                WorkPoolCreate(name=pool_name, type="process", base_job_template=template,
                               concurrency_limit=limit, description="tianshu-mcp tasks")  # type: ignore[arg-type]
            )
            log.info("created work pool %s (concurrency limit %s)", pool_name, limit)
            return
        except ObjectAlreadyExists:
            pool = await client.read_work_pool(pool_name)
    limit = pool.concurrency_limit if max_running is KEEP_LIMIT else max_running
    if pool.concurrency_limit != limit or pool.base_job_template != template:
        await client.update_work_pool(pool_name, WorkPoolUpdate(concurrency_limit=limit,  # type: ignore[arg-type]
                                                                base_job_template=template))
        log.info("work pool %s: concurrency limit %s -> %s, job template locked", pool_name,
                 pool.concurrency_limit, limit)


async def ensure_project_queue(client: PrefectClient, project_key: str, limit: int = 1, pool: str = WORK_POOL) -> str:
    """Create the project's work queue when missing, or set its concurrency limit to ``limit``
    when it differs (a changed ``worktreeParallel``); return its name. ≈30 ms.

    ``project-<key>`` (limit 1) serialises the tasks of one work tree; ``project-<key>-wt``
    runs up to ``limit`` worktree tasks of one repository at once (docs/isolation.md §1), in work
    pool ``pool`` (a remote task's queue lives in the pool it names).
    """
    name = queue_name(project_key)
    try:
        queue = await client.read_work_queue_by_name(name, work_pool_name=pool)
        if queue.concurrency_limit != limit:
            await client.update_work_queue(queue.id, concurrency_limit=limit)
        return name
    except ObjectNotFound:
        pass
    try:
        await client.create_work_queue(name, work_pool_name=pool, concurrency_limit=limit,
                                       description="one task at a time per work tree" if limit == 1
                                       else f"up to {limit} worktree tasks of one repository")
    except ObjectAlreadyExists:
        pass
    return name


async def ensure_deployment(client: PrefectClient, flow: Any, name: str, entrypoint: str, pool: str = WORK_POOL) -> Any:
    """Create deployment ``<flow.name>/<name>`` on work pool ``pool``, or update its entrypoint,
    parameter schema, pool and job variables in place when one of them differs; return its id.

    An existing deployment is updated, never re-created: an upsert without ``schedules`` would
    replace the deployment's schedules with none, wiping every re-verification schedule on start.
    """
    from prefect.client.schemas.actions import DeploymentUpdate

    schema = parameter_schema(flow).model_dump_for_openapi()
    try:
        existing = await client.read_deployment_by_name(f"{flow.name}/{name}")
    except ObjectNotFound:
        existing = None
    if existing is not None:
        if (existing.entrypoint, existing.parameter_openapi_schema, existing.work_pool_name,
                existing.job_variables or {}) != (entrypoint, schema, pool, {}):  # each start: one write fewer
            await client.update_deployment(existing.id, DeploymentUpdate(
                entrypoint=entrypoint, parameter_openapi_schema=schema, work_pool_name=pool, job_variables={}))
        return existing.id
    flow_id = await client.create_flow_from_name(flow.name)
    return await client.create_deployment(
        flow_id=flow_id,
        name=name,
        work_pool_name=pool,
        entrypoint=entrypoint,
        parameter_openapi_schema=schema,
        enforce_parameter_schema=False,
        description=(flow.description or "").strip().splitlines()[0] if flow.description else None,
    )


ZOMBIE_AUTOMATION = "tianshu-crash-zombie-flow-runs"
ZOMBIE_WITHIN_S = 150
"""Seconds after a flow run's last heartbeat (30 s apart) before it is Crashed as a zombie."""


async def ensure_zombie_automation(client: PrefectClient) -> None:
    """Mark flow runs Crashed when their heartbeat stops (a dead host), 2–2.5 min after death.

    Heartbeats every 30 s (``PREFECT_FLOWS_HEARTBEAT_FREQUENCY``), proactive trigger within
    :data:`ZOMBIE_WITHIN_S` (docs/prefect-facts.md §5 measured 75 s; widened so that three late or lost
    heartbeats of a live run on a loaded machine never crash it — a false crash throws away an
    agent round, a late one only delays a dead host's slot). Created once; a start that finds it
    with another window replaces it.
    """
    from datetime import timedelta

    from prefect.client.schemas.objects import StateType
    from prefect.events.actions import ChangeFlowRunState
    from prefect.events.schemas.automations import AutomationCore, EventTrigger, Posture

    for found in await client.read_automations_by_name(ZOMBIE_AUTOMATION):
        if getattr(found.trigger, "within", None) == timedelta(seconds=ZOMBIE_WITHIN_S):
            return
        await client.delete_automation(found.id)  # made by an older version with another window
    await client.create_automation(
        AutomationCore(
            name=ZOMBIE_AUTOMATION,
            description="tianshu-mcp: a flow run whose heartbeat stopped is Crashed (its host died)",
            trigger=EventTrigger(
                after={"prefect.flow-run.heartbeat"},
                expect={"prefect.flow-run.heartbeat", "prefect.flow-run.Completed", "prefect.flow-run.Failed",
                        "prefect.flow-run.Cancelled", "prefect.flow-run.Crashed", "prefect.flow-run.Paused",
                        "prefect.flow-run.Suspended"},
                match={"prefect.resource.id": ["prefect.flow-run.*"]},
                for_each={"prefect.resource.id"},
                posture=Posture.Proactive,
                threshold=1,
                within=timedelta(seconds=ZOMBIE_WITHIN_S),
            ),
            actions=[ChangeFlowRunState(state=StateType.CRASHED, message="No heartbeat: the host process died")],
        )
    )


async def drop_zombie_automation(client: PrefectClient) -> int:
    """Delete the zombie-run automation from a home's own Prefect server; return how many.

    The local topology needs none: its API, its worker and its flow runs live and die with one
    service (a run outlives it by a second, :func:`~tianshu_mcp.core.reaper.exit_when_host_dies`),
    and the next start's sweep crashes what was left. The automation there could only do harm: a
    live run whose heartbeat events reached a loaded server late was crashed (note 43). Remote
    workers make it again on a shared server (:func:`ensure_pool_deployment`).
    """
    found = await client.read_automations_by_name(ZOMBIE_AUTOMATION)
    for automation in found:
        await client.delete_automation(automation.id)
    return len(found)


async def ensure_all(client: PrefectClient, max_running: int) -> dict[str, Any]:
    """Create the pool and every deployment of a home's own service (no zombie-run automation:
    :func:`drop_zombie_automation`); return ``{deployment name: id}``."""
    from ..flows.run_task import run_task_flow
    from ..flows.verify import reverify_flow, verify_flow

    await ensure_work_pool(client, max_running)
    await drop_zombie_automation(client)
    return {
        "run-task/run-task": await ensure_deployment(client, run_task_flow, "run-task", RUN_TASK_ENTRYPOINT),
        "verify/verify": await ensure_deployment(client, verify_flow, "verify", VERIFY_ENTRYPOINT),
        "reverify/reverify": await ensure_deployment(client, reverify_flow, "reverify", REVERIFY_ENTRYPOINT),
    }


async def ensure_pool_deployment(client: PrefectClient, pool: str, pool_limit: int | None | object = KEEP_LIMIT) -> str:
    """Make work pool ``pool`` (locked template) and its ``run-task`` deployment exist; return the
    deployment's name. Used by the caller before the first remote task of a pool and by
    ``tianshu-mcp worker`` when it starts (and sets ``--pool-limit`` on the pool and, enforced
    strictly by the server, on the deployment). Also makes the zombie-run automation exist: a
    dead worker's flow runs end Crashed on the shared server too."""
    from ..flows.run_task import run_task_flow

    from prefect.client.schemas.actions import DeploymentUpdate

    await ensure_work_pool(client, pool_limit, pool)
    await ensure_zombie_automation(client)
    name = pool_deployment(pool)
    dep_id = await ensure_deployment(client, run_task_flow, name.split("/", 1)[1], RUN_TASK_ENTRYPOINT, pool)
    if pool_limit is not KEEP_LIMIT:
        # the pool's own limit is applied when a worker polls, and two workers polling at once
        # can both take the last slot (measured: 5 running with limit 4); the deployment's limit
        # is taken atomically by the server when a run becomes Pending
        await client.update_deployment(dep_id, DeploymentUpdate(concurrency_limit=pool_limit))  # type: ignore[arg-type]
    return name
