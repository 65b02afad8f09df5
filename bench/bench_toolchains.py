"""Benchmark the toolchain parsers on big test logs (run on demand; not part of the test suite).

docs/toolchains.md §5 (toolchains as plugins): counting and repair directives over a 50 MB test log
stay linear. For 5, 10, 25 and 50 MB it builds logs by repeating real recorded outputs
(``tests/data/runner_outputs/``, ``tests/data/outputs/`` and ``tests/data/toolchains/<id>/``, all
globbed, each content once: files are picked by the argv of their ``#% recorded by`` or ``# cmd:``
header, the header dropped) of pytest -v, pytest -q/-rA/--tb=line (with collection errors), jest, the
jest/vitest JSON reports, go test -v, go test -json and cargo test, a JUnit XML report of N test cases (the
``<testcase>`` elements of the recorded reports, renamed), a pathological one-line output and an
output of ``\\r``-rewritten progress frames only. Each engine function gets the WHOLE log:

* ``testcount.parse_tests(text, argv)`` and ``testcount.detect_zero_tests(text)``;
* ``directives.extract_directives(report)`` (one failing check whose ``outputTail`` is the log);
* ``directives.output_findings(text, runner, …)``: what the check runner calls on a failed
  check's last 1 MiB (a machine-readable form: up to 16 MiB, read whole by its parser);
* ``formats.junit.parse_junit(bytes)`` and ``formats.junit_files.collect_junit(project, glob, 0)``.

(The check runner itself gives ``parse_tests`` only the last ``runner.PARSE_TAIL_BYTES`` of a
check's output and keeps the last ``runner.OUTPUT_TAIL_CHARS`` characters as ``outputTail``, the
text the directives read; this benchmark shows the parsers are linear without that cap.)

Prints, per workload and engine: for each size the median CPU and wall time over ``--repeat`` runs
(``--big-repeat`` from 25 MB), the throughput and the peak of memory allocated during one call
(tracemalloc, in a separate run so it does not slow the timing), then the ratio CPU time(50 MB) /
CPU time(5 MB): ≈ 10 when linear; above 15 the row is flagged NOT LINEAR and the exit status is 1
(CPU time, because the wall time on a shared machine follows its load), except rows under
:data:`MIN_FLAG_SECONDS` at 50 MB, whose ratio is the memory system's (a control line shows a bare
``str.split`` at 5 and 50 MB). A call over ``--cap`` CPU seconds is stopped (SIGPROF), flagged, and
its bigger sizes skipped. A full run takes ~40 min on 2 shared cores (``detect_zero_tests`` and
``extract_directives`` read 2-6 MB/s); ``--sizes 5,50 --repeat 1`` is a quicker check.

Usage: ``.venv/bin/python bench/bench_toolchains.py [--repeat 3] [--big-repeat 1] [--sizes 5,10,25,50]
[--cap 60] [--only LABEL]``
"""

from __future__ import annotations

import argparse
import gc
import re
import signal
import statistics
import sys
import tempfile
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from tianshu_mcp.acceptance import runner
from tianshu_mcp.acceptance.directives import extract_directives, output_findings
from tianshu_mcp.acceptance.testcount import detect_zero_tests, parse_tests
from tianshu_mcp.acceptance.toolchains.formats.junit import parse_junit
from tianshu_mcp.acceptance.toolchains.formats.junit_files import collect_junit

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
MB = 1_000_000
LINEAR_LIMIT = 15.0
MEM_CAP_FACTOR = 5
MIN_FLAG_SECONDS = 0.5
"""A row whose biggest size takes less CPU than this is not flagged: its ratio measures the memory
system (a fresh copy of a > 32 MiB string is mmap'ed and page-faulted in, a 5 MB one is reused from
the heap), which the ``str.split`` control line shows on its own."""
"""The tracemalloc run may take this many times ``--cap`` (``cap`` in the MiB column when over)."""
_HEADER = re.compile(r"^#% recorded by [^\n]*argv: (?P<argv>.*?); exit: \S+\n")  # record*.py
_HEADER2 = re.compile(r"^# tool: [^\n]*\n# cmd: (?P<argv>[^\n]*)\n# project: [^\n]*\n# exit: [^\n]*\n")  # outputs
_NOT_A_RUN = re.compile(r"zero|no-test|no-files|no-modules|filter|deselected|empty")


@dataclass
class Recorded:
    path: Path
    argv: str
    body: str


def recorded() -> list[Recorded]:
    """Every recorded text output with a recording header (``#% recorded by …`` or ``# tool: …``),
    from ``tests/data/runner_outputs/``, ``tests/data/outputs/`` and ``tests/data/toolchains/*/``
    (a helper may be moving files between them: glob all, each content once), header dropped;
    outputs of runs where no test ran (zero, filtered, …) left out."""
    out: dict[str, Recorded] = {}
    globs = ("runner_outputs/*.txt", "outputs/*.txt", "toolchains/*/*.txt")
    for path in sorted(p for g in globs for p in DATA.glob(g)):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeError):
            continue
        m = _HEADER.match(text) or _HEADER2.match(text)
        if m and not _NOT_A_RUN.search(path.name):
            out.setdefault(text[m.end():], Recorded(path, m["argv"], text[m.end():]))
    return list(out.values())


def pick(files: list[Recorded], argv_re: str) -> tuple[str, list[str]]:
    """The concatenated bodies of the recordings whose argv matches, and their names."""
    rx = re.compile(argv_re)
    got = [r for r in files if rx.search(r.argv)]
    if not got:
        raise SystemExit(f"no recorded output matches argv /{argv_re}/ under {DATA}")
    return "".join(r.body if r.body.endswith("\n") else r.body + "\n" for r in got), \
        [str(r.path.relative_to(DATA)) for r in got]


def repeat_to(block: str, size: int) -> str:
    """``block`` repeated to ``size`` characters (the last copy cut where the size ends)."""
    return (block * (size // len(block) + 1))[:size]


_CASE = re.compile(r"<testcase\b[^>]*?/>|<testcase\b.*?</testcase>", re.S)


def junit_cases() -> tuple[list[str], list[str]]:
    """The ``<testcase>`` elements of the recorded JUnit XML reports (both folders)."""
    cases: list[str] = []
    names: list[str] = []
    for path in sorted({*DATA.glob("toolchains/junit/*.xml"), *DATA.glob("runner_outputs/*.xml")}):
        found = _CASE.findall(path.read_text(encoding="utf-8"))
        if found:
            cases += found
            names.append(str(path.relative_to(DATA)))
    if not cases:
        raise SystemExit(f"no JUnit XML with <testcase> elements under {DATA}")
    return cases, names


def junit_report(cases: list[str], size: int) -> tuple[bytes, int]:
    """A ``<testsuites>`` report of about ``size`` bytes: the cases repeated, each renamed
    ``<name>_<n>`` so every id is distinct. Returns (bytes, number of cases)."""
    head = '<?xml version="1.0" encoding="UTF-8"?>\n<testsuites name="bench">\n<testsuite name="bench">\n'
    tail = "</testsuite>\n</testsuites>\n"
    parts, n, total = [head], 0, len(head) + len(tail)
    while total < size:
        case = re.sub(r'\bname="([^"]*)"', lambda m: f'name="{m[1]}_{n}"', cases[n % len(cases)], count=1)
        parts.append(case + "\n")
        total += len(case) + 1
        n += 1
    parts.append(tail)
    return "".join(parts).encode("utf-8"), n


def one_line(size: int) -> str:
    """One 50 MB line without a newline: pytest -v result fragments, summary-like words, digits,
    runs of spaces, brackets and colons (what the count and directive regexes look for)."""
    frag = ("tests/test_mod.py::test_case[param-1] PASSED   [ 42%] 1 passed, 2 failed in 0.01s "
            "src/a.py:12:5: error: x  --- FAIL: TestX (0.00s) ok  \tpkg/a\t0.003s test result: ok. ")
    return repeat_to(frag, size)


def progress(size: int) -> str:
    """``\\r``-rewritten progress frames only (a bar redrawn in place; one final newline)."""
    frames = [f"\r[{'=' * (i // 5):<20}] {i:3d}% {i * 123 // 100}/123 tests  ETA 00:{59 - i % 60:02d}"
              for i in range(101)]
    return repeat_to("".join(frames), size - 1) + "\n"


def report_of(text: str, name: str, cmd: str) -> dict[str, Any]:
    return {"projectPath": "/tmp/proj",
            "checks": [{"name": name, "cmd": cmd, "passed": False, "exitCode": 1, "outputTail": text}]}


@dataclass
class Workload:
    label: str
    source: str
    make: Callable[[int], Any]  # size in bytes -> input
    engines: list[tuple[str, Callable[[Any], Any]]]


def text_engines(argv: tuple[str, ...], name: str, cmd: str = "", whole: str = "") -> list[tuple[str, Callable[[Any], Any]]]:
    """The engines run on a text workload; ``whole``: the runner id of a machine-readable form
    (``go-json``, ``vitest-json``), read whole by its toolchain's parser in output_findings; ``""``:
    every applying parser on the line-cut text, as the check runner does for a failed check."""
    cmd = cmd or " ".join(argv)
    engines: list[tuple[str, Callable[[Any], Any]]] = [
        ("parse_tests", lambda t: parse_tests(t, argv)),
        ("detect_zero_tests", detect_zero_tests),
        ("extract_directives", lambda t: extract_directives(report_of(t, name, cmd))),
    ]
    engines.append(("output_findings", lambda t: output_findings(t, whole, "/tmp/proj", name, cmd)))
    return engines


def workloads(tmp: Path) -> list[Workload]:
    files = recorded()
    out: list[Workload] = []
    for label, argv_re, argv, name, whole in (
        ("pytest -v", r"pytest\b.*\s-v(?:\s|$)", ("python", "-m", "pytest", "-v"), "pytest", ""),
        ("pytest -q/-rA/--tb", r"pytest\b(?!.*\s-v(?:\s|$))", ("python", "-m", "pytest", "-q"), "pytest", ""),
        ("jest", r"^jest\b(?!.*--json)", ("npx", "jest", "--ci"), "test", ""),
        ("jest/vitest JSON report", r"^(?:jest\b.*--json|vitest\b.*--reporter=json)", ("npx", "vitest", "run", "--reporter=json"),
         "test", "vitest-json"),
        ("go test -v", r"^go test\b.*\s-v\b", ("go", "test", "-v", "./..."), "go-test", ""),
        ("go test -json", r"^go test\b.*\s-json\b", ("go", "test", "-json", "./..."), "go-test", "go-json"),
        ("cargo test", r"^cargo test\b", ("cargo", "test"), "cargo-test", ""),
    ):
        block, names = pick(files, argv_re)
        out.append(Workload(label, f"{len(names)} files, {len(block)} chars: " + ", ".join(names),
                            lambda size, b=block: repeat_to(b, size), text_engines(argv, name, whole=whole)))
    # no argv for the counters (every format is tried); a check named "lint" (every lint check is) for
    # the directives, so the name-matched parsers (eslint, …) read it as well as the shape-matched ones
    out.append(Workload("one line", "generated: pytest/go/tsc-like fragments, no newline; check 'lint', npm run lint",
                        one_line, text_engines((), "lint", "npm run lint")))
    out.append(Workload("\\r progress", "generated: 101 progress frames rewritten with \\r; check 'lint', npm run lint",
                        progress, text_engines((), "lint", "npm run lint")))
    cases, names = junit_cases()
    report = tmp / "report.xml"

    def collect(data: bytes) -> Any:
        res = collect_junit(tmp, "report.xml", 0.0)
        assert res.counts is not None, res.note
        return res

    def make_junit(size: int) -> bytes:
        data, _ = junit_report(cases, size)
        report.write_bytes(data)  # collect_junit reads the same report from disk
        return data

    out.append(Workload("JUnit XML", f"{len(cases)} <testcase> of {len(names)} reports, renamed: " + ", ".join(names),
                        make_junit, [("parse_junit", parse_junit), ("collect_junit", collect)]))
    return out


class Capped(BaseException):
    """Raised by SIGPROF in a call over the cap (a BaseException: the engines catch Exception)."""


def _alarm(_signum: int, _frame: Any) -> None:
    raise Capped()


def call(fn: Callable[[Any], Any], arg: Any, cap: float) -> tuple[float, float]:
    """(CPU, wall) seconds of one ``fn(arg)``; raises :class:`Capped` after ``cap`` CPU seconds
    (SIGPROF; the regex engine checks signals, so a backtracking match is interrupted too)."""
    gc.collect()
    signal.setitimer(signal.ITIMER_PROF, cap)
    try:
        c0, t0 = time.process_time(), time.perf_counter()
        fn(arg)
        return time.process_time() - c0, time.perf_counter() - t0
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)


def peak(fn: Callable[[Any], Any], arg: Any, cap: float) -> int:
    """Peak bytes allocated during one call of ``fn(arg)`` (the input itself not counted)."""
    tracemalloc.start()
    try:
        call(fn, arg, cap)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per size below 25 MB (median)")
    parser.add_argument("--big-repeat", type=int, default=1, help="timed runs per size of 25 MB and more")
    parser.add_argument("--sizes", default="5,10,25,50", help="sizes in MB (first and last give the ratio)")
    parser.add_argument("--cap", type=float, default=60.0,
                        help="seconds: a call over this is stopped, its row flagged and its bigger sizes skipped")
    parser.add_argument("--only", default="", help="run only workloads whose label contains this")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    signal.signal(signal.SIGPROF, _alarm)
    print(f"note: the check runner gives parse_tests only the last {runner.PARSE_TAIL_BYTES >> 20} MiB of a check's "
          f"output (runner.PARSE_TAIL_BYTES), and detect_zero_tests and the directives only the outputTail,\n"
          f"      its last {runner.OUTPUT_TAIL_CHARS} characters (runner.OUTPUT_TAIL_CHARS); "
          "here every engine function gets the WHOLE log.")
    failed: list[str] = []
    started = time.perf_counter()
    control = []
    for size in (sizes[0], sizes[-1]):
        text = progress(size * MB)
        control.append(statistics.median(call(lambda t: t.split("\n"), text, args.cap)[0] for _ in range(3)))
        del text
    print(f"control: str.split of a one-line text (one {sizes[0]} / {sizes[-1]} MB copy): {control[0] * 1000:.1f} / "
          f"{control[1] * 1000:.1f} ms CPU, ratio {control[1] / max(control[0], 1e-6):.1f} (the memory system's own)")
    with tempfile.TemporaryDirectory() as tmp:
        for w in workloads(Path(tmp)):
            if args.only and args.only not in w.label:
                continue
            print(f"\n== {w.label}  ({w.source})")
            print(f"   {'engine':<22}" + "".join(f"| {s:>2} MB: {'cpu ms':>7} {'wall':>6} {'MB/s':>5} {'MiB':>5} "
                                                   for s in sizes)
                  + f"| t({sizes[-1]})/t({sizes[0]})")
            rows: dict[str, list[tuple[float, float, float, int | None] | None]] = {e: [] for e, _ in w.engines}
            for size in sizes:
                arg = w.make(size * MB)
                nbytes = len(arg) if isinstance(arg, bytes) else len(arg.encode("utf-8"))
                for ename, fn in w.engines:
                    if rows[ename] and rows[ename][-1] is None:
                        continue  # stopped at a smaller size
                    try:
                        runs = [call(fn, arg, args.cap) for _ in range(args.big_repeat if size >= 25 else args.repeat)]
                    except Capped:
                        rows[ename].append(None)
                        continue
                    cpu, wall = statistics.median(c for c, _ in runs), statistics.median(w for _, w in runs)
                    try:  # tracemalloc slows allocation-heavy code several times: a larger cap, never a flag
                        mem: int | None = peak(fn, arg, MEM_CAP_FACTOR * args.cap)
                    except Capped:
                        mem = None
                    rows[ename].append((cpu, wall, nbytes / MB / max(cpu, 1e-6), mem))
                del arg
            for ename, cells in rows.items():
                line = f"   {ename:<22}"
                for i, cell in enumerate(cells):
                    if cell is None:
                        est = ""
                        if i > 0 and cells[i - 1] is not None:  # what a linear parser would have taken
                            est = f" (linear ~{cells[i - 1][0] * sizes[i] / sizes[i - 1]:.0f} s)"
                        line += f"| {f'> {args.cap:.0f} s, stopped{est}':>33} "
                    else:
                        mem_txt = f"{cell[3] / (1 << 20):5.0f}" if cell[3] is not None else "  cap"
                        line += f"| {cell[0] * 1000:14.0f} {cell[1] * 1000:6.0f} {cell[2]:5.1f} {mem_txt} "
                line += "".join(f"| {'-':>33} " for _ in range(len(sizes) - len(cells)))
                if cells[-1] is None or len(cells) < len(sizes):
                    failed.append(f"{w.label} / {ename}: a call took over {args.cap:.0f} s of CPU")
                    line += "|   n/a  NOT LINEAR"
                else:
                    ratio = cells[-1][0] / cells[0][0]
                    small = cells[-1][0] < MIN_FLAG_SECONDS
                    line += f"| {ratio:5.1f}" + ("" if ratio <= LINEAR_LIMIT else
                                                 "  (memory-bound, not flagged)" if small else "  NOT LINEAR")
                    if ratio > LINEAR_LIMIT and not small:
                        failed.append(f"{w.label} / {ename}: ratio {ratio:.1f}")
                print(line)
            sys.stdout.flush()
    print(f"\nlinear: t({sizes[-1]})/t({sizes[0]}) (CPU) ≈ {sizes[-1] / sizes[0]:.0f}, flagged above {LINEAR_LIMIT:.0f} "
          f"(unless t({sizes[-1]}) < {MIN_FLAG_SECONDS} s: memory-bound, like the control). "
          f"cpu ms / wall (ms) = medians of {args.repeat} runs (below 25 MB) / {args.big_repeat} (25 MB and more); "
          "MB/s from the CPU time;\nthe ratio uses CPU time (the wall time of a shared machine varies with its load). "
          "MiB = peak allocated during one separate call (tracemalloc), input excluded ('cap': that run went over "
          f"{MEM_CAP_FACTOR} x the cap). "
          f"Total {time.perf_counter() - started:.0f} s.")
    if failed:
        print("NOT LINEAR: " + "; ".join(failed))
        return 1
    print("all linear")
    return 0


if __name__ == "__main__":
    sys.exit(main())
