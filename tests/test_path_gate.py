"""The projectPath gate (docs/tools.md §3.1, widened by docs/robustness.md §7): system trees, the data home,
and anything whose resolved form lands there; coded, and checked before the agent is resolved."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tianshu_mcp.core.errors import ErrorCode, TianshuError
from tianshu_mcp.core.paths import check_project_path

from conftest import mcp_client

pytestmark = [pytest.mark.anyio]

SYSTEM = ["/proc", "/proc/self", "/sys/kernel", "/dev", "/dev/shm", "/boot", "/run", "/lib", "/lib64", "/usr/lib",
          "/usr/share", "/usr/local", "/bin", "/sbin", "/etc", "/etc/ssh", "/var", "/var/lib", "/var/log",
          "/var/cache"]


def code_of(path: str, home: Path | None = None) -> str:
    try:
        check_project_path(path, home)
    except TianshuError as exc:
        return exc.code.value
    return "OK"


@pytest.mark.parametrize("path", [p for p in SYSTEM if os.path.isdir(p)])
def test_system_trees_are_refused(path: str) -> None:
    assert code_of(path) == ErrorCode.PATH_IS_SYSTEM.value


@pytest.mark.parametrize("path", [p for p in ("/srv", "/mnt", "/media", "/opt") if os.path.isdir(p)])
def test_mount_points_themselves_are_refused(path: str) -> None:
    """Breaker finding: /srv, /mnt and /media themselves were accepted (an agent could write every
    mounted volume); a project inside them is fine."""
    assert code_of(path) == ErrorCode.PATH_IS_SYSTEM.value
    assert code_of(path + "/.") == ErrorCode.PATH_IS_SYSTEM.value


def test_symlinks_and_dotdot_into_system_trees_are_refused(tmp_path: Path) -> None:
    (tmp_path / "etc-link").symlink_to("/etc")
    assert code_of(str(tmp_path / "etc-link")) == ErrorCode.PATH_IS_SYSTEM.value
    assert code_of(str(tmp_path) + "/.." * len(tmp_path.parts) + "/usr/share") == ErrorCode.PATH_IS_SYSTEM.value


def test_user_work_dirs_pass(tmp_path: Path) -> None:
    assert code_of(str(tmp_path)) == "OK"
    with tempfile.TemporaryDirectory(dir="/var/tmp") as work:
        assert code_of(work) == "OK"  # /var/tmp is a work area, not system state


def test_the_data_home_and_anything_inside_it_are_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "tasks" / "tsk_1").mkdir(parents=True)
    assert code_of(str(home), home) == ErrorCode.PATH_IS_DATA_HOME.value
    assert code_of(str(home / "tasks" / "tsk_1"), home) == ErrorCode.PATH_IS_DATA_HOME.value
    (tmp_path / "into-home").symlink_to(home / "tasks")
    assert code_of(str(tmp_path / "into-home"), home) == ErrorCode.PATH_IS_DATA_HOME.value
    (tmp_path / "beside").mkdir()
    assert code_of(str(tmp_path / "beside"), home) == "OK"


def test_a_directory_that_contains_the_data_home_is_refused(tmp_path: Path) -> None:
    """Tester finding: a parent of the data home was accepted, and its agent could have read the
    hidden holdout checks and rewritten the agent profiles and Prefect's database."""
    home = tmp_path / "work" / "tianshu-home"
    home.mkdir(parents=True)
    assert code_of(str(tmp_path / "work"), home) == ErrorCode.PATH_IS_DATA_HOME.value
    assert code_of(str(tmp_path), home) == ErrorCode.PATH_IS_DATA_HOME.value
    (tmp_path / "to-parent").symlink_to(tmp_path / "work")
    assert code_of(str(tmp_path / "to-parent"), home) == ErrorCode.PATH_IS_DATA_HOME.value
    (tmp_path / "work" / "tianshu-home-sibling").mkdir()  # a name that merely starts like it
    assert code_of(str(tmp_path / "work" / "tianshu-home-sibling"), home) == "OK"


def test_a_file_is_named_as_not_a_directory(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    with pytest.raises(TianshuError) as err:
        check_project_path(str(tmp_path / "afile"))
    assert err.value.code == ErrorCode.PATH_NOT_FOUND and "not a directory" in err.value.message


@pytest.mark.parametrize("path,code", [("/proc", "PATH_IS_SYSTEM"), ("/usr/share", "PATH_IS_SYSTEM"), (None, "PATH_IS_DATA_HOME")])
async def test_run_task_refuses_before_resolving_the_agent(ts_daemon: dict[str, Any], path: str | None, code: str) -> None:
    home = ts_daemon["home"]
    before = set((home / "tasks").glob("*")) if (home / "tasks").exists() else set()
    async with mcp_client(home) as client:
        result = await client.call_tool("run_task", {"projectPath": path or str(home), "task": "x",
                                                     "agentId": "no-such-agent"})
    text = result.content[0].text
    assert result.is_error and f"[{code}]" in text, text  # not AGENT_NOT_FOUND: the path is checked first
    after = set((home / "tasks").glob("*")) if (home / "tasks").exists() else set()
    assert after == before


def test_the_data_home_is_resolved_once_per_setting_and_still_recreated(tmp_path: Path, monkeypatch: Any) -> None:
    """data_home() remembers its answer per ($TIANSHU_MCP_HOME, $HOME) (a flow run asks on every
    record write; design note 77): a removed home is created again, a new setting is resolved
    and checked anew, and a refused one is never remembered."""
    import shutil

    from tianshu_mcp.core.settings import data_home

    first = tmp_path / "a" / ".." / "home"
    monkeypatch.setenv("TIANSHU_MCP_HOME", str(first))
    home = data_home()
    assert home == (tmp_path / "home").resolve() and home.is_dir()
    shutil.rmtree(home)
    assert data_home() == home and home.is_dir()
    monkeypatch.setenv("TIANSHU_MCP_HOME", str(tmp_path / "other"))
    assert data_home() == (tmp_path / "other").resolve()
    monkeypatch.setenv("TIANSHU_MCP_HOME", "/usr")
    for _ in range(2):
        with pytest.raises(TianshuError) as err:
            data_home()
        assert err.value.code == ErrorCode.PATH_IS_SYSTEM


@pytest.mark.parametrize("inside", ["/etc/tianshu-x", "/usr/local/share/tianshu", "/proc/self/tianshu"])
def test_a_data_home_inside_a_system_tree_is_refused_and_nothing_is_created(inside: str, monkeypatch: Any) -> None:
    """Programs, configuration and kernel views are no place for tasks and Prefect's database
    (the tester's TIANSHU_MCP_HOME=/etc/tianshu-x was created by a read-only `service status`)."""
    from tianshu_mcp.core.settings import data_home

    monkeypatch.setenv("TIANSHU_MCP_HOME", inside)
    with pytest.raises(TianshuError) as err:
        data_home()
    assert err.value.code == ErrorCode.PATH_IS_SYSTEM and "system tree" in err.value.message
    assert not os.path.exists(inside)
