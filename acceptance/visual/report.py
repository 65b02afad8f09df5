"""The visual section of a round's reports (docs/visual.md §10): markdown for ``report-N.md`` and a
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

from ...core.i18n import N_, _

_ORDER = ("actual", "baseline", "diff", "regions")
GATE_LABELS = {"off": N_("not configured"), "applied": N_("applied"),
               "downgraded": N_("below the threshold, downgraded to uncertain"),
               "no-confidence": N_("the command reported no confidence; minConfidence did not apply")}
"""Confidence-gate labels (msgids: shown through ``_()``; docs/visual.md §10)."""


def _yes_no(flag: Any) -> str:
    return _("yes") if flag else _("no")


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def visual_markdown(report: Mapping[str, Any], html_path: str | None = None) -> str:
    """``## Visual acceptance`` section (empty string when the report has no ``visual``).

    ``html_path``: the round's offline HTML report, linked at the end; default
    ``report["files"]["html"]``, which ``write_report`` sets only after the section is rendered
    (the engine passes the path it will write; docs/visual.md §10)."""
    visual = report.get("visual")
    if not isinstance(visual, Mapping):
        return ""
    lines = [_("## Visual acceptance"), "",
             _("Visual results are evidence, not something to work around: a failing page is fixed in the project, "
               "never by editing baselines or the visual rules."),
             _("Content checks are warnings by default (optional: true); only blocking content checks fail the round "
               "and trigger rework.")]
    if visual.get("cleanedAt"):
        lines.append(_("Artifacts were removed explicitly: {at}").format(at=visual["cleanedAt"]))
    for r in visual.get("results") or []:
        where = r.get("viewport") or r.get("target")
        lines += ["", f"### {r.get('id')} / {where} [{r.get('status')}]",
                  _("- Target: {target}").format(target=r.get("target")),
                  _("- Reason: {code} — {message}").format(code=r.get("code"), message=r.get("message")),
                  _("- Optional: {optional}; repairable: {repairable}").format(
                      optional=str(bool(r.get("optional"))).lower(), repairable=str(bool(r.get("repairable"))).lower())]
        content = r.get("content")
        if isinstance(content, Mapping):
            m = r.get("metrics") or {}
            conf = (_("; mean confidence {confidence}").format(confidence=content["confidence"])
                    if content.get("confidence") is not None else "")
            gate = content.get("confidenceGate")
            lines += [_("- Expected: {expect}").format(expect=content.get("expect")),
                      _("- Votes: {samples} sample(s): {passed} passed / {failed} failed / {invalid} invalid{confidence}").format(
                          samples=m.get("samples"), passed=m.get("passedVotes"), failed=m.get("failedVotes"),
                          invalid=m.get("invalidVotes"), confidence=conf),
                      _("- Confidence gate: {label}").format(
                          label=_(GATE_LABELS[str(gate)]) if str(gate) in GATE_LABELS else gate),
                      _("- Reasons: {reasons}").format(reasons=" / ".join(str(v.get("reason")) for v in content.get("votes") or [])),
                      _("- Judge command: {provider}; cache hit: {hit}").format(provider=content.get("provider"),
                                                                               hit=_yes_no(content.get("cached")))]
        for key, label in (("rules", N_("- Expected rules: {json}")), ("metrics", N_("- Actual metrics: {json}")),
                           ("regions", N_("- Diff regions: {json}")), ("masks", N_("- Masked regions: {json}")),
                           ("environment", N_("- Environment: {json}"))):
            if r.get(key) is not None:
                lines.append(_(label).format(json=_compact(r[key])))
        for kind, path in (r.get("artifacts") or {}).items():
            lines.append(f"- [{kind}]({path})")
    html_path = html_path or (report.get("files") or {}).get("html")
    if html_path:
        lines += ["", _("Offline report: [HTML]({path})").format(path=html_path)]
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
        verdicts = {True: _yes_no(True), False: _yes_no(False), None: _("undecided")}
        rows = "".join(
            f"<tr><td>{i + 1}</td><td>{e(verdicts.get(v.get('passed'), verdicts[None]))}</td>"
            f"<td>{e(str(v['confidence'])) if v.get('confidence') is not None else '—'}</td><td>{e(str(v.get('reason')))}</td></tr>"
            for i, v in enumerate(content.get("votes") or []))
        heads = "".join("<th>" + e(label) + "</th>" for label in (_("Sample"), _("Passed"), _("Confidence"), _("Reason")))
        parts.append("<table><tr>" + heads + "</tr>" + rows + "</table>")
        parts.append("<p>" + _("Judge command {provider}; {cache_hit} {answer}").format(
                         provider="<code>" + e(str(content.get("provider"))) + "</code>",
                         cache_hit="<strong>" + e(_("cache hit:")) + "</strong>", answer=e(_yes_no(content.get("cached"))))
                     + (e(_("; minConfidence did not apply")) if content.get("confidenceGate") == "no-confidence" else "")
                     + "</p>")
    arts = {k: v for k, v in (r.get("artifacts") or {}).items() if k != "metrics" and str(v).endswith(".png")}
    if arts and not cleaned:
        figs = "".join(f'<figure><img loading="lazy" src="{e(_rel(arts[k], base))}" alt="{e(k)}"><figcaption>{e(k)}</figcaption></figure>'
                       for k in (*_ORDER, *sorted(set(arts) - set(_ORDER))) if k in arts)
        parts.append(f'<div class="quad">{figs}</div>')
        if "actual" in arts and "baseline" in arts:
            m = r.get("metrics") or {}
            w, h = m.get("width") or 1, m.get("height") or 1
            boxes = "".join(f'<rect x="{g["x"]}" y="{g["y"]}" width="{g["width"]}" height="{g["height"]}"/>' for g in r.get("regions") or [])
            parts.append('<div class="overlay"><label>' + e(_("Actual opacity"))
                         + ' <input type="range" min="0" max="1" step="0.05" value="0.5" '
                         'oninput="this.closest(\'.overlay\').querySelector(\'.top\').style.opacity=this.value"></label>'
                         f'<div class="stack"><img src="{e(_rel(arts["baseline"], base))}" alt="baseline">'
                         f'<img class="top" style="opacity:0.5" src="{e(_rel(arts["actual"], base))}" alt="actual">'
                         f'<svg viewBox="0 0 {w} {h}" preserveAspectRatio="none">{boxes}</svg></div></div>')
            region = _("Region {i}: ({x}, {y}) {width}×{height}")
            regions = "".join('<button type="button">' + e(region.format(i=i + 1, **g)) + "</button>"
                              for i, g in enumerate(r.get("regions") or []))
            if regions:
                parts.append(f"<p>{regions}</p>")
    details = {k: r.get(k) for k in ("target", "metrics", "rules", "environment", "masks", "regions") if r.get(k) is not None}
    parts.append("<details><summary>" + e(_("Details")) + "</summary>"
                 f"<pre>{e(json.dumps(details, indent=2, ensure_ascii=False))}</pre></details>")
    parts.append("</article>")
    return "".join(parts)


_STYLE = ("<style>.quad{display:grid;grid-template-columns:repeat(4,1fr);gap:6px}.quad img{max-width:100%;border:1px solid #ccc}"
          ".stack{position:relative;display:inline-block;max-width:100%}.stack img{display:block;max-width:100%}"
          ".stack .top,.stack svg{position:absolute;left:0;top:0;width:100%;height:100%}"
          ".stack svg rect{fill:none;stroke:red;stroke-width:2}article{border-top:1px solid #ddd;margin-top:1em}</style>")
def _filter() -> str:
    """The status filter (its labels in the current locale; option values stay the status names)."""
    return ("<label>" + html.escape(_("Show")) + ' <select id="filter" onchange="for(const a of '
            "document.querySelectorAll('#visual article'))a.hidden=this.value!=='all'&&a.dataset.status!==this.value\">"
            '<option value="all">' + html.escape(_("All")) + "</option>"
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
    head = ("<h3>" + html.escape(_("Visual acceptance — {verdict}").format(verdict=verdict)) + "</h3>"
            f"<p>{html.escape(str(report.get('message', '')))}</p>")
    if cleaned:
        head += "<p>" + html.escape(_("Artifacts were removed explicitly: {at}").format(at=visual["cleanedAt"])) + "</p>"
    body = ("".join(_article(r, base, cleaned) for r in visual.get("results") or [])
            or "<p>" + html.escape(_("(no visual results)")) + "</p>")
    return _STYLE + head + _filter() + body
