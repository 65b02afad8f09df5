"""The host side of ``tianshu-mcp demo``: the MCP SDK's stdio client drives ``tianshu-mcp`` exactly
as a host does (``run_task`` with automatic rework, ``wait_task``, ``query_info``) and prints the
outcome."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

BRIEF = "Fix the bug in add() in calc.py so that the tests in tests/test_calc.py pass."
"""The brief the demo gives (tests/test_integrity_e2e.py checks the same one)."""


def host_config_snippet() -> str:
    """The JSON a host (Tianshu, Claude Desktop, …) needs to register the stdio server."""
    command = shutil.which("tianshu-mcp") or str(Path(sys.executable).parent / "tianshu-mcp")
    return json.dumps({"mcpServers": {"tianshu-mcp": {"command": command, "args": [],
                                                      "env": {"TIANSHU_MCP_HOME": str(Path.home() / ".tianshu-mcp")}}}}, indent=2)


async def run(home: Path, repo: Path, rounds: int) -> int:
    """Drive one task on ``repo`` through the stdio server of ``home`` with ``rounds`` rework rounds;
    returns the exit code (0 when the task succeeded, 1 otherwise)."""
    from mcp import Client, StdioServerParameters

    command = str(Path(sys.executable).parent / "tianshu-mcp")
    # the demo never installs the agent skill (it says so before it starts: places.py)
    env = dict(os.environ, TIANSHU_MCP_HOME=str(home), TIANSHU_MCP_NO_SKILL_INSTALL="1")
    t0 = time.monotonic()
    async with Client(StdioServerParameters(command=command, args=[], env=env), mode="legacy") as client:
        print(f"connected to tianshu-mcp over stdio in {time.monotonic() - t0:.1f} s (the home's Prefect service starts in the background)")
        sub = await client.call_tool("run_task", {
            "projectPath": str(repo), "agentId": "scripted-demo", "autoFixRounds": rounds,
            "task": BRIEF,
        })
        text = sub.content[0].text
        if sub.is_error or not (sub.structured_content or {}).get("taskId"):
            print(text)
            return 1
        meta = sub.structured_content
        print(text.split("\n---tianshu-mcp-meta---")[0])
        print("\nwaiting for the task (wait_task)…")
        while True:
            done = await client.call_tool("wait_task", {"taskId": meta["taskId"], "timeoutMs": 60000})
            final = done.structured_content or {}
            if final.get("waitSettled"):
                break
            print(f"  still {final.get('status')} …")
        report = await client.call_tool("query_info", {"type": "report", "taskId": meta["taskId"]})
    print(f"\nfinal status : {final['status']}  (rounds used: {final.get('roundsUsed')})")
    print(f"message      : {final.get('message')}")
    files = final.get("reportFiles") or {}
    print(f"report       : {files.get('md')}")
    print(f"report json  : {files.get('json')}")
    print(f"task dir     : {home / 'tasks' / meta['taskId']}")
    print(f"Prefect UI   : {final.get('flowRunUrl')}")
    print(f"               (log in with the whole line of {home / 'prefect' / 'credentials'}; the home's\n"
          f"                service keeps running and exits by itself after 10 idle minutes, or:\n"
          f"                TIANSHU_MCP_HOME={home} {Path(sys.executable).parent / 'tianshu-mcp'} service stop)")
    print("\n--- last report (query_info type=report) ---")
    print(report.content[0].text)
    print("--- register tianshu-mcp in an MCP host (stdio) ---")
    print(host_config_snippet())
    return 0 if final.get("status") == "succeeded" else 1
