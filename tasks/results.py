"""Typed results that cross the Prefect task boundary: one agent round, one verification round.

``dispatch-round-{r}`` returns a :class:`RoundResult`, ``verify-round-{r}`` a :class:`Verdict`
(as the task's result, or as the data of its Failed/Cancelled state when the round did not pass).
Both are pydantic models, which Prefect serialises as task results; the flows read attributes,
never string keys. ``to_json`` gives the camelCase objects the reports and logs have always used.
"""

from __future__ import annotations

from typing import Any, Optional

from pydantic import BaseModel, ConfigDict

from ..core.record import ErrorType


class Usage(BaseModel):
    """Tokens and cost an agent's structured output reported for a round (None fields: not said)."""

    inputTokens: Optional[int] = None
    outputTokens: Optional[int] = None
    costUsd: Optional[float] = None


class Issue(BaseModel):
    """A blocking or integrity issue of a report: ``{code, message}`` (more keys kept)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    code: str
    message: str = ""


class RoundResult(BaseModel):
    """What one agent round did (docs/agents-tasks.md §1.3 process fields, plus what its output said).

    Attributes:
        ok: the agent exited 0 on its own.
        exit_code: its exit code; None when it never started, timed out, was killed or was
            ended on a retry loop (``agent_stuck``).
        timeout: the round hit the task's timeout (its tree was killed).
        killed: stopped by a cancel (its tree was killed), possibly before it started.
        cancel_requested: the task's cancel marker was present when the round ended.
        error: what went wrong (spawn, setup, a retry loop), or None.
        duration_ms: wall time, ms.
        log_file: ``<taskDir>/agent-<round>.log`` (None when the agent was never resolved).
        hard_failure: an infrastructure failure (no round is spent, no verification runs).
        error_type: with ``hard_failure``: spawn / setup_failed / agent_unresolved /
            cdp_disconnected; without: idle_timeout or None.
        output_tail: the last 2000 characters of the log, ANSI codes removed.
        fatal_line: the line the agent gave up on (or a fatal pattern's match), or None.
        agent_stuck: the round was ended on a retry loop (an agent failure).
        exit_meaning: the profile's ``exitCodes`` entry for the exit code, or None.
        usage: ``{inputTokens, outputTokens, costUsd}`` or None.
        final_message: the agent's last message, or None.
        tool_calls: tool calls the agent's output reported.
        question / question_kind: what the agent asks the user and its ``needsUserKind``.
        gui_stop: a desktop agent's stop on cancel: ``{"clicked", "idle"}``, else None.
    """

    model_config = ConfigDict(frozen=True)

    ok: bool = False
    exit_code: Optional[int] = None
    timeout: bool = False
    killed: bool = False
    cancel_requested: bool = False
    error: Optional[str] = None
    duration_ms: Optional[int] = None
    log_file: Optional[str] = None
    hard_failure: bool = False
    error_type: Optional[ErrorType] = None
    output_tail: str = ""
    fatal_line: Optional[str] = None
    agent_stuck: bool = False
    exit_meaning: Optional[str] = None
    usage: Optional[Usage] = None
    final_message: Optional[str] = None
    tool_calls: int = 0
    question: Optional[str] = None
    question_kind: Optional[str] = None
    gui_stop: Optional[dict[str, bool]] = None

    @classmethod
    def hard(cls, error_type: ErrorType, error: str) -> RoundResult:
        """A round whose agent never ran (an unreadable profile file, an unresolved agent)."""
        return cls(hard_failure=True, error_type=error_type, error=error)

    def agent_run(self) -> dict[str, Any]:
        """What the report says about the agent (the verification's ``agent_run`` input):
        ``{exitCode, durationMs, outputTail, fatalLine, exitMeaning, usage, finalMessage, toolCalls}``."""
        return {"exitCode": self.exit_code, "durationMs": self.duration_ms, "outputTail": self.output_tail,
                "fatalLine": self.fatal_line, "exitMeaning": self.exit_meaning,
                "usage": self.usage.model_dump() if self.usage else None,
                "finalMessage": self.final_message, "toolCalls": self.tool_calls}


class Verdict(BaseModel):
    """One verification round's verdict (docs/acceptance.md §3.5), as the flows use it.

    Attributes:
        round: the report round actually written (``report-<round>.md``).
        passed: the round passed.
        md_path / json_path / html_path: the report files (html None when not written).
        failed_checks: names of failing mandatory checks.
        blocking_issues: ``[{code, message}]`` that block the round for a person.
        integrity_issues: the agent's own integrity failures (reworked like failing checks).
        changed_files: tracked and untracked paths the agent changed.
        diffstat: ``"+<added> -<deleted>"``.
        message / summary: the report's one-line message and its text summary.
        visual_blocked: a blocking issue came from the visual stage.
        integrity: ``task.json`` fields of the round's integrity (``testIntegrity``,
            ``unsupportedClaims``; None values clear them).
        cancelled: the round was stopped by a cancel (no verdict on the work).
    """

    model_config = ConfigDict(frozen=True)

    round: int
    passed: bool
    md_path: str
    json_path: str
    html_path: Optional[str] = None
    failed_checks: list[str] = []
    blocking_issues: list[Issue] = []
    integrity_issues: list[Issue] = []
    changed_files: list[str] = []
    diffstat: str = "+0 -0"
    message: str = ""
    summary: str = ""
    visual_blocked: bool = False
    integrity: dict[str, Any] = {}
    cancelled: bool = False

    def record_fields(self, source: str) -> dict[str, Any]:
        """The ``task.json`` fields of this verdict (``source``: auto / manual / scheduled)."""
        return {"reportMd": self.md_path, "reportJson": self.json_path, "reportHtml": self.html_path,
                "reportRound": self.round, "verificationSource": source,
                "latestVerificationVerdict": "passed" if self.passed else "failed",
                "changedFiles": self.changed_files, "diffstat": self.diffstat, **self.integrity}

    def blocking_text(self, separator: str) -> str:
        """``[CODE] message`` of every blocking issue, joined by ``separator``."""
        return separator.join(f"[{i.code}] {i.message}" for i in self.blocking_issues)
