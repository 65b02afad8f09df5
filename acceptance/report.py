"""Report artifacts: ``report-<N>.json``, ``report-<N>.md`` and the tool summary text.

Source: 20-acceptance §1.5 (report.json keys and order), §5.1 (markdown layout, here in English),
§5.2 (``summarizeReport``, English). Writes are atomic (``core.files.atomic_write_*``).
The HTML report (only with visual results) belongs to the visual package and is not written here.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Mapping

from ..core.files import atomic_write_json, atomic_write_text

__all__ = [
    "REPORT_KEY_ORDER",
    "report_paths",
    "ordered_report",
    "render_markdown",
    "write_report",
    "summarize_report",
    "fence",
    "CANCELLED_MARK",
]

REPORT_KEY_ORDER = (
    "round",
    "taskId",
    "projectPath",
    "startedAt",
    "finishedAt",
    "passed",
    "verdict",
    "checks",
    "analysis",
    "files",
    "message",
    "blockingIssues",
    "visual",
    "repairDirectives",
)
"""report.json top-level keys in write order (20-acceptance §1.5); the last three only when present."""

CANCELLED_MARK = "task cancelled"
"""A report whose message contains this was interrupted by cancellation (20-acceptance §5.2)."""

MD_TAIL_LINES = 40


def report_paths(task_dir: str | os.PathLike[str], round_: int) -> tuple[Path, Path]:
    """``(<task_dir>/report-<N>.md, <task_dir>/report-<N>.json)``."""
    d = Path(task_dir)
    return d / f"report-{round_}.md", d / f"report-{round_}.json"


def ordered_report(report: Mapping[str, Any]) -> dict[str, Any]:
    """A copy with keys in :data:`REPORT_KEY_ORDER`; optional keys that are None/absent are omitted,
    unknown keys follow at the end."""
    out: dict[str, Any] = {}
    for key in REPORT_KEY_ORDER:
        if key in report and not (key in ("blockingIssues", "visual", "repairDirectives") and report[key] in (None, [])):
            out[key] = report[key]
    for key, value in report.items():
        if key not in out and key not in REPORT_KEY_ORDER and value is not None:
            out[key] = value
    return out


def fence(text: str) -> str:
    """A backtick fence longer than any backtick run inside ``text`` (min 3)."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def _check_line(c: Mapping[str, Any]) -> str:
    tag = "SKIP" if c.get("skipped") else "PASS" if c.get("passed") else "FAIL"
    line = f"- [{tag}] {c.get('name')} — `{c.get('cmd')}` ({c.get('durationMs', 0)}ms)"
    if c.get("skipped") and c.get("reason"):
        line += f" — {c['reason']}"
    elif tag == "FAIL" and c.get("optional"):
        line += " — optional (does not affect the verdict)"
    return line


def render_markdown(report: Mapping[str, Any], visual_section: str = "") -> str:
    """Render ``report-<N>.md`` (20-acceptance §5.1 layout, English text).

    Sections: title + bullets (task, project, started, finished, verdict); ``## Command checks``
    (failing checks get timeout/exit code/reason and the last 40 output lines); ``## Code analysis``
    (changed files, diffstat, suspicious markers/warnings, notes); ``## Structured repair
    directives``; ``visual_section`` (markdown from the visual package, empty when none); ``---``
    and the message.
    """
    n = report.get("round", 0)
    lines: list[str] = [
        f"# Acceptance report — round {n}",
        "",
        f"- Task: {report.get('taskId', '')}",
        f"- Project: {report.get('projectPath', '')}",
        f"- Started: {report.get('startedAt', '')}",
        f"- Finished: {report.get('finishedAt', '')}",
        f"- Verdict: **{'[PASS]' if report.get('passed') else '[FAIL]'}**",
        "",
    ]
    for issue in report.get("blockingIssues") or []:
        lines.append(f"- [BLOCKED] {issue.get('code')}: {issue.get('message')}")
    if report.get("blockingIssues"):
        lines.append("")
    lines += ["## Command checks", ""]
    checks = report.get("checks") or []
    if not checks:
        lines += ["(no runnable checks)", ""]
    for c in checks:
        lines.append(_check_line(c))
        if not c.get("skipped") and not c.get("passed"):
            if c.get("timeout"):
                lines.append(f"  - [WARN] timed out ({c.get('durationMs', 0)}ms)")
            code = c.get("exitCode")
            lines.append(f"  - Exit code: {code if code is not None else 'n/a'}")
            if c.get("reason"):
                lines.append(f"  - Reason: {c['reason']}")
            tail = c.get("outputTail") or ""
            if tail:
                shown = "\n".join(tail.rstrip("\n").split("\n")[-MD_TAIL_LINES:])
                f = fence(shown)
                lines += ["  - Output tail:", "", f"    {f}"]
                lines += [f"    {ln}" for ln in shown.split("\n")]
                lines += [f"    {f}", ""]
    if lines[-1] != "":
        lines.append("")
    lines += ["## Code analysis", ""]
    a = report.get("analysis") or {}
    changed = a.get("changedFiles") or []
    untracked = a.get("untrackedFiles") or []
    if not changed and not untracked:
        lines.append("No changed files (relative to the git baseline).")
    else:
        lines += [f"### Changed files ({len(changed)} tracked + {len(untracked)} untracked)", ""]
        lines += [f"- {f}" for f in changed]
        lines += [f"- (untracked) {f}" for f in untracked]
        ds = a.get("diffstat") or {}
        lines += ["", f"### diffstat: +{ds.get('totalAdd', 0)} -{ds.get('totalDel', 0)}", ""]
        for row in ds.get("perFile") or []:
            lines.append(
                f"- {row.get('file')}: +{row.get('add', 0)} -{row.get('del', 0)}{' (binary)' if row.get('binary') else ''}"
            )
    sig = a.get("signals") or {}
    big = a.get("bigFileChanges") or []
    warnings = a.get("warnings") or []
    if any((sig.get(k) or 0) > 0 for k in ("todo", "consoleDebug", "commentedBlock", "secretLike")) or big or warnings:
        lines += ["", "### Suspicious markers and warnings", ""]
        if sig.get("todo"):
            lines.append(f"- TODO/FIXME/HACK hits: {sig['todo']}")
        if sig.get("consoleDebug"):
            lines.append(f"- console.log/debugger hits: {sig['consoleDebug']}")
        if sig.get("commentedBlock"):
            lines.append(f"- commented-out code blocks: {sig['commentedBlock']}")
        if sig.get("secretLike"):
            lines.append(f"- secret/token-like literals: {sig['secretLike']}")
        lines += [f"- [WARN] very large single-file change: {b}" for b in big]
        lines += [f"- [WARN] {w}" for w in warnings]
    notes = a.get("notes") or []
    if notes:
        lines.append("")
    lines += [f"- [INFO] {note}" for note in notes]
    lines += ["", "## Structured repair directives", ""]
    rd = report.get("repairDirectives") or {}
    items = rd.get("items") or []
    if items:
        for it in items:
            loc = f"`{it['file']}{':' + str(it['line']) if it.get('line') else ''}`" if it.get("file") else "(no specific file)"
            lines.append(f"- {loc} — {it.get('issue')} → {it.get('action')} (source {it.get('source')})")
    else:
        reason = rd.get("fallbackReason") or "this round's report has no structured directives"
        lines.append(f"(unavailable; read the output tails of the checks above) Reason: {reason}")
    lines += ["", "", visual_section, "", "---", "", str(report.get("message", "")), ""]
    return "\n".join(lines)


def write_report(task_dir: str | os.PathLike[str], report: dict[str, Any], visual_section: str = "") -> tuple[Path, Path]:
    """Write ``report-<N>.md`` and ``report-<N>.json`` atomically (20-acceptance §1.5, §5.1).

    Sets ``report["files"] = {"md", "json"}`` (absolute paths; an existing ``html`` entry is kept)
    before writing, so the JSON names both files. ``N`` = ``report["round"]``.

    Returns:
        ``(md_path, json_path)``.

    Raises:
        OSError: the task directory cannot be written.
    """
    md_path, json_path = report_paths(Path(task_dir).absolute(), int(report.get("round", 0)))
    files = dict(report.get("files") or {})
    files["md"] = str(md_path)
    files["json"] = str(json_path)
    report["files"] = {k: files[k] for k in ("md", "json", "html") if k in files}
    atomic_write_json(json_path, ordered_report(report))
    atomic_write_text(md_path, render_markdown(report, visual_section))
    return md_path, json_path


def summarize_report(report: Mapping[str, Any]) -> str:
    """The tool summary text of a report (20-acceptance §5.2, English).

    Head: ``[PASS] Acceptance passed (round N): p/t command checks passed[, k skipped].`` |
    ``[FAIL] Acceptance incomplete (round N): task cancelled, verification interrupted[, k not run].`` |
    ``[FAIL] Acceptance failed (round N): f check(s) failed[, k skipped].`` then visual/blocking lines,
    one line per check, a ``Code analysis:`` diffstat line, ``Report: <md>``, ``JSON: <json>``.
    """
    n = report.get("round", 0)
    checks = report.get("checks") or []
    skipped = [c for c in checks if c.get("skipped")]
    ran = [c for c in checks if not c.get("skipped")]
    ok = [c for c in ran if c.get("passed")]
    failed = [c for c in ran if not c.get("passed") and not c.get("optional")]
    k = len(skipped)
    message = str(report.get("message") or "")
    if report.get("passed"):
        head = f"[PASS] Acceptance passed (round {n}): {len(ok)}/{len(ran)} command checks passed{f', {k} skipped' if k else ''}."
    elif CANCELLED_MARK in message.lower():
        head = f"[FAIL] Acceptance incomplete (round {n}): task cancelled, verification interrupted{f', {k} not run' if k else ''}."
    else:
        nf = len(failed) + len(report.get("blockingIssues") or [])
        head = f"[FAIL] Acceptance failed (round {n}): {nf} check(s) failed{f', {k} skipped' if k else ''}."
    lines = [head]
    visual = report.get("visual") or {}
    for r in visual.get("results") or []:
        target = r.get("viewport") or r.get("target") or ""
        lines.append(f"- [{r.get('status')}] {r.get('id')}/{target}: {r.get('code')} — {r.get('message')}")
    for issue in report.get("blockingIssues") or []:
        lines.append(f"- [BLOCKED] {issue.get('code')}: {issue.get('message')}")
    for c in checks:
        if c.get("skipped"):
            lines.append(f"- [SKIP] {c.get('name')} — {c.get('reason', '')}")
        elif c.get("passed"):
            lines.append(f"- [PASS] {c.get('name')} ({c.get('durationMs', 0)}ms)")
        else:
            code = c.get("exitCode")
            extra = " timed out" if c.get("timeout") else ""
            opt = " (optional)" if c.get("optional") else ""
            reason = f" — {c['reason']}" if c.get("reason") else ""
            lines.append(
                f"- [FAIL]{opt} {c.get('name')} — exit {code if code is not None else 'n/a'}{extra} ({c.get('durationMs', 0)}ms){reason}"
            )
    a = report.get("analysis") or {}
    ds = a.get("diffstat") or {}
    lines.append(
        f"Code analysis: {len(a.get('changedFiles') or [])} tracked + {len(a.get('untrackedFiles') or [])} untracked "
        f"file(s) changed, +{ds.get('totalAdd', 0)} -{ds.get('totalDel', 0)}."
    )
    if message:
        lines.append(message)
    files = report.get("files") or {}
    if files.get("md"):
        lines.append(f"Report: {files['md']}")
    if files.get("json"):
        lines.append(f"JSON: {files['json']}")
    return "\n".join(lines)
