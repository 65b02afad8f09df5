"""Prefect's suspension observer starts beside the flow run, not before it (flows/suspension.py;
design note 71): the flow function no longer waits for the observer's API read and websocket
subscription, and the observer still runs for the whole flow run, in the flow run's context."""

from __future__ import annotations

import contextvars
import threading
from contextlib import contextmanager
from typing import Any, Iterator
from uuid import uuid4

import prefect._flow_run_suspension as prefect_suspension
import pytest

from tianshu_mcp.flows import suspension

MARK: contextvars.ContextVar[str] = contextvars.ContextVar("mark", default="unset")


def test_the_flow_modules_install_it_in_prefects_engine() -> None:
    import prefect.flow_engine as engine

    import tianshu_mcp.flows.run_task  # noqa: F401 - the deployments' entrypoint modules
    import tianshu_mcp.flows.verify  # noqa: F401

    assert engine.observe_flow_run_suspension is suspension.observe_in_background
    assert suspension.install()  # idempotent


def test_the_flow_goes_on_while_the_observer_subscribes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The observer's start (here held until released) no longer holds the flow back; it runs with
    the flow's context variables (Prefect's settings and client) and ends with the flow run."""
    subscribed, release, seen = threading.Event(), threading.Event(), {}

    @contextmanager
    def slow_observer(flow_run_id: Any, request: Any, polling_interval: float = 10) -> Iterator[None]:
        seen.update(run=flow_run_id, mark=MARK.get(), thread=threading.current_thread().name)
        subscribed.set()
        release.wait(30)  # Prefect's waits here for the flow run's read and the subscription
        try:
            yield
        finally:
            seen["left"] = True

    monkeypatch.setattr(prefect_suspension, "observe_flow_run_suspension", slow_observer)
    run_id = uuid4()
    token = MARK.set("flow-run-context")
    try:
        with suspension.observe_in_background(run_id, object()):
            assert subscribed.wait(30)
            assert "left" not in seen  # the flow body runs while the observer still subscribes
            release.set()
    finally:
        MARK.reset(token)
    assert seen == {"run": run_id, "mark": "flow-run-context", "thread": "tianshu-suspension-observer", "left": True}


def test_an_observer_that_fails_to_start_never_fails_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    @contextmanager
    def broken(flow_run_id: Any, request: Any, polling_interval: float = 10) -> Iterator[None]:
        raise ConnectionError("the events websocket refused")
        yield  # pragma: no cover

    monkeypatch.setattr(prefect_suspension, "observe_flow_run_suspension", broken)
    ran = []
    with suspension.observe_in_background(uuid4(), object()):
        ran.append(True)
    assert ran == [True]
