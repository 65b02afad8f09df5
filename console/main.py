"""Console script ``tianshu-mcp``: argv dispatch (docs/tools.md §4–§5).

* ``tianshu-mcp`` — the stdio MCP server (a client of the home's service, started on demand).
* ``tianshu-mcp service start|stop|status [--home DIR]`` — the home's background service (see :mod:`.commands`).
* ``tianshu-mcp server`` — that service in the foreground, until SIGINT/SIGTERM.
* ``tianshu-mcp worker --pool NAME`` — a worker of a shared Prefect server (:mod:`.worker`).
* ``tianshu-mcp demo [--home DIR] [--rounds N] [--clean]`` — the main job end to end on a generated repository
  (:mod:`.demo`; ``--clean`` removes what it created).
* ``tianshu-mcp config …`` / ``tianshu-mcp schedule …`` — see :mod:`.commands`.
* ``tianshu-mcp visual …`` — visual acceptance (baselines, rules reviews, artifacts): see :mod:`.visual`.
* ``tianshu-mcp holdout add|list|remove …`` — a project's holdout checks: see :mod:`.holdout`.
* ``tianshu-mcp agents doctor [--home DIR] [--json]`` — each agent profile's executable, version, flags,
  Node.js and credentials: see :mod:`.agents`.

Subcommands print to stdout and never start the protocol; the server prints nothing to stdout.
"""

from __future__ import annotations

import logging
import os
import sys

from .. import __version__
from ..core.log import setup_logging
from ..core.settings import data_home, load_config

log = logging.getLogger("tianshu_mcp")

USAGE = """usage: tianshu-mcp [--no-skill-install] [--approve-skill-update]   serve MCP over stdio (what an MCP host runs)
       tianshu-mcp service start|stop|status [--home DIR]   the home's background service (Prefect API + UI + worker)
       tianshu-mcp server                       run that service in the foreground until stopped
       tianshu-mcp worker --pool NAME [--limit N]   serve a work pool of a shared Prefect server (scale-out)
       tianshu-mcp demo [--home DIR] [--rounds N] | --clean   run the main job on a generated repository (says where it writes) / remove what it wrote
       tianshu-mcp config acceptance [projectPath] [--task ID]   show the acceptance layers (JSON)
       tianshu-mcp config schema                 the JSON Schema of .tianshu-mcp/acceptance.json
       tianshu-mcp config check                  validate config.json (JSON; exit 1 when invalid)
       tianshu-mcp schedule add PROJECT --cron EXPR [--timezone TZ] | list | remove PROJECT
       tianshu-mcp visual init|doctor|baseline|rules|artifacts|content …   visual acceptance (JSON; see visual --help)
       tianshu-mcp holdout add --project PATH --name NAME --area AREA [--timeout-ms N] [--file REL=LOCALPATH ...] -- CMD ARGS...
       tianshu-mcp holdout list --project PATH | remove --project PATH --name NAME   checks the agent never sees
       tianshu-mcp agents doctor [--home DIR] [--json]   each agent's executable, version, flags, node, auth
       tianshu-mcp --version

every subcommand takes --help.
environment: TIANSHU_MCP_HOME (data home, default ~/.tianshu-mcp),
             TIANSHU_PREFECT_API_URL (use an external Prefect server instead of the home's service),
             TIANSHU_MCP_SKILL_TARGET (skill install directory, default ~/.rivet/skills/tianshu-mcp),
             TIANSHU_MCP_NO_SKILL_INSTALL=1 / TIANSHU_MCP_APPROVE_SKILL_UPDATE=1 (see README, Skill self-install)"""

SERVER_HELP = """usage: tianshu-mcp server

Run the data home's service in the foreground: the Prefect API + UI on 127.0.0.1 (SQLite under
<home>/prefect), the process worker of work pool 'tianshu' and the submission intake, until
SIGINT/SIGTERM (running tasks are then interrupted; queued ones stay queued). No idle exit: use it
under a process supervisor. Exits 3 when another process already hosts the home."""


def _fail(msg: str) -> int:
    print(f"tianshu-mcp failed to start: {msg}", file=sys.stderr)
    return 1


def run_stdio(argv: list[str]) -> int:
    """Serve MCP over stdio; returns the exit code (0 on a clean close, 1 on start-up failure)."""
    import anyio

    from ..mcp_server.runtime import Runtime

    try:
        home = data_home()
        setup_logging(home)
        runtime = Runtime(home, load_config(home))
    except Exception as exc:  # noqa: BLE001
        return _fail(str(exc))
    log.info("Prefect hosting: %s", runtime.mode)
    if runtime.mode == "service":
        # connect (and on a cold home start the service) now, beside the MCP SDK's imports
        # below rather than after them; the thread's own import is done here first, since two
        # threads importing at once can meet a half-initialised module (docs/design-notes.md, note 85)
        from ..hosting import launcher  # noqa: F401

        runtime.start_background()
    from ..mcp_server.server import serve_stdio  # the MCP SDK: ≈0.5 s of imports
    from ..mcp_server.skill_boot import start_skill_install

    # docs/agents-tasks.md §2.14: a daemon thread, so the handshake never waits for it
    start_skill_install(runtime.config, no_install_flag="--no-skill-install" in argv,
                        approve_flag="--approve-skill-update" in argv)
    try:
        anyio.run(serve_stdio, runtime)
    except KeyboardInterrupt:
        pass
    return 0


def run_daemon(argv: list[str]) -> int:
    """``tianshu-mcp server``: the home's service in the foreground, no idle exit (docs/architecture.md
    §3)."""
    if argv and argv[0] in ("--help", "-h"):
        print(SERVER_HELP)
        return 0
    if argv:
        print(f"tianshu-mcp server: unknown arguments: {' '.join(argv)} (see --help)", file=sys.stderr)
        return 2
    from ..hosting.service import run

    try:
        home = data_home()
        setup_logging(home, file_name="service.log")
        config = load_config(home)
    except Exception as exc:  # noqa: BLE001
        return _fail(str(exc))

    def announce(info: object) -> None:
        print(f"tianshu-mcp server: Prefect UI {info.ui_url}  API {info.api_url}  home {home}",  # type: ignore[attr-defined]
              file=sys.stderr, flush=True)

    return run(home, config, 0, announce)


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
    if args and args[0] == "service":
        from .commands import service

        return service(args[1:])
    if args and args[0] == "config":
        from .commands import config

        return config(args[1:])
    if args and args[0] == "schedule":
        from .commands import schedule

        return schedule(args[1:])
    if args and args[0] == "visual":
        from .visual import main as visual_main

        return visual_main(args[1:])
    if args and args[0] == "holdout":
        from .holdout import main as holdout_main

        return holdout_main(args[1:])
    if args and args[0] == "agents":
        from .agents import main as agents_main

        return agents_main(args[1:])
    if args and args[0] == "worker":
        from .worker import main as worker_main

        return worker_main(args[1:])
    if args and args[0] == "demo":
        from .demo import main as demo_main

        return demo_main(args[1:])
    flags = {"--no-skill-install", "--approve-skill-update"}
    unknown = [a for a in args if a not in flags]
    if unknown:
        print(f"tianshu-mcp: unknown arguments: {' '.join(unknown)} (see tianshu-mcp --help)", file=sys.stderr)
        return 2
    if "--no-skill-install" in args:
        os.environ["TIANSHU_MCP_NO_SKILL_INSTALL"] = "1"
    return run_stdio(args)


if __name__ == "__main__":
    sys.exit(main())
