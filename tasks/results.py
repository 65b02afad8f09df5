"""Typed results that cross the Prefect task boundary: one agent round, one verification round.

``dispatch-round-{r}`` returns a :class:`RoundResult`, ``verify-round-{r}`` a :class:`Verdict`
(as the task's result, or as the data of its Failed/Cancelled state when the round did not pass).
Both are pydantic models, which Prefect serialises as task results; the flows read attributes,
never string keys. ``to_json`` gives the camelCase objects the reports and logs have always used.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from ..core.record import ErrorType, RoundVerdict, VerificationSource


class Usage(BaseModel):
    """Tokens and cost an agent's structured output reported for a round (None fields: not said)."""

    inputTokens: int | None = None
    outputTokens: int | None = None
    costUsd: float | None = None


class AgentRun(BaseModel):
    """What a round's report says about the agent (the verification's ``agent_run``, the report's
    ``agent``): ``{exitCode, durationMs, outputTail, fatalLine, exitMeaning, usage, finalMessage,
    toolCalls}`` (None: not known)."""

    model_config = ConfigDict(frozen=True)

    exitCode: int | None = None
    durationMs: int | None = None
    outputTail: str = ""
    fatalLine: str | None = None
    exitMeaning: str | None = None
    usage: Usage | None = None
    finalMessage: str | None = None
    toolCalls: int = 0


class UnsupportedClaim(BaseModel):
    """A claim of the agent's final message the round's evidence does not support: ``{claim, why}``."""

    model_config = ConfigDict(frozen=True)

    claim: str
    why: str


class IntegrityFields(BaseModel):
    """``task.json`` fields of a round's integrity (docs/integrity.md): ``testIntegrity`` (the
    policy: ``protect`` | ``allow-test-edits`` | ``off``) and ``unsupportedClaims`` (``[{claim, why}]``).
    None clears the previous round's value when the round is recorded."""

    model_config = ConfigDict(frozen=True)

    testIntegrity: str | None = None
    unsupportedClaims: list[UnsupportedClaim] | None = None


class VerdictFields(BaseModel):
    """The ``task.json`` fields a verification round writes (:meth:`Verdict.record_fields`):
    ``{reportMd, reportJson, reportHtml, reportRound, verificationSource, latestVerificationVerdict,
    changedFiles, diffstat, testIntegrity, unsupportedClaims}``; every one is written (None deletes
    the key: no html report, no integrity section). ``model_dump(mode="json")`` gives the store's kwargs."""

    model_config = ConfigDict(frozen=True)

    reportMd: str
    reportJson: str
    reportHtml: str | None = None
    reportRound: int
    verificationSource: VerificationSource
    latestVerificationVerdict: RoundVerdict
    changedFiles: list[str]
    diffstat: str
    testIntegrity: str | None = None
    unsupportedClaims: list[UnsupportedClaim] | None = None


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
        output_tail: the agent's own output (the log without our spawn header and ``[exit]``
            trailer), its last 2000 characters from a line start, ANSI codes removed.
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
    exit_code: int | None = None
    timeout: bool = False
    killed: bool = False
    cancel_requested: bool = False
    error: str | None = None
    duration_ms: int | None = None
    log_file: str | None = None
    hard_failure: bool = False
    error_type: ErrorType | None = None
    output_tail: str = ""
    fatal_line: str | None = None
    agent_stuck: bool = False
    exit_meaning: str | None = None
    usage: Usage | None = None
    final_message: str | None = None
    tool_calls: int = 0
    question: str | None = None
    question_kind: str | None = None
    gui_stop: dict[str, bool] | None = None

    @classmethod
    def hard(cls, error_type: ErrorType, error: str) -> RoundResult:
        """A round whose agent never ran (an unreadable profile file, an unresolved agent)."""
        return cls(hard_failure=True, error_type=error_type, error=error)

    def agent_run(self) -> AgentRun:
        """What the report says about the agent (the verification's ``agent_run`` input)."""
        return AgentRun(exitCode=self.exit_code, durationMs=self.duration_ms, outputTail=self.output_tail,
                        fatalLine=self.fatal_line, exitMeaning=self.exit_meaning, usage=self.usage,
                        finalMessage=self.final_message, toolCalls=self.tool_calls)


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
        integrity: ``task.json`` fields of the round's integrity (:class:`IntegrityFields`:
            ``testIntegrity``, ``unsupportedClaims``; None values clear them).
        cancelled: the round was stopped by a cancel (no verdict on the work).
    """

    model_config = ConfigDict(frozen=True)

    round: int
    passed: bool
    md_path: str
    json_path: str
    html_path: str | None = None
    failed_checks: list[str] = []
    blocking_issues: list[Issue] = []
    integrity_issues: list[Issue] = []
    changed_files: list[str] = []
    diffstat: str = "+0 -0"
    message: str = ""
    summary: str = ""
    visual_blocked: bool = False
    integrity: IntegrityFields = IntegrityFields()
    cancelled: bool = False

    def record_fields(self, source: VerificationSource | str) -> VerdictFields:
        """The ``task.json`` fields of this verdict (``source``: auto / manual / scheduled)."""
        return VerdictFields(reportMd=self.md_path, reportJson=self.json_path, reportHtml=self.html_path,
                             reportRound=self.round, verificationSource=VerificationSource(source),
                             latestVerificationVerdict=RoundVerdict.PASSED if self.passed else RoundVerdict.FAILED,
                             changedFiles=self.changed_files, diffstat=self.diffstat,
                             testIntegrity=self.integrity.testIntegrity,
                             unsupportedClaims=self.integrity.unsupportedClaims)

    def blocking_text(self, separator: str) -> str:
        """``[CODE] message`` of every blocking issue, joined by ``separator``."""
        return separator.join(f"[{i.code}] {i.message}" for i in self.blocking_issues)
