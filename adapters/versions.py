"""The version an agent's executable reports (``query_info(type=profiles)``, issue 9 §1).

:func:`agent_version` runs ``<executable> <versionArgs>`` (default ``--version``) once per
executable file (cached by path, size and mtime, so an upgrade is seen at once), with stdin at
EOF, in its own session, for at most :data:`VERSION_TIMEOUT_S`; the first line that looks like a
version is kept. Plain Python: no Prefect, no acceptance import.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading

from ..core.childenv import scrub

VERSION_TIMEOUT_S = 5.0
"""How long ``--version`` may take, s (a CLI that starts a UI instead is killed)."""

_VERSION = re.compile(r"\bv?(\d+\.\d+(?:\.\d+)?(?:[-+.][0-9A-Za-z.]+)?)\b")
_cache: dict[tuple[str, int, int, tuple[str, ...]], str | None] = {}
_lock = threading.Lock()


def parse_version(output: str) -> str | None:
    """The first ``1.2.3``-like token of ``output`` (with the rest of its line trimmed), or None."""
    for line in output.splitlines():
        match = _VERSION.search(line)
        if match:
            return match.group(1)
    return None


def agent_version(executable: str, args: list[str] | None = None) -> str | None:
    """The version ``executable`` prints for ``args`` (default ``["--version"]``; ``[]``: not
    asked → None). None when it cannot run, times out or prints no version. Never raises."""
    args = ["--version"] if args is None else args
    if not args:
        return None
    try:
        st = os.stat(executable)
    except OSError:
        return None
    key = (executable, st.st_size, st.st_mtime_ns, tuple(args))
    with _lock:
        if key in _cache:
            return _cache[key]
    try:
        proc = subprocess.Popen([executable, *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, env=scrub(None), start_new_session=True)
    except OSError:
        return None
    try:
        out, _ = proc.communicate(timeout=VERSION_TIMEOUT_S)
        version = parse_version(out.decode("utf-8", "replace")[:4096])
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, 9)
        except OSError:
            pass
        proc.communicate()
        version = None
    with _lock:
        _cache[key] = version
    return version
