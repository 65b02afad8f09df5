"""JUnit XML reports as a source of test counts and test ids (docs/toolchains.md §3).

Nearly every test runner can write a JUnit XML report: Maven Surefire and Gradle (Java, Kotlin),
pytest ``--junitxml``, jest-junit, go-junit-report / gotestsum, cargo-nextest, CTest
``--output-junit``, PHPUnit ``--log-junit``, ExUnit's ``junit_formatter``, … A check may declare
``junitXml: "<glob>"``; its counts and failed test ids then come from the files it wrote
(:func:`collect_junit`), ahead of the text heuristics of :mod:`...testcount`.

* :func:`parse_junit` counts one document (``runner`` ``"junit"``). It is read as a stream with
  ``defusedxml`` (no tree is built): a DTD, an entity declaration or an external reference is
  refused before anything is expanded (billion laughs, XXE), and so are malformed XML, a root
  that is not ``<testsuites>``/``<testsuite>``, nesting deeper than :data:`MAX_DEPTH` and
  documents over :data:`MAX_FILE_BYTES`; each raises :class:`JUnitError`. Linear in the size.
* :func:`collect_junit` finds the files of a project-relative glob, ignores those older than the
  check's start (a stale report of an earlier run, named in the result), refuses files outside
  the project (symlinks), sums the rest and says in one line what it read. It never raises for
  file-system problems.

Counting rules (the union of what the producers above write):

* every ``<testcase>``, at any depth under the root, is one test: a ``<failure>`` child makes it
  failed, an ``<error>`` child errored, a ``<skipped>`` child skipped, otherwise it passed.
  Surefire's rerun records (``<flakyFailure>``, ``<flakyError>``, ``<rerunFailure>``,
  ``<rerunError>``) are not outcomes: a test that passed on a rerun is a pass; one that failed
  every run carries a ``<failure>``/``<error>`` of its own. A ``status`` attribute of
  ``disabled``/``notrun``/``skipped`` (CTest writes ``status="disabled"`` without a child) makes
  a case without failure or error skipped;
* a ``<testsuite>`` (or the root) with neither a ``<testcase>`` nor a nested suite counts from its
  attributes: ``tests``, ``failures``, ``errors``, ``skipped`` (+ ``disabled``); passed is the
  rest. A suite with no test at all adds nothing: a report of zero tests has ``total == 0``;
* ids (``failed_ids`` for failed and errored cases, ``passed_ids``) are ``classname.name``, or
  ``name`` alone when there is no class name or the name already begins with it (jest-junit
  repeats the title in both). A relative ``file`` attribute (pytest's xunit1 family, jest-junit's
  ``addFileAttribute``) prefixes ``file::``; when the class name is that file's module path the
  id is the pytest node id (``tests/test_x.py::TestA::test_y``). Absolute file paths are left
  out (they differ between worktrees). At most :data:`~..base.MAX_IDS` of each, first seen first.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any, Mapping
from xml.etree.ElementTree import ParseError

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import DefusedXMLParser

from ..base import MAX_IDS, TestCounts, unique_ids
from .failure_text import HeadTail, frames

log = logging.getLogger("tianshu_mcp")

__all__ = [
    "JUnitError",
    "JUnitFailure",
    "MAX_DEPTH",
    "MAX_FILE_BYTES",
    "parse_junit",
    "parse_junit_report",
]

MAX_FILE_BYTES = 64 << 20
"""A report larger than this (64 MiB) is refused without being parsed."""
MAX_DEPTH = 256
"""Elements nested deeper than this are refused (real reports nest a few levels)."""
MAX_FAILURES = 50
"""At most this many failed cases keep their details (:class:`JUnitFailure`) per document."""
MAX_MESSAGE_CHARS = 2000
"""A failure's message keeps at most this many characters of its text."""
_MAX_COUNT = 10**9
"""Suite attributes are clipped to this (a corrupt ``tests="9999…"`` stays a sane number)."""

_SUITES = frozenset({"testsuites", "testsuite"})
_FAILED, _ERRORED, _SKIPPED, _PASSED = range(4)
"""A test case's outcome; the lowest rank among its children wins (a failure beats an error)."""
_OUTCOMES = {"failure": _FAILED, "error": _ERRORED, "skipped": _SKIPPED}
_SUITE_COUNTS = ("tests", "failures", "errors", "skipped", "disabled")
_SKIP_STATUS = frozenset({"disabled", "notrun", "not run", "skipped", "skip"})
_WIN_ABS = re.compile(r"^[A-Za-z]:[\\/]|^\\\\")


@dataclass
class JUnitFailure:
    """A failed or errored test case, for repair directives.

    Attributes:
        id: the case's id (module doc). kind: ``failure`` or ``error``.
        message: the ``message`` attribute, else the start of the element's text (≤
            :data:`MAX_MESSAGE_CHARS`). file / line: the case's ``file``/``line`` attributes
            when the producer writes them (pytest, jest-junit, PHPUnit); line 1-based (pytest's
            0-based lines are shifted; they name the test's declaration). frames: candidate
            ``(file, line)`` locations of the failure itself, found in its text
            (:func:`.failure_text.frames`), else None.
    """

    id: str
    kind: str
    message: str = ""
    file: str | None = None
    line: int | None = None
    frames: list[tuple[str, int]] | None = None


class JUnitError(ValueError):
    """A report that cannot be counted: malformed or truncated XML, a DTD/entity declaration or
    external reference (refused, never expanded), a root other than ``<testsuites>``/
    ``<testsuite>``, too deep or too large.

    Attributes:
        source: what was read (a project-relative path, or ``""``).
        reason: the English reason, without the source.
    """

    def __init__(self, reason: str, source: str = "") -> None:
        self.source = source
        self.reason = reason
        super().__init__(f"{source}: {reason}" if source else reason)


# --- one document --------------------------------------------------------------------------------


def _local(tag: str) -> str:
    """``{namespace}name`` → ``name``."""
    return tag.rsplit("}", 1)[-1]


def _count(value: Any) -> int:
    """A suite attribute as a non-negative int (``"3"``, ``"3.0"``); 0 when unreadable."""
    try:
        n = int(float(str(value).strip())) if value is not None else 0
    except (ValueError, OverflowError):
        return 0
    return min(max(n, 0), _MAX_COUNT)


def _module_of(file: str) -> str:
    """``tests/test_x.py`` → ``tests.test_x`` (how pytest names a file's module in ``classname``)."""
    stem = file.rsplit(".", 1)[0] if "." in file.rsplit("/", 1)[-1] else file
    return stem.replace("/", ".")


def _case_id(attrib: Mapping[str, str]) -> str:
    """The id of one ``<testcase>`` (module doc)."""
    name = (attrib.get("name") or "").strip()
    cls = (attrib.get("classname") or attrib.get("class") or "").strip()
    file = (attrib.get("file") or "").strip().replace("\\", "/")
    if file.startswith("./"):
        file = file[2:]
    if file and not (file.startswith("/") or _WIN_ABS.match(file)):
        module = _module_of(file)
        if cls == module or cls == file or not cls:
            return f"{file}::{name}" if name else file
        if cls.startswith(module + "."):
            return f"{file}::{cls[len(module) + 1:].replace('.', '::')}::{name}"
        return f"{file}::{cls}.{name}" if name else f"{file}::{cls}"
    if cls and name and cls != name and not name.startswith(cls + " "):
        return f"{cls}.{name}"
    return name or cls


class _Ids:
    """An ordered, de-duplicated id list that stops growing at :data:`MAX_IDS`."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self._seen: set[str] = set()

    @property
    def full(self) -> bool:
        return len(self.items) >= MAX_IDS

    def add(self, item: str) -> None:
        item = item.strip()
        if item and not self.full and item not in self._seen:
            self._seen.add(item)
            self.items.append(item)


class _Counter:
    """The parser target: counts on ``start``/``end`` events, keeps no tree and no text."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.depth = 0
        self.root: str | None = None
        self.counts = TestCounts(runner="junit")
        self.failed_ids = _Ids()
        self.passed_ids = _Ids()
        # open suites: [attributes, saw a testcase or a nested suite]
        self.suites: list[list[Any]] = []
        self.case_depth = 0  # > 0 while inside a <testcase> (its depth)
        self.case_attrib: Mapping[str, str] = {}
        self.case_outcome = _PASSED
        self.failures: list[JUnitFailure] = []
        self.zero_based = False
        self.case_message: list[str] = []  # the outcome element's message / text (bounded)
        self.in_outcome = self.in_body = False
        self.case_body: HeadTail | None = None  # the outcome element's text, for its frames (bounded)

    def start(self, tag: str, attrib: dict[str, str]) -> None:
        depth = self.depth = self.depth + 1
        if depth > MAX_DEPTH:
            raise JUnitError(f"elements nested deeper than {MAX_DEPTH} levels", self.source)
        if self.case_depth:
            if depth == self.case_depth + 1:
                rank = _OUTCOMES.get(_local(tag), _PASSED)
                if rank < self.case_outcome:
                    self.case_outcome = rank
                    if rank in (_FAILED, _ERRORED) and len(self.failures) < MAX_FAILURES:
                        message = (attrib.get("message") or "").strip()
                        self.case_message = [message[:MAX_MESSAGE_CHARS]] if message else []
                        self.in_outcome = not message
                        self.case_body, self.in_body = HeadTail(), True
            return  # anything else inside a test case (output, properties, reruns) is not counted
        name = _local(tag)
        if self.root is None:
            self.root = name
            if name not in _SUITES:
                raise JUnitError(f"not a JUnit report: the root element is <{name[:80]}>, not "
                                 "<testsuites> or <testsuite>", self.source)
        if name == "testcase":
            if self.suites:
                self.suites[-1][1] = True
            self.case_depth, self.case_attrib, self.case_outcome = depth, attrib, _PASSED
        elif name in _SUITES:
            if name == "testsuite" and attrib.get("name") == "pytest":
                self.zero_based = True  # pytest writes a case's ``line`` 0-based
            if self.suites:
                self.suites[-1][1] = True
            self.suites.append([{k: attrib[k] for k in _SUITE_COUNTS if k in attrib}, False])

    def data(self, text: str) -> None:
        if self.in_outcome and sum(map(len, self.case_message)) < MAX_MESSAGE_CHARS:
            self.case_message.append(text[:MAX_MESSAGE_CHARS])
        if self.in_body and self.case_body is not None:
            self.case_body.add(text)

    def end(self, tag: str) -> None:
        self.in_outcome = self.in_body = False
        if self.case_depth:
            if self.depth == self.case_depth:
                self._close_case()
                self.case_depth = 0
        elif self.suites and _local(tag) in _SUITES:
            attrs, has_children = self.suites.pop()
            if not has_children:
                self._add_attributes(attrs)
        self.depth -= 1

    def _close_case(self) -> None:
        outcome, attrib, c = self.case_outcome, self.case_attrib, self.counts
        if outcome == _PASSED and (attrib.get("status") or "").strip().lower() in _SKIP_STATUS:
            outcome = _SKIPPED
        if outcome == _SKIPPED:
            c.skipped += 1
            return
        if outcome == _PASSED:
            c.passed += 1
            ids = self.passed_ids
        else:
            if outcome == _FAILED:
                c.failed += 1
            else:
                c.errors += 1
            ids = self.failed_ids
            if len(self.failures) < MAX_FAILURES:
                self._keep_failure(outcome, attrib)
        if not ids.full:  # the id is only worked out while it can still be kept
            ids.add(_case_id(attrib))

    def _keep_failure(self, outcome: int, attrib: Mapping[str, str]) -> None:
        text = "".join(self.case_message).strip()[:MAX_MESSAGE_CHARS]
        body = self.case_body.text() if self.case_body is not None else ""
        self.case_message, self.case_body = [], None
        line = (attrib.get("line") or "").strip()
        file = (attrib.get("file") or "").strip() or None
        self.failures.append(JUnitFailure(
            id=_case_id(attrib), kind="failure" if outcome == _FAILED else "error", message=text, file=file,
            line=int(line) + self.zero_based if line.isdigit() and len(line) < 10 else None,
            frames=frames(body)))

    def _add_attributes(self, attrs: Mapping[str, str]) -> None:
        tests = _count(attrs.get("tests"))
        failures = min(_count(attrs.get("failures")), tests)
        errors = min(_count(attrs.get("errors")), tests - failures)
        skipped = min(_count(attrs.get("skipped")) + _count(attrs.get("disabled")), tests - failures - errors)
        c = self.counts
        c.failed += failures
        c.errors += errors
        c.skipped += skipped
        c.passed += tests - failures - errors - skipped


def feed_safely(data: bytes, target: Any, source: str, error: type[JUnitError], what: str) -> None:
    """Stream ``data`` into a parser ``target`` (``start``/``end``/``data`` callbacks) with
    ``defusedxml``: any DTD, entity declaration or external reference is refused before expansion.

    Raises:
        error (a :class:`JUnitError` class): over :data:`MAX_FILE_BYTES`; refused declarations;
            malformed or truncated XML; an unknown encoding; whatever ``target`` raises of it.
    """
    if len(data) > MAX_FILE_BYTES:
        raise error(f"larger than {MAX_FILE_BYTES >> 20} MiB ({len(data)} bytes), not read", source)
    parser = DefusedXMLParser(target=target, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    try:
        parser.feed(data)
        parser.close()
    except JUnitError:
        raise
    except DefusedXmlException as exc:
        raise error("refused: a DTD, entity declaration or external reference "
                    f"({type(exc).__name__}); {what} need none", source) from None
    except ParseError as exc:
        raise error(f"malformed XML ({exc})", source) from None
    except (ValueError, LookupError, UnicodeError, TypeError, RecursionError) as exc:
        # expat: unknown or impossible encodings and the like
        raise error(f"unreadable XML ({type(exc).__name__}: {exc})"[:300], source) from None


def parse_junit(data: bytes, source: str = "") -> TestCounts:
    """Count one JUnit XML document (module doc for the rules): :func:`parse_junit_report`
    without the failures' details. Same arguments and errors."""
    return parse_junit_report(data, source)[0]


def parse_junit_report(data: bytes, source: str = "") -> tuple[TestCounts, list[JUnitFailure]]:
    """Count one JUnit XML document (module doc for the rules) and keep the details of its first
    :data:`MAX_FAILURES` failed or errored cases.

    Args:
        data: the file's bytes (any encoding its XML declaration or BOM names).
        source: where it came from (a project-relative path), used in error messages only.

    Returns:
        ``(counts, failures)``: :class:`~..base.TestCounts` with ``runner == "junit"`` (a report
        of zero tests has ``total == 0``) and the :class:`JUnitFailure` of each failed case.

    Raises:
        JUnitError: more than :data:`MAX_FILE_BYTES`; malformed or truncated XML; a DTD, entity
            declaration or external reference (refused before any expansion); a root other than
            ``<testsuites>``/``<testsuite>``; nesting deeper than :data:`MAX_DEPTH`.
    """
    target = _Counter(source)
    feed_safely(data, target, source, JUnitError, "JUnit reports")
    if target.root is None:  # pragma: no cover - expat reports "no element found" first
        raise JUnitError("no element found", source)
    counts = target.counts
    counts.failed_ids = unique_ids(target.failed_ids.items)
    counts.passed_ids = unique_ids(target.passed_ids.items)
    return counts, target.failures
