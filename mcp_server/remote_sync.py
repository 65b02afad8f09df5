"""The caller's copy of a remote task (docs/isolation.md §2): record, reports, queue timeout, cancel.

A remote task's worker shares no file with the MCP server that submitted it. Its status is the
flow run's state (read for every task anyway); its details come from the artifact
``<taskId>-record`` the worker publishes (:func:`tianshu_mcp.flows.remote.publish_record`):
:func:`sync_remote` merges that record into the caller's ``task.json`` (paths rewritten to the
caller's task directory) and writes the published files (``report-<n>.md``/``.json``,
``result.patch``, the agent log's tail) there, so ``query_task``, ``wait_task`` and
``query_info(type=report)`` read a remote task exactly like a local one.

A remote task that waits says whether any worker of its pool is online; with none online for
``remote.queueTimeoutMs`` it ends ``failed`` with ``NO_WORKER`` (checked whenever it is read).
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from ..core.files import atomic_write_text
from ..core.i18n import N_, _
from ..core.remotes import CALLER_KEYS, PATH_KEYS, RECORD_FORMAT, record_artifact_key
from ..core.settings import load_config
from ..core.taskstore import age_s, utc_now
from ..flows.states import RunState, status_from_state
from ..core.model import TERMINAL

log = logging.getLogger("tianshu_mcp")

_FILE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*$")
_NOT_TAKEN = frozenset(CALLER_KEYS) | {"taskId", "createdAt"}



def parse_record(data: Any) -> dict[str, Any] | None:
    """The payload of a ``<taskId>-record`` artifact (markdown with one JSON block), or None when
    it is not one this caller can read."""
    if not isinstance(data, str):
        return None
    text = data.strip()
    if text.startswith("```json") and text.endswith("```"):
        text = text[len("```json"):-3]
    try:
        payload = json.loads(text)
    except ValueError:
        return None
    if not isinstance(payload, dict) or payload.get("format") != RECORD_FORMAT or not isinstance(payload.get("record"), dict):
        return None
    return payload


def merge_fields(payload: dict[str, Any], caller_dir: str) -> dict[str, Any]:
    """The worker's record as fields of the caller's ``task.json``: the worker's own keys
    (its paths, its project) dropped, paths under its task directory moved to ``caller_dir``."""
    worker_dir = str(payload.get("taskDir") or "")
    fields: dict[str, Any] = {}
    for key, value in payload["record"].items():
        if key in _NOT_TAKEN:
            continue
        if key in PATH_KEYS and isinstance(value, str):
            value = caller_dir + value[len(worker_dir):] if worker_dir and value.startswith(worker_dir + "/") else None
        fields[key] = value
    return fields


def write_files(payload: dict[str, Any], caller_dir: Any) -> int:
    """Write the published files into the caller's task directory (atomic; a name that could
    leave the directory is skipped); return how many were written."""
    files = payload.get("files")
    if not isinstance(files, dict):
        return 0
    n = 0
    for name, text in files.items():
        if not isinstance(name, str) or not isinstance(text, str) or not _FILE_NAME.match(name) or ".." in name:
            log.warning("remote record: skipped the file name %r", str(name)[:80])
            continue
        target = caller_dir / name
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(target, text)
        n += 1
    return n


async def sync_remote(service: Any, client: Any, tasks: list[dict[str, Any]], states: dict[str, RunState]) -> list[dict[str, Any]]:
    """Bring each remote task of ``tasks`` up to date from its flow run's artifacts; return the
    tasks (updated records where something changed). Failures leave a task as it was."""
    out = []
    for t in tasks:
        run_id = t.get("flowRunId")
        if t.get("repoUrl") and t.get("workPool") and run_id and not t.get("remoteFinal") and run_id in states:
            try:
                t = await _sync_one(service, client, t, states[run_id])
            except Exception as exc:  # noqa: BLE001 - the view still shows the flow run's state
                log.warning("could not read the record of remote task %s: %s", t.get("taskId"), exc)
        out.append(t)
    return out


async def _sync_one(service: Any, client: Any, t: dict[str, Any], state: RunState) -> dict[str, Any]:
    from prefect.client.schemas.filters import ArtifactCollectionFilter, ArtifactCollectionFilterKey

    st_type, st_name, st_msg = state.type, state.name, state.message
    status = status_from_state(st_type, st_name, t.get("phase"))
    if status == "queued":
        return await _queued(service, client, t)
    task_id = t["taskId"]
    found = await client.read_latest_artifacts(
        artifact_filter=ArtifactCollectionFilter(key=ArtifactCollectionFilterKey(any_=[record_artifact_key(task_id)])), limit=1)
    fields: dict[str, Any] = {}
    if found and str(found[0].latest_id) != t.get("remoteRecordId"):
        payload = parse_record(found[0].data)
        if payload is not None:
            tdir = service.store.dir(task_id)
            fields = merge_fields(payload, str(tdir))
            write_files(payload, tdir)
            fields["remoteRecordId"] = str(found[0].latest_id)
    if status in TERMINAL:
        fields["remoteFinal"] = True
    if not fields:
        return t
    t = service.store.update_foreign(task_id, fields)  # the worker's record: maybe a newer version's
    if status in TERMINAL:
        service.store.event(task_id, status, status, str(t.get("lastMessage") or st_msg or status)[:500])
    return t


async def _queued(service: Any, client: Any, t: dict[str, Any]) -> dict[str, Any]:
    """Say whether a worker of the task's pool is online; end the task ``NO_WORKER`` when none
    has been for ``remote.queueTimeoutMs``."""
    from prefect.states import Failed

    pool = str(t["workPool"])
    timeout_ms = load_config(service.runtime.home).remote.queue_timeout_ms
    workers = await client.read_workers_for_work_pool(pool)
    online = [w for w in workers if str(getattr(w.status, "value", w.status)).upper() == "ONLINE"]
    age = age_s(str(t.get("submittedAt") or t.get("createdAt") or "")) or 0.0
    if online:
        msg = _("queued: waiting for a slot in work pool {pool} ({n} worker(s) online) and in the "
                "repository's queue").format(pool=pool, n=len(online))
    elif age * 1000 >= timeout_ms:
        template = N_("no worker of work pool {pool} took the task within remote.queueTimeoutMs ({ms} ms); nothing "
                      "ran. Start `tianshu-mcp worker --pool {pool}` where the repository can be reached, then run the "
                      "task again")
        msg = _(template).format(pool=pool, ms=timeout_ms)
        # the Prefect state message stays English (design-notes 45)
        await client.set_flow_run_state(t["flowRunId"], Failed(message=template.format(pool=pool, ms=timeout_ms)),
                                        force=True)
        t = service.store.update(t["taskId"], lastMessage=msg, errorType="no_worker", finishedAt=utc_now(), phase=None,
                                 remoteFinal=True)
        service.store.event(t["taskId"], "failed", "failed", msg)
        return t
    else:
        msg = _("queued: no worker serves work pool {pool} (none online); start `tianshu-mcp worker --pool {pool}` on "
                "a machine that can reach {repoUrl}. The task ends failed (NO_WORKER) if no worker takes it "
                "within remote.queueTimeoutMs ({ms} ms) of its submission").format(pool=pool, repoUrl=t.get("repoUrl"),
                                                                                    ms=timeout_ms)
    if t.get("lastMessage") != msg:
        t = service.store.update(t["taskId"], lastMessage=msg)
    return t


async def cancel_remote(service: Any, client: Any, task_id: str, flow_run_id: str, reason: str | None,
                        wait_s: float) -> tuple[Any, bool, str]:
    """Cancel a running remote task: Prefect's ``Cancelling`` state makes its worker end the
    flow-run process (whose hook kills the agent's tree); wait ≤ ``wait_s`` s for the end.

    Returns:
        ``(view, settled, text)`` as :meth:`~tianshu_mcp.mcp_server.taskops.TaskService.cancel`.
    """
    import anyio
    from prefect.states import Cancelling

    await client.set_flow_run_state(flow_run_id, Cancelling(message=reason or "cancelled"), force=True)
    deadline = anyio.current_time() + wait_s
    while (view := await service.view(task_id)).status not in TERMINAL and anyio.current_time() < deadline:
        await anyio.sleep(0.5)
    if view.status not in TERMINAL:
        return view, False, _("cancel requested for {taskId} (its worker ends it), not final yet after {secs} s; "
                              "check again with query_task").format(taskId=task_id, secs=f"{wait_s:.0f}")
    return view, True, _("cancelled {taskId}").format(taskId=task_id)
