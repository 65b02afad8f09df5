"""What a desktop agent's task keeps open between rounds: its app and the lock on the app's
user-data-dir (docs/agents-tasks.md §1.10 "GUI app instances", §1.11.1–2, §1.11.10).

A task's app outlives its rounds (the rework round types into the same chat) and ends with the
task's flow run (:func:`end_gui_session`, also called before a needs_user suspension: the
flow-run process exits while it waits). One exclusive ``flock`` on ``<user-data-dir>.lock``,
held from the task's first round to its end, keeps two tasks (two flow-run processes) from
driving one app profile at once; the original serialises the runs of one adapter class within
its single server process instead.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ...core.i18n import N_
from ...core.procs import ProcRecord, kill_tree
from ...core.reaper import keep_alive, release
from .config import GuiSettings, user_data_dir
from .instance import AppInstance, InstanceError, ensure_instance
from ..profiles import ResolvedAgent


@dataclass
class Session:
    """What a task keeps open between rounds: its app and the user-data-dir lock."""

    agent_id: str
    udd: Path
    lock_fd: int
    instance: AppInstance | None = None


SESSIONS: dict[str, Session] = {}
SESSIONS_LOCK = threading.Lock()


def lock_udd(udd: Path, stopped: Callable[[], bool], deadline: float) -> int:
    """An exclusive ``flock`` on ``<udd>.lock`` (one task per app profile at a time, across
    processes); waits until ``deadline`` (monotonic s). Raises InstanceError("app_busy"|"aborted")."""
    udd.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(str(udd) + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if stopped() or time.monotonic() >= deadline:
                os.close(fd)
                raise InstanceError("aborted" if stopped() else "app_busy",
                                    N_("the app profile {udd} stayed in use by another task"), udd=udd) from None
            time.sleep(0.25)


def end_gui_session(task_id: str) -> None:
    """Close what the task keeps open (docs/agents-tasks.md §1.11.10): kill the app's process tree,
    release it from ``keep_alive`` and unlock its user-data-dir. Called when the task's flow
    run ends and before a needs_user suspension. Never raises; a no-op without a session."""
    with SESSIONS_LOCK:
        sess = SESSIONS.pop(task_id, None)
    if sess is None:
        return
    try:
        if sess.instance is not None:
            release(sess.instance.record)
            kill_tree(sess.instance.record)
            if sess.instance.popen is not None:
                with contextlib.suppress(Exception):  # reaped by whoever can
                    sess.instance.popen.wait(timeout=1)
    finally:
        try:
            os.close(sess.lock_fd)
        except OSError:
            pass




def task_app(task_id: str, agent: ResolvedAgent, settings: GuiSettings, deadline: float,
             log: Callable[[str, str], None], stopped: Callable[[], bool],
             started: Callable[[ProcRecord], None]) -> AppInstance:
    """The app of ``task_id``: the session's when still alive, else adopted or launched
    (:func:`~.instance.ensure_instance`); a new one is handed to ``started`` and kept out
    of the flow's orphan reaping (``keep_alive``).

    Args:
        task_id: the task.
        agent: the resolved agent (``command``: the app's executable; ``profile.env`` is
            overlaid on this process's environment for the app).
        settings: its ``gui`` settings.
        deadline: monotonic seconds until which the user-data-dir lock is waited for.
        log: ``(level, message)`` sink; stopped: cancellation probe; started: receives the
            record of a newly launched or adopted app.

    Raises:
        InstanceError: ``app_busy`` (another task holds the app profile until ``deadline``),
            ``aborted``, or one of :func:`~.instance.ensure_instance`'s reasons.
    """
    from ...core.settings import data_home

    udd = user_data_dir(settings, agent.id, data_home())
    with SESSIONS_LOCK:
        sess = SESSIONS.get(task_id)
    if sess is None:
        fd = lock_udd(udd, stopped, deadline)
        sess = Session(agent.id, udd, fd)
        with SESSIONS_LOCK:
            SESSIONS[task_id] = sess
    if sess.instance is not None and sess.instance.alive():
        log("info", f"reusing the task's app: pid {sess.instance.record.pid}, port {sess.instance.port}")
        return sess.instance
    if sess.instance is not None:
        release(sess.instance.record)
        log("warn", "the task's app is gone since the last round; starting it again (a new chat)")
        sess.instance = None
    assert agent.profile is not None and agent.command
    env = {**os.environ, **agent.profile.env}
    instance = ensure_instance(agent.command, settings, udd, env, log, stopped)
    sess.instance = instance
    keep_alive(instance.record)
    started(instance.record)
    return instance
