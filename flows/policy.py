"""The round policy: what a run-task flow does after each step of a round (docs/agents-tasks.md §3).

:func:`decide` is a pure function of what the round did (:class:`RoundOutcome`), the rounds left
(:class:`Budget`) and the task's settings (:class:`Policy`); it returns the :class:`Next` step:
verify, rework, ask the user, or end with a status, an error type and the reason the ending
message states. The flow (:mod:`.run_task`) only carries the steps out, so every rule of the
loop is here, in order, and table-tested (``tests/test_round_policy.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ..core.model import TaskStatus
from ..core.record import ErrorType


class AgentEnd(str, Enum):
    """How the agent's round ended, as far as the policy cares."""

    EXITED = "exited"  # it ran and ended by itself (exit code in RoundOutcome.exit_code)
    KILLED = "killed"  # stopped by a cancel (its tree was killed)
    QUESTION = "question"  # it asks the user
    HARD_FAILURE = "hard_failure"  # it could not run at all (spawn, setup, unresolved, connection lost)
    TIMEOUT = "timeout"  # the task's timeout
    IDLE_TIMEOUT = "idle_timeout"  # a desktop agent that showed no reply within its idle limit


class VerdictKind(str, Enum):
    """The verification round's verdict, as far as the policy cares."""

    PASSED = "passed"
    FAILED = "failed"  # checks (or the agent's own integrity) failed: reworkable
    BLOCKED = "blocked"  # something a person must fix blocks the round (no rework)


class Action(str, Enum):
    """The flow's next step."""

    VERIFY = "verify"
    REWORK = "rework"
    ASK_USER = "ask_user"
    END = "end"
    END_CANCELLED = "end_cancelled"  # a cancel (or a shutdown) ended the round


class Reason(str, Enum):
    """Why the task ends (selects the ending message)."""

    CANCELLED = "cancelled"
    REMOTE_QUESTION = "remote_question"
    HARD_FAILURE = "hard_failure"
    TIMEOUT = "timeout"
    IDLE_TIMEOUT = "idle_timeout"
    AGENT_FAILED = "agent_failed"
    DONE_UNVERIFIED = "done_unverified"
    BLOCKED = "blocked"
    PASSED = "passed"
    REWORK_OFF = "rework_off"
    ROUNDS_USED_UP = "rounds_used_up"


@dataclass(frozen=True)
class RoundOutcome:
    """What the round did.

    Attributes:
        end: how the agent's run ended.
        ok: it exited 0 on its own.
        exit_code: its exit code (EXITED), None when it has none (a retry loop ended it).
        fatal_line: the agent said it gave up (a recognised failure line).
        error_type: HARD_FAILURE's kind (spawn, setup_failed, agent_unresolved, cdp_disconnected;
            None: spawn).
        verdict: None until the round was verified.
        changed_files: the verification counted changes by the agent.
        git_refused: a blocking issue is git's refusal (GIT_FAILED), not the acceptance config's.
        cancel_requested: a cancel arrived (checked again after the verification).
    """

    end: AgentEnd
    ok: bool = True
    exit_code: int | None = 0
    fatal_line: bool = False
    error_type: ErrorType | None = None
    verdict: VerdictKind | None = None
    changed_files: bool = False
    git_refused: bool = False
    cancel_requested: bool = False


@dataclass(frozen=True)
class Budget:
    """The rounds: ``round`` is this round's 0-based index (a rework continues the count),
    ``auto_fix_rounds`` the task's absolute limit (docs/agents-tasks.md §3.4d: a reworked task
    whose rounds are used up still gets the round it was reworked for, no automatic one)."""

    round: int
    auto_fix_rounds: int

    @property
    def rework_left(self) -> bool:
        """An automatic rework round is left after this one."""
        return self.round < self.auto_fix_rounds


@dataclass(frozen=True)
class Policy:
    """The task's settings that shape the loop: verification on, and whether the task runs on a
    remote worker (which cannot wait for an answer: a question ends it)."""

    auto_verify: bool = True
    remote: bool = False


@dataclass(frozen=True)
class Next:
    """The step :func:`decide` chose. For END: the status, the error type (None when the
    ending has none) and the reason; ``spends_round``: the round counts as used."""

    action: Action
    status: TaskStatus | None = None
    error_type: ErrorType | None = None
    reason: Reason | None = None
    spends_round: bool = False


def _end(status: TaskStatus, error_type: ErrorType | None, reason: Reason, spends_round: bool = False) -> Next:
    return Next(Action.END, status, error_type, reason, spends_round)


def _agent_failed(outcome: RoundOutcome) -> bool:
    """An agent that failed is an agent failure, not a verification failure: a non-zero (or no)
    exit code, or a recognised failure line with nothing changed (docs/lifecycle.md)."""
    return outcome.exit_code != 0 or (outcome.fatal_line and not outcome.changed_files)


def decide(outcome: RoundOutcome, budget: Budget, policy: Policy) -> Next:
    """The flow's next step after the agent's run (``verdict`` None) or after its verification.

    Rules, first match wins:

    1. a cancel → END_CANCELLED;
    2. a question: on a remote worker → needs_attention / needs_user_unsupported; else ASK_USER;
    3. the agent could not run → failed / its error type (spawn when none is said);
    4. the task's timeout → failed / timeout; a desktop agent's idle limit → failed / idle_timeout;
    5. verification off: exited 0 on its own → succeeded, else failed / agent_failed;
    6. not verified yet → VERIFY;
    7. the agent failed (see :func:`_agent_failed`) → failed / agent_failed, no rework spent;
    8. blocked → needs_attention / git_failed when git refused, else verify_failed;
    9. passed → succeeded;
    10. failed with a rework round left → REWORK;
    11. failed, automatic rework off (``autoFixRounds`` 0) → failed / verify_failed;
    12. failed, rework rounds used up → needs_attention (no error type).
    """
    if outcome.cancel_requested or outcome.end is AgentEnd.KILLED:
        return Next(Action.END_CANCELLED, reason=Reason.CANCELLED)
    if outcome.end is AgentEnd.QUESTION:
        if policy.remote:
            return _end(TaskStatus.NEEDS_ATTENTION, ErrorType.NEEDS_USER_UNSUPPORTED, Reason.REMOTE_QUESTION, True)
        return Next(Action.ASK_USER)
    if outcome.end is AgentEnd.HARD_FAILURE:
        return _end(TaskStatus.FAILED, outcome.error_type or ErrorType.SPAWN, Reason.HARD_FAILURE)
    if outcome.end is AgentEnd.TIMEOUT:
        return _end(TaskStatus.FAILED, ErrorType.TIMEOUT, Reason.TIMEOUT, True)
    if outcome.end is AgentEnd.IDLE_TIMEOUT:
        return _end(TaskStatus.FAILED, ErrorType.IDLE_TIMEOUT, Reason.IDLE_TIMEOUT, True)
    if not policy.auto_verify:
        if outcome.ok:
            return _end(TaskStatus.SUCCEEDED, None, Reason.DONE_UNVERIFIED, True)
        return _end(TaskStatus.FAILED, ErrorType.AGENT_FAILED, Reason.AGENT_FAILED, True)
    if outcome.verdict is None:
        return Next(Action.VERIFY)
    if _agent_failed(outcome):
        return _end(TaskStatus.FAILED, ErrorType.AGENT_FAILED, Reason.AGENT_FAILED)
    if outcome.verdict is VerdictKind.BLOCKED:
        return _end(TaskStatus.NEEDS_ATTENTION, ErrorType.GIT_FAILED if outcome.git_refused else ErrorType.VERIFY_FAILED,
                    Reason.BLOCKED)
    if outcome.verdict is VerdictKind.PASSED:
        return _end(TaskStatus.SUCCEEDED, None, Reason.PASSED)
    if budget.rework_left:
        return Next(Action.REWORK)
    if budget.auto_fix_rounds == 0:
        return _end(TaskStatus.FAILED, ErrorType.VERIFY_FAILED, Reason.REWORK_OFF)
    return _end(TaskStatus.NEEDS_ATTENTION, None, Reason.ROUNDS_USED_UP)
