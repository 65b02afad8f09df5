"""acceptance.runner: real subprocess checks (docs/acceptance.md §3.2–§3.3). No mocks."""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import platform
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from pydantic import ValidationError

from conftest import pid_running
from tianshu_mcp.acceptance.config import CheckDef, to_check_def
from tianshu_mcp.acceptance.runner import (
    ALL_SKIPPED_REASON,
    CONTRADICTION_REASON,
    FAIL_CLOSED_REASONS,
    NO_COUNT_REASON,
    OUTPUT_TAIL_CHARS,
    SKIP_CANCELLED,
    SKIP_EMPTY,
    SKIP_EXPLICIT,
    ZERO_TEST_REASON,
    check_env,
    part_file_name,
    parts_dir_for,
    run_check,
    run_checks,
)

PY = sys.executable


def py(name: str, code: str, **kw: object) -> CheckDef:
    return CheckDef.make(name, [PY, "-c", code], **kw)  # type: ignore[arg-type]


def dead(pid: int, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def test_passing_check_and_log_layout(tmp_path: Path) -> None:
    log = tmp_path / "task" / "verify-0.log"
    r = run_check(py("hello", "print('hello from check')"), tmp_path, log, 10_000)
    assert r["passed"] is True and r["exitCode"] == 0 and r["timeout"] is False and r["aborted"] is False
    assert r["outputTail"].strip() == "hello from check"  # header/trailer are not part of the tail
    assert r["cmd"] == f"{PY} -c print('hello from check')"
    assert list(r) == ["name", "cmd", "passed", "durationMs", "exitCode", "outputTail", "timeout", "aborted",
                       "resolved"]
    assert r["resolved"]["path"] == PY and r["resolved"]["version"] == "Python " + platform.python_version()
    text = log.read_text()
    assert text.startswith("\n=== check: hello — ") and "hello from check" in text
    assert "[exit] code=0" in text
    assert not parts_dir_for(log).exists()  # serial mode merges and removes the part


def test_failing_check_keeps_exit_code_and_tail(tmp_path: Path) -> None:
    r = run_check(
        py("fails", "import sys; print('line1'); print('boom', file=sys.stderr); sys.exit(3)"),
        tmp_path,
        tmp_path / "verify-0.log",
        10_000,
    )
    assert r["passed"] is False and r["exitCode"] == 3
    assert "line1" in r["outputTail"] and "boom" in r["outputTail"]
    assert "reason" not in r


def test_missing_executable(tmp_path: Path) -> None:
    log = tmp_path / "verify-0.log"
    r = run_check(CheckDef.make("ghost", ["definitely-not-a-real-binary-xyz", "--x"]), tmp_path, log, 10_000)
    assert r["passed"] is False and r["exitCode"] is None and r["timeout"] is False
    assert r["reason"].startswith("cannot start command: 'definitely-not-a-real-binary-xyz' was not found on PATH (")
    assert "[spawn-error]" in r["outputTail"] and "tests" not in r


def test_timeout_kills_grandchild(tmp_path: Path) -> None:
    pidfile = tmp_path / "gc.pid"
    code = (
        "import subprocess, sys, time\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "print('started', flush=True)\n"
        "time.sleep(60)\n"
    )
    t0 = time.monotonic()
    r = run_check(py("slow", code, timeout_ms=1500), tmp_path, tmp_path / "verify-0.log", 300_000)
    assert time.monotonic() - t0 < 10
    assert r["timeout"] is True and r["passed"] is False and r["exitCode"] is None
    assert "started" in r["outputTail"]
    assert dead(int(pidfile.read_text()))
    assert "(timeout)" in (tmp_path / "verify-0.log").read_text()


def test_timeout_kills_setsid_term_trapping_grandchild(tmp_path: Path) -> None:
    pidfile = tmp_path / "gc.pid"
    inner = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    code = (
        "import subprocess, sys, time\n"
        f"p = subprocess.Popen([sys.executable, '-c', {inner!r}], start_new_session=True)\n"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(60)\n"
    )
    r = run_check(py("slow", code), tmp_path, tmp_path / "verify-0.log", 1500)  # default timeout applies
    assert r["timeout"] is True
    assert dead(int(pidfile.read_text()))


def test_skip_rules(tmp_path: Path) -> None:
    log = tmp_path / "verify-0.log"
    e = run_check(CheckDef.make("empty", []), tmp_path, log, 1000)
    assert e == {
        "name": "empty", "cmd": "empty", "passed": True, "durationMs": 0, "exitCode": None, "outputTail": "",
        "timeout": False, "skipped": True, "reason": SKIP_EMPTY, "aborted": False,
    }
    s = run_check(CheckDef.make("later", ["skip", ":", "not yet"], optional=True), tmp_path, log, 1000)
    assert s["skipped"] and s["reason"] == SKIP_EXPLICIT and s["cmd"] == "skip : not yet" and s["optional"] is True
    c = run_check(py("x", "print(1)"), tmp_path, log, 1000, should_stop=lambda: True)
    assert c["skipped"] and c["reason"] == SKIP_CANCELLED
    assert not log.exists()  # skips write nothing


def test_cancellation_while_running_aborts(tmp_path: Path) -> None:
    t0 = time.monotonic()
    r = run_check(
        py("long", "import time; print('go', flush=True); time.sleep(60)"),
        tmp_path,
        tmp_path / "verify-0.log",
        60_000,
        should_stop=lambda: time.monotonic() - t0 > 0.8,
    )
    assert r["aborted"] is True and r["passed"] is False and r["exitCode"] is None and r["timeout"] is False
    assert time.monotonic() - t0 < 10


def test_zero_tests_fail_closed(tmp_path: Path) -> None:
    (tmp_path / "proj").mkdir()
    check = CheckDef.make("unit-tests", [PY, "-m", "unittest"])
    r = run_check(check, tmp_path / "proj", tmp_path / "verify-0.log", 30_000)
    assert r["exitCode"] == 0 and r["passed"] is False  # exit code stays 0
    assert r["reason"] == ZERO_TEST_REASON
    assert r["outputTail"].endswith("[fail-closed] the command exited 0 but ran no test case")
    # optional checks never get zero-test detection
    opt = run_check(CheckDef.make("unit-tests", [PY, "-m", "unittest"], optional=True), tmp_path / "proj", tmp_path / "v.log", 30_000)
    assert opt["passed"] is True and opt["optional"] is True
    # a non-test check that prints the same text is not flagged
    plain = run_check(py("echo", "print('Ran 0 tests in 0.000s')"), tmp_path, tmp_path / "v.log", 30_000)
    assert plain["passed"] is True


def test_real_tests_pass(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "test_x.py").write_text("import unittest\nclass T(unittest.TestCase):\n    def test_a(self):\n        pass\n")
    r = run_check(CheckDef.make("unit-tests", [PY, "-m", "unittest", "-v"]), proj, tmp_path / "verify-0.log", 30_000)
    assert r["passed"] is True and "Ran 1 test" in r["outputTail"] and "reason" not in r
    assert r["tests"] == {"runner": "unittest", "passed": 1, "failed": 0, "skipped": 0, "errors": 0, "total": 1,
                          "failedIds": [], "passedIds": ["test_a (test_x.T.test_a)"]}
    assert list(r)[-2:] == ["tests", "resolved"]


def test_output_tail_handles_invalid_utf8(tmp_path: Path) -> None:
    r = run_check(
        py("bytes", "import sys; sys.stdout.buffer.write(b'ok \\xff\\xfe bad\\n' + '中文\\n'.encode())"), tmp_path, tmp_path / "v.log", 10_000
    )
    assert r["passed"] and "中文" in r["outputTail"] and "\ufffd" in r["outputTail"]


def test_parallel_results_in_declaration_order(tmp_path: Path) -> None:
    log = tmp_path / "verify-1.log"
    checks = [
        py("slow one", "import time; time.sleep(0.6); print('first')"),
        py("fast", "print('second')"),
        py("fails", "import sys; print('third'); sys.exit(2)"),
        CheckDef.make("skipme", ["skip", ":"]),
    ]
    t0 = time.monotonic()
    results = run_checks(checks, tmp_path, log, 10_000, concurrency=3)
    assert [r["name"] for r in results] == ["slow one", "fast", "fails", "skipme"]
    assert [r["passed"] for r in results] == [True, True, False, True]
    assert results[3]["skipped"] is True
    text = log.read_text()
    assert text.index("first") < text.index("second") < text.index("third")  # merged in declaration order
    assert not parts_dir_for(log).exists()
    assert time.monotonic() - t0 < 5


def test_parallel_cancellation_skips_unclaimed(tmp_path: Path) -> None:
    stop = threading.Event()
    checks = [py(f"c{i}", "import time; time.sleep(0.3)") for i in range(6)]

    def should_stop() -> bool:
        return stop.is_set()

    timer = threading.Timer(0.1, stop.set)
    timer.start()
    results = run_checks(checks, tmp_path, tmp_path / "verify-0.log", 10_000, concurrency=2, should_stop=should_stop)
    timer.join()
    assert len(results) == 6
    assert any(r.get("aborted") for r in results[:2])
    assert all(r.get("skipped") and r["reason"] == SKIP_CANCELLED for r in results[2:])


def test_part_file_name() -> None:
    assert part_file_name(3, "npm run test:unit / ä") == "003-npm_run_test_unit_.log"
    assert part_file_name(12, "") == "012-check.log"
    assert part_file_name(0, "x" * 80) == "000-" + "x" * 40 + ".log"


def test_check_timeout_overrides_default(tmp_path: Path) -> None:
    r = run_check(py("sleepy", "import time; time.sleep(1.2); print('done')", timeout_ms=10_000), tmp_path, tmp_path / "v.log", 300)
    assert r["passed"] is True and "done" in r["outputTail"]


def test_unwritable_log_location_does_not_fail_the_check(tmp_path: Path) -> None:
    blocker = tmp_path / "task"
    blocker.write_text("a file where the task dir should be")
    r = run_check(py("ok", "print('fine')"), tmp_path, blocker / "verify-0.log", 10_000)
    assert r["passed"] is True and "[log-error]" in r["outputTail"] and "fine" in r["outputTail"]


# --- fail-closed test checks and their counts (docs/acceptance.md §8.4) ---------------------------


def _unittest_project(root: Path, body: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "test_x.py").write_text("import unittest\n\n\nclass T(unittest.TestCase):\n" + body)
    return root


def test_all_skipped_fails_closed(tmp_path: Path) -> None:
    proj = _unittest_project(tmp_path / "p", "    @unittest.skip('later')\n    def test_a(self):\n        pass\n")
    r = run_check(CheckDef.make("unit-tests", [PY, "-m", "unittest"]), proj, tmp_path / "v.log", 30_000)
    assert r["exitCode"] == 0 and r["passed"] is False and r["reason"] == ALL_SKIPPED_REASON
    assert r["outputTail"].endswith("[fail-closed] the command exited 0 but every test was skipped")
    assert r["tests"]["skipped"] == 1 and r["tests"]["total"] == 1
    # optional: reported, counted, not failed
    o = run_check(CheckDef.make("unit-tests", [PY, "-m", "unittest"], optional=True), proj, tmp_path / "v.log", 30_000)
    assert o["passed"] is True and "reason" not in o and o["tests"]["skipped"] == 1


def test_exit_zero_contradicted_by_failures_fails_closed(tmp_path: Path) -> None:
    proj = _unittest_project(tmp_path / "p", "    def test_a(self):\n        self.assertEqual(1, 2)\n")
    # a wrapper that swallows the runner's exit code
    wrapper = "import subprocess, sys; subprocess.call([sys.executable, '-m', 'unittest']); sys.exit(0)"
    r = run_check(CheckDef.make("unit-tests", [PY, "-c", wrapper]), proj, tmp_path / "v.log", 30_000)
    assert r["exitCode"] == 0 and r["passed"] is False and r["reason"] == CONTRADICTION_REASON
    assert r["tests"]["failed"] == 1 and r["tests"]["failedIds"] == ["test_a (test_x.T.test_a)"]
    # the same failing run with its real exit code is an ordinary failure with counts
    f = run_check(CheckDef.make("unit-tests", [PY, "-m", "unittest"]), proj, tmp_path / "v.log", 30_000)
    assert f["exitCode"] == 1 and f["passed"] is False and "reason" not in f and f["tests"]["failed"] == 1


def test_non_test_checks_get_no_counts(tmp_path: Path) -> None:
    r = run_check(py("build", "print('3 failed, 1 passed in 0.10s')"), tmp_path, tmp_path / "v.log", 10_000)
    assert r["passed"] is True and "tests" not in r and "reason" not in r


def test_recorded_outputs_through_the_runner(tmp_path: Path) -> None:
    """Every recorded runner output, printed by a test check that exits 0: zero / contradiction /
    all-skipped fail closed with their reason, a clean run passes; all carry their counts."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("tc_expect", Path(__file__).with_name("test_acceptance_testcount.py"))
    assert spec is not None and spec.loader is not None
    expect = importlib.util.module_from_spec(spec)
    sys.modules["tc_expect"] = expect
    spec.loader.exec_module(expect)
    reasons = {"zero": ZERO_TEST_REASON, "contradiction": CONTRADICTION_REASON, "all-skipped": ALL_SKIPPED_REASON}
    # NO_COUNT_REASON needs a command naming the runner (`cat` names none): tests/test_integrity_units.py
    stems = sorted(expect.VERDICT_IF_EXIT_0)
    cat = shutil.which("cat") or "/bin/cat"
    checks = [CheckDef.make(f"tests {stem}", [cat, str(expect.record.recorded(stem))]) for stem in stems]
    results = run_checks(checks, tmp_path, tmp_path / "verify-0.log", 30_000, concurrency=4)
    for stem, r in zip(stems, results):
        verdict = expect.VERDICT_IF_EXIT_0[stem]
        assert r["exitCode"] == 0, stem
        if stem == "cargo-build-error":  # recognised only with `cargo test` in the argv (real exit: 101)
            assert r["passed"] is True and "tests" not in r
            continue
        if verdict == "pass":
            assert r["passed"] is True and "reason" not in r, stem
        else:
            assert r["passed"] is False and r["reason"] == reasons[verdict], (stem, r.get("reason"))
        e = expect.EXPECTED[stem]
        assert r["tests"]["runner"] == e[0], stem
        assert [r["tests"][k] for k in ("passed", "failed", "skipped", "errors")] == list(e[1:5]), stem
    assert set(FAIL_CLOSED_REASONS) == {*reasons.values(), NO_COUNT_REASON}


# --- robustness (docs/acceptance.md §8.3) ---------------------------------------------------------


def test_concurrency_is_clamped_and_parts_merge_in_order(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    code = (
        "import os, sys, time\n"
        f"d = {str(marks)!r}\n"
        "me = os.path.join(d, str(os.getpid()))\n"
        "open(me, 'w').close()\n"
        "peak = len(os.listdir(d))\n"
        "time.sleep(float(sys.argv[2]))\n"
        "peak = max(peak, len(os.listdir(d)))\n"
        "os.unlink(me)\n"
        "print('peak', peak, 'check', sys.argv[1])\n"
    )

    def run(concurrency: int, n: int, log: Path, sleep_s: float = 0.2) -> list[int]:
        checks = [CheckDef.make(f"c{i}", [PY, "-c", code, str(i), str(sleep_s)]) for i in range(n)]
        results = run_checks(checks, tmp_path, log, 20_000, concurrency=concurrency)
        assert [r["name"] for r in results] == [f"c{i}" for i in range(n)]
        text = log.read_text()
        assert [text.index(f"check {i}\n") for i in range(n)] == sorted(text.index(f"check {i}\n") for i in range(n))
        assert not parts_dir_for(log).exists()
        return [int(r["outputTail"].split()[1]) for r in results]

    assert max(run(99, 6, tmp_path / "a.log", 0.8)) == 4  # clamped to 4
    assert max(run(0, 2, tmp_path / "b.log")) == 1  # 0 → serial
    assert max(run(-3, 2, tmp_path / "c.log")) == 1


def test_timeout_kills_term_ignoring_root_and_grandchild(tmp_path: Path) -> None:
    pidfile = tmp_path / "gc.pid"
    inner = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    code = (
        "import signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        f"p = subprocess.Popen([sys.executable, '-c', {inner!r}])\n"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "print('started', flush=True)\n"
        "time.sleep(60)\n"
    )
    t0 = time.monotonic()
    r = run_check(py("stubborn", code, timeout_ms=1000), tmp_path, tmp_path / "v.log", 300_000)
    assert time.monotonic() - t0 < 10
    assert r["timeout"] is True and r["exitCode"] is None and "started" in r["outputTail"]
    assert dead(int(pidfile.read_text()))


def test_grandchild_holding_the_output_open_cannot_hang_the_round(tmp_path: Path) -> None:
    pidfile = tmp_path / "gc.pid"
    # the grandchild inherits stdout (the part file), keeps writing, and outlives its parent
    inner = "import time\nfor _ in range(600):\n    print('still here', flush=True)\n    time.sleep(0.1)\n"
    code = (
        "import subprocess, sys\n"
        f"p = subprocess.Popen([sys.executable, '-c', {inner!r}])\n"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "print('parent done', flush=True)\n"
    )
    t0 = time.monotonic()
    r = run_check(py("leaky", code, timeout_ms=60_000), tmp_path, tmp_path / "v.log", 60_000)
    assert time.monotonic() - t0 < 8  # ends when the root exits, not after 60 s
    assert r["passed"] is True and r["exitCode"] == 0 and "parent done" in r["outputTail"]
    assert dead(int(pidfile.read_text()))  # its process group was killed


def test_setsid_grandchild_holding_the_output_open_cannot_hang_the_round(tmp_path: Path) -> None:
    pidfile = tmp_path / "gc.pid"
    inner = "import time\nfor _ in range(600):\n    print('daemon', flush=True)\n    time.sleep(0.1)\n"
    code = (
        "import subprocess, sys\n"
        f"p = subprocess.Popen([sys.executable, '-c', {inner!r}], start_new_session=True)\n"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "print('parent done', flush=True)\n"
    )
    t0 = time.monotonic()
    try:
        r = run_check(py("daemonizes", code, timeout_ms=60_000), tmp_path, tmp_path / "v.log", 60_000)
        assert time.monotonic() - t0 < 8
        assert r["passed"] is True and "parent done" in r["outputTail"]
        # it left the tree before the root exited, but carries the run's environment tag: it is gone too
        gc = int(pidfile.read_text())
        assert not pid_running(gc)
    finally:  # belt and braces: never leave the daemon behind even if the assertion fails
        try:
            os.kill(int(pidfile.read_text()), signal.SIGKILL)
        except (OSError, ValueError):
            pass


def test_200mb_output_is_streamed_to_disk(tmp_path: Path) -> None:
    log = tmp_path / "verify-0.log"
    code = (
        "import sys\nchunk = b'y' * 1023 + b'\\n'\nw = sys.stdout.buffer.write\n"
        "for _ in range(200 * 1024):\n    w(chunk)\n"
        "w(b'THE-END\\n==== 3 passed in 0.10s ====\\n')\n"
    )
    me = psutil.Process()
    base_rss = me.memory_info().rss
    base_max = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    peak = [base_rss]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], me.memory_info().rss)
            time.sleep(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    t0 = time.monotonic()
    try:
        r = run_check(py("flood-tests", code), tmp_path, log, 120_000)
        elapsed = time.monotonic() - t0
    finally:
        stop.set()
        sampler.join()
    growth = peak[0] - base_rss
    max_growth = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base_max
    try:
        assert r["passed"] is True and r["exitCode"] == 0
        assert len(r["outputTail"]) <= OUTPUT_TAIL_CHARS and r["outputTail"].rstrip().endswith("==== 3 passed in 0.10s ====")
        assert r["tests"]["passed"] == 3  # parsed from the bounded tail
        # streamed to disk whole, then compacted to head + tail in verify-N.log
        text = log.read_bytes()
        assert 9 << 20 <= len(text) < 10 << 20 and b"bytes of output left out" in text
        assert b"THE-END" in text[-(1 << 20):]  # the tail is what was kept
        assert growth < 100 * 2**20 and max_growth < 100 * 2**20, (growth, max_growth)
        assert elapsed < 30
        print(f"200 MB check: {elapsed:.2f}s, peak RSS growth {growth / 2**20:.1f} MB (ru_maxrss growth {max_growth / 2**20:.1f} MB)")
    finally:
        log.unlink(missing_ok=True)  # pytest keeps old tmp dirs: don't leave 200 MB behind


def test_invalid_utf8_in_a_test_check(tmp_path: Path) -> None:
    code = "import sys; sys.stdout.buffer.write(b'\\xff\\xfe\\xc3 junk\\n' * 1000 + b'tail \\x80\\n==== 2 passed in 0.01s ====\\n')"
    r = run_check(py("unit-tests", code), tmp_path, tmp_path / "v.log", 10_000)
    assert r["passed"] is True and "\ufffd" in r["outputTail"]
    assert r["tests"]["passed"] == 2


def test_stdin_is_at_eof(tmp_path: Path) -> None:
    t0 = time.monotonic()
    r = run_check(py("reads-stdin", "import sys; data = sys.stdin.read(); print('got', len(data))"), tmp_path,
                  tmp_path / "v.log", 20_000)
    assert r["passed"] is True and r["outputTail"].strip() == "got 0"
    assert time.monotonic() - t0 < 5


def test_spawn_failures_are_explained(tmp_path: Path) -> None:
    log = tmp_path / "v.log"
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    (tmp_path / "adir").mkdir()
    bad_interp = tmp_path / "bad.sh"
    bad_interp.write_text("#!/nonexistent/interpreter\necho hi\n")
    bad_interp.chmod(0o755)
    cases = {
        "./run.sh": "cannot start command: './run.sh' is not executable (",
        str(script): f"cannot start command: {str(script)!r} is not executable (",
        "./missing.sh": "cannot start command: './missing.sh' does not exist (",
        "./adir": "cannot start command: './adir' is a directory (",
        "./bad.sh": "cannot start command: './bad.sh' could not be executed (bad #! interpreter",
        "no-such-tool-xyz": "cannot start command: 'no-such-tool-xyz' was not found on PATH (",
    }
    for argv0, prefix in cases.items():
        r = run_check(CheckDef.make("unit-tests", [argv0]), tmp_path, log, 10_000)
        assert r["passed"] is False and r["exitCode"] is None and r["timeout"] is False, argv0
        assert r["reason"].startswith(prefix), (argv0, r["reason"])
        assert "[spawn-error]" in r["outputTail"] and "tests" not in r
    r = run_check(CheckDef.make("x", ["true"]), tmp_path / "gone", log, 10_000)
    assert r["reason"].startswith("cannot start command: the project directory ")


def test_non_positive_timeouts_never_disable_the_timeout(tmp_path: Path) -> None:
    for bad in (0, -5):
        t0 = time.monotonic()
        r = run_check(py("sleepy", "import time; time.sleep(30)", timeout_ms=bad), tmp_path, tmp_path / "v.log", 700)
        assert r["timeout"] is True and time.monotonic() - t0 < 8, bad
    # the config schema rejects them before the runner sees them
    for bad in (0, -1):
        with pytest.raises(ValidationError):
            to_check_def({"name": "x", "cmd": ["true"], "timeoutMs": bad})


def test_project_tool_dirs_are_prepended_to_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TS_RUNNER_MARKER", "inherited")
    proj = tmp_path / "proj"
    venv_bin = proj / ".venv" / "bin"
    node_bin = proj / "node_modules" / ".bin"
    for d, tools in ((venv_bin, ("venvtool", "dup")), (node_bin, ("nodetool", "dup"))):
        d.mkdir(parents=True)
        for tool in tools:
            p = d / tool
            p.write_text(f"#!/bin/sh\necho {tool} from {d.parent.name} $TS_RUNNER_MARKER\n")
            p.chmod(0o755)
    log = tmp_path / "v.log"
    assert run_check(CheckDef.make("a", ["venvtool"]), proj, log, 10_000)["outputTail"].strip() == "venvtool from .venv inherited"
    assert run_check(CheckDef.make("b", ["nodetool"]), proj, log, 10_000)["outputTail"].strip() == "nodetool from node_modules inherited"
    assert run_check(CheckDef.make("c", ["dup"]), proj, log, 10_000)["outputTail"].strip() == "dup from .venv inherited"
    env = check_env(proj)
    assert env["PATH"].split(os.pathsep)[:3] == [str(venv_bin), str(node_bin), os.environ["PATH"].split(os.pathsep)[0]]
    # no such dirs: the server's environment unchanged
    assert check_env(tmp_path) == dict(os.environ)
    assert json.dumps(check_env(tmp_path, {"A": "1"})) == '{"A": "1"}'


def test_a_runaway_writer_is_stopped_at_the_output_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # pins a finding: `yes` as a check wrote 1.4 GB in 3 s into verify-0.log
    from tianshu_mcp.acceptance import runner

    monkeypatch.setattr(runner, "MAX_OUTPUT_BYTES", 8 << 20)
    t0 = time.monotonic()
    r = run_check(CheckDef.make("yes", ["yes"], timeout_ms=60_000), tmp_path, tmp_path / "verify-0.log", 60_000)
    assert time.monotonic() - t0 < 10
    assert r["passed"] is False and r["exitCode"] is None and r["aborted"] is False and r["timeout"] is False
    assert r["reason"].startswith("output limit") and (tmp_path / "verify-0.log").stat().st_size < 64 << 20


def test_ansi_colours_are_stripped_from_the_tail(tmp_path: Path) -> None:
    code = "print('\\x1b[31mred\\x1b[0m plain')"
    r = run_check(CheckDef.make("colour", [sys.executable, "-c", code]), tmp_path, tmp_path / "v.log", 60_000)
    assert "red plain" in r["outputTail"] and "\x1b" not in r["outputTail"]
