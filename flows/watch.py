"""Watchdog of a flow-run process: its flow run cancelled or deleted from the Prefect UI (docs/hosting.md §6).

Prefect's worker stops the flow-run process on a cancel, but our agent and checks run in their
own sessions and outlive it, and a *deleted* flow run stops nothing at all. :func:`watch_flow_run`
starts a daemon thread that reads the flow run every ``interval_s`` seconds:

* Cancelling/Cancelled → write the cancel marker (``cancel.json``, source ``ui``) so the flow
  ends ``cancelled`` instead of reworking, and kill every process this flow run started;
* 404 (deleted) → kill every process this flow run started, finish ``task.json`` as
  ``cancelled`` (``finalStatus``: there is no flow-run state left to read) and exit.

It reads through Prefect's own client (the flow-run process has the API address and credentials
from its worker). Transport errors are ignored (the host watchdog, :func:`~tianshu_mcp.core.reaper.exit_when_host_dies`,
covers a dead host).
"""

from __future__ import annotations

import logging
import os
import threading
import time

from ..core.i18n import N_, _
from ..core.reaper import kill_descendants
from ..core.taskstore import utc_now
from ..tasks.common import record, request_cancel, store

log = logging.getLogger("tianshu_mcp")

DELETED_MESSAGE = N_("cancelled: its flow run was deleted in the Prefect UI; the agent was stopped")


def _current_flow_run_id() -> str | None:
    try:
        from prefect.runtime import flow_run

        return str(flow_run.id) if flow_run.id else None
    except Exception:  # noqa: BLE001
        return None


def watch_flow_run(task_id: str, interval_s: float = 1.0) -> bool:
    """Start the watchdog for ``task_id``'s flow run; False when there is no run id (a direct
    call of the flow, outside a deployment)."""
    run_id = _current_flow_run_id()
    if not run_id:
        return False
    tdir = store().dir(task_id)

    def on_deleted() -> None:
        kill_descendants()
        try:
            record(task_id, finalStatus="cancelled", lastMessage=_(DELETED_MESSAGE), errorType="cancelled",
                   abortSource="ui", finishedAt=utc_now(), phase=None)
            store().event(task_id, "cancelled", "cancelled", _(DELETED_MESSAGE))
        finally:
            os._exit(0)

    def loop() -> None:
        from prefect.client.orchestration import get_client
        from prefect.exceptions import ObjectNotFound

        with get_client(sync_client=True) as client:
            while True:
                time.sleep(interval_s)
                try:
                    run = client.read_flow_run(run_id)
                except ObjectNotFound:
                    on_deleted()
                    return
                except Exception:  # noqa: BLE001 - the API is briefly unreachable: look again
                    continue
                if run.state is not None and run.state.type.value in ("CANCELLING", "CANCELLED"):
                    request_cancel(tdir, "ui", _("cancelled in the Prefect UI"))
                    kill_descendants()
                    return

    threading.Thread(target=loop, name="tianshu-flow-run-watch", daemon=True).start()
    return True


def guard_run(record_id: str, project_path: str) -> None:
    """Everything a flow-run process does first: become the reaper of its orphans, die with its
    host, watch its flow run (cancel/delete from the UI), and pass the project gate
    (:func:`~tianshu_mcp.core.gate.claim_project`: no leftover process of the previous run on
    this project is alive when this one starts work)."""
    from ..core.gate import claim_project
    from ..core.paths import serial_key
    from ..core.reaper import become_subreaper, exit_when_host_dies
    from ..core.settings import home_tag

    become_subreaper()
    # the host died (SIGKILL): stop the agent now rather than let it edit the project
    # unsupervised; the next host's start-up sweep archives this run as interrupted
    exit_when_host_dies()
    watch_flow_run(record_id)
    killed = claim_project(f"{home_tag()}/{serial_key(project_path)}")
    if killed:
        store().event(record_id, "note", "running",
                      _("project gate: {n} leftover process(es) of the previous run killed").format(n=killed))
