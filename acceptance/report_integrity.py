"""The report's "Verification integrity" section (docs/integrity.md), in markdown and in HTML.

The HTML report once left it out while the markdown had it: a reader of the page never learnt
which policy judged the round or how each target test fared. Both now come from one list of
lines (:func:`md_integrity`); :func:`html_integrity` renders those lines as an escaped list.
"""

from __future__ import annotations

import html
import re
from typing import Any, Mapping

from ..core.i18n import _

__all__ = ["MD_MAX_LISTED", "html_integrity", "listed", "md_integrity"]

MD_MAX_LISTED = 50
"""At most this many failed test ids / classified tests per list in the markdown."""


def listed(items: list[str], limit: int = MD_MAX_LISTED) -> list[str]:
    """``items`` capped at ``limit``, the rest counted in a last item (``… and N more``)."""
    return items[:limit] + ([_("… and {n} more").format(n=len(items) - limit)] if len(items) > limit else [])


def md_integrity(report: Mapping[str, Any]) -> list[str]:
    """``## Verification integrity`` (docs/integrity.md): the policy, the pristine tree, removed tests,
    targets, flaky tests, visible versus hidden checks, test-aware code, unsupported claims; ``[]``
    without an integrity block."""
    g = report.get("integrity")
    if not isinstance(g, Mapping):
        return []
    lines = ["## " + _("Verification integrity"), "", "- " + _("Policy: `{policy}`").format(policy=g.get("policy"))]
    infra = [str(x) for x in g.get("changedTestInfra") or []]
    if infra:
        lines.append("- " + _("Test infrastructure the agent changed: ") + ", ".join(f"`{x}`" for x in listed(infra)))
    pr = g.get("pristine")
    if isinstance(pr, Mapping):
        kept = [*(pr.get("restored") or []), *(pr.get("excluded") or []), *(pr.get("merged") or [])]
        lines.append("- " + _("Pristine tree (built in {ms} ms): kept at the baseline: {files}").format(
            ms=pr.get("buildMs"), files=", ".join(f"`{x}`" for x in listed([str(k) for k in kept])) or _("nothing")))
        for c in pr.get("checks") or []:
            lines.append("  - " + _("{name} on the pristine tree: {verdict}").format(
                name=c.get("name"), verdict="PASS" if c.get("passed") else "FAIL"))
    for row in g.get("inventory") or []:
        if row.get("removedCount"):
            ids = ", ".join(f"`{x}`" for x in listed([str(i) for i in row.get("removed") or []]))
            lines.append("- " + _("[TESTS REMOVED] {check}: {n} baseline test(s) no longer ran {ids}").format(
                check=row.get("check"), n=row.get("removedCount"), ids=ids))
    for t in g.get("targets") or []:
        lines.append("- " + _("Target `{target}` ({source}): {status} on the {where} tree").format(
            target=t.get("target"), source=t.get("source"), status=t.get("status"), where=t.get("where")))
    for f in g.get("flaky") or []:
        lines.append("- " + _("[FLAKY] {check} ({tree} tree): {ids}; flaky at the baseline: {base}; {verdict}").format(
            check=f.get("check"), tree=f.get("tree"), ids=", ".join(f"`{x}`" for x in f.get("ids") or []),
            base=", ".join(f"`{x}`" for x in f.get("flakyAtBaseline") or []) or _("no"),
            verdict=_("not counted") if f.get("excused") else _("counted")))
    holdout = g.get("holdout") or []
    if holdout:
        visible = [c for c in report.get("checks") or [] if not c.get("skipped")]
        lines.append("- " + _("Visible checks: {ok}/{n} passed; hidden checks: {hok}/{hn} passed").format(
            ok=sum(1 for c in visible if c.get("passed")), n=len(visible),
            hok=sum(1 for h in holdout if h.get("passed")), hn=len(holdout)))
        for h in holdout:
            lines.append("  - " + _("{check} (area: {area}): {verdict}").format(
                check=h.get("check"), area=h.get("area"), verdict="PASS" if h.get("passed") else "FAIL"))
    for h in g.get("testAware") or []:
        lines.append("- " + _("[TEST-AWARE CODE] {file}:{line}: `{text}`").format(**{k: h.get(k) for k in ("file", "line", "text")}))
    for a in g.get("assertions") or []:
        lines.append("- " + _("Assertions in `{file}`: {before} → {after}").format(
            file=a.get("file"), before=a.get("before"), after=a.get("after")))
    for c in g.get("unsupportedClaims") or []:
        lines.append("- " + _("[UNSUPPORTED CLAIM] \"{claim}\": {why}").format(claim=c.get("claim"), why=c.get("why")))
    lines += [f"- [INFO] {n}" for n in g.get("notes") or []]
    return [*lines, ""]


_CODE_RE = re.compile(r"`([^`]*)`")


def html_integrity(report: Mapping[str, Any]) -> str:
    """``<section id="integrity">`` with the lines of :func:`md_integrity` as a list (a nested
    item for each indented line, backquoted names as ``<code>``, everything escaped); ``""``
    without an integrity block."""
    lines = md_integrity(report)
    if not lines:
        return ""
    items: list[str] = []
    for line in lines[1:]:
        if not line.strip():
            continue
        nested = line.startswith("  - ")
        text = _CODE_RE.sub(lambda m: f"<code>{m.group(1)}</code>", html.escape(line.strip()[2:], quote=False))
        items.append(f'<li class="nested">{text}</li>' if nested else f"<li>{text}</li>")
    return ('<section id="integrity"><h2>' + html.escape(_("Verification integrity")) + "</h2><ul>"
            + "".join(items) + "</ul></section>")
