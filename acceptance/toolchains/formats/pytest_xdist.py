"""pytest with pytest-xdist (``pytest -n 2``): the per-test lines of its verbose form (issue 13,
must-show 2).

Recorded real outputs (``tests/data/toolchains/pytest/``, pytest 9.2.0, xdist 3.8.0) show that
the text form of :mod:`..pytest` already counts xdist runs right: the summary line
(``2 failed, 3 passed, 1 skipped, 1 error in 24.34s``, ``no tests ran in 24.02s``) and the short
summary (``FAILED``/``ERROR``/``PASSED`` lines with ``-rA``) are printed as without xdist, and
``-q`` prints only dots. What differs is the verbose form (``-v``): each result line is
``[gw1] [ 42%] PASSED tests/test_x.py::test_y`` (worker and progress first), which pytest's
verbose-line pattern (``<node id> PASSED [ 42%]``) does not read, so the passed ids of
``pytest -n 2 -v`` were lost (failed ids still come from the short summary).

:func:`parse_pytest_xdist` is the whole xdist form: the counts of the last pytest summary line,
the ids of the ``[gwN]`` result lines and of the short summary. It answers None for output
without a ``[gwN] [ NN%] STATUS`` line, so the plain pytest form keeps everything else.
:data:`XDIST_RESULT` alone is enough to teach the pytest form those lines.
"""

from __future__ import annotations

import re

from ..base import TestCounts, unique_ids

RUNNER = "pytest"
"""The same runner id as the plain pytest form: xdist changes how results are printed, not what."""

XDIST_RESULT = re.compile(
    r"^\[gw\d+\] \[ {0,2}\d{1,3}%\] (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) ([^\n]+)$", re.MULTILINE
)
"""One verbose xdist result line: ``[gw0] [ 33%] PASSED tests/test_calc.py::test_add``."""

_SUMMARY = re.compile(
    r"^(?:=+ )?((?:\d+ \w+)(?:, \d+ \w+)*|no tests ran) in [\d.]+s(?: \(\d+:\d\d:\d\d\))?(?: =+)?[ \t]*$", re.MULTILINE
)
_SHORT = re.compile(r"^(PASSED|FAILED|ERROR|XPASS) ([^\n]+)$", re.MULTILINE)
_KINDS = {"passed", "failed", "error", "errors", "skipped", "xfailed", "xpassed", "deselected", "warning", "warnings"}


def parse_pytest_xdist(text: str) -> TestCounts | None:
    """Counts and ids of a ``pytest -n N -v`` run.

    Args:
        text: the (ANSI-cleaned) merged output, or a tail of it.

    Returns:
        ``TestCounts(runner="pytest")`` (``xpassed`` counts as passed, ``xfailed`` as skipped,
        as in the pytest form; ``total == 0`` for ``no tests ran``); None when the text has no
        xdist result line or no pytest summary line. Never raises.
    """
    results = list(XDIST_RESULT.finditer(text))
    if not results:
        return None
    summary = None
    for summary in _SUMMARY.finditer(text):
        pass
    if summary is None:
        return None
    body = summary.group(1)
    c: dict[str, int] = {}
    for n, kind in re.findall(r"(\d{1,12}) (\w+)", body):
        c[kind.lower()] = c.get(kind.lower(), 0) + int(n)
    if body != "no tests ran" and not c.keys() & _KINDS:
        return None
    failed_ids: list[str] = []
    passed_ids: list[str] = []
    for m in results:
        if m.group(1) in ("FAILED", "ERROR"):
            failed_ids.append(m.group(2).strip())
        elif m.group(1) in ("PASSED", "XPASS"):
            passed_ids.append(m.group(2).strip())
    for m in _SHORT.finditer(text):  # "FAILED <node id> - <reason>"
        ident = m.group(2).split(" - ", 1)[0].strip()
        if m.group(1) in ("FAILED", "ERROR"):
            failed_ids.append(ident)
        elif m.group(1) in ("PASSED", "XPASS"):
            passed_ids.append(ident)
    return TestCounts(
        RUNNER,
        passed=c.get("passed", 0) + c.get("xpassed", 0),
        failed=c.get("failed", 0),
        skipped=c.get("skipped", 0) + c.get("xfailed", 0),
        errors=c.get("error", 0) + c.get("errors", 0),
        failed_ids=unique_ids(failed_ids),
        passed_ids=unique_ids(passed_ids),
    )
