"""The intake doorbell (core/doorbell.py; design note 72): a client that accepted a task wakes the
home's service, which creates the flow run, instead of creating it in a thread of its own; where
no service listens, the client's own submitter is woken as before."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import anyio
import pytest

from tianshu_mcp.core import submissions
from tianshu_mcp.core.doorbell import Doorbell, doorbell_path, ring
from tianshu_mcp.mcp_server.taskops import TaskService

pytestmark = pytest.mark.anyio


def _home(tmp_path: Path) -> Path:
    (tmp_path / "prefect").mkdir(parents=True)
    return tmp_path


async def test_a_ring_wakes_the_waiting_service_and_every_ring_meanwhile_is_taken_at_once(tmp_path: Path) -> None:
    home = _home(tmp_path)
    bell = Doorbell(home)
    try:
        assert doorbell_path(home).stat().st_mode & 0o777 == 0o600
        assert await bell.wait(0.05) is False  # nobody rang: the tick's timeout
        woken: list[bool] = []

        async def waiter() -> None:
            woken.append(await bell.wait(60))

        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            await anyio.sleep(0)
            assert ring(home) and ring(home) and ring(home)
        assert woken == [True]
        assert await bell.wait(0.05) is False  # the three rings were one wake
    finally:
        bell.close()
    assert not doorbell_path(home).exists()


async def test_no_listener_is_a_failed_ring_and_a_killed_services_socket_is_replaced(tmp_path: Path) -> None:
    home = _home(tmp_path)
    assert ring(home) is False  # no service: the caller wakes its own submitter
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    stale.bind(str(doorbell_path(home)))
    stale.close()  # a killed service leaves its socket file
    assert ring(home) is False
    bell = Doorbell(home)
    try:
        assert ring(home) and await bell.wait(5)
    finally:
        bell.close()


class _Runtime:
    """What ``TaskService.submit_now`` reads of the runtime: the home, its mode and ``kick``."""

    def __init__(self, home: Path) -> None:
        self.home, self.mode, self.kicks = home, "service", 0

    def kick(self) -> None:
        self.kicks += 1


async def test_an_accepted_task_rings_the_service_and_wakes_its_own_submitter_only_when_none_listens(tmp_path: Path) -> None:
    home = _home(tmp_path)
    runtime: Any = _Runtime(home)
    service = TaskService(runtime)
    service.store.create("tsk_20261204000000_d00be1", {"task": "x", "projectPath": str(tmp_path), "agentId": "codex"})
    submissions.enqueue(home, "tsk_20261204000000_d00be1", "run-task/run-task", {}, [], "k", "2026-12-04T00:00:00Z")
    await service.submit_now("tsk_20261204000000_d00be1")
    assert runtime.kicks == 1  # no service listens yet: this process submits
    bell = Doorbell(home)
    try:
        await service.submit_now("tsk_20261204000000_d00be1")
        assert runtime.kicks == 1 and await bell.wait(5)  # the service was rung, no thread here woken
    finally:
        bell.close()
