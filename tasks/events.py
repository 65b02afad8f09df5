"""The task's event stream: ``task.jsonl`` and Prefect's event feed, through one emitter that never
raises (docs/lifecycle.md §4; docs/tools.md §3.4).

:func:`emit` appends ``{"ts", "event", "state", "detail"?, "data"?}`` to the task's ``task.jsonl``
(what ``query_task`` shows in ``recentEvents`` for the semantic events of
:data:`~tianshu_mcp.core.model.AGENT_EVENT_NAMES`) and emits the same event to Prefect as
``tianshu.task.<event>`` with the flow run as its resource, so Prefect automations can react to
it. A failure of either is logged, never raised: an event must never end a task.

:class:`ChangeWatch` emits ``file_modification_started`` once, the first time the project's work
tree differs from what it was when the agent started (``git status`` and the size and mtime of
every listed path, polled every second; git projects only). :class:`PromptWatch` reads the
agent's log as it grows and emits ``confirmation_dialog_detected`` /
``awaiting_user_authorization`` once per round, the first time a line asks a person to confirm
or to log in (:mod:`tianshu_mcp.adapters.prompts`).
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Self

from pydantic import BaseModel, ConfigDict, JsonValue

from ..acceptance.git.changes import owned_by_cli
from ..adapters.output.ansi import strip_ansi
from ..adapters.prompts import AUTHORIZATION, QUOTE_CHARS, PromptClassifier
from ..core.git import run_git
from ..core.i18n import _
from .common import store

log = logging.getLogger("tianshu_mcp")

PREFECT_EVENT_PREFIX = "tianshu.task."


class EventData(BaseModel):
    """The ``data`` of a task event (``task.jsonl`` and the Prefect event's ``payload.data``): the
    keys its emitter set, in this order, None values kept (``model_dump(exclude_unset=True)``).

    Attributes:
        round: the round the event belongs to.
        agentId / model: ``task_dispatched``'s agent, a model hint the driver does not use.
        mode / failedChecks: ``rework_triggered``: ``auto``, the failing checks.
        tool / files: ``agent_tool_call`` and ``file_modification_started``: the tool, the paths (≤ 20).
        status / line / attempt / ending: ``agent_model_retry``: the HTTP status (or None), the
            log line, the attempt number, True when the round is ended for it.
        silentS / lastLine: ``agent_stalled``: seconds without output, the last line printed.
    """

    model_config = ConfigDict(frozen=True)

    round: int | None = None
    agentId: str | None = None
    model: str | None = None
    mode: str | None = None
    failedChecks: list[str] | None = None
    tool: str | None = None
    files: list[str] | None = None
    status: int | None = None
    line: str | None = None
    attempt: int | None = None
    ending: bool | None = None
    silentS: int | None = None
    lastLine: str | None = None


def emit(task_id: str, event: str, state: str, detail: str | None = None,
         data: EventData | dict[str, JsonValue] | None = None) -> None:
    """Record ``event`` of ``task_id`` in ``task.jsonl`` and in Prefect's event feed; never raises.

    ``data``: the :class:`EventData` of an event of this package, or the JSON object an agent
    driver attached to its own event (:data:`tianshu_mcp.adapters.round.EventSink`), passed on as it is.
    """
    raw = data.model_dump(mode="json", exclude_unset=True) if isinstance(data, EventData) else data
    try:
        store().event(task_id, event, state, detail, raw)
    except Exception as exc:  # noqa: BLE001 - an event must never end a task
        log.warning("task %s: event %s not recorded: %s", task_id, event, exc)
    try:
        from prefect.events import emit_event
        from prefect.runtime import flow_run

        run_id = flow_run.id
        if not run_id:
            return
        payload: dict[str, JsonValue] = {"state": state}  # Prefect's event payload: JSON
        if detail is not None:
            payload["detail"] = detail[:2000]
        if raw is not None:
            payload["data"] = raw
        emit_event(
            event=PREFECT_EVENT_PREFIX + event,
            resource={"prefect.resource.id": f"prefect.flow-run.{run_id}", "tianshu.task-id": task_id},
            related=[{"prefect.resource.id": f"tianshu.task.{task_id}", "prefect.resource.role": "tianshu-task"}],
            payload=payload,
        )
    except Exception as exc:  # noqa: BLE001
        log.warning("task %s: event %s not sent to Prefect: %s", task_id, event, exc)


def _tree_state(project: str) -> frozenset[tuple[str, str, int, int]] | None:
    """What ``git status`` lists, as ``(path, XY, size, mtime ns)``; None outside git or on error."""
    out = run_git(["status", "--porcelain=v1", "-z", "--untracked-files=all"], project, timeout_ms=30_000)
    if not out.ok:
        return None
    rows = set()
    for entry in out.stdout.split("\0"):
        if len(entry) < 4:
            continue
        path = entry[3:]
        try:
            st = os.lstat(os.path.join(project, path))
            rows.add((path, entry[:2], st.st_size, st.st_mtime_ns))
        except OSError:
            rows.add((path, entry[:2], -1, -1))
    return frozenset(rows)


TreeState = frozenset[tuple[str, str, int, int]] | None
"""What :func:`_tree_state` returns."""


class TreeSnapshot:
    """The work tree's state (:func:`_tree_state`) before the agent starts, taken once, at its
    first use, for all of a round's watches: one ``git status`` on the way to the agent instead of
    one per watch (docs/design-notes.md, note 85). ``project`` "" has none."""

    def __init__(self, project: str) -> None:
        self.project = project

    @cached_property
    def state(self) -> TreeState:
        """The state (None outside git, on error, or without a project)."""
        return _tree_state(self.project) if self.project else None


ONCE_PER_ROUND = frozenset({"file_modification_started", "confirmation_dialog_detected", "awaiting_user_authorization"})
"""Semantic events sent at most once per round, whoever notices first (a watch or the driver)."""


class RoundEvents:
    """The events of one round: the driver's and the watches' go through :meth:`send`, which
    drops a second :data:`ONCE_PER_ROUND` event of the same name; ``progress`` notes and
    ``agent_tool_call`` events also set the task's ``progressSummary`` (docs/agents-tasks.md §1.2)."""

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        self._sent: set[str] = set()
        self._lock = threading.Lock()

    def claim(self, name: str) -> bool:
        """True the first time ``name`` is claimed this round (always for other events)."""
        if name not in ONCE_PER_ROUND:
            return True
        with self._lock:
            if name in self._sent:
                return False
            self._sent.add(name)
            return True

    def send(self, name: str, detail: str, data: EventData | dict[str, JsonValue] | None = None) -> None:
        """Emit ``name`` unless it was already sent this round; never raises. ``data``: as for
        :func:`emit` (this is also the drivers' :data:`~tianshu_mcp.adapters.round.EventSink`)."""
        if not self.claim(name):
            return
        if name in ("progress", "agent_tool_call"):
            try:
                store().update(self.task_id, progressSummary=detail[:500])
            except Exception as exc:  # noqa: BLE001 - a note must never end a task
                log.warning("task %s: progress not recorded: %s", self.task_id, exc)
        if name == "progress":
            name = "note"
        emit(self.task_id, name, "running", detail, data)


class _Watch:
    """A daemon thread calling :meth:`_look` every ``interval_s`` s between :meth:`_begin` and
    :meth:`_end` (the context manager of a round's agent run)."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _begin(self, name: str) -> None:
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def _end(self) -> bool:
        """Stop the thread; True when it had been started."""
        self._stop.set()
        if self._thread is None:
            return False
        self._thread.join(timeout=5)
        return True

    def _look(self) -> bool:
        raise NotImplementedError

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            if self._look():
                return


class ChangeWatch(_Watch):
    """Emit ``file_modification_started`` once, when the agent first changes the work tree.

    Use as a context manager around the agent's run; ``interval_s`` between two looks.
    """

    def __init__(self, task_id: str, project: str, rnd: int, interval_s: float = 1.0,
                 events: RoundEvents | None = None, owned_paths: Sequence[str] = (),
                 snapshot: TreeSnapshot | None = None) -> None:
        super().__init__(interval_s)
        self.task_id, self.project, self.round = task_id, project, rnd
        self.events = events or RoundEvents(task_id)
        self.owned_paths = tuple(owned_paths)
        self.snapshot = snapshot or TreeSnapshot(project)  # the state before the agent (shared)

    def _mine(self, state: TreeState) -> TreeState:
        """``state`` without the files the agent's CLI keeps for itself (``ownedPaths``)."""
        if state is None or not self.owned_paths:
            return state
        return frozenset(row for row in state if not owned_by_cli(row[0], self.owned_paths))

    def __enter__(self) -> Self:
        self._start = self._mine(self.snapshot.state)
        self._sent = False
        if self._start is not None:
            self._begin("tianshu-change-watch")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._end():
            self._look()  # an agent quicker than one interval: look once more

    def _look(self) -> bool:
        if self._sent or self._start is None:
            return True
        now = self._mine(_tree_state(self.project))
        if now is None or now == self._start:
            return False
        self._sent = True
        changed = sorted({row[0] for row in now ^ self._start})
        self.events.send("file_modification_started",
                         _("round {round}: the agent started changing files ({files})").format(
                             round=self.round, files=", ".join(changed[:5])),
                         EventData(round=self.round, files=changed[:20]))
        return True


class LogTail:
    """The lines appended to an agent's log since the round began, without our spawn header.

    :meth:`lines` returns the complete lines written since the last call (at most 1 MiB per
    call; the last partial line waits for its end unless ``final``), stripped; the header
    ``===== spawn: … =====`` quotes the argv, the brief included, and is skipped.
    """

    def __init__(self, log_file: Path) -> None:
        self.log_file = Path(log_file)
        try:
            self._offset = self.log_file.stat().st_size  # earlier rounds' lines are not this round's
        except OSError:
            self._offset = 0
        self._partial = b""
        self._in_header = False

    def lines(self, final: bool = False) -> list[str]:
        """New complete lines (see the class doc); [] when the log cannot be read."""
        try:
            with open(self.log_file, "rb") as fh:
                fh.seek(self._offset)
                chunk = fh.read(1 << 20)
        except OSError:
            return []
        self._offset += len(chunk)
        data = self._partial + chunk
        raw_lines = data.split(b"\n")
        self._partial = b"" if final else raw_lines.pop()[-(1 << 20):]
        out = []
        for raw in raw_lines:
            line = raw.decode("utf-8", "replace").strip()
            if line.startswith("===== spawn:"):  # our own header quotes the argv, the brief included
                self._in_header = True
            if self._in_header:
                self._in_header = not re.search(r"@ \S+ =====$", line)
                continue
            if line and not line.startswith("[exit] "):
                out.append(line)
        return out


class PromptWatch(_Watch):
    """Emit ``confirmation_dialog_detected`` / ``awaiting_user_authorization`` (once each per
    round) when the agent's log shows a line asking for a confirmation / a login.

    Use as a context manager around the agent's run; reads only what was appended since the
    last look (every ``interval_s`` s, :class:`LogTail`), and once more on exit.
    """

    def __init__(self, task_id: str, log_file: Path, rnd: int, classifier: PromptClassifier,
                 interval_s: float = 0.5, events: RoundEvents | None = None) -> None:
        super().__init__(interval_s)
        self.task_id, self.log_file, self.round = task_id, Path(log_file), rnd
        self.events = events or RoundEvents(task_id)
        self._classifier = classifier
        self._sent: set[str] = set()

    def __enter__(self) -> Self:
        self._tail = LogTail(self.log_file)
        self._begin("tianshu-prompt-watch")
        return self

    def __exit__(self, *exc: object) -> None:
        self._end()
        self._look(final=True)

    def _look(self, final: bool = False) -> bool:
        for line in self._tail.lines(final):
            kind = self._classifier.classify(strip_ansi(line))
            if kind is None or kind in self._sent:
                continue
            self._sent.add(kind)
            said = (_("round {round}: the agent asks to log in / authorize: {line}") if kind == AUTHORIZATION
                    else _("round {round}: the agent shows a confirmation prompt: {line}"))
            quoted = strip_ansi(line)[:QUOTE_CHARS]
            self.events.send(kind, said.format(round=self.round, line=quoted), EventData(round=self.round, line=quoted))
        return len(self._sent) == 2  # both said: nothing more to look for
