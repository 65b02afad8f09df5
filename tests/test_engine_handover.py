"""The service hands its forked engine the flow run it claimed (``hosting/engine_handover.py``,
design note 81): the engine neither reads the run first nor writes its flow version and retry
policy, and the run still ends with both written (by the launcher's patch) as Prefect's engine
would write them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import mcp_client, meta_of
from tianshu_mcp.deployments.setup import RUN_TASK_ENTRYPOINT

ENGINE = r'''
import os, sys, uuid
from prefect.client.schemas.objects import FlowRun
from prefect.states import Pending
from tianshu_mcp.hosting import engine_handover as h

entrypoint, case = sys.argv[1], sys.argv[2]
from prefect.client.schemas.objects import Flow, WorkPool
from prefect.client.schemas.responses import DeploymentResponse
flow = Flow(id=uuid.uuid4(), name="run-task")
deployment = DeploymentResponse(id=uuid.uuid4(), name="run-task", flow_id=flow.id, tags=["t1"],
                                work_pool_name="tianshu")
pool = WorkPool(name="tianshu", type="process")
# as the pool's due runs are handed out: without the pool's name (the deployment has it)
run = FlowRun(id=uuid.uuid4(), name="handover", flow_id=flow.id, deployment_id=deployment.id,
              work_queue_id=uuid.uuid4())
fields = h.engine_fields(entrypoint, run)
if case == "not-its-deployment":
    deployment = DeploymentResponse(id=uuid.uuid4(), name="other", flow_id=flow.id)
env = h.handover_env(run, Pending(), fields, flow, deployment, pool)
os.environ.update(env)
os.environ["PREFECT__FLOW_RUN_ID"] = str(uuid.uuid4() if case == "another-run" else run.id)
if case == "damaged":
    os.environ[h.HANDOVER_ENV] = env[h.HANDOVER_ENV][:40]
installed = h.install()
assert h.HANDOVER_ENV not in os.environ  # never inherited by the flow's children
import prefect.flow_engine as flow_engine
from prefect.client.orchestration import get_client

def refused(call):
    """The call made its request: the API (nobody listens at its port) refused the connection."""
    try:
        call()
    except Exception as exc:  # httpx.ConnectError, possibly wrapped by Prefect
        return "connect" in repr(exc).lower() or "refused" in repr(exc).lower()
    return False

import asyncio
import prefect.events.related as related

async def looked_up(kind, key):
    """Prefect's own cached lookup of a related object; a read would fail (nobody serves)."""
    async def read(obj_id):
        raise ConnectionRefusedError(f"read {kind} {obj_id}")
    return await related._get_and_cache_related_object(kind=kind, role=kind, client_method=read, obj_id=key,
                                                       cache=related.RESOURCE_CACHE)

assert h.RELATED_ENV not in os.environ
if case == "not-its-deployment":  # the run is handed over, its labels are read as before
    assert installed and not related.RESOURCE_CACHE
    print("ok"); sys.exit(0)
if case != "handed":
    assert not installed and refused(lambda: flow_engine.load_flow_run(run.id))
    print("ok"); sys.exit(0)
assert installed
for kind, key, obj in (("flow", flow.id, flow), ("deployment", deployment.id, deployment), ("work-pool", "tianshu", pool)):
    entry = asyncio.run(looked_up(kind, key))
    assert entry["kind"] == kind and entry["object"] == obj, (kind, entry)
assert refused(lambda: asyncio.run(looked_up("work-queue", run.work_queue_id)))  # still read
got = flow_engine.load_flow_run(run.id)  # no request: the API is unreachable
assert got.id == run.id and got.state.is_pending() and got.state_type.value == "PENDING"
assert got.flow_version == fields["flow_version"] and got.empirical_policy == fields["empirical_policy"]
assert got.empirical_policy.retries is not None and got.empirical_policy.retry_delay is not None
assert refused(lambda: flow_engine.load_flow_run(run.id))  # once only
with get_client(sync_client=True) as client:
    same = dict(flow_version=got.flow_version, empirical_policy=got.empirical_policy)
    assert refused(lambda: client.update_flow_run(run.id, flow_version="other", empirical_policy=got.empirical_policy))
    assert refused(lambda: client.update_flow_run(run.id, infrastructure_pid="7", **same))
    assert client.update_flow_run(run.id, **same) is None  # the engine's own patch: no request
    assert refused(lambda: client.update_flow_run(run.id, **same))  # once only
print("ok")
'''


@pytest.mark.parametrize("case", ["handed", "another-run", "damaged", "not-its-deployment"])
def test_a_forked_engine_uses_the_handed_run_once_and_only_its_own(case: str, tmp_path: Path) -> None:
    """In a process like a forked engine, against an API nobody serves: the handed run is read
    and its version and policy written without a request, once, and Prefect's events find the
    run's flow, deployment and pool in their cache (its work queue is still read); a run that is
    not the engine's, or a damaged variable, hands nothing over (the requests are made), and
    related objects that are not the run's are not cached."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_API_URL="http://127.0.0.1:9/api", PREFECT_CLIENT_MAX_RETRIES="0",
               PREFECT_HOME=str(tmp_path / "prefect"), PREFECT_SERVER_ALLOW_EPHEMERAL_MODE="false")
    r = subprocess.run([sys.executable, "-c", ENGINE, RUN_TASK_ENTRYPOINT, case], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]


@pytest.mark.prefect
@pytest.mark.anyio
async def test_a_run_started_by_the_service_has_the_flow_version_and_policy_its_engine_would_write(
        ts_daemon: dict[str, Any], calc_repo: Path, prefect_api: httpx.Client) -> None:
    """Whoever started it (the service's launch, or on a loaded machine the worker's poll), the
    finished run carries the flow's version, the retry policy filled from the flow and the
    engine's pid, as Prefect's engine writes them."""
    from prefect.flows import load_flow_from_entrypoint

    flow = load_flow_from_entrypoint(RUN_TASK_ENTRYPOINT, use_placeholder_flow=False)
    async with mcp_client(ts_daemon["home"]) as mcp:
        sub = meta_of(await mcp.call_tool("run_task", {"projectPath": str(calc_repo), "task": "fix add test_add_negative",
                                                       "agentId": "scripted"}))
        done = meta_of(await mcp.call_tool("wait_task", {"taskId": sub["taskId"], "timeoutMs": 240000}))
    assert done["status"] in ("succeeded", "failed"), done
    record = json.loads((ts_daemon["home"] / "tasks" / sub["taskId"] / "task.json").read_text())
    run = prefect_api.get(f"/flow_runs/{record['flowRunId']}").json()
    assert run["flow_version"] == flow.version
    assert (run["empirical_policy"]["retries"], run["empirical_policy"]["retry_delay"]) == (flow.retries,
                                                                                          flow.retry_delay_seconds)
    assert run["infrastructure_pid"] and run["state"]["type"] in ("COMPLETED", "FAILED")
    # the events of its task runs are labelled with its flow, deployment, work queue and pool,
    # whether the engine read them or was handed them
    wanted = {f"prefect.flow.{run['flow_id']}", f"prefect.deployment.{run['deployment_id']}",
              f"prefect.work-queue.{run['work_queue_id']}", f"prefect.work-pool.{run['work_pool_id']}"}

    def labelled() -> list[dict[str, Any]]:
        found = prefect_api.post("/events/filter", json={
            "filter": {"related": {"id": [f"prefect.flow-run.{run['id']}"]},
                       "event": {"prefix": ["prefect.task-run."]}, "order": "ASC"},
            "limit": 50}).json().get("events") or []
        return [e for e in found if wanted <= {r["prefect.resource.id"] for r in e.get("related", [])}]

    deadline = time.monotonic() + 60  # the server writes events in batches
    while not labelled():
        assert time.monotonic() < deadline, "no task-run event of the run carries its four related objects"
        time.sleep(0.2)
