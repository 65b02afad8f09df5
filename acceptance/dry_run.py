"""Dry run: what a task would do, judged statically — nothing runs, nothing in the project changes
(docs/tools.md §3.7, docs/acceptance.md §7; docs/lifecycle.md §5).

The original let an agent write a plan (``.tianshu-mcp/dry-run-plan.json``) under a read-only
instruction and checked it. Here (docs/lifecycle.md §5 wins: no agent) the dry run is a preflight
of the real run plus, when the project holds such a plan, the same static checks of it:

* the acceptance that would judge the task — every layer parses, the checks that would run, and
  whether each check's program can be found (the project's tool directories first, as the
  runner does);
* git — a repository git answers for, its HEAD, and how many uncommitted changes would become
  part of the baseline;
* the plan file, when present — paths inside the project (``path_outside_project``), never into
  ``.git``/``.tianshu-mcp`` (``path_forbidden``), one action per path (``conflicting_actions``);
  warnings ``file_already_exists``, ``file_not_found``, ``file_unreadable``,
  ``edit_line_out_of_range``, ``edit_location_missing``.

Findings are ``{"severity": "error"|"warning", "code", "message", "path"?}``; any error blocks.
Reports are ``dry-run-report-<n>.md/json`` in the task directory (``kind: "dry-run"``; ``n``
counts dry runs, never agent rounds). Git is read with ``GIT_OPTIONAL_LOCKS=0`` (no index
refresh): the project is read, never written.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from ..core.files import atomic_write_json, atomic_write_text
from ..core.i18n import _
from .config import AcceptanceConfigError, resolve_checks
from .git import GitFailed, is_git_repo, worktree_status
from .runner import check_env

PLAN_FILE = ".tianshu-mcp/dry-run-plan.json"
"""Where a project may hold a change plan for the dry run to check (docs/acceptance.md §7)."""
FORBIDDEN_DIRS = (".git", ".tianshu-mcp")
_ACTIONS = ("create", "modify", "delete")
_MAX_PLAN_BYTES = 1 << 20
_MAX_READ_BYTES = 4 << 20


def finding(severity: str, code: str, message: str, path: str | None = None) -> dict[str, Any]:
    """One finding ``{"severity", "code", "message", "path"?}``."""
    out = {"severity": severity, "code": code, "message": message}
    if path is not None:
        out["path"] = path
    return out


def next_dry_run_number(task_dir: Path) -> int:
    """0 for the first dry run of a task, then one more than the highest ``dry-run-report-<n>``."""
    seen = [int(m.group(1)) for p in task_dir.glob("dry-run-report-*.json")
            if (m := re.fullmatch(r"dry-run-report-(\d+)\.json", p.name))]
    return max(seen) + 1 if seen else 0


def acceptance_preflight(project: str, home: Path, override: Any,
                         default_timeout_ms: int | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The acceptance a real round would apply, and its findings.

    ``default_timeout_ms`` (config ``verifyCommandTimeoutMs``) is shown for checks without their own.

    Returns:
        ``({"checks": [{"name", "cmd", "timeoutMs", "optional", "program"}], "requireChanges",
        "layers", "notes", "warnings"}, findings)``; ``program`` is the path the check's command
        resolves to, or None (finding ``check_command_not_found``).
    """
    import shutil

    try:
        resolved = resolve_checks(project, home, override)
    except AcceptanceConfigError as exc:
        return {}, [finding("error", "acceptance_config_invalid", exc.render())]
    env = check_env(project)
    findings: list[dict[str, Any]] = []
    checks = []
    for c in resolved.checks:
        argv0 = c.cmd[0] if c.cmd else ""
        if os.sep in argv0:
            path = Path(argv0) if os.path.isabs(argv0) else Path(project) / argv0
            program = str(path) if path.is_file() and os.access(path, os.X_OK) else None
        else:
            program = shutil.which(argv0, path=env.get("PATH", os.defpath))
        if program is None:
            findings.append(finding("error", "check_command_not_found",
                                    _("check {name}: {program} cannot be found (PATH and the project's tool "
                                      "directories); the round would be blocked").format(name=c.name,
                                                                                         program=repr(argv0))))
        checks.append({"name": c.name, "cmd": c.display_cmd, "timeoutMs": c.timeout_ms or default_timeout_ms,
                       "optional": c.optional,
                       "program": program})
    if not checks:
        findings.append(finding("warning", "no_checks", _("no command check would run: only git diff --check and "
                                                          "the zero-change gate would judge the agent's work")))
    if not resolved.require_changes:
        findings.append(finding("warning", "require_changes_off", _("requireChanges is off: an agent that changes "
                                                                    "nothing can pass")))
    return {"checks": checks, "requireChanges": resolved.require_changes, "layers": resolved.applied,
            "notes": resolved.notes, "warnings": resolved.warnings}, findings


def git_preflight(project: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``({"isRepo", "head", "uncommitted"}, findings)`` read without writing (no index refresh)."""
    try:
        if not is_git_repo(project):
            return {"isRepo": False}, [finding("warning", "not_a_git_repository",
                                               _("not a git repository: no baseline, no change analysis; only the "
                                                 "checks would judge the agent"))]
        head, entries = worktree_status(project)
    except GitFailed as exc:
        return {"isRepo": None}, [finding("error", "git_failed", exc.render())]
    found = []
    if entries:
        found.append(finding("warning", "worktree_dirty", _("{n} uncommitted change(s) would become part "
                                                            "of the baseline and not be attributed to the agent").format(
                                                                n=len(entries))))
    return {"isRepo": True, "head": head, "uncommitted": len(entries)}, found


def judge_preflight(acceptance: dict[str, Any], git: dict[str, Any]) -> list[dict[str, Any]]:
    """Findings of the acceptance and git preflights taken together: no repository and no command
    check means nothing could judge the work, which the real round blocks as ``NOTHING_VERIFIED``
    (docs/acceptance.md §3.4): the dry run says so as an error, not ``ready``."""
    if git.get("isRepo") is False and acceptance.get("checks") == []:
        return [finding("error", "nothing_verified",
                        _("the project is not a git repository and no command check would run: nothing could judge "
                          "the work and the task would end needs_attention [NOTHING_VERIFIED]; add checks to "
                          ".tianshu-mcp/acceptance.json"))]
    return []


def _inside(root: Path, rel: str) -> Path | None:
    """The resolved path of ``rel`` when it stays inside ``root`` (symlinks followed), else None."""
    if not rel or os.path.isabs(rel) or "\0" in rel:
        return None
    target = Path(os.path.realpath(root / rel))
    real_root = Path(os.path.realpath(root))
    return target if target == real_root or real_root in target.parents else None


def _check_edits(path: str, target: Path, edits: Any) -> list[dict[str, Any]]:
    if not isinstance(edits, list) or not edits:
        return []
    try:
        if target.stat().st_size > _MAX_READ_BYTES:
            raise OSError("too large to read")
        text = target.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return [finding("warning", "file_unreadable",
                        _("{path}: cannot read it to place the edits ({error})").format(path=path, error=exc), path)]
    lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    out = []
    for i, edit in enumerate(edits):
        edit = edit if isinstance(edit, dict) else {}
        line, symbol = edit.get("line"), edit.get("symbol")
        if isinstance(line, int) and not isinstance(line, bool) and not 1 <= line <= max(lines, 1):
            out.append(finding("warning", "edit_line_out_of_range",
                               _("{path}: edit {i} is at line {line}, the file has {lines}").format(
                                   path=path, i=i, line=line, lines=lines), path))
        elif isinstance(symbol, str) and symbol and symbol not in text:
            out.append(finding("warning", "edit_location_missing", _("{path}: edit {i} names {symbol}, which "
                                                                     "the file does not contain").format(
                                                                         path=path, i=i, symbol=repr(symbol)), path))
        elif not isinstance(line, int) and not (isinstance(symbol, str) and symbol):
            out.append(finding("warning", "edit_location_missing",
                               _("{path}: edit {i} has neither a line nor a symbol").format(path=path, i=i), path))
    return out


def check_plan(project: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """Statically check ``<project>/.tianshu-mcp/dry-run-plan.json`` when it exists (docs/acceptance.md §7).

    Returns:
        ``(None, [])`` without a plan; else ``({"path", "summary", "files": [{"path",
        "action", "reason"?}]}, findings)``. A plan that is not a JSON object with a ``files``
        list is one ``plan_invalid`` error.
    """
    root = Path(project)
    plan_path = root / PLAN_FILE
    if plan_path.is_symlink():  # never read what a link points at (/etc/passwd, another project)
        return {"path": PLAN_FILE}, [finding("error", "plan_invalid", _("{plan} is a symbolic link; the plan must be "
                                                                        "a file of the project").format(plan=PLAN_FILE),
                                             PLAN_FILE)]
    if not plan_path.is_file():
        return None, []
    try:
        if plan_path.stat().st_size > _MAX_PLAN_BYTES:
            raise ValueError(_("larger than {n} bytes").format(n=_MAX_PLAN_BYTES))
        data = json.loads(plan_path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or not isinstance(data.get("files"), list):
            raise ValueError(_('expected {shape}').format(shape='{"summary"?, "files": [{"path", "action", …}]}'))
    except (OSError, ValueError) as exc:
        return {"path": PLAN_FILE}, [finding("error", "plan_invalid", f"{PLAN_FILE}: {exc}", PLAN_FILE)]
    findings: list[dict[str, Any]] = []
    actions: dict[str, set[str]] = {}
    files = []
    for i, entry in enumerate(data["files"]):
        entry = entry if isinstance(entry, dict) else {}
        path, action = entry.get("path"), entry.get("action")
        if (not isinstance(path, str) or not path.strip() or any(ord(ch) < 32 for ch in path)
                or action not in _ACTIONS):
            findings.append(finding("error", "plan_invalid", _("files[{i}]: needs a path (non-empty, no control "
                                                               "characters) and an action ({actions})").format(
                                                                   i=i, actions="|".join(_ACTIONS))))
            continue
        rel = path.replace("\\", "/")
        while rel.startswith("./"):
            rel = rel[2:]
        files.append({"path": rel, "action": action, **({"reason": entry["reason"]} if entry.get("reason") else {})})
        target = _inside(root, rel)
        if target is None:
            findings.append(finding("error", "path_outside_project", _("{path}: outside the project").format(path=path),
                                    path))
            continue
        first = Path(os.path.relpath(target, os.path.realpath(root))).parts[:1]
        if first and first[0].casefold() in FORBIDDEN_DIRS:  # .GIT is .git on case-insensitive file systems
            findings.append(finding("error", "path_forbidden", _("{path}: {dir}/ is not the agent's to change").format(
                path=path, dir=first[0]), path))
            continue
        actions.setdefault(str(target), set()).add(action)
        if action == "create" and target.exists():
            findings.append(finding("warning", "file_already_exists",
                                    _("{path}: planned as created but exists").format(path=path), path))
        elif action in ("modify", "delete") and not target.is_file():
            findings.append(finding("warning", "file_not_found", (_("{path}: planned as modified but not found")
                                                                  if action == "modify" else
                                                                  _("{path}: planned as deleted but not found")).format(
                                                                      path=path), path))
        elif action == "modify":
            findings.extend(_check_edits(path, target, entry.get("edits")))
    for target, acts in actions.items():
        if len(acts) > 1:
            rel = os.path.relpath(target, os.path.realpath(root))
            findings.append(finding("error", "conflicting_actions", _("{path}: planned as {actions}").format(
                path=rel, actions=", ".join(sorted(acts))), rel))
    return {"path": PLAN_FILE, "summary": data.get("summary"), "files": files}, findings


def render_markdown(report: dict[str, Any]) -> str:
    """The dry-run report as markdown (what would run, then the findings)."""
    agent = report.get("agent") or {}
    acc = report.get("acceptance") or {}
    git = report.get("git") or {}
    if agent.get("ok"):
        how = _("`{argv}` in `{cwd}`, limit {ms} ms").format(argv=" ".join(agent.get("argv") or []),
                                                             cwd=agent.get("cwd"), ms=agent.get("timeoutMs"))
    else:
        how = _("not usable: {message}").format(message=agent.get("message"))
    git_line = (_("not a repository") if git.get("isRepo") is False else _("unreadable") if git.get("isRepo") is None
                else _("HEAD {head}, {n} uncommitted change(s)").format(head=str(git.get("head"))[:12],
                                                                       n=git.get("uncommitted")))
    lines = [_("# Dry run {number} — {verdict}").format(number=report["number"], verdict=report["verdict"]), "",
             _("- project: `{path}`").format(path=report["projectPath"]),
             _("- agent: `{agentId}` — {how}").format(agentId=agent.get("id"), how=how),
             _("- automatic rework rounds: {n}").format(n=report.get("autoFixRounds")),
             _("- git: {state}").format(state=git_line),
             "", _("## Checks that would run"), ""]
    for c in acc.get("checks") or []:
        where = f"`{c['program']}`" if c.get("program") else _("**not found**")
        lines.append((_("- {name}: `{cmd}` ({where}, timeout {ms} ms, optional)") if c.get("optional")
                      else _("- {name}: `{cmd}` ({where}, timeout {ms} ms)")).format(
                          name=c["name"], cmd=c["cmd"], where=where, ms=c.get("timeoutMs")))
    if not acc.get("checks"):
        lines.append(_("- (none)"))
    if acc:
        lines.append(_("- zero-change gate: on") if acc.get("requireChanges") else _("- zero-change gate: off"))
    plan = report.get("plan")
    if plan:
        lines += ["", _("## Plan `{path}`").format(path=plan["path"]), ""]
        if plan.get("summary"):
            lines += [str(plan["summary"]), ""]
        lines += [f"- {f['action']} `{f['path']}`" + (f" — {f['reason']}" if f.get("reason") else "") for f in plan.get("files") or []]
    lines += ["", _("## Findings"), ""]
    lines += [f"- [{f['severity'].upper()}] {f['code']}: {f['message']}" for f in report["findings"]] or [_("- none")]
    return "\n".join(lines) + "\n"


def write_report(task_dir: Path, report: dict[str, Any]) -> dict[str, str]:
    """Write ``dry-run-report-<number>.json`` and ``.md`` atomically; return ``{"md", "json"}``."""
    stem = task_dir / f"dry-run-report-{report['number']}"
    files = {"md": str(stem.with_suffix(".md")), "json": str(stem.with_suffix(".json"))}
    report["files"] = files
    atomic_write_json(stem.with_suffix(".json"), report)
    atomic_write_text(stem.with_suffix(".md"), render_markdown(report))
    return files
