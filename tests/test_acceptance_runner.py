"""acceptance.runner: real subprocess checks (20-acceptance §3.2–§3.3). No mocks."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import psutil

from tianshu_mcp.acceptance.config import CheckDef
from tianshu_mcp.acceptance.runner import (
    SKIP_CANCELLED,
    SKIP_EMPTY,
    SKIP_EXPLICIT,
    ZERO_TEST_REASON,
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
    assert list(r) == ["name", "cmd", "passed", "durationMs", "exitCode", "outputTail", "timeout", "aborted"]
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
    assert r["reason"].startswith("cannot start command: ")
    assert "definitely-not-a-real-binary-xyz" in r["reason"]
    assert "[spawn-error]" in r["outputTail"]


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
    r = run_check(CheckDef.make("unit-tests", [PY, "-m", "unittest"]), proj, tmp_path / "verify-0.log", 30_000)
    assert r["passed"] is True and "Ran 1 test" in r["outputTail"]


def test_huge_output_tail_is_bounded(tmp_path: Path) -> None:
    log = tmp_path / "verify-0.log"
    code = "import sys\nchunk = 'x' * 1023 + '\\n'\nfor _ in range(6 * 1024):\n    sys.stdout.write(chunk)\nprint('THE-END')\n"
    r = run_check(py("noisy", code), tmp_path, log, 60_000)
    assert r["passed"] is True
    assert len(r["outputTail"]) <= 4000 and r["outputTail"].rstrip().endswith("THE-END")
    assert log.stat().st_size > 6 * 1024 * 1024


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
