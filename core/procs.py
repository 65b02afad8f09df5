"""Child processes we start: own session, stdin at EOF, output to a file, tree kill (docs/architecture.md §5).

Every agent, check or helper process is started through :func:`spawn`:

* argv only, never a shell;
* ``start_new_session=True``, so its process group is its own and killing it never hits us;
* stdin is ``/dev/null`` (or the prompt text, written then closed, when a profile asks for stdin);
* stdout and stderr go to a file opened in append mode, never to a pipe a grandchild could hold
  open and hang us;
* a :class:`ProcRecord` ``{pid, pgid, createTime}`` identifies it, so a later kill (even from
  another process, via the record saved in the task dir) never hits a reused pid.

:func:`kill_tree` sends SIGTERM to the group and every known descendant, then SIGKILL to whatever
is left after a grace period; it works on TERM-trapping and ``setsid``'d descendants and never
raises.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import select
import signal
import subprocess
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

import psutil

from .childenv import scrub

log = logging.getLogger("tianshu_mcp")

TAG_ENV = "TIANSHU_MCP_PROC_TAG"


@dataclass(frozen=True)
class ProcRecord:
    """Identity of a started process: ``pid``, process group ``pgid``, ``createTime`` (epoch s)
    and ``tag``, a random value in the environment (``TIANSHU_MCP_PROC_TAG``) that every
    descendant inherits, so a ``setsid``'d, orphaned grandchild is still recognised as ours."""

    pid: int
    pgid: int
    createTime: float  # noqa: N815 (wire/json name)
    tag: str = ""

    def to_json(self) -> dict[str, float | int | str]:
        """Return ``{"pid", "pgid", "createTime", "tag"}``."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> "ProcRecord":
        """Inverse of :meth:`to_json`. Raises KeyError/TypeError/ValueError on a bad record."""
        return cls(int(data["pid"]), int(data["pgid"]), float(data["createTime"]), str(data.get("tag") or ""))  # type: ignore[arg-type]


@dataclass
class RunResult:
    """Outcome of :func:`run_process`.

    ``exit_code`` is None when the process could not start, timed out, was killed or was stopped
    for writing more than its output limit (``output_limited``);
    ``duration_ms`` is wall time in milliseconds; ``error`` carries a spawn failure's text.
    """

    exit_code: int | None
    timed_out: bool
    killed: bool
    duration_ms: int
    error: str | None = None
    output_limited: bool = False

    @property
    def ok(self) -> bool:
        """True when the process ran to exit code 0 on its own."""
        return (self.exit_code == 0 and not self.timed_out and not self.killed and self.error is None
                and not self.output_limited)


def stop_requested(should_stop: Callable[[], bool] | None) -> bool:
    """Ask a cancellation probe; a missing probe or one that raises means "go on" (False)."""
    if should_stop is None:
        return False
    try:
        return bool(should_stop())
    except Exception:  # noqa: BLE001 - a broken probe must not stop or crash a run
        return False


def spawn(
    argv: Sequence[str],
    *,
    cwd: str | os.PathLike[str],
    log_path: str | os.PathLike[str],
    env: Mapping[str, str] | None = None,
    stdin_text: str | None = None,
    header: str | None = None,
    stderr_path: str | os.PathLike[str] | None = None,
) -> tuple[subprocess.Popen[bytes], ProcRecord]:
    """Start ``argv`` in its own session with output appended to ``log_path``.

    Args:
        argv: program and arguments (no shell).
        cwd: working directory.
        log_path: file receiving stdout and stderr (created, appended to).
        env: full environment for the child (default: this process's environment); scrubbed of
            our Prefect credentials and git location variables (:mod:`.childenv`).
        stdin_text: when given, written to the child's stdin, which is then closed; otherwise the
            child's stdin is ``/dev/null`` (at EOF).
        header: a line written to the log before the child's output.
        stderr_path: when given, stderr goes to this file (created, appended to) instead of the log.

    Returns:
        ``(popen, record)``.

    Raises:
        OSError: the program cannot be started (not found, not executable, bad cwd).
    """
    path = Path(log_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    child_env, tag = tagged_env(env)
    with open(path, "ab") as out, (open(stderr_path, "ab") if stderr_path is not None else contextlib.nullcontext()) as err:
        if header:
            out.write(header.encode("utf-8", errors="replace"))
            out.flush()
        proc = subprocess.Popen(  # noqa: S603 - argv, never a shell
            list(argv),
            cwd=os.fspath(cwd),
            env=child_env,
            stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
            stdout=out,
            stderr=err if err is not None else subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    if stdin_text is not None and proc.stdin is not None:
        threading.Thread(target=_feed_stdin, args=(proc, stdin_text), daemon=True).start()
    return proc, record_of(proc.pid, tag)


def tagged_env(env: Mapping[str, str] | None = None) -> tuple[dict[str, str], str]:
    """The environment of a child we start and its tag: ``env`` (default: ours) scrubbed of our
    Prefect credentials and git location variables (:mod:`.childenv`), plus a fresh
    :data:`TAG_ENV` value that every descendant inherits. Returns ``(env, tag)``."""
    tag = secrets.token_hex(8)
    child_env = scrub(env)
    child_env[TAG_ENV] = tag
    return child_env, tag


def record_of(pid: int, tag: str = "") -> ProcRecord:
    """The :class:`ProcRecord` of a child started in its own session (pgid = pid)."""
    try:
        create_time = psutil.Process(pid).create_time()
    except psutil.Error:
        create_time = 0.0
    return ProcRecord(pid, pid, create_time, tag)


def _feed_stdin(proc: subprocess.Popen[bytes], text: str) -> None:
    assert proc.stdin is not None
    try:
        proc.stdin.write(text.encode("utf-8"))
    except OSError:
        pass
    finally:
        try:
            proc.stdin.close()
        except OSError:
            pass


def members_of(record: ProcRecord) -> list[psutil.Process]:
    """Every live process belonging to the record: the root, its descendants, its group/session."""
    found: dict[int, psutil.Process] = {}
    try:
        root = psutil.Process(record.pid)
        if not record.createTime or abs(root.create_time() - record.createTime) < 0.05:
            found[root.pid] = root
            for child in root.children(recursive=True):
                found[child.pid] = child
    except psutil.Error:
        pass
    me = os.getpid()
    my_pgid = os.getpgid(0)
    for proc in psutil.process_iter():
        if proc.pid in found or proc.pid == me:
            continue
        try:
            pgid = os.getpgid(proc.pid)
            sid = os.getsid(proc.pid)
        except OSError:
            continue
        if (record.pgid != my_pgid and (pgid == record.pgid or sid == record.pgid)) or _tagged(proc, record.tag):
            found[proc.pid] = proc
            try:
                for child in proc.children(recursive=True):
                    found.setdefault(child.pid, child)
            except psutil.Error:
                pass
    found.pop(me, None)
    return list(found.values())


def _tagged(proc: psutil.Process, tag: str) -> bool:
    """True when ``proc`` inherited the record's environment tag."""
    if not tag:
        return False
    try:
        return proc.environ().get(TAG_ENV) == tag
    except psutil.Error:
        return False


def kill_tree(record: ProcRecord, grace_s: float = 0.8, total_s: float = 3.0,
              extra: Iterable[psutil.Process] = ()) -> bool:
    """Kill the process tree of ``record``: SIGTERM, then SIGKILL after ``grace_s`` seconds.

    Targets the recorded root (only if its create time still matches, so a reused pid is never
    hit), all its descendants, every process in its process group or session, and ``extra``
    (descendants seen earlier that may have left the tree, e.g. ``setsid``'d and orphaned).
    Never kills this process or a group it shares. Never raises.

    Returns:
        True when nothing of the tree is alive any more (within ``total_s`` seconds).
    """
    deadline = time.monotonic() + total_s
    try:
        members = members_of(record)
        known_pids = {p.pid for p in members}
        members += [p for p in extra if p.pid not in known_pids and is_alive(p)]
        if not members:
            return True
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for proc in members:
                try:
                    proc.send_signal(sig)
                except psutil.Error:
                    pass
            wait_until = time.monotonic() + (grace_s if sig == signal.SIGTERM else max(0.1, deadline - time.monotonic()))
            while time.monotonic() < wait_until and any(is_alive(p) for p in members):
                _reap(members)
                time.sleep(0.05)
            # keep what we already found (a setsid'd grandchild is no longer reachable once its
            # parent died) and add descendants forked meanwhile; is_running() checks create time
            known = {p.pid: p for p in members if is_alive(p)}
            for p in members_of(record):
                if is_alive(p):
                    known.setdefault(p.pid, p)
            members = list(known.values())
            if not members:
                return True
        return not any(is_alive(p) for p in members)
    except Exception as exc:  # noqa: BLE001 - a kill must never raise
        log.warning("kill_tree(%s) failed: %s", record.pid, exc)
        return False


def is_alive(proc: psutil.Process) -> bool:
    """True for a running process; a zombie (dead, not yet reaped) counts as dead."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _reap(procs_: list[psutil.Process]) -> None:
    """Reap those of ``procs_`` that are our own exited children (others are reaped by their parent)."""
    for proc in procs_:
        try:
            os.waitpid(proc.pid, os.WNOHANG)
        except ChildProcessError:
            pass
        except OSError:
            pass


def pid_alive(pid: int, create_time: float) -> bool:
    """True when ``pid`` runs, is no zombie and was created at ``create_time`` (epoch s, ±50 ms):
    a reused pid is not the process we recorded."""
    try:
        proc = psutil.Process(pid)
        return abs(proc.create_time() - create_time) < 0.05 and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def tree_alive(record: ProcRecord) -> bool:
    """True when any process of the record's tree (root, descendants, group) is still alive."""
    return any(is_alive(p) for p in members_of(record))


def wait_exit(proc: subprocess.Popen[bytes], timeout_s: float | None) -> bool:
    """Wait up to ``timeout_s`` s (None: no limit) for ``proc`` to exit; True when it did (and
    was reaped: ``returncode`` is set).

    Woken by the kernel at the exit through a pidfd (Linux ≥ 5.3), not by polling:
    ``Popen.wait(timeout)`` sleeps 0.5 ms doubling to 50 ms between checks, so a git call that
    took 3 ms was seen ≈ 1–2 ms late and a check or agent that ran a second up to 50 ms late,
    on every process of a task's path. Elsewhere it falls back to ``Popen.wait``."""
    if proc.returncode is not None:
        return True
    if timeout_s is None:
        proc.wait()
        return True
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd here, or the pid is gone (reaped elsewhere)
        try:
            proc.wait(timeout=max(0.0, timeout_s))
            return True
        except subprocess.TimeoutExpired:
            return False
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        if not poller.poll(max(0, int(timeout_s * 1000 + 0.999))):
            return False
    finally:
        os.close(fd)
    proc.wait()  # readable pidfd: the process has exited, this reaps it at once
    return True


def run_process(
    argv: Sequence[str],
    *,
    cwd: str | os.PathLike[str],
    log_path: str | os.PathLike[str],
    timeout_ms: int | None,
    env: Mapping[str, str] | None = None,
    stdin_text: str | None = None,
    header: str | None = None,
    should_stop: Callable[[], bool] | None = None,
    on_start: Callable[[ProcRecord], None] | None = None,
    poll_s: float = 0.1,
    max_output_bytes: int | None = None,
    stderr_path: str | os.PathLike[str] | None = None,
    trailer: bool = True,
) -> RunResult:
    """Run ``argv`` to completion under a timeout, killing its whole tree on timeout or stop.

    Args:
        timeout_ms: wall-clock limit in ms (None or ≤0: none). On expiry the tree is killed and
            ``timed_out`` is set.
        should_stop: polled every ``poll_s`` s; returning True kills the tree (``killed``).
        on_start: called with the :class:`ProcRecord` once the process is running (e.g. to
            persist it for a kill from another process).
        max_output_bytes: stop the tree once ``log_path`` (plus ``stderr_path``) grows past this
            many bytes (``output_limited``), so a runaway writer (``yes``) cannot fill the disk.
        trailer: append the ``[exit]`` trailer to the log (False: the log holds only the child's
            stdout, e.g. when its last line is parsed).
        Other args: see :func:`spawn`.

    Returns:
        A :class:`RunResult`; a spawn failure is reported in ``error`` (never raised). The
        trailer ``[exit] code=<c> (timeout)|(killed)| duration=<ms>ms`` is appended to the log.
    """
    start = time.monotonic()
    try:
        proc, record = spawn(argv, cwd=cwd, log_path=log_path, env=env, stdin_text=stdin_text, header=header,
                             stderr_path=stderr_path)
    except (OSError, ValueError) as exc:  # ValueError: a NUL in argv or env
        if trailer:
            _append(log_path, f"[spawn-error] {exc}\n")
        return RunResult(None, False, False, int((time.monotonic() - start) * 1000), str(exc))
    deadline = start + timeout_ms / 1000 if timeout_ms and timeout_ms > 0 else None
    timed_out = killed = limited = False
    seen: dict[int, psutil.Process] = {}  # descendants ever seen: a setsid'd orphan is still ours
    try:
        root = psutil.Process(proc.pid)
    except psutil.Error:
        root = None
    try:
        if on_start is not None:
            on_start(record)
        while True:
            # never wait past the deadline: a 1 ms limit is a 1 ms limit
            if wait_exit(proc, poll_s if deadline is None else max(0.0, min(poll_s, deadline - time.monotonic()))):
                break
            if root is not None:
                try:
                    for child in root.children(recursive=True):
                        seen.setdefault(child.pid, child)
                except psutil.Error:
                    pass
            if deadline is not None and time.monotonic() >= deadline:
                timed_out = True
                break
            if should_stop is not None and should_stop():
                killed = True
                break
            if max_output_bytes is not None and _size(log_path) + (_size(stderr_path) if stderr_path else 0) > max_output_bytes:
                limited = True
                break
    finally:
        if timed_out or killed or limited or proc.poll() is None:
            kill_tree(record, extra=seen.values())
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        else:
            # the root exited on its own: a background grandchild (in its group, or setsid'd and
            # seen earlier) must not linger
            kill_tree(record, grace_s=0.3, extra=seen.values())
    code = None if (timed_out or killed or limited) else proc.returncode
    duration = int((time.monotonic() - start) * 1000)
    mark = " (timeout)" if timed_out else " (killed)" if killed else " (output limit)" if limited else ""
    if trailer:
        _append(log_path, f"\n[exit] code={code if code is not None else 'null'}{mark} duration={duration}ms\n")
    return RunResult(code, timed_out, killed, duration, output_limited=limited)


def _size(path: str | os.PathLike[str]) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _append(path: str | os.PathLike[str], text: str) -> None:
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text)
    except OSError:
        pass


def save_record(path: str | os.PathLike[str], record: ProcRecord) -> None:
    """Persist ``record`` as JSON at ``path`` (atomic), so another process can kill the tree."""
    from .files import atomic_write_json

    atomic_write_json(path, record.to_json())


def kill_recorded(path: str | os.PathLike[str]) -> bool:
    """Kill the tree whose :class:`ProcRecord` was saved at ``path``; True when nothing survives.

    A missing or corrupt record means there is nothing to kill (True). Never raises.
    """
    from .files import read_json_safe

    data = read_json_safe(path)
    if not isinstance(data, dict):
        return True
    try:
        record = ProcRecord.from_json(data)
    except (KeyError, TypeError, ValueError):
        return True
    return kill_tree(record)


def recorded_alive(path: str | os.PathLike[str]) -> bool:
    """True when the process whose :class:`ProcRecord` was saved at ``path`` still runs (its pid
    with the recorded start time); a missing or corrupt record is False. Never raises."""
    from .files import read_json_safe

    data = read_json_safe(path)
    try:
        record = ProcRecord.from_json(data) if isinstance(data, dict) else None
    except (KeyError, TypeError, ValueError):
        return False
    return record is not None and pid_alive(record.pid, record.createTime)


def current_record() -> ProcRecord:
    """The :class:`ProcRecord` of this process."""
    return ProcRecord(os.getpid(), os.getpgid(0), psutil.Process().create_time())
