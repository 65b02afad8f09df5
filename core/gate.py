"""The project gate that outlives an agent (docs/hosting.md §7).

A work queue's limit of 1 frees the project's slot as soon as a flow run is final, which can be
before the processes of a killed run — its agent, its checks, in sessions of their own — are
dead. Every process a flow run starts inherits ``TIANSHU_MCP_PROJECT_TAG``; the next flow run on
the project kills and waits out whatever still carries the tag before it starts work.
"""

from __future__ import annotations

import logging
import os
import time

import psutil

from .procs import ProcRecord, is_alive, kill_tree

log = logging.getLogger("tianshu_mcp")


PROJECT_TAG_ENV = "TIANSHU_MCP_PROJECT_TAG"


def project_processes(tag: str) -> list[psutil.Process]:
    """Live processes (not this one) whose initial environment carries ``TIANSHU_MCP_PROJECT_TAG=tag``.

    On Linux each process's ``/proc/<pid>/environ`` is searched for the entry as bytes, and only a
    process that has it is looked at further: psutil parsed every process's whole environment into
    a dict, 4–5 ms per flow run on a loaded 2-core machine, before the agent's start. Elsewhere,
    psutil's reading."""
    me = os.getpid()
    found = []
    for pid in _tagged_pids(tag) if os.path.isdir("/proc/self") else psutil.pids():
        if pid == me:
            continue
        try:
            proc = psutil.Process(pid)
            if proc.environ().get(PROJECT_TAG_ENV) == tag and is_alive(proc):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def _tagged_pids(tag: str) -> list[int]:
    """The pids whose ``/proc/<pid>/environ`` holds the entry ``TIANSHU_MCP_PROJECT_TAG=tag``
    (each then confirmed through psutil by the caller); unreadable ones are skipped, as psutil
    skips them."""
    entry = f"\0{PROJECT_TAG_ENV}={tag}\0".encode("utf-8", "surrogateescape")
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        if entry in b"\0" + data + b"\0":
            pids.append(int(name))
    return pids


def claim_project(tag: str, timeout_s: float = 30.0) -> int:
    """The project gate that outlives an agent (docs/hosting.md §7).

    Every process a flow run starts for a project inherits ``TIANSHU_MCP_PROJECT_TAG=<tag>``
    (set here in this process's environment). Before a flow run starts work on the project, every
    process still carrying the tag — an agent or a check left by a previous run whose flow-run
    process was killed, or whose host died — is killed, and this returns only once none is alive
    (or ``timeout_s`` passed). The work queue's limit of 1 decides which run is next; this makes
    sure that run never works beside the leftovers of the last one.

    Returns:
        How many leftover processes were killed.
    """
    killed = kill_project_processes(tag, timeout_s)
    if killed:
        log.warning("project gate: %d process(es) of a previous run were still alive and were killed", killed)
    os.environ[PROJECT_TAG_ENV] = tag
    return killed


def kill_project_processes(tag: str, timeout_s: float = 30.0) -> int:
    """Kill every live process carrying ``TIANSHU_MCP_PROJECT_TAG=tag`` (and its tree) and wait
    until none is alive, at most ``timeout_s``; return how many were found."""
    leftovers = project_processes(tag)
    for proc in leftovers:
        try:
            record = ProcRecord(proc.pid, proc.pid, proc.create_time())
        except psutil.Error:
            continue
        kill_tree(record, extra=[proc])
    deadline = time.monotonic() + timeout_s
    while leftovers and time.monotonic() < deadline and project_processes(tag):
        time.sleep(0.05)
    return len(leftovers)
