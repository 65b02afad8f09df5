"""Command-check runner (docs/acceptance.md §3.2–§3.3).

Each check runs through :func:`tianshu_mcp.core.procs.run_process`: argv only (no shell), its own
session, stdin at EOF, output to a file, the whole process tree killed on timeout or cancellation.
Output goes to a per-check part file ``verify-<round>.parts/<NNN>-<safe>.log``; the result's
``outputTail`` is read back from the end of that file (a 200 MB output is never held in memory);
the part is then appended to ``verify-<round>.log`` (in declaration order when run in parallel)
and removed (:mod:`.runner_log`).

Log layout per check: header ``\\n=== check: <name> — <argv> @ <ISO time> ===\\n``, the raw output,
then the trailer written by ``run_process``: ``\\n[exit] code=<c|null>[ (timeout)| (killed)] duration=<ms>ms\\n``.

Environment: a check inherits the server's environment; when the project has a ``.venv/bin`` or a
``node_modules/.bin`` directory, these are put in front of ``PATH`` for that check (``.venv/bin``
first), so ``pytest``, ``jest``, ``vitest``, ``tsc``… resolve to the project's own tools, the way
``npm run`` and an activated virtualenv would. Nothing else is changed.

Test checks (:func:`~tianshu_mcp.acceptance.testcount.is_test_check`): the output (the last
:data:`PARSE_TAIL_BYTES` of it) is parsed with
:func:`~tianshu_mcp.acceptance.testcount.parse_tests` and the counts are put in the result as
``tests`` (optional and passing checks too). A mandatory test check that exits 0 is failed closed
(``exitCode`` stays 0) when:

* nothing ran (zero-test text rules, or parsed total 0) → :data:`ZERO_TEST_REASON`;
* the parsed counts report failed tests or errors → :data:`CONTRADICTION_REASON`;
* every parsed test was skipped → :data:`ALL_SKIPPED_REASON`;
* a runner the command names (pytest, go test, …) printed no count at all → :data:`NO_COUNT_REASON`.

A failed check also gets ``findings``: its repair directive items, read from the output's last
1 MiB (a machine-readable form: up to :data:`MACHINE_TAIL_BYTES`, whole lines) by
:func:`~tianshu_mcp.acceptance.directives.output_findings`, since ``outputTail`` holds only the
last 4,000 characters (a Go failure followed by many passing tests, a JSON report's start).

A non-zero exit is a failure already. Timeouts are always enforced: a check timeout ≤ 0 (the
config schema rejects it) falls back to the default, and a default ≤ 0 to 300 000 ms.

Plain Python: no Prefect, no adapters.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..core.i18n import _
from ..core.procs import RunResult, run_process, stop_requested
from .check_result import (
    ALL_SKIPPED_MARK,
    ALL_SKIPPED_REASON,
    CONTRADICTION_MARK,
    CONTRADICTION_REASON,
    FAIL_CLOSED_REASONS,
    NO_COUNT_MARK,
    NO_COUNT_REASON,
    NO_REPORT_MARK,
    NO_REPORT_REASON,
    OUTPUT_LIMIT_REASON,
    SKIP_CANCELLED,
    SKIP_EMPTY,
    SKIP_EXPLICIT,
    SPAWN_REASON_PREFIX,
    ZERO_TEST_MARK,
    ZERO_TEST_REASON,
    CheckResult,
    check_tag,
    display_reason,
)
from .config import CheckDef
from .directives import output_findings, strip_ansi
from .resolved_cmd import resolve_command
from .runner_log import _merge_part, _read_tail, _remove_dir_if_empty, part_file_name, parts_dir_for
from .testcount import TestCounts, detect_zero_tests, is_test_check, parse_tests
from .toolchains.formats.junit_files import JUnitResult, collect_junit
from .toolchains.registry import hinted_formats, machine_readable

__all__ = [
    "run_check",
    "run_checks",
    "skip_result",
    "parts_dir_for",
    "part_file_name",
    "ZERO_TEST_REASON",
    "ZERO_TEST_MARK",
    "ALL_SKIPPED_REASON",
    "ALL_SKIPPED_MARK",
    "CONTRADICTION_REASON",
    "CONTRADICTION_MARK",
    "NO_COUNT_REASON",
    "FAIL_CLOSED_REASONS",
    "NO_REPORT_REASON",
    "SPAWN_REASON_PREFIX",
    "PARSE_TAIL_BYTES",
    "check_env",
    "SKIP_EMPTY",
    "SKIP_EXPLICIT",
    "SKIP_CANCELLED",
    "OUTPUT_TAIL_CHARS",
    "display_reason",
    "check_tag",
]

log = logging.getLogger("tianshu_mcp")

OUTPUT_TAIL_CHARS = 4000
"""``outputTail`` keeps the last 4000 characters (docs/acceptance.md §1.3)."""

PARSE_TAIL_BYTES = 1 << 20
"""Bytes of a test check's output (from the end) given to :func:`parse_tests` (1 MiB)."""
MACHINE_TAIL_BYTES = 16 << 20
"""Bytes read instead when the output is a machine-readable form (``go test -json``, a Jest/Vitest
JSON report) longer than :data:`PARSE_TAIL_BYTES`, or has no count in its last 1 MiB (16 MiB:
about 30,000 Go tests; a report's start must be inside it)."""
_FALLBACK_TIMEOUT_MS = 300_000

MAX_OUTPUT_BYTES = 256 << 20  # a check writing more is stopped (a runaway `yes` must not fill the disk)


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def skip_result(name: str, cmd: str, reason: str, optional: bool = False) -> dict[str, Any]:
    """A skipped CheckResult (docs/acceptance.md §3.2): ``passed`` True, ``exitCode`` None, durationMs 0."""
    return CheckResult.skip(name, cmd, reason, optional).to_json()


TOOL_DIRS = (".venv/bin", "node_modules/.bin")
"""The project's own tool directories a check finds its commands in first."""


def project_tool_dirs(project: str | os.PathLike[str]) -> list[str]:
    """Those of :data:`TOOL_DIRS` that are directories in ``project`` now."""
    return [d for d in TOOL_DIRS if (Path(project) / d).is_dir()]


def check_env(project: str | os.PathLike[str], base: Mapping[str, str] | None = None,
              tool_dirs: Sequence[str] | None = None, extra_env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a check run in ``project``: ``base`` (default: this process's
    environment) with the project's tool directories (``tool_dirs``, default
    :func:`project_tool_dirs`: ``.venv/bin`` then ``node_modules/.bin``) put in front of
    ``PATH``. An agent's round passes the ones that existed at its baseline: a ``.venv`` the agent
    created with a fake ``pytest`` in it does not judge it (breaker finding). ``extra_env`` is set
    last (verification integrity's ``PYTHONPYCACHEPREFIX``: no bytecode an agent left in the tree
    is loaded)."""
    env = dict(os.environ if base is None else base)
    root = Path(project)
    dirs = project_tool_dirs(project) if tool_dirs is None else [d for d in tool_dirs if (root / d).is_dir()]
    extra = [str(root / d) for d in dirs]
    if extra:
        current = env.get("PATH", os.defpath)
        env["PATH"] = os.pathsep.join(extra + ([current] if current else []))
    env.update(extra_env or {})
    return env


def _effective_timeout(check_timeout_ms: Any, default_timeout_ms: Any) -> int:
    """A positive timeout in ms: the check's, else the default, else 300 000 (never "none")."""
    for value in (check_timeout_ms, default_timeout_ms):
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return _FALLBACK_TIMEOUT_MS


def _spawn_hint(argv0: str, project: str | os.PathLike[str], env: Mapping[str, str]) -> str:
    """A short explanation (current locale) of why ``argv0`` could not be started."""
    root = Path(project)
    prog = repr(argv0)
    if not root.is_dir():
        return _("the project directory {path} does not exist").format(path=repr(str(root)))
    if not argv0:
        return _("the program name is empty")
    if os.sep in argv0 or (os.altsep and os.altsep in argv0):
        path = Path(argv0) if os.path.isabs(argv0) else root / argv0
        if path.is_dir():
            return _("{program} is a directory").format(program=prog)
        if not path.exists():
            return _("{program} does not exist").format(program=prog)
        if not os.access(path, os.X_OK):
            return _("{program} is not executable").format(program=prog)
        return _("{program} could not be executed (bad #! interpreter or binary format?)").format(program=prog)
    found = shutil.which(argv0, path=env.get("PATH", os.defpath))
    if found is None:
        for d in env.get("PATH", os.defpath).split(os.pathsep):
            candidate = Path(d or ".") / argv0
            if candidate.is_file() and not os.access(candidate, os.X_OK):
                return _("{program} on PATH ({path}) is not executable").format(program=prog, path=candidate)
        return _("{program} was not found on PATH").format(program=prog)
    return _("{program} ({path}) could not be executed (bad #! interpreter or binary format?)").format(
        program=prog, path=found)


def run_check(
    check: CheckDef,
    project: str | os.PathLike[str],
    log_path: str | os.PathLike[str],
    default_timeout_ms: int = 300_000,
    should_stop: Callable[[], bool] | None = None,
    *,
    index: int = 0,
    merge: bool = True,
    tool_dirs: Sequence[str] | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Run one command check and return its CheckResult dict (docs/acceptance.md §1.3, §3.2, §3.3).

    Args:
        check: the normalised check.
        project: working directory (project root).
        log_path: ``<taskDir>/verify-<round>.log``; the output first goes to the part file
            ``<log stem>.parts/<NNN>-<safe>.log`` (see :func:`part_file_name`).
        default_timeout_ms: used when ``check.timeout_ms`` is unset or not positive (ms); a
            non-positive default becomes 300 000 ms (a check never runs without a timeout).
        should_stop: cancellation probe; True before start → skip, True while running → the tree
            is killed and ``aborted`` is set.
        index: position of the check (names the part file).
        merge: append the part to ``log_path`` and delete it now (serial mode); False leaves the
            part for the caller to merge in declaration order.

    Returns:
        ``{name, cmd, passed, durationMs, exitCode, outputTail, timeout, [skipped], [reason],
        [optional], aborted, [tests], [junit], [findings], [resolved]}`` (``resolved``: the program
        that ran, :func:`.resolved_cmd.resolve_command`). ``cmd[] == []`` / ``skip :`` /
        cancelled before start → skip result. A spawn failure → ``passed False, exitCode None``, ``reason`` ``cannot start
        command: <why> (<OS error>)`` (``'x' was not found on PATH``, ``'./x' is not
        executable``, …). A test check whose output parses gets ``tests`` =
        :meth:`TestCounts.to_json` (with ``junitXml``: counted from the reports this run wrote, before
        any text; the check then also gets ``junit`` = :meth:`JUnitResult.to_json`, and a stale
        report is ignored and named in the tail's ``[junit-xml]`` line). A mandatory test check
        that exits 0 is failed closed
        (``passed False``, exitCode stays 0) with :data:`ZERO_TEST_REASON` (nothing ran),
        :data:`CONTRADICTION_REASON` (failures or errors reported) or :data:`ALL_SKIPPED_REASON`
        (every test skipped). Never raises.
    """
    name, argv = check.name, list(check.cmd)
    display = check.display_cmd or " ".join(argv)
    if not argv:
        return skip_result(name, display or name, SKIP_EMPTY, check.optional)
    if argv[0] == "skip" and len(argv) > 1 and argv[1] == ":":
        return skip_result(name, display, SKIP_EXPLICIT, check.optional)
    if should_stop is not None and stop_requested(should_stop):
        return skip_result(name, display, SKIP_CANCELLED, check.optional)
    try:
        return _run(check, argv, display, project, Path(log_path), default_timeout_ms, should_stop, index, merge,
                    tool_dirs, extra_env)
    except Exception as exc:  # noqa: BLE001 - a check must never raise
        log.exception("check %s crashed in the runner", name)
        return CheckResult(name=name, cmd=display, passed=False, output_tail=f"[runner-error] {exc}",
                           reason=f"internal runner error: {exc}", optional=bool(check.optional)).to_json()


def _run(
    check: CheckDef,
    argv: list[str],
    display: str,
    project: str | os.PathLike[str],
    log_path: Path,
    default_timeout_ms: int,
    should_stop: Callable[[], bool] | None,
    index: int,
    merge: bool,
    tool_dirs: Sequence[str] | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Run the check into its part file (a temporary file with a ``[log-error]`` note when the part
    cannot be created), read its output back, merge the part into ``log_path`` (``merge``) and
    build the result (see :func:`run_check`)."""
    part, log_note, merge = _open_part(log_path, index, check.name, merge)
    header = f"\n=== check: {check.name} — {' '.join(argv)} @ {_now_iso()} ===\n"
    start = len(header.encode("utf-8"))
    env = check_env(project, tool_dirs=tool_dirs, extra_env=extra_env)
    started_at = time.time()
    res = run_process(
        argv,
        cwd=project,
        log_path=part,
        timeout_ms=_effective_timeout(check.timeout_ms, default_timeout_ms),
        env=env,
        header=header,
        should_stop=(lambda: stop_requested(should_stop)) if should_stop is not None else None,
        max_output_bytes=MAX_OUTPUT_BYTES,
    )
    tail = strip_ansi(log_note + _read_tail(part, start))[-OUTPUT_TAIL_CHARS:]
    output = _read_output(check, argv, project, part, start, res, started_at)
    if output.junit is not None:
        tail = (tail + f"\n[junit-xml] {output.junit.note}")[-OUTPUT_TAIL_CHARS:]
    if log_note and part.parent == Path(tempfile.gettempdir()):
        part.unlink(missing_ok=True)
    elif merge:
        _merge_part(part, log_path)
        _remove_dir_if_empty(part.parent)
    return _result(check, argv, display, project, env, res, tail, output).to_json()


def _open_part(log_path: Path, index: int, name: str, merge: bool) -> tuple[Path, str, bool]:
    """``(part file, log note, merge)``: the check's part file, created empty; when it cannot be,
    a temporary file instead, a ``[log-error]`` note for the tail and ``merge`` forced on."""
    part = parts_dir_for(log_path) / part_file_name(index, name)
    try:
        part.parent.mkdir(parents=True, exist_ok=True)
        with open(part, "wb"):
            pass
    except OSError as exc:
        fd, tmp = tempfile.mkstemp(prefix="tianshu-check-", suffix=".log")
        os.close(fd)
        return Path(tmp), f"[log-error] {exc}\n", True
    return part, "", merge


@dataclass
class _Output:
    """What a check's output says beyond its tail.

    Attributes:
        is_test: the check runs tests (``junitXml``, or a test command) and could start.
        counts: the test counts (the JUnit XML's before any text heuristic), or None.
        junit: the JUnit XML reports this run wrote (``junitXml`` set and the check started), or None.
        wide: the output's last :data:`PARSE_TAIL_BYTES` (:data:`MACHINE_TAIL_BYTES` for a
            machine-readable form) for a test check or a failed one, else ``""``: what the counts
            and the repair directives of a failed check come from (more than the tail).
    """

    is_test: bool
    counts: TestCounts | None
    junit: JUnitResult | None
    wide: str


def _read_output(check: CheckDef, argv: list[str], project: str | os.PathLike[str], part: Path, start: int,
                 res: RunResult, started_at: float) -> _Output:
    """The counts and the wide output of a check run (see :class:`_Output`); a parser bug is logged,
    never raised."""
    counts: TestCounts | None = None
    junit = _junit(check, project, started_at) if res.error is None and check.junit_xml else None
    is_test = res.error is None and (bool(check.junit_xml) or is_test_check(check.name, argv))
    wide = _read_tail(part, start, PARSE_TAIL_BYTES) if is_test or (res.error is None and not res.ok) else ""
    if junit is not None and junit.counts is not None:
        counts = junit.counts  # the XML before any text heuristic
    elif is_test:
        try:
            counts = parse_tests(wide, argv)
            if (counts is None or machine_readable(counts.runner)) and _output_bytes(part, start) > PARSE_TAIL_BYTES:
                wide = _read_tail(part, start, MACHINE_TAIL_BYTES)  # a JSON report or event stream, whole
                counts = parse_tests(wide, argv) or counts
        except Exception:  # noqa: BLE001 - a parser bug must not break the check
            log.exception("could not parse the test output of check %s", check.name)
    return _Output(is_test=is_test, counts=counts, junit=junit, wide=wide)


def _result(check: CheckDef, argv: list[str], display: str, project: str | os.PathLike[str], env: Mapping[str, str],
            res: RunResult, tail: str, output: _Output) -> CheckResult:
    """The check's result: a spawn failure gets its reason (``cannot start command: …``); a
    mandatory test check that exited 0 may be failed closed (:func:`_fail_closed`; with
    ``junitXml``, no readable report fails it); a failed check gets ``findings`` from its wide
    output (not when its JUnit XML names the failures)."""
    junit = output.junit
    result = CheckResult(
        name=check.name,
        cmd=display,
        passed=res.ok,
        duration_ms=res.duration_ms,
        exit_code=None if (res.error is not None or res.timed_out or res.killed or res.output_limited) else res.exit_code,
        output_tail=tail,
        timeout=res.timed_out,
        optional=bool(check.optional),
        aborted=res.killed,
        tests=output.counts.to_json() if output.counts is not None else None,
        junit=junit.to_json() if junit is not None else None,
    )
    if res.error is None and (resolved := resolve_command(argv[0], project, env)) is not None:
        result.resolved = resolved.to_json()  # which program ran: the configured name says too little
    if res.output_limited:
        result.reason = OUTPUT_LIMIT_REASON.format(n=MAX_OUTPUT_BYTES // (1 << 20))
    if res.error is not None:
        if "[spawn-error]" not in tail:
            result.output_tail = (tail + f"\n[spawn-error] {res.error}")[-OUTPUT_TAIL_CHARS:]
        result.reason = f"{SPAWN_REASON_PREFIX}{_spawn_hint(argv[0], project, env)} ({res.error})"
    elif not check.optional and result.passed and result.exit_code == 0 and output.is_test:
        if junit is not None and junit.counts is None:
            closed: tuple[str, str] | None = (NO_REPORT_REASON, NO_REPORT_MARK)  # declared, none usable
        else:
            closed = _fail_closed(tail, output.counts, from_xml=junit is not None, known=names_runner(argv))
        if closed is not None:
            reason, mark = closed
            result.passed = False
            result.output_tail = (tail + mark)[-OUTPUT_TAIL_CHARS:]
            result.reason = reason
    if not result.passed and output.wide and not (junit is not None and junit.failures):
        counts = output.counts
        findings = output_findings(output.wide, counts.runner if counts else "", str(project), check.name, display)
        if findings:  # read from more of the output than outputTail holds
            result.findings = findings
    return result


def _output_bytes(part: Path, start: int) -> int:
    try:
        return os.path.getsize(part) - start
    except OSError:
        return 0


def _junit(check: CheckDef, project: str | os.PathLike[str], started_at: float) -> JUnitResult:
    """The check's JUnit XML reports (``junitXml``, docs/toolchains.md): files this run wrote, counted; stale
    and refused ones named in ``note``. A bad glob (the config layer refuses it already) becomes
    a note, never an exception."""
    try:
        return collect_junit(Path(project), str(check.junit_xml), started_at)
    except ValueError as exc:
        return JUnitResult(note=str(exc))


def names_runner(argv: Sequence[str]) -> bool:
    """True when the command itself names a test runner with count formats (``python -m pytest``,
    ``go test``, ``npx jest``): its program and option tokens, paths reduced to their last part and
    inline code (a token with white space) left out, match a toolchain's ``hint`` — a temporary
    path containing ``pytest-of-root`` names nothing."""
    tokens = [os.path.basename(t.rstrip("/")) or t for t in argv if t and not any(ch.isspace() for ch in t)]
    return bool(hinted_formats(" ".join(tokens).lower()))


def _fail_closed(tail: str, counts: TestCounts | None, from_xml: bool = False,
                 known: bool = False) -> tuple[str, str] | None:
    """Why a mandatory test check that exited 0 must fail anyway: ``(reason, tail mark)`` or None.

    In this order: nothing ran (zero-test text rules on the tail — not when the counts come from
    JUnit XML, which take precedence —, or parsed total 0); a ``known`` runner (its command names
    a toolchain with count formats: pytest, go test, cargo test, node --test, jest …) printed no
    count at all (docs/integrity.md: an ``os._exit(0)`` in a conftest prints nothing and exits 0); the
    parsed counts report failures or errors; every parsed test was skipped.
    """
    if (not from_xml and detect_zero_tests(tail)) or (counts is not None and counts.total == 0):
        return ZERO_TEST_REASON, ZERO_TEST_MARK
    if counts is None and known and not from_xml:
        return NO_COUNT_REASON, NO_COUNT_MARK
    if counts is not None and (counts.failed > 0 or counts.errors > 0):
        return CONTRADICTION_REASON, CONTRADICTION_MARK
    if counts is not None and counts.skipped == counts.total:
        return ALL_SKIPPED_REASON, ALL_SKIPPED_MARK
    return None


def run_checks(
    checks: Sequence[CheckDef],
    project: str | os.PathLike[str],
    log_path: str | os.PathLike[str],
    default_timeout_ms: int = 300_000,
    concurrency: int = 1,
    should_stop: Callable[[], bool] | None = None,
    tool_dirs: Sequence[str] | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Run checks serially (``concurrency`` ≤ 1 or one check) or with a bounded worker pool
    (docs/acceptance.md §3.2 parallel mode). Results are in declaration order.

    In parallel mode workers claim indices in order; once ``should_stop`` returns True no new check
    is started and the unclaimed ones become skips (``task cancelled, not run``). ``extra_env`` is
    added to every check's environment (:func:`check_env`); None gives verification's bytecode
    variables (:func:`~tianshu_mcp.acceptance.integrity.pycache.bytecode_env`), so a Python check
    never writes ``__pycache__`` into the project, whatever the caller's environment says
    (``PYTHONDONTWRITEBYTECODE`` unset, as on most machines, left a ``.pyc`` in the user's tree
    when integrity was off). Part files are appended to ``log_path`` in declaration order at the
    end and the parts directory is removed (kept, with a warning, if merging fails). Never raises.
    """
    if extra_env is None:
        from .integrity.pycache import bytecode_env

        extra_env = bytecode_env()
    n = len(checks)
    lp = Path(log_path)
    if n == 0:
        return []
    workers = max(1, min(int(concurrency or 1), 4, n))
    if workers == 1:
        return [run_check(c, project, lp, default_timeout_ms, should_stop, index=i, merge=True, tool_dirs=tool_dirs,
                          extra_env=extra_env) for i, c in enumerate(checks)]
    results: list[dict[str, Any] | None] = [None] * n
    lock = threading.Lock()
    next_index = [0]

    def worker() -> None:
        while True:
            with lock:
                i = next_index[0]
                if i >= n:
                    return
                next_index[0] += 1
            c = checks[i]
            if should_stop is not None and stop_requested(should_stop):
                results[i] = skip_result(c.name, c.display_cmd or c.name, SKIP_CANCELLED, c.optional)
                continue
            results[i] = run_check(c, project, lp, default_timeout_ms, should_stop, index=i, merge=False, tool_dirs=tool_dirs,
                                   extra_env=extra_env)

    threads = [threading.Thread(target=worker, name=f"check-worker-{k}", daemon=True) for k in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    parts = parts_dir_for(lp)
    for i, c in enumerate(checks):
        _merge_part(parts / part_file_name(i, c.name), lp)
    if parts.exists():
        _remove_dir_if_empty(parts)
    return [
        r if r is not None else skip_result(checks[i].name, checks[i].display_cmd, SKIP_CANCELLED, checks[i].optional)
        for i, r in enumerate(results)
    ]
