"""What a service start costs, and what it skips (design note 85): the parts of the start in its
"ready" line, Prefect's migrations skipped at a recorded head and run at any other, deployments
written only when they differ, and a stdio server that starts the home's service before it
imports the MCP SDK."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from conftest import CONSOLE, server_env, wait_daemon
from test_service import new_home, service_processes, until

from tianshu_mcp.hosting import schema_head, start_phases

ALEMBIC = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s+alembic(\.|$)", re.M)


def test_the_ready_line_names_each_part_of_the_start_in_ms() -> None:
    phases = start_phases.StartPhases()
    for name in ("database", "preload", "API"):
        phases.mark(name)
    text = phases.render()
    parsed = start_phases.parse(f"[INFO] tianshu-mcp service (service) ready in 4.1 s ({text}): UI http://x, home /h")
    assert list(parsed) == ["process", "database", "preload", "API"]
    assert all(isinstance(ms, int) and ms >= 0 for ms in parsed.values())
    assert parsed["process"] > 0  # this interpreter ran before the instance was made
    assert abs(phases.total_s() * 1000 - sum(parsed.values())) < 5  # the total is the parts' sum
    assert start_phases.parse("no parts here") == {}
    hosted = start_phases.StartPhases(process=False)  # in-process hosting: a stdio server's age is no part
    hosted.mark("API")
    assert list(start_phases.parse(hosted.render())) == ["API"]


def _db(path: Path, *revisions: str) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path / "prefect.db")
    conn.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)")
    conn.executemany("INSERT INTO alembic_version VALUES (?)", [(r,) for r in revisions])
    conn.commit()
    conn.close()
    return path


def test_the_recorded_head_turns_migrations_off_only_for_that_revision_and_version(tmp_path: Path) -> None:
    home = _db(tmp_path / "a", "rev2")
    url = f"sqlite+aiosqlite:///{home / 'prefect.db'}"
    env: dict[str, str] = {schema_head.MIGRATE_ENV: "false"}
    assert not schema_head.skip_if_at_head(home, env, url) and schema_head.MIGRATE_ENV not in env  # no record
    assert schema_head.record(home)
    assert json.loads((home / schema_head.MARKER).read_text())["revisions"] == ["rev2"]
    assert schema_head.skip_if_at_head(home, env, url) and env[schema_head.MIGRATE_ENV] == "false"
    # Prefect configured for another database (the tester's PREFECT_API_DATABASE_CONNECTION_URL):
    # that one is migrated, whatever the home's file records
    for other in (f"sqlite+aiosqlite:///{tmp_path / 'other.db'}", "postgresql+asyncpg://u:p@localhost/prefect",
                  "not a url", ""):
        assert not schema_head.is_home_database(home, other)
        assert not schema_head.skip_if_at_head(home, env, other) and schema_head.MIGRATE_ENV not in env
    assert schema_head.is_home_database(home, f"sqlite+aiosqlite:///{tmp_path}/a/../a/prefect.db")
    # a database restored from elsewhere: another revision
    conn = sqlite3.connect(home / "prefect.db")
    conn.execute("UPDATE alembic_version SET version_num = 'rev1'")
    conn.commit()
    conn.close()
    assert not schema_head.skip_if_at_head(home, env, url) and schema_head.MIGRATE_ENV not in env
    # another Prefect version recorded it
    schema_head.record(home)
    marker = json.loads((home / schema_head.MARKER).read_text())
    (home / schema_head.MARKER).write_text(json.dumps({**marker, "prefect": "0.0.1"}))
    assert not schema_head.at_recorded_head(home)
    # damage of every kind: a broken marker, a database without the table, none at all, not a database
    (home / schema_head.MARKER).write_text("{not json")
    assert not schema_head.at_recorded_head(home)
    empty = tmp_path / "empty"
    empty.mkdir()
    sqlite3.connect(empty / "prefect.db").close()
    assert schema_head.revisions(empty / "prefect.db") is None and not schema_head.record(empty)
    assert not (empty / schema_head.MARKER).exists()
    assert schema_head.revisions(tmp_path / "none.db") is None
    (tmp_path / "junk.db").write_bytes(b"not a database " * 200)
    assert schema_head.revisions(tmp_path / "junk.db") is None
    assert schema_head.revisions(_db(tmp_path / "b", "y", "x") / "prefect.db") == ["x", "y"]
    (home / schema_head.MARKER).unlink()
    (home / schema_head.MARKER).mkdir()  # a directory where the marker belongs: no skip, a write fails
    assert not schema_head.at_recorded_head(home)
    with pytest.raises(OSError):
        schema_head.record(home)


@pytest.mark.own_services
def test_a_seeded_home_starts_without_migrations_and_another_revision_migrates(tmp_path: Path) -> None:
    home = new_home(tmp_path, "heads", 4540)
    env = {**server_env(home), "PYTHONPROFILEIMPORTTIME": "1"}  # the service's stderr is its log

    def start() -> str:
        log = home / "logs" / "service.log"
        before = log.stat().st_size if log.exists() else 0
        done = subprocess.run([CONSOLE, "service", "start"], env=env, capture_output=True, text=True, timeout=180,
                              stdin=subprocess.DEVNULL)
        assert done.returncode == 0, done.stderr
        text = log.read_text(errors="replace")[before:]
        stop = subprocess.run([CONSOLE, "service", "stop"], env=env, capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL)
        assert stop.returncode == 0, stop.stderr
        until(lambda: not service_processes(home), 60, "the service to exit")
        return text

    try:
        first = start()
        marker = home / "prefect" / schema_head.MARKER
        recorded = json.loads(marker.read_text())
        assert recorded["revisions"] == schema_head.revisions(home / "prefect" / "prefect.db")
        assert " ready in " in first and not ALEMBIC.search(first), "a seeded home ran Prefect's migrations"
        assert "Prefect's migrations skipped" in first
        assert set(start_phases.parse(first[first.index(" ready in "):])) >= {
            "process", "database", "preload", "API", "setup", "worker"}
        marker.write_text(json.dumps({**recorded, "revisions": ["0000not0ours"]}))
        second = start()
        assert ALEMBIC.search(second), "a database whose revision is not the recorded one was not migrated"
        assert "Prefect's migrations ran" in second
        assert json.loads(marker.read_text()) == recorded  # what the migrations found, recorded again
        # Prefect told to use another database: migrated although the home's file is at its head
        other = tmp_path / "other.db"
        other.write_bytes((home / "prefect" / "prefect.db").read_bytes())
        env["PREFECT_API_DATABASE_CONNECTION_URL"] = f"sqlite+aiosqlite:///{other}"
        server = subprocess.Popen([CONSOLE, "server"], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=open(tmp_path / "server.err", "wb"), start_new_session=True)
        try:
            wait_daemon(home, server)
        finally:
            server.terminate()
            server.wait(60)
        assert ALEMBIC.search((tmp_path / "server.err").read_text(errors="replace"))
        assert json.loads(marker.read_text()) == recorded  # the home's own record, not the other database's
        del env["PREFECT_API_DATABASE_CONNECTION_URL"]
        marker.unlink()
        marker.mkdir()  # a marker that cannot be read or written never stops a start
        assert ALEMBIC.search(start())
    finally:
        for proc in service_processes(home):
            proc.kill()


@pytest.mark.prefect
@pytest.mark.anyio
async def test_deployments_are_written_only_when_they_differ(ts_daemon: dict[str, Any]) -> None:
    from prefect.client.orchestration import PrefectClient
    from prefect.client.schemas.actions import DeploymentUpdate

    from tianshu_mcp.deployments.setup import RUN_TASK_ENTRYPOINT, ensure_deployment
    from tianshu_mcp.flows.run_task import run_task_flow
    from tianshu_mcp.hosting.identity import auth_string

    name = f"probe-{uuid.uuid4().hex[:8]}"
    async with PrefectClient(ts_daemon["api"], auth_string=auth_string(ts_daemon["home"])) as client:
        updates: list[Any] = []
        real = client.update_deployment

        async def update(dep_id: Any, change: Any) -> None:
            updates.append(change)
            await real(dep_id, change)

        client.update_deployment = update  # type: ignore[method-assign]
        dep_id = await ensure_deployment(client, run_task_flow, name, RUN_TASK_ENTRYPOINT)
        try:
            assert await ensure_deployment(client, run_task_flow, name, RUN_TASK_ENTRYPOINT) == dep_id
            assert updates == []  # nothing differs: nothing written
            await real(dep_id, DeploymentUpdate(entrypoint="elsewhere:flow", job_variables={"name": "x"}))
            assert await ensure_deployment(client, run_task_flow, name, RUN_TASK_ENTRYPOINT) == dep_id
            assert len(updates) == 1
            again = await client.read_deployment(dep_id)
            assert (again.entrypoint, again.job_variables) == (RUN_TASK_ENTRYPOINT, {})
        finally:
            await client.delete_deployment(dep_id)


def test_the_stdio_server_connects_before_it_imports_the_mcp_sdk(tmp_path: Path) -> None:
    """The connecting thread (which starts a cold home's service) begins while the MCP SDK is not
    yet imported, so the two starts run side by side; in-process hosting keeps its order. (The
    server keeps stdout for the protocol: the probe writes to the real stderr.)"""
    probe = (
        "import sys\n"
        "from tianshu_mcp.mcp_server.runtime import Runtime\n"
        "def record(self):\n"
        "    sys.__stderr__.write(f'MODE {self.mode} SDK {\"mcp\" in sys.modules}\\n')\n"
        "    raise SystemExit(0)\n"
        "Runtime.start_background = record\n"
        "from tianshu_mcp.console.main import main\n"
        "main([])\n"
    )
    for hosting, expect in (("service", "MODE service SDK False"), ("in-process", "MODE in-process SDK True")):
        home = tmp_path / hosting
        home.mkdir()
        (home / "config.json").write_text(json.dumps({"prefect": {"hosting": hosting, "port": 4545}}))
        env = {**server_env(home), "TIANSHU_MCP_NO_SKILL_INSTALL": "1"}
        done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL)
        assert expect in done.stderr, done.stderr[-3000:]


RECONNECT_SCRIPT = r'''
import json, sys, threading, time
from pathlib import Path
from tianshu_mcp.core import submissions
from tianshu_mcp.core.settings import load_config
from tianshu_mcp.mcp_server import runtime as rt

home = Path(sys.argv[1])
looks, wakes = [], []
submissions.has_pending = lambda h: looks.append(1) or True
rt.Runtime._connect = lambda self: setattr(self, "_error", None)  # a reconnect under way: no error, not ready
rt.Runtime._wake_service = lambda self, http: wakes.append(len(looks)) or True
runtime = rt.Runtime(home, load_config(home))
runtime.start_background()
deadline = time.monotonic() + 60
while len(looks) < 3 and time.monotonic() < deadline:
    runtime.kick(); time.sleep(0.01)
before = list(wakes)
runtime._ready.set()  # the reconnect ended
while not wakes and time.monotonic() < deadline:
    runtime.kick(); time.sleep(0.01)
print(json.dumps({"looks": len(looks), "before": before, "after": len(wakes)}))
'''


def test_nothing_is_submitted_while_a_reconnect_is_under_way(tmp_path: Path) -> None:
    """The reconnecting thread clears the connection's error before it connects; the submit
    loop took that for "connected" and sent each tick's submission to an empty address (the
    fresh tester counted 106 "the Prefect API stopped answering (Request URL is missing an
    'http://' …)" lines in one session, and with in-process hosting the task never ran). It
    now waits for the connection, then submits."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.json").write_text(json.dumps({"prefect": {"port": 4546}}))
    done = subprocess.run([sys.executable, "-c", RECONNECT_SCRIPT, str(home)], env=server_env(home),
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    out = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else {}
    assert out.get("looks", 0) >= 3 and out["before"] == [] and out["after"] >= 1, (done.stdout, done.stderr[-2000:])
