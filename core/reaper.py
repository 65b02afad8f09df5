"""The flow-run process as the reaper of everything below it (docs/architecture.md §5).

A flow-run process becomes a *subreaper* (:func:`become_subreaper`): a grandchild whose parent
dies is re-parented to it, so :func:`reap_orphans` can kill what an agent or a check left behind
after each round, even a ``setsid``'d process with a cleared environment. Trees whose session
outlives a round (an ACP agent, a desktop app) are spared while :func:`keep_alive` holds them.
:func:`exit_when_host_dies` ends the process (and all below it) when its host dies.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
import threading
import time
from typing import Callable

import psutil

from .procs import ProcRecord, members_of, pid_alive

log = logging.getLogger("tianshu_mcp")

_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Make this process the reaper of orphaned descendants (Linux ``PR_SET_CHILD_SUBREAPER``).

    A grandchild whose parent dies is then re-parented to us instead of init, so
    :func:`kill_tree` still finds it among our descendants. Returns False where unsupported.
    """
    global _subreaper
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        _subreaper = libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except OSError:
        return False
    return _subreaper


_subreaper = False


_kept: dict[int, ProcRecord] = {}
_kept_lock = threading.Lock()


def keep_alive(record: ProcRecord) -> None:
    """Exempt ``record``'s tree from :func:`reap_orphans` until :func:`release`: an agent whose
    session outlives a round (an ACP agent, a desktop app) is not a leftover of that round."""
    with _kept_lock:
        _kept[record.pid] = record


def release(record: ProcRecord) -> None:
    """Undo :func:`keep_alive` (the caller kills the tree itself)."""
    with _kept_lock:
        _kept.pop(record.pid, None)


def _kept_pids() -> set[int]:
    with _kept_lock:
        records = list(_kept.values())
    return {p.pid for record in records for p in members_of(record)}


def reap_orphans() -> int:
    """In a subreaper (a flow-run process, :func:`become_subreaper`), kill every process still
    below us — called when the agent or the checks have finished, so nothing of theirs is meant
    to run any more. A descendant that left its session and cleared its environment
    (``setsid env -i …``) escapes the tree and the tag, but not its re-parenting to us (docs/robustness.md
    §10: such a process outlived its task, and one written by a check changed files after the
    checks were judged). Trees held by :func:`keep_alive` are spared. Elsewhere (a test, the
    stdio server) nothing is done.

    Returns:
        How many processes were found and killed.
    """
    if not _subreaper:
        return 0
    try:
        kept = _kept_pids()
        found = [p for p in psutil.Process().children(recursive=True) if p.pid not in kept]
    except psutil.Error:
        return 0
    if found:
        log.warning("killing %d process(es) left behind by the agent or the checks", len(found))
        _kill_all(found)
    return len(found)


def kill_descendants() -> None:
    """Kill every descendant of this process (agents, checks, their orphans when we are a
    subreaper), SIGTERM then SIGKILL. Never raises."""
    try:
        children = psutil.Process().children(recursive=True)
    except psutil.Error:
        return
    _kill_all(children)


def _kill_all(procs_: list[psutil.Process]) -> None:
    """SIGTERM ``procs_``, SIGKILL what is left after 0.5 s. Never raises."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for child in procs_:
            try:
                child.send_signal(sig)
            except psutil.Error:
                pass
        _, procs_ = psutil.wait_procs(procs_, timeout=0.5)
        if not procs_:
            return


def exit_when_host_dies() -> bool:
    """In a flow-run process of the embedded host: when the host dies, kill everything this
    process started and exit (the host's API is gone, so no state can be recorded; the next
    host's start-up sweep archives the run). Returns False when no host is watched."""

    def gone() -> None:
        kill_descendants()
        os._exit(3)

    return watch_host(gone)


def export_host() -> None:
    """Make this process the host its flow-run processes follow (:func:`watch_host`): the
    per-home service and ``tianshu-mcp worker`` call it before their worker starts, so a host
    that dies takes its flow runs' agents with it."""
    import psutil

    me = psutil.Process()
    os.environ["TIANSHU_MCP_HOST_PID"] = str(me.pid)
    os.environ["TIANSHU_MCP_HOST_CTIME"] = repr(me.create_time())


def watch_host(on_gone: Callable[[], None], interval_s: float = 1.0) -> bool:
    """Call ``on_gone`` once when the hosting tianshu-mcp process dies.

    The host exports ``TIANSHU_MCP_HOST_PID`` / ``TIANSHU_MCP_HOST_CTIME`` (:func:`export_host`)
    to the flow-run processes its worker starts; without them (a plain ``prefect worker``)
    nothing is watched and False is returned. A daemon thread polls every ``interval_s`` seconds; a reused pid does not count as
    alive (create time is compared).
    """
    try:
        pid = int(os.environ["TIANSHU_MCP_HOST_PID"])
        ctime = float(os.environ["TIANSHU_MCP_HOST_CTIME"])
    except (KeyError, ValueError):
        return False

    def loop() -> None:
        while pid_alive(pid, ctime):
            time.sleep(interval_s)
        on_gone()

    threading.Thread(target=loop, name="tianshu-host-watchdog", daemon=True).start()
    return True
