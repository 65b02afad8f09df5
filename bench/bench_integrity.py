"""Benchmark the cost of verification integrity (docs/integrity.md §8.6; run on demand, not part of the
test suite).

1. **One verify round, ``testIntegrity`` protect versus off** (``acceptanceOverride {"testIntegrity":
   "off"}``) on a generated pytest repository: ``--tests`` cheap but real tests over ``tests/10``
   test files (one module of the source package ``calc`` each) and one test, ``test_bug``, failing
   at the baseline; the "agent" fixes it. Two scenarios:

   a. **source-only**: the agent fixed the source only (the common honest case: the baseline run
      happens beside the round's checks, no pristine tree);
   b. **test-edit**: the agent also added a test to a test file, so the pristine tree is built and
      the test check runs there too.

   Three settings: **protect** as ``run_task`` judges (the flow starts the baseline run with the
   task, :func:`tianshu_mcp.acceptance.baseline_warm.warm_baseline_run`; here it runs to its end
   before the agent's work, as it does while a real agent works for minutes), **cold** (protect
   with no early run: an agent that ended before one test run could, or ``verify_task`` on a task
   that never started one: the baseline run happens beside the round's checks), and **off**.
   Round 0 (the task's first round) and a later round (the same task judged a second time: the
   baseline run is cached per task) are timed separately. Repetitions are interleaved in one run
   (protect, cold, off, protect …), each on a fresh task (baseline capture, pinned rules, baseline
   state: as ``tests/integrity_helpers.py``'s ``Task``), after one discarded warm-up round. Prints
   the median and p95 wall time of ``verify_round`` in ms, the ratio of the medians to off and
   PASS/FAIL against the goal of docs/integrity.md §8.6 (≤ 1.5×, for protect; reported, the exit status does
   not depend on it), and where the time went (the session's steps, timed by wrapping them in this
   process; the engine is unchanged).

2. **Pristine tree build** on a repository of ``--files`` tracked files (a few KB each, nested
   directories; 10 % are test files under ``tests/``) where the agent changed 20 source files and 5
   test files: the time to enter :func:`acceptance.integrity.pristine.pristine_tree` (its
   ``build_ms`` and this script's wall clock), its ``git worktree add`` part, and the exit (worktree
   removal); the changes are listed as ``judge.py`` does (:func:`.infra.infra_rules`,
   :func:`.pristine.agent_changes`, timed too). Median of ``--reps``; goal ≤ 1 s.

The machine's load average is printed at the start and the end (the timings follow it on a shared
machine).

Usage: ``.venv/bin/python bench/bench_integrity.py [--reps 5] [--tests 300] [--files 2000] [--quick]``
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tianshu_mcp.acceptance import engine as engine_mod
from tianshu_mcp.acceptance.baseline_warm import warm_baseline_run
from tianshu_mcp.acceptance.engine import VerifyOutcome, VerifyRequest, verify_round
from tianshu_mcp.acceptance.git import Baseline, capture_baseline
from tianshu_mcp.acceptance.grading.grade import capture_baseline_state
from tianshu_mcp.acceptance.integrity import judge as judge_mod
from tianshu_mcp.acceptance.integrity import pristine as pristine_mod
from tianshu_mcp.acceptance.integrity.infra import infra_rules
from tianshu_mcp.acceptance.integrity.pristine import agent_changes, pristine_tree
from tianshu_mcp.acceptance.pinning import load_pinned, pin_rules

GOAL_RATIO = 1.5
GOAL_BUILD_MS = 1000
PYTEST_ARGV = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
OFF = {"testIntegrity": "off"}
SCENARIOS = ("source-only", "test-edit")


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..1)."""
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def load() -> str:
    a, b, c = os.getloadavg()
    return f"{a:.2f} {b:.2f} {c:.2f} (1/5/15 min, {os.cpu_count()} cores)"


def cpu_s() -> float:
    """CPU seconds (user + system) of this process's threads and its waited-for children (git,
    pytest): the work a round costs, whatever the machine's load."""
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL).stdout


def init_repo(path: Path, files: dict[str, str]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q")
    for k, v in (("user.name", "Bench"), ("user.email", "bench@example.invalid"), ("commit.gpgsign", "false")):
        git(path, "config", k, v)
    for rel, text in files.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-qm", "init")
    return path


def reset(repo: Path) -> None:
    """Back to the committed pre-work tree (ignored files — ``__pycache__`` — stay)."""
    git(repo, "checkout", "-q", "--", ".")
    git(repo, "clean", "-qfd")


class Task:
    """A task started on ``project`` (baseline, pinned rules, baseline state captured now), as
    ``tests/integrity_helpers.py``'s ``Task``; :meth:`judge` times one :func:`verify_round`."""

    def __init__(self, project: Path, root: Path) -> None:
        self.project = project
        self.home = root / "home"
        self.dir = root / "task"
        self.home.mkdir(parents=True, exist_ok=True)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.baseline: Baseline = capture_baseline(str(project))
        pin_rules(project, self.dir, self.home)
        capture_baseline_state(project, self.dir)
        self.round = 0

    def request(self, override: dict[str, Any] | None) -> VerifyRequest:
        return VerifyRequest(
            task_id=f"tsk_bench_{self.dir.parent.name}", project_path=str(self.project), task_dir=self.dir,
            round=self.round, baseline=self.baseline, home=self.home, pinned_rules=load_pinned(self.dir),
            acceptance_override=override, agent_run={"exitCode": 0, "durationMs": 5, "outputTail": "Fixed h()."})

    def warm(self, override: dict[str, Any] | None) -> float:
        """The baseline run the flow starts with the task (:func:`warm_baseline_run`), to its end;
        returns its wall time in ms (not part of the round's)."""
        t = time.perf_counter()
        warm_baseline_run(self.request(override))
        return (time.perf_counter() - t) * 1000

    def judge(self, override: dict[str, Any] | None) -> tuple[float, float, VerifyOutcome]:
        req = self.request(override)
        c = cpu_s()
        t = time.perf_counter()
        out = verify_round(req)
        wall = (time.perf_counter() - t) * 1000
        cpu = (cpu_s() - c) * 1000
        self.round = out.round + 1
        return wall, cpu, out


# --------------------------------------------------------------------------------------------
# the steps of an integrity session, timed by wrapping (this process only; the engine is unchanged)
# --------------------------------------------------------------------------------------------

_steps: dict[str, float] = {}
_steps_lock = threading.Lock()


def _record(name: str, ms: float) -> None:
    with _steps_lock:
        _steps[name] = _steps.get(name, 0.0) + ms


def _timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            _record(name, (time.perf_counter() - t) * 1000)
    wrapper.__wrapped__ = fn  # type: ignore[attr-defined]
    return wrapper


def instrument() -> None:
    """Time the session's steps: ``start`` (before the round's checks, serial), the round's checks,
    the baseline and pristine runs (background threads, incl. their worktrees), ``finish`` (waits
    for the threads, then judges), ``_judge``, ``close`` (removes the pristine tree, serial)."""
    S = judge_mod.IntegritySession
    S.start = _timed("start", S.start)
    S._run_baseline = _timed("baseline thread", S._run_baseline)
    S._run_pristine = _timed("pristine thread", S._run_pristine)
    S.finish = _timed("finish", S.finish)
    S._judge = _timed("judge", S._judge)
    S.close = _timed("close", S.close)
    engine_mod.run_checks = _timed("round checks", engine_mod.run_checks)
    judge_mod.agent_changes = _timed("agent_changes", judge_mod.agent_changes)
    judge_mod.judge_flakes = _timed("flake re-runs", judge_mod.judge_flakes)


STEP_ORDER = ("agent_changes", "start", "round checks", "baseline thread", "pristine thread", "finish", "judge",
              "close", "flake re-runs")


# --------------------------------------------------------------------------------------------
# 1. protect versus off on a pytest repository
# --------------------------------------------------------------------------------------------

SRC = '''"""Module {k} of the calculator."""


def f(n):
    """Sum of squares below n, mod 9973."""
    return sum(i * i for i in range(n)) % 9973


def g(s):
    """Vowels of s, reversed, upper-case."""
    return "".join(c for c in reversed(s) if c in "aeiou").upper()


def h(n):
    """n-th triangular number."""
    return {h_body}
'''
H_OK = "n * (n + 1) // 2"
H_BUG = "n * (n - 1) // 2"


def _f(n: int) -> int:
    return sum(i * i for i in range(n)) % 9973


def _g(s: str) -> str:
    return "".join(c for c in reversed(s) if c in "aeiou").upper()


WORDS = ("integrity", "pristine", "baseline", "verification", "tianshu", "agent", "round", "inventory")


def suite_files(tests: int) -> dict[str, str]:
    """``calc/m<k>.py`` and ``tests/test_m<k>.py`` (``tests`` tests in ``max(1, tests // 10)``
    files); ``calc/m0.py``'s ``h`` is wrong, so ``tests/test_m0.py::test_bug`` fails."""
    nfiles = max(1, tests // 10)
    files: dict[str, str] = {"calc/__init__.py": "", ".gitignore": "__pycache__/\n*.pyc\n"}
    for k in range(nfiles):
        files[f"calc/m{k}.py"] = SRC.format(k=k, h_body=H_BUG if k == 0 else H_OK)
    per = [tests // nfiles + (1 if k < tests % nfiles else 0) for k in range(nfiles)]
    for k in range(nfiles):
        body = [f'"""Tests of calc.m{k}."""\n\nfrom calc import m{k} as m\n']
        for j in range(per[k] - (1 if k == 0 else 0)):
            if j % 2 == 0:
                n = 200 + 37 * j + k
                body.append(f"\ndef test_f_{j}():\n    assert m.f({n}) == {_f(n)}\n")
            else:
                w = WORDS[(j + k) % len(WORDS)] * (1 + j % 3)
                body.append(f"\ndef test_g_{j}():\n    assert m.g({w!r}) == {_g(w)!r}\n")
        if k == 0:
            body.append("\ndef test_bug():\n    assert m.h(10) == 55\n")
        files[f"tests/test_m{k}.py"] = "".join(body)
    files[".tianshu-mcp/acceptance.json"] = json.dumps({"checks": [{"name": "tests", "cmd": PYTEST_ARGV}]})
    return files


def agent_work(repo: Path, scenario: str) -> None:
    """The agent's changes: the fix (and, for ``test-edit``, one added test)."""
    p = repo / "calc" / "m0.py"
    p.write_text(p.read_text().replace(H_BUG, H_OK))
    if scenario == "test-edit":
        with (repo / "tests" / "test_m0.py").open("a") as fh:
            fh.write("\n\ndef test_h_more():\n    assert m.h(100) == 5050\n")


def one_task(repo: Path, root: Path, scenario: str, override: dict[str, Any] | None, early: bool,
             ) -> list[tuple[float, float, dict[str, float], VerifyOutcome]]:
    """A fresh task on the pre-work tree, (``early``) the baseline run the flow starts with the task,
    to its end, as while an agent works, then the agent's work, then two rounds: ``[(ms, cpu ms,
    steps, outcome)]``."""
    reset(repo)
    task = Task(repo, root)
    if early:
        task.warm(override)
    agent_work(repo, scenario)
    rounds = []
    try:
        for _r in range(2):
            _steps.clear()
            ms, cpu, out = task.judge(override)
            rounds.append((ms, cpu, dict(_steps), out))
    finally:
        reset(repo)
    return rounds


def check_outcome(out: VerifyOutcome, what: str) -> None:
    if not out.passed:
        raise SystemExit(f"{what}: round {out.round} did not pass: {out.report.get('message')}\n"
                         f"blocking: {out.blocking_issues}")


SETTINGS = (("protect", None, True), ("cold", None, False), ("off", OFF, False))
"""``(label, acceptanceOverride, early run)``: ``protect`` as ``run_task`` judges (the baseline run
started with the task, done while the agent worked); ``cold``: protect with no early run (an agent
that ended before one test run could, or ``verify_task`` with no task start); ``off``."""


def bench_rounds(tmp: Path, reps: int, tests: int) -> dict[str, dict[str, Any]]:
    """Section 1. Returns ``{scenario: {"times": {(setting, round): [ms]}, …}}``."""
    results: dict[str, dict[str, Any]] = {}
    keys = [(p, r) for p, _o, _e in SETTINGS for r in (0, 1)]
    for scenario in SCENARIOS:
        repo = init_repo(tmp / f"suite-{scenario}", suite_files(tests))
        times: dict[tuple[str, int], list[float]] = {k: [] for k in keys}
        cpus: dict[tuple[str, int], list[float]] = {k: [] for k in keys}
        steps: dict[tuple[str, int], list[dict[str, float]]] = {k: [] for k in keys}
        extra: dict[str, list[float]] = {"buildMs": [], "earlyMs": []}
        n = 0
        for rep in range(reps + 1):  # rep 0: the warm-up round of settings, discarded
            for setting, override, early in SETTINGS:
                n += 1
                rounds = one_task(repo, tmp / f"t-{scenario}-{n}", scenario, override, early)
                for r, (ms, cpu, st, out) in enumerate(rounds):
                    check_outcome(out, f"{scenario} {setting}")
                    integ = out.report.get("integrity") or {}
                    if setting != "off":
                        assert integ.get("policy") == "protect", integ
                        pristine = integ.get("pristine")
                        if scenario == "test-edit":
                            assert pristine and pristine.get("checks"), f"no pristine run: {integ}"
                        else:
                            assert not pristine, f"unexpected pristine tree: {pristine}"
                        assert integ.get("inventory"), f"no baseline inventory: {integ}"
                    else:
                        assert integ.get("policy") == "off", integ
                    if rep == 0:
                        continue
                    times[(setting, r)].append(ms)
                    cpus[(setting, r)].append(cpu)
                    steps[(setting, r)].append(st)
                    if setting == "protect" and integ.get("pristine"):
                        extra["buildMs"].append(float(integ["pristine"]["buildMs"]))
            print(f"  {scenario}: {'warm-up' if rep == 0 else f'rep {rep}/{reps}'} done "
                  f"(load {os.getloadavg()[0]:.1f})", flush=True)
        counts = (rounds[0][3].report["checks"][1].get("tests") or {})
        results[scenario] = {"times": times, "cpus": cpus, "steps": steps, "extra": extra, "counts": counts}
    return results


def print_rounds(results: dict[str, dict[str, Any]], reps: int, tests: int) -> list[str]:
    summary = []
    print(f"\n== 1. verify_round wall time, testIntegrity protect (early baseline run), cold (none) and off "
          f"({tests} tests in {max(1, tests // 10)} files, {reps} interleaved reps each) ==")
    print(f"{'scenario':<12} {'round':<8} {'setting':<8} {'median':>8} {'p95':>7} {'off med':>8} "
          f"{'ratio':>6}  {'goal ≤ ' + str(GOAL_RATIO) + '×':<11} {'CPU':>8} {'CPU off':>8} {'CPU ratio':>9}")
    for scenario, res in results.items():
        times, cpus = res["times"], res["cpus"]
        for r, label in ((0, "round 0"), (1, "later")):
            off, c_off = times[("off", r)], cpus[("off", r)]
            for setting in ("protect", "cold"):
                on, c_on = times[(setting, r)], cpus[(setting, r)]
                ratio = med(on) / med(off)
                verdict = ("PASS" if ratio <= GOAL_RATIO else "FAIL") if setting == "protect" else "(info)"
                print(f"{scenario:<12} {label:<8} {setting:<8} {med(on):>6.0f}ms {pct(on, .95):>5.0f}ms "
                      f"{med(off):>6.0f}ms {ratio:>5.2f}×  {verdict:<11} {med(c_on):>6.0f}ms {med(c_off):>6.0f}ms "
                      f"{med(c_on) / med(c_off):>8.2f}×")
                summary.append(f"{scenario} {label} {setting}: {med(on):.0f} ms / off {med(off):.0f} ms = "
                               f"{ratio:.2f}× → {verdict} (goal ≤ {GOAL_RATIO}× for protect); CPU "
                               f"{med(c_on):.0f} / {med(c_off):.0f} ms = {med(c_on) / med(c_off):.2f}×")
        for setting, _o, _e in SETTINGS:
            print(f"{'':<12} raw ms {setting:<7} r0 {[round(x) for x in times[(setting, 0)]]} "
                  f"r1 {[round(x) for x in times[(setting, 1)]]}")
        c = res["counts"]
        print(f"{'':<12} the round's test check counted {c}")
    print("\nwhere the time goes (median ms per step; 'start' and 'close' are serial around the "
          "round's checks, the baseline/pristine threads run beside them, 'finish' = waiting for them + judge):")
    print(f"{'scenario':<12} {'round':<16} " + " ".join(f"{s:>15}" for s in STEP_ORDER))
    for scenario, res in results.items():
        for setting, _o, _e in SETTINGS:
            for r, label in ((0, "round 0"), (1, "later")):
                rows = res["steps"][(setting, r)]
                cells = []
                for s in STEP_ORDER:
                    vals = [row[s] for row in rows if s in row]
                    cells.append(f"{med(vals):>15.0f}" if vals else f"{'-':>15}")
                print(f"{scenario:<12} {label + ' ' + setting:<16} " + " ".join(cells))
        b = res["extra"]["buildMs"]
        if b:
            print(f"{scenario:<12} pristine tree buildMs (report): median {med(b):.0f} ms, max {max(b):.0f} ms "
                  f"(built inside 'start', before the round's checks start)")
    return summary


# --------------------------------------------------------------------------------------------
# 2. pristine tree build on a big repository
# --------------------------------------------------------------------------------------------

FILLER = "    # padding line {i:04d}: the quick brown fox jumps over the lazy dog, 0123456789abcdef\n"


def big_files(n: int) -> dict[str, str]:
    """``n`` files of 2-5 KB in nested dirs: 90 % ``src/p<a>/q<b>/m<i>.py``, 10 %
    ``tests/p<a>/test_<i>.py``."""
    files: dict[str, str] = {".gitignore": "__pycache__/\n"}
    for i in range(n - 1):
        lines = 25 + (i * 7) % 35  # ~2.3-5.3 KB
        body = f'"""File {i}."""\n\n\ndef fn_{i}(x):\n' + "".join(FILLER.format(i=j) for j in range(lines)) + \
            f"    return x + {i}\n"
        if i % 10 == 9:
            files[f"tests/p{i % 7}/test_{i}.py"] = body + f"\n\ndef test_{i}():\n    assert fn_{i}(0) == {i}\n"
        else:
            files[f"src/p{i % 10}/q{(i // 10) % 10}/m{i}.py"] = body
    return files


def big_agent_work(repo: Path, files: dict[str, str], n_src: int = 20, n_test: int = 5) -> tuple[int, int]:
    src = [p for p in files if p.startswith("src/")][::37][:n_src]
    tst = [p for p in files if p.startswith("tests/")][::11][:n_test]
    for p in [*src, *tst]:
        with (repo / p).open("a") as fh:
            fh.write("\n# changed by the agent\n")
    return len(src), len(tst)


def bench_pristine(tmp: Path, reps: int, nfiles: int) -> dict[str, Any]:
    files = big_files(nfiles)
    t = time.perf_counter()
    repo = init_repo(tmp / "big", files)
    made_ms = (time.perf_counter() - t) * 1000
    tdir = tmp / "big-task"
    tdir.mkdir()
    baseline = capture_baseline(str(repo))
    capture_baseline_state(repo, tdir)
    n_src, n_test = big_agent_work(repo, files)
    argvs = [PYTEST_ARGV]
    wt_add: list[float] = []

    real_bw = pristine_mod.baseline_worktree

    @contextmanager
    def timed_bw(*a: Any, **k: Any) -> Iterator[Any]:
        t0 = time.perf_counter()
        with real_bw(*a, **k) as wt:
            wt_add.append((time.perf_counter() - t0) * 1000)
            yield wt

    rules_ms, changes_ms, enter_ms, build_ms, exit_ms = [], [], [], [], []
    enter_cpu, exit_cpu = [], []
    tree_info: dict[str, Any] = {}
    pristine_mod.baseline_worktree = timed_bw  # type: ignore[assignment]
    try:
        for rep in range(reps + 1):  # rep 0: warm-up, discarded
            t0 = time.perf_counter()
            rules = infra_rules(argvs, repo, repo)
            t1 = time.perf_counter()
            changes = agent_changes(repo, baseline, rules)
            t2 = time.perf_counter()
            c2 = cpu_s()
            cm = pristine_tree(repo, tdir, baseline, rules, changes)
            tree = cm.__enter__()
            t3 = time.perf_counter()
            c3 = cpu_s()
            try:
                assert tree is not None, "the pristine tree could not be built"
                tree_info = {"restored": len(tree.restored), "excluded": len(tree.excluded), "copied": tree.copied,
                             "changed": len(changes.paths), "infra": len(changes.infra)}
                assert tree.copied == n_src and len(tree.restored) == n_test, tree_info
                b = tree.build_ms
            finally:
                t4, c4 = time.perf_counter(), cpu_s()
                cm.__exit__(None, None, None)
                t5, c5 = time.perf_counter(), cpu_s()
            if rep == 0:
                continue
            rules_ms.append((t1 - t0) * 1000)
            changes_ms.append((t2 - t1) * 1000)
            enter_ms.append((t3 - t2) * 1000)
            build_ms.append(float(b))
            exit_ms.append((t5 - t4) * 1000)
            enter_cpu.append((c3 - c2) * 1000)
            exit_cpu.append((c5 - c4) * 1000)
    finally:
        pristine_mod.baseline_worktree = real_bw  # type: ignore[assignment]
    return {"files": nfiles, "made_ms": made_ms, "rules": rules_ms, "changes": changes_ms, "enter": enter_ms,
            "build": build_ms, "wt": wt_add[1:], "exit": exit_ms,
            "enter_cpu": enter_cpu, "exit_cpu": exit_cpu, "tree": tree_info, "n_src": n_src,
            "n_test": n_test, "bytes": sum(len(v) for v in files.values())}


def print_pristine(res: dict[str, Any], reps: int) -> list[str]:
    print(f"\n== 2. pristine tree build: {res['files']} tracked files ({res['bytes'] / 1e6:.1f} MB), the agent "
          f"changed {res['n_src']} source + {res['n_test']} test files ({reps} reps) ==")
    print(f"tree: {res['tree']}")
    print(f"{'step':<46} {'median':>9} {'p95':>9} {'min':>9}")
    rows = (("infra_rules (judge: __init__ + start)", res["rules"]),
            ("agent_changes (judge: start)", res["changes"]),
            ("pristine_tree entry, wall clock", res["enter"]),
            ("  of which PristineTree.build_ms", res["build"]),
            ("  of which baseline_worktree entry (git wt add)", res["wt"]),
            ("pristine_tree exit (worktree removal)", res["exit"]),
            ("CPU of the entry (this process + git)", res["enter_cpu"]),
            ("CPU of the exit (this process + git)", res["exit_cpu"]))
    for label, vals in rows:
        print(f"{label:<46} {med(vals):>7.0f}ms {pct(vals, .95):>7.0f}ms {min(vals):>7.0f}ms")
    verdict = "PASS" if med(res["enter"]) <= GOAL_BUILD_MS else "FAIL"
    print(f"goal ≤ {GOAL_BUILD_MS} ms: {verdict} (entry wall clock median {med(res['enter']):.0f} ms)")
    return [(f"pristine tree build, {res['files']} files: entry {med(res['enter']):.0f} ms (build_ms "
             f"{med(res['build']):.0f} ms, CPU {med(res['enter_cpu']):.0f} ms), exit {med(res['exit']):.0f} ms "
             f"→ {verdict} (goal ≤ {GOAL_BUILD_MS} ms)")]


# --------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5, help="measured repetitions per setting (after one warm-up)")
    parser.add_argument("--tests", type=int, default=300, help="tests in the generated pytest repository")
    parser.add_argument("--files", type=int, default=2000, help="tracked files of the pristine-build repository")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 2 reps, 40 tests, 200 files")
    parser.add_argument("--only", choices=("rounds", "pristine"), help="run one section only")
    args = parser.parse_args()
    if args.quick:
        args.reps, args.tests, args.files = 2, 40, 200
    # a user's machine writes bytecode: with PYTHONDONTWRITEBYTECODE (set in some containers) "off"
    # recompiled and re-rewrote every test module per run while protect's own cache kept them
    # (verification writes bytecode to its own directory), which flattered protect
    dont_write = os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    start_load = load()
    print(f"load average at start: {start_load}")
    print(f"PYTHONDONTWRITEBYTECODE: {'was ' + repr(dont_write) + ', unset for this run' if dont_write else 'not set'}")
    print(f"python {sys.version.split()[0]}, reps {args.reps}, tests {args.tests}, files {args.files}", flush=True)
    instrument()
    summary: list[str] = []
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-integrity-") as tmp:
        if args.only in (None, "rounds"):
            res = bench_rounds(Path(tmp), args.reps, args.tests)
            summary += print_rounds(res, args.reps, args.tests)
        if args.only in (None, "pristine"):
            summary += print_pristine(bench_pristine(Path(tmp), args.reps, args.files), args.reps)
    end_load = load()
    print("\n== summary ==")
    for line in summary:
        print(line)
    print(f"load average at start: {start_load}")
    print(f"load average at end:   {end_load}")
    print(f"bench wall time: {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
