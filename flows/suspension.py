"""Prefect's suspension observer, started beside the flow run instead of before it
(docs/design-notes.md, note 71).

Prefect's flow engine watches a deployment's flow run for a ``Suspended`` state set from outside
(:func:`prefect._flow_run_suspension.observe_flow_run_suspension`): a thread with its own event
loop reads the flow run once more and subscribes to the events websocket, and the engine waits
for that before the flow function starts. Measured in the service's engines: 40–80 ms of every
task's path from ``Running`` to the agent's start, spent waiting on the API.

:func:`install` keeps the observer and lets the flow start at once: Prefect's own context manager
is entered in a helper thread (which does the waiting) and left when the flow run ends. Nothing
is lost: the observer's first step reads the flow run's state, so a suspension requested before
its subscription is ready is still seen, at the next orchestration boundary as before. Our own
suspensions (``needs_user``: :func:`prefect.flow_runs.suspend_flow_run` inside the flow) never
depended on the observer.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from uuid import UUID

log = logging.getLogger("tianshu_mcp")

STOP_JOIN_S = 2.0
"""How long the end of a flow run waits for the observer's thread to leave Prefect's context, s
(Prefect's own bound)."""

_installed = False


@contextmanager
def observe_in_background(flow_run_id: UUID, suspension_request: Any, polling_interval: float = 10) -> Iterator[None]:
    """Prefect's ``observe_flow_run_suspension(flow_run_id, suspension_request, polling_interval)``,
    entered in a helper thread that carries this context (Prefect's settings and client live in
    context variables); yields at once and, on exit, has the thread leave it (≤ :data:`STOP_JOIN_S`
    s). Raises nothing of the observer's: Prefect logs its failures and the flow goes on."""
    from prefect._flow_run_suspension import observe_flow_run_suspension

    stop = threading.Event()

    def hold() -> None:
        try:
            with observe_flow_run_suspension(flow_run_id, suspension_request, polling_interval):
                stop.wait()
        except Exception:  # as in Prefect: an observer that fails never fails the run
            log.debug("the suspension observer of flow run %s stopped", flow_run_id, exc_info=True)

    context = contextvars.copy_context()
    thread = threading.Thread(target=context.run, args=(hold,), name="tianshu-suspension-observer", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(STOP_JOIN_S)


def install() -> bool:
    """Have Prefect's flow engine use :func:`observe_in_background` (idempotent). Returns False,
    changing nothing, when this Prefect has no such hook (a release that moved it: the engine
    then waits for the observer as before)."""
    global _installed
    if _installed:
        return True
    import prefect.flow_engine as engine

    if not callable(getattr(engine, "observe_flow_run_suspension", None)):
        return False
    engine.observe_flow_run_suspension = observe_in_background  # type: ignore[attr-defined]
    _installed = True
    return True
