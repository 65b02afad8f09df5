"""The service hands its forked engine the flow run it has just claimed (design note 81).

Prefect's engine begins a deployment's run with two requests whose answers the service that
started it already holds: it reads the flow run (``load_flow_run``) and then writes the run's
flow version and retry policy (``FlowRunEngine.initialize_run``'s unconditional
``update_flow_run``). The direct launch (:mod:`.direct_launch`) has the run as the pool handed it
out and the ``Pending`` state its claim was given, and it patches the run anyway once the engine
is forked (the engine's pid). So, for a run it starts:

* :func:`handover_env` puts the run, with that state and with the flow version and retry
  policy the engine would write, into the engine's environment (:data:`HANDOVER_ENV`), and the
  launcher's own patch writes the same version and policy beside the pid (:func:`engine_fields`);
* in the forked engine, :func:`install` has ``load_flow_run`` of that run return it without a
  request, and the engine's own patch of exactly those two values become a no-op;
* the run's flow, deployment and work pool, which the launcher reads once per service, go along
  too (:data:`RELATED_ENV`): Prefect's events worker labels every event of the run with them and
  read each from the API in every engine, beside the flow (``prefect.events.related``); they are
  put into its cache (``RESOURCE_CACHE``), where its own lookup finds them. Only the run's work
  queue is still read. The labels are as fresh as the service's copies: a deployment renamed or
  retagged while the service runs is labelled with its old name until the service restarts.

Everything else is Prefect's: the engine still reads the run again before it proposes
``Running`` (``setup_run_context``), so a cancellation or a suspension that came meanwhile is
seen, and the orchestration rules decide the ``Running`` proposal. A run the worker starts (no
fork server, a remote pool) has no handover and begins as Prefect's engine always does. A handed
run whose id is not the engine's, or whose values differ from what the engine computes (the
flow's source changed on disk between the service's import and the engine's), is ignored or
patched by the engine itself: never a wrong value, at worst the request it would have made.
"""

from __future__ import annotations

import json
import os
from typing import Any

HANDOVER_ENV = "TIANSHU_MCP_FLOW_RUN"
"""The handed flow run's JSON (``prefect.client.schemas.objects.FlowRun``)."""
RELATED_ENV = "TIANSHU_MCP_FLOW_RUN_RELATED"
"""``{"flow", "deployment", "workPool"}``: the handed run's related objects as JSON."""

_flows: dict[str, Any] = {}


def engine_fields(entrypoint: str, flow_run: Any) -> dict[str, Any]:
    """``{"flow_version", "empirical_policy"}`` as the engine writes them for ``flow_run``
    (``FlowRunEngine.initialize_run``): the flow's version, and the run's policy with ``retries``
    and ``retry_delay`` filled from the flow where unset. ``entrypoint``: the deployment's
    ``package.module:flow`` (imported once per process).

    Raises:
        Exception: what loading the flow raises (the caller then hands nothing over).
    """
    flow = _flows.get(entrypoint)
    if flow is None:
        from prefect.flows import load_flow_from_entrypoint

        flow = _flows[entrypoint] = load_flow_from_entrypoint(entrypoint, use_placeholder_flow=False)
    policy = flow_run.empirical_policy.model_copy()
    if policy.retry_delay is None:
        policy.retry_delay = flow.retry_delay_seconds
    if policy.retries is None:
        policy.retries = flow.retries
    return {"flow_version": flow.version, "empirical_policy": policy}


def handover_env(flow_run: Any, state: Any, fields: dict[str, Any], flow: Any = None, deployment: Any = None,
                 work_pool: Any = None) -> dict[str, str]:
    """The engine's :data:`HANDOVER_ENV`: ``flow_run`` as the claim left it (``state``, the
    accepted ``Pending``) with the :func:`engine_fields` ``fields`` already applied; and
    :data:`RELATED_ENV` when all of the run's ``flow``, ``deployment`` and ``work_pool`` (the
    client's schema objects) are given."""
    handed = flow_run.model_copy(update={"state": state, "state_id": state.id, "state_type": state.type,
                                         "state_name": state.name, **fields})
    env = {HANDOVER_ENV: handed.model_dump_json()}
    if flow is not None and deployment is not None and work_pool is not None:
        env[RELATED_ENV] = json.dumps({name: obj.model_dump(mode="json", exclude_none=True) for name, obj in
                                       (("flow", flow), ("deployment", deployment), ("workPool", work_pool))})
    return env


def install() -> bool:
    """In a forked engine: use the handed flow run of :data:`HANDOVER_ENV`, if it is this
    engine's (``PREFECT__FLOW_RUN_ID``); returns whether one was installed. The variable is
    removed from the environment either way (the flow's children do not inherit it)."""
    raw = os.environ.pop(HANDOVER_ENV, None)
    related = os.environ.pop(RELATED_ENV, None)
    if not raw:
        return False
    from prefect.client.schemas.objects import FlowRun

    try:
        handed = FlowRun.model_validate_json(raw)
    except ValueError:
        return False
    if str(handed.id) != os.environ.get("PREFECT__FLOW_RUN_ID"):
        return False
    _use(handed)
    if related:
        _seed_related(handed, related)
    return True


def _seed_related(handed: Any, raw: str) -> bool:
    """Put the handed run's flow, deployment and work pool (:data:`RELATED_ENV`) into Prefect's
    related-resource cache under the keys its events worker looks up; returns whether they were
    put there. Nothing is put when the objects are not the run's, cannot be read, or the cache is
    not the dict this Prefect version keeps (its events are then labelled as before, by reads)."""
    try:
        import prefect.events.related as related
        from prefect.client.schemas.objects import Flow, WorkPool
        from prefect.client.schemas.responses import DeploymentResponse
        from prefect.types._datetime import now

        data = json.loads(raw)
        flow = Flow.model_validate(data["flow"])
        deployment = DeploymentResponse.model_validate(data["deployment"])
        pool = WorkPool.model_validate(data["workPool"])
    except Exception:  # noqa: BLE001 - labelled by reads, as without a handover
        return False
    cache = getattr(related, "RESOURCE_CACHE", None)
    # the pool handed out runs without their pool's name: the deployment's pool is the run's
    if not isinstance(cache, dict) or (flow.id, deployment.id, pool.name) != (
            handed.flow_id, handed.deployment_id, handed.work_pool_name or deployment.work_pool_name):
        return False
    at = now("UTC")
    for kind, key, obj in (("flow", flow.id, flow), ("deployment", deployment.id, deployment),
                           ("work-pool", pool.name, pool)):
        cache[f"{kind}.{key}"] = ({"kind": kind, "object": obj}, at)
    return True


def _use(handed: Any) -> None:
    """Patch Prefect's ``load_flow_run`` and the sync client's ``update_flow_run`` for ``handed``
    (each answers from it once, then behaves as Prefect's own)."""
    import prefect.flow_engine as flow_engine
    from prefect.client.orchestration import SyncPrefectClient

    load = flow_engine.load_flow_run
    update = SyncPrefectClient.update_flow_run
    unused = {"load": True, "update": True}

    def load_flow_run(flow_run_id: Any) -> Any:
        if unused["load"] and flow_run_id == handed.id:
            unused["load"] = False
            return handed.model_copy(deep=True)
        return load(flow_run_id)

    def update_flow_run(self: Any, flow_run_id: Any, *args: Any, **more: Any) -> Any:
        if (unused["update"] and not args and flow_run_id == handed.id
                and set(more) == {"flow_version", "empirical_policy"}
                and more["flow_version"] == handed.flow_version and more["empirical_policy"] == handed.empirical_policy):
            unused["update"] = False  # the launcher's patch writes these two beside the engine's pid
            return None
        return update(self, flow_run_id, *args, **more)

    flow_engine.load_flow_run = load_flow_run  # type: ignore[assignment]
    SyncPrefectClient.update_flow_run = update_flow_run  # type: ignore[method-assign]
