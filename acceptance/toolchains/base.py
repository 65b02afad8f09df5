"""The toolchain protocol: what one toolchain module declares, and the scaffolding they share.

A toolchain (pytest, go, cargo, jest, eslint, Maven, …) is one module of this package exporting
``TOOLCHAIN``, a :class:`Toolchain`. It declares, each part optional:

* ``detect``: how to recognise the toolchain in a project and which checks to derive
  (:class:`Derived`), with a note for the report (docs/acceptance.md §2.3, extended);
* ``test_command``: how to recognise its test command in a check's argv (``is_test_check``,
  docs/acceptance.md §3.2), and ``hint``: the argv pattern that puts its count formats first;
* ``formats``: how to count tests from its output, text and machine-readable forms
  (:class:`CountFormat`, each a parser ``text -> TestCounts | None``);
* ``zero``: a text rule saying that no test ran (beyond the generic rules of the engine);
* ``directives`` + ``directive_argv`` + ``shape``: how to turn its failures into repair
  directives (docs/acceptance.md §6): which checks it reads (by name/command) or which outputs
  (by shape), and the parser ``(text, ParseContext) -> [Finding]``.

The engines (:mod:`..testcount`, :mod:`..directives`, :mod:`..config`) iterate the registry
(:mod:`.registry`) and name no toolchain. Formats shared by several toolchains (TAP, JUnit XML,
the Jest JSON report, ``go test -json``) live in :mod:`.formats`.

Plain Python, no I/O here.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, Callable, Iterable, Sequence

MAX_IDS = 1000
"""At most this many ids are kept in ``failed_ids`` and in ``passed_ids`` (first seen first)."""
MAX_LINE = 2000
"""Lines are cut to this many characters before counting (no summary line is longer; it keeps
every regex linear on a pathological one-line output)."""
ISSUE_MAX_CHARS = 300
"""A directive's ``issue`` is clipped to this many characters."""
ACTION_MAX_CHARS = 500
"""A directive's ``action`` (which quotes test names) is clipped to this many characters."""
FILE_MAX_CHARS = 300
"""A directive's ``file`` longer than this is dropped (no real path of a project is)."""
ERROR, WARNING, INFO = 0, 1, 2
"""A finding's severity (the directive order: errors, warnings, report signals)."""


# --- counts --------------------------------------------------------------------------------------


@dataclass
class TestCounts:
    """What one test run reported.

    ``runner`` names the output format that was recognised (a :class:`CountFormat` id):
    ``pytest``, ``unittest``, ``jest``, ``vitest``, ``mocha``, ``node-spec``, ``node-tap``
    (``node --test`` with the TAP reporter, the default when stdout is not a terminal), ``tap``
    (any other TAP producer), ``go``, ``cargo``, ``junit`` (a JUnit XML report) and the
    machine-readable or newer forms of :mod:`.registry`.

    * ``passed`` / ``failed``: tests that passed / failed (pytest ``xpassed`` counts as passed,
      unittest ``unexpected successes`` as failed, node ``cancelled`` as failed);
    * ``skipped``: skipped, ignored, pending and todo tests, and expected failures (pytest
      ``xfailed``, unittest ``expected failures``);
    * ``errors``: things that broke outside a test's assertions: pytest/unittest errors (fixtures,
      collection, imports), jest "Test suite failed to run", vitest failed suites and unhandled
      errors, mocha "Error: …" before any test ran, TAP ``Bail out!``, go packages that failed to
      build or failed without a failing test (panic, timeout), cargo crates that did not compile,
      JUnit ``<error>`` elements;
    * ``failed_ids``: ids of failed and errored tests (pytest node ids ``tests/test_x.py::test_y``;
      unittest ``test_x (module.Class.test_x)``; jest ``describe › test``; vitest
      ``file > describe > test``; mocha full titles ``describe test``; node ``suite > test``; go
      ``pkg/TestX`` (``TestX`` when no package line was seen); cargo ``tests::it_works``; JUnit
      ``classname.name``);
    * ``passed_ids``: ids of passed tests, when the output lists them.

    ``go test`` without ``-v`` prints nothing for a passing package but ``ok  <pkg>``: each such
    package then counts as **one** passed unit whose id is the package path (its tests are not
    listed), so a plain ``go test ./...`` still shows that something ran.

    Both id lists keep at most :data:`MAX_IDS` entries, in output order, without duplicates.
    """

    __test__ = False  # not a pytest test class

    runner: str
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    errors: int = 0
    failed_ids: list[str] = field(default_factory=list)
    passed_ids: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.failed_ids = unique_ids(self.failed_ids)
        self.passed_ids = unique_ids(self.passed_ids)

    @classmethod
    def from_total(cls, runner: str, total: int, *, failed: int = 0, skipped: int = 0, errors: int = 0,
                   outside: int = 0, failed_ids: Iterable[str] = (),
                   passed_ids: Iterable[str] = ()) -> TestCounts:
        """Counts from a summary that states a total and the kinds that did not pass (Surefire's
        ``Tests run: 5, Failures: 1, Errors: 0, Skipped: 1``, PHPUnit's ``Tests: 5, Failures: 1``,
        Minitest's ``5 runs, …``): ``passed = total − failed − skipped − errors``, never negative.
        ``outside``: errors the total does not include (RSpec's "errors occurred outside of
        examples"); they are added to ``errors``."""
        return cls(runner, passed=max(0, total - failed - skipped - errors), failed=failed, skipped=skipped,
                   errors=errors + outside, failed_ids=list(failed_ids), passed_ids=list(passed_ids))

    @property
    def total(self) -> int:
        """``passed + failed + skipped + errors``."""
        return self.passed + self.failed + self.skipped + self.errors

    def to_json(self) -> dict[str, Any]:
        """``{"runner", "passed", "failed", "skipped", "errors", "total", "failedIds"[, "passedIds"]}``;
        ``passedIds`` only when the output listed passed tests."""
        out: dict[str, Any] = {
            "runner": self.runner,
            "passed": self.passed,
            "failed": self.failed,
            "skipped": self.skipped,
            "errors": self.errors,
            "total": self.total,
            "failedIds": list(self.failed_ids),
        }
        if self.passed_ids:
            out["passedIds"] = list(self.passed_ids)
        return out


_ANSI = re.compile(r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")


def clean(text: str, max_line: int | None = None) -> str:
    """Strip ANSI escapes; ``\\r\\n`` → ``\\n``; a line rewritten with ``\\r`` keeps its last
    version; with ``max_line``, longer lines are cut (characters)."""
    text = _ANSI.sub("", text).replace("\r\n", "\n")
    if "\r" in text:
        text = "\n".join(line.rsplit("\r", 1)[-1] for line in text.split("\n"))
    if max_line is not None and any(len(line) > max_line for line in text.split("\n")):
        text = "\n".join(line[:max_line] for line in text.split("\n"))
    return text


def unique_ids(items: Iterable[str]) -> list[str]:
    """The stripped, non-empty ``items`` without duplicates, in order, at most :data:`MAX_IDS`."""
    out: list[str] = []
    seen: set[str] = set()
    for item in items:
        item = item.strip()
        if item and item not in seen:
            seen.add(item)
            out.append(item)
            if len(out) >= MAX_IDS:
                break
    return out


def last_match(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    """The last match of ``pattern`` in ``text`` (a runner's final summary line wins over the
    per-file ones printed before it), or None."""
    m = None
    for m in pattern.finditer(text):
        pass
    return m


# --- directives ----------------------------------------------------------------------------------


def strip_ansi(text: str) -> str:
    """Remove ANSI escape sequences and normalise line ends (``\\r\\n`` and lone ``\\r`` → ``\\n``)."""
    text = _ANSI.sub("", text or "")
    return text.replace("\r\n", "\n").replace("\r", "\n")


_WIN_ABS_RE = re.compile(r"^[A-Za-z]:[\\/]")
_DEP_DIRS = ("node_modules/", "site-packages/", "dist-packages/", "/.cargo/registry/", "/rustc/", "/usr/lib/go")


def _real(p: str) -> str:
    try:
        return os.path.realpath(p) if p else ""
    except (OSError, ValueError):
        return ""


@dataclass
class ParseContext:
    """What a directive parser knows about the check whose output it reads.

    Attributes:
        project: the project root (absolute), as in ``report.projectPath``.
        check_name: the check's name; ``cmd``: its command line (argv joined by spaces).
    """

    project: str = ""
    check_name: str = ""
    cmd: str = ""
    _go_module: str | None = field(default=None, repr=False)

    def rel(self, path: str) -> str:
        """``path`` as a project-relative POSIX path; absolute paths outside the project (or equal
        to its root) are kept as printed, relative ones only lose ``./`` and backslashes."""
        f = path.strip().strip("'\"")
        f = f.removeprefix("file://")
        if _WIN_ABS_RE.match(f):
            return self._rel_windows(f)
        if f.startswith("/"):
            root = os.path.normpath(self.project) if self.project else ""
            norm = os.path.normpath(f)
            for r, n in ((root, norm), (_real(root), _real(norm))):
                if r and n != r and n.startswith(r.rstrip("/") + "/"):
                    return PurePosixPath(os.path.relpath(n, r)).as_posix()
            return f
        f = f.replace("\\", "/")
        while f.startswith("./"):
            f = f[2:]
        return f

    def _rel_windows(self, f: str) -> str:
        if self.project and _WIN_ABS_RE.match(self.project):
            root, p = PureWindowsPath(self.project), PureWindowsPath(f)
            try:
                rel = p.relative_to(root) if str(p).lower().startswith(str(root).lower()) else None
            except ValueError:
                rel = None
            if rel is None and str(p).lower().startswith(str(root).lower().rstrip("\\") + "\\"):
                rel = PureWindowsPath(str(p)[len(str(root).rstrip("\\")) + 1:])
            if rel is not None and str(rel) not in ("", "."):
                return rel.as_posix()
        return f

    def own(self, path: str) -> bool:
        """True when ``path`` (as printed) is the project's own code: inside the project and not in
        a dependency directory (``node_modules``, ``site-packages``, the Rust/Go toolchains)."""
        rel = self.rel(path)
        if rel.startswith(("/", "../", "node:")) or _WIN_ABS_RE.match(rel):
            return False
        probe = "/" + rel
        return not any(d in probe for d in _DEP_DIRS)

    def go_module(self) -> str | None:
        """The ``module`` line of ``<project>/go.mod`` (None when unreadable)."""
        if self._go_module is None:
            self._go_module = ""
            try:
                with open(os.path.join(self.project, "go.mod"), encoding="utf-8") as fh:
                    for line in fh:
                        m = re.match(r"^\s*module\s+(\S+)", line)
                        if m:
                            self._go_module = m.group(1).strip('"')
                            break
            except (OSError, ValueError):
                pass
        return self._go_module or None


_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1b\x7f-\x9f]")
_WIN_DRIVE = re.compile(r"^[A-Za-z]:")


def clip(text: str, limit: int = ISSUE_MAX_CHARS) -> str:
    """``text`` on one line (whitespace runs → one space, control characters such as NUL removed:
    they end up in an agent's argv), at most ``limit`` characters (``…``)."""
    text = " ".join(_CONTROL.sub("", text).split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def directive_file(path: str | None) -> str | None:
    """``path`` as a directive's ``file``: one line without control characters, at most
    :data:`FILE_MAX_CHARS` (a longer one is no project's path: None). Paths outside the project stay
    as printed (docs/acceptance.md §6); :func:`outside_project` tells the renderers to say so."""
    if not path:
        return None
    p = path.strip()
    return p if p and p == clip(p, FILE_MAX_CHARS) else None


def outside_project(file: str) -> bool:
    """True for a directive ``file`` that is not inside the project: absolute (POSIX, ``~``, a
    Windows drive or UNC path) or climbing out with ``..``."""
    p = file.replace("\\", "/")
    if p.startswith(("/", "~")) or _WIN_DRIVE.match(p):
        return True
    norm = os.path.normpath(p)
    return norm == ".." or norm.startswith("../")


def hinted(prefix: str, hint: str | None, generic: str) -> str:
    """``"<prefix>: <hint>"`` when there is a hint, else ``generic`` (a directive's action)."""
    return f"{prefix}: {hint}" if hint else generic


def test_action(runner: str, title: str, at: tuple[str, int] | None, test_file: str | None) -> str:
    """A failed test's directive action: fix the code under test when the failure points into the
    test file itself (or nowhere), else fix the error thrown at ``at`` (``(file, line)``)."""
    if at is None or (test_file and at[0] == test_file):
        return f"make the {runner} test '{title}' pass: fix the code under test (do not weaken the assertion, skip or delete the test)"
    return f"fix the error thrown here, which makes the {runner} test '{title}' fail (do not weaken, skip or delete the test)"


def failure_finding(runner: str, title: str | None, message: Sequence[str], frames: Iterable[tuple[str, int]],
                    ctx: ParseContext, test_file: re.Pattern[str]) -> Finding:
    """The directive of one failure block of a console reporter (RSpec, Minitest, ExUnit): the
    failed test ``title`` (None: a test file that failed to load) with the first lines of its
    ``message`` (≤ 3, ``"; "``-joined; a line ending in ``:`` runs on), located at the first of its
    ``frames`` (as printed, innermost first) that is the project's own code; the first own frame
    whose path matches ``test_file`` is the test's own file (:func:`test_action`)."""
    own = [(ctx.rel(path), line) for path, line in frames if ctx.own(path)]
    at = own[0] if own else None
    in_test = next((path for path, _line in own if test_file.search(path)), None)
    parts: list[str] = []
    for raw in message:
        s = raw.strip()
        if not s:
            continue
        if parts and parts[-1].endswith(":"):
            parts[-1] = f"{parts[-1]} {s}"
        elif len(parts) < 3:
            parts.append(s)
        else:
            break
    text = "; ".join(parts) or "(no message)"
    file, line = at if at else (in_test, None)
    if title is None:
        return Finding(f"test file {in_test or file or '?'} failed to load: {text}",
                       "fix the error that stops the test file from loading (require/import path, syntax, missing library)",
                       file, line)
    return Finding(f"test '{title}' failed: {text}", test_action(runner, title, at, in_test), file, line)


@dataclass
class Finding:
    """One directive before ordering: ``{file?, line?, issue, action}`` plus its severity
    (:data:`ERROR`, :data:`WARNING`, :data:`INFO`); ``source`` is filled in by the engine
    (the toolchain's id) unless the parser set it (a shared format naming the runner it read)."""

    issue: str
    action: str
    file: str | None = None
    line: int | None = None
    severity: int = ERROR
    source: str = ""

    def to_item(self) -> dict[str, Any]:
        """``{"file"?, "line"?, "issue", "action", "source"}``: issue and action clipped to one line
        (:func:`clip`); ``file`` only when :func:`directive_file` keeps it, ``line`` only with a file."""
        item: dict[str, Any] = {}
        file = directive_file(self.file)
        if file:
            item["file"] = file
            if self.line:
                item["line"] = int(self.line)
        item["issue"] = clip(self.issue)
        item["action"] = clip(self.action, ACTION_MAX_CHARS)
        item["source"] = self.source
        return item


# --- the protocol --------------------------------------------------------------------------------


@dataclass(frozen=True)
class CountFormat:
    """One output form of a runner and how to count it.

    Attributes:
        id: the ``TestCounts.runner`` it produces (``go``, ``go-json``, ``jest-json``, …).
        parse: ``cleaned text -> TestCounts | None`` (None: not this form). Pure; may be given a
            tail of the output; must stay linear in the text's length.
        priority: the order among all forms when the command names none (lower first): an
            output is counted by the first form that recognises it.
        hinted: the parser used instead of ``parse`` when the command names the toolchain (it may
            then trust a weaker sign, e.g. cargo's ``could not compile`` without a summary).
        whole_lines: give the parser lines of any length (a JSON report is one long line);
            otherwise lines are cut to :data:`MAX_LINE` characters first. Such a machine-readable
            form is also read whole by the check runner (counts and directives, not just a tail).
        runners: other ``TestCounts.runner`` ids ``parse`` may produce (the Jest report format
            also reads Vitest's: ``vitest-json``).
    """

    id: str
    parse: Callable[[str], TestCounts | None]
    priority: int = 100
    hinted: Callable[[str], TestCounts | None] | None = None
    whole_lines: bool = False
    runners: tuple[str, ...] = ()


@dataclass(frozen=True)
class Derived:
    """A check a toolchain derives for a project that declares none (docs/acceptance.md §2.3).

    Attributes:
        name: the check's name (``pytest``, ``go-test``, ``mvn-test``, …).
        argv: the command.
        optional: an optional check never blocks a round.
        junit_xml: a glob (project-relative) of the JUnit XML files the command writes, when
            the runner writes them; the counts then come from them (:mod:`.formats.junit`).
    """

    name: str
    argv: tuple[str, ...]
    optional: bool = False
    junit_xml: str | None = None


@dataclass(frozen=True)
class TestInfra:
    """A toolchain's *test infrastructure* (docs/integrity.md): what an agent must not be able to change to
    make its own work pass. The pristine tree of :mod:`..integrity.pristine` keeps these as they
    were at the baseline.

    Attributes:
        files: globs of whole files (``conftest.py``, ``**/tests/**``, ``*_test.go``): a glob
            without ``/`` matches a file name in any directory; ``**`` spans directories.
        json_keys: ``(file name, keys)``: top-level keys of a JSON file restored one by one (the
            ``scripts`` of ``package.json``), the rest of the file is the agent's.
        embedded_files: globs of source files that may hold test code inside them (Rust ``*.rs``).
        embedded: ``source text -> [(start, end)]``: character spans of the test code inside such
            a file (``#[cfg(test)] mod tests { … }``); the pristine tree takes the baseline's spans.
        aware: patterns of production code that detects it runs under test (``testing.Testing()``,
            ``"pytest" in sys.modules``); an agent that adds such a line to a non-test file of
            ``aware_files`` is tampering.
        aware_files: globs of the source files ``aware`` applies to.
        id_argv: ``argv -> argv``: the same command with flags that list every test's id without
            changing what runs (pytest ``-rA``, go ``-v``); used for the runs verification makes
            itself (baseline, pristine), never for the check the report shows.
    """

    __test__ = False

    files: tuple[str, ...] = ()
    json_keys: tuple[tuple[str, tuple[str, ...]], ...] = ()
    embedded_files: tuple[str, ...] = ()
    embedded: Callable[[str], list[tuple[int, int]]] | None = None
    aware: tuple[re.Pattern[str], ...] = ()
    aware_files: tuple[str, ...] = ()
    id_argv: Callable[[list[str]], list[str]] | None = None


Detection = tuple[list[Derived], list[str]]
"""What ``detect`` answers: the derived checks and the notes for the report (translated text)."""


@dataclass(frozen=True)
class Toolchain:
    """What one toolchain module declares (see the module doc). Every part is optional.

    Attributes:
        id: the toolchain's id (its module name, with ``-`` for ``_``); a directive's ``source``.
        order: the registry's order (lower first): of derived checks, of directive sources and of
            hints. Existing ones use 10..110; a new toolchain takes an unused number.
        detect: ``(project root, already derived) -> (checks, notes)``; never raises; may read
            a few small files of the project. ``already`` lets a fallback step aside (``tsc``
            derives nothing when ``npm`` derived scripts).
        test_command: searched in the lower-cased, space-joined argv: the check runs tests.
        hint: searched there too: this toolchain's ``hint_formats`` are tried first.
        hint_formats: format ids (its own or shared ones, e.g. ``tap``) in hint order.
        formats: its output forms and their counters.
        zero: ``cleaned text -> bool``: the output shows that no test ran.
        directive_argv: searched (case-insensitive) in ``"<check name> <cmd>"``: run ``directives``.
        shape: searched (multi-line) in the output: run ``directives`` on it too.
        directives: ``(ANSI-stripped text, context) -> findings``; may raise (the engine
            catches it, one broken parser never sinks the others).
        infra: its test infrastructure (:class:`TestInfra`, docs/integrity.md).
    """

    id: str
    order: int = 500
    detect: Callable[[Path, Sequence[Derived]], Detection] | None = None
    test_command: re.Pattern[str] | None = None
    hint: re.Pattern[str] | None = None
    hint_formats: tuple[str, ...] = ()
    formats: tuple[CountFormat, ...] = ()
    zero: Callable[[str], bool] | None = None
    directive_argv: re.Pattern[str] | None = None
    shape: re.Pattern[str] | None = None
    directives: Callable[[str, ParseContext], list[Finding]] | None = None
    infra: TestInfra | None = None

    def reads(self, name: str, cmd: str, text: str) -> bool:
        """Whether this toolchain's directive parser runs on a check's output (by name/command, or
        by the output's shape)."""
        if self.directives is None:
            return False
        return bool((self.directive_argv and self.directive_argv.search(f"{name} {cmd}"))
                    or (self.shape and self.shape.search(text)))


def read_json_object(path: Path) -> dict[str, Any] | None:
    """A small project file (:func:`read_small`, UTF-8 with or without BOM) parsed as a JSON
    object; None when missing, unreadable, not JSON or not an object. For ``detect``."""
    text = read_small(path)
    if not text:
        return None
    try:
        data = json.loads(text.lstrip("\ufeff"))
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def when_file(marker: str, *checks: Derived) -> Callable[[Path, Sequence[Derived]], Detection]:
    """A ``detect`` for the simplest rule: the project has the file ``marker`` at its root → ``checks``."""
    def detect(root: Path, already: Sequence[Derived]) -> Detection:
        return (list(checks), []) if (root / marker).is_file() else ([], [])
    detect.__doc__ = f"``{marker}`` → " + ", ".join(f"``{c.name}`` ``{' '.join(c.argv)}``" for c in checks)
    return detect


def read_small(path: Path, limit: int = 1 << 20) -> str | None:
    """The first ``limit`` bytes (default 1 MiB) of a project file as text (UTF-8, replaced
    errors); None when unreadable. For ``detect``."""
    try:
        with open(path, "rb") as fh:
            return fh.read(limit).decode("utf-8", errors="replace")
    except OSError:
        return None
