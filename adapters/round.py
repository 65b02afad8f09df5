"""One agent round, whatever drives the agent: its input, its outcome and the callbacks of the
task that runs it (docs/agents-tasks.md §1.1–§1.3, §1.9–§1.10).

Every driver (:mod:`.cli` for a subprocess, :mod:`.acp` for an Agent Client Protocol agent, the
desktop driver for a chat app over CDP) takes an :class:`AgentRunContext` and
:class:`RoundHooks` and returns an :class:`AgentRunResult`; the files of a round live in the task
dir: ``prompt-<round>.txt`` (what the agent was told), ``agent-<round>.log`` (what it said) and
``question-<round>.md`` (what it asked). Plain Python: no Prefect, no acceptance import.
"""

from __future__ import annotations

import logging
import os
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Literal

from ..core.procs import ProcRecord

log = logging.getLogger("tianshu_mcp")

ErrorType = Literal["spawn", "setup_failed", "cdp_disconnected", "idle_timeout"]
"""``AgentRunResult.error_type`` values (see :class:`AgentRunResult`)."""
QuestionKind = Literal["agent_question", "user_confirmation", "login_required"]
"""``needsUserKind`` of a round that ends asking the user (docs/tools.md §3.6)."""

CONTEXT_HEADER = "\n\n## Additional context / constraints\n"
"""Separator before ``context`` in the prompt (docs/agents-tasks.md §1.9)."""
FEEDBACK_HEADER = (
    "\n\n## Feedback from the previous round's verification — fix exactly these problems, do not refactor broadly\n"
)
"""Separator before ``feedback`` in the prompt (docs/agents-tasks.md §1.9)."""


@dataclass
class AgentRunContext:
    """Input of one agent round (docs/agents-tasks.md §1.1, CLI subset).

    Attributes:
        task_id: ``tsk_…`` id.
        project_path: normalized absolute project path (the agent's cwd for ``cwd: task``);
            "" in default workspace mode (the task dir is used instead).
        task_dir: ``<home>/tasks/<task_id>`` (prompt and log files go here).
        round: 0-based agent round.
        task: the brief.
        context: extra context / constraints, or None.
        feedback: previous round's verification feedback (rework text), or None.
        timeout_ms: the task's timeout in ms, fixed at submit; ≤0 falls back to the profile's.
        answer: the user's answer when this round re-runs after it asked (needs_user), else
            None (the answer is also in ``feedback``, for the agent).
        model: run_task's ``model`` hint, or None (a desktop app picks it in its model menu;
            CLI and ACP agents take their model from their profile).
    """

    task_id: str
    project_path: str
    task_dir: Path
    round: int
    task: str
    context: str | None = None
    feedback: str | None = None
    timeout_ms: int = 0
    answer: str | None = None
    model: str | None = None


@dataclass
class AgentRunResult:
    """Outcome of one agent round (docs/agents-tasks.md §1.3, process fields).

    Attributes:
        ok: the agent exited 0 on its own.
        exit_code: the exit code, None when it never started, timed out or was killed.
        timeout: the round hit its timeout (tree killed).
        killed: stopped by ``should_stop`` (tree killed), possibly before it started.
        error: spawn/setup failure text, else None.
        duration_ms: wall time in ms.
        log_file: ``<taskDir>/agent-<round>.log``.
        hard_failure: an infrastructure failure (spawn error, unresolved agent, a desktop app
            that went away): the caller skips verification and rework, no round is spent.
        error_type: with ``hard_failure``: "spawn" (could not start), "setup_failed" (the agent
            started but its session could not be set up: ACP ``initialize``/``session/new``
            refused, the desktop app's window could not be bound) or "cdp_disconnected" (the
            desktop app closed mid-run); without: "idle_timeout" (a desktop app showed no
            reply within its idle timeout) or None.
        question: what the agent asks the user (the round then ends ``needs_user``), or None.
        question_kind: the ``needsUserKind`` of ``question``: "agent_question" (a CLI agent's
            question file), "user_confirmation" (a permission the profile's policy leaves to
            the user), "login_required" (a desktop app's login screen, an ACP agent's
            ``auth_required``); None without a question.
        gui_stop: desktop agents on cancel: ``{"clicked": bool, "idle": bool}`` (the stop
            button was clicked / the app went idle after it), else None.
    """

    ok: bool
    exit_code: int | None
    timeout: bool
    killed: bool
    error: str | None
    duration_ms: int
    log_file: Path
    hard_failure: bool = False
    error_type: ErrorType | None = None
    question: str | None = None
    question_kind: QuestionKind | None = None
    gui_stop: dict[str, bool] | None = None

    def to_json(self) -> dict[str, Any]:
        """camelCase dict (``ok, exitCode, timeout, killed, error, durationMs, logFile,
        hardFailure, errorType, question, questionKind, guiStop``) with ``logFile`` as a string."""
        d = asdict(self)
        return {
            "ok": d["ok"],
            "exitCode": d["exit_code"],
            "timeout": d["timeout"],
            "killed": d["killed"],
            "error": d["error"],
            "durationMs": d["duration_ms"],
            "logFile": str(d["log_file"]),
            "hardFailure": d["hard_failure"],
            "errorType": d["error_type"],
            "question": d["question"],
            "questionKind": d["question_kind"],
            "guiStop": d["gui_stop"],
        }


EventSink = Callable[[str, str, dict[str, Any]], None]
"""``(event, detail, data)``: a semantic event of the round (``file_modification_started``,
``confirmation_dialog_detected``, ``awaiting_user_authorization``, …) or a progress note
(event ``progress``)."""


@dataclass
class RoundHooks:
    """The task's side of a round: every callback is optional and every call through the
    methods below is safe (an exception is logged, never raised into the driver).

    Attributes:
        should_stop: cancellation probe, polled by the driver (about every 100 ms).
        on_start: receives the :class:`ProcRecord` of the agent's process once it runs (saved
            so that a cancel from another process can kill the tree).
        on_event: receives semantic events and progress notes (:data:`EventSink`).
    """

    should_stop: Callable[[], bool] | None = None
    on_start: Callable[[ProcRecord], None] | None = None
    on_event: EventSink | None = None

    def stopped(self) -> bool:
        """``should_stop()``; False when there is no probe or it raised."""
        if self.should_stop is None:
            return False
        try:
            return bool(self.should_stop())
        except Exception as exc:  # noqa: BLE001 - a faulty probe must not leak the agent
            log.warning("should_stop probe failed: %s", exc)
            return False

    def started(self, record: ProcRecord) -> None:
        """Hand ``record`` to ``on_start``; never raises."""
        if self.on_start is None:
            return
        try:
            self.on_start(record)
        except Exception as exc:  # noqa: BLE001 - the process must still be supervised
            log.warning("on_start callback failed: %s", exc)

    def event(self, name: str, detail: str, data: dict[str, Any] | None = None) -> None:
        """Hand one event to ``on_event``; never raises."""
        if self.on_event is None:
            return
        try:
            self.on_event(name, detail, data or {})
        except Exception as exc:  # noqa: BLE001 - an event must never end a round
            log.warning("event %s not delivered: %s", name, exc)


def agent_env(profile_env: dict[str, str], root_env: dict[str, str], cwd: str) -> dict[str, str]:
    """The agent's environment: the server's, ``profile.env`` over it, ``profile.rootEnv`` over
    that when the server runs as root, and ``PWD`` = ``cwd`` (docs/real-agents.md: ``opencode run`` takes its
    project from ``$PWD``, not from its working directory; the host's ``PWD`` names another
    directory). Returns a new dict."""
    env = dict(os.environ)
    env.update(profile_env)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        env.update(root_env)
    env["PWD"] = cwd
    return env


def prompt_file_path(ctx: AgentRunContext) -> Path:
    """``<taskDir>/prompt-<round>.txt``."""
    return Path(ctx.task_dir) / f"prompt-{ctx.round}.txt"


QUESTION_ENV = "TIANSHU_MCP_QUESTION_FILE"
"""How a CLI agent asks the user (the needs_user contract): the agent's environment names a file;
an agent that cannot go on without an answer writes its question there (UTF-8 text, markdown is
fine) and exits. The round then ends ``needs_user``; ``manage_task(action="continue",
message=…)`` re-runs the round with the question and the answer appended to the brief."""
MAX_QUESTION_BYTES = 64 * 1024


def question_file_path(ctx: AgentRunContext) -> Path:
    """``<taskDir>/question-<round>.md`` (see :data:`QUESTION_ENV`)."""
    return Path(ctx.task_dir) / f"question-{ctx.round}.md"


def read_question(path: Path) -> str | None:
    """The question an agent wrote to ``path`` (at most 64 KiB, stripped), None when none."""
    try:
        with open(path, "rb") as fh:
            text = fh.read(MAX_QUESTION_BYTES).decode("utf-8", errors="replace").strip()
    except OSError:
        return None
    return text or None


def log_file_path(ctx: AgentRunContext) -> Path:
    """``<taskDir>/agent-<round>.log``."""
    return Path(ctx.task_dir) / f"agent-{ctx.round}.log"


def build_prompt(ctx: AgentRunContext, prompt_mode: str = "arg") -> str:
    """Build the prompt of a round (docs/agents-tasks.md §1.9).

    ``task`` [+ ``CONTEXT_HEADER`` + context] [+ ``FEEDBACK_HEADER`` + feedback]; empty context or
    feedback adds nothing; a NUL (from a check's output, say) becomes U+FFFD. The text is the same
    for every ``prompt_mode`` ("arg", "stdin",
    "file"): the original's shorter feedback header in file mode is deliberately not reproduced,
    so the recorded prompt file always equals what the agent received.
    """
    del prompt_mode  # same text for every mode, see the docstring
    prompt = ctx.task
    if ctx.context:
        prompt += CONTEXT_HEADER + ctx.context
    if ctx.feedback:
        prompt += FEEDBACK_HEADER + ctx.feedback
    return prompt.replace("\x00", "\ufffd")  # a NUL cannot be passed in argv ("embedded null byte")


def spawn_header(argv: list[str], cwd: str) -> str:
    """Log header ``\\n===== spawn: <argv…> (cwd=<cwd>) @ <ISO> =====\\n`` (docs/agents-tasks.md §1.10)."""
    now = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return f"\n===== spawn: {' '.join(argv)} (cwd={cwd}) @ {now} =====\n"


def append_log(path: Path, text: str) -> None:
    """Append ``text`` to the round's log at ``path`` (directories created); never raises."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text)
    except OSError:
        pass


def setup_failure(log_file: Path, message: str, duration_ms: int = 0,
                  error_type: ErrorType = "spawn", shown: str | None = None) -> AgentRunResult:
    """Record ``message`` in the round's log as ``[spawn-error] …`` and return a hard failure
    of type ``error_type`` (no exit code, no verification round). ``shown``: the same in the
    locale's words (:mod:`~tianshu_mcp.core.i18n`), the result's error that becomes the task's
    message (default ``message``); the log keeps ``message`` (English)."""
    append_log(log_file, f"[spawn-error] {message}\n")
    return AgentRunResult(
        ok=False,
        exit_code=None,
        timeout=False,
        killed=False,
        error=shown or message,
        duration_ms=duration_ms,
        log_file=log_file,
        hard_failure=True,
        error_type=error_type,
    )


