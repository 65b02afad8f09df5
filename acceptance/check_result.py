"""One check's result, the ``checks[]`` entry of a report (docs/acceptance.md §1.3).

:class:`CheckResult` is what the runner (:mod:`.runner`), the built-in ``git-diff-check``
(:mod:`.git`) and the engine's own gate results (:mod:`.engine`) build; :meth:`CheckResult.to_json`
gives the dict the rest of acceptance, the reports on disk and the MCP output carry. The keys and
their order are those of §1.3 and never change:

``{name, cmd, passed, durationMs, exitCode, outputTail, timeout, [skipped], [reason], [optional],
[aborted], [tests], [findings], [junit], [resolved]}``

Keys added to a result later (``notCounted``, ``integrityNote``, ``baseline``: verification
integrity and baseline grading) are added to that dict by the engine, after these.

The module also holds a result's vocabulary: the English ``reason`` constants code and stored
reports compare (shown in the current locale by :func:`display_reason`, docs/acceptance.md §3.2–§3.3)
and the one-word outcome of the reports (:func:`check_tag`). :mod:`.runner` re-exports them.

Plain Python, no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from ..core.i18n import N_, _

__all__ = [
    "CheckResult",
    "check_tag",
    "display_reason",
    "ZERO_TEST_REASON",
    "ZERO_TEST_MARK",
    "ALL_SKIPPED_REASON",
    "ALL_SKIPPED_MARK",
    "CONTRADICTION_REASON",
    "CONTRADICTION_MARK",
    "NO_REPORT_REASON",
    "NO_REPORT_MARK",
    "NO_COUNT_REASON",
    "NO_COUNT_MARK",
    "FAIL_CLOSED_REASONS",
    "SKIP_EMPTY",
    "SKIP_EXPLICIT",
    "SKIP_CANCELLED",
    "SPAWN_REASON_PREFIX",
    "OUTPUT_LIMIT_REASON",
]

# A result's ``reason`` stays this English text (code and stored reports compare it);
# :func:`display_reason` shows it in the current locale.
ZERO_TEST_REASON = N_("fail-closed: the command exited 0 but ran no test case")
ZERO_TEST_MARK = "\n[fail-closed] the command exited 0 but ran no test case"
ALL_SKIPPED_REASON = N_("fail-closed: the command exited 0 but every test was skipped")
ALL_SKIPPED_MARK = "\n[fail-closed] the command exited 0 but every test was skipped"
CONTRADICTION_REASON = N_("fail-closed: the command exited 0 but its output reports failed tests or errors")
CONTRADICTION_MARK = "\n[fail-closed] the command exited 0 but its output reports failed tests or errors"
NO_REPORT_REASON = N_("fail-closed: the command exited 0 but wrote no JUnit XML report that could be read (junitXml)")
NO_REPORT_MARK = "\n[fail-closed] the command exited 0 but wrote no JUnit XML report that could be read (junitXml)"
NO_COUNT_REASON = N_("fail-closed: a known test runner exited 0 but reported no test count")
NO_COUNT_MARK = "\n[fail-closed] a known test runner exited 0 but reported no test count"
FAIL_CLOSED_REASONS = (ZERO_TEST_REASON, ALL_SKIPPED_REASON, CONTRADICTION_REASON, NO_COUNT_REASON)
"""Every reason a mandatory test check that exited 0 can be failed with."""
SKIP_EMPTY = N_("empty command")
SKIP_EXPLICIT = N_("explicit skip command")
SKIP_CANCELLED = N_("task cancelled, not run")
SPAWN_REASON_PREFIX = "cannot start command: "
OUTPUT_LIMIT_REASON = N_("output limit: the check wrote more than {n} MiB and was stopped")
_SHOWN_PREFIXES = ((SPAWN_REASON_PREFIX, N_("cannot start command: {detail}")),
                   ("internal runner error: ", N_("internal runner error: {detail}")))


def display_reason(reason: Any) -> str:
    """A check result's ``reason`` in the current locale (the stored reason keeps its English
    constants, which code compares: :data:`ZERO_TEST_REASON`, :data:`SPAWN_REASON_PREFIX` …).
    Unknown text is returned as it is."""
    text = str(reason)
    if text in (*FAIL_CLOSED_REASONS, NO_REPORT_REASON, SKIP_EMPTY, SKIP_EXPLICIT, SKIP_CANCELLED):
        return _(text)
    for prefix, template in _SHOWN_PREFIXES:
        if text.startswith(prefix):
            return _(template).format(detail=text[len(prefix):])
    m = re.fullmatch(r"output limit: the check wrote more than (\d+) MiB and was stopped", text)
    return _(OUTPUT_LIMIT_REASON).format(n=m.group(1)) if m else text


def check_tag(c: Mapping[str, Any]) -> str:
    """A check result's outcome as one word: ``SKIP``, ``PASS``, ``ABORTED`` (stopped by a cancel:
    no verdict on the work) or ``FAIL`` — in the reports, the flow-run log and the checks table."""
    return "SKIP" if c.get("skipped") else "PASS" if c.get("passed") else "ABORTED" if c.get("aborted") else "FAIL"


@dataclass
class CheckResult:
    """A check's result (docs/acceptance.md §1.3).

    Attributes:
        name: the check's name (``git-diff-check``, ``requireChanges`` gate, a configured check).
        cmd: the command as shown (the display form of its argv).
        passed: True when it passed or was skipped.
        duration_ms: wall time, ms (0 when it did not run).
        exit_code: the process' exit code; None when it did not run, timed out, was killed or could
            not start.
        output_tail: the end of its output (at most :data:`.runner.OUTPUT_TAIL_CHARS` characters
            for a command check).
        timeout: True when it was killed at its timeout.
        skipped: True for a skip result (``skipped`` key only then).
        reason: why it was skipped or failed closed (``reason`` key only when set).
        optional: an optional check (``optional`` key only then).
        aborted: stopped by a cancel; None leaves the key out (the ``requireChanges`` gate has none).
        tests: the parsed test counts (:meth:`.testcount.TestCounts.to_json`), when any.
        findings: repair directive items of a failed check, when any.
        junit: the JUnit XML reports' summary (:meth:`JUnitResult.to_json`), when ``junitXml`` is set.
        resolved: the program that ran (:meth:`.resolved_cmd.ResolvedCommand.to_json`: ``{path,
            interpreter?, version?}``), when it started.
    """

    name: str
    cmd: str
    passed: bool
    duration_ms: int = 0
    exit_code: int | None = None
    output_tail: str = ""
    timeout: bool = False
    skipped: bool = False
    reason: str | None = None
    optional: bool = False
    aborted: bool | None = False
    tests: dict[str, Any] | None = None
    findings: list[Any] | None = None
    junit: dict[str, Any] | None = None
    resolved: dict[str, str] | None = None

    @classmethod
    def skip(cls, name: str, cmd: str, reason: str, optional: bool = False) -> CheckResult:
        """A skip result (docs/acceptance.md §3.2): ``passed`` True, ``exitCode`` None, ``durationMs`` 0."""
        return cls(name=name, cmd=cmd, passed=True, skipped=True, reason=reason, optional=optional)

    def to_json(self) -> dict[str, Any]:
        """The §1.3 dict: the seven fixed keys, then each optional key that is set, in the order of
        the module docstring (the same keys, values and order as the reports have always had)."""
        out: dict[str, Any] = {
            "name": self.name,
            "cmd": self.cmd,
            "passed": self.passed,
            "durationMs": self.duration_ms,
            "exitCode": self.exit_code,
            "outputTail": self.output_tail,
            "timeout": self.timeout,
        }
        if self.skipped:
            out["skipped"] = True
        if self.reason is not None:
            out["reason"] = self.reason
        if self.optional:
            out["optional"] = True
        if self.aborted is not None:
            out["aborted"] = self.aborted
        if self.tests is not None:
            out["tests"] = self.tests
        if self.findings is not None:
            out["findings"] = self.findings
        if self.junit is not None:
            out["junit"] = self.junit
        if self.resolved is not None:
            out["resolved"] = self.resolved
        return out
