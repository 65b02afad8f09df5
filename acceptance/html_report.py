"""``report-<N>.html``: the acceptance report as one self-contained offline page (docs/acceptance.md §8.8).

Same content as ``report-<N>.md`` (:func:`tianshu_mcp.acceptance.report.render_markdown`): verdict,
blocking issues, the command checks (PASS/FAIL/SKIP badges, timings, test counts, collapsible output
tails), the baseline comparison, changed files with diffstat, renames and submodules, suspicious
signals with the agent-tampering ones highlighted, repair directives and a compact visual summary.

Inline CSS only: no script, no external URL, no ``src`` attribute; every value taken from the report
is HTML-escaped. Plain Python, no I/O.
"""

from __future__ import annotations

import html
from typing import Any, Iterable, Mapping, Sequence

from ..core.i18n import _, resolve_locale
from .report_integrity import html_integrity
from .report_parts import AGENT_TAIL_CAP, html_agent, html_brief, html_diff, html_resolved, shown_tail
from .runner import OUTPUT_TAIL_CHARS, check_tag, display_reason
from .signals import MARKER_KINDS, SIGNAL_LABELS, TAMPERING_KINDS

__all__ = ["render_html", "tests_summary", "CLASSIFICATIONS"]

CLASSIFICATIONS = ("regression", "new_failure", "still_failing", "fixed", "passing")
"""Baseline classifications, most severe first (``baselineGrading``)."""
MAX_LISTED = 200
"""At most this many rows per long list (failed test ids, classified tests, files)."""

_CSS = """
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0; background: #f6f7f9; color: #1d2329; }
main { max-width: 1100px; margin: 0 auto; padding: 24px; }
h1 { font-size: 22px; margin: 0 0 12px; }
h2 { font-size: 18px; margin: 28px 0 10px; border-bottom: 1px solid #d9dde3; padding-bottom: 4px; }
h3 { font-size: 15px; margin: 18px 0 8px; }
section { background: #fff; border: 1px solid #e1e4e8; border-radius: 6px; padding: 4px 16px 14px; margin-top: 16px; }
.scroll { max-width: 100%; overflow-x: auto; }
table { border-collapse: collapse; width: 100%; margin: 6px 0; }
table.cols { table-layout: fixed; } table.cols th.num, table.cols td.num { width: auto; }
th, td { text-align: left; vertical-align: top; padding: 5px 8px; border-bottom: 1px solid #eceef1; overflow-wrap: anywhere; }
th { background: #f3f4f6; font-weight: 600; }
th.num, td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; width: 1%; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; overflow-wrap: anywhere; }
pre { background: #0f1720; color: #e6edf3; padding: 10px; border-radius: 4px; overflow-x: auto; white-space: pre-wrap; margin: 6px 0; }
pre.diff .add { color: #7ee787; } pre.diff .del { color: #ffa198; } pre.diff .hunk { color: #79c0ff; } pre.diff .head { color: #d2a8ff; }
blockquote { margin: 6px 0; padding: 4px 12px; border-left: 3px solid #d0d7de; color: #3b434b; white-space: pre-wrap; overflow-wrap: anywhere; }
details { margin: 6px 0; }
summary { cursor: pointer; font-weight: 600; }
.badge { display: inline-block; padding: 1px 7px; border-radius: 10px; font-size: 12px; font-weight: 700; color: #fff; white-space: nowrap; }
.pass { background: #1a7f37; } .fail { background: #cf222e; } .skip { background: #6e7781; }
.warn { background: #bf8700; } .info { background: #0969da; } .blocked { background: #8250df; }
.regression, .new_failure { background: #cf222e; } .still_failing { background: #bf8700; }
.fixed { background: #1a7f37; } .passing { background: #6e7781; }
.muted { color: #57606a; font-size: 12.5px; }
.message { font-size: 15px; }
.meta th { width: 110px; background: none; }
.tamper { border-color: #cf222e; background: #fff5f5; }
.tamper h3 { color: #a40e26; }
.add { color: #1a7f37; } .del { color: #cf222e; }
ul { margin: 6px 0; padding-left: 22px; }
li.nested { margin-left: 18px; list-style: circle; }
"""


def _e(value: Any) -> str:
    """HTML-escaped text of any value (None → empty)."""
    return html.escape("" if value is None else str(value), quote=True)


def _badge(label: str, cls: str) -> str:
    return f'<span class="badge {_e(cls)}">{_e(label)}</span>'


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], num_cols: Sequence[int] = (),
           widths: Sequence[int] = ()) -> str:
    """A table in its own horizontal scroll box; ``rows`` cells are already-escaped HTML, one per
    header; ``num_cols`` (header and cells) are right-aligned and as narrow as their content, so a
    number sits under its own header. ``widths`` (percent, one per column) fix the columns' widths
    (``table-layout: fixed``), so a long cell wraps inside its column instead of squeezing the others."""
    head = "".join(f'<th class="num">{_e(h)}</th>' if i in num_cols else f"<th>{_e(h)}</th>" for i, h in enumerate(headers))
    body = []
    for row in rows:
        cells = "".join(f'<td class="num">{c}</td>' if i in num_cols else f"<td>{c}</td>" for i, c in enumerate(row))
        body.append(f"<tr>{cells}</tr>")
    cols = ('<colgroup>' + "".join(f'<col style="width:{w}%">' for w in widths) + "</colgroup>") if widths else ""
    cls = ' class="cols"' if widths else ""
    return f'<div class="scroll"><table{cls}>{cols}<thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def _el(tag: str, text: str) -> str:
    """``<tag>text</tag>`` with ``text`` escaped (a translated phrase is text like any other)."""
    return f"<{tag}>{_e(text)}</{tag}>"


def _check_status(c: Mapping[str, Any]) -> tuple[str, str]:
    tag = check_tag(c)
    return tag, "fail" if tag == "ABORTED" else tag.lower()


def tests_summary(t: Mapping[str, Any]) -> str:
    """``3 passed, 1 failed, 0 skipped, 0 errors (4 total)`` from a check's ``tests`` counts."""
    parts = [f"{t.get(k) if t.get(k) is not None else '?'} {k}" for k in ("passed", "failed", "skipped", "errors")]
    total = t.get("total")
    return ", ".join(parts) + (f" ({total} total)" if total is not None else "")


def _checks(report: Mapping[str, Any]) -> str:
    checks = report.get("checks") or []
    out = ['<section id="checks">' + _el("h2", _("Command checks"))]
    if not checks:
        out.append(_el("p", _("(no runnable checks)")) + "</section>")
        return "".join(out)
    rows = []
    for c in checks:
        label, cls = _check_status(c)
        status = _badge(label, cls)
        if c.get("optional"):
            status += " " + _badge(_("optional"), "info")
        if c.get("timeout"):
            status += " " + _badge(_("timed out"), "warn")
        if c.get("notCounted"):
            status += " " + _badge(_("not counted"), "skip")
        if c.get("baseline"):
            status += " " + _badge(_("baseline: {classification}").format(classification=c["baseline"]), str(c["baseline"]))
        name = f"<strong>{_e(c.get('name'))}</strong>"
        if c.get("reason"):
            name += f'<div class="muted">{_e(display_reason(c.get("reason")))}</div>'
        exit_code = c.get("exitCode")
        t = c.get("tests")
        tests_cell = ""
        if isinstance(t, Mapping):
            tests_cell = f"{_e(t.get('runner') or 'tests')}: {_e(tests_summary(t))}"
            failed_ids = [str(x) for x in (t.get("failedIds") or [])]
            if failed_ids:
                items = "".join(f"<li><code>{_e(x)}</code></li>" for x in failed_ids[:MAX_LISTED])
                more = (_el("li", _("… and {n} more").format(n=len(failed_ids) - MAX_LISTED))
                        if len(failed_ids) > MAX_LISTED else "")
                summary = _e(_("failed tests ({n})").format(n=len(failed_ids)))
                tests_cell += f"<details><summary>{summary}</summary><ul>{items}{more}</ul></details>"
        rows.append(
            [
                status,
                name,
                f"<code>{_e(c.get('cmd'))}</code>{html_resolved(c)}",
                f"{_e(c.get('durationMs', 0))} ms",
                _e(exit_code if exit_code is not None else "n/a"),
                tests_cell,
            ]
        )
    out.append(_table([_("Status"), _("Check"), _("Command"), _("Duration"), _("Exit"), _("Tests")], rows,
                      num_cols=(3, 4), widths=(11, 14, 33, 9, 6, 27)))
    tails = [c for c in checks if c.get("outputTail")]
    if tails:
        out.append(_el("h3", _("Output tails")))
        for c in tails:
            label, cls = _check_status(c)
            opened = " open" if label == "FAIL" and not c.get("optional") and not c.get("notCounted") else ""
            tail_of = _e(_("{name} — output tail").format(name=c.get("name")))
            out.append(
                f"<details{opened}><summary>{_badge(label, cls)} {tail_of}</summary>"
                f"<pre>{_e(shown_tail(str(c.get('outputTail') or ''), OUTPUT_TAIL_CHARS))}</pre></details>"
            )
    out.append("</section>")
    return "".join(out)


def _baseline(report: Mapping[str, Any]) -> str:
    g = report.get("baselineGrading")
    if not isinstance(g, Mapping) or not g.get("enabled"):
        return ""
    policy = _e(_("Policy: {policy}")).format(policy=f"<code>{_e(g.get('policy'))}</code>")
    out = ['<section id="baseline">' + _el("h2", _("Baseline comparison")), f"<p>{policy}</p>"]
    checks = g.get("checks") or []
    if checks:
        rows = []
        for c in checks:
            cls = str(c.get("classification"))
            note = _e(c.get("note") or "")
            if c.get("counted") is False:
                note = (_badge(_("not counted"), "skip") + " " + note).strip()
            rows.append([_e(c.get("name")), _e(c.get("before")), _e(c.get("after")), _badge(cls, cls), note])
        out.append(_table([_("Check"), _("Before"), _("After"), _("Classification"), _("Note")], rows))
    tests = g.get("tests") or []
    if tests:
        counts = {k: 0 for k in CLASSIFICATIONS}
        for t in tests:
            counts[str(t.get("classification"))] = counts.get(str(t.get("classification")), 0) + 1
        out.append(
            _el("h3", _("Tests")) + "<p>"
            + " ".join(f"{_badge(k, k)} {n}" for k, n in counts.items() if n)
            + "</p>"
        )
        listed = sorted(
            (t for t in tests if t.get("classification") != "passing"),
            key=lambda t: CLASSIFICATIONS.index(t.get("classification")) if t.get("classification") in CLASSIFICATIONS else 99,
        )
        if listed:
            rows = [
                [_badge(str(t.get("classification")), str(t.get("classification"))), _e(t.get("check")), f"<code>{_e(t.get('id'))}</code>"]
                for t in listed[:MAX_LISTED]
            ]
            out.append(_table([_("Classification"), _("Check"), _("Test")], rows))
            if len(listed) > MAX_LISTED:
                more = _e(_("… and {n} more").format(n=len(listed) - MAX_LISTED))
                out.append(f"<p class=\"muted\">{more}</p>")
    notes = g.get("notes") or []
    if notes:
        out.append("<ul>" + "".join(f"<li>{_e(n)}</li>" for n in notes) + "</ul>")
    out.append("</section>")
    return "".join(out)


def _changes(report: Mapping[str, Any]) -> str:
    a = report.get("analysis") or {}
    changed = a.get("changedFiles") or []
    untracked = a.get("untrackedFiles") or []
    ds = a.get("diffstat") or {}
    renames = a.get("renames") or []
    submodules = a.get("submodules") or []
    out = ['<section id="changes">' + _el("h2", _("Code analysis"))]
    if not changed and not untracked and not submodules:
        out.append(_el("p", _("No changed files (relative to the git baseline).")))
    else:
        counted = _e(_("{tracked} tracked + {untracked} untracked file(s) changed, ").format(
            tracked=len(changed), untracked=len(untracked)))
        out.append(
            f"<p>{counted}"
            f'<span class="add">+{_e(ds.get("totalAdd", 0))}</span> '
            f'<span class="del">-{_e(ds.get("totalDel", 0))}</span></p>'
        )
        renamed_from = {r.get("to"): r for r in renames}
        untracked_set = set(untracked)
        rows = []
        for row in (ds.get("perFile") or [])[: MAX_LISTED * 5]:
            f = row.get("file")
            notes = []
            if row.get("binary"):
                notes.append(_badge(_("binary"), "info"))
            if f in untracked_set:
                notes.append(_badge(_("untracked"), "skip"))
            if f in renamed_from:
                r = renamed_from[f]
                notes.append(_e(_("renamed from {src} ({pct}%)")).format(src=f"<code>{_e(r.get('from'))}</code>",
                                                                         pct=_e(r.get("similarity"))))
            rows.append(
                [
                    f"<code>{_e(f)}</code>",
                    f'<span class="add">+{_e(row.get("add", 0))}</span>',
                    f'<span class="del">-{_e(row.get("del", 0))}</span>',
                    " ".join(notes),
                ]
            )
        listed = {row.get("file") for row in ds.get("perFile") or []}
        for f in [*changed, *untracked]:
            if f not in listed and not any(s.get("path") == f for s in submodules):
                rows.append([f"<code>{_e(f)}</code>", "", "", ""])
        if rows:
            out.append(_el("h3", _("Changed files and diffstat")))
            out.append(_table([_("File"), _("Added"), _("Deleted"), _("Notes")], rows, num_cols=(1, 2),
                              widths=(64, 9, 9, 18)))
        out.append(html_diff(report))
    if renames:
        out.append(_el("h3", _("Renames")))
        out.append(
            _table(
                [_("From"), _("To"), _("Similarity")],
                ([f"<code>{_e(r.get('from'))}</code>", f"<code>{_e(r.get('to'))}</code>", f"{_e(r.get('similarity'))}%"] for r in renames),
                num_cols=(2,),
            )
        )
    if submodules:
        out.append(_el("h3", _("Submodules (not descended into)")))
        out.append(
            _table(
                [_("Path"), _("Before"), _("After")],
                (
                    [f"<code>{_e(s.get('path'))}</code>", f"<code>{_e(s.get('before') or '—')}</code>", f"<code>{_e(s.get('after') or '—')}</code>"]
                    for s in submodules
                ),
            )
        )
    big = a.get("bigFileChanges") or []
    warnings = a.get("warnings") or []
    if big or warnings:
        out.append(_el("h3", _("Warnings")) + "<ul>")
        big_change = _e(_("very large single-file change: {file}"))
        out += [f"<li>{_badge('WARN', 'warn')} " + big_change.format(file=f"<code>{_e(b)}</code>") + "</li>"
                for b in big]
        out += [f"<li>{_badge('WARN', 'warn')} {_e(w)}</li>" for w in warnings]
        out.append("</ul>")
    notes = a.get("notes") or []
    if notes:
        out.append(_el("h3", _("Notes")) + "<ul>" + "".join(f"<li>{_e(n)}</li>" for n in notes) + "</ul>")
    out.append("</section>")
    return "".join(out)


def _signals(report: Mapping[str, Any]) -> str:
    a = report.get("analysis") or {}
    sig = a.get("signals") or {}
    tampering = a.get("tampering") or []
    counted = _e(_("Counted, never blocking."))
    out = ['<section id="signals">' + _el("h2", _("Suspicious signals")), f'<p class="muted">{counted}</p>']
    markers = [k for k in MARKER_KINDS if (sig.get(k) or 0) > 0]
    head = [_("Signal"), _("Hits")]
    if markers:
        out.append(_table(head, ([_e(_(SIGNAL_LABELS[k])), _e(sig.get(k))] for k in markers), num_cols=(1,)))
    else:
        out.append(_el("p", _("No suspicious markers.")))
    out.append("</section>")
    hits = [k for k in TAMPERING_KINDS if (sig.get(k) or 0) > 0]
    cls = ' class="tamper"' if hits or tampering else ""
    out.append(f'<section id="tampering"{cls}>' + _el("h3", _("Agent tampering signals")))
    if hits or tampering:
        out.append(_table(head, ([_e(_(SIGNAL_LABELS[k])), _e(sig.get(k))] for k in hits), num_cols=(1,)))
        if tampering:
            out.append(
                _table(
                    [_("Kind"), _("File"), _("Detail")],
                    ([_badge(str(t.get("kind")), "fail"), f"<code>{_e(t.get('file'))}</code>", _e(t.get("detail"))] for t in tampering),
                )
            )
    else:
        out.append(_el("p", _("No agent tampering signals.")))
    out.append("</section>")
    return "".join(out)


def _directives(report: Mapping[str, Any]) -> str:
    rd = report.get("repairDirectives") or {}
    items = rd.get("items") or []
    out = ['<section id="directives">' + _el("h2", _("Structured repair directives"))]
    if items:
        rows = []
        nowhere = _e(_("(no specific file)"))
        for it in items:
            loc = (
                f"<code>{_e(it.get('file'))}{_e(':' + str(it['line'])) if it.get('line') else ''}</code>"
                if it.get("file")
                else f'<span class="muted">{nowhere}</span>'
            )
            rows.append([loc, _e(it.get("issue")), _e(it.get("action")), _e(it.get("source"))])
        out.append(_table([_("Location"), _("Issue"), _("Action"), _("Source")], rows, widths=(22, 38, 32, 8)))
    else:
        reason = rd.get("fallbackReason") or _("this round's report has no structured directives")
        out.append(_el("p", _("(unavailable; read the output tails of the checks above) Reason: {reason}").format(
            reason=reason)))
    out.append("</section>")
    return "".join(out)


def _visual(report: Mapping[str, Any], visual_html: str) -> str:
    visual = report.get("visual")
    heading = _el("h2", _("Visual acceptance"))
    if visual_html:
        return f'<section id="visual">{heading}{visual_html}</section>'
    if not isinstance(visual, Mapping):
        return ""
    results = visual.get("results") or []
    rows = [
        [
            _e(r.get("id")),
            _e(r.get("viewport") or r.get("target") or ""),
            _badge(str(r.get("status")), {"passed": "pass", "failed": "fail", "blocked": "blocked"}.get(str(r.get("status")), "skip")),
            _e(r.get("code")),
            _e(r.get("message")),
        ]
        for r in results
    ]
    body = (_table([_("Id"), _("Target"), _("Status"), _("Code"), _("Message")], rows) if rows
            else _el("p", _("(no visual results)")))
    return f'<section id="visual">{heading}{body}</section>'


def render_html(report: Mapping[str, Any], visual_html: str = "") -> str:
    """Render ``report-<N>.html`` from a report dict (docs/acceptance.md §1.5 shape).

    Args:
        report: the report (``checks[].tests``, ``baselineGrading``, ``analysis.renames``,
            ``analysis.submodules``, ``analysis.tampering``, ``repairDirectives`` and ``visual`` are
            rendered when present).
        visual_html: an HTML fragment from the visual package, inserted verbatim in the visual
            section (it must be escaped and self-contained by its producer); empty → a compact,
            escaped table of ``report.visual.results``.

    Returns:
        A complete UTF-8 HTML document: inline CSS, no script, no external reference.
    """
    n = report.get("round", 0)
    passed = bool(report.get("passed"))
    verdict = _badge("PASS", "pass") if passed else _badge("FAIL", "fail")
    meta_rows = [
        (_("Task"), report.get("taskId", "")),
        (_("Project"), report.get("projectPath", "")),
        (_("Started"), report.get("startedAt", "")),
        (_("Finished"), report.get("finishedAt", "")),
    ]
    meta = "".join(f"<tr><th>{_e(k)}</th><td><code>{_e(v)}</code></td></tr>" for k, v in meta_rows)
    title = _e(_("Acceptance report — round {round}").format(round=n))
    lang = "zh-CN" if resolve_locale() == "zh_CN" else "en"
    parts = [
        "<!DOCTYPE html>",
        f'<html lang="{lang}"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{title}</title>",
        f"<style>{_CSS}</style></head><body><main>",
        f"<h1>{title} {verdict}</h1>",
        f'<table class="meta"><tbody>{meta}<tr>' + _el("th", _("Verdict")) + f"<td>{verdict}</td></tr></tbody></table>",
        f'<p class="message">{_e(report.get("message", ""))}</p>',
    ]
    blocking = report.get("blockingIssues") or []
    if blocking:
        parts.append('<section id="blocking">' + _el("h2", _("Blocking issues")) + "<ul>")
        parts += [f"<li>{_badge('BLOCKED', 'blocked')} <code>{_e(b.get('code'))}</code>: {_e(b.get('message'))}</li>" for b in blocking]
        parts.append("</ul></section>")
    parts += [
        html_agent(report, AGENT_TAIL_CAP),
        html_brief(report),
        _checks(report),
        _baseline(report),
        _changes(report),
        html_integrity(report),
        _signals(report),
        _directives(report),
        _visual(report, visual_html),
    ]
    files = report.get("files") or {}
    if files:
        listed = " · ".join(f"{_e(k)}: <code>{_e(v)}</code>" for k, v in files.items())
        parts.append('<p class="muted">' + _e(_("Files: {files}")).format(files=listed) + "</p>")
    parts.append("</main></body></html>\n")
    return "\n".join(p for p in parts if p)
