"""A scale-out cluster on this machine for the remote-topology tests and benchmark (real parts):

* PostgreSQL from Debian (``initdb`` + ``pg_ctl`` into a temp directory, its own port);
* a Prefect server (``prefect server start``) on that database, with an API auth string;
* ``tianshu-mcp worker --pool …`` processes, each with its own data home and agent profiles,
  in a session of its own (so a test can kill one "machine" with its whole process tree);
* bare git repositories as the remotes (``file`` paths: the workers clone them like any remote).

The caller (an MCP server) reaches the server through ``TIANSHU_PREFECT_API_URL`` and
``PREFECT_API_AUTH_STRING`` in its environment, as a user's would.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from fixture_project import git, make_calc_repo, scripted_profile

BIN = Path(sys.executable).parent
CONSOLE = str(BIN / "tianshu-mcp")
AUTH = "admin:cluster-s3cret"


def pg_bin() -> Path | None:
    """The newest installed PostgreSQL's bin directory, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return Path(found[-1]).parent if found else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_db_owner(argv: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: run it as the ``postgres`` user then."""
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


def until(cond: Any, timeout_s: float, what: str, every_s: float = 0.2) -> Any:
    """Poll ``cond()`` until truthy (returned) or raise AssertionError naming ``what``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(every_s)


@dataclass
class Cluster:
    """A running cluster; :meth:`close` stops everything it started."""

    root: Path
    api_url: str = ""
    pg_port: int = 0
    pg_dir: Path | None = None
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    # --- database and server ----------------------------------------------------------------
    def start_postgres(self) -> str:
        """initdb + start; return the SQLAlchemy URL of a new database ``prefect``."""
        bindir = pg_bin()
        assert bindir is not None, "PostgreSQL is not installed (setup.sh installs it as root)"
        if os.geteuid() == 0:  # the postgres user cannot enter pytest's private temp dirs
            data = Path(tempfile.mkdtemp(prefix="tianshu-pg-", dir="/tmp"))
            shutil.chown(data, "postgres")
        else:
            data = self.root / "pg"
            data.mkdir(parents=True)
        self.pg_dir = data
        subprocess.run(_as_db_owner([str(bindir / "initdb"), "-D", str(data / "data"), "-A", "trust", "-U", "postgres"]),
                       check=True, capture_output=True)
        self.pg_port = free_port()
        subprocess.run(_as_db_owner([str(bindir / "pg_ctl"), "-D", str(data / "data"), "-l", str(data / "log"), "-w", "-t", "120",
                                     "-o", f"-p {self.pg_port} -k {data} -c listen_addresses=127.0.0.1 -c max_connections=200",
                                     "start"]), check=True, capture_output=True)
        subprocess.run([str(bindir / "psql"), "-h", "127.0.0.1", "-p", str(self.pg_port), "-U", "postgres", "-q",
                        "-c", "create database prefect"], check=True, capture_output=True)
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.pg_port}/prefect"

    def start_server(self, db_url: str) -> str:
        """``prefect server start`` on ``db_url`` with the API auth string :data:`AUTH`; return its API URL."""
        port = free_port()
        home = self.root / "server"
        home.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "TIANSHU_"))}
        env.update(PREFECT_HOME=str(home), PREFECT_API_DATABASE_CONNECTION_URL=db_url,
                   PREFECT_SERVER_API_AUTH_STRING=AUTH, PREFECT_SERVER_ANALYTICS_ENABLED="false",
                   PREFECT_UI_ENABLED="false", PREFECT_SERVER_API_HOST="127.0.0.1",
                   PREFECT_API_DATABASE_TIMEOUT="30", PREFECT_API_DATABASE_CONNECTION_TIMEOUT="30")
        with open(home / "server.log", "ab") as out:
            self.procs["server"] = subprocess.Popen(
                [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.api_url = f"http://127.0.0.1:{port}/api"

        def healthy() -> bool:
            assert self.procs["server"].poll() is None, (home / "server.log").read_text()[-3000:]
            try:
                return httpx.get(f"{self.api_url}/health", auth=tuple(AUTH.split(":")), timeout=2).status_code == 200  # type: ignore[arg-type]
            except httpx.HTTPError:
                return False

        until(healthy, 180, "the Prefect server on PostgreSQL")
        return self.api_url

    def api(self) -> httpx.Client:
        """An HTTP client of the server's REST API (with its auth)."""
        user, password = AUTH.split(":")
        return httpx.Client(base_url=self.api_url, auth=(user, password), timeout=30)

    def caller_env(self) -> dict[str, str]:
        """What an MCP host puts in the caller's ``env`` block to use this server."""
        return {"TIANSHU_PREFECT_API_URL": self.api_url, "PREFECT_API_AUTH_STRING": AUTH}

    # --- workers ----------------------------------------------------------------------------
    def worker_home(self, name: str, profiles: dict[str, Any]) -> Path:
        home = self.root / f"home-{name}"
        home.mkdir(exist_ok=True)
        (home / "agent-profiles.json").write_text(json.dumps({"profiles": profiles}))
        return home

    def start_worker(self, name: str, pool: str, profiles: dict[str, Any], *extra: str) -> subprocess.Popen[bytes]:
        """``tianshu-mcp worker --pool <pool> --name <name>`` with its own data home (a stand-in
        for another machine: it sees only the remotes), in a session of its own."""
        home = self.worker_home(name, profiles)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "TIANSHU_"))}
        env.update(TIANSHU_MCP_HOME=str(home), TIANSHU_PREFECT_API_URL=self.api_url, PREFECT_API_AUTH_STRING=AUTH,
                   PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}")
        with open(self.root / f"worker-{name}.log", "ab") as out:
            proc = subprocess.Popen([CONSOLE, "worker", "--pool", pool, "--name", name, *extra], env=env,
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs[f"worker-{name}"] = proc
        return proc

    def wait_workers(self, pool: str, names: list[str], timeout_s: float = 120) -> None:
        """Until every named worker has polled ``pool`` (Prefect's own worker records say ONLINE)."""
        def online() -> bool:
            for name in names:
                proc = self.procs[f"worker-{name}"]
                assert proc.poll() is None, (self.root / f"worker-{name}.log").read_text()[-3000:]
            with self.api() as api:
                r = api.post(f"/work_pools/{pool}/workers/filter", json={})
                if r.status_code != 200:
                    return False
                seen = {w["name"] for w in r.json() if w.get("status") == "ONLINE"}
            return set(names) <= seen

        until(online, timeout_s, f"workers {names} of pool {pool}")

    def kill_worker(self, name: str) -> None:
        """``kill -9`` of a worker's process group (the worker and the flow-run launchers it
        started; its fork server, forked engines and agents live in sessions of their own)."""
        proc = self.procs[f"worker-{name}"]
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=30)

    def close(self) -> None:
        """Stop workers, server and database (every process group started here)."""
        for proc in self.procs.values():
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for proc in self.procs.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        bindir = pg_bin()
        if self.pg_dir is not None and bindir is not None:
            subprocess.run(_as_db_owner([str(bindir / "pg_ctl"), "-D", str(self.pg_dir / "data"), "-m", "immediate",
                                         "stop"]), capture_output=True)
            shutil.rmtree(self.pg_dir, ignore_errors=True)


def bare_remote(root: Path, name: str) -> Path:
    """A bare repository ``<root>/<name>.git`` holding the calc fixture on ``main`` (the remote
    the workers clone; the caller's path is not shared with them)."""
    src = make_calc_repo(root / "src" / name)
    bare = root / "remotes" / f"{name}.git"
    bare.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(src), str(bare)], check=True, capture_output=True)
    return bare


def sleepy_profiles(trace: Path, sleep_s: float = 1.0, **env: str) -> dict[str, Any]:
    """Agent profiles of a worker: ``scripted-sleep`` (fixed duration, then the right fix) and
    ``scripted-hang``."""
    return {
        "scripted-sleep": scripted_profile(mode="sleep", extra_env={"SCRIPTED_TRACE": str(trace), "SCRIPTED_SLEEP": str(sleep_s), **env}),
        "scripted": scripted_profile(),
        "scripted-ask": scripted_profile(mode="ask"),
        "scripted-hang": scripted_profile(mode="hang", extra_env={"SCRIPTED_PIDFILE": str(trace) + ".hang"}),
    }


def branch_file(bare: Path, branch: str, path: str) -> str:
    """A file's content on ``branch`` of a bare remote."""
    return git(bare, "show", f"{branch}:{path}")
