"""Visual Studio test result files (TRX) as a source of test counts and test ids (docs/toolchains.md).

``dotnet test --logger trx`` (VSTest, built into the .NET SDK: no package needed, unlike the JUnit
logger) and ``dotnet test --report-trx`` (Microsoft.Testing.Platform) write one ``*.trx`` file per
test project: ``<TestRun xmlns="http://microsoft.com/schemas/VisualStudio/TeamTest/2010">`` with
``<Results>`` (one ``<UnitTestResult testId testName outcome>`` per test), ``<TestDefinitions>``
(``<UnitTest id><TestMethod className name/></UnitTest>``) and ``<ResultSummary><Counters …/>``.

:func:`parse_trx` counts one document like :func:`.junit.parse_junit` counts a JUnit report, and
raises the same :class:`~.junit.JUnitError` (as :class:`TrxError`), so a collector of report files
can read both. It streams with ``defusedxml`` (no tree): a DTD, an entity declaration or an
external reference is refused before anything is expanded; malformed XML, another root element,
nesting deeper than :data:`~.junit.MAX_DEPTH` and files over :data:`~.junit.MAX_FILE_BYTES` are
refused too. Linear in the size; it keeps at most :data:`~..base.MAX_IDS` ids of each kind.

Counting rules:

* every ``<UnitTestResult>`` without nested results is one test (a data-driven MSTest result with
  ``<InnerResults>`` counts its inner results, not itself). Its ``outcome``: ``Passed``,
  ``PassedButRunAborted``, ``Completed`` and ``Warning`` pass; ``Failed``, ``Timeout`` and
  ``Aborted`` fail; ``Error`` is an error; ``NotExecuted``, ``Inconclusive``, ``NotRunnable``,
  ``Pending``, ``Disconnected`` and ``InProgress`` are skipped (an unknown outcome fails: it is not
  a pass);
* a document without any ``<UnitTestResult>`` counts from ``<Counters>``: ``passed`` (+
  ``passedButRunAborted``, ``completed``, ``warning``), ``failed`` + ``timeout`` + ``aborted``,
  ``error``, and the not-run kinds as skipped. A run that found no test (``No test is available``)
  has ``total == 0``;
* ids are ``className.testName`` (``className`` from the test's ``<TestMethod>``, without an
  assembly suffix ``, Assembly, Version=…``), or ``testName`` alone when it already starts with
  the class name (xUnit names tests by their full name) or has no class.

Sources: the VSTest TRX schema (``vstst.xsd``) and real files in ``tests/data/toolchains/dotnet/``.
"""

from __future__ import annotations

import re
from typing import Any

from ..base import MAX_IDS, TestCounts, unique_ids
from .failure_text import frames
from .junit import (
    MAX_DEPTH,
    MAX_FAILURES,
    MAX_MESSAGE_CHARS,
    JUnitError,
    JUnitFailure,
    feed_safely,
)

__all__ = ["TrxError", "is_trx", "parse_trx", "parse_trx_report"]

_PASS = frozenset({"passed", "passedbutrunaborted", "completed", "warning"})
_FAIL = frozenset({"failed", "timeout", "aborted"})
_ERROR = frozenset({"error"})
_SKIP = frozenset({"notexecuted", "inconclusive", "notrunnable", "pending", "disconnected", "inprogress"})
_COUNTER_KINDS: dict[str, tuple[str, ...]] = {
    "passed": ("passed", "passedButRunAborted", "completed", "warning"),
    "failed": ("failed", "timeout", "aborted"),
    "errors": ("error",),
    "skipped": ("notExecuted", "inconclusive", "notRunnable", "pending", "disconnected", "inProgress"),
}
_MAX_COUNT = 10**9
_FRAME = re.compile(r" in (\S[^\n]*?):line (\d+)")
"""A .NET stack frame's source location: ``at Ns.C.M() in /src/CTests.cs:line 27``."""


class TrxError(JUnitError):
    """A TRX file that cannot be counted (same meaning and attributes as :class:`~.junit.JUnitError`)."""


def is_trx(data: bytes) -> bool:
    """True when ``data`` looks like a TRX document: its first element (within the first 4 KiB)
    is ``<TestRun``. A cheap sniff for a collector that reads JUnit and TRX files alike."""
    head = data[:4096].decode("utf-8", errors="ignore").lstrip("\ufeff")
    i = 0
    while True:
        i = head.find("<", i)
        if i < 0 or i + 1 >= len(head):
            return False
        if head[i + 1] not in "?!":
            return head.startswith("TestRun", i + 1)
        i += 1


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _number(value: Any) -> int:
    try:
        return min(max(int(str(value).strip()), 0), _MAX_COUNT)
    except (TypeError, ValueError):
        return 0


def _outcome(value: str) -> str:
    v = (value or "").strip().lower()
    if v in _PASS:
        return "passed"
    if v in _ERROR:
        return "errors"
    if v in _SKIP:
        return "skipped"
    return "failed"  # Failed, Timeout, Aborted and anything unknown: not a pass


class _Reader:
    """The parser target: counts results on ``start``/``end`` events and remembers the class
    names of the few tests whose ids it keeps."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.depth = 0
        self.root: str | None = None
        self.counts = TestCounts(runner="trx")
        self.results = 0
        self.counters: dict[str, str] = {}
        # open <UnitTestResult>s: [testId, testName, outcome, has nested results, index in failures]
        self.open: list[list[Any]] = []
        # kept for ids: (kind, testId, testName), at most MAX_IDS per kind
        self.kept: list[tuple[str, str, str]] = []
        self.kept_per_kind = {"failed": 0, "passed": 0}
        self.wanted: set[str] = set()
        self.classes: dict[str, str] = {}
        self.unit_test: str | None = None
        # details of the first MAX_FAILURES failed/errored results: [testId, testName, kind, message, stack]
        self.failures: list[list[str]] = []
        self.capture: str | None = None  # "message" / "stack" while inside <Message>/<StackTrace> of one
        self.captured = 0

    def start(self, tag: str, attrib: dict[str, str]) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise TrxError(f"elements nested deeper than {MAX_DEPTH} levels", self.source)
        name = _local(tag)
        if self.root is None:
            self.root = name
            if name != "TestRun":
                raise TrxError(f"not a TRX file: the root element is <{name[:80]}>, not <TestRun>", self.source)
            return
        if name == "UnitTestResult":
            if self.open:
                self.open[-1][3] = True
            self.open.append([attrib.get("testId") or "", attrib.get("testName") or "",
                              _outcome(attrib.get("outcome") or ""), False, None])
        elif name in ("Message", "StackTrace") and self.open and self.open[-1][2] in ("failed", "errors"):
            if self.open[-1][4] is None and len(self.failures) < MAX_FAILURES:
                self.wanted.add(self.open[-1][0])
                self.open[-1][4] = len(self.failures)
                self.failures.append([self.open[-1][0], self.open[-1][1],
                                      "error" if self.open[-1][2] == "errors" else "failure", "", ""])
            if self.open[-1][4] is not None:
                self.capture, self.captured = ("message" if name == "Message" else "stack"), 0
        elif name == "UnitTest":
            self.unit_test = attrib.get("id") or ""
        elif name == "TestMethod" and self.unit_test is not None and self.unit_test in self.wanted:
            cls = (attrib.get("className") or "").split(",", 1)[0].strip()
            if cls:
                self.classes[self.unit_test] = cls
        elif name == "Counters":
            self.counters = dict(attrib)

    def data(self, text: str) -> None:
        if self.capture is None or not self.open or self.open[-1][4] is None or self.captured >= MAX_MESSAGE_CHARS:
            return
        chunk = text[: MAX_MESSAGE_CHARS - self.captured]
        self.captured += len(chunk)
        self.failures[self.open[-1][4]][3 if self.capture == "message" else 4] += chunk

    def end(self, tag: str) -> None:
        name = _local(tag)
        if name in ("Message", "StackTrace"):
            self.capture = None
        if name == "UnitTestResult" and self.open:
            test_id, test_name, outcome, nested, _detail = self.open.pop()
            if not nested:
                self._count(test_id, test_name, outcome)
        elif name == "UnitTest":
            self.unit_test = None
        self.depth -= 1

    def _count(self, test_id: str, test_name: str, outcome: str) -> None:
        self.results += 1
        c = self.counts
        setattr(c, outcome, getattr(c, outcome) + 1)
        kind = {"failed": "failed", "errors": "failed", "passed": "passed"}.get(outcome)
        if kind and self.kept_per_kind[kind] < MAX_IDS:
            self.kept_per_kind[kind] += 1
            self.kept.append((kind, test_id, test_name))
            self.wanted.add(test_id)

    def ident(self, test_id: str, test_name: str) -> str:
        """``className.testName`` (module doc)."""
        cls = self.classes.get(test_id, "")
        name = test_name.strip()
        return name if not cls or name == cls or name.startswith(cls + ".") else f"{cls}.{name}"

    def finish(self) -> TestCounts:
        c = self.counts
        if self.results == 0 and self.counters:
            for field_name, keys in _COUNTER_KINDS.items():
                setattr(c, field_name, sum(_number(self.counters.get(k)) for k in keys))
        failed: list[str] = []
        passed: list[str] = []
        for kind, test_id, test_name in self.kept:
            (failed if kind == "failed" else passed).append(self.ident(test_id, test_name))
        c.failed_ids = unique_ids(failed)
        c.passed_ids = unique_ids(passed)
        return c


def parse_trx(data: bytes, source: str = "") -> TestCounts:
    """Count one TRX document (module doc for the rules): :func:`parse_trx_report` without the
    failures' details. Same arguments and errors."""
    return parse_trx_report(data, source)[0]


def parse_trx_report(data: bytes, source: str = "") -> tuple[TestCounts, list[JUnitFailure]]:
    """Count one TRX document (module doc for the rules) and keep the details of its first
    :data:`~.junit.MAX_FAILURES` failed or errored results, in the shape of
    :func:`.junit.parse_junit_report` (so a report collector can read both).

    Args:
        data: the file's bytes (any encoding its XML declaration or BOM names).
        source: where it came from (a project-relative path), used in error messages only.

    Returns:
        ``(counts, failures)``: :class:`~..base.TestCounts` with ``runner == "trx"`` (a run of zero
        tests has ``total == 0``) and a :class:`~.junit.JUnitFailure` per failed result that has an
        ``<ErrorInfo>`` (message ≤ :data:`~.junit.MAX_MESSAGE_CHARS`; file and line from the first
        ``in <file>:line <n>`` of its stack trace).

    Raises:
        TrxError: more than :data:`~.junit.MAX_FILE_BYTES`; malformed or truncated XML; a DTD,
            entity declaration or external reference (refused before any expansion); a root
            other than ``<TestRun>``; nesting deeper than :data:`~.junit.MAX_DEPTH`.
    """
    reader = _Reader(source)
    feed_safely(data, reader, source, TrxError, "TRX files")
    counts = reader.finish()
    failures: list[JUnitFailure] = []
    for test_id, test_name, kind, message, stack in reader.failures:
        frame = _FRAME.search(stack)
        failures.append(JUnitFailure(reader.ident(test_id, test_name), kind, message.strip(),
                                     frame.group(1) if frame else None, int(frame.group(2)) if frame else None,
                                     frames(stack)))
    return counts, failures
