"""When an agent is stuck: a retry loop on a model error that will not heal, or silence
(docs/real-agents.md §4).

CLIs retry a failed model call on their own, some for minutes (Claude Code about 3 minutes on a
401, Gemini CLI about 5 on a 429, Qwen Code about 35): a bad key or an exhausted quota would hold
the task until its timeout. :class:`Liveness` is fed the round's output events and says when to
end the round as an agent failure: at the ``max_retries``-th retry of a call that failed with
401, 403 or 429, or ``window_ms`` after the first such retry, whichever comes first (the first
retry may be a credential refresh or a short rate limit that heals); a retry whose announced
wait would carry it past that window ends the round at once (Qwen Code's first visible retry of
a 429 announces 60 s). Other failures (5xx, a lost
connection) are left to the CLI's own policy. Silence is reported, never acted on: an agent that
printed nothing and changed nothing for ``stall_after_ms`` is *stalled* (a long model call
looks the same), once per silent stretch.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from .events import GaveUp, ModelRetry, OutputEvent

FAIL_STATUSES = frozenset({401, 403, 429})
"""HTTP statuses whose retry loop ends a round early: a key, a permission or a quota."""
DEFAULT_MAX_RETRIES = 3
DEFAULT_WINDOW_MS = 20_000
DEFAULT_STALL_AFTER_MS = 120_000


@dataclass(frozen=True)
class Stuck:
    """Why the round should end: the CLI's own line, the HTTP status and the retries seen."""

    line: str
    status: int | None
    retries: int


@dataclass
class Liveness:
    """The liveness state of one round (times from ``clock``, s; limits in ms).

    Attributes:
        max_retries: the retry of a 401/403/429 that ends the round (≥ 1).
        window_ms: how long after the first such retry the round ends at the latest.
        stall_after_ms: silence (no output, no change) after which the agent counts as stalled.
        clock: the time source (``time.monotonic``).
    """

    max_retries: int = DEFAULT_MAX_RETRIES
    window_ms: int = DEFAULT_WINDOW_MS
    stall_after_ms: int = DEFAULT_STALL_AFTER_MS
    clock: Callable[[], float] = time.monotonic
    last_line: str = ""
    _retries: list[ModelRetry] = field(default_factory=list)
    _first_retry_at: float | None = None
    _last_activity: float = field(default=0.0)
    _stall_reported: bool = False
    _gave_up: GaveUp | None = None

    def __post_init__(self) -> None:
        self._last_activity = self.clock()

    def activity(self, line: str | None = None) -> None:
        """The agent printed ``line`` or changed a file: it is not silent."""
        self._last_activity = self.clock()
        self._stall_reported = False
        if line:
            self.last_line = line[:300]

    def saw(self, event: OutputEvent) -> None:
        """Take one output event into account."""
        if isinstance(event, ModelRetry) and event.status in FAIL_STATUSES:
            if self._first_retry_at is None:
                self._first_retry_at = self.clock()
            self._retries.append(event)
        elif isinstance(event, GaveUp):
            self._gave_up = event

    def stuck(self) -> Stuck | None:
        """A :class:`Stuck` once the retry loop has gone on too long (see the module doc), else None."""
        if not self._retries or self._first_retry_at is None:
            return None
        elapsed_ms = (self.clock() - self._first_retry_at) * 1000
        last = self._retries[-1]
        announced = last.delay_ms is not None and elapsed_ms + last.delay_ms >= self.window_ms
        if len(self._retries) >= self.max_retries or elapsed_ms >= self.window_ms or announced:
            return Stuck(last.line, last.status, len(self._retries))
        return None

    def stalled(self) -> bool:
        """True once per silent stretch of ``stall_after_ms`` (the caller reports it)."""
        if self._stall_reported:
            return False
        if (self.clock() - self._last_activity) * 1000 >= self.stall_after_ms:
            self._stall_reported = True
            return True
        return False

    @property
    def gave_up(self) -> GaveUp | None:
        """The error the CLI reported giving up on, if any."""
        return self._gave_up
