"""Visual locks across processes (docs/visual.md §11.6; docs/visual.md §8): one holder per key, a
clear busy code naming the holder, and no stale lock after the holder dies — even by SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tianshu_mcp.acceptance.visual.errors import VisualError
from tianshu_mcp.acceptance.visual.locks import project_key, visual_lock, visual_locks

HOLDER = """
import sys, time
from tianshu_mcp.acceptance.visual.locks import visual_lock
with visual_lock(sys.argv[1], sys.argv[2], "prepare"):
    print("held", flush=True)
    time.sleep(600)
"""


def hold(home: Path, key: str) -> subprocess.Popen[str]:
    """A separate process holding ``key`` until it is killed (it prints "held" once it holds it)."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(home), key], stdout=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def acquire_within(home: Path, key: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while True:
        try:
            with visual_lock(home, key, "verify"):
                return True
        except VisualError as exc:
            assert exc.code == "VISUAL_BUSY"
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_a_held_project_is_busy_and_a_dead_holder_leaves_no_stale_lock(tmp_path: Path, how: signal.Signals) -> None:
    key = project_key(tmp_path)
    proc = hold(tmp_path, key)
    try:
        with pytest.raises(VisualError) as info:
            with visual_lock(tmp_path, key, "verify"):
                pass
        assert info.value.code == "VISUAL_BUSY" and info.value.kind == "blocked"
        assert f"pid {proc.pid}" in info.value.message and "prepare" in info.value.message
        with visual_lock(tmp_path, "task:tsk_other", "verify"):  # another key is independent
            pass
    finally:
        os.kill(proc.pid, how)
        proc.wait(timeout=30)
    assert acquire_within(tmp_path, key, 30), "the lock of a dead holder was not released"


def test_two_keys_are_all_or_nothing(tmp_path: Path) -> None:
    proc = hold(tmp_path, project_key(tmp_path))
    try:
        with pytest.raises(VisualError):
            with visual_locks(tmp_path, ["task:tsk_a", project_key(tmp_path)], "verify"):
                pass
        with visual_lock(tmp_path, "task:tsk_a", "verify"):  # the first key was released again
            pass
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_a_second_holder_in_the_same_process_is_busy_too(tmp_path: Path) -> None:
    with visual_lock(tmp_path, "task:tsk_x", "verify"):
        with pytest.raises(VisualError) as info:
            with visual_lock(tmp_path, "task:tsk_x", "approve"):
                pass
        assert info.value.code == "VISUAL_BUSY"
