"""Test ids a check's output reports, for baseline grading (see :mod:`.grading`).

:func:`parse_test_ids` uses :func:`.testcount.parse_tests` where it knows the runner (pytest, jest,
vitest, go, cargo…) and falls back to a minimal pytest parser; :class:`TestIds` is what one run
reported (passed and failed ids, the summary's failure count).
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

log = logging.getLogger("tianshu_mcp")



@dataclass
class TestIds:
    """Test ids one run reported.

    Attributes:
        runner: ``pytest``, ``jest``, ``go``, ….
        passed_ids / failed_ids: ids as the runner prints them (failed includes errors).
        failed_count: failures + errors the runner's summary counted (None: unknown); when it is
            larger than ``len(failed_ids)`` the id list is incomplete.
    """

    __test__ = False  # not a pytest class

    runner: str
    passed_ids: list[str] = field(default_factory=list)
    failed_ids: list[str] = field(default_factory=list)
    failed_count: int | None = None

    @property
    def complete(self) -> bool:
        """True when every failure the summary counted has an id."""
        return self.failed_count is None or self.failed_count <= len(set(self.failed_ids))

    def to_json(self) -> dict[str, Any]:
        """``{runner, passedIds, failedIds, failedCount}``."""
        return {
            "runner": self.runner,
            "passedIds": list(self.passed_ids),
            "failedIds": list(self.failed_ids),
            "failedCount": self.failed_count,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> "TestIds | None":
        """Inverse of :meth:`to_json` (None for None/invalid)."""
        if not isinstance(data, Mapping):
            return None
        fc = data.get("failedCount")
        return cls(
            runner=str(data.get("runner") or ""),
            passed_ids=[str(x) for x in data.get("passedIds") or []],
            failed_ids=[str(x) for x in data.get("failedIds") or []],
            failed_count=int(fc) if isinstance(fc, int) else None,
        )


_PYTEST_SHORT = re.compile(r"^(PASSED|FAILED|ERROR|XPASS|XFAIL)\s+(\S+)(?:\s+-\s.*)?$", re.M)
_PYTEST_VERBOSE = re.compile(r"^(\S+::\S+(?:\[[^\]]*\])?)\s+(PASSED|FAILED|ERROR|XPASS|XFAIL)\b", re.M)
_PYTEST_SUMMARY = re.compile(r"^=*\s*((?:\d+ \w+(?:, )?)+) in [\d.]+s\b", re.M)


def _parse_pytest_ids(output: str) -> TestIds | None:
    """Minimal pytest parser: ``-rA``/``-rfE`` short-summary lines (``PASSED id``, ``FAILED id -
    msg``, ``ERROR id``) and ``-v`` lines (``id PASSED``); counts from the final summary line."""
    passed: dict[str, None] = {}
    failed: dict[str, None] = {}
    for m in _PYTEST_SHORT.finditer(output):
        (failed if m.group(1) in ("FAILED", "ERROR") else passed)[m.group(2)] = None
    for m in _PYTEST_VERBOSE.finditer(output):
        (failed if m.group(2) in ("FAILED", "ERROR") else passed)[m.group(1)] = None
    summaries = _PYTEST_SUMMARY.findall(output)
    count: int | None = None
    if summaries:
        c = {k.lower(): int(v) for v, k in re.findall(r"(\d+) (\w+)", summaries[-1])}
        count = c.get("failed", 0) + c.get("error", 0) + c.get("errors", 0)
    if not passed and not failed and count is None:
        return None
    for k in failed:
        passed.pop(k, None)
    return TestIds("pytest", list(passed), list(failed), count)


def parse_test_ids(output: str, argv: Sequence[str]) -> TestIds | None:
    """Test ids of one run: ``testcount.parse_tests(output, argv)`` when available (pytest, jest,
    vitest, go, cargo…), else (or when it finds no id) the minimal pytest parser here.

    Returns:
        :class:`TestIds`, or None when the output shows no recognisable test result.
    """
    if not output:
        return None
    found: TestIds | None = None
    try:
        from .. import testcount

        parse_tests = getattr(testcount, "parse_tests", None)
        tc = parse_tests(output, list(argv)) if callable(parse_tests) else None
    except Exception:  # noqa: BLE001 - a parser bug must not sink the round
        log.debug("testcount.parse_tests failed", exc_info=True)
        tc = None
    if tc is not None:
        failed_ids = [str(x) for x in getattr(tc, "failed_ids", None) or []]
        passed_ids = [str(x) for x in getattr(tc, "passed_ids", None) or []]
        n_failed = getattr(tc, "failed", None)
        n_errors = getattr(tc, "errors", None)
        count = (int(n_failed or 0) + int(n_errors or 0)) if (n_failed is not None or n_errors is not None) else None
        found = TestIds(str(getattr(tc, "runner", "") or ""), passed_ids, failed_ids, count)
    mini = _parse_pytest_ids(output) if found is None or found.runner in ("", "pytest") else None
    if found is not None and (found.passed_ids or found.failed_ids):
        # testcount keeps a bounded number of ids; the local pytest parser keeps them all
        if mini is not None and len(mini.passed_ids) + len(mini.failed_ids) > len(found.passed_ids) + len(found.failed_ids):
            return mini
        return found
    if mini is not None and (mini.passed_ids or mini.failed_ids):
        return mini
    return found or mini


def _is_pytest_argv(argv: Sequence[str]) -> int | None:
    """Index of the ``pytest`` token (``pytest``, ``py.test``, ``…/pytest``, ``-m pytest``), or None."""
    for i, a in enumerate(argv):
        base = os.path.basename(a)
        if base in ("pytest", "py.test", "pytest.exe") or (a == "pytest" and i > 0 and argv[i - 1] == "-m"):
            return i
    return None
