"""``tianshu-mcp worker``: the command line of a scale-out worker (:mod:`tianshu_mcp.hosting.remote_worker`)."""

from __future__ import annotations

import sys

from ..core.errors import TianshuError
from ..core.remotes import check_pool

USAGE = """usage: tianshu-mcp worker --pool NAME [--limit N] [--pool-limit N] [--name NAME]

Serve work pool NAME of the Prefect server named by TIANSHU_PREFECT_API_URL (or prefect.apiUrl in
the home's config.json), with this machine's data home (TIANSHU_MCP_HOME) and agent profiles,
until SIGINT/SIGTERM. Creates the pool and its run-task deployment when missing.
  --limit N        at most N flow runs of this worker at once (default: no limit of its own)
  --pool-limit N   set the pool's concurrency limit (all its workers together) to N
  --name NAME      the worker's name in the Prefect UI (default tianshu-<host>-<pid>)
credentials: PREFECT_API_AUTH_STRING / PREFECT_API_KEY for the API and git's own (credential
helper, SSH key, GIT_ASKPASS) for the remotes, from this process's environment only."""


def _int(value: str, flag: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise SystemExit(f"tianshu-mcp worker: {flag} needs a whole number, got {value!r}") from None
    if not 1 <= n <= 1000:
        raise SystemExit(f"tianshu-mcp worker: {flag} must be 1..1000, got {n}")
    return n


def parse(argv: list[str]) -> dict[str, object]:
    """``{"pool", "limit", "pool_limit", "name"}`` from the command line.

    Raises:
        SystemExit: a usage error (its text says which).
    """
    out: dict[str, object] = {"pool": None, "limit": None, "pool_limit": None, "name": None}
    flags = {"--pool": "pool", "--limit": "limit", "--pool-limit": "pool_limit", "--name": "name"}
    argv = [part for arg in argv for part in (arg.split("=", 1) if arg.startswith("--") and "=" in arg else [arg])]
    i = 0
    while i < len(argv):
        flag = argv[i]
        if flag not in flags or i + 1 >= len(argv):
            raise SystemExit(f"tianshu-mcp worker: unknown or incomplete argument {flag!r} (see --help)")
        value = argv[i + 1]
        key = flags[flag]
        out[key] = _int(value, flag) if key in ("limit", "pool_limit") else value
        i += 2
    if not out["pool"]:
        raise SystemExit("tianshu-mcp worker: --pool NAME is required")
    try:
        check_pool(str(out["pool"]))
    except TianshuError as exc:
        raise SystemExit(f"tianshu-mcp worker: {exc.message}") from None
    return out


def main(argv: list[str]) -> int:
    """``tianshu-mcp worker …``; returns the exit code (2: usage, 1: no usable API)."""
    from ..hosting.remote_worker import run_worker

    if argv and argv[0] in ("--help", "-h"):
        print(USAGE)
        return 0
    try:
        opts = parse(argv)
    except SystemExit as exc:
        print(exc, file=sys.stderr)
        return 2
    try:
        run_worker(str(opts["pool"]), opts["name"], opts["limit"], opts["pool_limit"])  # type: ignore[arg-type]
    except TianshuError as exc:
        print(f"tianshu-mcp worker: {exc.message}", file=sys.stderr)
        return 1
    return 0
