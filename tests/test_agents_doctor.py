"""``tianshu-mcp agents doctor`` and the same facts in ``query_info(type="profiles")`` (docs/real-agents.md
§5).

No real agents and no mocks of the doctor: every CLI is a small executable script in a temp dir
(a ``#!/bin/sh`` script, or a ``#!/usr/bin/env node`` one run by a fake ``node`` that prints its
version and hands the script to ``/bin/sh``). Each fake records every argv it is started with,
so a test can say exactly what the doctor ran. HOME, the data home and PATH are per test; the
built-ins' system bin dirs are emptied so a CLI installed on the test machine never answers.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import psutil
import pytest
from tianshu_mcp.adapters import builtin_acp, builtin_cli, versions
from tianshu_mcp.adapters.doctor import compare_version, profile_flags, script_runner
from tianshu_mcp.adapters.doctor_checks import node_runtime
from tianshu_mcp.adapters.profiles import (
    AgentProfile,
    builtin_profiles,
    describe_agent,
    list_agents,
)
from tianshu_mcp.console.agents import main as agents_main

NODE_CLIS = ("codex", "gemini")
"""Fake CLIs written as Node scripts (``#!/usr/bin/env node``); the others are plain sh."""

SLEEP = shutil.which("sleep") or "/bin/sleep"
"""``sleep`` by its path (the tests' PATH holds only the fakes)."""

SECRET = "sk-doctor-secret-value-0123456789"
"""An API key value that must never appear in the doctor's output."""


class Machine:
    """A temp machine: ``home`` (HOME), ``data`` (data home), ``bin`` (the only PATH dir with
    CLIs), ``node_bin`` (a fake node, on PATH when installed), ``record`` (every fake's argv)."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root, self.mp = root, monkeypatch
        self.home, self.data, self.bin, self.node_bin = (root / "home", root / "data", root / "bin", root / "nodebin")
        for d in (self.home, self.data, self.bin, self.node_bin):
            d.mkdir()
        self.record = root / "argv.log"
        monkeypatch.setenv("HOME", str(self.home))
        monkeypatch.setenv("PATH", str(self.bin))
        monkeypatch.setenv("DOCTOR_RECORD", str(self.record))
        monkeypatch.setattr(builtin_cli, "SYSTEM_BIN_DIRS", ())
        monkeypatch.setattr(builtin_acp, "SYSTEM_BIN_DIRS", ())
        for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "CODEX_API_KEY"):
            monkeypatch.delenv(name, raising=False)

    def install_node(self, version: str) -> Path:
        """A fake ``node`` printing ``version`` for ``--version`` and running a script with sh."""
        node = self.node_bin / "node"
        node.write_text(f'#!/bin/sh\nif [ "$1" = "--version" ]; then echo {version}; exit 0; fi\n'
                        'script="$1"; shift; exec /bin/sh "$script" "$@"\n')
        node.chmod(0o755)
        self.mp.setenv("PATH", os.pathsep.join([str(self.bin), str(self.node_bin)]))
        return node

    def cli(self, name: str, version: str = "1.2.3", flags: list[str] | None = None, node: bool = False,
            help_body: str = "", where: Path | None = None) -> Path:
        """A fake CLI ``name``: ``--version`` prints ``version``, ``[sub] --help`` lists ``flags``,
        anything else records and fails (a doctor must never get there)."""
        help_lines = [f"usage: {name} [options]", *(f"  {f}  what {f} does" for f in flags or []), help_body]
        help_text = " ".join(f"'{line}'" for line in help_lines)  # printf: a builtin (PATH has no cat)
        path = (where or self.bin) / name
        path.write_text(("#!/usr/bin/env node\n" if node else "#!/bin/sh\n")
                        + f'printf "%s\\n" "{name} $*" >> "$DOCTOR_RECORD"\n'
                        + f'case "$*" in\n  --version) echo "{name} v{version}"; exit 0;;\n'
                        + f"  --help|*' --help') printf '%s\\n' {help_text}; exit 0;;\nesac\n"
                        + 'echo "unexpected argv: $*" >&2; exit 3\n')
        path.chmod(0o755)
        return path

    def profiles(self, profiles: dict[str, Any]) -> None:
        (self.data / "agent-profiles.json").write_text(json.dumps({"profiles": profiles}))

    def runs(self) -> list[str]:
        """Every recorded start of a fake, as ``"<name> <args>"``."""
        return self.record.read_text().splitlines() if self.record.exists() else []

    def doctor(self, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
        capsys.readouterr()
        code = agents_main(["doctor", "--home", str(self.data), *extra])
        return code, capsys.readouterr().out


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Machine:
    return Machine(tmp_path, monkeypatch)


def _executable_name(profile: AgentProfile) -> str:
    return (profile.model_extra or {})["executableDiscovery"]["fallbackCommand"]


def _cli_builtins() -> dict[str, AgentProfile]:
    return {k: p for k, p in builtin_profiles().items() if p.driver != "gui"}


def _flags_by_executable() -> dict[str, list[str]]:
    """Every executable of the CLI/ACP built-ins, with the flags of every profile that runs it."""
    out: dict[str, list[str]] = {}
    for profile in _cli_builtins().values():
        flags = out.setdefault(_executable_name(profile), [])
        flags.extend(f for f in profile_flags(profile.args_template) if f not in flags)
    return out


def _overrides(ranges: str = ">=1.0,<2.0") -> dict[str, Any]:
    """Each CLI/ACP built-in as a user entry (same executable and command line, so still probed)
    with our testedVersions, nodeVersions (the Node CLIs) and authSources."""
    out = {}
    for agent_id, profile in _cli_builtins().items():
        raw = profile.to_json()
        raw["testedVersions"] = ranges
        raw.pop("nodeVersions", None)
        if _executable_name(profile) in NODE_CLIS:
            raw["nodeVersions"] = ">=22"
        key = "DOCTOR_KEY_" + agent_id.upper().replace("-", "_")
        raw["authSources"] = [{"env": key, "note": "API key"}, {"file": f"~/.{agent_id}/auth.json", "note": "login"}]
        out[agent_id] = raw
    return out


def _by_id(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in rows}


# --- the three machines ------------------------------------------------------------------------

def test_a_machine_with_every_cli(machine: Machine, capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    machine.install_node("v22.4.0")
    for name, flags in _flags_by_executable().items():
        machine.cli(name, "1.4.2", flags, node=name in NODE_CLIS)
    machine.profiles(_overrides())
    ids = list(_cli_builtins())
    for i, agent_id in enumerate(ids):  # half log in by a key, half by a login file
        if i % 2:
            monkeypatch.setenv("DOCTOR_KEY_" + agent_id.upper().replace("-", "_"), SECRET)
        else:
            (machine.home / f".{agent_id}").mkdir()
            (machine.home / f".{agent_id}" / "auth.json").write_text("{}")

    code, out = machine.doctor(capsys, "--json")
    assert code == 0, out
    rows = _by_id(json.loads(out))
    assert SECRET not in out
    for i, agent_id in enumerate(ids):
        row, profile = rows[agent_id], _cli_builtins()[agent_id]
        assert row["state"] == "ok" and row["ok"] and row["problems"] == [], row
        assert row["version"] == "1.4.2" and row["versionStatus"] == "tested" and row["testedVersions"] == ">=1.0,<2.0"
        assert row["flags"]["present"] == profile_flags(profile.args_template) and row["flags"]["missing"] == []
        assert row["flags"]["checked"] == bool(row["flags"]["present"])
        if i % 2:
            assert row["auth"] == {"source": "DOCTOR_KEY_" + agent_id.upper().replace("-", "_"), "kind": "env",
                                   "note": "API key"}
        else:
            assert row["auth"] == {"source": str(machine.home / f".{agent_id}" / "auth.json"), "kind": "file",
                                   "note": "login"}
        if _executable_name(profile) in NODE_CLIS:
            assert row["node"] | {"detail": ""} == {"required": ">=22", "executable": str(machine.node_bin / "node"),
                                                    "version": "22.4.0", "status": "ok", "detail": ""}
        assert set(row) >= {"id", "displayName", "driver", "status", "ok", "message", "command", "source", "version",
                            "versionStatus", "testedVersions", "flags", "node", "auth", "problems"}
    assert rows["codex"]["flags"]["helpCommand"] == "codex exec --help"  # the subcommand's own help
    assert all(rows[g]["state"] == "not runnable" and rows[g]["driver"] == "gui" for g in rows if g not in ids)
    # the doctor started each executable with --version and [sub] --help only, each once
    runs = machine.runs()
    assert runs and all(r.split(" ", 1)[1] in ("--version", "--help") or r.endswith(" --help") for r in runs), runs
    assert len(runs) == len(set(runs)), runs  # gemini and gemini-acp share one probe
    code, text = machine.doctor(capsys)
    assert code == 0 and SECRET not in text
    print(text)
    assert "codex  [OK]  Codex CLI (spawn)" in text and "codex exec --help: present --" in text
    assert "node     v22.4.0 " in text and "ok for >=22" in text
    assert f"summary: {len(ids)} found ({len(ids)} ok, 0 with problems), 0 not installed" in text
    assert machine.runs() == runs  # the second run answered from the cache


def test_a_machine_with_no_cli(machine: Machine, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = machine.doctor(capsys, "--json")
    assert code == 0, out
    rows = _by_id(json.loads(out))
    for agent_id in _cli_builtins():
        assert rows[agent_id]["state"] == "not installed" and rows[agent_id]["problems"] == [], rows[agent_id]
        assert "not found on PATH" in rows[agent_id]["message"] and rows[agent_id]["version"] is None
    code, text = machine.doctor(capsys)
    print(text)
    assert code == 0 and "\nnot installed:\n" in text and "    codex  command 'codex' not found on PATH" in text
    assert "0 found (0 ok, 0 with problems)" in text
    # the console script itself, on a PATH with nothing on it
    env = {**os.environ, "PATH": str(machine.bin)}
    proc = subprocess.run([str(Path(sys.executable).parent / "tianshu-mcp"), "agents", "doctor", "--home", str(machine.data)],
                          check=False, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "summary: 0 found" in proc.stdout, proc.stderr
    bad = subprocess.run([str(Path(sys.executable).parent / "tianshu-mcp"), "agents", "doctor", "--bogus"],
                         check=False, env=env, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "unrecognized arguments: --bogus" in bad.stderr


def test_a_cli_whose_help_lacks_a_profile_flag(machine: Machine, capsys: pytest.CaptureFixture[str]) -> None:
    flags = profile_flags(builtin_profiles()["claude"].args_template)
    assert "--permission-mode" in flags
    machine.cli("claude", "2.0.0", [f for f in flags if f != "--permission-mode"],
                help_body="  --permission-mode-extra  a longer flag is not the one")
    code, out = machine.doctor(capsys, "--json")
    assert code == 1
    row = _by_id(json.loads(out))["claude"]
    assert row["state"] == "problem" and row["flags"]["missing"] == ["--permission-mode"]
    assert row["flags"]["present"] == [f for f in flags if f != "--permission-mode"]
    assert any("flag --permission-mode is not in the output of claude --help" in p for p in row["problems"]), row
    code, text = machine.doctor(capsys)
    print(text)
    assert code == 1 and "claude  [PROBLEM]" in text and "MISSING --permission-mode" in text
    assert "PROBLEM  flag --permission-mode is not in the output of claude --help" in text


# --- safety: a custom command is never started to probe it -----------------------------------

RECORDER = """import json, os, sys
with open(os.environ["DOCTOR_RECORD"], "a") as fh:
    fh.write(json.dumps(sys.argv) + "\\n")
print("recorder 3.1.4")
print("  --flag  a flag")
"""


def test_a_custom_command_is_never_run_with_version_or_help(machine: Machine, capsys: pytest.CaptureFixture[str]) -> None:
    script = machine.root / "my_agent.py"
    script.write_text(RECORDER)
    direct = machine.root / "my-agent"
    direct.write_text(f"#!{sys.executable}\n" + RECORDER)
    direct.chmod(0o755)
    machine.profiles({
        "via-python": {"command": sys.executable, "argsTemplate": [str(script), "--flag", "<prompt:arg>"],
                       "testedVersions": ">=3"},
        "direct": {"command": str(direct), "argsTemplate": ["--flag", "<prompt:arg>"]},
        "direct-acp": {"driver": "acp", "command": str(direct), "argsTemplate": ["--flag"]},
        "desktop": {"driver": "gui", "status": "ready", "command": str(direct)},
        "codex": {"command": str(direct), "argsTemplate": ["exec", "--flag", "<prompt:arg>"]},  # a built-in id, replaced
    })
    code, out = machine.doctor(capsys, "--json")
    code_text, text = machine.doctor(capsys)
    rows = _by_id(json.loads(out))
    infos = {a.id: describe_agent(a) for a in list_agents(machine.data)}  # query_info's path
    assert not machine.record.exists(), machine.record.read_text()  # never started, by any of them
    assert code == code_text == 0
    for agent_id in ("via-python", "direct", "direct-acp", "codex"):
        for row in (rows[agent_id], infos[agent_id]):
            assert row["ok"] and row["version"] is None and row["versionStatus"] == "not probed" and not row["probed"]
            assert row["flags"]["checked"] is False and "set helpArgs to check" in row["flags"]["note"]
    assert "not probed (custom command; set versionArgs to probe)" in rows["direct"]["notes"]
    assert any(n.startswith("not probed (runs a script through python") for n in rows["via-python"]["notes"])
    assert rows["via-python"]["flags"]["note"].startswith("not checked (runs a script through python")
    assert rows["desktop"]["driver"] == "gui" and rows["desktop"]["ok"] and not rows["desktop"]["probed"]
    assert "version  not probed (custom command; set versionArgs to probe)" in text


def test_versionargs_and_helpargs_opt_a_custom_command_in(machine: Machine, capsys: pytest.CaptureFixture[str]) -> None:
    direct = machine.root / "my-agent"
    direct.write_text(f"#!{sys.executable}\n" + RECORDER)
    direct.chmod(0o755)
    machine.profiles({"mine": {"command": str(direct), "argsTemplate": ["--flag", "--other", "<prompt:arg>"],
                               "versionArgs": ["--version"], "helpArgs": ["--help"], "testedVersions": "~=3.0"}})
    code, out = machine.doctor(capsys, "--json")
    row = _by_id(json.loads(out))["mine"]
    assert [json.loads(line)[1:] for line in machine.runs()] == [["--version"], ["--help"]]
    assert row["version"] == "3.1.4" and row["versionStatus"] == "tested" and row["probed"]
    assert row["flags"]["present"] == ["--flag"] and row["flags"]["missing"] == ["--other"] and code == 1


def test_script_runner_and_flags_of_a_command_line() -> None:
    assert profile_flags(["exec", "--skip-git-repo-check", "--sandbox", "workspace-write", "--", "<prompt:arg>"]) == [
        "--skip-git-repo-check", "--sandbox"]
    assert profile_flags(["--approval-mode", "auto_edit", "--prompt=<prompt:arg>", "-p", "-p"]) == [
        "--approval-mode", "--prompt", "-p"]
    assert script_runner(AgentProfile.model_validate({"command": "python3", "argsTemplate": ["a.py", "<prompt:arg>"]})) == "python3"
    assert script_runner(AgentProfile.model_validate({"command": "/opt/x/agent", "argsTemplate": ["/srv/run.js", "<prompt:arg>"]}))
    assert script_runner(AgentProfile.model_validate({"command": "codex", "argsTemplate": ["exec", "<prompt:arg>"]})) is None


# --- versions, node, auth, timeouts -------------------------------------------------------------

def test_version_against_tested_versions() -> None:
    assert compare_version("0.171.0", ">=0.171,<0.200") == ("tested", None)
    assert compare_version("0.200.1", ">=0.171,<0.200") == ("newer than tested", None)
    assert compare_version("0.150.0", ">=0.171,<0.200") == ("older than tested", None)
    assert compare_version("2.2.0", "==2.1.*") == ("newer than tested", None)
    assert compare_version("2.5.0-beta.1", ">=2.4") == ("tested", None)  # a pre-release counts
    assert compare_version(None, ">=1") == ("unknown", None) and compare_version("1.0", None) == ("unknown", None)
    for version in ("1.0", None):  # a broken range is said even when the version is unknown
        status, problem = compare_version(version, "at least one")
        assert status == "unknown" and problem and "not a PEP 440 version specifier" in problem


def test_an_old_cli_and_an_old_node_are_problems_no_credentials_a_note(machine: Machine, capsys: pytest.CaptureFixture[str],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    machine.install_node("v20.11.1")
    machine.cli("gemini", "0.40.0", _flags_by_executable()["gemini"], node=True)
    machine.cli("qwen", "9.0.0", _flags_by_executable()["qwen"])
    overrides = _overrides(">=0.50,<1.0")
    monkeypatch.setenv("DOCTOR_KEY_QWEN", SECRET)
    machine.profiles({"gemini": overrides["gemini"], "qwen": overrides["qwen"]})
    code, out = machine.doctor(capsys, "--json")
    rows = _by_id(json.loads(out))
    gemini, qwen = rows["gemini"], rows["qwen"]
    assert code == 1 and SECRET not in out
    assert gemini["versionStatus"] == "older than tested" and gemini["node"]["status"] == "unsatisfied"
    assert gemini["node"]["version"] == "20.11.1" and gemini["auth"] == {"source": None, "kind": "none", "note": "none found"}
    assert len(gemini["problems"]) == 2, gemini["problems"]
    assert "version 0.40.0 is older than the tested range >=0.50,<1.0" in gemini["problems"][0]
    assert "node v20.11.1" in gemini["problems"][1] and "does not satisfy nodeVersions >=22" in gemini["problems"][1]
    assert any(n.startswith("no credentials found in the usual places (env DOCTOR_KEY_GEMINI, file ~/.gemini/auth.json)")
               for n in gemini["notes"]), gemini["notes"]
    # newer than tested is said, not a problem; qwen's entry sets no nodeVersions: no node check
    assert qwen["versionStatus"] == "newer than tested" and qwen["state"] == "ok"
    assert "version 9.0.0 is newer than the tested range >=0.50,<1.0" in qwen["notes"]
    assert qwen["node"] is None and qwen["auth"]["source"] == "DOCTOR_KEY_QWEN"


def test_which_node_runs_a_cli(machine: Machine) -> None:
    script = machine.cli("codex", node=True)
    assert node_runtime(str(script), str(machine.bin)) == ("node", None, "#!/usr/bin/env node: the node on PATH")
    node = machine.install_node("v22.1.0")
    assert node_runtime(str(script), os.environ["PATH"])[:2] == ("node", str(node))
    native = machine.bin / "native-cli"
    shutil.copy("/bin/true", native)
    assert node_runtime(str(native), os.environ["PATH"]) == ("native", None, "native binary")
    shim = machine.root / "shimdir" / "cli"  # npm's sh shim prefers the node next to it
    shim.parent.mkdir()
    shim.write_text('#!/bin/sh\nbasedir=$(dirname "$0")\nif [ -x "$basedir/node" ]; then\n'
                    '  exec "$basedir/node"  "$basedir/../lib/cli.js" "$@"\nelse\n  exec node  "$basedir/../lib/cli.js" "$@"\nfi\n')
    assert node_runtime(str(shim), os.environ["PATH"]) == ("node", str(node), "a shell shim: the node on PATH")
    shutil.copy(node, shim.parent / "node")
    assert node_runtime(str(shim), os.environ["PATH"])[1] == str(shim.parent / "node")
    assert node_runtime(str(machine.cli("aider")), os.environ["PATH"]) == ("other", None, "runs with /bin/sh")


def test_a_node_cli_without_node_on_path(machine: Machine, capsys: pytest.CaptureFixture[str]) -> None:
    machine.cli("qwen", "1.0.0", _flags_by_executable()["qwen"], node=True)
    machine.profiles({"qwen": _overrides()["qwen"] | {"nodeVersions": ">=22"}})
    code, out = machine.doctor(capsys, "--json")
    row = _by_id(json.loads(out))["qwen"]
    assert code == 1 and row["node"]["status"] == "not found"
    assert any("runs on Node.js (>=22) but no node is on PATH" in p for p in row["problems"]), row


def test_a_help_that_hangs_is_killed_with_its_children(machine: Machine, capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(versions, "HELP_TIMEOUT_S", 1.0)
    pid_file = machine.root / "sleeper.pid"
    hang = machine.bin / "aider"
    hang.write_text(f'#!/bin/sh\ncase "$*" in --version) echo "aider 0.86.2"; exit 0;; esac\n'
                    f'{SLEEP} 60 & echo $! > {pid_file}; wait\n')
    hang.chmod(0o755)
    started = time.monotonic()
    _code, out = machine.doctor(capsys, "--json")
    row = _by_id(json.loads(out))["aider"]
    assert time.monotonic() - started < 30
    assert row["version"] == "0.86.2" and row["flags"]["checked"] is False
    assert row["flags"]["note"] == "not checked (aider --help did not finish within 1 s; killed)"
    sleeper = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while psutil.pid_exists(sleeper) and psutil.Process(sleeper).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the --help probe's child outlived it"
        time.sleep(0.1)


def test_a_broken_profile_entry_is_a_problem(machine: Machine, capsys: pytest.CaptureFixture[str]) -> None:
    machine.profiles({"bad": {"command": "x", "timeoutMs": "5"}})
    code, text = machine.doctor(capsys)
    assert code == 1 and "\nbroken:\n    bad  " in text and "1 broken profile entry" in text


def test_a_user_entry_without_a_command_is_broken_and_its_reason_shown_whole(
        machine: Machine, capsys: pytest.CaptureFixture[str]) -> None:
    """A user entry replacing a built-in without a command can never be installed: it is broken (exit 1)."""
    machine.profiles({"claude": {"outputFormat": "claude-stream-json"},
                      "typo": {"command": 42, "argsTemplate": "x"}})
    code, text = machine.doctor(capsys)
    assert code == 1 and "    claude  agent 'claude' has no command" in text, text
    assert "2 broken profile entries" in text
    assert "argsTemplate" in text  # the whole reason of a broken entry, not cut at the column


# --- query_info(type="profiles") ---------------------------------------------------------------

def test_query_info_profiles_carries_the_doctor_facts(machine: Machine) -> None:
    from tianshu_mcp.mcp_server.info import _profiles

    machine.cli("claude", "2.0.0", ["-p", "--output-format"])
    result = anyio.run(_profiles, SimpleNamespace(home=machine.data))
    rows = _by_id(result.structured_content["profiles"])
    claude = rows["claude"]
    assert claude["ok"] and claude["version"] == "2.0.0" and claude["source"] == "path"
    assert "--permission-mode" in claude["flags"]["missing"] and claude["problems"]
    assert rows["codex"]["ok"] is False and rows["codex"]["problems"] == []
    text = result.content[0].text
    assert "[problem: flag --permission-mode is not in the output of claude --help" in text
