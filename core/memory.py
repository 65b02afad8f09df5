"""Giving the C allocator's free memory back to the system (docs/design-notes.md, note 75).

CPython takes its larger blocks, and every thread's, from the C allocator. glibc's ``free`` keeps
what is freed in its arenas for reuse and returns memory to the system only from the top of the
main heap, so a long-lived process that runs many threads (the service: API server, worker, event
loops) keeps the high-water mark of its bursts: measured in the service over a 400-task soak, 40
of its 288 MiB were free blocks inside its arenas. ``malloc_trim(0)`` hands the free pages of
every arena back (``madvise``), without moving anything.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Callable

TRIM_EVERY_S = 30.0
"""How often the service gives its free memory back, s."""


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library has none (musl, macOS)."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim  # type: ignore[no-any-return]


def release_free_memory() -> bool | None:
    """Return the free pages of every C-allocator arena of this process to the system.

    Holds the arenas' locks while it walks them (a few ms for a few hundred MiB); call it from a
    worker thread where an event loop must not wait. Returns True when memory was released,
    False when there was none to release, None where the C library cannot do it.
    """
    trim = _malloc_trim()
    if trim is None:
        return None
    return bool(trim(0))
