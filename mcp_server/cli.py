"""Console script ``tianshu-mcp``: argv dispatch (10-tools §4–§5).

* ``tianshu-mcp`` — the stdio MCP server (hosts Prefect unless another process of this home does).
* ``tianshu-mcp server`` — daemon mode: Prefect API + UI + worker, no stdio, until SIGINT/SIGTERM.
* ``tianshu-mcp demo [--home DIR] [--rounds N]`` — the main job end to end on a generated repository.
* ``tianshu-mcp config …`` / ``tianshu-mcp schedule …`` — see :mod:`.commands`.

Subcommands print to stdout and never start the protocol; the server prints nothing to stdout.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading

from .. import __version__
from ..core.log import setup_logging
from ..core.settings import data_home, load_config

log = logging.getLogger("tianshu_mcp")

USAGE = """usage: tianshu-mcp [--no-skill-install]     serve MCP over stdio (what an MCP host runs)
       tianshu-mcp server                       host Prefect API + UI + worker until stopped (daemon)
       tianshu-mcp demo [--home DIR] [--rounds N]  run the main job on a generated repository
       tianshu-mcp config acceptance [projectPath] [--task ID]   show the acceptance layers (JSON)
       tianshu-mcp config schema                 the JSON Schema of .tianshu-mcp/acceptance.json
       tianshu-mcp schedule add PROJECT --cron EXPR [--timezone TZ] | list | remove PROJECT
       tianshu-mcp --version

environment: TIANSHU_MCP_HOME (data home, default ~/.tianshu-mcp),
             TIANSHU_PREFECT_API_URL (use an external Prefect server instead of the embedded one)"""


def _fail(msg: str) -> int:
    print(f"tianshu-mcp failed to start: {msg}", file=sys.stderr)
    return 1


def run_stdio(argv: list[str]) -> int:
    """Serve MCP over stdio; returns the exit code (0 on a clean close, 1 on start-up failure)."""
    import anyio

    from .runtime import Runtime
    from .server import serve_stdio

    try:
        home = data_home()
        setup_logging(home)
        runtime = Runtime(home, load_config(home))
    except Exception as exc:  # noqa: BLE001
        return _fail(str(exc))
    log.info("Prefect topology: %s (%s)", runtime.topology.mode, runtime.api_url)
    try:
        anyio.run(serve_stdio, runtime)
    except KeyboardInterrupt:
        pass
    return 0


def run_daemon(argv: list[str]) -> int:
    """Daemon mode: host Prefect API + UI + worker until SIGINT/SIGTERM (00-design §3)."""
    import anyio

    from .runtime import Runtime
    from .service import TaskService
    from .sweep import shutdown_interrupt

    try:
        home = data_home()
        setup_logging(home)
        runtime = Runtime(home, load_config(home))
        if not runtime.hosting:
            return _fail(f"another process already hosts Prefect for {home} at {runtime.ui_url}")
        runtime.start_blocking()
    except Exception as exc:  # noqa: BLE001
        return _fail(str(exc))
    print(f"tianshu-mcp server: Prefect UI {runtime.ui_url}  API {runtime.api_url}  home {home}", file=sys.stderr, flush=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(0.5):
        pass

    async def _shutdown() -> None:
        service = TaskService(runtime)
        try:
            await shutdown_interrupt(service)
        finally:
            await service.close()

    try:
        anyio.run(_shutdown)
    finally:
        runtime.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``tianshu-mcp`` console script."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("--version", "-V"):
        print(f"tianshu-mcp {__version__}")
        return 0
    if args and args[0] in ("--help", "-h", "help"):
        print(USAGE)
        return 0
    if args and args[0] == "server":
        return run_daemon(args[1:])
    if args and args[0] == "config":
        from .commands import config

        return config(args[1:])
    if args and args[0] == "schedule":
        from .commands import schedule

        return schedule(args[1:])
    if args and args[0] == "demo":
        from .demo import main as demo_main

        return demo_main(args[1:])
    flags = {"--no-skill-install", "--approve-skill-update"}
    unknown = [a for a in args if a not in flags]
    if unknown:
        return _fail(f"unknown arguments: {' '.join(unknown)} (see tianshu-mcp --help)")
    if "--no-skill-install" in args:
        os.environ["TIANSHU_MCP_NO_SKILL_INSTALL"] = "1"
    return run_stdio(args)


if __name__ == "__main__":
    sys.exit(main())
