"""The round policy (flows/policy.py decide) over every combination of round outcome × rounds
left × policy, against the rules of docs/agents-tasks.md §3 as this build states them."""

from __future__ import annotations

import itertools

import pytest
from tianshu_mcp.core.model import TaskStatus as S
from tianshu_mcp.core.record import ErrorType as E
from tianshu_mcp.flows.policy import (
    Action,
    AgentEnd,
    Budget,
    Next,
    Policy,
    Reason,
    RoundOutcome,
    VerdictKind,
    decide,
)

END = Action.END

# (round, autoFixRounds): first round without rework, rework left, the last automatic round, a
# manual rework past the limit
BUDGETS = [Budget(0, 0), Budget(0, 2), Budget(1, 2), Budget(2, 2), Budget(3, 2)]
POLICIES = [Policy(auto_verify=v, remote=r) for v in (True, False) for r in (False, True)]
# how the agent exited: (ok, exit code, fatal line)
EXITS = [(True, 0, False), (True, 0, True), (False, 1, False), (False, 1, True), (False, None, True)]
HARD_TYPES = [None, E.SETUP_FAILED, E.AGENT_UNRESOLVED, E.CDP_DISCONNECTED]


def outcomes() -> list[RoundOutcome]:
    """Every round outcome the flow can build: each agent end with each exit, each verdict
    (or none yet), changed files or not, git's refusal or not, a cancel or not."""
    out = []
    for end, (ok, code, fatal), verdict, changed, git, cancel in itertools.product(
            AgentEnd, EXITS, [None, *VerdictKind], (False, True), (False, True), (False, True)):
        for hard in HARD_TYPES if end is AgentEnd.HARD_FAILURE else [None]:
            out.append(RoundOutcome(end, ok=ok, exit_code=code, fatal_line=fatal, error_type=hard, verdict=verdict,
                                    changed_files=changed, git_refused=git, cancel_requested=cancel))
    return out


def expected(o: RoundOutcome, b: Budget, p: Policy) -> Next:
    """The rules, first match wins (docs/agents-tasks.md §3; flows/policy.py decide's docstring)."""
    if o.cancel_requested or o.end is AgentEnd.KILLED:
        return Next(Action.END_CANCELLED, reason=Reason.CANCELLED)
    if o.end is AgentEnd.QUESTION:
        return (Next(END, S.NEEDS_ATTENTION, E.NEEDS_USER_UNSUPPORTED, Reason.REMOTE_QUESTION, True) if p.remote
                else Next(Action.ASK_USER))
    if o.end is AgentEnd.HARD_FAILURE:
        return Next(END, S.FAILED, o.error_type or E.SPAWN, Reason.HARD_FAILURE)
    if o.end is AgentEnd.TIMEOUT:
        return Next(END, S.FAILED, E.TIMEOUT, Reason.TIMEOUT, True)
    if o.end is AgentEnd.IDLE_TIMEOUT:
        return Next(END, S.FAILED, E.IDLE_TIMEOUT, Reason.IDLE_TIMEOUT, True)
    if not p.auto_verify:
        return (Next(END, S.SUCCEEDED, None, Reason.DONE_UNVERIFIED, True) if o.ok
                else Next(END, S.FAILED, E.AGENT_FAILED, Reason.AGENT_FAILED, True))
    if o.verdict is None:
        return Next(Action.VERIFY)
    if o.exit_code != 0 or (o.fatal_line and not o.changed_files):
        return Next(END, S.FAILED, E.AGENT_FAILED, Reason.AGENT_FAILED)
    if o.verdict is VerdictKind.BLOCKED:
        return Next(END, S.NEEDS_ATTENTION, E.GIT_FAILED if o.git_refused else E.VERIFY_FAILED, Reason.BLOCKED)
    if o.verdict is VerdictKind.PASSED:
        return Next(END, S.SUCCEEDED, None, Reason.PASSED)
    if b.round < b.auto_fix_rounds:
        return Next(Action.REWORK)
    if b.auto_fix_rounds == 0:
        return Next(END, S.FAILED, E.VERIFY_FAILED, Reason.REWORK_OFF)
    return Next(END, S.NEEDS_ATTENTION, None, Reason.ROUNDS_USED_UP)


def test_every_combination_of_outcome_budget_and_policy() -> None:
    combos = list(itertools.product(outcomes(), BUDGETS, POLICIES))
    assert len(combos) > 10_000
    wrong = [(o, b, p, decide(o, b, p), expected(o, b, p)) for o, b, p in combos if decide(o, b, p) != expected(o, b, p)]
    assert not wrong, wrong[:5]
    # the shape of every answer: an ending names its status and reason, the other steps neither
    for o, b, p in combos:
        n = decide(o, b, p)
        assert (n.action is END) == (n.status is not None) == (n.reason is not None and n.action is not Action.END_CANCELLED)
        assert n.action is not Action.VERIFY or (p.auto_verify and o.verdict is None)
        assert n.action is not Action.REWORK or (o.verdict is VerdictKind.FAILED and b.round < b.auto_fix_rounds)


# a few rows written out, as a reader checks them
ROWS = [
    ("a passing first round", RoundOutcome(AgentEnd.EXITED, verdict=VerdictKind.PASSED, changed_files=True),
     Budget(0, 2), Policy(), Next(END, S.SUCCEEDED, None, Reason.PASSED)),
    ("a failing round with rework left", RoundOutcome(AgentEnd.EXITED, verdict=VerdictKind.FAILED, changed_files=True),
     Budget(0, 2), Policy(), Next(Action.REWORK)),
    ("the last automatic round fails", RoundOutcome(AgentEnd.EXITED, verdict=VerdictKind.FAILED, changed_files=True),
     Budget(2, 2), Policy(), Next(END, S.NEEDS_ATTENTION, None, Reason.ROUNDS_USED_UP)),
    ("rework off", RoundOutcome(AgentEnd.EXITED, verdict=VerdictKind.FAILED), Budget(0, 0), Policy(),
     Next(END, S.FAILED, E.VERIFY_FAILED, Reason.REWORK_OFF)),
    ("an agent that said it gave up and changed nothing: no rework spent",
     RoundOutcome(AgentEnd.EXITED, fatal_line=True, verdict=VerdictKind.FAILED), Budget(0, 2), Policy(),
     Next(END, S.FAILED, E.AGENT_FAILED, Reason.AGENT_FAILED)),
    ("a fatal-looking line but real changes that pass", RoundOutcome(AgentEnd.EXITED, fatal_line=True,
     verdict=VerdictKind.PASSED, changed_files=True), Budget(0, 2), Policy(), Next(END, S.SUCCEEDED, None, Reason.PASSED)),
    ("git refused during verification", RoundOutcome(AgentEnd.EXITED, verdict=VerdictKind.BLOCKED, git_refused=True),
     Budget(0, 2), Policy(), Next(END, S.NEEDS_ATTENTION, E.GIT_FAILED, Reason.BLOCKED)),
    ("a cancel that arrived while verifying", RoundOutcome(AgentEnd.EXITED, verdict=VerdictKind.PASSED,
     cancel_requested=True), Budget(0, 2), Policy(), Next(Action.END_CANCELLED, reason=Reason.CANCELLED)),
    ("a remote task's agent asks", RoundOutcome(AgentEnd.QUESTION), Budget(0, 2), Policy(remote=True),
     Next(END, S.NEEDS_ATTENTION, E.NEEDS_USER_UNSUPPORTED, Reason.REMOTE_QUESTION, True)),
    ("the agent ran, not verified yet", RoundOutcome(AgentEnd.EXITED), Budget(0, 0), Policy(), Next(Action.VERIFY)),
    ("verification off, exit 0", RoundOutcome(AgentEnd.EXITED), Budget(0, 0), Policy(auto_verify=False),
     Next(END, S.SUCCEEDED, None, Reason.DONE_UNVERIFIED, True)),
    ("a spawn failure", RoundOutcome(AgentEnd.HARD_FAILURE), Budget(0, 2), Policy(),
     Next(END, S.FAILED, E.SPAWN, Reason.HARD_FAILURE)),
]


@pytest.mark.parametrize(("what", "outcome", "budget", "policy", "want"), ROWS, ids=[r[0] for r in ROWS])
def test_rows(what: str, outcome: RoundOutcome, budget: Budget, policy: Policy, want: Next) -> None:
    assert decide(outcome, budget, policy) == want
