"""Bounded probes of an agent's executable: its version (``query_info(type=profiles)``, docs/agent-adapters.md
§1) and its ``--help`` text (``agents doctor``, docs/real-agents.md §5).

:func:`run_probe` is the one place such a probe is run: ``<executable> <args>`` with stdin at EOF
(``/dev/null``), in its own session, stdout and stderr merged, for at most a given time (then the
whole process group is killed), cached per executable file (path, size and mtime, so an upgrade
is seen at once) and argument list. :func:`agent_version` keeps the first line that looks like a
version of ``--version``; :func:`agent_help` returns the help text. Which profiles may be probed
at all is decided by :mod:`.doctor` (never a custom command that might take ``--version`` for a
brief). Plain Python: no Prefect, no acceptance import.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
from dataclasses import dataclass

from ..core.childenv import scrub

VERSION_TIMEOUT_S = 5.0
"""How long ``--version`` may take, s (a CLI that starts a UI instead is killed)."""

HELP_TIMEOUT_S = 10.0
"""How long ``--help`` may take, s (a Node CLI loads its whole bundle first)."""

MAX_PROBE_OUTPUT_BYTES = 256 * 1024
"""How much of a probe's output is kept, bytes (a help text is a few KiB)."""

_VERSION = re.compile(r"\bv?(\d+\.\d+(?:\.\d+)?(?:[-+.][0-9A-Za-z.]+)?)\b")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")


@dataclass(frozen=True)
class ProbeResult:
    """What one probe printed.

    Attributes:
        output: stdout and stderr merged, decoded as UTF-8 (bad bytes replaced), ANSI colour
            codes removed, at most :data:`MAX_PROBE_OUTPUT_BYTES` of it.
        exit_code: the process's exit code (negative: killed by that signal); None when it timed out.
        timed_out: True when it ran longer than its timeout and its process group was killed.
    """

    output: str
    exit_code: int | None
    timed_out: bool


_Key = tuple[str, int, int, tuple[str, ...]]
_cache: dict[_Key, ProbeResult | None] = {}
_running: dict[_Key, threading.Event] = {}
_lock = threading.Lock()


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass


def run_probe(executable: str, args: list[str], timeout_s: float) -> ProbeResult | None:
    """Run ``executable args`` once, bounded, and return what it printed (cached).

    The child gets stdin ``/dev/null``, a new session (its own process group), the server's
    environment without our own variables (:func:`~tianshu_mcp.core.childenv.scrub`). After
    ``timeout_s`` seconds the whole process group is killed (SIGKILL) and the result has
    ``timed_out`` set. Results are cached per (path, size, mtime, args): a changed file is probed
    again, the same one never twice.

    Args:
        executable: path of the file to run.
        args: its arguments (``["--version"]``, ``["exec", "--help"]`` …).
        timeout_s: wall-clock limit, s.

    Returns:
        The :class:`ProbeResult`, or None when the file cannot be stat'ed or started (not
        executable, bad interpreter). Never raises.
    """
    try:
        st = os.stat(executable)
    except OSError:
        return None
    key = (executable, st.st_size, st.st_mtime_ns, tuple(args))
    with _lock:
        if key in _cache:
            return _cache[key]
        running = _running.get(key)
        if running is None:
            _running[key] = threading.Event()
    if running is not None:  # the same probe from another thread (gemini and gemini-acp): share it
        running.wait()
        with _lock:
            return _cache.get(key)
    result: ProbeResult | None = None
    try:
        result = _spawn(executable, args, timeout_s)
    finally:
        with _lock:
            _cache[key] = result
            _running.pop(key).set()
    return result


def _spawn(executable: str, args: list[str], timeout_s: float) -> ProbeResult | None:
    """One uncached probe (see :func:`run_probe`); None when it cannot be started."""
    try:
        proc = subprocess.Popen([executable, *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, env=scrub(None), start_new_session=True)
    except (OSError, ValueError):  # not executable, bad interpreter, a NUL in an argument
        return None
    timed_out = False
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc)
        try:  # a grandchild that left the group may still hold the pipe: do not wait on it
            out, _ = proc.communicate(timeout=1.0)
        except subprocess.TimeoutExpired:
            if proc.stdout is not None:
                proc.stdout.close()
            proc.wait()
            out = b""
    text = _ANSI.sub("", out[:MAX_PROBE_OUTPUT_BYTES].decode("utf-8", "replace"))
    return ProbeResult(text, None if timed_out else proc.returncode, timed_out)


def parse_version(output: str) -> str | None:
    """The first ``1.2.3``-like token of ``output`` (with the rest of its line trimmed), or None."""
    for line in output.splitlines():
        match = _VERSION.search(line)
        if match:
            return match.group(1)
    return None


def agent_version(executable: str, args: list[str] | None = None) -> str | None:
    """The version ``executable`` prints for ``args`` (default ``["--version"]``; ``[]``: not
    asked → None), within :data:`VERSION_TIMEOUT_S`. None when it cannot run, times out or
    prints no version. Never raises.

    Only call it for an executable known to be a CLI that answers ``--version`` (see
    :func:`tianshu_mcp.adapters.doctor.probe_plan`): a script that takes its argv for a brief
    would start working on ``--version``.
    """
    args = ["--version"] if args is None else args
    if not args:
        return None
    result = run_probe(executable, args, VERSION_TIMEOUT_S)
    if result is None or result.timed_out:
        return None
    return parse_version(result.output[:4096])


def agent_help(executable: str, args: list[str]) -> ProbeResult | None:
    """What ``executable args`` (e.g. ``["exec", "--help"]``) prints, within
    :data:`HELP_TIMEOUT_S`; None when it cannot be started. Never raises. The same caution as
    :func:`agent_version` applies."""
    return run_probe(executable, args, HELP_TIMEOUT_S)
