"""The coded reasons a round's report gives for its verdict (docs/integrity.md): one vocabulary for the
report, the corpus tests and the hosts.

:func:`verdict_reasons` reads a report dict (``report-N.json``) and names why it did not pass:
the blocking issue codes (``TAMPERING``, ``TESTS_REMOVED``, ``TARGET_FAILED``, ``HOLDOUT_FAILED``,
``GIT_FAILED`` …), :data:`ZERO_COUNT` for a test check failed closed because nothing countable ran
(zero tests, every test skipped, a known runner that printed no count), and :data:`CHECK_FAILED`
for any other failing mandatory check.
"""

from __future__ import annotations

from typing import Any, Mapping

ZERO_COUNT = "ZERO_COUNT"
"""A mandatory test check exited 0 but nothing countable ran (zero tests, all skipped, no count)."""
CHECK_FAILED = "CHECK_FAILED"
"""A mandatory check failed (non-zero exit, contradiction, timeout …)."""
AGENT_FAILURE_CODES = frozenset({"TAMPERING", "TESTS_REMOVED", "TARGET_FAILED", "HOLDOUT_FAILED"})
"""Blocking codes that are the agent's own failure: the round failed like a failing check, and a
rework round can mend it (restore the tests, really fix the code). Every other blocking code (a
broken config, git refusing, a check that cannot start, a visual baseline to approve) needs a
person."""


def is_agent_failure(code: object) -> bool:
    """True for a blocking code of :data:`AGENT_FAILURE_CODES`."""
    return code in AGENT_FAILURE_CODES

_ZERO_PREFIXES = (
    "fail-closed: the command exited 0 but ran no test case",
    "fail-closed: the command exited 0 but every test was skipped",
    "fail-closed: a known test runner exited 0 but reported no test count",
)


def verdict_reasons(report: Mapping[str, Any]) -> set[str]:
    """The coded reasons of a report's verdict (empty for a passed round).

    Args:
        report: the round's report dict (``{"blockingIssues": [{code, message}], "checks": [...]}``).

    Returns:
        A set of codes: blocking issue codes, :data:`ZERO_COUNT`, :data:`CHECK_FAILED`.
    """
    out: set[str] = {str(i.get("code")) for i in report.get("blockingIssues") or [] if i.get("code")}
    for c in report.get("checks") or []:
        if c.get("passed") or c.get("skipped") or c.get("optional") or c.get("notCounted"):
            continue
        reason = str(c.get("reason") or "")
        out.add(ZERO_COUNT if reason.startswith(_ZERO_PREFIXES) else CHECK_FAILED)
    return out
