"""The verdict message of a verify round (docs/acceptance.md §3.5): :func:`build_message`.

Used by :mod:`.engine`, which re-exports :func:`build_message` and :data:`NO_CHANGES_CHECK`.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..core.i18n import _

NO_CHANGES_CHECK = "no-changes"


def build_message(
    checks: Sequence[Mapping[str, Any]],
    analysis: Mapping[str, Any],
    blocking: Sequence[Mapping[str, Any]],
    cancelled: bool,
    zero_test: Sequence[str],
    grading_bits: Sequence[str] = (),
) -> str:
    """The verdict message (docs/acceptance.md §3.5, English; visual/content bits omitted).

    Applicable bits joined by ``"; "`` and ended with ``"."``; none → ``"Acceptance passed."``.
    Checks marked ``notCounted`` (baseline grading excused them) are not listed as failed;
    ``grading_bits`` (regressions, new failures, still failing …) follow the failed checks.
    """
    bits: list[str] = []
    for issue in blocking:
        bits.append(_("Acceptance blocked [{code}]: {message}").format(code=issue.get("code"), message=issue.get("message")))
    if cancelled:
        bits.append(_("task cancelled, verification incomplete"))
    failed = [
        c for c in checks
        if not c.get("passed") and not c.get("skipped") and not c.get("optional") and not c.get("notCounted")
    ]
    if failed:
        bits.append(_("failed checks: {names}").format(names=", ".join(str(c.get("name")) for c in failed)))
    bits.extend(grading_bits)
    if zero_test:
        bits.append(_("test commands ran zero tests: {names}").format(names=", ".join(zero_test)))
    if any(c.get("name") == NO_CHANGES_CHECK and not c.get("passed") for c in checks):
        bits.append(_("no file changes detected relative to the pre-work baseline"))
    opt_failed = [c for c in checks if not c.get("passed") and not c.get("skipped") and c.get("optional")]
    if opt_failed:
        bits.append(_("optional checks failed (do not affect the verdict): {names}").format(
            names=", ".join(str(c.get("name")) for c in opt_failed)))
    sig = analysis.get("signals") or {}
    tampering = analysis.get("tampering") or []
    if tampering:
        kinds = sorted({str(t.get("kind")) for t in tampering})
        bits.append(_("agent tampering signals (not blocking, review them): {kinds}").format(kinds=", ".join(kinds)))
    if (sig.get("consoleDebug") or 0) > 0 or (sig.get("todo") or 0) > 0 or (sig.get("debugLeftover") or 0) > 0:
        bits.append(_("suspicious markers present, review the report"))
    warnings = analysis.get("warnings") or []
    if warnings:
        bits.append(_("{n} warning(s)").format(n=len(warnings)))
    if not bits:
        return _("Acceptance passed.")
    text = _("; ").join(bits)
    text = text[0].upper() + text[1:]
    end = _(".")  # the sentence's full stop in the locale's script
    return text.rstrip(".").rstrip(end) + end
