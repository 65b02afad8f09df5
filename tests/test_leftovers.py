"""Processes that escape the tree — a new session and an empty environment, so neither the
process group, the recorded tree nor the inherited tag finds them — die with the round that
started them (docs/robustness.md §10, breaker findings): an agent's leftover outlived its task and let the
next task start beside it; a check's leftover wrote a file after the checks were judged, and the
next round counted it as the agent's work."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from conftest import add_scripted_profile, run_to_stop
from fixture_project import make_calc_repo

pytestmark = [pytest.mark.anyio]


def alive_with(argv_tail: list[str]) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            if proc.info["cmdline"][-len(argv_tail):] == argv_tail and proc.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (TypeError, psutil.Error):
            continue
    return found


async def test_an_agents_escaped_process_dies_with_its_round(ts_daemon: dict[str, Any], tmp_path: Path) -> None:
    home = ts_daemon["home"]
    add_scripted_profile(home, "leaky", "leak", {"SCRIPTED_SLEEP": "297.25"})
    repo = make_calc_repo(tmp_path / "calc")
    try:
        _sub, done = await run_to_stop(home, {"projectPath": str(repo), "task": "Fix add", "agentId": "leaky"})
        assert done["status"] in ("failed", "needs_attention", "succeeded"), done
        assert not alive_with(["sleep", "297.25"]), "the agent's escaped sleep outlived its round"
    finally:
        for proc in alive_with(["sleep", "297.25"]):
            proc.kill()


async def test_a_checks_late_writer_neither_survives_nor_counts(ts_daemon: dict[str, Any], tmp_path: Path) -> None:
    home = ts_daemon["home"]
    add_scripted_profile(home, "noop-agent", "noop")
    writer = ["/bin/sh", "-c", "sleep 2.75; echo x > late.txt"]
    spawn = ("import subprocess; subprocess.Popen(['/usr/bin/env', '-i', *%r], start_new_session=True, "
             "stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)" % (writer,))
    repo = make_calc_repo(tmp_path / "calc", checks=[{"name": "bg", "cmd": [sys.executable, "-c", spawn]}])
    try:
        sub, done = await run_to_stop(home, {"projectPath": str(repo), "task": "Fix add", "agentId": "noop-agent",
                                             "autoFixRounds": 1})
        assert done["status"] == "needs_attention", done
        for rnd in (0, 1):
            report = json.loads((home / "tasks" / sub["taskId"] / f"report-{rnd}.json").read_text())
            assert "no-changes" in [c["name"] for c in report["checks"] if not c["passed"]], report["message"]
        assert not alive_with(writer[-1:]), "the check's late writer outlived the checks"
        assert not (repo / "late.txt").exists()
    finally:
        for proc in alive_with(writer[-1:]):
            proc.kill()
