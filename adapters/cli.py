"""Generic CLI agent adapter: prompt, invocation, run (40-agents-tasks §1.9–§1.10, 00-design §5).

One call of :func:`run_cli_agent` is one *round* of one task: the prompt (task + context +
feedback) is built, recorded in ``<taskDir>/prompt-<round>.txt``, handed to the agent's process as
an argument, on stdin or as a file, and the process runs in its own process group with stdin at EOF
(unless the profile asks for stdin), its output appended to ``<taskDir>/agent-<round>.log``. On
timeout or when ``should_stop`` says so, the whole process tree is killed.

Plain Python: no Prefect, no acceptance import. All durations are milliseconds.
"""

from __future__ import annotations

import logging
import os
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Literal

from ..core.files import atomic_write_text
from ..core.procs import ProcRecord, run_process
from .profiles import DEFAULT_AGENT_TIMEOUT_MS, ResolvedAgent

log = logging.getLogger("tianshu_mcp")

PROMPT_ARG = "<prompt:arg>"
"""argsTemplate placeholder: the prompt itself in ``arg`` mode, "" otherwise."""
PROMPT_FILE = "<prompt:file>"
"""argsTemplate placeholder: the path of ``<taskDir>/prompt-<round>.txt``."""
PROMPT_STDIN = "<prompt:stdin>"
"""argsTemplate placeholder: always "" (the prompt goes to stdin in ``stdin`` mode)."""

CONTEXT_HEADER = "\n\n## Additional context / constraints\n"
"""Separator before ``context`` in the prompt (40-agents-tasks §1.9)."""
FEEDBACK_HEADER = (
    "\n\n## Feedback from the previous round's verification — fix exactly these problems, do not refactor broadly\n"
)
"""Separator before ``feedback`` in the prompt (40-agents-tasks §1.9)."""


@dataclass
class AgentRunContext:
    """Input of one agent round (40-agents-tasks §1.1, CLI subset).

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
    """

    task_id: str
    project_path: str
    task_dir: Path
    round: int
    task: str
    context: str | None = None
    feedback: str | None = None
    timeout_ms: int = 0


@dataclass
class Invocation:
    """How to start one agent round (40-agents-tasks §1.4 ``build_invocation``).

    Attributes:
        argv: absolute command followed by the substituted ``argsTemplate``.
        cwd: working directory.
        env: the full child environment (server env overlaid with ``profile.env``).
        stdin_text: the prompt in ``stdin`` mode, else None (stdin is then /dev/null, at EOF).
        timeout_ms: wall-clock limit in ms.
        log_file: ``<taskDir>/agent-<round>.log``.
        prompt_file: ``<taskDir>/prompt-<round>.txt`` (always written).
        prompt: the prompt text.
    """

    argv: list[str]
    cwd: str
    env: dict[str, str]
    stdin_text: str | None
    timeout_ms: int
    log_file: Path
    prompt_file: Path
    prompt: str = ""


@dataclass
class AgentRunResult:
    """Outcome of one agent round (40-agents-tasks §1.3, process fields).

    Attributes:
        ok: the agent exited 0 on its own.
        exit_code: the exit code, None when it never started, timed out or was killed.
        timeout: the round hit its timeout (tree killed).
        killed: stopped by ``should_stop`` (tree killed), possibly before it started.
        error: spawn/setup failure text, else None.
        duration_ms: wall time in ms.
        log_file: ``<taskDir>/agent-<round>.log``.
        hard_failure: an infrastructure failure (spawn error, unresolved agent): the caller
            skips verification and rework.
        error_type: "spawn" when ``hard_failure``, else None.
    """

    ok: bool
    exit_code: int | None
    timeout: bool
    killed: bool
    error: str | None
    duration_ms: int
    log_file: Path
    hard_failure: bool = False
    error_type: Literal["spawn"] | None = None

    def to_json(self) -> dict[str, Any]:
        """camelCase dict (``ok, exitCode, timeout, killed, error, durationMs, logFile,
        hardFailure, errorType``) with ``logFile`` as a string."""
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
        }


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
    """Build the prompt of a round (40-agents-tasks §1.9).

    ``task`` [+ ``CONTEXT_HEADER`` + context] [+ ``FEEDBACK_HEADER`` + feedback]; empty context or
    feedback adds nothing. The text is the same for every ``prompt_mode`` ("arg", "stdin",
    "file"): the original's shorter feedback header in file mode is deliberately not reproduced,
    so the recorded prompt file always equals what the agent received.
    """
    del prompt_mode  # same text for every mode, see the docstring
    prompt = ctx.task
    if ctx.context:
        prompt += CONTEXT_HEADER + ctx.context
    if ctx.feedback:
        prompt += FEEDBACK_HEADER + ctx.feedback
    return prompt


def build_invocation(ctx: AgentRunContext, agent: ResolvedAgent) -> Invocation:
    """Build the process invocation of one round and write ``prompt-<round>.txt`` (atomically).

    Placeholders in each ``argsTemplate`` item (substring replacement): ``<prompt:arg>`` → the
    prompt in ``arg`` mode, else ""; ``<prompt:file>`` → the prompt file's path; ``<prompt:stdin>``
    → "". ``stdin`` mode → ``stdin_text`` = the prompt. cwd: ``task`` → ``project_path`` (the task
    dir when it is ""), ``home`` → the user's home. env: ``os.environ`` overlaid with
    ``profile.env``, plus :data:`QUESTION_ENV`. timeout: ``ctx.timeout_ms`` if > 0 else ``profile.timeoutMs``.

    Raises:
        ValueError: ``agent`` is not runnable (``ok`` False, no command or no profile).
        OSError: the prompt file cannot be written.
    """
    profile = agent.profile
    if not agent.ok or not agent.command or profile is None:
        raise ValueError(agent.message or f"agent '{agent.id}' is not runnable")
    mode = profile.prompt_mode
    prompt = build_prompt(ctx, mode)
    prompt_file = prompt_file_path(ctx)
    atomic_write_text(prompt_file, prompt)
    size = len(prompt.encode("utf-8"))
    if mode == "arg" and size > MAX_ARG_BYTES:
        raise ValueError(f"the prompt ({size} bytes) is too long for one command-line argument (Linux allows "
                         f"{MAX_ARG_BYTES + 1} bytes); use promptMode 'stdin' or 'file' for this agent")

    args: list[str] = []
    for item in profile.args_template:
        item = item.replace(PROMPT_ARG, prompt if mode == "arg" else "")
        item = item.replace(PROMPT_FILE, str(prompt_file))
        item = item.replace(PROMPT_STDIN, "")
        args.append(item)

    if profile.cwd == "home":
        cwd = str(Path.home())
    else:
        cwd = ctx.project_path or str(ctx.task_dir)
    env = dict(os.environ)
    env.update(profile.env)
    env[QUESTION_ENV] = str(question_file_path(ctx))
    timeout_ms = ctx.timeout_ms if ctx.timeout_ms and ctx.timeout_ms > 0 else (profile.timeout_ms or DEFAULT_AGENT_TIMEOUT_MS)
    return Invocation(
        argv=[agent.command, *args],
        cwd=cwd,
        env=env,
        stdin_text=prompt if mode == "stdin" else None,
        timeout_ms=timeout_ms,
        log_file=log_file_path(ctx),
        prompt_file=prompt_file,
        prompt=prompt,
    )


AGENT_MAX_LOG_BYTES = 1 << 30  # an agent writing more output is stopped (its log must not fill the disk)
MAX_ARG_BYTES = 131071  # Linux MAX_ARG_STRLEN (32 pages) minus the terminating NUL


def spawn_header(argv: list[str], cwd: str) -> str:
    """Log header ``\\n===== spawn: <argv…> (cwd=<cwd>) @ <ISO> =====\\n`` (40-agents-tasks §1.10)."""
    now = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return f"\n===== spawn: {' '.join(argv)} (cwd={cwd}) @ {now} =====\n"


def _append_log(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text)
    except OSError:
        pass


def _setup_failure(log_file: Path, message: str, duration_ms: int = 0) -> AgentRunResult:
    _append_log(log_file, f"[spawn-error] {message}\n")
    return AgentRunResult(
        ok=False,
        exit_code=None,
        timeout=False,
        killed=False,
        error=message,
        duration_ms=duration_ms,
        log_file=log_file,
        hard_failure=True,
        error_type="spawn",
    )


def run_cli_agent(
    ctx: AgentRunContext,
    agent: ResolvedAgent,
    *,
    should_stop: Callable[[], bool] | None = None,
    on_start: Callable[[ProcRecord], None] | None = None,
) -> AgentRunResult:
    """Run one round of a CLI agent to completion (40-agents-tasks §1.9–§1.10).

    The process gets its own session/process group, stdin at EOF (or the prompt, then closed, in
    ``stdin`` mode), and its stdout+stderr appended to ``<taskDir>/agent-<round>.log`` after the
    header ``\\n===== spawn: <argv…> (cwd=<cwd>) @ <ISO> =====\\n``; ``run_process`` appends the
    trailer ``[exit] code=… duration=…ms``. On timeout or when ``should_stop()`` returns True
    (polled every 100 ms; also checked before spawning) the whole tree is killed (SIGTERM, SIGKILL
    after 0.8 s).

    Args:
        ctx: the round's context.
        agent: the resolved agent (:func:`~tianshu_mcp.adapters.profiles.resolve_agent`).
        should_stop: cancellation probe; an exception from it is logged and counts as False.
        on_start: receives the :class:`ProcRecord` once the process runs (to persist it for a
            kill from elsewhere); an exception from it is logged, never propagated.

    Returns:
        An :class:`AgentRunResult`. ``ok`` = exit code 0. Timeout → ``timeout``; stop →
        ``killed``; an unresolved agent, an unwritable prompt file or a spawn error (missing
        executable, bad cwd) → ``hard_failure`` with ``error_type="spawn"`` and ``error``.
        Never raises for a failing agent.
    """
    log_file = log_file_path(ctx)
    if agent.profile is None or not agent.ok or not agent.command:
        return _setup_failure(log_file, agent.message or f"agent '{agent.id}' is not runnable")
    if agent.profile.driver != "spawn":
        return _setup_failure(log_file, f"agent '{agent.id}' is not a CLI (spawn) agent")
    try:
        inv = build_invocation(ctx, agent)
        question_file_path(ctx).unlink(missing_ok=True)  # a question is always this run's
    except (OSError, ValueError) as exc:
        return _setup_failure(log_file, f"cannot prepare the agent invocation: {exc}")

    def stop_probe() -> bool:
        if should_stop is None:
            return False
        try:
            return bool(should_stop())
        except Exception as exc:  # noqa: BLE001 - a faulty probe must not leak the process
            log.warning("should_stop probe failed for %s round %s: %s", ctx.task_id, ctx.round, exc)
            return False

    def started(record: ProcRecord) -> None:
        if on_start is None:
            return
        try:
            on_start(record)
        except Exception as exc:  # noqa: BLE001 - the process must still be supervised
            log.warning("on_start callback failed for %s round %s: %s", ctx.task_id, ctx.round, exc)

    header = spawn_header(inv.argv, inv.cwd)
    if stop_probe():
        _append_log(inv.log_file, header + "[exit] code=null (killed) duration=0ms (stopped before spawn)\n")
        return AgentRunResult(False, None, False, True, None, 0, inv.log_file)

    res = run_process(
        inv.argv,
        cwd=inv.cwd,
        log_path=inv.log_file,
        timeout_ms=inv.timeout_ms,
        env=inv.env,
        stdin_text=inv.stdin_text,
        header=header,
        should_stop=stop_probe if should_stop is not None else None,
        on_start=started,
        max_output_bytes=AGENT_MAX_LOG_BYTES,
    )
    hard = res.error is not None and res.exit_code is None
    limited = f"the agent wrote more than {AGENT_MAX_LOG_BYTES >> 30} GiB of output and was stopped"
    return AgentRunResult(
        ok=res.ok,
        exit_code=res.exit_code,
        timeout=res.timed_out,
        killed=res.killed,
        error=res.error or (limited if res.output_limited else None),
        duration_ms=res.duration_ms,
        log_file=inv.log_file,
        hard_failure=hard,
        error_type="spawn" if hard else None,
    )
