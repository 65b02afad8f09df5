"""Generic CLI agent adapter: prompt, invocation, run (docs/agents-tasks.md §1.9–§1.10, docs/architecture.md
§5).

One call of :func:`run_cli_agent` is one *round* of one task: the prompt (task + context +
feedback) is built, recorded in ``<taskDir>/prompt-<round>.txt``, handed to the agent's process as
an argument, on stdin or as a file, and the process runs in its own process group with stdin at EOF
(unless the profile asks for stdin), its output appended to ``<taskDir>/agent-<round>.log``. On
timeout or when ``should_stop`` says so, the whole process tree is killed.

Plain Python: no Prefect, no acceptance import. All durations are milliseconds.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..core.files import atomic_write_text
from ..core.procs import ProcRecord, run_process
from .profiles import DEFAULT_AGENT_TIMEOUT_MS, ResolvedAgent
from .round import (  # noqa: F401 - re-exported: the round's types used to live here
    CONTEXT_HEADER,
    FEEDBACK_HEADER,
    QUESTION_ENV,
    AgentRunContext,
    AgentRunResult,
    RoundHooks,
    agent_env,
    append_log,
    build_prompt,
    log_file_path,
    prompt_file_path,
    question_file_path,
    read_question,
    setup_failure,
    spawn_header,
)

log = logging.getLogger("tianshu_mcp")

PROMPT_ARG = "<prompt:arg>"
"""argsTemplate placeholder: the prompt itself in ``arg`` mode, "" otherwise."""
PROMPT_FILE = "<prompt:file>"
"""argsTemplate placeholder: the path of ``<taskDir>/prompt-<round>.txt``."""
PROMPT_STDIN = "<prompt:stdin>"
"""argsTemplate placeholder: always "" (the prompt goes to stdin in ``stdin`` mode)."""
CWD_ARG = "<cwd>"
"""argsTemplate placeholder: the agent's working directory (``opencode run --dir <cwd>``,
docs/real-agents.md)."""


@dataclass
class Invocation:
    """How to start one agent round (docs/agents-tasks.md §1.4 ``build_invocation``).

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


def build_invocation(ctx: AgentRunContext, agent: ResolvedAgent) -> Invocation:
    """Build the process invocation of one round and write ``prompt-<round>.txt`` (atomically).

    Placeholders in each ``argsTemplate`` item (substring replacement): ``<prompt:arg>`` → the
    prompt in ``arg`` mode, else ""; ``<prompt:file>`` → the prompt file's path; ``<prompt:stdin>``
    → ""; ``<cwd>`` → the working directory. ``stdin`` mode → ``stdin_text`` = the prompt. cwd: ``task`` → ``project_path`` (the task
    dir when it is ""), ``home`` → the user's home. env: :func:`~.round.agent_env` (the server's
    environment, ``profile.env``, ``profile.rootEnv`` as root, ``PWD`` = cwd), plus :data:`QUESTION_ENV`. timeout: ``ctx.timeout_ms`` if > 0 else ``profile.timeoutMs``.

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

    if profile.cwd == "home":
        cwd = str(Path.home())
    else:
        cwd = ctx.project_path or str(ctx.task_dir)
    args: list[str] = []
    for item in profile.args_template:
        item = item.replace(PROMPT_ARG, prompt if mode == "arg" else "")
        item = item.replace(PROMPT_FILE, str(prompt_file))
        item = item.replace(PROMPT_STDIN, "")
        item = item.replace(CWD_ARG, cwd)
        args.append(item)
    env = agent_env(profile.env, profile.root_env, cwd)
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


def run_cli_agent(
    ctx: AgentRunContext,
    agent: ResolvedAgent,
    *,
    should_stop: Callable[[], bool] | None = None,
    on_start: Callable[[ProcRecord], None] | None = None,
    hooks: RoundHooks | None = None,
) -> AgentRunResult:
    """Run one round of a CLI agent to completion (docs/agents-tasks.md §1.9–§1.10).

    The process gets its own session/process group, stdin at EOF (or the prompt, then closed, in
    ``stdin`` mode), and its stdout+stderr appended to ``<taskDir>/agent-<round>.log`` after the
    header ``\\n===== spawn: <argv…> (cwd=<cwd>) @ <ISO> =====\\n``; ``run_process`` appends the
    trailer ``[exit] code=… duration=…ms``. On timeout or when ``should_stop()`` returns True
    (polled every 100 ms; also checked before spawning) the whole tree is killed (SIGTERM, SIGKILL
    after 0.8 s). A question the agent wrote to :data:`QUESTION_ENV`'s file is returned in
    ``question`` (kind ``agent_question``).

    Args:
        ctx: the round's context.
        agent: the resolved agent (:func:`~tianshu_mcp.adapters.profiles.resolve_agent`).
        should_stop: cancellation probe; an exception from it is logged and counts as False.
        on_start: receives the :class:`ProcRecord` once the process runs (to persist it for a
            kill from elsewhere); an exception from it is logged, never propagated.
        hooks: the same two callbacks as a :class:`RoundHooks` (used instead of the two
            arguments when given).

    Returns:
        An :class:`AgentRunResult`. ``ok`` = exit code 0. Timeout → ``timeout``; stop →
        ``killed``; an unresolved agent, an unwritable prompt file or a spawn error (missing
        executable, bad cwd) → ``hard_failure`` with ``error_type="spawn"`` and ``error``.
        Never raises for a failing agent.
    """
    hooks = hooks or RoundHooks(should_stop=should_stop, on_start=on_start)
    log_file = log_file_path(ctx)
    if agent.profile is None or not agent.ok or not agent.command:
        return setup_failure(log_file, agent.message or f"agent '{agent.id}' is not runnable")
    if agent.profile.driver != "spawn":
        return setup_failure(log_file, f"agent '{agent.id}' is not a CLI (spawn) agent")
    try:
        inv = build_invocation(ctx, agent)
        question_file_path(ctx).unlink(missing_ok=True)  # a question is always this run's
    except (OSError, ValueError) as exc:
        return setup_failure(log_file, f"cannot prepare the agent invocation: {exc}")

    header = spawn_header(inv.argv, inv.cwd)
    if hooks.stopped():
        append_log(inv.log_file, header + "[exit] code=null (killed) duration=0ms (stopped before spawn)\n")
        return AgentRunResult(False, None, False, True, None, 0, inv.log_file)

    res = run_process(
        inv.argv,
        cwd=inv.cwd,
        log_path=inv.log_file,
        timeout_ms=inv.timeout_ms,
        env=inv.env,
        stdin_text=inv.stdin_text,
        header=header,
        should_stop=hooks.stopped if hooks.should_stop is not None else None,
        on_start=hooks.started,
        max_output_bytes=AGENT_MAX_LOG_BYTES,
    )
    hard = res.error is not None and res.exit_code is None
    limited = f"the agent wrote more than {AGENT_MAX_LOG_BYTES >> 30} GiB of output and was stopped"
    question = read_question(question_file_path(ctx))
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
        question=question,
        question_kind="agent_question" if question else None,
    )
