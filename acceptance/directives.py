"""Repair directives: turn the output of failing checks into ``file:line`` instructions.

Source: docs/acceptance.md §6 (``extractRepairDirectives``). The original had two sources (a tsc line
parser and the diffstat signals) and sent every test and lint failure to the fallback; the port
(docs/acceptance.md §8.7) reads the
output of every registered toolchain that declares a directive parser (:mod:`.toolchains`: tsc,
eslint, ruff, mypy, pytest, jest, vitest, go, cargo, git diff --check, …; each module's docstring
says which output forms it reads), plus the report source ``diffstat`` (big files, lockfiles,
TODO / console / secret-like signals of the analysis).

A parser runs on a failing check when the check's name or command names its tool **or** when the
output has the parser's shape (so ``npm run lint`` printing ESLint's stylish format is read too).
ANSI colour codes are stripped first; file names become project-relative POSIX paths (absolute
paths outside the project are kept as printed). Each parser runs in ``try``/``except``: one broken
parser never sinks the others. Items are deduplicated across checks by ``(file, line, issue)``,
ordered errors → warnings → diffstat signals (items of optional checks one step later), taking
turns between the failing checks within each step so the first lines cover every check, and capped
at :data:`MAX_ITEMS`.

A check whose JUnit XML reports name failed cases (``junitXml``) gets its directives from them
(the report source ``junit``), and the text parsers skip that check's output: the XML takes
precedence over text heuristics (docs/toolchains.md).

Plain Python: no Prefect, no adapters; reads no file itself (a toolchain's parser may read a small
project file, e.g. the Go module path).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from .git import LOCKFILE_RE
from .toolchains.base import (
    ERROR,
    INFO,
    MAX_LINE,
    Finding,
    ParseContext,
    WARNING,
    outside_project,
    strip_ansi,
    test_action,
)
from .toolchains.registry import machine_readable, toolchains

__all__ = [
    "MAX_ITEMS",
    "NO_ITEMS_REASON",
    "Finding",
    "OutputParser",
    "ReportSource",
    "ParseContext",
    "DEFAULT_REGISTRY",
    "extract_directives",
    "fold_cases",
    "strip_ansi",
]

log = logging.getLogger("tianshu_mcp")

MAX_ITEMS = 50
"""At most this many items are kept (the most useful first); the rest are counted in ``omitted``."""

NO_ITEMS_REASON = (
    "this round's failures cannot be turned into directly actionable directives: no failing check "
    "printed a file:line diagnostic in a known format ("
    + ", ".join(tc.id for tc in toolchains() if tc.directives is not None) + ")"
)
NO_OUTPUT_REASON = (
    "this round's failures cannot be turned into directly actionable directives: no failing command "
    "check printed any output (see the blocking issues and gates in the report)"
)

# --- sources -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class OutputParser:
    """A parser of one tool's output.

    Attributes:
        id: the ``source`` id of its items.
        parse: ``(ANSI-stripped output, context) -> findings``; may raise (the registry catches it).
        argv: searched (case-insensitive) in ``"<check name> <cmd>"``: the check runs this tool.
        shape: searched (multi-line) in the output: the output looks like this tool's.
    """

    id: str
    parse: Callable[[str, ParseContext], list[Finding]]
    argv: re.Pattern[str]
    shape: re.Pattern[str]

    def applies(self, name: str, cmd: str, text: str) -> bool:
        """Whether to run this parser on a check's output (by name/argv, or by content shape)."""
        return bool(self.argv.search(f"{name} {cmd}") or self.shape.search(text))


@dataclass(frozen=True)
class ReportSource:
    """A source that reads the whole report (not a check's output), e.g. ``diffstat``."""

    id: str
    collect: Callable[[Mapping[str, Any]], list[Finding]]


# --- diffstat (the analysis) ---------------------------------------------------------------------


def collect_diffstat(report: Mapping[str, Any]) -> list[Finding]:
    """Big files, lockfiles and TODO / console / secret-like signals (docs/acceptance.md §6, English)."""
    a = report.get("analysis") or {}
    out: list[Finding] = []
    for entry in a.get("bigFileChanges") or []:
        out.append(Finding("single-file change too large (>500 lines)",
                           "split the change or confirm such a large change is really necessary",
                           str(entry).replace("\\", "/"), severity=INFO))
    for f in [*(a.get("changedFiles") or []), *(a.get("untrackedFiles") or [])]:
        if LOCKFILE_RE.search(f):
            out.append(Finding("lockfile modified",
                               "confirm the dependency change is intended; revert the lockfile if it is not",
                               f, severity=INFO))
    sig = a.get("signals") or {}
    if (sig.get("todo") or 0) > 0:
        out.append(Finding(f"added/changed lines contain TODO/FIXME/HACK ({sig['todo']} hit(s))",
                           "implement or remove these to-do markers", severity=INFO))
    if (sig.get("consoleDebug") or 0) > 0:
        out.append(Finding(f"added/changed lines contain console.log/debugger ({sig['consoleDebug']} hit(s))",
                           "remove the debug output", severity=INFO))
    if (sig.get("secretLike") or 0) > 0:
        out.append(Finding(f"added/changed lines contain secret/token-like literals ({sig['secretLike']} hit(s))",
                           "read them from environment variables or configuration; never hard-code credentials",
                           severity=INFO))
    return out


# --- JUnit XML (a check's ``junitXml`` reports) ----------------------------------------------------


def _cut_lines(text: str) -> str:
    """Lines cut at :data:`MAX_LINE` characters: no diagnostic line is longer, and the parsers'
    line patterns stay linear on a pathological one-line output (a 5 MB line took over a minute)."""
    if len(text) <= MAX_LINE or all(len(line) <= MAX_LINE for line in text.split("\n")):
        return text
    return "\n".join(line[:MAX_LINE] for line in text.split("\n"))


def _junit_failures(check: Mapping[str, Any]) -> list[Any]:
    junit = check.get("junit")
    failures = junit.get("failures") if isinstance(junit, Mapping) else None
    return failures if isinstance(failures, list) else []


# --- findings read by the check runner (more than the tail) ------------------------------------------


def output_findings(text: str, runner: str, project: str, name: str, cmd: str,
                    limit: int = MAX_ITEMS) -> list[dict[str, Any]]:
    """Directive items of a failed check, read by the check runner from more of its output than
    the 4,000-character ``outputTail`` the engine sees later (the counted text: the last 1 MiB, or
    more for a machine-readable form). A failure printed early (a Go test followed by many passing
    ones, RSpec's ``Failures:`` header) and a Jest/Vitest report (one long line) or ``go test -json``
    stream do not fit the tail; the runner stores these items as the check's ``findings`` and
    :func:`extract_directives` reads them instead of the tail (docs/toolchains.md, break-test).

    Args:
        text: the output (ANSI is stripped here). runner: the ``TestCounts.runner`` of the check's
            counts (``""`` when it has none): a machine-readable form (``whole_lines``,
            :func:`~.toolchains.registry.machine_readable`) is read whole by its toolchain's parser;
            any other output by every parser that applies (lines cut at :data:`MAX_LINE`).
        project, name, cmd: the project root and the check's name and command.
        limit: at most this many items.

    Returns:
        ``[{"file"?, "line"?, "issue", "action", "source"[, "severity"]}]`` in the engine's
        source order; ``severity`` only when it is not an error. Never raises.
    """
    owner = machine_readable(runner) if runner else None
    found: list[Finding] = []
    if owner is not None and owner.directives is not None:
        try:
            found = owner.directives(strip_ansi(text), ParseContext(project=project, check_name=name, cmd=cmd))
        except Exception:  # noqa: BLE001 - a parser bug must not break the check
            log.exception("directive parser %s failed on check %s", owner.id, name)
        for f in found:
            f.source = f.source or owner.id  # the Jest report parser names the runner it read
    if not found:
        found, errors = _parse_output(_cut_lines(strip_ansi(text)), name, cmd, project, DEFAULT_REGISTRY)
        if errors:
            log.warning("repair directive parsers failed: %s", "; ".join(errors))
    items: list[dict[str, Any]] = []
    for f in found[:limit]:
        item = f.to_item()
        if f.severity != ERROR:
            item["severity"] = f.severity
        items.append(item)
    return items


def _stored_findings(check: Mapping[str, Any]) -> list[Finding]:
    out: list[Finding] = []
    for item in check.get("findings") or []:
        if isinstance(item, Mapping) and item.get("issue") and item.get("action"):
            line, severity = item.get("line"), item.get("severity")
            out.append(Finding(str(item["issue"]), str(item["action"]), str(item.get("file") or "") or None,
                               line if isinstance(line, int) else None,
                               severity if severity in (ERROR, WARNING, INFO) else ERROR,
                               source=str(item.get("source") or "")))
    return out


def _parse_output(text: str, name: str, cmd: str, project: str,
                  registry: Sequence[OutputParser | ReportSource]) -> tuple[list[Finding], list[str]]:
    """Every applying parser's findings on one check's (ANSI-stripped, line-cut) output, in
    registry order, each with its ``source``; and the errors of parsers that raised."""
    out: list[Finding] = []
    errors: list[str] = []
    for src in registry:
        if not isinstance(src, OutputParser):
            continue
        try:
            if not src.applies(name, cmd, text):
                continue
            got = src.parse(text, ParseContext(project=project, check_name=name, cmd=cmd))
        except Exception as exc:  # noqa: BLE001 - one broken parser must not sink the others
            errors.append(f"{src.id} on check '{name}': {type(exc).__name__}: {exc}")
            continue
        for f in got:
            f.source = f.source or src.id
            out.append(f)
    return out, errors


_JVM_SOURCE_ROOTS = ("src/test/java", "src/test/kotlin", "src/test/groovy", "src/main/java", "src/main/kotlin", "")
"""Where a JVM stack frame's bare file name is looked for (Maven/Gradle layouts, then the root)."""


def _under_source_roots(rel: str, project: Path) -> str | None:
    """``demo/Calc.java`` (a JVM frame placed in its package) → ``src/main/java/demo/Calc.java``
    when that file exists under one of :data:`_JVM_SOURCE_ROOTS` (the root last)."""
    for root in _JVM_SOURCE_ROOTS:
        candidate = f"{root}/{rel}" if root else rel
        if (project / candidate).is_file():
            return candidate
    return None


def _jvm_path(name: str, test_id: str, project: Path) -> str | None:
    """``CalcTest.java`` of the test ``demo.CalcTest.adds`` → ``src/test/java/demo/CalcTest.java``
    when that file exists (a JVM frame names the file without its directory)."""
    stem = name.rsplit(".", 1)[0]
    parts = test_id.replace("::", ".").split(".")
    if stem not in parts:
        return None
    return _under_source_roots("/".join([*parts[:parts.index(stem)], name]), project)


def _project_file(project: Path, rel: str) -> bool:
    """Whether ``rel`` is a file of ``project`` that stays inside it once symlinks are resolved
    (a committed ``tests/evil.py`` → ``/etc/passwd`` is not)."""
    try:
        path = project / rel
        return path.is_file() and path.resolve().is_relative_to(project.resolve())
    except (OSError, RuntimeError, ValueError):
        return False


def _own_frame(frames: Any, ctx: ParseContext, test_id: str) -> tuple[str, int] | None:
    """The first of a JUnit failure's candidate ``frames`` that is the project's own code and a file
    that exists in it; a JVM frame's bare ``CalcTest.java`` is resolved through the test's package
    (:func:`_jvm_path`), a library's frame (``Assertions.java``) resolves to nothing."""
    if not ctx.project:
        return None
    project = Path(ctx.project)
    for frame in frames if isinstance(frames, list) else []:
        if not (isinstance(frame, (list, tuple)) and len(frame) == 2 and isinstance(frame[1], int)):
            continue
        path = str(frame[0])
        if not ctx.own(path):
            continue
        rel = ctx.rel(path)
        if _project_file(project, rel):
            return rel, frame[1]
        found = _under_source_roots(rel, project) if "/" in rel else _jvm_path(rel, test_id, project)
        if found and _project_file(project, found):
            return found, frame[1]
    return None


def _without_own_name(message: str, title: str) -> str:
    """A JUnit failure text without the test's own name in front: PHPUnit starts it with
    ``Class::method`` on a line of its own, or glues a ``.phpt`` name to the message."""
    first, _, rest = message.strip().partition("\n")
    head = first.strip()
    if rest.strip() and (head == title or head.endswith("::" + title.rsplit(".", 1)[-1])):
        return rest
    if head.startswith(title) and len(head) > len(title):
        return message.strip()[len(title):]
    return message


def collect_junit_failures(report: Mapping[str, Any]) -> list[Finding]:
    """The failed cases the failing checks' JUnit XML reports name (``checks[].junit.failures``,
    :mod:`.toolchains.formats.junit`): ``test '<id>' failed: <message>`` at the case's
    ``file``/``line`` when the report gives them (docs/toolchains.md: from the XML, before any text)."""
    project = str(report.get("projectPath") or "")
    out: list[Finding] = []
    for c in _checks(report):
        ctx = ParseContext(project=project, check_name=str(c.get("name") or ""), cmd=str(c.get("cmd") or ""))
        for f in _junit_failures(c):
            if not isinstance(f, Mapping) or not f.get("id"):
                continue
            file = ctx.rel(str(f["file"])) if f.get("file") else None
            if file and project and not outside_project(file) and (Path(project) / file).exists() \
                    and not _project_file(Path(project), file):
                file = None  # a symlink out of the project is no place to send an agent
            line = f.get("line") if isinstance(f.get("line"), int) else None
            file, line = _own_frame(f.get("frames"), ctx, str(f["id"])) or (file, line if file else None)
            title = str(f["id"])
            message = _without_own_name(str(f.get("message") or ""), title).strip().split("\n")[0] \
                or str(f.get("kind") or "failure")
            out.append(Finding(f"test '{title}' failed: {message}",
                               test_action("JUnit", title, (file, line) if file and line else None, file),
                               file, line))
    return out


# --- parametrized cases ---------------------------------------------------------------------------

_CASE_RE = re.compile(r"(?P<id>(?P<base>[\w./:-]*\w)\[(?P<param>[^\]\n]*)\])")
"""A parametrized test case's id in an item's issue: ``tests/test_x.py::test_x[a-1]`` (base ``…::test_x``)."""
MAX_CASES_NAMED = 5
"""A folded item names at most this many of its cases."""


def fold_cases(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One item per location for a parametrized test: items at the same ``file``/``line`` from the
    same ``source`` whose issues name cases of one test (``test_x[a]``, ``test_x[b]``: same id before
    the ``[…]``) become the first of them, its issue and action naming the test and ``N cases:
    test_x[a], test_x[b], …`` (at most :data:`MAX_CASES_NAMED` named; when the cases' messages
    differ, the first case's is shown and said to be), with ``cases`` listing every case id. Other
    items are kept as they are, in order.

    Example:
        >>> items = [{"file": "t.py", "line": 5, "issue": f"t.py::test_x[{c}] failed: boom",
        ...           "action": f"make t.py::test_x[{c}] pass", "source": "pytest"} for c in "ab"]
        >>> fold_cases(items)[0]["issue"]
        't.py::test_x failed: boom (2 cases: test_x[a], test_x[b])'
    """
    groups: dict[tuple[Any, ...], list[tuple[dict[str, Any], str, str]]] = {}
    order: list[tuple[Any, ...] | int] = []
    for i, item in enumerate(items):
        m = _CASE_RE.search(str(item.get("issue") or ""))
        if m is None or item.get("file") is None:
            order.append(i)
            continue
        key = (item.get("file"), item.get("line"), item.get("source"), m.group("base"))
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append((item, m.group("id"), m.group("base")))
    out: list[dict[str, Any]] = []
    for k in order:
        if isinstance(k, int):
            out.append(items[k])
            continue
        members = groups[k]
        first, case_id, base = members[0]
        if len(members) == 1:
            out.append(first)
            continue
        ids = list(dict.fromkeys(cid for _item, cid, _base in members))
        short = [cid.rsplit("::", 1)[-1] for cid in ids]
        named = ", ".join(short[:MAX_CASES_NAMED]) + (f", … {len(short) - MAX_CASES_NAMED} more"
                                                        if len(short) > MAX_CASES_NAMED else "")
        folded = dict(first)
        same = len({str(it["issue"]).replace(cid, base, 1) for it, cid, _base in members}) == 1
        folded["issue"] = (str(first["issue"]).replace(case_id, base, 1) + f" ({len(ids)} cases: {named}"
                           + ("" if same else f"; the message is {short[0]}'s") + ")")
        folded["action"] = str(first.get("action") or "").replace(case_id, base)
        folded["cases"] = ids
        out.append(folded)
    return out


# --- the registry --------------------------------------------------------------------------------

_NEVER = re.compile(r"(?!)")


def default_registry() -> tuple[OutputParser | ReportSource, ...]:
    """The directive parsers of every registered toolchain (:mod:`.toolchains.registry`, in its
    order), then the report source ``diffstat``."""
    parsers = tuple(OutputParser(tc.id, tc.directives, tc.directive_argv or _NEVER, tc.shape or _NEVER)
                    for tc in toolchains() if tc.directives is not None)
    return (ReportSource("junit", collect_junit_failures), *parsers, ReportSource("diffstat", collect_diffstat))


DEFAULT_REGISTRY: tuple[OutputParser | ReportSource, ...] = default_registry()
"""What :func:`extract_directives` reads by default."""


def _checks(report: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [c for c in report.get("checks") or [] if not c.get("passed") and not c.get("skipped")]


def _interleave(ranked: list[tuple[int, int, str, Finding]]) -> list[Finding]:
    """Rank order (errors, warnings, signals); within a rank, round-robin over the (check, source)
    groups so that the first lines of the feedback cover every failing check, not just the noisiest."""
    ranked = sorted(ranked, key=lambda t: (t[0], t[1]))
    out: list[Finding] = []
    i = 0
    while i < len(ranked):
        j = i
        groups: dict[str, list[Finding]] = {}
        while j < len(ranked) and ranked[j][0] == ranked[i][0]:
            groups.setdefault(ranked[j][2], []).append(ranked[j][3])
            j += 1
        queues = list(groups.values())
        for k in range(max(len(q) for q in queues)):
            out.extend(q[k] for q in queues if k < len(q))
        i = j
    return out


def extract_directives(
    report: Mapping[str, Any],
    registry: Sequence[OutputParser | ReportSource] = DEFAULT_REGISTRY,
    max_items: int = MAX_ITEMS,
) -> dict[str, Any]:
    """Structured repair directives of a failed round. Never raises.

    Args:
        report: the round's report (``checks``, ``analysis``, ``projectPath``).
        registry: the sources, in order (:data:`DEFAULT_REGISTRY`).
        max_items: cap on the items kept.

    Returns:
        ``{"items": [{file?, line?, issue, action, source}], "sources": [ids with ≥1 kept item, in
        registry order], "fallbackReason"?: str, "omitted"?: int}``: ``fallbackReason`` only when
        there is no item, ``omitted`` only when the cap dropped items.

    Example:
        >>> r = {"projectPath": "/p", "checks": [{"name": "lint", "cmd": "ruff check .", "passed": False,
        ...      "outputTail": "a.py:1:8: F401 [*] `os` imported but unused"}]}
        >>> extract_directives(r)["items"][0]["action"]
        'fix ruff F401 at this line: remove the unused import'
    """
    project = str(report.get("projectPath") or "")
    ranked: list[tuple[int, int, str, Finding]] = []  # (rank, seq, group, finding)
    errors: list[str] = []
    seq = 0
    checks = _checks(report)
    for ci, c in enumerate(checks):
        name, cmd = str(c.get("name") or ""), str(c.get("cmd") or "")
        optional = 1 if c.get("optional") else 0
        stored = _stored_findings(c)
        if stored:  # read by the check runner from more than the tail (output_findings)
            found = stored
        else:
            text = _cut_lines(strip_ansi(str(c.get("outputTail") or "")))
            if not text.strip() or _junit_failures(c):
                continue  # a check whose JUnit XML names its failures is read from the XML only
            found, failed = _parse_output(text, name, cmd, project, registry)
            errors += failed
        for f in found:
            ranked.append((f.severity + optional, seq, f"{ci}:{f.source}", f))
            seq += 1
    for src in registry:
        if not isinstance(src, ReportSource):
            continue
        try:
            got = src.collect(report)
        except Exception as exc:  # noqa: BLE001
            errors.append(f"{src.id}: {type(exc).__name__}: {exc}")
            continue
        for f in got:
            f.source = src.id
            ranked.append((f.severity, seq, src.id, f))
            seq += 1
    if errors:
        log.warning("repair directive parsers failed: %s", "; ".join(errors))
    items: list[dict[str, Any]] = []
    seen: set[tuple[Any, Any, str]] = set()
    for f in _interleave(ranked):
        item = f.to_item()
        key = (item.get("file"), item.get("line"), item["issue"])
        if key in seen:
            continue
        seen.add(key)
        items.append(item)
    items = fold_cases(items)
    omitted = max(0, len(items) - max_items)
    items = items[:max_items]
    used = {i["source"] for i in items}
    out: dict[str, Any] = {"items": items, "sources": [s.id for s in registry if s.id in used]}
    if not items:
        if errors:
            out["fallbackReason"] = f"structured extraction failed ({'; '.join(errors)})"
        elif any(str(c.get("outputTail") or "").strip() for c in checks):
            out["fallbackReason"] = NO_ITEMS_REASON
        else:
            out["fallbackReason"] = NO_OUTPUT_REASON
    if omitted:
        out["omitted"] = omitted
    return out
