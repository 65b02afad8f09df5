"""A flow-run process leaves Prefect's heartbeat context without joining the heartbeat thread
(flows/heartbeats.py; design note 77): the thread sleeps in 1 s steps, and a sync engine that
joins it lived up to 1 s past its flow run's final state."""

from __future__ import annotations

import threading
import time
from typing import Any
from uuid import uuid4

import prefect.flow_engine as engine
import pytest

from tianshu_mcp.flows import heartbeats


class _Engine:
    """What Prefect's ``_send_heartbeats`` reads of a flow run engine, recording each heartbeat."""

    def __init__(self) -> None:
        self.heartbeat_seconds = 30
        self.flow_run = None
        self.sent = threading.Event()
        self.logger = __import__("logging").getLogger("test-heartbeats")

    def _build_heartbeat_event_template(self) -> tuple[Any, Any]:
        return ({"prefect.resource.id": f"prefect.flow-run.{uuid4()}"}, [])

    def _emit_flow_run_heartbeat(self, resource: Any, related: Any) -> None:
        self.sent.set()


def _wait(predicate: Any, deadline_s: float = 30.0) -> bool:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def test_the_flow_modules_install_it_in_prefects_engine() -> None:
    import tianshu_mcp.flows.run_task  # noqa: F401 - the deployments' entrypoint modules
    import tianshu_mcp.flows.verify  # noqa: F401

    assert getattr(engine._send_heartbeats, "prefect_send", None) is not None
    assert heartbeats.install()  # idempotent: not wrapped twice
    assert not hasattr(engine._send_heartbeats.prefect_send, "prefect_send")


def test_leaving_the_context_does_not_wait_for_the_heartbeat_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Prefect's own ``_send_heartbeats``, wrapped: heartbeats are sent while the flow runs; the
    exit never joins the thread (which stops by itself at its next step)."""
    original = getattr(engine._send_heartbeats, "prefect_send", engine._send_heartbeats)
    joined: list[str] = []
    real_join = threading.Thread.join

    def recording_join(self: threading.Thread, timeout: float | None = None) -> None:
        joined.append(self.name)
        real_join(self, timeout)

    before = set(threading.enumerate())
    fake = _Engine()
    monkeypatch.setattr(threading.Thread, "join", recording_join)
    with heartbeats.unjoined(original)(fake):
        assert fake.sent.wait(30), "no heartbeat was sent while the flow ran"
        started = [t for t in threading.enumerate() if t not in before]
    monkeypatch.setattr(threading.Thread, "join", real_join)
    assert len(started) == 1 and started[0].daemon
    assert started[0].name not in joined
    assert _wait(lambda: not started[0].is_alive(), 10.0), "the heartbeat thread did not stop after the flow run"


def test_a_prefect_without_the_hook_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_join_parameter(engine_: Any) -> Any:  # a release that dropped join_on_exit
        raise AssertionError("never called")

    monkeypatch.setattr(heartbeats, "_installed", False)
    monkeypatch.setattr(engine, "_send_heartbeats", no_join_parameter)
    assert heartbeats.install() is False
    assert engine._send_heartbeats is no_join_parameter
