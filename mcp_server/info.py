"""query_info: the task list, a round's report and the agent profiles (docs/tools.md §3.5).

Also the per-branch argument whitelist every multi-branch tool shares (docs/tools.md §1.3):
``manage_task`` per action and ``query_info`` per type.
"""

from __future__ import annotations

import os
from typing import Any

import anyio
import mcp_types as types

from ..adapters.doctor import diagnose_agents
from ..adapters.profiles import list_agents
from ..core.errors import ErrorCode, TianshuError
from ..core.i18n import _
from ..core.paths import norm_path
from .format import ok_result
from .outputs import report_meta
from .taskops import TaskService

MAX_REPORT_BYTES = 48000
"""query_info(type=report) quotes at most this many bytes of a report (the reply stays under 64 KiB)."""


def branch_whitelist(branch: str, args: dict[str, Any], allowed: tuple[str, ...]) -> None:
    """Refuse any argument of ``args`` (not None) outside ``allowed`` for this branch.

    ``branch`` names it in the message (e.g. ``"action=cancel"``). Raises ``TianshuError``
    ``INVALID_ARGUMENT`` naming the extra keys, sorted, and the allowed ones (docs/tools.md §1.3).
    """
    extra = [k for k, v in args.items() if v is not None and k not in allowed]
    if extra:
        raise TianshuError(
            ErrorCode.INVALID_ARGUMENT,
            _("{branch} does not accept: {keys} (allowed: {allowed})").format(
                branch=branch, keys=", ".join(sorted(extra)), allowed=", ".join(allowed)),
        )


async def query_info(service: TaskService, runtime: Any, args: dict[str, Any]) -> types.CallToolResult:
    """Answer ``query_info`` for ``type`` tasks | report | profiles (docs/tools.md §3.5).

    ``args`` is already schema-checked. Raises ``TianshuError`` for a key the type does not take,
    a report-less task or round, or an unknown task.
    """
    kind = args["type"]
    allowed = {
        "tasks": ("type", "projectPath", "status", "limit"),
        "report": ("type", "taskId", "round"),
        "profiles": ("type",),
    }[kind]
    branch_whitelist(f"type={kind}", args, allowed)
    if kind == "tasks":
        return await _list(service, runtime, args)
    if kind == "report":
        return _report(service, args)
    return await _profiles(runtime)


async def _list(service: TaskService, runtime: Any, args: dict[str, Any]) -> types.CallToolResult:
    project = args.get("projectPath")
    norm = None
    if project is not None:
        norm = norm_path(os.path.realpath(project)) if os.path.exists(project) else norm_path(os.path.abspath(project))
    skipped: list[str] = []
    views = await service.list_tasks(norm, args.get("status"), int(args.get("limit", 50)), skipped)
    note = (_("note: {n} damaged task record(s) left out (TASK_RECORD_CORRUPT): ").format(n=len(skipped))
            + ", ".join(skipped[:5]) + (" …" if len(skipped) > 5 else "")) if skipped else None
    meta: dict[str, Any] = {"ok": True, "skippedRecords": len(skipped) or None,
                            "tasks": [v.meta(runtime) for v in views]}
    if not views:
        return ok_result(_("no task matches.") + (f"\n{note}" if note else ""), {**meta, "message": _("empty list")})
    rows = [_("tasks ({n}; columns: taskId / status / agent / project / brief)").format(n=len(views))]
    for v in views:
        t = v.task
        rows.append(f"{t['taskId']}\t{v.status:<15}\t{str(t.get('agentId') or ''):<8}\t{t.get('projectPath', '')}\t{str(t.get('task') or '')[:60]}")
    if note:
        rows.append(note)
    return ok_result("\n".join(rows), {**meta, "message": _("{n} task(s)").format(n=len(views))})


def _report(service: TaskService, args: dict[str, Any]) -> types.CallToolResult:
    if not args.get("taskId"):
        raise TianshuError(ErrorCode.INVALID_ARGUMENT, _("type=report needs a non-empty taskId"))
    task = service.read_task(args["taskId"])
    tdir = service.store.dir(task["taskId"])
    if "round" in args and args["round"] is not None:
        path = tdir / f"report-{int(args['round'])}.md"
        if not path.is_file():
            raise TianshuError(ErrorCode.INVALID_ARGUMENT,
                               _("round {round} has no report ({path})").format(round=int(args["round"]), path=path))
    else:
        rounds = sorted(int(p.stem.split("-")[1]) for p in tdir.glob("report-*.md") if p.stem.split("-")[1].isdigit())
        if not rounds:
            raise TianshuError(ErrorCode.INVALID_STATE, _("task {taskId} has no acceptance report yet "
                                                          "(verification off or not run yet)").format(taskId=task["taskId"]))
        path = tdir / f"report-{rounds[-1]}.md"
    with open(path, "rb") as fh:
        raw = fh.read(MAX_REPORT_BYTES + 1)
    text = raw[:MAX_REPORT_BYTES].decode("utf-8", errors="ignore")
    if len(raw) > MAX_REPORT_BYTES:  # a 10.6 MB report made a reply no host could read
        text = (text.rsplit("\n", 1)[0]
                + "\n\n" + _("… report cut at {limit} bytes (the file has {size}); "
                               "read the whole report at {path} or its JSON at {json}").format(
                                   limit=MAX_REPORT_BYTES, size=path.stat().st_size, path=path, json=path.with_suffix(".json")))
    return ok_result(text, report_meta(task["taskId"], path, truncated=len(raw) > MAX_REPORT_BYTES))


async def _profiles(runtime: Any) -> types.CallToolResult:
    agents = await anyio.to_thread.run_sync(list_agents, runtime.home)
    # the facts of `agents doctor` (version vs testedVersions, flags, node, auth, problems); probes
    # run in parallel, bounded and cached, and never start a custom command (adapters/doctor.py)
    infos = [d.to_json() for d in await anyio.to_thread.run_sync(diagnose_agents, agents)]
    rows = [_("agents and executable probe results (columns: status / id / name / driver / profileStatus / message)")]
    for a, info in zip(agents, infos):
        p = a.profile
        # the labels outside the f-string: Babel's extractor does not see a _() call inside one
        verdict = _("[PASS] available") if a.ok else _("[FAIL] unavailable")
        rows.append(f"{verdict}\t{a.id}\t{a.display_name}\t"
                    f"driver={p.driver if p else 'unknown'}\tprofileStatus={p.status if p else 'unknown'}\t{a.message}"
                    + (_(" [source: {source}]").format(source=a.source) if a.source else "")
                    + (_(" [version: {version}]").format(version=info["version"]) if info["version"] else "")
                    + (f" [{info['versionStatus']}: {info['testedVersions']}]" if info["testedVersions"] else "")
                    + "".join(f" [problem: {problem}]" for problem in info["problems"]))
    return ok_result("\n".join(rows), {"ok": True, "message": _("{n} agent(s)").format(n=len(agents)), "checks": [],
                                       "profiles": infos})
