"""MCP progress notifications while a tool call waits (``wait_task``, ``verify_task``; design note 89).

Hosts give up on a call that shows no sign of life: Claude Code aborts an MCP call after 30 min
without progress and moves a call to the background after 120 s. While a call waits for a task,
:func:`progress_ticker` sends ``notifications/progress`` every :func:`progress_interval_s`
seconds to a client that asked for them (``_meta.progressToken`` in its ``tools/call``); a
client without a token gets none. ``progress`` is the seconds waited (increasing), ``total``
the wait's limit in seconds, ``message`` what is waited for: the task's status and last
message as its newest read has them (``running: round 1: agent running``).

The ticker is a task of its own beside the wait, so a slow read of the service (a wait's poll
may take up to 10 s while the service starts) never delays a notification; it ends with the
wait, also when the client cancels the call (``notifications/cancelled`` cancels the handler's
scope, and the ticker's task group with it).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import anyio

from ..core.i18n import _
from .taskops import TaskView

log = logging.getLogger("tianshu_mcp")

PROGRESS_INTERVAL_ENV = "TIANSHU_MCP_PROGRESS_INTERVAL_S"
"""Environment variable: seconds between two progress notifications (a positive number; tests set
it small). Read at the start of each waiting call."""
PROGRESS_INTERVAL_S = 15.0
"""The default interval, s: below the 20 s a host may expect between two signs of life, with
room for a loaded machine."""
MESSAGE_CHARS = 300
"""A task's last message is cut to this many characters in a progress message."""
BATCH_SHOWN = 5
"""A batch wait's progress message names at most this many tasks."""


def progress_interval_s() -> float:
    """Seconds between two progress notifications: ``$TIANSHU_MCP_PROGRESS_INTERVAL_S`` when it is
    a positive finite number, else :data:`PROGRESS_INTERVAL_S` (an invalid value is logged)."""
    raw = os.environ.get(PROGRESS_INTERVAL_ENV)
    if raw is None or not raw.strip():
        return PROGRESS_INTERVAL_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or value <= 0:
        log.warning("%s=%r is not a positive number of seconds; using %.0f s", PROGRESS_INTERVAL_ENV, raw,
                    PROGRESS_INTERVAL_S)
        return PROGRESS_INTERVAL_S
    return value


def progress_token(ctx: Any) -> str | int | None:
    """The progress token of the request behind ``ctx`` (its ``_meta.progressToken``), or None
    when the client gave none (or there is no request context: a direct call in a test)."""
    meta = getattr(ctx, "meta", None)
    if not isinstance(meta, dict):
        return None
    token = meta.get("progress_token", meta.get("progressToken"))
    return token if isinstance(token, (str, int)) and not isinstance(token, bool) else None


def _one(view: TaskView) -> str:
    message = str(view.task.get("lastMessage") or "").strip().replace("\n", " ")
    if len(message) > MESSAGE_CHARS:
        message = message[:MESSAGE_CHARS] + "…"
    if not message or message == view.status:
        return view.status
    if message.startswith(f"{view.status}:"):  # a message that names the status already ("queued: waiting for …")
        return message
    return _("{status}: {message}").format(status=view.status, message=message)


def describe_views(views: Sequence[TaskView] | None) -> str:
    """A progress message for the newest read of the waited tasks: ``"<status>: <lastMessage>"``
    for one task, ``"<taskId> <status>: <lastMessage>; …"`` for several (at most
    :data:`BATCH_SHOWN`), and a note that the service has not answered yet before any read."""
    if not views:
        return _("waiting for the tianshu-mcp service to answer")
    if len(views) == 1:
        return _one(views[0])
    shown = [f"{v.task.get('taskId', '?')} {_one(v)}" for v in views[:BATCH_SHOWN]]
    more = len(views) - BATCH_SHOWN
    return _("; ").join(shown) + (_("; and {n} more").format(n=more) if more > 0 else "")


@contextlib.asynccontextmanager
async def progress_ticker(ctx: Any, total_s: float, describe: Callable[[], str]) -> AsyncIterator[None]:
    """Send a progress notification every :func:`progress_interval_s` seconds while the body runs,
    when the request behind ``ctx`` carries a progress token; otherwise do nothing.

    Args:
        ctx: the request context of the tool call (its ``session.report_progress`` sends).
        total_s: the wait's limit, s (the notifications' ``total``).
        describe: called at each tick for the message (what is being waited for); an exception
            in it sends the notification without a message.

    The first notification comes one interval after the start; ``progress`` is the seconds since
    the start (strictly increasing). A failed send ends the ticking (logged), never the wait. The
    ticking stops when the body ends, is cancelled or raises.
    """
    if progress_token(ctx) is None:
        yield
        return
    interval = progress_interval_s()
    start = time.monotonic()

    async def tick() -> None:
        last = -1.0
        while True:
            await anyio.sleep(interval)
            progress = round(time.monotonic() - start, 3)
            if progress <= last:
                continue
            try:
                message: str | None = describe()
            except Exception:  # noqa: BLE001 - a message is a courtesy; the notification still goes out
                log.debug("progress message failed", exc_info=True)
                message = None
            try:
                await ctx.session.report_progress(progress, total_s, message)
            except Exception:  # noqa: BLE001 - the client went away or the stream closed: stop ticking
                log.debug("progress notification failed; no more for this call", exc_info=True)
                return
            last = progress

    error: Exception | None = None
    async with anyio.create_task_group() as group:
        group.start_soon(tick)
        try:
            yield
        except Exception as exc:  # noqa: BLE001 - the wait's own error, raised below as it is
            error = exc  # (inside the group it would come out wrapped in an exception group)
        finally:
            group.cancel_scope.cancel()
    if error is not None:
        raise error
