"""core.procs.wait_exit: a child's exit is seen through a pidfd (woken by the kernel), with the
same answers as ``Popen.wait(timeout)``: False while it runs past the limit, True once it exited
and was reaped (``returncode`` set), also without a limit, for a child already reaped, and where
no pidfd exists (the fallback)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tianshu_mcp.core import procs
from tianshu_mcp.core.procs import wait_exit


def _child(code: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code])


@pytest.mark.parametrize("pidfd", [True, False], ids=["pidfd", "fallback"])
def test_wait_exit_answers_like_popen_wait(pidfd: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if not pidfd:
        monkeypatch.delattr(procs.os, "pidfd_open", raising=False)
    elif not hasattr(os, "pidfd_open"):
        pytest.skip("no pidfd_open on this platform")
    running = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read(); sys.exit(3)"], stdin=subprocess.PIPE)
    try:
        assert wait_exit(running, 0.05) is False and running.returncode is None  # still reading its stdin
        assert running.stdin is not None
        running.stdin.close()  # now it ends with 3
        assert wait_exit(running, 60) is True and running.returncode == 3
        assert wait_exit(running, 0) is True  # already reaped: answered from returncode
    finally:
        running.kill()
        running.wait()

    quick = _child("raise SystemExit(7)")
    assert wait_exit(quick, None) is True and quick.returncode == 7

    reaped_elsewhere = _child("pass")
    os.waitpid(reaped_elsewhere.pid, 0)  # no pid left to open: Popen's own answer for ECHILD
    assert wait_exit(reaped_elsewhere, 5) is True and reaped_elsewhere.returncode is not None
