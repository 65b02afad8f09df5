"""The early baseline run is asked for beside the flow (``tasks/verify.start_baseline_run``,
design note 80): the agent's start does not wait for the fork, and a stop that comes while the
fork is still being asked for still reaches the child.

The fork itself (``acceptance/baseline_warm.start_in_child``) is the real one in
``tests/test_integrity_warm.py``; here it is replaced by a stand-in held at a gate, because the
property is the order between this process's threads.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

from tianshu_mcp.tasks import verify


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """``start_in_child`` held until ``gate`` is set; it records the stop event it was given and
    returns a watcher thread that ends once that event is set, as the real watcher does."""
    state = SimpleNamespace(gate=threading.Event(), entered=threading.Event(), calls=[], watchers=[])

    def start_in_child(spec: Any, stop: threading.Event) -> threading.Thread:
        state.entered.set()
        assert state.gate.wait(30)
        state.calls.append((spec, stop))
        watcher = threading.Thread(target=stop.wait, args=(30,), daemon=True)
        watcher.start()
        state.watchers.append(watcher)
        return watcher

    monkeypatch.setattr(verify, "start_in_child", start_in_child)
    monkeypatch.setattr(verify, "store", lambda: SimpleNamespace(dir=lambda task_id: f"/nowhere/{task_id}"))
    monkeypatch.setattr(verify, "load_task", lambda task_id: SimpleNamespace())
    monkeypatch.setattr(verify, "_request", lambda *a, **k: "request")
    monkeypatch.setattr(verify.WarmSpec, "of", staticmethod(lambda req: f"spec of {req}"))
    return state


def test_the_flow_goes_on_while_the_fork_is_asked_for_and_a_stop_then_reaches_it(held: SimpleNamespace) -> None:
    verify.start_baseline_run("tsk_a", baseline=None)  # type: ignore[arg-type]
    assert held.entered.wait(30)  # the fork is being asked for, and start_baseline_run has returned
    verify.start_baseline_run("tsk_a", baseline=None)  # type: ignore[arg-type]  # one per task
    stopper = threading.Thread(target=verify.stop_baseline_run, args=("tsk_a", 30))
    stopper.start()
    held.gate.set()
    stopper.join(30)
    assert not stopper.is_alive()
    ((spec, stop),) = held.calls
    assert spec == "spec of request" and stop.is_set()
    assert not held.watchers[0].is_alive()  # the stop waited for the watcher, which saw the stop


def test_a_stop_before_the_starter_runs_forks_nothing(held: SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[threading.Thread] = []
    real_thread = threading.Thread

    class Unstarted(real_thread):  # the starter is made but not yet scheduled when the stop comes
        def start(self) -> None:
            started.append(self)

    monkeypatch.setattr(verify.threading, "Thread", Unstarted)
    verify.start_baseline_run("tsk_b", baseline=None)  # type: ignore[arg-type]
    verify.stop_baseline_run("tsk_b", timeout_s=0)
    monkeypatch.setattr(verify.threading, "Thread", real_thread)
    (starter,) = started
    real_thread.start(starter)
    starter.join(30)
    held.gate.set()
    assert held.calls == [] and not held.entered.is_set()
