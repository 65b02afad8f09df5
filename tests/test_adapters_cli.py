"""Generic CLI adapter against real scripted agents (docs/agents-tasks.md §1.9–§1.10, docs/architecture.md
§5)."""

from __future__ import annotations

import json
import os
import stat
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from tianshu_mcp.adapters.cli import (
    CONTEXT_HEADER,
    FEEDBACK_HEADER,
    AgentRunContext,
    build_invocation,
    build_prompt,
    run_cli_agent,
)
from tianshu_mcp.adapters.profiles import AgentProfile, ResolvedAgent, resolve_agent
from tianshu_mcp.core.procs import ProcRecord, tree_alive

# Records what it received: argv, cwd, stdin, a prompt file's text, an env marker.
RECORDER = """
import json, os, sys
args = sys.argv[1:]
stdin = sys.stdin.read()  # must hit EOF at once unless the profile says stdin
prompt_file = None
if "--prompt-file" in args:
    with open(args[args.index("--prompt-file") + 1], encoding="utf-8") as fh:
        prompt_file = fh.read()
record = {"argv": args, "cwd": os.getcwd(), "stdin": stdin, "prompt_file": prompt_file,
          "mark": os.environ.get("AGENT_MARK"), "has_path": "PATH" in os.environ}
with open(os.environ["AGENT_OUT"], "w", encoding="utf-8") as fh:
    json.dump(record, fh)
print("agent stdout line")
print("agent stderr line", file=sys.stderr)
sys.exit(int(os.environ.get("AGENT_EXIT", "0")))
"""

# Starts a grandchild that ignores SIGTERM, records its pid, then sleeps.
TREE = """
import subprocess, sys, time
setsid = sys.argv[2] == "setsid"
gc = subprocess.Popen([sys.executable, "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"],
    start_new_session=setsid)
with open(sys.argv[1], "w") as fh:
    fh.write(str(gc.pid))
time.sleep(120)
"""

SLEEPER = "import time\ntime.sleep(120)\n"


def write_script(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


def agent_for(profile: dict, agent_id: str = "t") -> ResolvedAgent:
    """A resolved agent for ``profile`` (command defaults to this Python)."""
    profile = {"command": sys.executable, **profile}
    needed = {"arg": "<prompt:arg>", "file": "<prompt:file>"}.get(profile.get("promptMode", "arg"))
    if needed and not any(needed in a for a in profile.get("argsTemplate", [])):
        profile["argsTemplate"] = [*profile.get("argsTemplate", []), needed]  # scripts ignore it
    p = AgentProfile.model_validate(profile)
    return ResolvedAgent(agent_id, agent_id, p, profile["command"], True, "test", "explicit")


@pytest.fixture
def env(tmp_path: Path) -> dict:
    project = tmp_path / "project"
    project.mkdir()
    task_dir = tmp_path / "home" / "tasks" / "tsk_1"
    out = tmp_path / "out.json"
    return {"project": project, "task_dir": task_dir, "out": out, "recorder": write_script(tmp_path, "recorder.py", RECORDER)}


def ctx_for(env: dict, **kw) -> AgentRunContext:
    base = dict(
        task_id="tsk_1",
        project_path=str(env["project"]),
        task_dir=env["task_dir"],
        round=0,
        task="Add a hello() function",
        context="Python 3.11 only",
        feedback="tests/test_hello.py::test_hello failed: NameError",
        timeout_ms=20_000,
    )
    base.update(kw)
    return AgentRunContext(**base)


def recorded(env: dict) -> dict:
    return json.loads(env["out"].read_text(encoding="utf-8"))


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


EXPECTED_PROMPT = (
    "Add a hello() function"
    + CONTEXT_HEADER
    + "Python 3.11 only"
    + FEEDBACK_HEADER
    + "tests/test_hello.py::test_hello failed: NameError"
)


def test_build_prompt_sections() -> None:
    ctx = AgentRunContext("t", "/p", Path("/td"), 0, "do it", None, None, 0)
    assert build_prompt(ctx, "arg") == "do it"
    ctx.context = "ctx"
    assert build_prompt(ctx, "stdin") == "do it\n\n## Additional context / constraints\nctx"
    ctx.context, ctx.feedback = None, "fb"
    assert build_prompt(ctx, "file") == (
        "do it\n\n## Feedback from the previous round's verification — fix exactly these problems, "
        "do not refactor broadly\nfb"
    )


def test_build_invocation_placeholders_timeout_and_files(env: dict) -> None:
    agent = agent_for(
        {"argsTemplate": ["x", "--p=<prompt:arg>", "<prompt:file>", "<prompt:stdin>"], "promptMode": "file", "timeoutMs": 777}
    )
    inv = build_invocation(ctx_for(env, round=3, timeout_ms=0), agent)
    pf = env["task_dir"] / "prompt-3.txt"
    assert inv.argv == [sys.executable, "x", "--p=", str(pf), ""]
    assert inv.stdin_text is None and inv.timeout_ms == 777
    assert inv.log_file == env["task_dir"] / "agent-3.log" and inv.prompt_file == pf
    assert pf.read_text(encoding="utf-8") == EXPECTED_PROMPT
    assert not list(env["task_dir"].glob("*.tmp"))
    # the task's timeout wins over the profile's when set
    assert build_invocation(ctx_for(env, timeout_ms=5000), agent).timeout_ms == 5000


def test_arg_mode_delivers_prompt_and_stdin_is_at_eof(env: dict) -> None:
    agent = agent_for({"argsTemplate": [str(env["recorder"]), "<prompt:arg>"], "env": {"AGENT_OUT": str(env["out"])}})
    t0 = time.monotonic()
    res = run_cli_agent(ctx_for(env), agent)
    assert time.monotonic() - t0 < 10  # reading stdin did not hang
    assert (res.ok, res.exit_code, res.timeout, res.killed, res.hard_failure, res.error_type) == (True, 0, False, False, False, None)
    rec = recorded(env)
    assert rec["argv"] == [EXPECTED_PROMPT]
    assert rec["stdin"] == ""
    # the prompt is recorded whatever the mode
    assert (env["task_dir"] / "prompt-0.txt").read_text(encoding="utf-8") == EXPECTED_PROMPT


def test_stdin_mode_delivers_prompt(env: dict) -> None:
    agent = agent_for(
        {"argsTemplate": [str(env["recorder"]), "<prompt:stdin>"], "promptMode": "stdin", "env": {"AGENT_OUT": str(env["out"])}}
    )
    res = run_cli_agent(ctx_for(env), agent)
    assert res.ok, res
    rec = recorded(env)
    assert rec["stdin"] == EXPECTED_PROMPT
    assert rec["argv"] == [""]
    assert "fix exactly these problems" in rec["stdin"]


def test_file_mode_delivers_prompt(env: dict) -> None:
    agent = agent_for(
        {
            "argsTemplate": [str(env["recorder"]), "--prompt-file", "<prompt:file>", "<prompt:arg>"],
            "promptMode": "file",
            "env": {"AGENT_OUT": str(env["out"])},
        }
    )
    res = run_cli_agent(ctx_for(env, round=1), agent)
    assert res.ok, res
    rec = recorded(env)
    assert rec["prompt_file"] == EXPECTED_PROMPT
    assert rec["argv"] == ["--prompt-file", str(env["task_dir"] / "prompt-1.txt"), ""]
    assert rec["stdin"] == ""


def test_output_goes_to_round_log_with_header(env: dict) -> None:
    agent = agent_for({"argsTemplate": [str(env["recorder"]), "<prompt:arg>"], "env": {"AGENT_OUT": str(env["out"])}})
    res = run_cli_agent(ctx_for(env, round=2, feedback=None, context=None), agent)
    assert res.log_file == env["task_dir"] / "agent-2.log"
    text = res.log_file.read_text(encoding="utf-8")
    assert text.startswith(
        f"\n===== spawn: {sys.executable} {env['recorder']} Add a hello() function (cwd={env['project']}) @ "
    )
    header = text.splitlines()[1]
    assert header.endswith(" =====") and "Z =====" in header
    assert "agent stdout line" in text and "agent stderr line" in text
    assert "[exit] code=0" in text
    # a second run of the same round appends
    run_cli_agent(ctx_for(env, round=2), agent)
    assert res.log_file.read_text(encoding="utf-8").count("===== spawn: ") == 2


def test_profile_env_is_overlaid_on_server_env(env: dict) -> None:
    agent = agent_for(
        {"argsTemplate": [str(env["recorder"])], "env": {"AGENT_OUT": str(env["out"]), "AGENT_MARK": "from-profile", "AGENT_EXIT": "3"}}
    )
    res = run_cli_agent(ctx_for(env), agent)
    rec = recorded(env)
    assert rec["mark"] == "from-profile" and rec["has_path"] is True
    # a failing agent is a normal (soft) failure, not a hard one
    assert (res.ok, res.exit_code, res.hard_failure, res.error) == (False, 3, False, None)


@pytest.mark.parametrize("cwd_mode", ["task", "home"])
def test_cwd_task_vs_home(env: dict, cwd_mode: str) -> None:
    agent = agent_for({"argsTemplate": [str(env["recorder"])], "cwd": cwd_mode, "env": {"AGENT_OUT": str(env["out"])}})
    assert run_cli_agent(ctx_for(env), agent).ok
    expected = env["project"] if cwd_mode == "task" else Path.home()
    assert os.path.realpath(recorded(env)["cwd"]) == os.path.realpath(expected)


def test_timeout_kills_whole_tree_including_term_trapping_grandchild(env: dict, tmp_path: Path) -> None:
    script = write_script(tmp_path, "tree.py", TREE)
    pid_file = tmp_path / "gc.pid"
    agent = agent_for({"argsTemplate": [str(script), str(pid_file), "group"]})
    records: list[ProcRecord] = []
    t0 = time.monotonic()
    res = run_cli_agent(ctx_for(env, timeout_ms=1500), agent, on_start=records.append)
    elapsed = time.monotonic() - t0
    gc_pid = int(pid_file.read_text())
    try:
        assert (res.ok, res.timeout, res.killed, res.exit_code, res.hard_failure) == (False, True, False, None, False)
        assert 1.4 < elapsed < 8
        assert len(records) == 1 and records[0].pgid == records[0].pid
        assert gone(records[0].pid) and gone(gc_pid)
        assert not tree_alive(records[0])
        assert "(timeout)" in res.log_file.read_text(encoding="utf-8")
    finally:
        if not gone(gc_pid):
            psutil.Process(gc_pid).kill()


# pins a bug fix: kill_tree used to forget a setsid'd grandchild once its parent had died
def test_timeout_kills_setsid_term_trapping_grandchild(env: dict, tmp_path: Path) -> None:
    script = write_script(tmp_path, "tree.py", TREE)
    pid_file = tmp_path / "gc.pid"
    agent = agent_for({"argsTemplate": [str(script), str(pid_file), "setsid"]})
    res = run_cli_agent(ctx_for(env, timeout_ms=1000), agent)
    gc_pid = int(pid_file.read_text())
    try:
        assert res.timeout
        assert gone(gc_pid)
    finally:
        if not gone(gc_pid):
            psutil.Process(gc_pid).kill()


def test_should_stop_kills_promptly(env: dict, tmp_path: Path) -> None:
    agent = agent_for({"argsTemplate": [str(write_script(tmp_path, "sleep.py", SLEEPER))]})
    records: list[ProcRecord] = []
    stop_at = time.monotonic() + 0.5
    res = run_cli_agent(ctx_for(env), agent, should_stop=lambda: time.monotonic() >= stop_at, on_start=records.append)
    late = time.monotonic() - stop_at
    assert (res.ok, res.killed, res.timeout, res.exit_code, res.hard_failure) == (False, True, False, None, False)
    assert late < 2.0
    assert gone(records[0].pid)
    assert "(killed)" in res.log_file.read_text(encoding="utf-8")


def test_should_stop_before_spawn_starts_nothing(env: dict, tmp_path: Path) -> None:
    agent = agent_for({"argsTemplate": [str(write_script(tmp_path, "sleep.py", SLEEPER))]})
    started: list[ProcRecord] = []
    res = run_cli_agent(ctx_for(env), agent, should_stop=lambda: True, on_start=started.append)
    assert (res.ok, res.killed, res.exit_code, res.hard_failure) == (False, True, None, False)
    assert started == []


def test_failing_callbacks_do_not_leak_the_process(env: dict, tmp_path: Path) -> None:
    agent = agent_for({"argsTemplate": [str(write_script(tmp_path, "quick.py", "print('hi')\n"))]})

    def boom(*_a: object) -> bool:
        raise RuntimeError("probe broke")

    res = run_cli_agent(ctx_for(env), agent, should_stop=boom, on_start=boom)
    assert res.ok and res.exit_code == 0


def test_missing_executable_is_a_spawn_hard_failure(env: dict, tmp_path: Path) -> None:
    exe = tmp_path / "vanishing-agent"
    exe.write_text(f"#!{sys.executable}\nprint('hi')\n", encoding="utf-8")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "agent-profiles.json").write_text(json.dumps({"profiles": {"v": {"command": str(exe), "argsTemplate": ["<prompt:arg>"]}}}), encoding="utf-8")
    agent = resolve_agent("v", home)
    assert agent.ok and agent.source == "explicit"
    exe.unlink()  # gone between resolve and run
    res = run_cli_agent(ctx_for(env), agent)
    assert (res.ok, res.exit_code, res.hard_failure, res.error_type) == (False, None, True, "spawn")
    assert res.error
    assert "[spawn-error]" in res.log_file.read_text(encoding="utf-8")


def test_unresolved_agent_is_a_hard_failure_without_raising(env: dict, tmp_path: Path) -> None:
    agent = resolve_agent("not-configured", tmp_path)
    res = run_cli_agent(ctx_for(env), agent)
    assert (res.ok, res.hard_failure, res.error_type) == (False, True, "spawn")
    assert "not configured" in (res.error or "")
    assert res.to_json()["hardFailure"] is True and res.to_json()["logFile"] == str(res.log_file)


def test_a_prompt_too_long_for_argv_is_a_clear_spawn_failure(env: dict, tmp_path: Path) -> None:
    ctx = AgentRunContext(task_id="tsk_20260101000000_abcdef", project_path=str(tmp_path), task_dir=tmp_path / "t",
                          round=0, task="x" * 140_000)
    result = run_cli_agent(ctx, agent_for({"argsTemplate": ["-c", "pass", "<prompt:arg>"]}))
    assert result.hard_failure and result.error_type == "spawn"
    assert "too long for one command-line argument" in (result.error or "")


def test_a_runaway_agent_is_stopped_at_its_output_limit(env: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tianshu_mcp.adapters import cli

    monkeypatch.setattr(cli, "AGENT_MAX_LOG_BYTES", 4 << 20)
    ctx = AgentRunContext(task_id="tsk_20260101000000_abcdef", project_path=str(tmp_path), task_dir=tmp_path / "t",
                          round=0, task="flood", timeout_ms=60_000)
    code = "import sys\nwhile True:\n    sys.stdout.write('y' * 65536)\n"
    result = run_cli_agent(ctx, agent_for({"argsTemplate": ["-c", code, "<prompt:arg>"]}))
    assert not result.ok and not result.hard_failure and result.exit_code is None
    assert "output and was stopped" in (result.error or "")


def test_the_agent_gets_pwd_of_its_own_directory_not_the_hosts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """opencode run takes its project from $PWD (docs/real-agents.md): a host started elsewhere must not leak
    its PWD."""
    from tianshu_mcp.adapters.cli import build_invocation
    from tianshu_mcp.adapters.round import AgentRunContext

    project = tmp_path / "proj"
    project.mkdir()
    monkeypatch.setenv("PWD", str(tmp_path / "elsewhere"))
    profile = AgentProfile.model_validate({"command": sys.executable, "argsTemplate": ["run", "--dir", "<cwd>"],
                                           "promptMode": "stdin"})
    agent = ResolvedAgent("oc", "oc", profile, sys.executable, True, "ok")
    ctx = AgentRunContext("tsk_pwd", str(project), tmp_path / "task", 0, "brief")
    inv = build_invocation(ctx, agent)
    assert inv.env["PWD"] == inv.cwd == str(project)
    assert inv.argv[1:] == ["run", "--dir", str(project)]


@pytest.mark.parametrize("euid,expected", [(0, "1"), (1000, None)])
def test_root_env_applies_only_as_root(euid: int, expected: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """claude-agent-acp refuses a session to root unless IS_SANDBOX=1 (docs/real-agents.md): ``rootEnv``."""
    from tianshu_mcp.adapters.round import agent_env

    monkeypatch.delenv("IS_SANDBOX", raising=False)
    monkeypatch.setattr(os, "geteuid", lambda: euid)
    env = agent_env({"A": "1"}, {"IS_SANDBOX": "1"}, "/work")
    assert env.get("IS_SANDBOX") == expected and env["A"] == "1" and env["PWD"] == "/work"
