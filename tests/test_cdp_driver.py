"""The desktop (``gui``) driver against the fake desktop app in real Chromium (docs/agent-adapters.md

§4–§5; docs/agents-tasks.md §1.11): ``run_gui_round`` is called directly, as ``dispatch-round`` does.

Every wait is on a condition with a deadline; the fake's timings are short (a reply in ≈1.2 s)
and the driver polls every 100 ms with 3 stable rounds.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from fake_desktop import app_pids, LAUNCHER, free_port, gui_profile
from fixture_project import make_calc_repo
from tianshu_mcp.adapters.cdp.driver import attempt_of, end_gui_session, marker, run_gui_round
from tianshu_mcp.adapters.cdp.liveness import (
    JudgeLimits,
    Observation,
    judge,
    start_state,
)
from tianshu_mcp.adapters.profiles import AgentProfile, resolve_profile
from tianshu_mcp.adapters.round import AgentRunContext, RoundHooks

WRONG = "def add(a, b):\n    return abs(a) + abs(b)\n"
RIGHT = "def add(a, b):\n    return a + b\n"
CHROMIUM = "/usr/bin/chromium"

needs_chromium = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs the system Chromium")


class Recorder:
    """RoundHooks that record what the driver reports; ``stop`` cancels."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, Any]]] = []
        self.records: list[Any] = []
        self.stop = threading.Event()

    def hooks(self) -> RoundHooks:
        return RoundHooks(should_stop=self.stop.is_set, on_start=self.records.append,
                          on_event=lambda n, d, data: self.events.append((n, d, data)))

    def names(self) -> list[str]:
        return [e[0] for e in self.events]


def until(cond: Any, timeout_s: float = 60, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = cond()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


class Rig:
    """One fake desktop app profile, its project and its task."""

    def __init__(self, tmp: Path, mode: str = "normal", **gui: Any) -> None:
        self.tmp = tmp
        self.udd = tmp / "app" / "user-data"
        self.port = free_port()
        self.repo = make_calc_repo(tmp / "calc")
        self.task_id = f"tsk_test_{uuid.uuid4().hex[:8]}"
        self.task_dir = tmp / "task"
        self.task_dir.mkdir()
        self.set_profile(mode, **gui)

    def set_profile(self, mode: str, **gui: Any) -> None:
        self.profile = gui_profile(self.udd, self.port, mode, **gui)
        self.agent = resolve_profile("fake-desktop", AgentProfile.model_validate(self.profile))
        assert self.agent.ok, self.agent.message

    def ctx(self, rnd: int = 0, feedback: str | None = None, timeout_ms: int = 90000) -> AgentRunContext:
        return AgentRunContext(task_id=self.task_id, project_path=str(self.repo), task_dir=self.task_dir, round=rnd,
                               task="Fix add() in calc.py so that the tests pass.", feedback=feedback,
                               timeout_ms=timeout_ms)

    def run(self, rec: Recorder, rnd: int = 0, feedback: str | None = None, timeout_ms: int = 90000) -> Any:
        return run_gui_round(self.ctx(rnd, feedback, timeout_ms), self.agent, rec.hooks())

    def app_pids(self) -> list[int]:
        return app_pids(self.udd)

    def log(self, rnd: int = 0) -> str:
        return (self.task_dir / f"agent-{rnd}.log").read_text()

    def close(self) -> None:
        end_gui_session(self.task_id)
        for pid in self.app_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


@pytest.fixture
def rig(tmp_path: Path) -> Any:
    rigs: list[Rig] = []

    def make(mode: str = "normal", **gui: Any) -> Rig:
        r = Rig(tmp_path / f"rig{len(rigs)}", mode, **gui)
        r.tmp.mkdir(exist_ok=True)
        rigs.append(r)
        return r

    yield make
    for r in rigs:
        r.close()


def page_eval(port: int, js: str) -> Any:
    """Evaluate ``js`` in the fake app's window, as a user's hand would act on it."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.connect_over_cdp(f"http://127.0.0.1:{port}")
        try:
            page = next(p for c in browser.contexts for p in c.pages if p.url.endswith("/fake-desktop-app"))
            return page.evaluate(js)
        finally:
            browser.close()


# --- the liveness judge (pure) ---------------------------------------------------------------

LIM = JudgeLimits(stable_rounds=3, idle_timeout_ms=1000, stall_timeout_ms=500)


def _feed(observations: list[tuple[float, Observation]]) -> list[str]:
    state = start_state(0)
    verdicts = []
    for now, obs in observations:
        verdict, state = judge(state, obs, now, LIM)
        verdicts.append(verdict)
    return verdicts


def test_judge_finishes_only_after_a_running_signal_and_a_stable_reply() -> None:
    run = Observation(running=True, stop_visible=True, text="")
    done = Observation(text="all fixed")
    assert _feed([(100, run), (200, Observation(text="all")), (300, done), (400, done), (500, done), (600, done)]) == \
        ["running", "pending", "pending", "pending", "pending", "finished"]


def test_judge_never_finishes_without_a_running_signal_and_times_out_idle() -> None:
    done = Observation(text="a stale reply")
    verdicts = _feed([(t, done) for t in range(100, 2000, 100)])
    assert "finished" not in verdicts and verdicts[-1] == "idle_timeout"
    # nothing at all (the selectors match nothing) ends idle too
    assert _feed([(t, Observation()) for t in range(100, 1200, 100)])[-1] == "idle_timeout"


def test_judge_login_confirmation_and_stall() -> None:
    assert _feed([(0, Observation(login=True))]) == ["needs_login"]
    assert _feed([(0, Observation(confirm="Allow?", running=True))]) == ["needs_confirmation"]
    stuck = Observation(stop_visible=True, text="thinking")
    assert _feed([(0, stuck), (100, stuck), (300, stuck), (700, stuck)]) == ["running", "running", "running", "stalled"]
    moving = [(t, Observation(stop_visible=True, text=f"part {t}")) for t in range(0, 2000, 100)]
    assert set(_feed(moving)) == {"running"}


def test_judge_running_again_resets_stability() -> None:
    a, run = Observation(text="x"), Observation(running=True)
    assert _feed([(0, run), (100, a), (200, a), (300, run), (400, a), (500, a), (600, a), (700, a)])[-1] == "finished"
    assert _feed([(0, run), (100, a), (200, a), (300, run), (400, a), (500, a), (600, a)])[-1] == "pending"


def test_marker_and_attempt() -> None:
    ctx = AgentRunContext(task_id="tsk_1", project_path="/p", task_dir=Path("/t"), round=0, task="t")
    assert attempt_of(ctx) == "initial" and marker("tsk_1", 0, "initial") == "【tianshu:tsk_1:r0:initial】"
    ctx.round, ctx.feedback = 1, "test_x failed"
    assert attempt_of(ctx) == "rework"
    ctx.feedback = "## You asked the user\nlog in?\n\n## The user's answer\ndone"
    import hashlib

    assert attempt_of(ctx) == "continue:" + hashlib.sha256(b"done").hexdigest()[:8]


# --- the driver against the fake app ---------------------------------------------------------


@needs_chromium
def test_dispatch_runs_to_a_stable_reply_and_a_rework_types_into_the_same_chat(rig: Any) -> None:
    r = rig()
    rec = Recorder()
    res = r.run(rec)
    assert res.ok and res.exit_code == 0 and not res.hard_failure, (res, r.log())
    assert (r.repo / "calc.py").read_text() == WRONG  # the brief names no failing test
    assert "file_modification_started" in rec.names() and "progress" in rec.names()
    assert len(rec.records) == 1 and r.app_pids(), "the app was launched once and outlives the round"
    log = r.log()
    assert log.lstrip().startswith("===== gui:fake-desktop run @ ") and "[info] sent round 0 (initial" in log
    assert "model fake-model-large: picked from the model menu" in log and "added to the project picker" in log
    prompt0 = (r.task_dir / "prompt-0.txt").read_text()
    assert prompt0.startswith(marker(r.task_id, 0, "initial")) and "Fix add()" in prompt0

    rec2 = Recorder()
    res2 = r.run(rec2, 1, "The check pytest failed: tests/test_calc.py::test_add_negative")
    assert res2.ok, (res2, r.log(1))
    assert (r.repo / "calc.py").read_text() == RIGHT
    assert rec2.records == [], "the rework reuses the task's app"
    assert "typing into the task's chat (same session)" in r.log(1)
    prompt1 = (r.task_dir / "prompt-1.txt").read_text()
    assert prompt1.startswith(marker(r.task_id, 1, "rework")) and "Fix add()" not in prompt1
    users = page_eval(r.port, "() => [...document.querySelectorAll('[data-message-author-role=user]')].map(e => e.innerText)")
    assert len(users) == 2 and users[0].startswith(marker(r.task_id, 0, "initial")) and \
        users[1].startswith(marker(r.task_id, 1, "rework"))
    state = page_eval(r.port, "() => [localStorage.getItem('fake.project'), localStorage.getItem('fake.model')]")
    assert state == [json.dumps(str(r.repo)), json.dumps("fake-model-large")]


@needs_chromium
def test_login_screen_asks_the_user_and_after_the_login_the_round_runs(rig: Any) -> None:
    r = rig("login")
    rec = Recorder()
    res = r.run(rec)
    assert not res.ok and res.question_kind == "login_required" and res.question, res
    assert "awaiting_user_authorization" in rec.names()
    assert (r.repo / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"  # nothing was sent
    page_eval(r.port, "() => document.querySelector('[aria-label=\"Log in\"]').click()")  # the user logs in
    answer = "## You asked the user\nplease log in\n\n## The user's answer\nlogin done"
    res2 = r.run(Recorder(), 0, answer)
    assert res2.ok, (res2, r.log())
    assert (r.task_dir / "prompt-0.txt").read_text().startswith(marker(r.task_id, 0, attempt_of(r.ctx(0, answer))))
    assert "continue:" in (r.task_dir / "prompt-0.txt").read_text()[:60]


@needs_chromium
def test_cancel_clicks_stop_and_waits_for_idle(rig: Any) -> None:
    r = rig("hang")
    rec = Recorder()
    box: list[Any] = []
    t = threading.Thread(target=lambda: box.append(r.run(rec)))
    t.start()
    until(lambda: "file_modification_started" in rec.names() or not t.is_alive(), 90, "the app to start working")
    rec.stop.set()
    t.join(60)
    res = box[0]
    assert res.killed and res.gui_stop == {"clicked": True, "idle": True}, (res, r.log())
    assert r.app_pids(), "cancel stops the reply, the app itself ends with the task"


@needs_chromium
def test_a_stop_button_over_a_frozen_reply_stalls_into_a_user_confirmation(rig: Any) -> None:
    # "hang": the app shows its stop button and never changes its (empty) reply; after
    # stallTimeoutMs the driver's stalled branch ends the round asking the user (adapters/cdp/driver.py _watch)
    r = rig("hang", stallTimeoutMs=1500)
    rec = Recorder()
    res = r.run(rec)
    assert (res.ok, res.hard_failure, res.timeout, res.killed) == (False, False, False, False), (res, r.log())
    assert res.question_kind == "user_confirmation" and res.error == "stalled", res
    assert "stop button" in (res.question or "") and "1500 ms" in (res.question or ""), res.question
    names = rec.names()
    assert "file_modification_started" in names and "confirmation_dialog_detected" in names, names
    assert names.index("file_modification_started") < names.index("confirmation_dialog_detected")
    stalled = [e for e in rec.events if e[0] == "confirmation_dialog_detected"]
    assert len(stalled) == 1 and stalled[0][2] == {"round": 0} and "seems to wait" in stalled[0][1], stalled
    assert not (r.task_dir / "gui-confirmations.json").exists()  # no card: nothing to remember an answer for
    assert r.app_pids(), "asking the user leaves the app running"


@needs_chromium
def test_changed_selectors_end_idle_timeout_never_ok(rig: Any) -> None:
    r = rig("drift", idleTimeoutMs=2000)  # nothing ever matches: the window cannot be raced
    res = r.run(Recorder())
    assert not res.ok and res.timeout and res.error_type == "idle_timeout", (res, r.log())
    assert "not taken as a success" in r.log()


@needs_chromium
def test_an_unconfirmed_send_is_a_hard_failure_and_is_never_resent(rig: Any) -> None:
    r = rig("deaf")
    res = r.run(Recorder(), timeout_ms=8000)  # confirming the send waits min(60 s, max(5 s, the round's limit))
    assert (res.ok, res.hard_failure, res.error_type) == (False, True, "setup_failed"), (res, r.log())
    assert "send_unknown" in (res.error or "") and "not resent" in (res.error or "")
    assert page_eval(r.port, "window.sendClicks") == 1  # clicked once, never again


@needs_chromium
def test_a_confirmation_card_asks_the_user_and_continue_answers_it(rig: Any) -> None:
    r = rig("confirm")
    rec = Recorder()
    res = r.run(rec)
    assert res.question_kind == "user_confirmation" and "Allow the agent" in (res.question or ""), (res, r.log())
    assert "confirmation_dialog_detected" in rec.names()
    res2 = r.run(Recorder(), 0, "## You asked the user\nAllow?\n\n## The user's answer\nyes")
    assert res2.ok, (res2, r.log())
    assert (r.repo / "calc.py").read_text() == WRONG


@needs_chromium
def test_an_answered_card_of_a_slow_app_is_clicked_once(rig: Any) -> None:
    # the app takes 1 s to act on the click, so the card stays on screen for ~10 polls: the
    # driver clicks it once and waits for it to go (it clicked it again before, and its second
    # click waited 10 s for a button already gone: "Locator.click: Timeout", the round failed)
    r = rig("confirm,slowcard")
    assert r.run(Recorder()).question_kind == "user_confirmation", r.log()
    # the re-run round: the card shows again and the user's answer clicks it
    assert run_gui_round(dataclasses.replace(r.ctx(), answer="yes"), r.agent, Recorder().hooks()).ok, r.log()
    assert page_eval(r.port, "window.cardClicks") == 1, r.log()
    res = r.run(Recorder(), 1, "tests/test_calc.py::test_add_negative failed")  # a rework round: the same card
    assert res.ok, (res, r.log(1))
    assert "→ allowed (the user's answer)" in r.log(1)
    assert page_eval(r.port, "window.cardClicks") == 2, r.log(1)
    assert (r.repo / "calc.py").read_text() == RIGHT


@needs_chromium
def test_the_app_closing_mid_run_is_a_hard_failure_cdp_disconnected(rig: Any) -> None:
    # the app closes ≈0.5 s into the job; a 2 s idle window could end the round first on a
    # loaded machine, so the idle timeout is out of the way: the round ends when the app is gone
    r = rig("close", idleTimeoutMs=120000)
    res = r.run(Recorder())
    assert res.hard_failure and res.error_type == "cdp_disconnected" and not res.ok, (res, r.log())
    until(lambda: not r.app_pids(), 20, "the app to be gone")
    # the next round starts the app again (a new chat)
    r.set_profile("normal")
    res2 = r.run(Recorder(), 1, "tests/test_calc.py::test_add_negative failed")
    assert res2.ok, (res2, r.log(1))
    assert "starting it again" in r.log(1)


@needs_chromium
def test_a_foreign_browser_on_the_port_is_a_coded_setup_failure_and_is_left_alone(rig: Any, tmp_path: Path) -> None:
    r = rig()
    foreign_udd = tmp_path / "foreign-profile"
    flags = ["--headless=new", "--disable-gpu", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync"] + (["--no-sandbox"] if os.geteuid() == 0 else [])
    foreign = subprocess.Popen([CHROMIUM, *flags, f"--remote-debugging-port={r.port}", f"--user-data-dir={foreign_udd}",
                                "about:blank"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        def answers() -> bool:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{r.port}/json/version", timeout=1).read()
                return True
            except OSError:
                return False

        until(answers, 60, "the foreign browser")
        rec = Recorder()
        res = r.run(rec)
        assert res.hard_failure and res.error_type == "setup_failed", res
        assert f"port {r.port}" in (res.error or "") and "not ours" in (res.error or ""), res.error
        assert rec.records == [] and not r.app_pids()
        assert foreign.poll() is None and answers(), "the foreign browser was neither adopted nor killed"
        # with cdpPortAuto the driver moves on to the next free port of its range
        r.set_profile("normal", auto=True)
        res2 = r.run(Recorder())
        assert res2.ok, (res2, r.log())
        assert foreign.poll() is None
    finally:
        os.killpg(foreign.pid, signal.SIGKILL)
        foreign.wait()
        shutil.rmtree(foreign_udd, ignore_errors=True)


@needs_chromium
def test_our_running_instance_is_adopted(rig: Any) -> None:
    r = rig()
    r.udd.mkdir(parents=True)
    env = {**os.environ, "FAKE_DESKTOP_MODE": "normal", "FAKE_DESKTOP_RUN_MS": "1200"}
    app = subprocess.Popen([sys.executable, str(LAUNCHER), f"--remote-debugging-port={r.port}", f"--user-data-dir={r.udd}"],
                           env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)
    try:
        until(lambda: b"fake-desktop-app" in _json_list(r.port), 60, "the app's window")
        rec = Recorder()
        res = r.run(rec)
        assert res.ok, (res, r.log())
        assert "adopting our running instance" in r.log() and [x.pid for x in rec.records] == [app.pid]
        end_gui_session(r.task_id)  # the task's end kills what it drove
        until(lambda: app.poll() is not None, 20, "the adopted app to end")
    finally:
        if app.poll() is None:
            os.killpg(app.pid, signal.SIGKILL)
        app.wait()


def _json_list(port: int) -> bytes:
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=1).read()
    except OSError:
        return b""
