"""Read-only subcommands create nothing: on a data home that does not exist they leave it absent
and say that no home is there; ``service`` takes ``--home DIR`` (the meaning of
``TIANSHU_MCP_HOME``, as ``demo --home``). Drives the installed console script."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import CONSOLE


def cli(env_home: Path | None, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "TIANSHU_"))}
    if env_home is not None:
        env["TIANSHU_MCP_HOME"] = str(env_home)
    return subprocess.run([CONSOLE, *args], env=env, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, cwd=cwd)


@pytest.mark.parametrize("args", [("service", "status"), ("service", "stop")])
def test_service_status_and_stop_on_a_missing_home_create_nothing_and_say_so(tmp_path: Path, args: tuple[str, ...]) -> None:
    nothing = tmp_path / "nothing"
    done = cli(nothing, *args)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["running"] is False and answer["exists"] is False and answer["home"] == str(nothing)
    assert f"no tianshu-mcp data home at {nothing}" in answer["message"]
    assert not nothing.exists()


@pytest.mark.parametrize("args", [("config", "check"), ("config", "acceptance"), ("agents", "doctor", "--json")])
def test_other_read_only_commands_on_a_missing_home_create_nothing(tmp_path: Path, args: tuple[str, ...]) -> None:
    nothing = tmp_path / "nothing"
    done = cli(nothing, *args)
    assert done.returncode in (0, 1), done.stderr  # agents doctor exits 1 when an agent is missing
    json.loads(done.stdout)
    assert not nothing.exists()


def test_holdout_list_on_a_missing_home_creates_nothing(tmp_path: Path) -> None:
    nothing, project = tmp_path / "homes" / "nothing", tmp_path / "project"
    project.mkdir()
    done = cli(nothing, "holdout", "list", "--project", str(project))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["checks"] == []
    assert not nothing.exists() and not nothing.parent.exists()


def test_service_takes_home_before_or_after_the_action(tmp_path: Path) -> None:
    env_home, flag_home = tmp_path / "from-env", tmp_path / "from-flag"
    for args in (("service", "status", "--home", str(flag_home)), ("service", "--home", str(flag_home), "status"),
                 ("service", "status", f"--home={flag_home}")):
        done = cli(env_home, *args)
        assert done.returncode == 0, (args, done.stderr)
        assert json.loads(done.stdout)["home"] == str(flag_home)  # --home wins over TIANSHU_MCP_HOME
    relative = cli(None, "service", "status", "--home", "rel/home", cwd=tmp_path)
    assert json.loads(relative.stdout)["home"] == str(tmp_path / "rel" / "home")
    missing = cli(env_home, "service", "status", "--home")
    assert missing.returncode == 2 and "--home needs a directory" in missing.stderr
    assert "--home DIR" in cli(env_home, "service", "--help").stdout
    assert not env_home.exists() and not flag_home.exists() and not (tmp_path / "rel").exists()
