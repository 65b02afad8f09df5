"""The baseline run started with the task, while the agent works (docs/integrity.md; design note 50).

Verification integrity compares a round with the test checks' results on the baseline. Run
inside the first round, that baseline run competes with the round's own checks for the
machine's cores; started when the task starts, it is done (and cached per task) by the time the
agent has finished.

The flow-run process runs it in a process of its own (:func:`start_in_child`, :func:`main`):
it must outlive the reaping at the end of each agent's round and, once the flow run is gone,
still stop its checks and remove its worktree. Where the home's fork server listens (the
service's flow runs), the child is a fork of that warm interpreter (:mod:`...core.forkclient`),
which has the acceptance engine imported already: a fresh interpreter took 0.55 s quiet and up
to 0.9 s beside the round's checks to import it, and with a quick agent the first round waited
for the baseline run that long (docs/design-notes.md, note 59). Elsewhere (in-process hosting, a
scale-out worker) it is ``python -m`` this module, a child of the flow-run process held by
:func:`...core.reaper.keep_alive`, so the reaping spares its tree. Either way the child ends by
itself when the flow-run process goes away (:func:`...core.forkclient.client_gone`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict

from ..core import forkclient
from ..core.procs import ProcRecord, kill_tree, record_of, run_process, tagged_env
from ..core.reaper import keep_alive, release
from .config import resolve_checks
from .engine import VerifyRequest, integrity_policy
from .git import Baseline
from .grading.baseline_runs import run_baseline_checks
from .integrity.judge import test_check_indices
from .integrity.models import IntegrityPolicy
from .pinning import load_pinned

__all__ = ["WarmSpec", "main", "start_in_child", "warm_baseline_run"]

log = logging.getLogger("tianshu_mcp")

STOP_GRACE_S = 15.0
"""After a stop, how long the child has to end its checks and remove its worktree before its tree is killed."""
LOG_FILE = "baseline-warm.log"
"""The child's own output in the task directory (the checks' output goes to ``baseline-checks.log``)."""
MAIN = "tianshu_mcp.acceptance.baseline_warm:main"
"""What a fork of the fork server runs (:func:`main`)."""


class WarmSpec(BaseModel):
    """What the child needs to rebuild the round's :class:`VerifyRequest` (JSON on its stdin).

    The pinned rules are read from ``task_dir`` again (:func:`.pinning.load_pinned`)."""

    model_config = ConfigDict(extra="forbid")

    task_id: str
    project_path: str
    task_dir: str
    baseline_dir: str | None = None
    baseline: dict[str, Any]
    home: str
    acceptance_override: dict[str, Any] | None = None
    checks_mode: str = "append"
    project_verify: list[dict[str, Any]] | None = None
    verify_command_timeout_ms: int = 300_000
    verify_concurrency: int = 2

    @classmethod
    def of(cls, req: VerifyRequest) -> WarmSpec:
        """The spec of ``req`` (its extra checks, agent run and holdout checks play no part)."""
        return cls(task_id=req.task_id, project_path=str(req.project_path), task_dir=str(req.task_dir),
                   baseline_dir=str(req.baseline_dir) if req.baseline_dir is not None else None,
                   baseline=req.baseline.model_dump(by_alias=True, mode="json") if req.baseline else {},
                   home=str(req.home), acceptance_override=dict(req.acceptance_override)
                   if req.acceptance_override is not None else None, checks_mode=str(req.checks_mode),
                   project_verify=[dict(v) for v in req.project_verify if isinstance(v, dict)]
                   if req.project_verify is not None else None,
                   verify_command_timeout_ms=req.verify_command_timeout_ms,
                   verify_concurrency=req.verify_concurrency)

    def request(self, should_stop: Callable[[], bool] | None = None) -> VerifyRequest:
        """The :class:`VerifyRequest` of round 0 of the task."""
        return VerifyRequest(
            task_id=self.task_id, project_path=self.project_path, task_dir=Path(self.task_dir), round=0,
            baseline=Baseline.model_validate(self.baseline), home=Path(self.home),
            acceptance_override=self.acceptance_override, checks_mode=self.checks_mode,
            project_verify=self.project_verify, verify_command_timeout_ms=self.verify_command_timeout_ms,
            verify_concurrency=self.verify_concurrency, should_stop=should_stop,
            baseline_dir=Path(self.baseline_dir) if self.baseline_dir else None,
            pinned_rules=load_pinned(self.task_dir))


def start_in_child(spec: WarmSpec, stop: threading.Event) -> threading.Thread:
    """Run :func:`warm_baseline_run` for ``spec`` in a process of its own (the spec on its stdin),
    watched by a daemon thread of this process, which is returned. The process is a fork of the
    home's fork server when this process's environment names one that answers
    (:data:`...core.forkclient.SOCKET_ENV`), else ``python -m`` this module, whose tree
    :func:`...core.reaper.reap_orphans` spares while it runs. Setting ``stop`` sends the child
    SIGTERM (it stops its checks and removes its worktree) and kills its whole tree
    :data:`STOP_GRACE_S` s later if it is still there. Output: ``<task_dir>/baseline-warm.log``."""
    asked: list[float] = []

    def stop_now(pid: int) -> bool:
        """Whether to kill the tree now; sends the SIGTERM first (``pid``: the child's)."""
        if not stop.is_set():
            return False
        if not asked:
            asked.append(time.monotonic())
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
        return time.monotonic() - asked[0] > STOP_GRACE_S

    path = os.environ.get(forkclient.SOCKET_ENV)
    forked = _fork(path, spec) if path else None
    if forked is not None:
        t = threading.Thread(target=_watch_fork, args=(spec, *forked, stop_now), daemon=True,
                             name=f"baseline-run-{spec.task_id}")
        t.start()
        return t
    held: list[ProcRecord] = []

    def started(record: ProcRecord) -> None:
        keep_alive(record)
        held.append(record)

    def watch() -> None:
        try:
            run_process([sys.executable, "-m", __name__], cwd=spec.task_dir, log_path=Path(spec.task_dir) / LOG_FILE,
                        timeout_ms=None, stdin_text=spec.model_dump_json(), poll_s=0.2, on_start=started,
                        should_stop=lambda: bool(held) and stop_now(held[0].pid))
        except Exception as exc:  # noqa: BLE001 - the first round runs the baseline itself
            log.warning("the early baseline run of %s failed: %s", spec.task_id, exc)
        finally:
            for record in held:
                release(record)

    t = threading.Thread(target=watch, name=f"baseline-run-{spec.task_id}", daemon=True)
    t.start()
    return t


def _fork(path: str, spec: WarmSpec) -> tuple[socket.socket, ProcRecord] | None:
    """Ask the fork server at ``path`` for a child running :func:`main` on ``spec`` (stdin: a
    pipe this process fills; stdout and stderr: :data:`LOG_FILE`); its connection and record, or
    None when no fork server took the request (nothing was started then)."""
    conn = forkclient.connect(path, timeout_s=5.0)
    if conn is None:
        return None
    env, tag = tagged_env()
    read_end, write_end = os.pipe()
    try:
        log_fd = os.open(Path(spec.task_dir) / LOG_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError:
        for fd in (read_end, write_end):
            os.close(fd)
        conn.close()
        return None
    try:
        forkclient.send_request(conn, env, spec.task_dir, [read_end, log_fd, log_fd], main=MAIN)
        pid = forkclient.read_pid(conn)
    except (OSError, ValueError) as exc:
        log.debug("the fork server did not start the early baseline run of %s: %s", spec.task_id, exc)
        pid = None
    finally:
        for fd in (read_end, log_fd):
            os.close(fd)
    if pid is None:
        os.close(write_end)
        conn.close()
        return None
    threading.Thread(target=_feed, args=(write_end, spec.model_dump_json().encode()), daemon=True).start()
    conn.settimeout(None)
    return conn, record_of(pid, tag)


def _feed(fd: int, data: bytes) -> None:
    """Write ``data`` to the pipe ``fd`` and close it (the child may end before reading it all)."""
    try:
        with open(fd, "wb") as pipe:
            pipe.write(data)
    except OSError:
        pass


def _watch_fork(spec: WarmSpec, conn: socket.socket, record: ProcRecord, stop_now: Callable[[int], bool]) -> None:
    """Wait for the forked child's wait status (the fork server's last answer on ``conn``);
    on a stop, its SIGTERM and, :data:`STOP_GRACE_S` s later, the kill of its tree (a child of
    the fork server in a session of its own, its checks tagged: :func:`...core.procs.kill_tree`)."""
    try:
        while True:
            ready, _, _ = select.select([conn], [], [], 0.2)
            if ready:
                data = forkclient.recv_exact(conn, 4)
                code = os.waitstatus_to_exitcode(forkclient.decode_status(data)) if data is not None else 0
                if code != 0:
                    log.warning("the early baseline run of %s exited with %s (see %s)", spec.task_id, code, LOG_FILE)
                return
            if stop_now(record.pid):
                kill_tree(record)
                return
    finally:
        conn.close()


def warm_baseline_run(req: VerifyRequest) -> list[str]:
    """Run the round's test checks on the baseline now, while the agent works (docs/integrity.md, speed).

    Resolves the checks as :func:`verify_round` will (the same layers, pinned rules and extra
    checks of ``req``), and when verification integrity will judge the round, runs the test checks
    (:func:`.integrity.judge.test_check_indices`) on the baseline worktree through
    :func:`.grading.baseline_runs.run_baseline_checks`, which caches them per task: the first round's
    integrity session then reads the cache instead of running the suite a second time beside the
    round's checks. A round that starts before this run ends waits for it (the cache's file lock).

    Returns:
        The baseline run's notes; ``[]`` when nothing was to run. Never raises: a configuration
        error is left for the verify round to report, and a cancel (``req.should_stop``) stops it.
    """
    if req.baseline is None:
        return []
    try:
        resolved = resolve_checks(req.project_path, req.home, req.acceptance_override, extra_checks=req.extra_checks,
                                  checks_mode=req.checks_mode, project_verify=req.project_verify,
                                  pinned=req.pinned_rules)
        if integrity_policy(req, resolved, req.baseline, []) is IntegrityPolicy.OFF:
            return []
        tests = [resolved.checks[i] for i in test_check_indices(resolved.checks, req.project_path)]
        if not tests:
            return []
        _entries, notes = run_baseline_checks(
            req.project_path, Path(req.baseline_dir) if req.baseline_dir is not None else Path(req.task_dir),
            req.baseline, tests, req.verify_command_timeout_ms or 300_000,
            resolved.verify_concurrency or req.verify_concurrency or 1, req.should_stop)
        return notes
    except Exception as exc:  # noqa: BLE001 - the round runs the baseline itself when this did not
        log.warning("the early baseline run of %s failed: %s", req.task_id, exc)
        return []


def main() -> int:
    """The child: the spec from stdin, the run, its notes as JSON on stderr; it stops on SIGTERM
    or when the process that started it is gone (:func:`...core.forkclient.client_gone`)."""
    gone = forkclient.client_gone()
    stopped = threading.Event()
    # a SIGTERM (the parent's stop) ends the checks through should_stop, so the worktree is removed
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    spec = WarmSpec.model_validate_json(sys.stdin.read())
    notes = warm_baseline_run(spec.request(lambda: stopped.is_set() or gone()))
    # stderr, never stdout (docs/architecture.md §6); both go to baseline-warm.log, the child has no MCP
    # stream
    sys.stderr.write(json.dumps({"notes": notes}, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
