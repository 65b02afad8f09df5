"""Built-in CLI agent profiles (docs/agent-adapters.md): codex, claude, gemini, aider, opencode, qwen.

No network, no real agents: every CLI is a fake executable of the same name (a Python script)
that records its argv, cwd, environment and stdin, edits a file in its cwd and prints the CLI's
characteristic failure line. The adapter layer (resolve_agent → run_cli_agent) is driven directly.
Discovery is isolated: HOME is a temp dir and the system bin dirs are emptied, so a real CLI
installed on the test machine never answers.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from tianshu_mcp.acceptance.git import analyze_changes, capture_baseline
from tianshu_mcp.adapters import builtin_cli
from tianshu_mcp.adapters import profiles as profiles_mod
from tianshu_mcp.adapters.cli import AgentRunContext, build_invocation, run_cli_agent
from tianshu_mcp.adapters.fatal import fatal_line, output_tail
from tianshu_mcp.adapters.profiles import list_agents, load_profiles, resolve_agent

CLI_IDS = ["codex", "claude", "gemini", "aider", "opencode", "qwen"]

# A brief that breaks naive argv handling: a leading "-", quotes, a shell variable, a newline,
# something that looks like a flag, and non-ASCII text.
PROMPT = '- fix the "divide" bug in calc.py; keep $HOME as is\n--help is not a request. 修复'

FAKE = r'''
import json, os, subprocess, sys, threading
box = {}
reader = threading.Thread(target=lambda: box.update(text=sys.stdin.read()), daemon=True)
reader.start()
reader.join(5)
try:
    devnull = os.path.samestat(os.fstat(0), os.stat(os.devnull))
except OSError:
    devnull = False
args = sys.argv[1:]
message_file = None
if "--message-file" in args:
    with open(args[args.index("--message-file") + 1], encoding="utf-8") as fh:
        message_file = fh.read()
record = {
    "name": os.path.basename(sys.argv[0]),
    "argv": args,
    "cwd": os.getcwd(),
    "stdin_eof": not reader.is_alive(),
    "stdin": box.get("text"),
    "stdin_devnull": devnull,
    "mark": os.environ.get("FAKE_MARK"),
    "question_env": os.environ.get("TIANSHU_MCP_QUESTION_FILE"),
    "message_file": message_file,
}
name = record["name"]
with open(f"edited-by-{name}.txt", "w", encoding="utf-8") as fh:
    fh.write("changed by the fake agent\n")
if os.environ.get("FAKE_COMMIT") == "1":  # what aider does without --no-auto-commits
    subprocess.run(["git", "add", "-A"], check=True)
    subprocess.run(["git", "-c", "user.name=fake", "-c", "user.email=f@x", "commit", "-qm", "aider: edit"], check=True)
with open(os.environ["FAKE_RECORD"], "w", encoding="utf-8") as fh:
    json.dump(record, fh)
print("working on it")
line = os.environ.get("FAKE_FATAL_LINE")
if line:
    print(line, file=sys.stderr)
sys.exit(int(os.environ.get("FAKE_EXIT", "0")))
'''

# For each CLI: the argv it must receive (given the prompt and the prompt file), its prompt mode
# and one characteristic failure line that only the profile's own fatalPatterns recognise.
EXPECTED: dict[str, tuple[Callable[[str, str, str], list[str]], str, str]] = {
    "codex": (lambda p, f, c: ["exec", "--json", "--skip-git-repo-check", "--sandbox", "workspace-write", "--", p], "arg",
              "■ You've hit your usage limit. Visit https://chatgpt.com/codex/settings/usage to purchase more credits"),
    "claude": (lambda p, f, c: ["-p", "--permission-mode", "acceptEdits", "--output-format", "stream-json", "--verbose", "--",
                             p], "arg",
               "Claude AI usage limit reached|1767225600"),
    "gemini": (lambda p, f, c: ["--approval-mode", "auto_edit", "--skip-trust", "--output-format", "stream-json",
                                f"--prompt={p}"], "arg",
               ("Gemini CLI is not running in a trusted directory. To proceed, either use `--skip-trust`, set the "
                "`GEMINI_CLI_TRUST_WORKSPACE=true` environment variable, or trust this directory in interactive mode.")),
    "aider": (lambda p, f, c: ["--yes-always", "--no-auto-commits", "--no-check-update", "--no-show-release-notes",
                               "--no-analytics", "--no-gitignore", "--no-show-model-warnings", "--message-file", f], "file",
              "The API provider is not able to authenticate you. Check your API key."),
    "opencode": (lambda p, f, c: ["run", "--format", "json", "--dir", c], "stdin", "ProviderInitError"),
    "qwen": (lambda p, f, c: ["--approval-mode", "auto-edit", "--output-format", "stream-json", f"--prompt={p}"], "arg",
             'Approval mode overridden to "default" because the current folder is not trusted.'),
}


def make_fake(bindir: Path, name: str, body: str = FAKE) -> Path:
    bindir.mkdir(parents=True, exist_ok=True)
    path = bindir / name
    path.write_text(f"#!{sys.executable}\n{body}", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@x", *args], cwd=repo, check=True,
                   stdin=subprocess.DEVNULL, capture_output=True)


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty HOME, no system bin dirs, PATH = a fresh bin dir only. Returns the bin dir."""
    home = tmp_path / "userhome"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(builtin_cli, "SYSTEM_BIN_DIRS", ())
    bindir = tmp_path / "bin"
    bindir.mkdir()
    # git (used by the fakes and the project fixture) must stay reachable
    git_dir = os.path.dirname(shutil.which("git") or "/usr/bin/git")
    monkeypatch.setenv("PATH", os.pathsep.join([str(bindir), git_dir]))
    return bindir


@pytest.fixture
def project(tmp_path: Path) -> Path:
    repo = tmp_path / "project"
    repo.mkdir()
    (repo / "calc.py").write_text("def divide(a, b):\n    return a / b\n", encoding="utf-8")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    return repo


def context(tmp_path: Path, project: Path, task: str = PROMPT) -> AgentRunContext:
    return AgentRunContext(task_id="tsk_builtin", project_path=str(project), task_dir=tmp_path / "task",
                           round=0, task=task, timeout_ms=60_000)


def test_builtin_cli_ids_and_shared_shape(tmp_path: Path) -> None:
    profiles = load_profiles(tmp_path)
    assert list(profiles)[: len(CLI_IDS)] == CLI_IDS
    for agent_id in CLI_IDS:
        p = profiles[agent_id]
        assert (p.driver, p.status, p.cwd, p.timeout_ms) == ("spawn", "ready", "task", None)
        # opencode states its permission stance (docs/real-agents.md): edits in, paths outside the project out
        assert p.env == ({"OPENCODE_PERMISSION": '{"edit": "allow", "external_directory": "deny"}'}
                         if agent_id == "opencode" else {})
        assert p.command is None and p.auth_note and p.note and p.fatal_patterns
        assert p.tested_versions and p.auth_sources  # what `agents doctor` checks
        assert p.prompt_mode == EXPECTED[agent_id][1]
        disc = (p.model_extra or {})["executableDiscovery"]
        assert disc["fallbackCommand"] == agent_id and disc["fileNames"] == [agent_id]
        assert "{HOME}/.local/bin" in disc["dirs"] and "{HOME}/.nvm/versions/node" in disc["dirs"]
        # round trip: what query_info / a user copying the profile sees is valid profile JSON
        assert type(p).model_validate(p.to_json()).to_json() == p.to_json()


@pytest.mark.parametrize("agent_id", CLI_IDS)
def test_builtin_cli_runs_with_its_headless_command_line(
    agent_id: str, tmp_path: Path, project: Path, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = make_fake(isolated, agent_id)
    record_file = tmp_path / "record.json"
    expected_args, mode, fatal = EXPECTED[agent_id]
    monkeypatch.setenv("FAKE_RECORD", str(record_file))
    monkeypatch.setenv("FAKE_MARK", "passes-through")
    monkeypatch.setenv("FAKE_FATAL_LINE", fatal)
    monkeypatch.setenv("FAKE_EXIT", "1")

    agent = resolve_agent(agent_id, tmp_path / "tshome")
    assert (agent.ok, agent.source, agent.command) == (True, "path", str(fake))
    assert agent.message == f"command {fake} (found on PATH)"
    ctx = context(tmp_path, project)
    result = run_cli_agent(ctx, agent)
    assert result.exit_code == 1 and not result.hard_failure and not result.timeout

    rec = json.loads(record_file.read_text(encoding="utf-8"))
    prompt_file = str(tmp_path / "task" / "prompt-0.txt")
    assert rec["name"] == agent_id
    # argv exactly as the profile intends: the prompt is one item, in its place, never split
    assert rec["argv"] == expected_args(PROMPT, prompt_file, str(project))
    assert os.path.realpath(rec["cwd"]) == os.path.realpath(project)
    assert rec["mark"] == "passes-through" and rec["question_env"] == str(tmp_path / "task" / "question-0.md")
    assert rec["stdin_eof"] is True
    if mode == "stdin":
        assert rec["stdin"] == PROMPT and rec["stdin_devnull"] is False
    else:
        assert rec["stdin"] == "" and rec["stdin_devnull"] is True
    if mode == "file":
        assert rec["message_file"] == PROMPT
    assert (project / f"edited-by-{agent_id}.txt").read_text(encoding="utf-8") == "changed by the fake agent\n"

    # the CLI's characteristic failure line is recognised, and only thanks to the profile
    tail = output_tail(result.log_file)
    assert fatal_line(tail, agent.profile.fatal_patterns) == fatal[:300]
    assert fatal_line(tail) is None


@pytest.mark.parametrize(
    ("agent_id", "line"),
    [
        ("claude", "Not logged in · Please run /login"),
        ("claude", "Invalid API key · Please run /login"),
        ("claude", "OAuth session expired and could not be refreshed"),
        ("codex", "ERROR: Your access token could not be refreshed because your refresh token has expired."),
        ("gemini", ("Please set an Auth method in your /home/u/.gemini/settings.json or specify one of the following "
                    "environment variables before running: GEMINI_API_KEY, GOOGLE_GENAI_USE_VERTEXAI, GOOGLE_GENAI_USE_GCA")),
        ("gemini", "When using Gemini API, you must specify the GEMINI_API_KEY environment variable."),
        ("aider", "No LLM model was specified and no API keys were provided."),
        ("aider", "litellm.AuthenticationError: AnthropicException - invalid x-api-key"),
        ("opencode", "ProviderAuthError"),
        ("opencode", "You must provide a message or a command"),
        ("qwen", "Please set an Auth method in your /home/u/.qwen/settings.json"),
        # the lines of the real releases against the scripted endpoint (docs/real-agents.md; ANSI codes
        # removed)
        ("gemini", "Invalid auth method selected."),
        ("qwen", "No auth type is selected. Please configure an auth type (e.g. via settings or `--auth-type`) before "
                 "running in non-interactive mode."),
        ("opencode", "! permission requested: external_directory (/tmp/x/proj/*); auto-rejecting"),
        ("opencode", "Error: The user rejected permission to use this specific tool call."),
        ("aider", "The API provider has rate limited you. Try again later or check your quotas."),
        ("aider", "litellm.RateLimitError: RateLimitError: OpenAIException - Rate limit reached for"),
    ],
)
def test_characteristic_failure_lines(agent_id: str, line: str, tmp_path: Path) -> None:
    profile = load_profiles(tmp_path)[agent_id]
    assert fatal_line(f"starting\n{line}\nbye\n", profile.fatal_patterns) == line


def test_ordinary_output_is_not_fatal(tmp_path: Path) -> None:
    text = "Edited calc.py\nAdded a login form to the settings page\nTrusted folders are documented in README\n"
    for agent_id, profile in load_profiles(tmp_path).items():
        assert fatal_line(text, profile.fatal_patterns) is None, agent_id


def test_long_prompts_reach_stdin_and_file_agents_whole(tmp_path: Path, project: Path, isolated: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # 300 kB: more than Linux lets one argument carry; opencode (stdin) and aider (file) still get it
    big = "- refactor\n" + "x" * 300_000
    monkeypatch.setenv("FAKE_RECORD", str(tmp_path / "record.json"))
    for agent_id, key in (("opencode", "stdin"), ("aider", "message_file")):
        make_fake(isolated, agent_id)
        result = run_cli_agent(context(tmp_path, project, big), resolve_agent(agent_id, tmp_path))
        assert result.ok, result.error
        assert json.loads((tmp_path / "record.json").read_text(encoding="utf-8"))[key] == big
    # an argument agent refuses it up front, with the way out in the message
    make_fake(isolated, "claude")
    with pytest.raises(ValueError, match="promptMode 'stdin' or 'file'"):
        build_invocation(context(tmp_path, project, big), resolve_agent("claude", tmp_path))


def test_list_agents_shows_availability(tmp_path: Path, isolated: Path) -> None:
    home = tmp_path / "tshome"
    agents = {a.id: a for a in list_agents(home)}
    for agent_id in CLI_IDS:
        info = agents[agent_id].to_info()
        assert (info["ok"], info["command"], info["source"]) == (False, None, None)
        assert info["message"] == f"command '{agent_id}' not found on PATH"
        assert (info["driver"], info["status"]) == ("spawn", "ready")
    fakes = {agent_id: make_fake(isolated, agent_id) for agent_id in CLI_IDS}
    agents = {a.id: a for a in list_agents(home)}
    for agent_id in CLI_IDS:
        info = agents[agent_id].to_info()
        assert (info["ok"], info["command"], info["source"]) == (True, str(fakes[agent_id]), "path")
        assert info["displayName"] == load_profiles(home)[agent_id].display_name


def _set_mtime(path: Path, when: float) -> None:
    os.utime(path, (when, when))


def test_discovery_dirs_newest_mtime_wins(tmp_path: Path, isolated: Path) -> None:
    home = Path(os.environ["HOME"])
    now = time.time()
    local = make_fake(home / ".local" / "bin", "claude")
    nvm_old = make_fake(home / ".nvm" / "versions" / "node" / "v20.11.0" / "bin", "claude")
    nvm_new = make_fake(home / ".nvm" / "versions" / "node" / "v22.3.0" / "bin", "claude")
    hidden = make_fake(home / ".nvm" / "versions" / "node" / ".cache" / "bin", "claude")
    in_modules = make_fake(home / ".nvm" / "versions" / "node" / "v22.3.0" / "lib" / "node_modules" / "x" / "bin", "claude")
    not_exec = home / ".bun" / "bin" / "claude"
    not_exec.parent.mkdir(parents=True)
    not_exec.write_text("#!/bin/sh\n", encoding="utf-8")
    for path, age in ((local, 300), (nvm_old, 200), (nvm_new, 100), (hidden, 0), (in_modules, 0), (not_exec, 0)):
        _set_mtime(path, now - age)

    r = resolve_agent("claude", tmp_path)
    # not on PATH: the scan finds it; skipped: dot-dirs, node_modules, a file without the x bit
    assert (r.ok, r.source, r.command) == (True, "discovery", str(nvm_new))
    assert r.message == f"command {nvm_new} (found by discovery)"
    _set_mtime(local, now)
    assert resolve_agent("claude", tmp_path).command == str(local)

    # PATH wins over the scan (it is what the user's shell would run), however old
    on_path = make_fake(isolated, "claude")
    _set_mtime(on_path, now - 10_000)
    r = resolve_agent("claude", tmp_path)
    assert (r.source, r.command) == ("path", str(on_path))


def test_discovery_extra_dir_and_placeholders(tmp_path: Path, isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = Path(os.environ["HOME"])
    fake = make_fake(home / ".opencode" / "bin", "opencode")
    r = resolve_agent("opencode", tmp_path)
    assert (r.ok, r.source, r.command) == (True, "discovery", str(fake))
    assert profiles_mod.expand_discovery_dir("{HOME}/.local/bin") == f"{home}/.local/bin"
    assert profiles_mod.expand_discovery_dir("~/x") == f"{home}/x"
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    assert profiles_mod.expand_discovery_dir("{XDG_DATA_HOME}/a") == f"{home}/.local/share/a"
    monkeypatch.delenv("LOCALAPPDATA", raising=False)
    assert profiles_mod.expand_discovery_dir("{LOCALAPPDATA}/Programs") == "{LOCALAPPDATA}/Programs"


def test_system_bin_dirs_are_searched(tmp_path: Path, isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sysbin = tmp_path / "opt-homebrew-bin"
    fake = make_fake(sysbin, "gemini")
    monkeypatch.setattr(builtin_cli, "SYSTEM_BIN_DIRS", (str(sysbin),))
    r = resolve_agent("gemini", tmp_path)
    assert (r.ok, r.source, r.command) == (True, "discovery", str(fake))


def test_user_entry_replaces_a_builtin_cli_profile(tmp_path: Path, project: Path, isolated: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # explicit path beats PATH and discovery, and nothing of the built-in survives
    make_fake(isolated, "claude")
    mine = make_fake(tmp_path / "elsewhere", "claude-wrapper")
    home = tmp_path / "tshome"
    home.mkdir()
    (home / "agent-profiles.json").write_text(json.dumps({"profiles": {"claude": {
        "displayName": "Claude (bypass)", "command": str(mine),
        "argsTemplate": ["-p", "--permission-mode", "bypassPermissions", "--", "<prompt:arg>"]}}}), encoding="utf-8")
    r = resolve_agent("claude", home)
    assert (r.ok, r.source, r.command, r.display_name) == (True, "explicit", str(mine), "Claude (bypass)")
    assert r.profile is not None and r.profile.fatal_patterns == [] and r.profile.note is None
    assert "executableDiscovery" not in (r.profile.model_extra or {})
    monkeypatch.setenv("FAKE_RECORD", str(tmp_path / "record.json"))
    assert run_cli_agent(context(tmp_path, project), r).ok
    rec = json.loads((tmp_path / "record.json").read_text(encoding="utf-8"))
    assert rec["argv"] == ["-p", "--permission-mode", "bypassPermissions", "--", PROMPT]


def test_an_agent_commit_is_still_a_change(tmp_path: Path, project: Path, isolated: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # why --no-auto-commits is a choice, not a necessity: aider's own commits are still counted
    baseline = capture_baseline(project)
    make_fake(isolated, "aider")
    monkeypatch.setenv("FAKE_RECORD", str(tmp_path / "record.json"))
    monkeypatch.setenv("FAKE_COMMIT", "1")
    assert run_cli_agent(context(tmp_path, project), resolve_agent("aider", tmp_path)).ok
    analysis = analyze_changes(baseline, project, PROMPT)
    assert analysis.changed_files == ["edited-by-aider.txt"]
    assert any("created git commit" in note for note in analysis.notes)
