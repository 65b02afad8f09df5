"""Cross-process locks of visual operations (docs/visual.md §8; docs/acceptance.md §3.0).

One lock per key — ``task:<taskId>`` and the project's real path — at
``<home>/visual-locks/<sha256(key)>.lock``: a verify round holds both, ``prepare``/``approve`` hold the
project's. A key already held answers ``VISUAL_BUSY`` at once, naming the holder.

The original creates the lock file with ``O_EXCL`` and has no stale-lock recovery: a crashed holder
left the project locked until someone deleted the file. Here the lock is the ``flock`` of
:class:`filelock.FileLock` on that file (docs/visual.md §11): the kernel releases it when its holder dies,
however it dies, so a stale lock cannot exist; the holder's ``{pid, purpose, key, createdAt}`` is kept
beside it (``.owner.json``) for the busy message only.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from filelock import FileLock, Timeout

from ...core.files import atomic_write_json, read_json_safe
from .errors import VisualError

LOCK_DIR = "visual-locks"


def lock_path(home: str | os.PathLike[str], key: str) -> Path:
    """``<home>/visual-locks/<sha256(key)>.lock``."""
    return Path(home) / LOCK_DIR / (hashlib.sha256(key.encode("utf-8")).hexdigest() + ".lock")


def project_key(project_root: str | os.PathLike[str]) -> str:
    """The lock key of a project: its real path (docs/visual.md §8)."""
    return os.path.realpath(os.fspath(project_root))


@contextlib.contextmanager
def visual_lock(home: str | os.PathLike[str], key: str, purpose: str, wait_s: float = 0.0) -> Iterator[None]:
    """Hold the visual lock of ``key`` for the block.

    Args:
        home: the data home.
        key: ``task:<taskId>`` or :func:`project_key`.
        purpose: what holds it (``verify``, ``prepare``, ``approve`` …), shown to a caller that finds it busy.
        wait_s: how long to wait for a busy lock (default 0: answer at once).

    Raises:
        VisualError: ``VISUAL_BUSY`` (blocked) when another holder keeps it past ``wait_s``; the
            message names the holder's pid, purpose and start when known. The lock is re-entrant
            neither across threads nor processes; a second acquisition in this process is busy too.
    """
    path = lock_path(home, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    owner = path.with_suffix(".owner.json")
    lock = FileLock(str(path), thread_local=False, is_singleton=False)
    try:
        lock.acquire(timeout=wait_s)
    except Timeout:
        held = read_json_safe(owner)
        who = ""
        if isinstance(held, dict):
            who = f" (held by pid {held.get('pid')} for {held.get('purpose')} since {held.get('createdAt')})"
        raise VisualError("VISUAL_BUSY", f"another visual operation holds {key}{who}; try again when it ends") from None
    try:
        atomic_write_json(owner, {"pid": os.getpid(), "purpose": purpose, "key": key,
                                  "createdAt": datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")})
        yield
    finally:
        with contextlib.suppress(OSError):
            owner.unlink()
        lock.release()


@contextlib.contextmanager
def visual_locks(home: str | os.PathLike[str], keys: list[str], purpose: str, wait_s: float = 0.0) -> Iterator[None]:
    """Hold the locks of ``keys`` in order (a verify round: ``task:<id>`` then the project);
    released in reverse order. Raises VisualError ``VISUAL_BUSY`` with none left held."""
    with contextlib.ExitStack() as stack:
        for key in keys:
            stack.enter_context(visual_lock(home, key, purpose, wait_s))
        yield
