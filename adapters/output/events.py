"""The typed events read from an agent's output (docs/real-agents.md §3–§4).

Every reader of :mod:`.formats` turns one output line into zero or more of these; the task's
output watch forwards them to the event stream and the Prefect flow-run log, sums the usage and
keeps the final message for the integrity claim check.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ToolUse:
    """The agent called a tool.

    Attributes:
        name: the tool's name as the CLI reports it (``Edit``, ``write_file``, ``shell``…).
        files: paths the call names (as given: absolute or relative to the project).
        detail: one line for a person (the command, the path), ≤ 200 chars.
    """

    name: str
    files: tuple[str, ...] = ()
    detail: str = ""


@dataclass(frozen=True)
class ModelRetry:
    """The CLI retries a model call that failed.

    Attributes:
        status: the HTTP status of the failure (401, 429, 500…), None when unknown (a lost
            connection).
        line: the CLI's own words for it, ≤ 300 chars.
        attempt: the CLI's attempt number when it says so, else None.
        delay_ms: the wait the CLI announces before its next try, ms, else None.
    """

    status: int | None
    line: str
    attempt: int | None = None
    delay_ms: int | None = None


@dataclass(frozen=True)
class Usage:
    """Token and cost figures of the run so far (the CLI's totals when it reports totals).

    Attributes:
        input_tokens: prompt tokens (cached ones included).
        output_tokens: completion tokens.
        cost_usd: the CLI's own cost figure in US dollars, None when it gives none.
        total: True when these are the run's totals (they replace earlier figures), False for
            one call's figures (they add up).
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    total: bool = False


@dataclass(frozen=True)
class FinalMessage:
    """The agent's last message to the user (what the claim check reads); ``delta``: a piece that
    continues the previous piece (Gemini CLI streams its text), not a whole message."""

    text: str
    delta: bool = False


@dataclass(frozen=True)
class GaveUp:
    """The CLI reports that the run failed (its own line, ≤ 300 chars; HTTP status when known)."""

    line: str
    status: int | None = None


OutputEvent = ToolUse | ModelRetry | Usage | FinalMessage | GaveUp


@dataclass
class UsageTotals:
    """Usage summed over a round: :meth:`add` takes each :class:`Usage` event."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    calls: int = 0
    _totals: list[Usage] = field(default_factory=list)

    def add(self, usage: Usage) -> None:
        """Count one event: a total replaces what was counted, a per-call figure adds to it."""
        if usage.total:
            self.input_tokens, self.output_tokens, self.cost_usd = usage.input_tokens, usage.output_tokens, usage.cost_usd
        else:
            self.input_tokens += usage.input_tokens
            self.output_tokens += usage.output_tokens
            if usage.cost_usd is not None:
                self.cost_usd = (self.cost_usd or 0.0) + usage.cost_usd
        self.calls += 1

    def to_json(self) -> dict[str, object] | None:
        """``{"inputTokens", "outputTokens", "costUsd"}``, or None when nothing was reported."""
        if not self.calls:
            return None
        return {"inputTokens": self.input_tokens, "outputTokens": self.output_tokens, "costUsd": self.cost_usd}
