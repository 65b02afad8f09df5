"""A stdio server of the home's service imports Prefect's client only when a tool needs it
(mcp_server/runtime.ensure_prefect, design notes 79 and 84): one that lists its tools, answers
a lookup, refuses bad arguments, or runs and waits for a task never pays the import (0.55 s of
CPU, ≈35 MiB); a rework, which sets the flow run's state, imports it and answers as before."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from conftest import CONSOLE, mcp_client, meta_of

PREFECT_ONLY = ("orjson.", "_pendulum.")
"""Native libraries that Prefect's client loads and the server's own imports do not."""


def _server(home: Path) -> psutil.Process:
    """The stdio server this test process started for ``home``."""
    for child in psutil.Process().children(recursive=True):
        try:
            cmdline = child.cmdline()  # the stdio server has no arguments (`tianshu-mcp server` does)
            if cmdline and cmdline[-1] == CONSOLE and child.environ().get("TIANSHU_MCP_HOME") == str(home):
                return child
        except psutil.Error:
            continue
    raise AssertionError("no stdio server found")


def _connections(log: Path) -> int:
    """How many stdio servers of the home have logged their connection to its service."""
    try:
        return log.read_text(encoding="utf-8", errors="replace").count("Prefect ready (service)")
    except FileNotFoundError:
        return 0


def _prefect_loaded(proc: psutil.Process) -> bool:
    return any(os.path.basename(m.path).startswith(PREFECT_ONLY) for m in proc.memory_maps(grouped=True))


@pytest.mark.anyio
async def test_the_server_imports_prefect_only_when_a_tool_needs_its_client(ts_daemon: dict, tmp_path: Path) -> None:
    from fixture_project import make_calc_repo

    home = ts_daemon["home"]
    log = home / "logs" / "server.log"
    connected_before = _connections(log)
    async with mcp_client(home) as client:
        tools = await client.list_tools()
        assert {t.name for t in tools.tools} >= {"run_task", "query_task", "wait_task"}
        lookup = await client.call_tool("query_info", {"type": "report", "taskId": "tsk_nope"})
        refused = await client.call_tool("run_task", {"projectPath": str(tmp_path), "task": "   ",
                                                      "agentId": "scripted-noop"})
        assert lookup.is_error and refused.is_error
        server = _server(home)
        deadline = time.monotonic() + 120  # connected to the service meanwhile: Prefect still not imported
        while _connections(log) == connected_before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _connections(log) > connected_before, "the server never connected to the service"
        assert not _prefect_loaded(server)

        repo = make_calc_repo(tmp_path / "calc")
        sub = meta_of(await client.call_tool("run_task", {"projectPath": str(repo), "task": "noop",
                                                          "agentId": "scripted-noop", "autoVerify": False}))
        done: Any = meta_of(await client.call_tool("wait_task", {"taskId": sub["taskId"], "timeoutMs": 120000}))
        assert done["status"] == "succeeded", done
        # the service submitted it and the states were read with plain HTTP (design note 84)
        assert not _prefect_loaded(server)

        # a rework sets the flow run's state through Prefect's client: imported now, and it works
        again = await client.call_tool("manage_task", {"taskId": sub["taskId"], "action": "rework",
                                                       "feedback": "once more"})
        assert not again.is_error, again.content[0].text
        assert _prefect_loaded(server)
        done = meta_of(await client.call_tool("wait_task", {"taskId": sub["taskId"], "timeoutMs": 120000}))
        assert done["status"] == "succeeded", done
