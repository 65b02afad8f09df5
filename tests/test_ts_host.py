"""The MCP tasks extension through the TypeScript SDK: a node host on ``@modelcontextprotocol/client``
2.x and ``@modelcontextprotocol/ext-tasks`` (its requester lifecycle) against the real stdio server.

``tests/ts_host/requester.mjs`` connects to the console script, negotiates 2026-07-28 (or a 2025
revision for ``legacy``), runs one scenario through ext-tasks and prints one JSON line of what it saw;
these tests assert on that line. The node packages come from ``tests/ts_host/package-lock.json``
(``./setup.sh`` installs them with ``npm ci``); the Python-side twin is tests/test_tasks_ext.py.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import CONSOLE, add_scripted_profile, server_env
from fixture_project import RIGHT_FIX

from tianshu_mcp.mcp_server.progress import PROGRESS_INTERVAL_ENV

HOST = Path(__file__).resolve().parent / "ts_host"
BRIEF = "Fix add() so that test_add_negative passes"
NODE_TIMEOUT_S = 400
pytestmark = pytest.mark.timeout(540)  # a session server start plus one node host run of up to NODE_TIMEOUT_S


def requester(home: Path, scenario: str, args: dict[str, Any], *extra: str,
              env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``requester.mjs --scenario scenario`` against ``home``'s server (``env``: more variables
    for it); its JSON line.

    Fails (never skips) when node or the host's node_modules are missing: CI runs ./setup.sh.
    """
    node = shutil.which("node")
    assert node, "node is not installed: run ./setup.sh (it installs nodejs and npm)"
    assert (HOST / "node_modules" / "@modelcontextprotocol" / "ext-tasks").is_dir(), (
        f"{HOST}/node_modules is missing: run ./setup.sh (npm ci in tests/ts_host)")
    cmd = [node, str(HOST / "requester.mjs"), "--server", CONSOLE, "--scenario", scenario,
           "--args", json.dumps(args), "--timeout-s", str(NODE_TIMEOUT_S - 60), *extra]
    try:
        proc = subprocess.run(cmd, env={**server_env(home), **(env or {})}, capture_output=True, text=True,
                              timeout=NODE_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr or ""
        raise AssertionError(f"node {scenario} timed out; stderr tail:\n{err[-6000:]}") from None
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0 and lines, (
        f"node {scenario} exited {proc.returncode}\nstdout:\n{proc.stdout[-4000:]}\nstderr tail:\n{proc.stderr[-6000:]}")
    seen = json.loads(lines[-1])
    seen["_stderr"] = proc.stderr[-6000:]
    return seen


def explain(seen: dict[str, Any]) -> str:
    """The observation without the stderr, then node's stderr tail: an assertion message."""
    shown = {k: v for k, v in seen.items() if k != "_stderr"}
    return f"{json.dumps(shown, indent=1)[:6000]}\nnode stderr tail:\n{seen.get('_stderr', '')}"


def test_run_task_is_followed_to_completion_by_the_ext_tasks_lifecycle(ts_daemon: dict[str, Any],
                                                                       calc_repo: Path) -> None:
    seen = requester(ts_daemon["home"], "run", {"projectPath": str(calc_repo), "agentId": "scripted", "task": BRIEF})
    why = explain(seen)
    assert seen["protocolVersion"] == "2026-07-28" and seen["era"] == "modern", why
    assert "io.modelcontextprotocol/tasks" in seen["serverExtensions"], why
    assert seen["capabilities"]["execution"] and seen["capabilities"]["cancellation"], why
    seed = seen["seed"]  # the wire answer of tools/call: a CreateTaskResult
    assert seed["resultType"] == "task" and seed["taskId"].startswith("tsk_"), why
    # durably created first; on a loaded machine the scripted agent may be done before the answer is sent
    assert seed["status"] in ("working", "completed"), why
    assert seed["ttlMs"] is None and seed["pollIntervalMs"] == 5000, why
    assert seen["kind"] == "task" and seen["taskId"] == seed["taskId"], why
    assert seen["statuses"][0] == seed["status"] and seen["statuses"][-1] == "outcome:completed", why
    assert "completed" in seen["statuses"] and seen["outcome"] == "completed", why
    assert {"method": "tasks/get", "resultType": "complete", "status": "completed"} in seen["wire"], why
    final = seen["final"]
    assert final["status"] == "succeeded" and final["isError"] is False and final["taskId"] == seed["taskId"], why
    assert "[PASS]" in final["text"], why
    assert (calc_repo / "calc.py").read_text() == RIGHT_FIX


def test_needs_user_is_answered_through_the_input_handler_and_tasks_update(ts_daemon: dict[str, Any],
                                                                            calc_repo: Path) -> None:
    home = ts_daemon["home"]
    add_scripted_profile(home, "ts-asker", "ask")
    seen = requester(home, "input", {"projectPath": str(calc_repo), "agentId": "ts-asker", "task": "Fix add",
                                     "autoFixRounds": 0}, "--answer", "yes, negative numbers too")
    why = explain(seen)
    assert "input_required" in seen["statuses"] and seen["outcome"] == "completed", why
    assert len(seen["inputRequests"]) == 1, why
    (asked,) = seen["inputRequests"]
    assert asked["kind"] == "elicitation" and asked["delivery"] == "task-update", why
    assert asked["inputId"] == "needs-user-1" and asked["taskId"] == seen["taskId"], why
    params = asked["params"]
    assert params["mode"] == "form" and "negative numbers" in params["message"], why
    assert params["requestedSchema"]["required"] == ["message"], why
    assert {"method": "tasks/update", "resultType": "complete"} in seen["wire"], why
    assert seen["final"]["status"] == "succeeded", why
    assert (calc_repo / "calc.py").read_text() == RIGHT_FIX


def test_tasks_cancel_of_a_running_task_ends_it_cancelled(ts_daemon: dict[str, Any], calc_repo: Path,
                                                          tmp_path: Path) -> None:
    home = ts_daemon["home"]
    pidfile = tmp_path / "ts-hang-pids.txt"
    add_scripted_profile(home, "ts-hang", "hang", {"SCRIPTED_PIDFILE": str(pidfile)})
    seen = requester(home, "cancel", {"projectPath": str(calc_repo), "agentId": "ts-hang", "task": "Hang"},
                     "--wait-file", str(pidfile))
    why = explain(seen)
    assert seen["beforeCancel"] == "working" and seen["localOutcome"] == "cancelled", why
    assert {"method": "tasks/cancel", "resultType": "complete"} in seen["wire"], why
    assert seen["outcome"] == "cancelled" and seen["lastTask"]["status"] == "cancelled", why
    assert "tasks/cancel" in seen["lastTask"]["statusMessage"], why
    assert seen["afterSecondCancel"] == "cancelled", why


def test_a_legacy_host_keeps_the_classic_contract(ts_daemon: dict[str, Any], calc_repo: Path) -> None:
    home = ts_daemon["home"]
    add_scripted_profile(home, "ts-noop", "noop")
    seen = requester(home, "legacy", {"projectPath": str(calc_repo), "agentId": "ts-noop", "task": "Look around",
                                      "autoVerify": False})
    why = explain(seen)
    assert seen["era"] == "legacy" and seen["protocolVersion"] < "2026-07-28", why
    assert "io.modelcontextprotocol/tasks" not in seen["serverExtensions"], why
    assert seen["capabilities"]["execution"] is False and seen["kind"] == "immediate", why
    assert seen.get("seed") is None and seen["wire"] == [], why  # no raw task traffic at all
    submitted = seen["submitted"]
    assert submitted["isError"] is False and submitted["taskId"].startswith("tsk_"), why
    assert submitted["status"] == "queued", why
    assert seen["tasksGet"] == -32601, why
    assert seen["final"]["status"] == "succeeded" and seen["final"]["taskId"] == submitted["taskId"], why


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_wait_task_reports_progress_to_onprogress(ts_daemon: dict[str, Any], calc_repo: Path, tmp_path: Path,
                                                  era: str) -> None:
    """RequestOptions.onprogress (the SDK sends a progressToken) gets wait_task's notifications: seconds
    waited, increasing, of the wait's limit, saying what the task does; a call without it gets none; an
    aborted call's stop. The agent is held until the host writes the gate, after three notifications,
    and the waits without a token last their whole ``--quiet-ms`` (eight intervals and more); the
    Python-SDK twin is tests/test_progress.py."""
    home = ts_daemon["home"]
    gate = tmp_path / "gate"
    add_scripted_profile(home, "ts-gated", "sleep", {"SCRIPTED_TRACE": str(tmp_path / "trace.txt"), "SCRIPTED_SLEEP": "0",
                                                     "SCRIPTED_GATE": str(gate), "SCRIPTED_WAIT_S": "600"})
    seen = requester(home, "progress", {"projectPath": str(calc_repo), "agentId": "ts-gated", "task": "Fix add",
                                        "autoVerify": False},
                     "--gate", str(gate), "--quiet-ms", "2500", "--era", era, env={PROGRESS_INTERVAL_ENV: "0.3"})
    why = explain(seen)
    assert (seen["protocolVersion"] >= "2026-07-28") == (era == "modern"), why
    assert seen["submitted"]["isError"] is False, why
    # no onprogress: no token, no notification, though the wait lasted its whole 2.5 s
    assert seen["quiet"]["structuredContent"]["waitSettled"] is False and seen["quietProgress"] == 0, why
    # aborted after two: the server's wait ends, its notifications stop (one on its way may still come)
    assert len(seen["abortedNotes"]) >= 2 and "gave up" in seen["aborted"], why
    assert seen["afterAbort"]["structuredContent"]["waitSettled"] is False and seen["lateProgress"] <= 1, why
    # onprogress until the end
    notes = seen["notes"]
    assert seen["final"]["status"] == "succeeded" and gate.exists() and len(notes) >= 3, why
    assert all(a["progress"] < b["progress"] for a, b in zip(notes, notes[1:])), why
    assert {n["total"] for n in notes} == {300}, why
    assert any(re.match(r"^running: round \d+: agent running$", n.get("message", "")) for n in notes), why
