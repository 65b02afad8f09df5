"""The ACP driver against a faithful fake ACP agent (``fake_acp_agent.py``, written with the same
``agent-client-protocol`` package): sessions, permissions, cancel, timeouts and setup failures."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import pid_running
from fixture_project import FAKE_ACP, RIGHT_FIX, WRONG_FIX, acp_profile, make_calc_repo
from tianshu_mcp.adapters.acp.driver import end_acp_session, run_acp_round
from tianshu_mcp.adapters.profiles import AgentProfile, ResolvedAgent, resolve_profile
from tianshu_mcp.adapters.round import AgentRunContext, RoundHooks
from tianshu_mcp.core.procs import ProcRecord, tree_alive

def trace(tmp: Path) -> list[dict[str, Any]]:
    path = tmp / "trace.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


class Round:
    """Runs rounds of one task against one profile, collecting events and process records."""

    def __init__(self, tmp: Path, profile: dict[str, Any], task_id: str = "tsk_acp") -> None:
        self.tmp, self.task_id = tmp, task_id
        self.repo = make_calc_repo(tmp / "repo")
        self.task_dir = tmp / "task"
        self.task_dir.mkdir()
        self.agent: ResolvedAgent = resolve_profile("fake-acp", AgentProfile.model_validate(profile))
        assert self.agent.ok, self.agent.message
        self.events: list[tuple[str, str, dict[str, Any]]] = []
        self.records: list[ProcRecord] = []
        self.stop = False

    def run(self, rnd: int, feedback: str | None = None, answer: str | None = None, timeout_ms: int = 0) -> Any:
        ctx = AgentRunContext(self.task_id, str(self.repo), self.task_dir, rnd, "Fix add() in calc.py",
                              feedback=feedback, timeout_ms=timeout_ms, answer=answer)
        hooks = RoundHooks(should_stop=lambda: self.stop, on_start=self.records.append,
                           on_event=lambda n, d, data: self.events.append((n, d, data)))
        return run_acp_round(ctx, self.agent, hooks)

    def names(self) -> list[str]:
        return [e[0] for e in self.events]

    def log(self, rnd: int) -> str:
        return (self.task_dir / f"agent-{rnd}.log").read_text()


@pytest.fixture
def rounds(tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    made: list[Round] = []

    def make(mode: str = "normal", acp: dict[str, Any] | None = None, **env: str) -> Round:
        r = Round(tmp_path, acp_profile(tmp_path, mode, acp, **env))
        made.append(r)
        return r

    yield make
    for r in made:
        end_acp_session(r.task_id)
        for rec in r.records:
            assert not tree_alive(rec), "the agent outlived its task"


def wait_for(cond: Any, what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_rounds_share_one_session_and_the_rework_prompt_is_the_feedback(rounds: Any) -> None:
    r = rounds()
    first = r.run(0)
    assert (first.ok, first.exit_code, first.hard_failure) == (True, 0, False)
    assert (r.repo / "calc.py").read_text() == WRONG_FIX
    assert "file_modification_started" in r.names() and "progress" in r.names()
    log0 = r.log(0)
    assert "===== spawn:" in log0 and "[agent] Reading the project" in log0
    assert "[permission] Edit calc.py" in log0 and "allowed" in log0 and "[exit] code=0" in log0
    second = r.run(1, feedback="tests/test_calc.py::test_add_negative failed")
    assert second.ok and (r.repo / "calc.py").read_text() == RIGHT_FIX
    rows = trace(r.tmp)
    prompts = [row for row in rows if row["event"] == "prompt"]
    assert [row["event"] for row in rows].count("new") == 1 and len({row["pid"] for row in rows}) == 1
    assert [p["n"] for p in prompts] == [1, 2] and prompts[0]["session"] == prompts[1]["session"]
    assert prompts[1]["text"].startswith("## Feedback") and "Fix add()" not in prompts[1]["text"]
    assert len(r.records) == 1 and tree_alive(r.records[0])  # kept between rounds
    end_acp_session(r.task_id)
    assert not tree_alive(r.records[0])


def test_a_write_outside_the_project_is_denied(rounds: Any, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    r = rounds("outside", FAKE_ACP_OUTSIDE=str(outside))
    res = r.run(0)
    assert res.ok and not outside.exists()
    assert "→ denied" in r.log(0)
    assert [row["outcome"] for row in trace(r.tmp) if row["event"] == "permission"] == ["reject"]


def test_a_permission_left_to_the_user_asks_then_the_answer_is_applied_in_a_loaded_session(rounds: Any) -> None:
    r = rounds(acp={"permissions": {"insideProject": "ask"}})
    asked = r.run(0)
    assert asked.question_kind == "user_confirmation" and "Edit calc.py" in (asked.question or "")
    assert not asked.ok and not asked.hard_failure and (r.repo / "calc.py").read_text() != WRONG_FIX
    assert "confirmation_dialog_detected" in r.names()
    end_acp_session(r.task_id)  # the flow run suspends: its process, and the agent, end
    again = r.run(0, feedback="## You asked the user\n…\n\n## The user's answer\nyes", answer="yes")
    assert again.ok and (r.repo / "calc.py").read_text() == WRONG_FIX
    events = [row["event"] for row in trace(r.tmp)]
    assert events.count("new") == 1 and "load" in events  # the same session, loaded in a new process
    assert "(the user's answer)" in r.log(0)


def test_a_no_answer_denies_the_request(rounds: Any) -> None:
    r = rounds(acp={"permissions": {"insideProject": "ask"}})
    assert r.run(0).question_kind == "user_confirmation"
    end_acp_session(r.task_id)
    res = r.run(0, answer="no, leave calc.py alone")
    assert res.ok and "→ denied (the user's answer)" in r.log(0)
    assert (r.repo / "calc.py").read_text() not in (WRONG_FIX, RIGHT_FIX)


def test_cancel_sends_session_cancel_then_kills_the_tree(rounds: Any) -> None:
    r = rounds("hang")
    import threading

    out: list[Any] = []
    th = threading.Thread(target=lambda: out.append(r.run(0)))
    th.start()
    wait_for(lambda: any(row["event"] == "prompt" for row in trace(r.tmp)), "the prompt")
    r.stop = True
    th.join(timeout=60)
    assert out and out[0].killed and not out[0].ok
    assert "cancel" in [row["event"] for row in trace(r.tmp)]
    assert not tree_alive(r.records[0])


def test_an_agent_ignoring_cancel_is_killed_at_the_timeout(rounds: Any) -> None:
    r = rounds("ignore-cancel", acp={"cancelGraceMs": 200})
    res = r.run(0, timeout_ms=4000)
    assert res.timeout and not res.ok and not res.hard_failure
    assert not tree_alive(r.records[0])


@pytest.mark.parametrize("mode, code", [("refuse", 1), ("crash", 3)])
def test_refusal_and_a_crash_are_agent_failures_not_hard_failures(rounds: Any, mode: str, code: int) -> None:
    r = rounds(mode)
    res = r.run(0)
    assert (res.ok, res.exit_code, res.hard_failure) == (False, code, False)
    if mode == "refuse":  # the log's last words say why (the task's message quotes them)
        assert "stop reason 'refusal' (it refused the task)" in r.log(0).splitlines()[-2]


@pytest.mark.parametrize("mode, stop", [("max-tokens", "max_tokens"), ("max-turn-requests", "max_turn_requests")])
def test_a_turn_cut_short_is_verified_as_it_is_and_the_rework_continues_the_session(rounds: Any, mode: str,
                                                                                    stop: str) -> None:
    # adapters/acp/driver.py: max_tokens / max_turn_requests → exit code 0 with a log note; the work done
    # so far goes to verification (not an agent failure, not a hard failure)
    r = rounds(mode)
    res = r.run(0)
    assert (res.ok, res.exit_code, res.hard_failure, res.timeout, res.killed) == (True, 0, False, False, False), res
    assert res.question_kind is None and res.error is None
    assert (r.repo / "calc.py").read_text() == WRONG_FIX  # the edit before the cut stands
    log0 = r.log(0)
    assert f"[acp] the turn ended on {stop}; its work is verified as it is" in log0 and "[exit] code=0" in log0
    second = r.run(1, feedback="tests/test_calc.py::test_add_negative failed")
    assert second.ok and (r.repo / "calc.py").read_text() == RIGHT_FIX
    prompts = [row for row in trace(r.tmp) if row["event"] == "prompt"]
    assert [p["n"] for p in prompts] == [1, 2] and prompts[0]["session"] == prompts[1]["session"]
    assert [row["event"] for row in trace(r.tmp)].count("new") == 1


@pytest.mark.parametrize("policy", ["allow", "deny", "ask"])
def test_a_request_without_a_location_follows_the_no_location_policy(rounds: Any, policy: str) -> None:
    # the execute mode asks to run a command: a tool call with no location → acp.permissions.noLocation
    # (adapters/acp/policy.py decide); insideProject/outsideProject are set to the opposite so only
    # noLocation can explain the outcome
    other = "deny" if policy != "deny" else "allow"
    r = rounds("execute", acp={"permissions": {"noLocation": policy, "insideProject": other, "outsideProject": other}})
    res = r.run(0)
    log0 = r.log(0)
    perms = [row["outcome"] for row in trace(r.tmp) if row["event"] == "permission"]
    assert (r.repo / "calc.py").read_text() not in (WRONG_FIX, RIGHT_FIX)  # a command edits nothing
    if policy == "allow":
        assert (res.ok, res.exit_code, res.question_kind) == (True, 0, None), res
        assert "[permission] Run pytest (no file) → allowed" in log0 and "[agent] Done" in log0
        assert perms == ["allow"]
    elif policy == "deny":
        assert (res.ok, res.exit_code, res.question_kind) == (True, 0, None), res
        assert "[permission] Run pytest (no file) → denied" in log0 and "Permission denied: nothing changed." in log0
        assert perms == ["reject"]
    else:
        assert (res.ok, res.hard_failure, res.question_kind) == (False, False, "user_confirmation"), res
        assert "Run pytest" in (res.question or "") and "[permission] Run pytest (no file) → left to the user" in log0
        asked = [e for e in r.events if e[0] == "confirmation_dialog_detected"]
        assert len(asked) == 1 and asked[0][2]["paths"] == [] and asked[0][2]["kind"] == "execute"
        assert perms == ["cancelled"]
        end_acp_session(r.task_id)  # the flow run suspends; the answer applies to the same request
        again = r.run(0, answer="yes")
        assert again.ok and "→ allowed (the user's answer)" in r.log(0)
        assert [row["outcome"] for row in trace(r.tmp) if row["event"] == "permission"] == ["cancelled", "allow"]


def test_resuming_an_agent_without_load_session_opens_a_new_session_with_the_whole_brief(rounds: Any) -> None:
    # adapters/acp/driver.py open(): a saved session but no loadSession capability → session/new; the round's
    # prompt is then the whole brief (+ the feedback), not the feedback alone
    r = rounds("no-load", acp={"permissions": {"insideProject": "ask"}})
    assert r.run(0).question_kind == "user_confirmation"
    first = json.loads((r.task_dir / "acp-session.json").read_text())["sessionId"]
    end_acp_session(r.task_id)  # the flow run suspends: the agent ends with it
    feedback = "## You asked the user\nEdit calc.py?\n\n## The user's answer\nyes"
    res = r.run(0, feedback=feedback, answer="yes")
    assert res.ok and (r.repo / "calc.py").read_text() == WRONG_FIX, (res, r.log(0))
    rows = trace(r.tmp)
    assert [row["event"] for row in rows].count("new") == 2 and "load" not in [row["event"] for row in rows]
    prompts = [row for row in rows if row["event"] == "prompt"]
    assert len(prompts) == 2 and prompts[0]["session"] != prompts[1]["session"]
    assert prompts[1]["n"] == 1 and "Fix add() in calc.py" in prompts[1]["text"]  # the brief again
    assert "The user's answer" in prompts[1]["text"]
    assert json.loads((r.task_dir / "acp-session.json").read_text())["sessionId"] == prompts[1]["session"] != first
    assert len({row["pid"] for row in rows}) == 2


def test_an_initialize_error_is_setup_failed(rounds: Any) -> None:
    res = rounds("init-fail").run(0)
    assert (res.hard_failure, res.error_type) == (True, "setup_failed")
    assert "answered initialize with an error" in (res.error or "") and "the model backend is down" in (res.error or "")


def test_an_agent_that_never_answers_initialize_is_setup_failed(rounds: Any) -> None:
    r = rounds("silent-init", acp={"initTimeoutMs": 1500})
    res = r.run(0)
    assert (res.hard_failure, res.error_type) == (True, "setup_failed") and "1500 ms" in (res.error or "")
    assert not tree_alive(r.records[0])


def test_auth_required_asks_the_user_to_log_in(rounds: Any) -> None:
    r = rounds("auth")
    res = r.run(0)
    assert res.question_kind == "login_required" and "log in" in (res.question or "").lower()
    assert "run `fake-agent login` first" in (res.question or "")  # the agent's own words
    assert "awaiting_user_authorization" in r.names() and not res.hard_failure


def test_a_missing_executable_is_a_spawn_failure(tmp_path: Path) -> None:
    raw = acp_profile(tmp_path)
    raw["command"] = str(tmp_path / "no-such-agent")
    agent = resolve_profile("x", AgentProfile.model_validate(raw))
    assert not agent.ok and "does not exist" in agent.message
    ctx = AgentRunContext("tsk_x", str(tmp_path), tmp_path, 0, "brief")
    res = run_acp_round(ctx, agent, RoundHooks())
    assert (res.hard_failure, res.error_type) == (True, "spawn")


def test_bad_acp_settings_are_refused_when_the_profile_loads(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="outsideProject"):
        AgentProfile.model_validate(acp_profile(tmp_path, acp={"permissions": {"outsideProject": "maybe"}}))
    with pytest.raises(ValueError, match="permisions"):
        AgentProfile.model_validate(acp_profile(tmp_path, acp={"permisions": {}}))


def test_no_process_is_left_when_the_session_ends(rounds: Any) -> None:
    r = rounds()
    assert r.run(0).ok
    pid = r.records[0].pid
    end_acp_session(r.task_id)
    assert not pid_running(pid)


BUILTIN_ACP = {"gemini-acp": ("gemini", ["--acp"]), "claude-acp": ("claude-agent-acp", []),
               "codex-acp": ("codex-acp", []), "opencode-acp": ("opencode", ["acp"]), "qoder-acp": ("qodercli", ["--acp"])}


@pytest.mark.parametrize("agent_id", list(BUILTIN_ACP))
def test_builtin_acp_profiles_start_their_agent_with_its_acp_arguments(agent_id: str, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from tianshu_mcp.adapters.profiles import resolve_agent

    name, args = BUILTIN_ACP[agent_id]
    bindir = tmp_path / "bin"
    bindir.mkdir()
    argv_file = tmp_path / "argv.json"
    fake = bindir / name  # records its argv, then is the fake ACP agent (gemini-acp) or exits (the rest)
    fake.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                    f"json.dump(sys.argv[1:], open({str(argv_file)!r}, 'w'))\n"
                    f"if {agent_id == 'gemini-acp'}:\n"
                    f"    os.execv(sys.executable, [sys.executable, {str(FAKE_ACP)!r}])\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_ACP_TRACE", str(tmp_path / "trace.jsonl"))
    agent = resolve_agent(agent_id, tmp_path)
    assert agent.ok and agent.command == str(fake) and agent.profile is not None and agent.profile.driver == "acp"
    repo = make_calc_repo(tmp_path / "repo")
    (tmp_path / "task").mkdir()
    ctx = AgentRunContext(f"tsk_{agent_id}", str(repo), tmp_path / "task", 0, "Fix add() in calc.py")
    try:
        res = run_acp_round(ctx, agent, RoundHooks())
    finally:
        end_acp_session(ctx.task_id)
    assert json.loads(argv_file.read_text()) == args
    if agent_id == "gemini-acp":
        assert res.ok and (repo / "calc.py").read_text() == WRONG_FIX
    else:  # a program that is not an ACP agent: a coded setup failure, no round
        assert (res.hard_failure, res.error_type) == (True, "setup_failed") and "handshake" in (res.error or "")
