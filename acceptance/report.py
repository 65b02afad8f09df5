"""Report artifacts: ``report-<N>.json``, ``report-<N>.md``, ``report-<N>.html`` and the tool summary.

Source: docs/acceptance.md §1.5 (report.json keys and order), §5.1 (markdown layout, here in English),
§5.2 (``summarizeReport``, English), docs/acceptance.md §8.8 (test counts, baseline classification, renames
and submodules, signals with the agent-tampering ones highlighted). Writes are atomic
(``core.files.atomic_write_*``).

port: ``report-<N>.html`` (:mod:`.html_report`) is written for every round, not only with visual
results; ``files.html`` is always set.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Mapping

from ..core.files import atomic_write_json, atomic_write_text
from ..core.i18n import _
from .html_report import CLASSIFICATIONS, render_html, tests_summary
from .report_integrity import md_integrity
from .report_integrity import listed as _listed
from .report_parts import (AGENT_TAIL_CAP, brief_section, diff_section, md_agent, md_brief, md_diff, patch_path, resolved_text,
                           shown_tail)
from .runner import OUTPUT_TAIL_CHARS
from .runner import check_tag, display_reason
from .signals import MARKER_KINDS, SIGNAL_LABELS, TAMPERING_KINDS

__all__ = [
    "REPORT_KEY_ORDER",
    "report_paths",
    "html_report_path",
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
    "agent",
    "brief",
    "diff",
    "baselineGrading",
    "integrity",
)
"""report.json top-level keys in write order (docs/acceptance.md §1.5); from ``blockingIssues`` on only
when present (``integrity``: docs/integrity.md; ``brief``, ``diff``: :mod:`.report_parts`)."""

CANCELLED_MARK = "task cancelled"
"""A report whose message contains this was interrupted by cancellation (docs/acceptance.md §5.2)."""

MD_TAIL_LINES = 40

def report_paths(task_dir: str | os.PathLike[str], round_: int) -> tuple[Path, Path]:
    """``(<task_dir>/report-<N>.md, <task_dir>/report-<N>.json)``."""
    d = Path(task_dir)
    return d / f"report-{round_}.md", d / f"report-{round_}.json"


def html_report_path(task_dir: str | os.PathLike[str], round_: int) -> Path:
    """``<task_dir>/report-<N>.html``."""
    return Path(task_dir) / f"report-{round_}.html"


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
    tag = check_tag(c)
    line = f"- [{tag}] {c.get('name')} — `{c.get('cmd')}` ({c.get('durationMs', 0)}ms)"
    if resolved_text(c):
        line += " — " + _("ran `{program}`").format(program=resolved_text(c))
    if c.get("skipped") and c.get("reason"):
        line += f" — {display_reason(c['reason'])}"
    elif tag == "FAIL" and c.get("optional"):
        line += _(" — optional (does not affect the verdict)")
    elif tag == "FAIL" and c.get("notCounted"):
        line += _(" — not counted (already failing at the baseline)")
    if c.get("baseline"):
        line += _(" [baseline: {baseline}]").format(baseline=c["baseline"])
    return line


def _md_tests(c: Mapping[str, Any]) -> list[str]:
    t = c.get("tests")
    if not isinstance(t, Mapping):
        return []
    lines = ["  - " + _("Tests ({runner}): {summary}").format(runner=t.get("runner") or "tests", summary=tests_summary(t))]
    failed_ids = [str(x) for x in (t.get("failedIds") or [])]
    if failed_ids:
        lines.append("  - " + _("Failed tests: ") + ", ".join(f"`{x}`" for x in _listed(failed_ids)))
    return lines


def _md_baseline(report: Mapping[str, Any]) -> list[str]:
    g = report.get("baselineGrading")
    if not isinstance(g, Mapping) or not g.get("enabled"):
        return []
    lines = ["## " + _("Baseline comparison"), "", "- " + _("Policy: `{policy}`").format(policy=g.get("policy"))]
    for c in g.get("checks") or []:
        cls = str(c.get("classification"))
        extra = [x for x in (_("not counted") if c.get("counted") is False else "", str(c.get("note") or "")) if x]
        lines.append(
            f"- [{cls.upper()}] " + _("check {name}: {before} → {after}").format(
                name=c.get("name"), before=c.get("before"), after=c.get("after"))
            + (f" — {'; '.join(extra)}" if extra else "")
        )
    tests = g.get("tests") or []
    if tests:
        counts: dict[str, int] = {}
        for t in tests:
            counts[str(t.get("classification"))] = counts.get(str(t.get("classification")), 0) + 1
        order = [k for k in CLASSIFICATIONS if k in counts] + [k for k in counts if k not in CLASSIFICATIONS]
        lines += ["", "### " + _("Tests"), "", "- " + ", ".join(f"{k}: {counts[k]}" for k in order)]
        listed = sorted(
            (t for t in tests if t.get("classification") != "passing"),
            key=lambda t: CLASSIFICATIONS.index(t.get("classification")) if t.get("classification") in CLASSIFICATIONS else 99,
        )
        rows = [f"[{str(t.get('classification')).upper()}] {t.get('check')}: `{t.get('id')}`" for t in listed]
        lines += [f"- {r}" for r in _listed(rows)]
    notes = g.get("notes") or []
    if notes:
        lines.append("")
        lines += [f"- [INFO] {n}" for n in notes]
    return [*lines, ""]


def render_markdown(report: Mapping[str, Any], visual_section: str = "") -> str:
    """Render ``report-<N>.md`` (docs/acceptance.md §5.1 layout, English text; docs/acceptance.md §8.8
    additions).

    Sections: title + bullets (task, project, started, finished, verdict); blocking issues;
    ``## Command checks`` (status, timing, test counts when a check carries ``tests``; failing
    checks get timeout/exit code/reason and the last 40 output lines); ``## Baseline comparison``
    (when ``baselineGrading.enabled``); ``## Code analysis`` (changed files, renames, submodules,
    diffstat, suspicious markers/warnings, ``### Agent tampering signals``, notes);
    ``## Structured repair directives``; ``visual_section`` (markdown from the visual package,
    empty when none); ``---`` and the message.
    """
    lines = _md_header(report)
    agent = report.get("agent")
    if isinstance(agent, Mapping):
        lines += md_agent(agent, AGENT_TAIL_CAP)
    lines += md_brief(report)
    lines += ["## " + _("Command checks"), ""]
    lines += _md_checks(report.get("checks") or [])
    if lines[-1] != "":
        lines.append("")
    lines += _md_baseline(report)
    lines += md_integrity(report)
    lines += ["## " + _("Code analysis"), ""]
    a = report.get("analysis") or {}
    lines += _md_changes(a)
    lines += md_diff(report)
    lines += _md_signals(a)
    notes = a.get("notes") or []
    if notes:
        lines.append("")
    lines += [f"- [INFO] {note}" for note in notes]
    lines += ["", "## " + _("Structured repair directives"), ""]
    lines += _md_directives(report.get("repairDirectives") or {})
    lines += ["", "", visual_section, "", "---", "", str(report.get("message", "")), ""]
    return "\n".join(lines)


def _md_header(report: Mapping[str, Any]) -> list[str]:
    """The title, the task/project/times/verdict bullets and the blocking issues."""
    n = report.get("round", 0)
    verdict = "[PASS]" if report.get("passed") else "[CANCELLED]" if report.get("verdict") == "cancelled" else "[FAIL]"
    lines: list[str] = [
        "# " + _("Acceptance report — round {round}").format(round=n),
        "",
        "- " + _("Task: {taskId}").format(taskId=report.get("taskId", "")),
        "- " + _("Project: {path}").format(path=report.get("projectPath", "")),
        "- " + _("Started: {ts}").format(ts=report.get("startedAt", "")),
        "- " + _("Finished: {ts}").format(ts=report.get("finishedAt", "")),
        "- " + _("Verdict: **{verdict}**").format(verdict=verdict),
        "",
    ]
    for issue in report.get("blockingIssues") or []:
        lines.append(f"- [BLOCKED] {issue.get('code')}: {issue.get('message')}")
    if report.get("blockingIssues"):
        lines.append("")
    return lines


def _md_checks(checks: list[Mapping[str, Any]]) -> list[str]:
    """One line per check with its test counts; a failed check (not skipped, not aborted) also
    gets timeout, exit code, reason and its output's last :data:`MD_TAIL_LINES` lines."""
    if not checks:
        return [_("(no runnable checks)"), ""]
    lines: list[str] = []
    for c in checks:
        lines.append(_check_line(c))
        lines += _md_tests(c)
        if not c.get("skipped") and not c.get("passed") and not c.get("aborted"):
            if c.get("timeout"):
                lines.append("  - [WARN] " + _("timed out ({ms}ms)").format(ms=c.get("durationMs", 0)))
            code = c.get("exitCode")
            lines.append("  - " + _("Exit code: {code}").format(code=code if code is not None else "n/a"))
            if c.get("reason"):
                lines.append("  - " + _("Reason: {reason}").format(reason=display_reason(c["reason"])))
            tail = shown_tail(str(c.get("outputTail") or ""), OUTPUT_TAIL_CHARS)
            if tail:
                shown = "\n".join(tail.rstrip("\n").split("\n")[-MD_TAIL_LINES:])
                f = fence(shown)
                lines += ["  - " + _("Output tail:"), "", f"    {f}"]
                lines += [f"    {ln}" for ln in shown.split("\n")]
                lines += [f"    {f}", ""]
    return lines


def _md_changes(a: Mapping[str, Any]) -> list[str]:
    """The changed files (tracked, then untracked), renames, submodules and the diffstat."""
    lines: list[str] = []
    changed = a.get("changedFiles") or []
    untracked = a.get("untrackedFiles") or []
    renames = a.get("renames") or []
    submodules = a.get("submodules") or []
    if not changed and not untracked and not submodules:
        lines.append(_("No changed files (relative to the git baseline)."))
    else:
        lines += ["### " + _("Changed files ({tracked} tracked + {untracked} untracked)").format(
            tracked=len(changed), untracked=len(untracked)), ""]
        lines += [f"- {f}" for f in changed]
        lines += ["- " + _("(untracked) {file}").format(file=f) for f in untracked]
    if renames:
        lines += ["", "### " + _("Renames"), ""]
        lines += ["- " + _("{src} → {dst} (similarity {pct}%)").format(src=r.get("from"), dst=r.get("to"), pct=r.get("similarity"))
                  for r in renames]
    if submodules:
        lines += ["", "### " + _("Submodules (not descended into)"), ""]
        lines += [
            f"- {s.get('path')}: {(s.get('before') or 'none')[:12]} → {(s.get('after') or 'none')[:12]}" for s in submodules
        ]
    if changed or untracked:
        ds = a.get("diffstat") or {}
        lines += ["", f"### diffstat: +{ds.get('totalAdd', 0)} -{ds.get('totalDel', 0)}", ""]
        for row in ds.get("perFile") or []:
            lines.append(
                f"- {row.get('file')}: +{row.get('add', 0)} -{row.get('del', 0)}{' (binary)' if row.get('binary') else ''}"
            )
    return lines


def _md_signals(a: Mapping[str, Any]) -> list[str]:
    """``### Suspicious markers and warnings`` (marker counts, big files, warnings) and
    ``### Agent tampering signals`` (counts in bold, then each hit), each only when non-empty."""
    lines: list[str] = []
    sig = a.get("signals") or {}
    big = a.get("bigFileChanges") or []
    warnings = a.get("warnings") or []
    if any((sig.get(k) or 0) > 0 for k in MARKER_KINDS) or big or warnings:
        lines += ["", "### " + _("Suspicious markers and warnings"), ""]
        lines += [f"- {_(SIGNAL_LABELS[k])}: {sig[k]}" for k in MARKER_KINDS if (sig.get(k) or 0) > 0]
        lines += ["- [WARN] " + _("very large single-file change: {file}").format(file=b) for b in big]
        lines += [f"- [WARN] {w}" for w in warnings]
    tampering = a.get("tampering") or []
    if any((sig.get(k) or 0) > 0 for k in TAMPERING_KINDS) or tampering:
        lines += ["", "### " + _("Agent tampering signals"), ""]
        lines += [f"- **{_(SIGNAL_LABELS[k])}: {sig[k]}**" for k in TAMPERING_KINDS if (sig.get(k) or 0) > 0]
        lines += [f"- [TAMPER] {t.get('kind')} — `{t.get('file')}`: {t.get('detail')}" for t in tampering]
    return lines


def _md_directives(rd: Mapping[str, Any]) -> list[str]:
    """The repair directive items (file:line, issue → action, source), or why there are none."""
    items = rd.get("items") or []
    if not items:
        reason = rd.get("fallbackReason") or _("this round's report has no structured directives")
        return [_("(unavailable; read the output tails of the checks above) Reason: {reason}").format(reason=reason)]
    lines: list[str] = []
    for it in items:
        loc = f"`{it['file']}{':' + str(it['line']) if it.get('line') else ''}`" if it.get("file") else _("(no specific file)")
        lines.append(f"- {loc} — {it.get('issue')} → {it.get('action')} " + _("(source {source})").format(source=it.get("source")))
    return lines


def write_report(
    task_dir: str | os.PathLike[str],
    report: dict[str, Any],
    visual_section: str = "",
    visual_html: str = "",
    patch: str | None = None,
    brief_file: str | os.PathLike[str] | None = None,
) -> tuple[Path, Path]:
    """Write ``report-<N>.json``, ``report-<N>.md`` and ``report-<N>.html`` atomically
    (docs/acceptance.md §1.5, §5.1; docs/acceptance.md §8.8).

    Sets ``report["files"] = {"md", "json", "html"[, "patch"]}`` (absolute paths, in that order)
    before writing, so the JSON names every file. ``N`` = ``report["round"]``.

    Args:
        task_dir: the task directory.
        report: the report dict (``files`` is set in place).
        visual_section: markdown of the visual package (empty when none).
        visual_html: HTML fragment of the visual package for the HTML report (empty → a compact
            table of ``report.visual.results`` when present).
        patch: the round's change as a patch (:func:`.git.patch.change_patch`): a non-empty one is
            written to ``report-<N>.patch`` and summarised in ``report["diff"]``
            (:func:`.report_parts.diff_section`).
        brief_file: the prompt the agent got in the round: summarised in ``report["brief"]``
            (:func:`.report_parts.brief_section`) when it can be read.

    Returns:
        ``(md_path, json_path)``; the HTML path is ``report["files"]["html"]``.

    Raises:
        OSError: the task directory cannot be written.
    """
    d = Path(task_dir).absolute()
    rnd = int(report.get("round", 0))
    md_path, json_path = report_paths(d, rnd)
    html_path = html_report_path(d, rnd)
    report["files"] = {"md": str(md_path), "json": str(json_path), "html": str(html_path)}
    if patch:
        patch_file = patch_path(d, rnd)
        atomic_write_text(patch_file, patch)
        report["diff"] = diff_section(patch, patch_file)
        report["files"]["patch"] = str(patch_file)
    if brief_file is not None and (brief := brief_section(brief_file)) is not None:
        report["brief"] = brief
    atomic_write_json(json_path, ordered_report(report))
    atomic_write_text(md_path, render_markdown(report, visual_section))
    atomic_write_text(html_path, render_html(report, visual_html))
    return md_path, json_path


def summarize_report(report: Mapping[str, Any]) -> str:
    """The tool summary text of a report (docs/acceptance.md §5.2, English).

    Head: ``[PASS] Acceptance passed (round N): p/t command checks passed[, k skipped].`` |
    ``[FAIL] Acceptance incomplete (round N): task cancelled, verification interrupted[, k not run].`` |
    ``[FAIL] Acceptance failed (round N): f check(s) failed[, k skipped].`` then visual/blocking lines,
    one line per check (with its test counts when present), a ``Code analysis:`` diffstat line, an
    ``Agent tampering signals:`` line when any, the message, ``Report: <md>``, ``JSON: <json>``,
    ``HTML: <html>``.
    """
    n = report.get("round", 0)
    checks = report.get("checks") or []
    skipped = [c for c in checks if c.get("skipped")]
    ran = [c for c in checks if not c.get("skipped")]
    ok = [c for c in ran if c.get("passed")]
    failed = [c for c in ran if not c.get("passed") and not c.get("optional")]
    k = len(skipped)
    message = str(report.get("message") or "")
    skipped_note = _(", {n} skipped").format(n=k) if k else ""
    if report.get("passed"):
        head = "[PASS] " + _("Acceptance passed (round {round}): {ok}/{ran} command checks passed{skipped}.").format(
            round=n, ok=len(ok), ran=len(ran), skipped=skipped_note)
    elif report.get("verdict") == "cancelled" or CANCELLED_MARK in message.lower():  # the mark: reports of older builds
        head = "[FAIL] " + _("Acceptance incomplete (round {round}): task cancelled, verification interrupted{not_run}.").format(
            round=n, not_run=_(", {n} not run").format(n=k) if k else "")
    else:
        nf = len(failed) + len(report.get("blockingIssues") or [])
        head = "[FAIL] " + _("Acceptance failed (round {round}): {n} check(s) failed{skipped}.").format(
            round=n, n=nf, skipped=skipped_note)
    lines = [head]
    visual = report.get("visual") or {}
    for r in visual.get("results") or []:
        target = r.get("viewport") or r.get("target") or ""
        lines.append(f"- [{r.get('status')}] {r.get('id')}/{target}: {r.get('code')} — {r.get('message')}")
    for issue in report.get("blockingIssues") or []:
        lines.append(f"- [BLOCKED] {issue.get('code')}: {issue.get('message')}")
    for c in checks:
        if c.get("skipped"):
            lines.append(f"- [SKIP] {c.get('name')} — {display_reason(c.get('reason', ''))}")
        elif c.get("passed"):
            lines.append(f"- [PASS] {c.get('name')} ({c.get('durationMs', 0)}ms){_summary_tests(c)}")
        else:
            code = c.get("exitCode")
            extra = _(" timed out") if c.get("timeout") else ""
            opt = _(" (optional)") if c.get("optional") else ""
            reason = f" — {display_reason(c['reason'])}" if c.get("reason") else ""
            lines.append(
                f"- [FAIL]{opt} {c.get('name')} — exit {code if code is not None else 'n/a'}{extra} "
                f"({c.get('durationMs', 0)}ms){reason}{_summary_tests(c)}"
            )
    a = report.get("analysis") or {}
    ds = a.get("diffstat") or {}
    lines.append(
        _("Code analysis: {tracked} tracked + {untracked} untracked file(s) changed, +{add} -{del_}.").format(
            tracked=len(a.get("changedFiles") or []), untracked=len(a.get("untrackedFiles") or []),
            add=ds.get("totalAdd", 0), del_=ds.get("totalDel", 0))
    )
    sig = a.get("signals") or {}
    hits = [f"{k} {sig[k]}" for k in TAMPERING_KINDS if (sig.get(k) or 0) > 0]
    if hits:
        lines.append(_("Agent tampering signals: {hits} (see the report).").format(hits=", ".join(hits)))
    if message:
        lines.append(message)
    files = report.get("files") or {}
    if files.get("md"):
        lines.append(_("Report: {path}").format(path=files["md"]))
    if files.get("json"):
        lines.append(f"JSON: {files['json']}")
    if files.get("html"):
        lines.append(f"HTML: {files['html']}")
    return "\n".join(lines)


def _summary_tests(c: Mapping[str, Any]) -> str:
    t = c.get("tests")
    return f" — tests: {tests_summary(t)}" if isinstance(t, Mapping) else ""
