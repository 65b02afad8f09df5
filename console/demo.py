"""``tianshu-mcp demo``: the main job end to end, as a host would drive it.

Generates a real git repository (a pytest project with a bug), registers the scripted CLI agent
from ``tests/`` as agent ``scripted-demo``, starts ``tianshu-mcp`` over stdio with the MCP SDK
client (exactly what a host does), calls ``run_task`` with automatic rework, waits with
``wait_task`` and prints the final status, the report and the Prefect UI link. Needs a source
checkout (the scripted agent lives in ``tests/``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import anyio

REPO_ROOT = Path(__file__).resolve().parent.parent


def _load_fixture_module() -> Any:
    path = REPO_ROOT / "tests" / "fixture_project.py"
    if not path.is_file():
        raise SystemExit("tianshu-mcp demo needs a source checkout: tests/fixture_project.py not found "
                         f"next to {REPO_ROOT}")
    spec = importlib.util.spec_from_file_location("tianshu_demo_fixture", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def host_config_snippet() -> str:
    """The JSON a host (Tianshu, Claude Desktop, …) needs to register the stdio server."""
    command = shutil.which("tianshu-mcp") or str(Path(sys.executable).parent / "tianshu-mcp")
    return json.dumps({"mcpServers": {"tianshu-mcp": {"command": command, "args": [],
                                                      "env": {"TIANSHU_MCP_HOME": str(Path.home() / ".tianshu-mcp")}}}}, indent=2)


async def _run(home: Path, repo: Path, rounds: int) -> int:
    from mcp import Client, StdioServerParameters

    command = str(Path(sys.executable).parent / "tianshu-mcp")
    env = dict(os.environ, TIANSHU_MCP_HOME=str(home))
    t0 = time.monotonic()
    async with Client(StdioServerParameters(command=command, args=[], env=env), mode="legacy") as client:
        print(f"connected to tianshu-mcp over stdio in {time.monotonic() - t0:.1f} s (the home's Prefect service starts in the background)")
        sub = await client.call_tool("run_task", {
            "projectPath": str(repo), "agentId": "scripted-demo", "autoFixRounds": rounds,
            "task": "Fix the bug in add() in calc.py so that the tests in tests/test_calc.py pass.",
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
    print(f"\nfinal status : {final['status']}  (rounds used: {final.get('round')})")
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


def main(argv: list[str]) -> int:
    """Run the demo; exit code 0 when the task succeeded."""
    parser = argparse.ArgumentParser(prog="tianshu-mcp demo", description=__doc__.splitlines()[0])
    parser.add_argument("--home", default=str(Path.home() / ".tianshu-mcp-demo"),
                        help="data home for the demo (default ~/.tianshu-mcp-demo)")
    parser.add_argument("--rounds", type=int, default=2, help="automatic rework rounds (default 2)")
    args = parser.parse_args(argv)
    fixture = _load_fixture_module()
    home = Path(args.home).expanduser().resolve()
    home.mkdir(parents=True, exist_ok=True)
    # beside the data home, never inside it: the path gate refuses projects in the data home
    repo = fixture.make_calc_repo(home.parent / f"{home.name}-demo-projects" / f"calc-{time.strftime('%Y%m%d-%H%M%S')}")
    profiles_path = home / "agent-profiles.json"
    data = json.loads(profiles_path.read_text()) if profiles_path.exists() else {"profiles": {}}
    data.setdefault("profiles", {})["scripted-demo"] = fixture.scripted_profile(REPO_ROOT / "tests" / "scripted_agent.py")
    profiles_path.write_text(json.dumps(data, indent=2) + "\n")
    print(f"demo project : {repo} (git repo; calc.add has a bug, tests/test_calc.py shows it)")
    print(f"data home    : {home}")
    return anyio.run(_run, home, repo, args.rounds)
