"""Agents and checks run with the host's environment, not the background service's (docs/hosting.md
): a host's ``env`` block (API keys) and PATH reach the agent through the task's recorded
``client-env.json`` (mode 0600); our own and Prefect's variables never do."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import meta_of, mcp_client
from fixture_project import make_calc_repo

pytestmark = [pytest.mark.anyio]


async def test_the_hosts_env_and_path_reach_the_agent(ts_daemon: dict[str, Any], tmp_path: Path) -> None:
    home = ts_daemon["home"]
    bindir = tmp_path / "host-bin"
    bindir.mkdir()
    dump = tmp_path / "agent-env.json"
    agent = bindir / "host-only-agent"  # on the host's PATH only, not the service's
    agent.write_text(f"#!{sys.executable}\nimport json, os\n"
                     f"json.dump(dict(os.environ), open({str(dump)!r}, 'w'))\n")
    agent.chmod(0o755)
    profiles = json.loads((home / "agent-profiles.json").read_text())
    profiles["profiles"]["host-only"] = {"command": "host-only-agent", "argsTemplate": ["<prompt:arg>"],
                                         "promptMode": "arg", "cwd": "task", "timeoutMs": 60000}
    (home / "agent-profiles.json").write_text(json.dumps(profiles))
    repo = make_calc_repo(tmp_path / "calc")
    host_env = {"MY_API_KEY": "host-secret-123", "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    async with mcp_client(home, env=host_env) as client:
        sub = meta_of(await client.call_tool("run_task", {"projectPath": str(repo), "task": "noop",
                                                          "agentId": "host-only", "autoVerify": False}))
        done = meta_of(await client.call_tool("wait_task", {"taskId": sub["taskId"], "timeoutMs": 180000}))
    seen = json.loads(dump.read_text())
    assert seen.get("MY_API_KEY") == "host-secret-123"
    assert str(bindir) in seen["PATH"].split(os.pathsep)
    assert not [k for k in seen if k.startswith("PREFECT_") or k in ("TIANSHU_MCP_HOST_PID", "TIANSHU_MCP_ENGINE_SOCKET")]
    assert done["status"] == "succeeded", done
    recorded = home / "tasks" / sub["taskId"] / "client-env.json"
    assert stat.S_IMODE(recorded.stat().st_mode) == 0o600
