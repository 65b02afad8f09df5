"""The ``gui`` driver: a desktop chat agent app driven over the Chrome DevTools Protocol
(docs/agents-tasks.md §1.11; docs/agent-adapters.md).

One generic, profile-driven driver for every vendor: what differs between apps (how to launch
them, which port, what their window looks like) is the profile's ``gui`` object
(:mod:`.config`). A round:

1. takes the app of the task (one per agent and user-data-dir, serialised across processes
   by a lock file held until the task's flow run ends): adopts our running instance or
   launches one (:mod:`.instance`: ownership proof, foreign ports never touched), hands
   its :class:`~tianshu_mcp.core.procs.ProcRecord` to ``hooks.started`` and exempts it from the
   flow's orphan reaping (``keep_alive``) — the app outlives the round;
2. connects with Playwright (``connect_over_cdp``, bounded retries within ``launchTimeoutMs``)
   and finds the product's window;
3. a login screen → the round ends asking the user (``question_kind="login_required"``,
   event ``awaiting_user_authorization``);
4. the first message of a task opens a new chat (``freshSession``), binds the project and picks
   the model (:mod:`.page`); a rework round types into the same chat (the task's marker is
   in the conversation) and sends only the feedback;
5. types ``【tianshu:<taskId>:r<round>:<attempt>】`` + the message (attempt = ``initial``,
   ``rework`` or ``continue:<sha256(answer)[:8]>``), reads the composer back (marker missing →
   ``setup_failed``/input_mismatch, nothing sent), clicks send and confirms the send (marker in
   the conversation, composer cleared or a running signal); unconfirmed → ``setup_failed``
   (send_unknown), never resent;
6. polls every ``pollIntervalMs`` through the liveness judge (:mod:`.liveness`): the first
   running signal emits ``file_modification_started``, a confirmation card ends the round
   asking the user (``user_confirmation``, event ``confirmation_dialog_detected``), a stable
   reply after a running signal is success, selector drift ends ``idle_timeout`` (never a
   success), a stop button over a frozen reply for ``stallTimeoutMs`` asks the user; a
   ``progress`` note every ``progressIntervalMs``;
7. cancel (``hooks.should_stop``) clicks stop and waits ≤ ``cancelWaitMs`` for idle →
   ``killed`` with ``gui_stop {clicked, idle}``; the app closing or the connection dropping
   mid-run → hard failure ``cdp_disconnected`` (no verification round is spent on it).

Playwright runs in a thread of its own with its own event loop (``asyncio.run``): the caller
may be a Prefect task thread with a running loop. Hooks are called from the caller's thread
only (events are queued), so Prefect's run context stays where it is.

Simplified against the original (Linux here; stated in the submodules): spawn activation only,
an in-app folder field instead of the native folder dialog, no permission-mode switch, no
session selection by id/title (a rework finds its chat by the task's marker), one lock per
user-data-dir instead of one per adapter class.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import queue
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ...core.i18n import N_, _
from ...core.procs import ProcRecord
from .config import GuiSettings, gui_settings
from .instance import AppInstance, InstanceError, launch_argv
from .liveness import JudgeLimits, Observation, judge, start_state, text_hash
from .page import AppPage, StepError
from ..answers import Answers
from .session import end_gui_session, task_app
from ..profiles import DEFAULT_AGENT_TIMEOUT_MS, ResolvedAgent
from ..round import (
    FEEDBACK_HEADER,
    AgentRunContext,
    AgentRunResult,
    RoundHooks,
    append_log,
    build_prompt,
    log_file_path,
    prompt_file_path,
    setup_failure,
)

__all__ = ["attempt_of", "end_gui_session", "marker", "message_of", "run_gui_round"]

ANSWER_HEADER = "## The user's answer"
"""How the flow marks the user's answer in a continued round's feedback
(:func:`tianshu_mcp.flows.needs_user.take_answer`)."""


def marker(task_id: str, rnd: int, attempt: str) -> str:
    """``【tianshu:<taskId>:r<round>:<attempt>】`` (docs/agents-tasks.md §1.11.7)."""
    return f"【tianshu:{task_id}:r{rnd}:{attempt}】"


def attempt_of(ctx: AgentRunContext) -> str:
    """``continue:<sha256(answer or "confirmed")[:8]>`` when the round re-runs after asking the
    user (``ctx.answer``, or the answer section of the feedback), ``rework`` for a later round or
    any feedback, else ``initial`` (docs/agents-tasks.md §1.11.7)."""
    answer = ctx.answer
    if answer is None and ctx.feedback and ANSWER_HEADER in ctx.feedback:
        answer = ctx.feedback.split(ANSWER_HEADER, 1)[1].strip()
    if answer is not None:
        answer = answer.strip() or "confirmed"
        return "continue:" + hashlib.sha256(answer.encode("utf-8")).hexdigest()[:8]
    return "rework" if ctx.round > 0 or ctx.feedback else "initial"


def message_of(ctx: AgentRunContext, same_chat: bool) -> str:
    """What to type after the marker: the feedback alone in the task's own chat (the app
    already has the brief), else the whole prompt (:func:`build_prompt`)."""
    if same_chat and ctx.feedback:
        return FEEDBACK_HEADER.strip() + "\n" + ctx.feedback
    return build_prompt(ctx)


# --- the round ------------------------------------------------------------------------------


class _Channel:
    """The round thread's side of the hooks: events and the record are queued for the
    caller's thread; the stop flag is set by it."""

    def __init__(self, log_file: Path) -> None:
        self.log_file = log_file
        self.queue: queue.Queue[tuple[str, Any]] = queue.Queue()
        self.stop = threading.Event()

    def log(self, level: str, msg: str) -> None:
        append_log(self.log_file, f"[{level}] {msg}\n")

    def event(self, name: str, detail: str, data: dict[str, Any] | None = None) -> None:
        self.queue.put(("event", (name, detail, data or {})))

    def started(self, record: ProcRecord) -> None:
        self.queue.put(("started", record))

    def stopped(self) -> bool:
        return self.stop.is_set()


def _drain(ch: _Channel, hooks: RoundHooks) -> None:
    while True:
        try:
            kind, item = ch.queue.get_nowait()
        except queue.Empty:
            return
        if kind == "started":
            hooks.started(item)
        else:
            hooks.event(*item)


def run_gui_round(ctx: AgentRunContext, agent: ResolvedAgent, hooks: RoundHooks) -> AgentRunResult:
    """Run one round of a desktop chat agent (see the module doc; docs/agents-tasks.md §1.11).

    Args:
        ctx: the round (``task_id``, ``project_path``, ``round``, ``task``, ``feedback``,
            ``timeout_ms``: the round's limit in ms, ≤ 0 → the profile's ``timeoutMs`` or 30 min).
        agent: the resolved agent: ``command`` is the app's executable, ``profile.gui`` its settings.
        hooks: cancellation probe, ``on_start`` (the app's record), ``on_event`` (events and
            ``progress`` notes).

    Returns:
        :class:`AgentRunResult`: ``ok``/exit code 0 for a reply judged final; ``question`` +
        ``question_kind`` ("login_required" | "user_confirmation") when the app waits for the
        user; ``killed`` + ``gui_stop`` on cancel; ``timeout`` (+ ``error_type="idle_timeout"``
        when the window showed no usable signal); ``hard_failure`` with ``error_type``
        ``setup_failed`` (app not ours / not startable, project, model, input or send could not
        be done or confirmed) or ``cdp_disconnected`` (the app went away mid-run). Never raises.
    """
    log_file = log_file_path(ctx)
    profile = agent.profile
    if profile is None or not agent.command:
        why = N_("agent '{agentId}' has no app executable: {message}")
        return setup_failure(log_file, why.format(agentId=agent.id, message=agent.message), 0, "setup_failed",
                             _(why).format(agentId=agent.id, message=agent.message))
    settings = gui_settings(profile)
    Answers(ctx.task_dir, CONFIRMATIONS_FILE).settle(ctx.round, ctx.answer)  # a re-run round brings the answer
    now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    append_log(log_file, f"\n===== {profile.adapter or 'gui:' + agent.id} run @ {now} =====\n")
    ch = _Channel(log_file)
    box: list[AgentRunResult] = []
    started = time.monotonic()

    def body() -> None:
        try:
            box.append(asyncio.run(_round(ctx, agent, settings, ch, started)))
        except BaseException as exc:  # noqa: BLE001 - reported as a result, never raised
            box.append(_fail(ch, started, "setup_failed", f"internal: {type(exc).__name__}: {exc}"))

    thread = threading.Thread(target=body, name=f"cdp-{ctx.task_id}", daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(0.1)
        _drain(ch, hooks)
        if not ch.stop.is_set() and hooks.stopped():
            ch.stop.set()
    _drain(ch, hooks)
    res = box[0]
    if res.error_type == "cdp_disconnected" and (ch.stop.is_set() or hooks.stopped()):
        # a cancel from another process kills the app's tree at once: that is the cancel, not a crash
        ch.log("info", "cancelled; the app was closed before its stop button could be clicked")
        res = _result(ch, started, killed=True, error="cancelled", gui_stop={"clicked": False, "idle": False})
    return res


def _result(ch: _Channel, started: float, **kw: Any) -> AgentRunResult:
    fields: dict[str, Any] = {"ok": False, "exit_code": None, "timeout": False, "killed": False, "error": None}
    fields.update(kw)
    return AgentRunResult(duration_ms=int((time.monotonic() - started) * 1000), log_file=ch.log_file, **fields)


def _fail(ch: _Channel, started: float, error_type: str, message: str, shown: str | None = None) -> AgentRunResult:
    """A hard failure: ``message`` (English) in the round's log, ``shown`` (the locale's words,
    default ``message``) as the result's error, which becomes the task's message."""
    ch.log("error", message)
    return _result(ch, started, error=shown or message, hard_failure=True, error_type=error_type)


def _session(ctx: AgentRunContext, agent: ResolvedAgent, settings: GuiSettings, ch: _Channel,
             deadline: float) -> AppInstance:
    return task_app(ctx.task_id, agent, settings, deadline, ch.log, ch.stopped, ch.started)


async def _connect(pw: Any, instance: AppInstance, settings: GuiSettings, ch: _Channel) -> tuple[Any, AppPage]:
    """Connect to the app and find its window; retries every 500 ms within ``launchTimeoutMs``.
    Raises InstanceError("setup_failed") when no usable window answers in time."""
    import re

    deadline = time.monotonic() + settings.launch_timeout_ms / 1000
    last, raw = N_("no attempt"), False  # raw: an exception's own words, not a msgid
    while True:
        browser = None
        try:
            browser = await pw.chromium.connect_over_cdp(f"http://127.0.0.1:{instance.port}",
                                                         timeout=settings.cdp_send_timeout_ms)
            for context in browser.contexts:
                for page in context.pages:
                    url = page.url or ""
                    if url.startswith(("devtools://", "chrome://")):
                        continue
                    if settings.page_url_pattern and not re.search(settings.page_url_pattern, url):
                        continue
                    if settings.page_title_pattern and not re.search(settings.page_title_pattern, await page.title()):
                        continue
                    app = AppPage(page, settings)
                    snap = await app.snapshot()  # a DOM round trip: the composer or the login screen
                    if snap.login or snap.input is not None:
                        return browser, app
                    last, raw = N_("the window shows neither the composer nor the login screen yet"), False
            if not any(context.pages for context in browser.contexts):
                last, raw = N_("no window"), False
        except Exception as exc:  # noqa: BLE001 - retried until the deadline
            last, raw = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}", True
        if browser is not None:
            with contextlib.suppress(Exception):
                await browser.close()
        if not instance.alive():
            raise InstanceError("cdp_disconnected", N_("the app exited while connecting"))
        if ch.stopped():
            raise InstanceError("aborted", "cancelled while connecting")
        if time.monotonic() >= deadline:
            raise InstanceError("setup_failed", N_("could not drive the app's window on port {port} within {ms} ms: "
                                                   "{last}"), {"last": last if raw else _(last)},
                                port=instance.port, ms=settings.launch_timeout_ms, last=last)
        await asyncio.sleep(0.5)


async def _round(ctx: AgentRunContext, agent: ResolvedAgent, settings: GuiSettings, ch: _Channel,
                 started: float) -> AgentRunResult:
    from playwright.async_api import async_playwright

    profile = agent.profile
    assert profile is not None
    timeout_ms = ctx.timeout_ms if ctx.timeout_ms > 0 else (profile.timeout_ms or DEFAULT_AGENT_TIMEOUT_MS)
    deadline = started + timeout_ms / 1000
    if ch.stopped():
        return _result(ch, started, killed=True, error="cancelled before the app was driven")
    try:
        instance = _session(ctx, agent, settings, ch, deadline)
    except InstanceError as exc:
        if exc.reason == "aborted":
            ch.log("info", str(exc))
            return _result(ch, started, killed=True, error=str(exc))
        # an app that cannot be started at all is the same hard failure as a CLI that cannot
        return _fail(ch, started, "spawn" if exc.reason == "spawn" else "setup_failed", f"{exc.reason}: {exc}",
                     f"{exc.reason}: {exc.shown}")
    async with async_playwright() as pw:
        browser = None
        try:
            browser, app = await _connect(pw, instance, settings, ch)
            return await _drive(ctx, agent, settings, ch, started, deadline, app, instance, timeout_ms)
        except InstanceError as exc:
            if exc.reason == "aborted":
                return _result(ch, started, killed=True, error=str(exc))
            return _fail(ch, started, "cdp_disconnected" if exc.reason == "cdp_disconnected" else "setup_failed",
                         f"{exc.reason}: {exc}", f"{exc.reason}: {exc.shown}")
        except StepError as exc:
            return _fail(ch, started, "setup_failed", f"{exc.reason}: {exc}", f"{exc.reason}: {exc.shown}")
        except Exception as exc:  # noqa: BLE001 - Playwright errors, timeouts
            gone = not instance.alive() or (browser is not None and not browser.is_connected())
            if gone and ch.stopped():
                ch.log("info", "cancelled; the app was closed before its stop button could be clicked")
                return _result(ch, started, killed=True, error="cancelled", gui_stop={"clicked": False, "idle": False})
            if gone:
                why = N_("the app closed or its debugging connection dropped mid-run (port {port}): {error}")
                said = dict(port=instance.port, error=f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
                return _fail(ch, started, "cdp_disconnected", why.format(**said), _(why).format(**said))
            return _fail(ch, started, "setup_failed", f"internal: {type(exc).__name__}: {exc}")
        finally:
            if browser is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(browser.close(), 5)  # disconnects; the app keeps running


async def _drive(ctx: AgentRunContext, agent: ResolvedAgent, settings: GuiSettings, ch: _Channel, started: float,
                 deadline: float, app: AppPage, instance: AppInstance, timeout_ms: int) -> AgentRunResult:
    """Steps 3–7 of the module doc on a connected window."""
    name = agent.display_name
    task_marker = f"【tianshu:{ctx.task_id}:"
    snap = await app.snapshot(task_marker=task_marker)
    if snap.login:
        return _ask_login(ctx, ch, started, name, _argv(agent, settings, instance))
    same_chat = snap.has_task_marker
    attempt = attempt_of(ctx)
    mark = marker(ctx.task_id, ctx.round, attempt)
    if not same_chat:
        if settings.fresh_session and await app.click("newSession"):
            ch.log("info", "opened a new chat")
        if ctx.project_path:
            ch.log("info", f"project {ctx.project_path}: {await app.bind_project(ctx.project_path)}")
    else:
        ch.log("info", "typing into the task's chat (same session)")
    model = ctx.model or settings.model  # the task's model hint wins over the profile's
    if settings.model_switch and model:
        ch.log("info", f"model {model}: {await app.pick_model(model)}")
    elif settings.model_required and not model:
        raise StepError("model_unavailable", N_("the profile requires a model (gui.modelRequired) but names none (gui.model)"))
    text = mark + message_of(ctx, same_chat)
    try:
        prompt_file_path(ctx).write_text(text, encoding="utf-8")
    except OSError:
        pass
    before = await app.snapshot()
    back = await app.type_text(text)
    if mark not in back:
        raise StepError("input_mismatch", N_("the composer does not hold the message after typing it (read back "
                                             "{back}); nothing was sent"), back=repr(back[:120]))
    if not await app.click("send"):
        raise StepError("send_unknown", N_("no send button (selector send={selector}); nothing was sent; visible: "
                                           "{visible}"), selector=repr(settings.selectors.get("send")),
                        visible=await app.visible_labels())
    confirm_by = time.monotonic() + min(60.0, max(5.0, timeout_ms / 1000))
    while True:
        s = await app.snapshot(before.reply_count, mark)
        how = ("marker in the conversation" if s.has_marker else "composer cleared" if s.input is not None and mark not in s.input
               else "running signal" if s.running or s.stop else "")
        if how:
            break
        if time.monotonic() >= confirm_by:
            raise StepError("send_unknown", N_("the send could not be confirmed (no marker in the conversation, "
                                               "composer not cleared, no running signal); not resent"))
        await asyncio.sleep(0.25)
    ch.log("info", f"sent round {ctx.round} ({attempt}, {len(text)} chars); confirmed by {how}")
    return await _watch(ctx, settings, ch, started, deadline, app, before.reply_count, mark, name,
                        _argv(agent, settings, instance))


CONFIRMATIONS_FILE = "gui-confirmations.json"
"""``<taskDir>/gui-confirmations.json``: the user's answers to the app's confirmation cards
(:class:`~tianshu_mcp.adapters.answers.Answers`): a card answered once is clicked the same way
when it shows again (the re-run round, rework rounds) — ``confirmAllow`` / ``confirmDeny``."""


def _card_key(text: str | None) -> str:
    """Identity of a confirmation card: a hash of its whitespace-normalised text."""
    return hashlib.sha256(" ".join((text or "").split()).encode("utf-8")).hexdigest()[:16]


def _argv(agent: ResolvedAgent, settings: GuiSettings, instance: AppInstance) -> list[str]:
    """The command line that opens the app as tianshu-mcp does (its port and profile directory)."""
    return launch_argv(agent.command or "", settings, instance.port, instance.user_data_dir)


def _ask_login(ctx: AgentRunContext, ch: _Channel, started: float, name: str, argv: list[str]) -> AgentRunResult:
    """The app shows its login screen: the round asks the user to log in. The app is closed while
    the task waits, so the question says exactly how to open it again so that the next round
    adopts it: the same executable, debugging port and profile directory."""
    import shlex

    q = _("{name} shows its login screen. Open the app with its tianshu-mcp profile and log in: {command} — then "
          "continue the task (the next round takes over that window; the login is kept in that profile "
          "directory).").format(name=name, command=shlex.join(argv))
    ch.log("warn", "login screen visible: awaiting the user's login")
    ch.event("awaiting_user_authorization", _("round {round}: {name} waits for a login").format(round=ctx.round, name=name),
             {"round": ctx.round})
    return _result(ch, started, error="login required", question=q, question_kind="login_required")


async def _watch(ctx: AgentRunContext, settings: GuiSettings, ch: _Channel, started: float, deadline: float,
                 app: AppPage, since: int, mark: str, name: str, argv: list[str]) -> AgentRunResult:
    """The poll loop (docs/agents-tasks.md §1.11.8–9); ``argv``: how the app is opened (for a login
    question)."""
    limits = JudgeLimits(settings.stable_rounds, settings.idle_timeout_ms, settings.stall_timeout_ms)
    state = start_state(time.monotonic() * 1000)
    answers = Answers(ctx.task_dir, CONFIRMATIONS_FILE)
    next_note = time.monotonic() + settings.progress_interval_ms / 1000
    while True:
        if ch.stopped():
            return await _stop(ch, started, settings, app, since, mark)
        if time.monotonic() >= deadline:
            return _result(ch, started, timeout=True, error="task_timeout: no final reply within the round's limit")
        s = await app.snapshot(since, mark)
        obs = Observation(login=s.login, confirm=s.confirm, running=s.running, stop_visible=s.stop, text=s.reply)
        first_run = not state.saw_running
        verdict, state = judge(state, obs, time.monotonic() * 1000, limits)
        if verdict == "running" and first_run:
            ch.event("file_modification_started", _("round {round}: {name} is working").format(round=ctx.round, name=name),
                     {"round": ctx.round})
        if time.monotonic() >= next_note:
            next_note = time.monotonic() + settings.progress_interval_ms / 1000
            evidence = "stop button" if s.stop else "running signal" if s.running else "reply" if s.reply else "none"
            note = f"{name} progress: {verdict}; evidence={evidence}; reply hash={text_hash(s.reply)}; stable={state.stable}"
            ch.event("progress", note, {"round": ctx.round, "verdict": verdict, "evidence": evidence,
                                        "replyHash": text_hash(s.reply), "stable": state.stable})
        if verdict == "needs_login":
            return _ask_login(ctx, ch, started, name, argv)
        if verdict == "needs_confirmation":
            key = _card_key(s.confirm)
            ch.event("confirmation_dialog_detected", f"round {ctx.round}: {(s.confirm or '')[:200]}", {"round": ctx.round})
            decided = answers.decided(key)
            if decided is not None and await app.answer_card(decided):
                ch.log("info", f"confirmation card: {s.confirm} → {'allowed' if decided else 'denied'} (the user's answer)")
                continue
            ch.log("warn", f"confirmation card: {s.confirm}")
            question = _("{name} asks for a confirmation: {card}\nAnswer yes to allow it, or no to deny it.").format(
                name=name, card=s.confirm)
            answers.ask(ctx.round, key, question)
            return _result(ch, started, error="user confirmation required", question_kind="user_confirmation",
                           question=question)
        if verdict == "stalled":
            ch.event("confirmation_dialog_detected", _("round {round}: {name} seems to wait").format(round=ctx.round,
                                                                                                    name=name),
                     {"round": ctx.round})
            return _result(ch, started, error="stalled", question_kind="user_confirmation",
                           question=_("{name} shows its stop button but its reply has not changed for {ms} ms; it may "
                                      "wait for a confirmation in its window. Confirm there (or answer here) and "
                                      "continue the task.").format(name=name, ms=settings.stall_timeout_ms))
        if verdict == "finished":
            ch.log("info", f"reply final after {state.stable} stable polls")
            append_log(ch.log_file, "[reply] " + s.reply.replace("\n", "\n[reply] ") + "\n")
            return _result(ch, started, ok=True, exit_code=0)
        if verdict == "idle_timeout":
            why = N_("idle_timeout: no running signal and no final reply within {ms} ms "
                     "(the app's selectors may have changed); not taken as a success")
            ch.log("error", why.format(ms=settings.idle_timeout_ms))  # the log stays English
            return _result(ch, started, timeout=True, error=_(why).format(ms=settings.idle_timeout_ms),
                           error_type="idle_timeout")
        await _sleep(ch, settings.poll_interval_ms)


async def _sleep(ch: _Channel, ms: int) -> None:
    """Sleep ``ms`` in ≤ 100 ms steps, waking early on cancel."""
    end = time.monotonic() + ms / 1000
    while not ch.stopped() and time.monotonic() < end:
        await asyncio.sleep(min(0.1, max(0.0, end - time.monotonic())))


async def _stop(ch: _Channel, started: float, settings: GuiSettings, app: AppPage, since: int,
                mark: str) -> AgentRunResult:
    """Cancel: click stop (stop-capable apps) and wait ≤ ``cancelWaitMs`` for idle."""
    if not settings.stop_capable:
        ch.log("info", "cancelled; this app is not stopped from here (stopCapable false)")
        return _result(ch, started, killed=True, error="cancelled")
    clicked = await app.click("stop")
    idle = False
    end = time.monotonic() + settings.cancel_wait_ms / 1000
    while True:
        s = await app.snapshot(since, mark)
        if not s.running and not s.stop:
            idle = True
            break
        if time.monotonic() >= end:
            break
        await asyncio.sleep(0.2)
    ch.log("info", f"cancelled: stop clicked={str(clicked).lower()}, app idle={str(idle).lower()}")
    return _result(ch, started, killed=True, error="cancelled", gui_stop={"clicked": clicked, "idle": idle})
