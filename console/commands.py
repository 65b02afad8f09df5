"""CLI subcommands that print to stdout and never start the protocol (docs/tools.md §5).

* ``tianshu-mcp config acceptance [projectPath] [--task <taskId>]`` — the acceptance layers and
  the effective configuration, as JSON; exit code 0 even when a layer is broken, 2 on a usage error.
* ``tianshu-mcp config schema`` — the JSON Schema of acceptance.json (generated from the models).
* ``tianshu-mcp config check`` — ``config.json`` validated strictly (as run_task does), JSON; exit 1
  when invalid.
* ``tianshu-mcp schedule add <projectPath> --cron "<expr>" [--timezone TZ]`` /
  ``schedule list`` / ``schedule remove <projectPath>`` — cron re-verification of a project
  (deployment ``reverify``, one schedule per project), on the home's service (started when none
  runs; a home with a schedule keeps its service running).
* ``tianshu-mcp service start|stop|status`` — the home's background service.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from ..core.errors import ErrorCode, TianshuError
from ..core.settings import data_home, load_config

DEFAULT_SUMMARY = {"checks": "(default set)", "requireChanges": "(default true)",
                   "verifyConcurrency": "(inherits server config)", "visual": "(not configured)"}


def print_json(obj: Any) -> None:
    """A CLI subcommand's JSON answer on stdout (2-space; a closed pipe is not an error). Never
    called by the stdio server, whose stdout is the MCP stream."""
    try:
        print(json.dumps(obj, indent=2, ensure_ascii=False), flush=True)
    except BrokenPipeError:  # `| head` closed the pipe: not an error of ours
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit


KNOWN_KEYS = frozenset({"checks", "requireChanges", "verifyConcurrency", "visual", "baselineChecks", "baselinePolicy", "testIntegrity", "$schema"})


def _raw_keys(path: str) -> list[str]:
    """Top-level keys of a JSON layer file (empty when unreadable)."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return []
    return list(data) if isinstance(data, dict) else []


def config_acceptance(argv: list[str]) -> int:
    """``config acceptance``: layers global → project → override, applied order, effective values."""
    from ..acceptance.config import AcceptanceConfig as Cfg
    from ..acceptance.config import (
        AcceptanceConfigError,
        global_layer_path,
        merge_configs,
        parse_layer,
        project_layer_path,
        read_layer,
    )

    from ..core.ids import is_record_id

    project: str | None = None
    task_id: str | None = None
    error: str | None = None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--task":
            if i + 1 >= len(argv) or argv[i + 1].startswith("--"):
                error = "--task needs a taskId argument"
                break
            task_id = argv[i + 1]
            if not is_record_id(task_id):  # it names a directory under <home>/tasks: never a path
                error = f"--task needs a task id (tsk_<14 digits>_<6 hex> or vfy_…), got {task_id!r}"
                break
            i += 2
            continue
        if arg.startswith("--"):
            error = f"unknown option: {arg}"
            break
        if project is not None:
            error = f"extra argument: {arg}"
            break
        project = os.path.abspath(arg)
        i += 1
    if error:
        print_json({"ok": False, "error": error, "layers": [], "appliedOrder": [], "effective": DEFAULT_SUMMARY, "summary": ""})
        return 2
    home = data_home(create=False)  # reads only
    layers: list[dict[str, Any]] = []
    merged = Cfg()
    applied: list[str] = []
    ok = True
    top_error: str | None = None

    def add(source: str, path: str, load: Any) -> None:
        nonlocal merged, ok
        entry: dict[str, Any] = {"source": source, "path": path, "present": False}
        try:
            cfg = load()
        except AcceptanceConfigError as exc:
            entry.update(present=True, error={"code": exc.code.value, "message": exc.message})
            ok = False
        else:
            if cfg is not None:
                entry.update(present=True, config=cfg.to_json())
                raw = _raw_keys(path) if source != "override" else []
                unknown = sorted(k for k in raw if k not in KNOWN_KEYS)
                if unknown:  # dropped silently by the schema; a typo deserves a warning here
                    entry["unknownKeys"] = unknown
                merged = merge_configs(merged, cfg)
                applied.append(source)
        layers.append(entry)

    from ..acceptance.config import parse_layer_bytes
    from ..acceptance.pinning import load_pinned

    # a task's rounds are judged by the layers as they were at its baseline (acceptance.pinning)
    pinned = load_pinned(home / "tasks" / task_id) if task_id is not None else None
    at = " (as of the task's baseline)" if pinned is not None else ""

    def layer(path: Path, label: str, raw: bytes | None) -> Any:
        if pinned is None:
            return read_layer(path, label)
        return None if raw is None else parse_layer_bytes(raw, label, str(path) + at)

    gpath = global_layer_path(home)
    add("global", str(gpath) + at, lambda: layer(gpath, "global", pinned.global_raw if pinned else None))
    if project is not None:
        ppath = project_layer_path(project)
        add("project", str(ppath) + at, lambda: layer(ppath, "project", pinned.project_raw if pinned else None))
    else:
        layers.append({"source": "project", "path": "(no projectPath given)", "present": False})
    if task_id is not None:
        from ..core.record import record_path
        from ..core.taskstore import TaskStore

        snapshot = TaskStore(home).read(task_id)
        tpath = str(record_path(home, task_id))
        if snapshot is None:
            layers.append({"source": "override", "path": tpath, "present": False})
            top_error = f"task snapshot unreadable or missing: {task_id}"
            ok = False
        else:
            override = snapshot.get("acceptanceOverride")
            add("override", tpath, lambda: parse_layer(override, "override", tpath) if override is not None else None)
    else:
        layers.append({"source": "override", "path": "(no --task given, no task-level override)", "present": False})
    data = merged.to_json()
    effective = {
        "checks": ("(blocked: a layer is broken; no check would run)" if not ok
                   else len(data["checks"]) if data.get("checks") is not None else DEFAULT_SUMMARY["checks"]),
        "requireChanges": data["requireChanges"] if data.get("requireChanges") is not None else DEFAULT_SUMMARY["requireChanges"],
        "verifyConcurrency": data["verifyConcurrency"] if data.get("verifyConcurrency") is not None else DEFAULT_SUMMARY["verifyConcurrency"],
        "visual": "overridden" if data.get("visual") is not None else DEFAULT_SUMMARY["visual"],
        "baselineChecks": bool(data.get("baselineChecks", False)),
        "baselinePolicy": data.get("baselinePolicy", "tolerate-untargeted"),
    }
    summary = (f"effective layers={'>'.join(applied) or '(none)'} checks={effective['checks']} "
               f"requireChanges={effective['requireChanges']} verifyConcurrency={effective['verifyConcurrency']} "
               f"visual={effective['visual']}")
    out: dict[str, Any] = {"ok": ok}
    if project is not None:
        out["project"] = project
    if task_id is not None:
        out["taskId"] = task_id
    out.update(layers=layers, appliedOrder=applied, effective=effective, summary=summary)
    if top_error:
        out["error"] = top_error
    print_json(out)
    return 0


def config_schema(argv: list[str]) -> int:
    """``config schema``: print the JSON Schema of acceptance.json."""
    from ..acceptance.schema import acceptance_json_schema

    print_json(acceptance_json_schema())
    return 0


def config_check(argv: list[str]) -> int:
    """``config check``: validate ``<home>/config.json`` strictly (what run_task checks) and print
    ``{"ok": true, "file", "present", "config"}`` (effective values, the webhook secret masked) or
    ``{"ok": false, "file", "error": {"code", "message"}}``; exit 0 when valid, 1 when not."""
    from ..core.settings import check_config

    if argv:
        print_json({"ok": False, "error": f"extra argument: {argv[0]}"})
        return 2
    home = data_home(create=False)  # reads only
    path = home / "config.json"
    try:
        cfg = check_config(home)
    except TianshuError as exc:
        print_json({"ok": False, "file": str(path), "error": {"code": exc.code.value, "message": exc.message}})
        return 1
    print_json({"ok": True, "file": str(path), "present": path.exists(), "config": cfg.model_dump(mode="json", by_alias=True)})
    return 0


CONFIG_HELP = """usage: tianshu-mcp config acceptance [projectPath] [--task <taskId>]
       tianshu-mcp config schema
       tianshu-mcp config check

acceptance  the acceptance layers (global, project, task override) and what is in effect, as JSON
            (exit 0 even when a layer is broken: the JSON says so; 2 on a usage error)
schema      the JSON Schema of .tianshu-mcp/acceptance.json
check       validate config.json (run_task refuses a broken one) and print the effective values;
            exit 1 when invalid, with the field and why"""


def config(argv: list[str]) -> int:
    """``config <scope>``; ``--help`` prints usage (exit 0), an unknown scope exits 2."""
    scope = argv[0] if argv else ""
    if scope in ("--help", "-h") or "--help" in argv or "-h" in argv:
        print(CONFIG_HELP)
        return 0
    if scope == "acceptance":
        return config_acceptance(argv[1:])
    if scope == "schema":
        return config_schema(argv[1:])
    if scope == "check":
        return config_check(argv[1:])
    print_json({"ok": False, "error": f"unknown config subcommand: {scope or '(empty)'}",
            "usage": ["tianshu-mcp config acceptance [projectPath] [--task <taskId>]", "tianshu-mcp config schema",
                      "tianshu-mcp config check"]})
    return 2


# --- schedules ---------------------------------------------------------------------------------
def _connect() -> tuple[str, str]:
    """The home's service (started when none runs); returns ``(api_url, auth)``. Prefect's
    settings are exported before Prefect is imported, so no ephemeral API is ever started."""
    from ..hosting.identity import auth_string
    from ..hosting.launcher import connect
    from ..deployments.topology import export_env, remote_api_url

    home = data_home()
    config = load_config(home)
    remote = remote_api_url(config)
    if remote:
        export_env(home, remote, None)
        return remote, os.environ.get("PREFECT_API_AUTH_STRING", "")
    info = connect(home, config.prefect.ready_timeout_ms / 1000)
    auth = auth_string(home)
    export_env(home, info.api_url, auth)
    return info.api_url, auth


def schedule(argv: list[str]) -> int:
    """``schedule add|list|remove``: cron re-verification schedules on deployment ``reverify``."""
    import anyio

    parser = argparse.ArgumentParser(prog="tianshu-mcp schedule")
    sub = parser.add_subparsers(dest="action", required=True)
    add = sub.add_parser("add", help="schedule re-verification of a project")
    add.add_argument("projectPath")
    add.add_argument("--cron", required=True, help='cron expression, e.g. "0 3 * * *"')
    add.add_argument("--timezone", default=None, help="IANA time zone (default: UTC)")
    sub.add_parser("list", help="list the schedules")
    rm = sub.add_parser("remove", help="remove a project's schedule")
    rm.add_argument("projectPath")
    args = parser.parse_args(argv)
    try:
        from ..core.paths import SafeProject, check_project_path, norm_path, project_key

        project: SafeProject | None = None
        if args.action == "add":
            project = check_project_path(os.path.abspath(args.projectPath), data_home())
            _check_cron(args.cron, args.timezone)
        elif args.action == "remove":
            # the project may be gone already: its schedule must still be removable
            raw = os.path.abspath(args.projectPath)
            norm = norm_path(os.path.realpath(raw))
            project = SafeProject(norm=norm, raw=raw, via_symlink=False, key=project_key(norm))
        api_url, auth = _connect()
    except TianshuError as exc:
        print(exc.render(), file=sys.stderr)
        return 1
    return anyio.run(_schedule, args, project, api_url, auth)


def _check_cron(cron: str, timezone: str | None) -> None:
    """Validate a cron expression and time zone. Raises TianshuError(INVALID_ARGUMENT) in one line."""
    from prefect.client.schemas.schedules import CronSchedule
    from pydantic import ValidationError

    try:
        CronSchedule(cron=cron, timezone=timezone)
    except ValidationError as exc:
        reason = "; ".join(str(e.get("msg", "")).removeprefix("Value error, ") for e in exc.errors())
        raise TianshuError(ErrorCode.INVALID_ARGUMENT, f"--cron {cron!r}: {reason}") from exc


async def _schedule(args: argparse.Namespace, project: Any, api_url: str, auth: str) -> int:
    from prefect.client.orchestration import PrefectClient
    from prefect.client.schemas.actions import DeploymentScheduleCreate
    from prefect.client.schemas.schedules import CronSchedule

    async with PrefectClient(api_url, auth_string=auth or None) as client:
        dep = await client.read_deployment_by_name("reverify/reverify")
        schedules = await client.read_deployment_schedules(dep.id)
        if args.action == "list":
            print_json({"ok": True, "schedules": [
                {"projectPath": (s.parameters or {}).get("project_path"), "cron": getattr(s.schedule, "cron", None),
                 "timezone": getattr(s.schedule, "timezone", None), "active": s.active, "slug": s.slug}
                for s in schedules]})
            return 0
        slug = f"reverify-{project.key}"
        existing = [s for s in schedules if s.slug == slug]
        if args.action == "remove":
            if not existing:
                print(TianshuError(ErrorCode.INVALID_ARGUMENT, f"no re-verification schedule for {project.norm}").render(),
                      file=sys.stderr)
                return 1
            for s in existing:
                await client.delete_deployment_schedule(dep.id, s.id)
            print_json({"ok": True, "projectPath": project.norm, "removed": len(existing)})
            return 0
        for s in existing:  # add replaces the project's schedule
            await client.delete_deployment_schedule(dep.id, s.id)
        await client.create_deployment_schedules(dep.id, [DeploymentScheduleCreate(
            schedule=CronSchedule(cron=args.cron, timezone=args.timezone), active=True,
            parameters={"project_path": project.norm}, slug=slug)])
        print_json({"ok": True, "projectPath": project.norm, "cron": args.cron, "timezone": args.timezone, "slug": slug,
                "note": "runs fire while the home's service runs; a schedule keeps the service from exiting when idle"})
        return 0


# --- the background service ------------------------------------------------------------------
SERVICE_HELP = """usage: tianshu-mcp service start|stop|status [--home DIR]

start   start the data home's background service (Prefect API + UI + process worker), detached,
        unless it runs already; print its status (JSON)
stop    stop it: running tasks are interrupted, queued ones stay queued for the next start
status  whether it runs, its pid, API/UI address, log file and credentials file (JSON)

The service is started on demand by every tianshu-mcp process that needs Prefect (stdio servers,
schedule, demo) and exits by itself after prefect.idleExitMs (config.json, default 10 min) with
no active or queued run, no connected client and no schedule. Its log: <home>/logs/service.log.
The UI asks for a password: the whole line of <home>/prefect/credentials.

--home DIR  the data home (default $TIANSHU_MCP_HOME, else ~/.tianshu-mcp), as for demo --home.
status and stop only read: on a home that does not exist they create nothing and say so."""


def pop_home(argv: list[str]) -> tuple[list[str], str | None]:
    """Take ``--home DIR`` / ``--home=DIR`` out of ``argv``; returns ``(the other arguments, DIR or
    None)``. Raises ValueError when ``--home`` has no value."""
    rest: list[str] = []
    home: str | None = None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--home":
            if i + 1 >= len(argv) or not argv[i + 1] or argv[i + 1].startswith("-"):
                raise ValueError("--home needs a directory")
            home, i = argv[i + 1], i + 2
            continue
        if arg.startswith("--home="):
            home = arg.split("=", 1)[1]
            if not home:
                raise ValueError("--home needs a directory")
        else:
            rest.append(arg)
        i += 1
    return rest, home


def no_home_answer(home: Path) -> dict[str, object]:
    """What a read-only command prints for a data home that does not exist (it creates none):
    ``{"running": false, "exists": false, "home", "message"}``."""
    return {"running": False, "exists": False, "home": str(home),
            "message": f"no tianshu-mcp data home at {home}: nothing was created and nothing runs there "
                       "(a home is created on first use: service start, demo, or an MCP host's first call)"}


def service(argv: list[str]) -> int:
    """``service start|stop|status``; exit 0 on success, 1 on a failure, 2 on a usage error."""
    from ..hosting import launcher

    if not argv or argv[0] in ("--help", "-h") or "--help" in argv or "-h" in argv:
        print(SERVICE_HELP)
        return 0 if argv else 2
    try:
        args, home_arg = pop_home(argv)
    except ValueError as exc:
        print(f"tianshu-mcp service: {exc} (see --help)", file=sys.stderr)
        return 2
    action, extra = (args[0], args[1:]) if args else ("", [])
    if action not in ("start", "stop", "status") or extra:
        print(f"tianshu-mcp service: unknown arguments: {' '.join(argv)} (see --help)", file=sys.stderr)
        return 2
    if home_arg is not None:  # the same meaning as TIANSHU_MCP_HOME, for this process and the service it starts
        os.environ["TIANSHU_MCP_HOME"] = str(Path(home_arg).expanduser().resolve())
    try:
        home = data_home(create=action == "start")
        if action != "start" and not home.is_dir():
            answer = no_home_answer(home)
            if action == "stop":
                answer.update(stopped=False, pid=None)
            print_json(answer)
            return 0
        if action == "start":
            launcher.connect(home, load_config(home).prefect.ready_timeout_ms / 1000)
            print_json(launcher.status(home))
            return 0
        if action == "stop":
            result = launcher.stop(home)
            print_json(result)
            return 0 if result["stopped"] or result["pid"] is None else 1
        print_json(launcher.status(home))
        return 0
    except TianshuError as exc:
        print(exc.render(), file=sys.stderr)
        return 1
