"""The project gate finds and kills exactly the processes carrying the project's tag
(``core/gate.py``, docs/hosting.md §7), with real processes."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time

import psutil

from tianshu_mcp.core.gate import PROJECT_TAG_ENV, kill_project_processes, project_processes

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]


def _start(**env: str) -> subprocess.Popen[bytes]:
    base = {k: v for k, v in os.environ.items() if k != PROJECT_TAG_ENV}
    return subprocess.Popen(SLEEPER, env={**base, **env}, start_new_session=True)


def test_only_the_processes_with_the_tag_itself_are_found_and_killed() -> None:
    tag = f"home-{secrets.token_hex(3)}/repo"
    tagged = _start(**{PROJECT_TAG_ENV: tag})
    others = [
        _start(**{PROJECT_TAG_ENV: tag + "-wt"}),  # another queue of the same repository
        _start(**{PROJECT_TAG_ENV: tag[:-1]}),  # a prefix of it
        _start(NOT_THE_TAG=f"{PROJECT_TAG_ENV}={tag}"),  # the entry as another variable's value
        _start(),
    ]
    try:
        deadline = time.monotonic() + 60
        while [p.pid for p in project_processes(tag)] != [tagged.pid]:
            assert time.monotonic() < deadline, [p.pid for p in project_processes(tag)]
            time.sleep(0.05)  # until the children have exec'ed with their environments
        assert kill_project_processes(tag, timeout_s=30) == 1
        assert tagged.wait(30) is not None and project_processes(tag) == []
        assert all(p.poll() is None for p in others)  # untouched
    finally:
        for proc in [tagged, *others]:
            if proc.poll() is None:
                proc.kill()
            proc.wait(30)
    assert not psutil.pid_exists(tagged.pid) or psutil.Process(tagged.pid).status() == psutil.STATUS_ZOMBIE
