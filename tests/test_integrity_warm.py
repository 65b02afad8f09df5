"""The baseline run started with the task (docs/integrity.md, speed: design note 50).

Verification integrity compares a round's test checks with their results on the baseline. The flow
starts that baseline run when the task starts (:func:`tianshu_mcp.acceptance.baseline_warm
.warm_baseline_run`, in a child process: ``start_in_child``, from ``tasks/verify.start_baseline_run``),
while the agent works; the round reads it from the task's cache. Real git repositories, real pytest runs; the test suite's conftest
says where it ran (a line per run in ``$WARM_RUNS``) and, at the baseline, can be held until the
test lets it go, so the order of events is forced by the test, not by timing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Callable, Iterator

import psutil
import pytest
from integrity_helpers import PYTEST_CHECK, Task, edit, git, init_repo
from tianshu_mcp.acceptance.baseline_warm import WarmSpec, start_in_child, warm_baseline_run
from tianshu_mcp.acceptance.engine import VerifyRequest
from tianshu_mcp.acceptance.grading.baseline_runs import CACHE_FILE
from tianshu_mcp.acceptance.integrity.pycache import pycache_home
from tianshu_mcp.acceptance.pinning import load_pinned
from tianshu_mcp.core.forkclient import SOCKET_ENV

CONFTEST = '''import os, time
from pathlib import Path

_base = "tianshu-baseline-" in os.getcwd()
with open(os.environ["WARM_RUNS"], "a") as fh:
    fh.write(("baseline" if _base else "tree") + "\\n")
if os.environ.get("WARM_BYTECODE"):
    import sys
    with open(os.environ["WARM_BYTECODE"], "a") as fh:
        fh.write(f"{'baseline' if _base else 'tree'} {sys.flags.dont_write_bytecode} {sys.pycache_prefix}\\n")
if "TIANSHU_MCP_FORK_CLIENT_FD" in os.environ:  # a fork's connection is its own, never its checks'
    with open(os.environ["WARM_RUNS"], "a") as fh:
        fh.write("leaked-fd\\n")
if _base and os.environ.get("WARM_HOLD"):
    deadline = time.monotonic() + 120
    while not Path(os.environ["WARM_HOLD"]).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
'''
FILES = {
    "calc.py": "def add(a, b):\n    return a - b\n",
    "conftest.py": CONFTEST,
    "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
                          "def test_zero():\n    assert add(0, 0) == 0\n",
    ".gitignore": "__pycache__/\n",
}


def _repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hold: bool = False) -> tuple[Task, Path, Path]:
    runs, release = tmp_path / "runs.txt", tmp_path / "release"
    runs.write_text("")
    monkeypatch.setenv("WARM_RUNS", str(runs))
    if hold:
        monkeypatch.setenv("WARM_HOLD", str(release))
    repo = init_repo(tmp_path / "repo", FILES, [PYTEST_CHECK])
    return Task(repo, tmp_path, brief="Fix add() so that test_add passes."), runs, release


@pytest.fixture(scope="module")
def fork_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """A home's fork server (:mod:`tianshu_mcp.hosting.forkserver`), as the service runs one."""
    path = tmp_path_factory.mktemp("fork") / "engine.sock"
    proc = subprocess.Popen([sys.executable, "-m", "tianshu_mcp.hosting.forkserver", str(path), str(os.getpid())],
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait(lambda: path.exists() or proc.poll() is not None, "the fork server to listen")
        assert proc.poll() is None
        yield proc, path
    finally:
        proc.kill()
        proc.wait(30)


@pytest.fixture(params=["interpreter", "fork"])
def started_by(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int | None:
    """How ``start_in_child`` starts the child: a fresh interpreter (no fork server: in-process
    hosting, a scale-out worker; returns None), or a fork of the home's fork server (named in
    the environment as the service's flow runs have it; returns the server's pid)."""
    if request.param == "interpreter":
        monkeypatch.delenv(SOCKET_ENV, raising=False)
        return None
    server, path = request.getfixturevalue("fork_server")
    monkeypatch.setenv(SOCKET_ENV, str(path))
    return server.pid


def _early_run(runs: Path, task: Task) -> list[psutil.Process]:
    """The early run's processes: its checks carry this test's ``$WARM_RUNS``, and the child runs
    in the task's directory (a fork's ``/proc/<pid>/environ`` is the fork server's own)."""
    procs = []
    for p in psutil.process_iter():
        try:
            if p.pid != os.getpid() and (p.environ().get("WARM_RUNS") == str(runs) or p.cwd() == str(task.dir)):
                procs.append(p)
        except psutil.Error:
            pass
    return procs


def _request(task: Task, should_stop: Callable[[], bool] | None = None) -> VerifyRequest:
    return VerifyRequest(task_id="tsk_warm", project_path=str(task.project), task_dir=task.dir, round=0,
                         baseline=task.baseline, home=task.home, pinned_rules=load_pinned(task.dir),
                         should_stop=should_stop)


def _wait(cond: Callable[[], bool], what: str, deadline_s: float = 120.0) -> None:
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > deadline_s:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _baseline_procs(procs: list[psutil.Process]) -> list[psutil.Process]:
    """The test processes among ``procs`` that run in a baseline worktree."""
    out = []
    for p in procs:
        try:
            if "pytest" in " ".join(p.cmdline()) and "tianshu-baseline-" in p.cwd():
                out.append(p)
        except psutil.Error:
            pass
    return out


def _worktrees(task: Task) -> list[str]:
    return [ln for ln in git(task.project, "worktree", "list", "--porcelain").splitlines() if ln.startswith("worktree ")]


def _assert_nothing_left(task: Task, procs: list[psutil.Process]) -> None:
    """The early run's processes are gone, nothing is cached and only the main worktree is left."""
    _, alive = psutil.wait_procs(procs, timeout=30)
    assert alive == []
    assert not (task.dir / CACHE_FILE).exists()
    assert len(_worktrees(task)) == 1, _worktrees(task)


def _lines(runs: Path) -> list[str]:
    return runs.read_text().split()


def test_the_round_reads_the_baseline_run_started_with_the_task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The early run caches the baseline; the round then runs the tests once, on the agent's tree."""
    task, runs, _ = _repo(tmp_path, monkeypatch)
    warm_baseline_run(_request(task))
    assert _lines(runs) == ["baseline"]
    cache = json.loads((task.dir / CACHE_FILE).read_text())
    assert [json.loads(k)[0] for k in cache["checks"]] == ["tests"]
    edit(task.project / "calc.py", "a - b", "a + b")
    out = task.judge()
    assert out.passed, out.blocking_issues
    assert _lines(runs) == ["baseline", "tree"]  # no second baseline run
    inv = out.report["integrity"]["inventory"]
    assert inv and inv[0]["removed"] == [], inv


def test_a_round_that_starts_during_the_early_run_waits_for_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent ended before the baseline run: the round's integrity session waits on the task's
    lock and reads the early run's result instead of running the baseline a second time."""
    task, runs, release = _repo(tmp_path, monkeypatch, hold=True)
    warm = threading.Thread(target=warm_baseline_run, args=(_request(task),), daemon=True)
    warm.start()
    _wait(lambda: "baseline" in _lines(runs), "the early baseline run to start")
    edit(task.project / "calc.py", "a - b", "a + b")
    result: dict[str, object] = {}
    judge = threading.Thread(target=lambda: result.setdefault("out", task.judge()), daemon=True)
    judge.start()
    _wait(lambda: "tree" in _lines(runs), "the round's own checks to run")
    assert judge.is_alive() and _lines(runs) == ["baseline", "tree"]  # the round waits for the baseline
    release.touch()
    judge.join(180)
    warm.join(180)
    assert not judge.is_alive() and not warm.is_alive()
    out = result["out"]
    assert out.passed, out.blocking_issues  # type: ignore[attr-defined]
    assert _lines(runs) == ["baseline", "tree"]


def test_a_stopped_early_run_leaves_no_process_worktree_or_cache(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The task ends before its first round (the agent failed, a cancel): the early run stops, its
    test processes and worktree are gone and nothing half-run is cached; the round runs it itself."""
    task, runs, release = _repo(tmp_path, monkeypatch, hold=True)
    stop = threading.Event()
    warm = threading.Thread(target=warm_baseline_run, args=(_request(task, stop.is_set),), daemon=True)
    warm.start()
    _wait(lambda: "baseline" in _lines(runs), "the early baseline run to start")
    held = _baseline_procs(psutil.Process(os.getpid()).children(recursive=True))
    assert held
    stop.set()
    warm.join(120)
    assert not warm.is_alive()
    _assert_nothing_left(task, held)
    monkeypatch.delenv("WARM_HOLD")
    edit(task.project / "calc.py", "a - b", "a + b")
    out = task.judge()
    assert out.passed, out.blocking_issues
    assert Counter(_lines(runs)) == {"baseline": 2, "tree": 1}  # the round ran the baseline itself
    release.touch()


def test_the_baseline_run_keeps_bytecode_in_verifications_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Like the round's own runs, the baseline run writes and reads bytecode in verification's
    cache only, even where the environment switches writing off (many containers and CI images:
    every run then compiled pytest and its plugins from source, twice the round's time)."""
    task, _runs, _ = _repo(tmp_path, monkeypatch)
    flags = tmp_path / "bytecode.txt"
    monkeypatch.setenv("WARM_BYTECODE", str(flags))
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    warm_baseline_run(_request(task))
    edit(task.project / "calc.py", "a - b", "a + b")
    assert task.judge().passed
    lines = sorted(flags.read_text().splitlines())
    assert [ln.split()[:2] for ln in lines] == [["baseline", "0"], ["tree", "0"]], lines
    assert lines[0].split()[2] == str(pycache_home())
    assert all(Path(ln.split()[2]).is_dir() for ln in lines)


def test_nothing_runs_early_when_integrity_is_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    task, runs, _ = _repo(tmp_path, monkeypatch)
    req = _request(task)
    req.acceptance_override = {"testIntegrity": "off"}
    assert warm_baseline_run(req) == []
    assert _lines(runs) == [] and not (task.dir / CACHE_FILE).exists()


REAPER_SCRIPT = '''
import json, sys, threading, time
from pathlib import Path
from tianshu_mcp.core.reaper import become_subreaper, reap_orphans
from tianshu_mcp.acceptance.baseline_warm import WarmSpec, start_in_child

assert become_subreaper()
spec, runs, release = WarmSpec.model_validate_json(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
stop = threading.Event()
t = start_in_child(spec, stop)
deadline = time.monotonic() + 120
while "baseline" not in runs.read_text().split():
    assert time.monotonic() < deadline, "the early run never started"
    time.sleep(0.05)
killed = reap_orphans()  # what the end of an agent's round does in a flow-run process
release.touch()
t.join(180)
print(json.dumps({"killed": killed, "alive": t.is_alive()}))
'''


def test_the_early_run_survives_the_reaping_at_the_end_of_an_agents_round(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch,
                                                                         started_by: int | None) -> None:
    """In a flow-run process (a subreaper that kills what is left below it when an agent's round
    ends), the early run is a child process the reaper spares: its baseline is cached whole, not
    a run cut off mid-way (which read as "no test count")."""
    task, runs, release = _repo(tmp_path, monkeypatch, hold=True)
    spec = WarmSpec.of(_request(task))
    r = subprocess.run([sys.executable, "-c", REAPER_SCRIPT, spec.model_dump_json(), str(runs), str(release)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout.strip().splitlines()[-1]) == {"killed": 0, "alive": False}
    cache = json.loads((task.dir / CACHE_FILE).read_text())
    (entry,) = cache["checks"].values()
    assert (entry["status"], entry["counts"]["passed"], entry["counts"]["failed"]) == ("failed", 1, 1), entry
    assert _lines(runs) == ["baseline"]


def test_stopping_the_child_ends_its_checks_and_removes_its_worktree(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     started_by: int | None) -> None:
    """The flow run ends before its first round (``stop_baseline_run``): the child is asked to stop,
    ends its held test run, removes its worktree and caches nothing; no process of it is left.
    With a fork server the child is a fork of it, not a fresh interpreter below this process."""
    task, runs, release = _repo(tmp_path, monkeypatch, hold=True)
    stop = threading.Event()
    t = start_in_child(WarmSpec.of(_request(task)), stop)
    _wait(lambda: "baseline" in _lines(runs), "the early baseline run to start")
    (child,) = [p for p in _early_run(runs, task) if p.ppid() == (started_by or os.getpid())]
    assert ("baseline_warm" in " ".join(child.cmdline())) is (started_by is None)
    mine = [child, *child.children(recursive=True)]
    assert _baseline_procs(mine)
    stop.set()
    t.join(120)
    assert not t.is_alive()
    _assert_nothing_left(task, mine)  # the worktree removed by the child itself, not left for a later sweep
    release.touch()


ORPHAN_SCRIPT = '''
import os, sys, threading, time
from pathlib import Path
from tianshu_mcp.acceptance.baseline_warm import WarmSpec, start_in_child

spec, runs = WarmSpec.model_validate_json(sys.argv[1]), Path(sys.argv[2])
start_in_child(spec, threading.Event())
deadline = time.monotonic() + 120
while "baseline" not in runs.read_text().split():
    assert time.monotonic() < deadline, "the early run never started"
    time.sleep(0.05)
os._exit(0)  # the flow-run process ends without waiting for it (stop_baseline_run(timeout_s=0), a crash)
'''


def test_the_child_cleans_up_by_itself_when_the_flow_run_process_is_gone(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch,
                                                                         started_by: int | None) -> None:
    task, runs, release = _repo(tmp_path, monkeypatch, hold=True)
    spec = WarmSpec.of(_request(task))
    r = subprocess.run([sys.executable, "-c", ORPHAN_SCRIPT, spec.model_dump_json(), str(runs)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]

    def gone() -> bool:
        return not _early_run(runs, task) and len(_worktrees(task)) == 1

    _wait(gone, "the orphaned early run to stop and remove its worktree")
    assert not (task.dir / CACHE_FILE).exists()
    release.touch()
