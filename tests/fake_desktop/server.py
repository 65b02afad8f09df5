#!/usr/bin/env python3
"""The fake desktop agent app's backend: a scripted "model" behind a chat page.

A fake for a vendor's desktop coding app (ZCode, Codex desktop, TraeWork, …): those are
Electron apps for Windows/macOS that cannot run on this Linux machine, so the driver
(:mod:`tianshu_mcp.adapters.cdp.driver`) is proven against this stand-in instead. The "app" is Chromium
(started by :mod:`launcher`) showing the page served here; the page keeps its own state
(logged in, known projects, bound project, model) in ``localStorage``, so it lives in the
Chromium user-data-dir exactly as a real Electron app's state does.

Started by the launcher as ``server.py --parent-pid PID``; prints ``PORT <n>`` on stdout once it
listens on 127.0.0.1 and exits when its parent (the app) is gone.

HTTP:

* ``GET /fake-desktop-app`` – the chat page (``page.html`` with the behaviour flags filled in);
* ``POST /api/send`` ``{"text", "project", "model"}`` → ``{"jobId"}``: the scripted model starts;
* ``GET /api/job?id=J`` → ``{"state": running|confirm|done|cancelled, "reply", "confirm"}``;
* ``POST /api/stop`` ``{"jobId"}`` – the stop button; ``POST /api/confirm`` ``{"jobId", "allow"}``.

Behaviour (``FAKE_DESKTOP_MODE``, comma-separated flags):

* ``normal`` (default): running for ``FAKE_DESKTOP_RUN_MS`` (default 1200 ms) — half of it
  silent, then the edit, then a streamed reply — then idle. The edit is the one of
  ``console/demo/scripted_agent.py``: ``calc.py`` of the bound project gets the right fix of ``add`` only
  when the message names ``test_add_negative`` (the repair feedback does), else a wrong one;
* ``login``: the page starts on a login screen until "Log in" is clicked (remembered in
  localStorage, i.e. in the user-data-dir);
* ``confirm``: before editing, a confirmation card asks to allow the edit (the job waits on it),
  unless the message carries the user's answer ("## The user's answer" with yes/allow);
* ``slowcard`` (with ``confirm``): the app takes 1 s to act on a card's button, so the card stays
  on screen after the click (a slow app; a driver must not click it twice);
* ``close``: the app quits (its Chromium is terminated) while the job runs;
* ``hang``: the job runs until the stop button is pressed (for cancel tests);
* ``silent``: the job ends without any reply and without editing anything;
* ``deaf``: the send button takes the click and sends nothing (a frozen app);
* ``drift``: the page renders its running indicator and stop button under other names than
  the driver's selectors (a vendor update the profile has not caught up with).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

HERE = Path(__file__).resolve().parent
WRONG = "def add(a, b):\n    return abs(a) + abs(b)\n"
RIGHT = "def add(a, b):\n    return a + b\n"
ANSWER = "## The user's answer"


def flags() -> set[str]:
    """The behaviour flags of ``FAKE_DESKTOP_MODE``."""
    return {f.strip() for f in os.environ.get("FAKE_DESKTOP_MODE", "normal").split(",") if f.strip()}


class Job:
    """One message being answered by the scripted model (runs in its own thread)."""

    def __init__(self, text: str, project: str, parent_pid: int) -> None:
        self.id = uuid.uuid4().hex[:12]
        self.text = text
        self.project = project
        self.parent_pid = parent_pid
        self.state = "running"
        self.reply = ""
        self.confirm: str | None = None
        self.allow: bool | None = None
        self.stop = threading.Event()
        self.lock = threading.Lock()
        threading.Thread(target=self._run, daemon=True).start()

    def view(self) -> dict:
        with self.lock:
            return {"state": self.state, "reply": self.reply, "confirm": self.confirm}

    def _wait(self, seconds: float) -> bool:
        """Sleep ``seconds``; False when stopped meanwhile."""
        return not self.stop.wait(seconds)

    def _run(self) -> None:
        mode = flags()
        run_s = int(os.environ.get("FAKE_DESKTOP_RUN_MS", "1200")) / 1000
        if "close" in mode:
            if self._wait(min(0.5, run_s / 2)):
                os.kill(self.parent_pid, signal.SIGTERM)  # the app quits mid-run
            return
        if "hang" in mode:
            self.stop.wait(3600)
            return self._end("cancelled")
        if not self._wait(run_s / 2):
            return self._end("cancelled")
        if "silent" in mode:
            return self._end("done")
        answered = ANSWER in self.text
        if "confirm" in mode and not (answered and any(w in self.text.split(ANSWER, 1)[1].lower() for w in ("yes", "allow"))):
            with self.lock:
                self.state, self.confirm = "confirm", "Allow the agent to edit calc.py in this folder?"
            while self.allow is None and self._wait(0.05):
                pass
            with self.lock:
                self.state, self.confirm = "running", None
            if not self.allow:
                self._stream("The edit was not allowed; nothing changed.", run_s / 2)
                return self._end("done")
        target = Path(self.project) / "calc.py" if self.project else None
        right = "test_add_negative" in self.text
        if target is not None and target.exists():
            target.write_text(RIGHT if right else WRONG)
            words = f"I edited calc.py: add() now returns {'a + b' if right else 'abs(a) + abs(b)'}."
        else:
            words = f"I found no calc.py in {self.project or '(no folder)'}; nothing to change."
        if not self._stream(words, run_s / 2):
            return self._end("cancelled")
        self._end("done")

    def _stream(self, words: str, seconds: float) -> bool:
        parts = words.split(" ")
        for i in range(len(parts)):
            with self.lock:
                self.reply = " ".join(parts[: i + 1])
            if not self._wait(seconds / len(parts)):
                return False
        return True

    def _end(self, state: str) -> None:
        with self.lock:
            self.state = state


JOBS: dict[str, Job] = {}


class Handler(BaseHTTPRequestHandler):
    """The app's HTTP surface (see the module doc)."""

    parent_pid = 0

    def log_message(self, fmt: str, *args: object) -> None:  # quiet: the app log stays readable
        pass

    def _json(self, data: object, code: int = 200) -> None:
        body = json.dumps(data).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _body(self) -> dict:
        n = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(n) or b"{}")

    def do_GET(self) -> None:
        url = urlparse(self.path)
        if url.path == "/fake-desktop-app":
            html = (HERE / "page.html").read_text().replace("__FLAGS__", json.dumps(sorted(flags())))
            body = html.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if url.path == "/api/job":
            job = JOBS.get(parse_qs(url.query).get("id", [""])[0])
            return self._json(job.view() if job else {"state": "unknown"}, 200 if job else 404)
        self._json({"error": "not found"}, 404)

    def do_POST(self) -> None:
        url = urlparse(self.path)
        data = self._body()
        if url.path == "/api/send":
            for old in JOBS.values():  # a new message supersedes what still runs
                old.stop.set()
            job = Job(str(data.get("text") or ""), str(data.get("project") or ""), self.parent_pid)
            JOBS[job.id] = job
            return self._json({"jobId": job.id})
        job = JOBS.get(str(data.get("jobId") or ""))
        if job is None:
            return self._json({"error": "no such job"}, 404)
        if url.path == "/api/stop":
            job.stop.set()
            return self._json({"ok": True})
        if url.path == "/api/confirm":
            allow = bool(data.get("allow"))
            if "slowcard" in flags():
                threading.Timer(1.0, lambda: setattr(job, "allow", allow)).start()
            else:
                job.allow = allow
            return self._json({"ok": True})
        self._json({"error": "not found"}, 404)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--parent-pid", type=int, required=True)
    args = ap.parse_args()
    Handler.parent_pid = args.parent_pid
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(f"PORT {server.server_address[1]}", flush=True)

    def orphan_watch() -> None:  # the backend dies with its app
        while os.getppid() == args.parent_pid:
            time.sleep(0.2)
        os._exit(0)

    threading.Thread(target=orphan_watch, daemon=True).start()
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
