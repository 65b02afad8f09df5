"""The visual section of a round's reports (30-visual §10): markdown for ``report-N.md`` and a
self-contained HTML fragment for ``report-N.html`` with each page's image quadruple
(actual / baseline / diff / regions) side by side, an overlay with an opacity slider, the diff
regions as boxes, and a status filter. All text is escaped; images are linked relative to the
task directory, so the report works offline and moves with the task directory.
"""

from __future__ import annotations

import html
import json
import os
from pathlib import Path
from typing import Any, Mapping

_ORDER = ("actual", "baseline", "diff", "regions")
GATE_LABELS = {"off": "not configured", "applied": "applied", "downgraded": "below the threshold, downgraded to uncertain",
               "no-confidence": "the command reported no confidence; minConfidence did not apply"}


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def visual_markdown(report: Mapping[str, Any]) -> str:
    """``## Visual acceptance`` section (empty string when the report has no ``visual``)."""
    visual = report.get("visual")
    if not isinstance(visual, Mapping):
        return ""
    lines = ["## Visual acceptance", "",
             "Visual results are evidence, not something to work around: a failing page is fixed in the project, "
             "never by editing baselines or the visual rules.",
             "Content checks are warnings by default (optional: true); only blocking content checks fail the round "
             "and trigger rework."]
    if visual.get("cleanedAt"):
        lines.append(f"Artifacts were removed explicitly: {visual['cleanedAt']}")
    for r in visual.get("results") or []:
        where = r.get("viewport") or r.get("target")
        lines += ["", f"### {r.get('id')} / {where} [{r.get('status')}]", f"- Target: {r.get('target')}",
                  f"- Reason: {r.get('code')} — {r.get('message')}",
                  f"- Optional: {str(bool(r.get('optional'))).lower()}; repairable: {str(bool(r.get('repairable'))).lower()}"]
        content = r.get("content")
        if isinstance(content, Mapping):
            m = r.get("metrics") or {}
            conf = f"; mean confidence {content['confidence']}" if content.get("confidence") is not None else ""
            lines += [f"- Expected: {content.get('expect')}",
                      f"- Votes: {m.get('samples')} sample(s): {m.get('passedVotes')} passed / {m.get('failedVotes')} failed / "
                      f"{m.get('invalidVotes')} invalid{conf}",
                      f"- Confidence gate: {GATE_LABELS.get(str(content.get('confidenceGate')), content.get('confidenceGate'))}",
                      "- Reasons: " + " / ".join(str(v.get("reason")) for v in content.get("votes") or []),
                      f"- Judge command: {content.get('provider')}; cache hit: {'yes' if content.get('cached') else 'no'}"]
        for key, label in (("rules", "Expected rules"), ("metrics", "Actual metrics"), ("regions", "Diff regions"),
                           ("masks", "Masked regions"), ("environment", "Environment")):
            if r.get(key) is not None:
                lines.append(f"- {label}: {_compact(r[key])}")
        for kind, path in (r.get("artifacts") or {}).items():
            lines.append(f"- [{kind}]({path})")
    html_path = (report.get("files") or {}).get("html")
    if html_path:
        lines += ["", f"Offline report: [HTML]({html_path})"]
    return "\n".join(lines)


def _rel(path: str, base: Path) -> str:
    try:
        return os.path.relpath(path, base)
    except ValueError:
        return path


def _article(r: Mapping[str, Any], base: Path, cleaned: bool) -> str:
    e = html.escape
    where = r.get("viewport") or r.get("target")
    parts = [f'<article data-status="{e(str(r.get("status")))}">',
             f"<h3>{e(str(r.get('id')))} / {e(str(where))} — {e(str(r.get('status')))}</h3>",
             f"<p><code>{e(str(r.get('code')))}</code>: {e(str(r.get('message')))}</p>"]
    content = r.get("content")
    if isinstance(content, Mapping):
        rows = "".join(
            f"<tr><td>{i + 1}</td><td>{'yes' if v.get('passed') is True else 'no' if v.get('passed') is False else 'undecided'}</td>"
            f"<td>{e(str(v['confidence'])) if v.get('confidence') is not None else '—'}</td><td>{e(str(v.get('reason')))}</td></tr>"
            for i, v in enumerate(content.get("votes") or []))
        parts.append("<table><tr><th>Sample</th><th>Passed</th><th>Confidence</th><th>Reason</th></tr>" + rows + "</table>")
        parts.append(f"<p>Judge command <code>{e(str(content.get('provider')))}</code>; "
                     f"<strong>cache hit:</strong> {'yes' if content.get('cached') else 'no'}"
                     + ("; minConfidence did not apply" if content.get("confidenceGate") == "no-confidence" else "") + "</p>")
    arts = {k: v for k, v in (r.get("artifacts") or {}).items() if k != "metrics" and str(v).endswith(".png")}
    if arts and not cleaned:
        figs = "".join(f'<figure><img loading="lazy" src="{e(_rel(arts[k], base))}" alt="{e(k)}"><figcaption>{e(k)}</figcaption></figure>'
                       for k in (*_ORDER, *sorted(set(arts) - set(_ORDER))) if k in arts)
        parts.append(f'<div class="quad">{figs}</div>')
        if "actual" in arts and "baseline" in arts:
            m = r.get("metrics") or {}
            w, h = m.get("width") or 1, m.get("height") or 1
            boxes = "".join(f'<rect x="{g["x"]}" y="{g["y"]}" width="{g["width"]}" height="{g["height"]}"/>' for g in r.get("regions") or [])
            parts.append('<div class="overlay"><label>Actual opacity <input type="range" min="0" max="1" step="0.05" value="0.5" '
                         'oninput="this.closest(\'.overlay\').querySelector(\'.top\').style.opacity=this.value"></label>'
                         f'<div class="stack"><img src="{e(_rel(arts["baseline"], base))}" alt="baseline">'
                         f'<img class="top" style="opacity:0.5" src="{e(_rel(arts["actual"], base))}" alt="actual">'
                         f'<svg viewBox="0 0 {w} {h}" preserveAspectRatio="none">{boxes}</svg></div></div>')
            regions = "".join(f'<button type="button">Region {i + 1}: ({g["x"]}, {g["y"]}) {g["width"]}×{g["height"]}</button>'
                              for i, g in enumerate(r.get("regions") or []))
            if regions:
                parts.append(f"<p>{regions}</p>")
    details = {k: r.get(k) for k in ("target", "metrics", "rules", "environment", "masks", "regions") if r.get(k) is not None}
    parts.append(f"<details><summary>Details</summary><pre>{e(json.dumps(details, indent=2, ensure_ascii=False))}</pre></details>")
    parts.append("</article>")
    return "".join(parts)


_STYLE = ("<style>.quad{display:grid;grid-template-columns:repeat(4,1fr);gap:6px}.quad img{max-width:100%;border:1px solid #ccc}"
          ".stack{position:relative;display:inline-block;max-width:100%}.stack img{display:block;max-width:100%}"
          ".stack .top,.stack svg{position:absolute;left:0;top:0;width:100%;height:100%}"
          ".stack svg rect{fill:none;stroke:red;stroke-width:2}article{border-top:1px solid #ddd;margin-top:1em}</style>")
_FILTER = ('<label>Show <select id="filter" onchange="for(const a of document.querySelectorAll(\'#visual article\'))'
           'a.hidden=this.value!==\'all\'&&a.dataset.status!==this.value"><option value="all">All</option>'
           + "".join(f'<option value="{s}">{s}</option>' for s in ("passed", "failed", "blocked", "skipped", "uncertain"))
           + "</select></label>")


def visual_html(report: Mapping[str, Any], task_dir: str | os.PathLike[str]) -> str:
    """The HTML fragment of the visual section (empty when the report has no ``visual``)."""
    visual = report.get("visual")
    if not isinstance(visual, Mapping):
        return ""
    base = Path(task_dir)
    cleaned = bool(visual.get("cleanedAt"))
    verdict = "passed" if report.get("passed") else "failed"
    head = f"<h3>Visual acceptance — {html.escape(verdict)}</h3><p>{html.escape(str(report.get('message', '')))}</p>"
    if cleaned:
        head += f"<p>Artifacts were removed explicitly: {html.escape(str(visual['cleanedAt']))}</p>"
    body = "".join(_article(r, base, cleaned) for r in visual.get("results") or []) or "<p>(no visual results)</p>"
    return _STYLE + head + _FILTER + body
