"""Builds the fixture project used by the end-to-end tests and the demo: a real git repository
with a small pytest project whose ``add`` has a bug (``a - b``). The project and the scripted
agent live in the package (``tianshu_mcp.console.demo``: the demo runs from an installed wheel);
this module re-exports them for the tests and adds the fake ACP agent's profile."""

from __future__ import annotations

import sys
from pathlib import Path

from tianshu_mcp.console.demo.fixture import (  # noqa: F401 - re-exported for the tests
    CALC_BUGGY,
    RIGHT_FIX,
    SCRIPTED_AGENT,
    TESTS,
    WRONG_FIX,
    commit_new_repo,
    git,
    make_calc_repo,
    scripted_profile,
)

FAKE_ACP = Path(__file__).with_name("fake_acp_agent.py")


def acp_profile(tmp: Path, mode: str = "normal", acp: dict | None = None, **env: str) -> dict:
    """A profile running ``fake_acp_agent.py`` in ``mode`` over ACP, its trace
    (``<tmp>/trace.jsonl``) and session state (``<tmp>/state.json``) under ``tmp``; ``acp``:
    the profile's ``acp`` settings; ``env``: more variables for the agent."""
    raw: dict = {"displayName": "Fake ACP", "driver": "acp", "command": sys.executable, "argsTemplate": [str(FAKE_ACP)],
                 "env": {"FAKE_ACP_MODE": mode, "FAKE_ACP_TRACE": str(tmp / "trace.jsonl"),
                         "FAKE_ACP_STATE": str(tmp / "state.json"), **env}}
    if acp is not None:
        raw["acp"] = acp
    return raw
