"""Agent profile registry: merge, validation errors, resolution (docs/agents-tasks.md §1.6–§1.8)."""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from pathlib import Path

import pytest

from tianshu_mcp.adapters.builtin_gui import GUI_UNAVAILABLE_NOTE
from tianshu_mcp.adapters.profiles import (
    AgentProfile,
    list_agents,
    load_profiles,
    resolve_agent,
)
from tianshu_mcp.core.errors import ErrorCode, TianshuError

GUI_IDS = ["codex-desktop", "zcode", "traework", "kimicode", "qoder", "opendesign", "minimax"]


def write_profiles(home: Path, payload: object) -> Path:
    path = home / "agent-profiles.json"
    path.write_text(payload if isinstance(payload, str) else json.dumps(payload), encoding="utf-8")
    return path


def make_executable(path: Path) -> Path:
    path.write_text(f"#!{sys.executable}\nimport sys\nsys.exit(0)\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def test_builtins_without_a_file(tmp_path: Path) -> None:
    profiles = load_profiles(tmp_path)
    assert list(profiles)[:1] == ["codex"]
    codex = profiles["codex"]
    assert codex.driver == "spawn" and codex.prompt_mode == "arg"
    # no limit of its own: config.json's defaultTaskTimeoutMs (1800000 unless set) applies
    assert codex.timeout_ms is None
    # docs/agent-adapters.md: the prompt after "--" so a brief starting with "-" is not parsed as a flag
    assert codex.args_template == ["exec", "--json", "--skip-git-repo-check", "--sandbox", "workspace-write", "--", "<prompt:arg>"]
    for gid in GUI_IDS:
        p = profiles[gid]
        assert (p.driver, p.status) == ("gui", "research") and (p.note or "").startswith(GUI_UNAVAILABLE_NOTE)
        assert p.effective_adapter == f"{gid.removesuffix('-desktop')}-gui"


def test_gui_builtins_are_listed_but_not_runnable(tmp_path: Path) -> None:
    agents = {a.id: a for a in list_agents(tmp_path)}
    assert set(GUI_IDS) | {"codex", "claude", "gemini", "aider", "opencode", "qwen"} <= set(agents)
    for gid in GUI_IDS:
        assert agents[gid].ok is False and agents[gid].command is None
        assert GUI_UNAVAILABLE_NOTE in agents[gid].message
        assert agents[gid].to_info()["driver"] == "gui"


def test_user_entry_replaces_the_whole_builtin(tmp_path: Path) -> None:
    write_profiles(
        tmp_path,
        {"profiles": {"codex": {"command": sys.executable, "promptMode": "stdin"}, "mine": {"command": "x", "argsTemplate": ["<prompt:arg>"], "killTree": "group"}}},
    )
    profiles = load_profiles(tmp_path)
    codex = profiles["codex"]
    # no deep merge: the built-in argsTemplate, displayName and discovery are gone
    assert codex.args_template == [] and codex.display_name == "" and codex.prompt_mode == "stdin"
    assert "executableDiscovery" not in (codex.model_extra or {})
    # unknown keys survive (legacy and other builds' fields)
    assert profiles["mine"].to_json()["killTree"] == "group"
    assert list(profiles)[-1] == "mine"


def test_profile_json_round_trip_uses_camel_case(tmp_path: Path) -> None:
    p = AgentProfile.model_validate({"displayName": "D", "argsTemplate": ["a"], "timeoutMs": 5, "authNote": "n"})
    assert p.to_json() == {
        "displayName": "D",
        "type": "cli",
        "driver": "spawn",
        "status": "ready",
        "argsTemplate": ["a"],
        "promptMode": "arg",
        "cwd": "task",
        "env": {},
        "timeoutMs": 5,
        "authNote": "n",
        "fatalPatterns": [],
        "confirmationPatterns": [],
        "authorizationPatterns": [],
    }


@pytest.mark.parametrize(
    ("payload", "needles"),
    [
        ("{not json", ["invalid JSON"]),
        ({"profiles": []}, ["'profiles' must be an object"]),
        ([1, 2], ["top level"]),
    ],
    ids=["invalid-json", "profiles-list", "top-level-list"],
)
def test_an_unreadable_profiles_file_is_config_invalid(tmp_path: Path, payload: object, needles: list[str]) -> None:
    path = write_profiles(tmp_path, payload)
    with pytest.raises(TianshuError) as info:
        load_profiles(tmp_path)
    assert info.value.code is ErrorCode.CONFIG_INVALID
    assert str(path) in info.value.message
    for needle in needles:
        assert needle in info.value.message
    # resolution surfaces the same coded error rather than silently ignoring the file
    with pytest.raises(TianshuError):
        resolve_agent("codex", tmp_path)


@pytest.mark.parametrize(
    ("entry", "needles"),
    [
        ({"command": "x", "promptMode": "telepathy"}, ["promptMode"]),
        ({"timeoutMs": 0}, ["timeoutMs"]),
        ({"env": {"A": 1}}, ["env.A"]),
        ("codex", ["entry: Input should be a valid dictionary"]),
        ({"command": "x", "driver": "rpa"}, ["field 'driver'", "'spawn', 'acp' or 'gui'"]),
        ({"command": "x", "argsTemplate": ["agent.py"]}, ["entry: promptMode 'arg' needs <prompt:arg>"]),
        ({"command": "x", "driver": "acp", "acp": {"permissions": {"noLocation": "sometimes"}}}, ["noLocation"]),
        ({"command": "x", "driver": "gui", "gui": {"cdpPort": "9222", "selectors": {"send": 1}}},
         ["gui.cdpPort: expected a port number", "gui.selectors"]),
        ({"command": "x", "driver": "gui", "gui": {"cdpPort": 99999}}, ["from 1024 to 65535, got 99999"]),
        ({"command": "x", "driver": "gui", "gui": {"cdpPort": 0}}, ["from 1024 to 65535, got 0"]),
        ({"command": "x", "driver": "gui", "gui": {"exeArgs": ["--inspect"]}}, ["gui.exeArgs: no item holds <port>"]),
        ({"command": "x", "argsTemplate": ["<prompt:arg>"], "acp": {"permissions": {"insideProject": "ask"}}},
         ["'acp' settings apply to \"driver\": \"acp\" only"]),
    ],
    ids=["bad-prompt-mode", "zero-timeout", "env-not-str", "entry-not-object", "unknown-driver", "no-prompt-slot",
         "bad-acp-policy", "bad-gui-types", "port-too-high", "port-zero", "exe-args-without-port", "acp-on-a-cli"],
)
def test_a_broken_entry_is_config_invalid_for_its_agent_only(tmp_path: Path, entry: object, needles: list[str]) -> None:
    path = write_profiles(tmp_path, {"profiles": {"bad": entry, "good": {"command": sys.executable,
                                                                        "argsTemplate": ["<prompt:arg>"]}}})
    with pytest.raises(TianshuError) as info:
        resolve_agent("bad", tmp_path)
    assert info.value.code is ErrorCode.CONFIG_INVALID
    assert str(path) in info.value.message and "'bad'" in info.value.message
    assert "Value error" not in info.value.message and "instance of" not in info.value.message
    for needle in needles:
        assert needle in info.value.message
    assert resolve_agent("good", tmp_path).ok and resolve_agent("codex", tmp_path).profile is not None
    rows = {a.id: a for a in list_agents(tmp_path)}
    assert rows["bad"].ok is False and rows["bad"].message == info.value.message and rows["good"].ok
    assert "bad" not in load_profiles(tmp_path)


def test_profiles_file_that_is_a_directory_is_config_unreadable(tmp_path: Path) -> None:
    (tmp_path / "agent-profiles.json").mkdir()
    with pytest.raises(TianshuError) as info:
        load_profiles(tmp_path)
    assert info.value.code is ErrorCode.CONFIG_UNREADABLE
    assert str(tmp_path / "agent-profiles.json") in info.value.message
    assert info.value.render().startswith("Error: [CONFIG_UNREADABLE] ")


def test_unknown_agent_is_not_ok(tmp_path: Path) -> None:
    r = resolve_agent("nope", tmp_path)
    assert (r.ok, r.command, r.profile, r.source) == (False, None, None, None)
    assert r.message == "agent 'nope' is not configured; add a profile to agent-profiles.json"


def test_command_explicit_path(tmp_path: Path) -> None:
    exe = make_executable(tmp_path / "my agent")
    write_profiles(tmp_path, {"profiles": {"a": {"displayName": "A", "command": str(exe), "argsTemplate": ["<prompt:arg>"]}}})
    r = resolve_agent("a", tmp_path)
    assert (r.ok, r.source, r.command, r.display_name) == (True, "explicit", str(exe), "A")


def test_command_found_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = make_executable(bindir / "tianshu-test-agent")
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    write_profiles(tmp_path, {"profiles": {"a": {"command": "tianshu-test-agent", "argsTemplate": ["<prompt:arg>"]}}})
    r = resolve_agent("a", tmp_path)
    assert (r.ok, r.source, r.command) == (True, "path", str(exe))
    assert r.display_name == "a"


def test_builtin_codex_is_discovered_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = make_executable(bindir / "codex")
    monkeypatch.setenv("PATH", str(bindir))
    r = resolve_agent("codex", tmp_path)
    assert (r.ok, r.source, r.command) == (True, "path", str(exe))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    r = resolve_agent("codex", tmp_path)
    assert r.ok is False and r.message == "command 'codex' not found on PATH"


def test_command_missing(tmp_path: Path) -> None:
    write_profiles(
        tmp_path,
        {"profiles": {"gone": {"command": "tianshu-no-such-agent-xyz", "argsTemplate": ["<prompt:arg>"]}, "gonepath": {"command": str(tmp_path / "nope" / "agent"), "argsTemplate": ["<prompt:arg>"]}}},
    )
    r = resolve_agent("gone", tmp_path)
    assert (r.ok, r.command, r.source) == (False, None, None)
    assert r.message == "command 'tianshu-no-such-agent-xyz' not found on PATH"
    r = resolve_agent("gonepath", tmp_path)
    assert r.ok is False and "does not exist" in r.message


def test_placeholder_unsupported_and_research_are_not_ok_a_ready_gui_profile_is(tmp_path: Path) -> None:
    write_profiles(
        tmp_path,
        {
            "profiles": {
                "ph": {"command": "<path to agent>", "argsTemplate": ["<prompt:arg>"]},
                "uns": {"command": sys.executable, "status": "unsupported", "note": "vendor dropped the CLI", "argsTemplate": ["<prompt:arg>"]},
                "gui": {"command": sys.executable, "driver": "gui"},
                "res": {"command": sys.executable, "status": "research", "argsTemplate": ["<prompt:arg>"]},
            }
        },
    )
    ph, uns, gui, res = (resolve_agent(i, tmp_path) for i in ("ph", "uns", "gui", "res"))
    assert not ph.ok and "placeholder" in ph.message
    assert not uns.ok and "vendor dropped the CLI" in uns.message
    assert gui.ok and gui.profile is not None and gui.profile.driver == "gui"  # the desktop app's executable
    assert not res.ok and "research" in res.message


def test_profiles_are_reread_on_every_call(tmp_path: Path) -> None:
    assert resolve_agent("late", tmp_path).ok is False
    write_profiles(tmp_path, {"profiles": {"late": {"command": sys.executable, "argsTemplate": ["<prompt:arg>"]}}})
    assert resolve_agent("late", tmp_path).ok is True


def test_a_cli_profile_must_deliver_the_brief(tmp_path: Path) -> None:
    # pins a finding: an argsTemplate without <prompt:arg> silently ran the agent with no prompt
    write_profiles(tmp_path, {"profiles": {"mute": {"command": sys.executable, "argsTemplate": ["agent.py"]}}})
    with pytest.raises(TianshuError) as err:
        resolve_agent("mute", tmp_path)
    assert err.value.code == ErrorCode.CONFIG_INVALID and "<prompt:arg>" in err.value.message and "'mute'" in err.value.message
    write_profiles(tmp_path, {"profiles": {"f": {"command": sys.executable, "promptMode": "file", "argsTemplate": ["x"]}}})
    with pytest.raises(TianshuError):
        resolve_agent("f", tmp_path)
    write_profiles(tmp_path, {"profiles": {"s": {"command": sys.executable, "promptMode": "stdin"}}})
    assert resolve_agent("s", tmp_path).ok


def _exe(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return path


def test_the_version_is_what_the_executable_reports_and_an_upgrade_is_seen(tmp_path: Path) -> None:
    from tianshu_mcp.adapters.versions import agent_version

    exe = _exe(tmp_path / "agent", 'echo "fake-agent v2.4.1 (build 9f3c)"')
    assert agent_version(str(exe)) == "2.4.1"
    _exe(exe, 'echo "fake-agent 2.5.0-beta.1"')
    os.utime(exe, ns=(time.time_ns(), time.time_ns() + 10_000_000))
    assert agent_version(str(exe)) == "2.5.0-beta.1"
    assert agent_version(str(exe), []) is None  # versionArgs [] → not asked
    assert agent_version(str(_exe(tmp_path / "quiet", "echo no version here"))) is None


def test_a_version_probe_that_hangs_is_killed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tianshu_mcp.adapters import versions

    monkeypatch.setattr(versions, "VERSION_TIMEOUT_S", 0.5)
    assert versions.agent_version(str(_exe(tmp_path / "ui", "exec sleep 60"))) is None


def test_profiles_list_driver_source_and_version(tmp_path: Path) -> None:
    from tianshu_mcp.adapters.profiles import describe_agent, list_agents

    exe = _exe(tmp_path / "myagent", 'echo "myagent 0.9.7"; exit 0')
    # a custom command is asked its version only when its profile says how (versionArgs): a
    # script that takes its argv for the brief would otherwise start working on "--version"
    write_profiles(tmp_path, {"profiles": {"mine": {"command": str(exe), "argsTemplate": ["<prompt:arg>"],
                                                    "versionArgs": ["--version"]},
                                           "acp1": {"driver": "acp", "command": str(exe), "versionArgs": ["-V"]},
                                           "unasked": {"command": str(exe), "argsTemplate": ["<prompt:arg>"]}}})
    rows = {a.id: describe_agent(a) for a in list_agents(tmp_path)}
    keys = ("id", "displayName", "driver", "status", "ok", "message", "command", "source", "version")
    assert {k: rows["mine"][k] for k in keys} | {"message": None} == {
        "id": "mine", "displayName": "mine", "driver": "spawn", "status": "ready", "ok": True, "message": None,
        "command": str(exe), "source": "explicit", "version": "0.9.7"}
    assert rows["acp1"]["driver"] == "acp" and rows["acp1"]["version"] == "0.9.7"
    assert rows["unasked"]["ok"] and rows["unasked"]["version"] is None and rows["unasked"]["versionStatus"] == "not probed"
    assert rows["gemini-acp"]["driver"] == "acp" and rows["zcode"]["ok"] is False and rows["zcode"]["version"] is None


def test_a_missing_agent_with_several_names_says_all_of_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    monkeypatch.setenv("HOME", str(tmp_path))
    r = resolve_agent("claude-acp", tmp_path)
    assert not r.ok and r.message == "command 'claude-agent-acp' (or 'claude-code-acp') not found on PATH"


# docs/agents-tasks.md §1.7 gives each built-in desktop agent's launch facts; §1.6 the defaults the
# others fall back to. Values marked "spec" are the spec's own; "default" is §1.6's default for a
# key §1.7 does not name; "ours" is a fact the spec does not give (from the original's profiles
# and the vendors' installs, see adapters/builtin_gui.py) — pinned so a change is deliberate.
GUI_LAUNCH_FACTS: dict[str, dict[str, object]] = {
    # spec: "codex (codex-gui, MSIX COM, port 9333/30, launch 150000, defaultAutoFixRounds 5, fixPlanDir
    # .zcode/plans, dedicated userDataDir {LOCALAPPDATA}/tianshu-mcp/codex-gui/profile)"
    "codex-desktop": {"cdpPort": 9333, "cdpPortRange": 30, "launchTimeoutMs": 150_000, "activation": "msix-com",
                      "stableRounds": 4,  # ours
                      "stopCapable": True},  # spec §1.11.11
    # spec: "zcode (research, 9333/30, 2 rounds)"; launch/activation: default
    "zcode": {"cdpPort": 9333, "cdpPortRange": 30, "launchTimeoutMs": 60_000, "activation": "spawn",
              "stableRounds": 4,  # ours
              "stopCapable": False},  # spec §1.11.11
    # spec: "traework (9222/20, stableRounds 12)"; launch/activation: default
    "traework": {"cdpPort": 9222, "cdpPortRange": 20, "launchTimeoutMs": 60_000, "activation": "spawn",
                 "stableRounds": 12, "stopCapable": False},  # spec §1.11.11
    # spec: "kimicode (9666/20, launch 90000)"; activation: default
    "kimicode": {"cdpPort": 9666, "cdpPortRange": 20, "launchTimeoutMs": 90_000, "activation": "spawn",
                 "stableRounds": 4,  # ours
                 "stopCapable": True},  # spec §1.11.11
    # spec names qoder a built-in but gives no launch facts: 9777/20, launch 90000 are ours
    "qoder": {"cdpPort": 9777, "cdpPortRange": 20, "launchTimeoutMs": 90_000, "activation": "spawn",
              "stableRounds": 2,  # ours
              "stopCapable": True},  # spec §1.11.11
    # spec: "opendesign (9889/10)"; launch/activation: default
    "opendesign": {"cdpPort": 9889, "cdpPortRange": 10, "launchTimeoutMs": 60_000, "activation": "spawn",
                   "stableRounds": 4,  # ours
                   "stopCapable": True},  # ours: the spec's stop list names neither opendesign nor minimax
    # the fork's minimax: not in §1.7 at all; port/range/launch are §1.6 defaults, the rest ours
    "minimax": {"cdpPort": 9222, "cdpPortRange": 20, "launchTimeoutMs": 60_000, "activation": "spawn",
                "stableRounds": 4, "stopCapable": True},
}


def test_builtin_gui_profiles_carry_the_specs_launch_facts(tmp_path: Path) -> None:
    from tianshu_mcp.adapters.cdp.config import gui_settings

    profiles = load_profiles(tmp_path)
    gui_ids = {pid for pid, p in profiles.items() if p.driver == "gui"}
    assert gui_ids == set(GUI_LAUNCH_FACTS) == set(GUI_IDS), "a built-in GUI agent without pinned launch facts"
    for gid, facts in GUI_LAUNCH_FACTS.items():
        p = profiles[gid]
        raw = (p.model_extra or {})["gui"]
        s = gui_settings(p)  # what the driver uses: the profile over §1.6's defaults
        got = {"cdpPort": s.cdp_port, "cdpPortRange": s.cdp_port_range, "launchTimeoutMs": s.launch_timeout_ms,
               "activation": raw.get("activation", "spawn"), "stableRounds": s.stable_rounds,
               "stopCapable": s.stop_capable}
        assert got == facts, gid
        assert s.cdp_port_auto is True and s.exe_args == ("--remote-debugging-port=<port>",), gid
        # status and platform: every one is a Windows/macOS Electron app, so research on this Linux
        # build (spec: zcode research; for the others "research here" is ours, §1.8: never dispatched)
        assert p.status == "research", gid
        note = p.note or ""
        assert note.startswith(GUI_UNAVAILABLE_NOTE) and "Windows" in note and "macOS" in note, (gid, note)
    codex = (profiles["codex-desktop"].model_extra or {})["gui"]
    assert (codex["defaultAutoFixRounds"], codex["fixPlanDir"]) == (5, ".zcode/plans")  # spec
    assert "MSIX" in (profiles["codex-desktop"].note or "")  # spec: activation through MSIX COM (Windows)
    # spec's dedicated userDataDir is a Windows path: kept as a fact, not used as this build's
    # userDataDir (ours: <data home>/gui/<agentId>/user-data when a user makes the profile ready)
    assert codex["originalUserDataDir"] == "{LOCALAPPDATA}/tianshu-mcp/codex-gui/profile" and "userDataDir" not in codex
    assert (profiles["zcode"].model_extra or {})["gui"]["defaultAutoFixRounds"] == 2  # spec: "2 rounds"
