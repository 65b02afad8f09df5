"""The JUnit XML files of a check: find them by a project-relative glob, ignore stale ones,
refuse files outside the project, count the rest with :func:`.junit.parse_junit_report` (or
:func:`.trx.parse_trx_report` for a .NET TRX file, told apart by its root element) (docs/toolchains.md
§3). Never raises for file-system problems.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from ..base import TestCounts, unique_ids
from .junit import (
    _WIN_ABS,
    MAX_FAILURES,
    MAX_FILE_BYTES,
    JUnitError,
    JUnitFailure,
    parse_junit_report,
)
from .trx import is_trx, parse_trx_report

log = logging.getLogger("tianshu_mcp")

MAX_TOTAL_BYTES = 256 << 20
""":func:`collect_junit` reads at most this many bytes (256 MiB) over all files."""
MAX_FILES = 1000
""":func:`collect_junit` reads at most this many files; further matches are reported, not read."""
MAX_ENTRIES = 4 * MAX_FILES
"""The glob search stops after this many matching entries (files, directories, links)."""
MTIME_SLACK_S = 0.05
"""A file counts as written by the run when its mtime is at least ``started_at`` minus this many
seconds (Linux stamps files with a coarse clock that may lag ``time.time()`` by a few ms), and
not later than the collection plus this much (a future date is a planted file). Checks that run
in parallel and write into one report directory cannot be told apart: give each its own glob."""


# --- the files of a check ------------------------------------------------------------------------


@dataclass
class JUnitResult:
    """What :func:`collect_junit` found.

    Attributes:
        counts: the sum over the files read (ids merged, at most :data:`~..base.MAX_IDS` each);
            None when no file could be used (none matched, all stale or refused).
        files: the project-relative POSIX paths read, sorted.
        stale: matched files older than the check's start: ignored.
        errors: ``"<path>: <reason>"`` for files refused or unreadable (malformed, DTD, outside the
            project, too large, over the file/byte budget).
        note: one English line for the report saying what was read and what was ignored.
    """

    counts: TestCounts | None = None
    files: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    note: str = ""
    failures: list[JUnitFailure] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """``{"files", "stale", "errors", "note", "failures": [{"id", "kind", "message", "file"?,
        "line"?}]}`` (the check result's ``junit``)."""
        return {"files": list(self.files), "stale": list(self.stale), "errors": list(self.errors), "note": self.note,
                "failures": [{k: v for k, v in vars(f).items() if v is not None} for f in self.failures]}


def check_pattern(pattern: str) -> str:
    """The pattern with ``/`` separators (the rules of a check's ``junitXml``, also applied by the
    config layer).

    Raises:
        ValueError: empty, absolute (``/``, ``~``, a drive), climbing (``..``), ``**`` inside a
            name or more than once (a stacked ``**`` walks a deep tree for minutes), or not
            naming files (its last part is ``.``, ``..`` or ``**``, or it ends with ``/``).
    """
    p = (pattern or "").strip()
    if not p:
        raise ValueError("junitXml: the glob is empty")
    if p.startswith(("/", "\\", "~")) or _WIN_ABS.match(p) or PureWindowsPath(p).drive:
        raise ValueError(f"junitXml: the glob {p!r} must be relative to the project, not absolute")
    p = p.replace("\\", "/")
    parts = PurePosixPath(p).parts
    if ".." in parts:
        raise ValueError(f"junitXml: the glob {p!r} must stay inside the project (no '..')")
    if any("**" in part and part != "**" for part in parts):
        raise ValueError(f"junitXml: invalid glob {p!r}: '**' can only be a whole path component")
    if parts.count("**") > 1:
        raise ValueError(f"junitXml: invalid glob {p!r}: '**' may stand once")
    if not parts or parts[-1] in (".", "..", "**") or p.endswith("/"):  # "build/" names a directory
        raise ValueError(f"junitXml: invalid glob {p!r}: its last part must name the report files")
    while p.startswith("./"):
        p = p[2:]
    return p


def _list(names: list[str], limit: int = 3) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" (+{len(names) - limit} more)" if len(names) > limit else "")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def collect_junit(project: Path, pattern: str, started_at: float) -> JUnitResult:
    """Count the JUnit XML files a check wrote (docs/toolchains.md §3).

    Args:
        project: the project root.
        pattern: a glob relative to ``project`` (``**`` allowed, pathlib semantics; ``\\`` is read
            as ``/``), e.g. ``target/surefire-reports/TEST-*.xml`` or ``build/test-results/**/*.xml``.
        started_at: when the check started (``time.time()``); a file whose mtime is older (minus
            :data:`MTIME_SLACK_S`) is a stale report of an earlier run: ignored and named.

    Returns:
        :class:`JUnitResult`. Matches that are not regular files are skipped silently; files whose
        real path is outside the project (symlinks), over :data:`MAX_FILE_BYTES`, beyond
        :data:`MAX_FILES` or :data:`MAX_TOTAL_BYTES`, unreadable or not countable
        (:class:`JUnitError`) go to ``errors``. Never raises for file-system problems.

    Raises:
        ValueError: the pattern is empty, absolute, contains ``..`` or is not a valid glob.
    """
    pat = check_pattern(pattern)
    result = JUnitResult()
    try:
        root = Path(project).resolve()
        matches: list[Path] = []
        stopped = False
        for p in root.glob(pat):
            if len(matches) >= MAX_ENTRIES:  # directories and other entries count too
                stopped = True
                break
            matches.append(p)
    except (ValueError, NotImplementedError, IndexError) as exc:
        raise ValueError(f"junitXml: invalid glob {pat!r}: {exc}") from None
    except OSError as exc:
        result.errors.append(f"{pat}: could not search the project ({type(exc).__name__}: {exc})")
        result.note = f"JUnit XML ({pat}): the project could not be searched."
        return result

    seen: set[Path] = set()
    candidates: list[tuple[str, Path]] = []
    regular = 0
    for p in sorted(matches):
        rel = p.relative_to(root).as_posix() if p.is_relative_to(root) else str(p)
        try:
            if not p.is_file():
                continue
            regular += 1
            real = p.resolve()
        except (OSError, RuntimeError) as exc:
            result.errors.append(f"{rel}: unreadable ({type(exc).__name__})")
            continue
        if not real.is_relative_to(root):
            result.errors.append(f"{rel}: refused, it resolves outside the project (symlink)")
            continue
        if real not in seen:
            seen.add(real)
            candidates.append((rel, real))

    if stopped:
        result.errors.append(f"{pat}: more than {MAX_ENTRIES} entries matched, the search stopped there; "
                             f"only the first {min(len(candidates), MAX_FILES)} files were considered")
    elif len(candidates) > MAX_FILES:
        result.errors.append(f"{pat}: {len(candidates)} files matched; only the first {MAX_FILES} were considered")
    candidates = candidates[:MAX_FILES]

    total_bytes = 0
    now = time.time()
    parsed: list[TestCounts] = []
    for rel, real in candidates:
        try:
            st = real.stat()
        except OSError as exc:
            result.errors.append(f"{rel}: unreadable ({type(exc).__name__})")
            continue
        if st.st_mtime < started_at - MTIME_SLACK_S:
            result.stale.append(rel)
            continue
        if st.st_mtime > now + MTIME_SLACK_S:  # planted with a future date: not this run's
            result.errors.append(f"{rel}: refused, its modification time is in the future")
            continue
        if st.st_size > MAX_FILE_BYTES:
            result.errors.append(f"{rel}: larger than {MAX_FILE_BYTES >> 20} MiB, not read")
            continue
        if total_bytes + st.st_size > MAX_TOTAL_BYTES:
            result.errors.append(f"{rel}: not read, the reports exceed {MAX_TOTAL_BYTES >> 20} MiB in total")
            continue
        try:
            with open(real, "rb") as fh:
                data = fh.read(min(st.st_size, MAX_FILE_BYTES) + 1)
        except OSError as exc:
            result.errors.append(f"{rel}: unreadable ({type(exc).__name__})")
            continue
        total_bytes += len(data)
        try:
            counts, failures = (parse_trx_report if is_trx(data) else parse_junit_report)(data, rel)
        except JUnitError as exc:
            result.errors.append(f"{rel}: {exc.reason}")
            continue
        parsed.append(counts)
        result.files.append(rel)
        result.failures += failures[:max(0, MAX_FAILURES - len(result.failures))]

    if parsed:
        total = TestCounts(runner="junit")
        for c in parsed:
            total.passed += c.passed
            total.failed += c.failed
            total.skipped += c.skipped
            total.errors += c.errors
        total.failed_ids = unique_ids(i for c in parsed for i in c.failed_ids)
        total.passed_ids = unique_ids(i for c in parsed for i in c.passed_ids)
        result.counts = total
    result.note = _note(pat, result, regular)
    if result.errors:
        log.info("junit xml %s: %s", pat, "; ".join(result.errors[:5]))
    return result


def _note(pat: str, result: JUnitResult, matched: int) -> str:
    """One English line: what was read, ignored and refused."""
    head = f"JUnit XML ({pat}): "
    if matched == 0 and not result.errors:
        return head + "no file matched."
    parts: list[str] = []
    c = result.counts
    if c is not None:
        parts.append(f"read {_plural(len(result.files), 'file')} ({_plural(c.total, 'test')}: {c.passed} passed, "
                     f"{c.failed} failed, {c.errors} errors, {c.skipped} skipped)")
    else:
        parts.append("no file written by this run could be read")
    if result.stale:
        parts.append(f"ignored {_plural(len(result.stale), 'stale file')} older than the check's start: "
                     f"{_list(result.stale)}")
    if result.errors:
        parts.append(f"not used: {_list(result.errors, 2)}")
    return head + "; ".join(parts) + "."

