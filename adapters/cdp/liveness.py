"""The liveness judge of a desktop chat app's round: a pure function from what one poll saw to
a verdict (docs/agents-tasks.md §1.11.9).

No I/O and no clock of its own: the caller passes ``now_ms`` and the previous
:class:`LiveState`, and gets a verdict and the next state, so every rule is unit-testable.

Rules, in order:

1. a login screen → ``needs_login``; a confirmation card → ``needs_confirmation``;
2. a running signal (stop button, spinner, active tool) → ``running`` (``saw_running`` set,
   ``stable`` and ``idle_since`` reset: the app is working again); the stop button visible with an unchanged reply for ≥ ``stall_timeout_ms``
   → ``stalled`` (the app waits for the user);
3. otherwise ``stable`` counts polls with an unchanged, non-empty reply; reaching
   ``stable_rounds`` sets ``idle_since`` (kept once set);
4. ``finished`` only when a running signal was seen in this round **and** the reply is stable;
5. ``idle_since`` set and ``idle_timeout_ms`` elapsed → ``idle_timeout``. Extension of the
   spec: a round that shows neither a running signal nor any reply for ``idle_timeout_ms``
   (the selectors no longer match anything) is also ``idle_timeout``;
6. else ``pending``.

Selector drift therefore fails open — ``idle_timeout``, never a false ``finished``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Literal

Verdict = Literal["needs_login", "needs_confirmation", "running", "stalled", "finished", "idle_timeout", "pending"]


@dataclass(frozen=True)
class Observation:
    """What one poll of the app's window saw.

    Attributes:
        login: the login screen is visible.
        confirm: the text of a visible confirmation card, or None.
        running: a running signal is visible (spinner, ``aria-busy``, active tool card).
        stop_visible: the stop button is visible (also a running signal).
        text: the reply to our message so far ("" when none).
    """

    login: bool = False
    confirm: str | None = None
    running: bool = False
    stop_visible: bool = False
    text: str = ""


@dataclass(frozen=True)
class LiveState:
    """The judge's memory between polls (times are the caller's monotonic ms).

    Attributes:
        hash: ``sha256(text)[:12]`` of the last reply ("" before the first poll).
        stable: consecutive polls with an unchanged non-empty reply.
        idle_since: when ``stable`` first reached ``stable_rounds``, or None.
        saw_running: a running signal was seen in this round.
        stall_since: since when the stop button shows over an unchanged reply, or None.
        changed_at: when something last happened (a running signal or a new reply).
    """

    hash: str = ""
    stable: int = 0
    idle_since: float | None = None
    saw_running: bool = False
    stall_since: float | None = None
    changed_at: float = 0.0


@dataclass(frozen=True)
class JudgeLimits:
    """The judge's thresholds: ``stable_rounds`` (polls), the others in ms."""

    stable_rounds: int
    idle_timeout_ms: int
    stall_timeout_ms: int


def text_hash(text: str) -> str:
    """``sha256(text)[:12]`` (the reply hash of progress notes and the judge)."""
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:12]


def start_state(now_ms: float) -> LiveState:
    """The state right after the message was sent."""
    return LiveState(changed_at=now_ms)


def judge(state: LiveState, obs: Observation, now_ms: float, limits: JudgeLimits) -> tuple[Verdict, LiveState]:
    """Judge one poll (see the module doc for the rules).

    Args:
        state: the state after the previous poll (:func:`start_state` for the first).
        obs: what this poll saw.
        now_ms: the caller's monotonic clock, ms.
        limits: thresholds.

    Returns:
        ``(verdict, next_state)``.
    """
    if obs.login:
        return "needs_login", state
    if obs.confirm:
        return "needs_confirmation", state
    h = text_hash(obs.text)
    changed = h != state.hash
    if obs.running or obs.stop_visible:
        stall_since = state.stall_since
        if obs.stop_visible and not changed:
            stall_since = stall_since if stall_since is not None else now_ms
        else:
            stall_since = None
        nxt = replace(state, hash=h, stable=0, idle_since=None, saw_running=True, stall_since=stall_since,
                      changed_at=now_ms)
        if stall_since is not None and now_ms - stall_since >= limits.stall_timeout_ms:
            return "stalled", nxt
        return "running", nxt
    stable = state.stable + 1 if (not changed and obs.text) else 0
    idle_since = state.idle_since
    if stable >= limits.stable_rounds and idle_since is None:
        idle_since = now_ms
    nxt = replace(state, hash=h, stable=stable, idle_since=idle_since, stall_since=None,
                  changed_at=now_ms if changed else state.changed_at)
    if state.saw_running and stable >= limits.stable_rounds:
        return "finished", nxt
    if idle_since is not None and now_ms - idle_since >= limits.idle_timeout_ms:
        return "idle_timeout", nxt
    if not obs.text and now_ms - nxt.changed_at >= limits.idle_timeout_ms:
        return "idle_timeout", nxt
    return "pending", nxt
