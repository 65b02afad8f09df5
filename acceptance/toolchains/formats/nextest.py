"""``cargo nextest run``: test counts from nextest's human output (docs/toolchains.md §2).

nextest (https://nexte.st) writes to stderr, one status line per finished test and a summary::

        Starting 3 tests across 2 binaries (1 test skipped)
            PASS [   0.003s] (1/3) demo tests::adds
            FAIL [   0.004s] (2/3) demo::integration from_outside
    --- STDOUT:              demo::integration from_outside ---
    running 1 test                                        <- the test binary's own libtest output
    test result: FAILED. 0 passed; 1 failed; …
         SIGSEGV [   0.100s] (3/3) demo tests::crashes
    ------------
         Summary [   0.010s] 3 tests run: 1 passed, 2 failed, 1 skipped
            FAIL [   0.004s] (2/3) demo::integration from_outside      <- final recap
    error: test run failed

Because the captured libtest output (``running 1 test``, ``test result: …``) is printed inside,
this form must be tried before the ``cargo test`` text form for nextest commands.

The summary line (nextest ``write_summary_str``, 0.9.x) is ``<finished>[/<initial>] tests run:
<P> passed[ (<n> slow, <n> flaky, <n> leaky)], [<F> failed[ (<n> due to being leaky)], ][<E> exec
failed, ][<T> timed out, ]<K> skipped`` (``benchmarks`` instead of ``tests`` for benchmarks;
``<finished>/<initial>`` when the run was cancelled). Counting:

* ``passed`` = P (flaky, slow and leaky passes included), ``failed`` = F + T, ``errors`` = E
  (the test binary could not be executed), ``skipped`` = K (nextest's skipped: ``#[ignore]``d
  tests **and** tests left out by filters or the default filter);
* a run of zero tests (``0 tests run``, ``Starting 0 tests``, ``error: no tests to run``, the
  advisory exit code 4 since 0.9.85) gives ``total == 0``: its "skipped" are only tests that were
  not selected;
* ids are nextest's test names ``<binary-id> <test name>`` (``demo::integration from_outside``),
  each with its final status (a retried test that passed on ``TRY 2 PASS`` / ``FLAKY 2/3`` is a
  pass): failed for ``FAIL``, ``FAIL + LEAK``, ``LEAK-FAIL``, ``TIMEOUT``, ``XFAIL`` (exec fail),
  ``ABORT``, ``SIG…``, ``FLKY-FL``; passed for ``PASS``, ``LEAK``, ``SLOW``, ``TIMEOUT-PASS``,
  ``FLAKY``. Without a summary (a cut-off run) the counts come from these final statuses.

A build failure before any test ran prints no nextest line (only cargo's ``error: could not
compile``): None here, the cargo text form counts it. nextest's JUnit report is read by
:mod:`.junit`. Recorded real outputs: ``tests/data/toolchains/cargo/`` (README there: from public
repositories, nextest cannot be installed here). Linear: one anchored regex per line.
"""

from __future__ import annotations

import re

from ..base import TestCounts

RUNNER = "nextest"
"""The ``TestCounts.runner`` (count-format id) of this format."""

_SUMMARY = re.compile(
    r"^[ \t]*Summary \[[^\]\n]{0,40}\] (\d{1,12})(?:/(\d{1,12}))? (?:tests?|benchmarks?) run: ([^\n]*)$", re.MULTILINE
)
_SUMMARY_PART = re.compile(r"(\d{1,12}) (exec failed|timed out|passed|failed|skipped)\b")
_STARTING = re.compile(r"^[ \t]*Starting (\d{1,12}) (?:tests?|benchmarks?) across \d+ binar(?:y|ies)", re.MULTILINE)
_NO_TESTS = re.compile(r"^error: no tests to run[ \t]*$", re.MULTILINE)
_RUN_ID = re.compile(r"^[ \t]*Nextest run ID [0-9a-f-]+ ", re.MULTILINE)
_STATUS_LINE = re.compile(
    r"^[ \t]{0,16}(?:TRY \d+ )?([A-Z][A-Z+ -]{0,12}?[A-Z]|FLAKY \d+/\d+|FLKY-FL \d+/\d+)"
    r" \[([^\]\n]{0,40})\] (?:\([^)\n]{0,40}\) )?(\S+) (\S[^\n]*)$",
    re.MULTILINE,
)
_PASS = frozenset({"PASS", "LEAK", "SLOW", "SLOW + LEAK", "SLOW+TMPASS", "TIMEOUT-PASS", "TMPASS"})
_FAIL = frozenset({"FAIL", "FAIL + LEAK", "FL+LK", "LEAK-FAIL", "LKFAIL", "TIMEOUT", "TMT", "XFAIL", "ABORT"})


def _status(word: str, duration: str) -> str | None:
    """``pass`` / ``fail`` / ``skip`` for a status word, None for progress lines."""
    if word.startswith("FLAKY "):
        return "pass"
    if word.startswith("FLKY-FL "):
        return "fail"
    if word == "SKIP":
        return "skip"
    if word == "SLOW" and ">" in duration:  # "SLOW [>  1.000s]": still running
        return None
    if word in _PASS:
        return "pass"
    if word in _FAIL or word.startswith(("SIG", "ABORT SIG")):
        return "fail"
    return None


def _final_statuses(text: str) -> dict[str, str]:
    """Test name -> its last pass/fail/skip status line (later lines win: retries, recaps)."""
    final: dict[str, str] = {}
    for m in _STATUS_LINE.finditer(text):
        status = _status(m.group(1), m.group(2))
        if status is not None:
            name = f"{m.group(3)} {m.group(4).rstrip()}"
            final.pop(name, None)  # keep the order of final outcomes
            final[name] = status
    return final


def parse_nextest(text: str) -> TestCounts | None:
    """Count tests from ``cargo nextest run`` output (see the module doc for the rules).

    Args:
        text: the (ANSI-cleaned) merged output, or a tail of it.

    Returns:
        ``TestCounts(runner="nextest")``; ``total == 0`` when no test ran; None when ``text``
        has no nextest summary, ``Starting N tests across …`` line or run id. Never raises.
    """
    summaries = list(_SUMMARY.finditer(text))
    starting = list(_STARTING.finditer(text))
    if not summaries and not starting and not _RUN_ID.search(text):
        return None
    final = _final_statuses(text)
    failed_ids = [n for n, s in final.items() if s == "fail"]
    passed_ids = [n for n, s in final.items() if s == "pass"]
    if summaries:
        last = summaries[-1]
        if int(last.group(1)) == 0:
            return TestCounts(RUNNER)
        parts: dict[str, int] = {}
        for n, kind in _SUMMARY_PART.findall(last.group(3)):
            parts.setdefault(kind, int(n))  # the first one: "(2 due to being leaky)" is no count
        return TestCounts(
            RUNNER,
            passed=parts.get("passed", 0),
            failed=parts.get("failed", 0) + parts.get("timed out", 0),
            skipped=parts.get("skipped", 0),
            errors=parts.get("exec failed", 0),
            failed_ids=failed_ids,
            passed_ids=passed_ids,
        )
    if not final and (_NO_TESTS.search(text) or (starting and int(starting[-1].group(1)) == 0)):
        return TestCounts(RUNNER)
    return TestCounts(
        RUNNER,
        passed=len(passed_ids),
        failed=len(failed_ids),
        skipped=sum(1 for s in final.values() if s == "skip"),
        failed_ids=failed_ids,
        passed_ids=passed_ids,
    )
