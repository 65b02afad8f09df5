"""What the agent's output says while it works, forwarded as it happens (docs/real-agents.md §3–§4).

:class:`OutputWatch` reads the round's log as it grows (:class:`~.events.LogTail`) in the
profile's ``outputFormat`` (:mod:`tianshu_mcp.adapters.output.formats`) and

* sends each tool call as ``agent_tool_call`` (the tool and the files it names) and each retried
  model call as ``agent_model_retry`` to the task's event stream (``query_task.recentEvents``)
  and the Prefect flow-run log;
* sums token and cost figures and keeps the agent's final message (the report and the
  integrity claim check read them);
* ends the round through the driver's stop probe when a retry loop on 401/403/429 goes on
  (:class:`~tianshu_mcp.adapters.output.liveness.Liveness`): :attr:`stuck` then holds the CLI's
  own line, and the round is an agent failure, not a cancel;
* sends ``agent_stalled`` (with the last line seen) when the agent printed nothing and changed
  nothing for the profile's ``stallAfterMs``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Self

from ..adapters.output.events import (
    FinalMessage,
    GaveUp,
    ModelRetry,
    ToolUse,
    Usage,
    UsageTotals,
)
from ..adapters.output.formats import OutputReader
from ..adapters.output.liveness import Liveness, Stuck
from ..core.i18n import _
from .events import EventData, LogTail, RoundEvents, TreeSnapshot, TreeState, _tree_state, _Watch

log = logging.getLogger("tianshu_mcp")


class OutputWatch(_Watch):
    """Follow one round's output (see the module doc). Use as a context manager around the run.

    Args:
        task_id: the task.
        log_file: the round's ``agent-<round>.log``.
        rnd: the round.
        reader: the profile's output reader.
        liveness: the round's retry and stall policy.
        project: the work tree (a silent agent that changed it is not stalled); "" for none.
        events: the round's event sender.
        run_logger: the Prefect flow-run logger (or any logger); None: the module's logger.
        interval_s: time between two looks, s.
        snapshot: the work tree's state before the agent, shared with the round's other watches
            (default: taken when the watch is entered).
    """

    def __init__(self, task_id: str, log_file: Path, rnd: int, reader: OutputReader, liveness: Liveness,
                 project: str = "", events: RoundEvents | None = None,
                 run_logger: logging.Logger | logging.LoggerAdapter | None = None,  # type: ignore[type-arg]
                 interval_s: float = 0.5, snapshot: TreeSnapshot | None = None) -> None:
        super().__init__(interval_s)
        self.task_id, self.log_file, self.round = task_id, Path(log_file), rnd
        self.reader, self.liveness, self.project = reader, liveness, project
        self.events = events or RoundEvents(task_id)
        self.logger = run_logger or log
        self.usage = UsageTotals()
        self.final_message: str | None = None
        self.gave_up: GaveUp | None = None
        self.stuck: Stuck | None = None
        self.tool_calls = 0
        self._in_delta = False
        self._tree: TreeState = None
        self.snapshot = snapshot or TreeSnapshot(project)  # the state before the agent (shared)

    def __enter__(self) -> Self:
        self._tail = LogTail(self.log_file)
        self._tree = self.snapshot.state
        self._begin("tianshu-output-watch")
        return self

    def __exit__(self, *exc: object) -> None:
        self._end()
        self._look(final=True)

    def should_stop(self) -> bool:
        """True once the round must end on a retry loop (for the driver's stop probe)."""
        return self.stuck is not None

    def _look(self, final: bool = False) -> bool:
        for line in self._tail.lines(final):
            self.liveness.activity(line)
            for event in self.reader.read(line):
                self.liveness.saw(event)
                self._forward(event)
        if self.stuck is None and not final:
            self.stuck = self.liveness.stuck()
            if self.stuck is not None:
                said = _("round {round}: the agent keeps retrying a failed model call ({retries} retries): {line}; "
                         "the round ends as an agent failure").format(round=self.round, retries=self.stuck.retries,
                                                                      line=self.stuck.line)
                self.logger.warning(said)
                self.events.send("agent_model_retry", said, EventData(round=self.round, status=self.stuck.status,
                                                                      line=self.stuck.line, ending=True))
        if not final and self.liveness.stalled():
            self._stalled()
        return False

    def _stalled(self) -> None:
        if self.project:
            now = _tree_state(self.project)
            if now is not None and now != self._tree:
                self._tree = now
                self.liveness.activity()
                return
        seconds = self.liveness.stall_after_ms // 1000
        last = self.liveness.last_line or _("(nothing yet)")
        said = _("round {round}: the agent printed nothing and changed nothing for {s} s; last line: {line}").format(
            round=self.round, s=seconds, line=last)
        self.logger.warning(said)
        self.events.send("agent_stalled", said, EventData(round=self.round, silentS=seconds, lastLine=last))

    def _forward(self, event: object) -> None:
        if not (isinstance(event, FinalMessage) and event.delta):
            self._in_delta = False
        if isinstance(event, ToolUse):
            self.tool_calls += 1
            what = event.detail or ", ".join(event.files)
            said = _("round {round}: {tool} {what}").format(round=self.round, tool=event.name, what=what).rstrip()
            self.logger.info(said)
            self.events.send("agent_tool_call", said, EventData(round=self.round, tool=event.name,
                                                                files=list(event.files)[:20]))
        elif isinstance(event, ModelRetry):
            said = _("round {round}: the agent retries a failed model call: {line}").format(round=self.round,
                                                                                          line=event.line)
            self.logger.warning(said)
            self.events.send("agent_model_retry", said, EventData(round=self.round, status=event.status,
                                                                  line=event.line, attempt=event.attempt))
        elif isinstance(event, Usage):
            self.usage.add(event)
        elif isinstance(event, FinalMessage):
            continues = event.delta and self._in_delta and self.final_message is not None
            self.final_message = (self.final_message or "") + event.text if continues else event.text
            self._in_delta = event.delta
        elif isinstance(event, GaveUp):
            self.gave_up = event
