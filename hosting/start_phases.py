"""How long each part of the service's start took, for its "ready" log line.

The line reads ``ready in 4.3 s (process 370 ms, database 2 ms, preload 1250 ms, API 1990 ms,
setup 720 ms, worker 5 ms)``, the total being the sum of the parts: ``process`` is the time from the interpreter's creation to
:meth:`~.service.HomeService.start` (its own imports), ``preload`` the imports the fork server
shares and its fork (:mod:`.shared_fork`), each part the time since the previous mark (in-process
hosting adds ``heap``). ``bench/bench_service.py`` reads the line to print where a cold start goes
(docs/design-notes.md, note 85).
"""

from __future__ import annotations

import re
import time

import psutil

PHASE = re.compile(r"([a-zA-Z][a-zA-Z ]*?) (\d+) ms")
"""One ``<name> <ms> ms`` part of :meth:`StartPhases.render`'s text."""


class StartPhases:
    """Named marks on the monotonic clock, each rendered as the ms since the one before.

    With ``process`` (a process started to be the service), the first part is how long this
    process had run when the instance was made (wall clock against the process's creation
    time, 10 ms granularity on Linux); a stdio server hosting in-process leaves it out, its age
    says nothing about the start.
    """

    def __init__(self, process: bool = True) -> None:
        self._process_ms = max(0.0, (time.time() - psutil.Process().create_time()) * 1000) if process else None
        self._last = time.monotonic()
        self._parts: list[tuple[str, float]] = []

    def mark(self, name: str) -> None:
        """End the part called ``name`` now (ms since the previous mark or the start)."""
        now = time.monotonic()
        self._parts.append((name, (now - self._last) * 1000))
        self._last = now

    def _all(self) -> list[tuple[str, float]]:
        return ([("process", self._process_ms)] if self._process_ms is not None else []) + self._parts

    def total_s(self) -> float:
        """The sum of the parts marked so far, s (the start's total: the parts add up to it)."""
        return sum(ms for _, ms in self._all()) / 1000

    def render(self) -> str:
        """``process 370 ms, database 2 ms, …``: whole ms, in the order marked."""
        return ", ".join(f"{name} {ms:.0f} ms" for name, ms in self._all())


def parse(text: str) -> dict[str, int]:
    """The parts of a rendered line (``{"process": 370, "API": 1990, …}``, ms); empty when none."""
    return {name: int(ms) for name, ms in PHASE.findall(text)}
