"""The Agent Client Protocol driver: an agent spoken to over JSON-RPC on its stdio (docs/agent-adapters.md
§3).

ACP (by Zed) is how editors drive coding agents with structured events: ``gemini --acp``,
``claude-agent-acp``, ``codex-acp``, ``opencode acp``. A profile with ``"driver": "acp"`` names
the executable (``command`` + ``argsTemplate``). Per task:

1. the agent is started in its own session (process group, tagged environment), stdin/stdout as
   the protocol pipe, stderr copied to the round's log; :func:`~tianshu_mcp.core.reaper.keep_alive`
   spares it between rounds;
2. ``initialize`` (no file-system or terminal capabilities offered: the agent edits with its own
   tools), then ``session/new`` with the project as cwd — or ``session/load`` of the task's
   earlier session when the agent can (after a needs_user suspension ended the process);
3. each round is one ``session/prompt``: the brief first, then each rework round's feedback as a
   new prompt in the same session; ``session/update`` notifications go to the round's log
   (``[agent]``, ``[tool]``, ``[plan]`` lines) and become events (an edit tool call →
   ``file_modification_started``; a permission left to the user → ``confirmation_dialog_detected``)
   and progress notes;
4. ``session/request_permission`` is answered by the profile's policy (:mod:`.policy`):
   allow inside the project, deny outside, or leave it to the user: the turn is cancelled and the
   round ends ``needs_user`` (``user_confirmation``); the answer is remembered for that request;
5. cancel or timeout: ``session/cancel``, up to ``cancelGraceMs`` for the turn to end, then the
   tree is killed; the end of the task's flow run kills it too (:func:`end_acp_session`).

Stop reasons: ``end_turn`` → exit code 0; ``max_tokens`` / ``max_turn_requests`` → exit code 0
with a log note (the work done so far is verified; a rework round continues the session);
``refusal`` or a ``cancelled`` we did not ask for → exit code 1 (an agent failure). An agent that
cannot be started → ``spawn``; one that refuses ``initialize`` / ``session/new`` or does not
answer within ``initTimeoutMs`` → ``setup_failed`` (hard failures: no verification round).

The protocol runs on an asyncio loop in a thread of the session's own (the caller may be a
Prefect task thread); events are handed to the caller's thread before they reach the task.
Plain Python: no Prefect, no acceptance import. Durations are milliseconds.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import queue
import threading
import time
from pathlib import Path
from typing import Any, Callable

from pydantic import ValidationError

from ...core.i18n import N_, _
from ...core.procs import ProcRecord, kill_tree, record_of, tagged_env
from ...core.reaper import keep_alive, release
from .client import TianshuClient
from .policy import AcpSettings
from ..answers import Answers
from ..profiles import DEFAULT_AGENT_TIMEOUT_MS, ResolvedAgent
from ..round import (
    FEEDBACK_HEADER,
    AgentRunContext,
    AgentRunResult,
    RoundHooks,
    agent_env,
    append_log,
    build_prompt,
    log_file_path,
    prompt_file_path,
    setup_failure,
    spawn_header,
)

log = logging.getLogger("tianshu_mcp")

SESSION_FILE = "acp-session.json"
"""``<taskDir>/acp-session.json``: ``{"agentId", "sessionId", "prompts"}`` of the task's session."""

POLL_S = 0.1

PERMISSIONS_FILE = "acp-permissions.json"
"""``<taskDir>/acp-permissions.json``: the user's answers to the agent's permission requests
(:class:`~tianshu_mcp.adapters.answers.Answers`)."""


class SetupFailed(Exception):
    """The agent started but its session could not be set up (``setup_failed``). ``message``: a
    constant English msgid (``N_``) filled from ``values``; ``str(exc)`` is English (the round's
    log), ``exc.shown`` the locale's words (the task's message; ``shown_values`` override there)."""

    def __init__(self, message: str, shown_values: dict[str, Any] | None = None, **values: Any) -> None:
        super().__init__(message.format(**values))
        self.shown = _(message).format(**{**values, **(shown_values or {})})


class Stopped(Exception):
    """The task was cancelled while the session was being set up."""


class AuthRequired(Exception):
    """The agent needs the user to log in first (ACP error ``auth_required``, -32000)."""


def acp_settings(agent: ResolvedAgent) -> AcpSettings:
    """The profile's ``acp`` object as :class:`AcpSettings` (defaults when absent).

    Raises:
        ValueError: the object does not validate (message names the field).
    """
    raw = (agent.profile.model_extra or {}).get("acp") if agent.profile else None
    try:
        return AcpSettings.model_validate(raw or {})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise ValueError(f"profile '{agent.id}': acp.{where}: {first.get('msg')}") from exc


class AcpSession:
    """One agent process and its ACP session, for one task (see the module doc).

    Attributes:
        task_id: the task.
        record: the agent's process record (None before :meth:`start`).
        session_id: the ACP session id (None before :meth:`open`).
        prompts: prompts sent in this session so far.
    """

    def __init__(self, task_id: str, agent: ResolvedAgent, settings: AcpSettings, cwd: str, task_dir: Path) -> None:
        self.task_id, self.agent, self.settings, self.cwd = task_id, agent, settings, cwd
        self.task_dir = Path(task_dir)
        self.client = TianshuClient(settings.permissions, cwd, Answers(self.task_dir, PERMISSIONS_FILE))
        self.record: ProcRecord | None = None
        self.session_id: str | None = None
        self.prompts = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"tianshu-acp-{task_id}", daemon=True)
        self._thread.start()
        self._proc: asyncio.subprocess.Process | None = None
        self._conn: Any = None

    # -- running coroutines on the session's loop ---------------------------------------------
    def _submit(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def _call(self, coro: Any, timeout_s: float) -> Any:
        return self._submit(coro).result(timeout=timeout_s)

    @property
    def alive(self) -> bool:
        """The agent's process is running."""
        return self._proc is not None and self._proc.returncode is None

    @property
    def returncode(self) -> int | None:
        """The agent's exit code once it ended, else None."""
        return self._proc.returncode if self._proc is not None else None

    def wait_exit(self, timeout_s: float) -> int | None:
        """The agent's exit code, waiting up to ``timeout_s`` s for it to end; None if it runs on."""
        if self._proc is None:
            return None
        try:
            return self._call(asyncio.wait_for(self._proc.wait(), timeout_s), timeout_s + 1)
        except Exception:  # noqa: BLE001 - still running
            return self._proc.returncode

    # -- start, open, prompt, cancel, close ----------------------------------------------------
    def start(self, log_file: Path, hooks: RoundHooks) -> None:
        """Start the agent process (own session, tagged environment).

        Raises:
            OSError: it cannot be started (missing executable, bad cwd).
        """
        profile = self.agent.profile
        assert profile is not None and self.agent.command
        argv = [self.agent.command, *profile.args_template]
        env, tag = tagged_env(agent_env(profile.env, profile.root_env, self.cwd))
        self.client.log_file = log_file
        append_log(log_file, spawn_header(argv, self.cwd))
        self._proc = self._call(asyncio.create_subprocess_exec(
            *argv, cwd=self.cwd, env=env, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, start_new_session=True, limit=50 * 1024 * 1024), 30)
        self.record = record_of(self._proc.pid, tag)
        keep_alive(self.record)
        hooks.started(self.record)
        self._submit(self._pump_stderr())

    async def _pump_stderr(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        while True:
            line = await self._proc.stderr.readline()
            if not line:
                return
            self.client.write_log(line.decode("utf-8", "replace").rstrip("\n"))

    def open(self, previous: str | None, stopped: Callable[[], bool]) -> bool:
        """``initialize`` and a session: ``session/load`` of ``previous`` when the agent can load
        sessions, else ``session/new``. Returns True when the earlier session was loaded.
        ``stopped`` is polled meanwhile (every 100 ms).

        Raises:
            SetupFailed: refused, malformed, or not answered within ``initTimeoutMs``.
            AuthRequired: the agent asks the user to log in.
            Stopped: ``stopped()`` said so first.
        """
        import acp
        from acp.schema import ClientCapabilities, Implementation

        assert self._proc is not None
        timeout_s = self.settings.init_timeout_ms / 1000

        step = ["initialize"]

        async def go() -> tuple[str, bool]:
            assert self._proc is not None and self._proc.stdin is not None and self._proc.stdout is not None
            self._conn = acp.connect_to_agent(self.client, self._proc.stdin, self._proc.stdout)
            init = await self._conn.initialize(
                protocol_version=acp.PROTOCOL_VERSION, client_capabilities=ClientCapabilities(),
                client_info=Implementation(name="tianshu-mcp", title="tianshu-mcp", version="0.1.0"))
            can_load = bool(init.agent_capabilities and init.agent_capabilities.load_session)
            step[0] = "session/load" if previous and can_load else "session/new"
            if previous and can_load:
                await self._conn.load_session(cwd=self.cwd, session_id=previous, mcp_servers=[])
                return previous, True
            new = await self._conn.new_session(cwd=self.cwd, mcp_servers=[])
            return new.session_id, False

        future = self._submit(go())
        deadline = time.monotonic() + timeout_s
        while not future.done():
            if stopped():
                future.cancel()
                raise Stopped()
            if time.monotonic() >= deadline:
                future.cancel()
                break
            time.sleep(POLL_S)
        try:
            self.session_id, loaded = future.result(timeout=0)
        except concurrent.futures.CancelledError as exc:
            raise SetupFailed(N_("the agent did not answer initialize/session within {ms} ms"),
                              ms=self.settings.init_timeout_ms) from exc
        except acp.RequestError as exc:
            said = f"{exc}" + (f" ({exc.data})" if getattr(exc, "data", None) else "")  # the agent's own reason
            if exc.code == -32000:  # auth_required
                raise AuthRequired(said) from exc
            raise SetupFailed(N_("the agent answered {step} with an error: {said}"), step=step[0], said=said) from exc
        except Exception as exc:  # noqa: BLE001 - a broken pipe, malformed JSON, an early exit
            code = self.returncode
            gone = N_(" (it exited with code {code})") if code is not None else ""
            raise SetupFailed(N_("the ACP handshake ({step}) failed{gone}: {error}; is '{command}' an ACP agent? (its "
                                 "stderr is in the round's log)"), {"gone": _(gone).format(code=code) if gone else ""},
                              step=step[0], gone=gone.format(code=code), error=f"{type(exc).__name__}: {exc}",
                              command=self.agent.command) from exc
        return loaded

    def prompt(self, text: str) -> Any:
        """Send ``session/prompt`` with ``text``; returns the future of its ``PromptResponse``."""
        import acp

        self.prompts += 1
        return self._submit(self._conn.prompt(session_id=self.session_id, prompt=[acp.text_block(text)]))

    def cancel(self) -> None:
        """Send ``session/cancel`` (a notification; never raises)."""
        if self._conn is None or self.session_id is None:
            return
        try:
            self._call(self._conn.cancel(session_id=self.session_id), 5)
        except Exception as exc:  # noqa: BLE001 - the tree kill follows anyway
            log.debug("session/cancel not sent: %s", exc)

    def close(self) -> None:
        """Close the connection, kill the agent's tree, stop the loop. Never raises."""
        if self._conn is not None:
            try:
                self._call(self._conn.close(), 3)
            except Exception:  # noqa: BLE001
                pass
        if self.record is not None:
            release(self.record)
            kill_tree(self.record)
        if self._proc is not None and self._proc.returncode is None:
            try:
                self._call(asyncio.wait_for(self._proc.wait(), 3), 5)
            except Exception:  # noqa: BLE001
                pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)


_SESSIONS: dict[str, AcpSession] = {}
_LOCK = threading.Lock()


def end_acp_session(task_id: str) -> None:
    """Close ``task_id``'s session and kill its agent (the end of the task's flow run). Never raises."""
    with _LOCK:
        session = _SESSIONS.pop(task_id, None)
    if session is not None:
        session.close()


def _saved_session(task_dir: Path, agent_id: str) -> str | None:
    try:
        data = json.loads((Path(task_dir) / SESSION_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if isinstance(data, dict) and data.get("agentId") == agent_id and isinstance(data.get("sessionId"), str):
        return data["sessionId"]
    return None


def _save_session(session: AcpSession) -> None:
    from ...core.files import atomic_write_json

    atomic_write_json(session.task_dir / SESSION_FILE,
                      {"agentId": session.agent.id, "sessionId": session.session_id, "prompts": session.prompts})


def _round_text(ctx: AgentRunContext, continued: bool) -> str:
    """The prompt of this round: the whole brief in a new session, only the feedback in a
    continued one (the agent has the brief in its context)."""
    if continued and ctx.feedback:
        return FEEDBACK_HEADER.lstrip("\n") + ctx.feedback
    return build_prompt(ctx)


def _result(log_file: Path, started: float, *, ok: bool = False, exit_code: int | None = None, timeout: bool = False,
            killed: bool = False, error: str | None = None, **extra: Any) -> AgentRunResult:
    duration_ms = int((time.monotonic() - started) * 1000)
    append_log(log_file, f"[exit] code={'null' if exit_code is None else exit_code} duration={duration_ms}ms"
                         + (f" ({error})" if error else "") + "\n")
    return AgentRunResult(ok, exit_code, timeout, killed, error, duration_ms, log_file, **extra)


def run_acp_round(ctx: AgentRunContext, agent: ResolvedAgent, hooks: RoundHooks) -> AgentRunResult:
    """Run one round of an ACP agent (see the module doc); never raises for a failing agent.

    Returns:
        An :class:`AgentRunResult`: ``ok``/exit code from the stop reason; ``killed`` on cancel,
        ``timeout`` on the task's timeout; ``question`` + ``question_kind`` ``user_confirmation``
        (a permission left to the user) or ``login_required`` (``auth_required``);
        ``hard_failure`` ``spawn`` / ``setup_failed``.
    """
    log_file = log_file_path(ctx)
    started = time.monotonic()
    if agent.profile is None or not agent.ok or not agent.command:
        why = N_("agent '{agentId}' is not runnable")
        return setup_failure(log_file, agent.message or why.format(agentId=agent.id),
                             shown=agent.message or _(why).format(agentId=agent.id))
    try:
        settings = acp_settings(agent)
        prompt_file_path(ctx).parent.mkdir(parents=True, exist_ok=True)
    except (ValueError, OSError) as exc:
        return setup_failure(log_file, str(exc), error_type="setup_failed")
    answers = Answers(ctx.task_dir, PERMISSIONS_FILE)
    answers.settle(ctx.round, ctx.answer)
    if hooks.stopped():
        return _result(log_file, started, killed=True, error="stopped before the agent started")

    with _LOCK:
        session = _SESSIONS.get(ctx.task_id)
    if session is not None and not session.alive:
        end_acp_session(ctx.task_id)
        session = None
    continued = session is not None and session.prompts > 0
    if session is None:
        cwd = ctx.project_path or str(ctx.task_dir)
        session = AcpSession(ctx.task_id, agent, settings, cwd, ctx.task_dir)
        try:
            session.start(log_file, hooks)
        except OSError as exc:
            session.close()
            why = N_("cannot start the ACP agent: {error}")
            return setup_failure(log_file, why.format(error=exc), int((time.monotonic() - started) * 1000),
                                 shown=_(why).format(error=exc))
        with _LOCK:
            _SESSIONS[ctx.task_id] = session
        try:
            continued = session.open(_saved_session(ctx.task_dir, agent.id), hooks.stopped)
        except Stopped:
            end_acp_session(ctx.task_id)
            return _result(log_file, started, killed=True, error="stopped while the session was set up")
        except AuthRequired as exc:
            end_acp_session(ctx.task_id)
            return _login_needed(ctx, agent, hooks, log_file, started, str(exc))
        except SetupFailed as exc:
            end_acp_session(ctx.task_id)
            return setup_failure(log_file, str(exc), int((time.monotonic() - started) * 1000), error_type="setup_failed",
                                 shown=exc.shown)
        _save_session(session)
    else:
        session.client.log_file = log_file
        append_log(log_file, f"\n===== acp: round {ctx.round}, session {session.session_id} continued @ "
                             f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} =====\n")
    return _drive(ctx, session, _round_text(ctx, continued), hooks, started)


def _login_needed(ctx: AgentRunContext, agent: ResolvedAgent, hooks: RoundHooks, log_file: Path, started: float,
                  why: str) -> AgentRunResult:
    """The agent answered ``auth_required``: the round asks the user to log in."""
    note = agent.profile.auth_note if agent.profile and agent.profile.auth_note else _("log in to the agent")
    question = _("{name} needs a login before it can work ({why}). {note}, then continue.").format(
        name=agent.display_name, why=why, note=note[:1].upper() + note[1:])
    hooks.event("awaiting_user_authorization", _("round {round}: {name} needs a login").format(
        round=ctx.round, name=agent.display_name), {"round": ctx.round})
    # the error stays English: it ends the round's log, where "login required" is a fatal pattern
    return _result(log_file, started, error="login required", question=question, question_kind="login_required")


def _drive(ctx: AgentRunContext, session: AcpSession, text: str, hooks: RoundHooks, started: float) -> AgentRunResult:
    """Send ``text`` and follow the turn to its end, a cancel, the timeout or a question."""
    from ...core.files import atomic_write_text

    log_file = log_file_path(ctx)
    atomic_write_text(prompt_file_path(ctx), text)
    client = session.client
    client.begin_round(ctx.round)
    timeout_ms = ctx.timeout_ms if ctx.timeout_ms > 0 else (session.agent.profile.timeout_ms if session.agent.profile else None) or DEFAULT_AGENT_TIMEOUT_MS
    deadline = started + timeout_ms / 1000
    future = session.prompt(text)
    _save_session(session)
    reason: str | None = None
    while True:
        _deliver(client.events, hooks)
        if future.done():
            break
        if hooks.stopped():
            reason = "killed"
        elif time.monotonic() >= deadline:
            reason = "timeout"
        elif client.asked is not None:
            reason = "asked"
        elif not session.alive:
            break
        if reason:
            session.cancel()
            try:
                future.result(timeout=session.settings.cancel_grace_ms / 1000)
            except Exception:  # noqa: BLE001 - the tree kill below ends it either way
                pass
            break
        time.sleep(POLL_S)
    _deliver(client.events, hooks)
    client.flush()
    if reason in ("killed", "timeout"):
        end_acp_session(ctx.task_id)
        return _result(log_file, started, killed=reason == "killed", timeout=reason == "timeout",
                       error=None if reason == "killed" else f"the agent's turn exceeded {timeout_ms} ms")
    if client.asked is not None and reason is None:
        reason = "asked"  # the turn ended (cancelled) on the very request left to the user
    if reason == "asked" and client.asked is not None:
        ask = client.asked
        session.client.answers.ask(ctx.round, ask.key, ask.question())
        hooks.event("confirmation_dialog_detected", _("round {round}: the agent asks for permission: {title}").format(
            round=ctx.round, title=ask.title), {"round": ctx.round, "paths": list(ask.paths), "kind": ask.kind})
        return _result(log_file, started, error="waiting for the user's permission", question=ask.question(),
                       question_kind="user_confirmation")
    if not future.done():  # the process ended and the turn with it
        code = session.wait_exit(2.0)
        end_acp_session(ctx.task_id)
        return _result(log_file, started, exit_code=code if code else 1,
                       error=f"the agent exited during its turn (code {code})")
    try:
        response = future.result()
    except Exception as exc:  # noqa: BLE001 - an error answer to session/prompt, a closed pipe
        if getattr(exc, "code", None) == -32000:  # auth_required mid-turn: the model refused the key or login
            # (docs/real-agents.md: an agent failure with the agent's own line, not a login question; a
            # session that cannot even start without a login still asks the user, see run_acp_round)
            end_acp_session(ctx.task_id)
            append_log(log_file, f"[acp] authentication required: {exc}\n")
            return _result(log_file, started, exit_code=1, error=f"session/prompt failed: authentication required ({exc})")
        code = session.wait_exit(2.0)
        if code is not None:  # the agent died mid-turn: an agent failure with its exit code
            end_acp_session(ctx.task_id)
            return _result(log_file, started, exit_code=code or 1, error=f"the agent exited during its turn (code {code})")
        append_log(log_file, f"[acp] session/prompt failed: {exc}\n")  # the agent's own words, before the trailer
        return _result(log_file, started, exit_code=1, error=f"session/prompt failed: {type(exc).__name__}: {exc}")
    stop = getattr(response, "stop_reason", None)
    if stop in ("end_turn", "max_tokens", "max_turn_requests"):
        note = None if stop == "end_turn" else f"the turn ended on {stop}; its work is verified as it is"
        if note:
            append_log(log_file, f"[acp] {note}\n")
        return _result(log_file, started, ok=True, exit_code=0)
    why = f"the agent ended its turn with stop reason '{stop}'" + (" (it refused the task)" if stop == "refusal" else "")
    append_log(log_file, f"[acp] {why}\n")  # the last line of the log says why, not the agent's chatter
    return _result(log_file, started, exit_code=1, error=why)


def _deliver(events: "queue.Queue[tuple[str, str, dict[str, Any]]]", hooks: RoundHooks) -> None:
    """Hand the events the protocol thread collected to the task (in the caller's thread)."""
    while True:
        try:
            name, detail, data = events.get_nowait()
        except queue.Empty:
            return
        hooks.event(name, detail, data)
