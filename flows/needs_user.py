"""needs_user: an agent asks the user, the flow run waits suspended, ``continue`` answers
(docs/agents-tasks.md §2.8, §3.4b1; docs/architecture.md §4).

A CLI agent asks by writing its question to ``$TIANSHU_MCP_QUESTION_FILE`` and exiting
(:data:`tianshu_mcp.adapters.cli.QUESTION_ENV`). :func:`ask_user` records the question
(``needsUserKind``, ``pendingQuestion``, a markdown artifact and a ``needs_user`` event) and
suspends the flow run with Prefect's ``suspend_flow_run``: the flow-run process exits, the run is
``Suspended`` (status ``needs_user``) and holds no work-queue slot, so other tasks of the project
run meanwhile. The timeout is explicit and long (``needsUserTimeoutMs``, default 30 days; Prefect
fails a run that stays paused past its timeout, 1 h by default).

``manage_task(action="continue", message=…)`` resumes the run with ``{"message": …}`` as its run
input. Prefect runs a resumed suspended flow again from the top, behind a running task of the same
project; :func:`take_answer` then finds the answer (the same ``suspend_flow_run`` call returns
the input instead of suspending again) and the flow re-runs the asking round with the question and
the answer appended to that round's feedback. The round count does not move: asking is no round.
``continue`` also keeps the answer in ``task.json`` (``continueMessage``, ``continueKey``) before it
resumes the run; a resumed run that cannot read its run input takes it from there, and says so
in a ``note`` event (an answer is never silently dropped and the question never asked twice).
"""

from __future__ import annotations

import logging
from typing import NoReturn

from prefect.artifacts import create_markdown_artifact
from prefect.flow_runs import suspend_flow_run
from prefect.input import RunInput

from ..core.i18n import _
from ..core.model import NO_QUESTION
from ..core.settings import load_config
from ..tasks.common import record, store
from ..tasks.verify import artifact_key

log = logging.getLogger("tianshu_mcp")

AGENT_QUESTION = "agent_question"
"""``needsUserKind`` of a question a CLI agent asked."""


class ContinueInput(RunInput):
    """The run input of a resumed needs_user flow run: the user's answer."""

    message: str


def _timeout_s() -> int:
    return max(60, load_config().needs_user_timeout_ms // 1000)


def ask_user(task_id: str, rnd: int, question: str, feedback: str | None, kind: str | None = None) -> NoReturn:
    """Record the agent's question and suspend the flow run (never returns: Prefect's ``Pause``
    ends the flow-run process).

    Args:
        task_id: the task.
        rnd: the round that asked (re-run after the answer).
        question: the agent's question (≤ 64 KiB).
        feedback: the feedback that round was given (kept for its re-run).
        kind: ``needsUserKind``: ``agent_question`` (the default: a CLI agent's question file),
            ``user_confirmation`` (an ACP permission request the profile's policy leaves to the
            user), ``login_required`` (a desktop app's login screen).
    """
    kind = kind or AGENT_QUESTION
    st = store()
    meta = st.read(task_id) or {}
    count = int(meta.get("needsUserCount") or 0) + 1
    key = f"needs-user-{count}"
    record(task_id, needsUserKind=kind, pendingQuestion=question, needsUserQuestion=question,
           needsUserRound=rnd, needsUserKey=key,
           needsUserCount=count, needsUserFeedback=feedback, phase=None,
           lastMessage=_("round {round}: the agent asks the user: {question}").format(round=rnd, question=question[:500]))
    st.event(task_id, "needs_user", "needs_user", question[:500], {"round": rnd, "kind": kind})
    try:
        create_markdown_artifact(key=artifact_key(task_id, f"question-{count}"),
                                 markdown=f"# The agent asks (round {rnd})\n\n{question}\n\n"
                                          f"Answer with manage_task(action=\"continue\", taskId=\"{task_id}\", message=…).",
                                 description=f"needs_user: the agent's question, round {rnd}")
    except Exception:  # noqa: BLE001 - the task record holds the question; the artifact is a view
        log.warning("could not publish the question artifact of %s", task_id)
    suspend_flow_run(wait_for_input=ContinueInput, timeout=_timeout_s(), key=key)
    raise RuntimeError("suspend_flow_run returned without suspending")  # pragma: no cover


def take_answer(task_id: str) -> tuple[int, str, str] | None:
    """On a flow run's (re)start: ``(round to re-run, its feedback, the answer)`` when the run
    was resumed with an answer, else None. Clears the question from ``task.json``."""
    st = store()
    meta = st.read(task_id) or {}
    key = meta.get("needsUserKey")
    if not key:
        return None
    kept = meta.get("continueMessage") if meta.get("continueKey") == key else None
    answer: str | None
    try:
        answer = str(getattr(suspend_flow_run(wait_for_input=ContinueInput, timeout=_timeout_s(), key=key),
                             "message", "") or "")
    except Exception as exc:  # noqa: BLE001 - no run input: not resumed with an answer (cancelled or
        # timed out, then reworked), or it could not be read: the answer continue kept, else none
        why = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
        answer = kept if isinstance(kept, str) else None
        how = "the answer kept in task.json is used" if answer is not None else "the round re-runs without one"
        log.warning("task %s: the run input with the user's answer could not be read (%s); %s", task_id, why, how)
        st.event(task_id, "note", "running", f"the user's answer could not be read from Prefect ({why}); {how}")
    rnd = int(meta.get("needsUserRound") or 0)
    question = str(meta.get("needsUserQuestion") or meta.get("pendingQuestion") or "")
    previous = meta.get("needsUserFeedback")
    record(task_id, **NO_QUESTION)
    if answer is None:
        return None
    parts = [previous] if previous else []
    parts.append(f"## You asked the user\n{question}\n\n## The user's answer\n{answer}")
    return rnd, "\n\n".join(parts), answer
