"""Webhook notifier (docs/agents-tasks.md §2.12–§2.13, docs/lifecycle.md §3): config rules and coded errors,
enqueue on a task's status event (no network, deduped), delivery with real local HTTP receivers
(signature, retries, timeouts, redirects never followed, failed files kept, restart survival,
cross-deliverer locking), and end to end through the session's service."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from conftest import CONSOLE, mcp_client, meta_of, server_env, text_of
from test_service import until
from tianshu_mcp.core import webhooks
from tianshu_mcp.core.errors import TianshuError
from tianshu_mcp.core.ids import new_task_id, new_verify_id
from tianshu_mcp.core.settings import check_config, load_config
from tianshu_mcp.core.taskstore import TaskStore, utc_now

SECRET = "correct-horse-battery-staple"


# --- helpers -------------------------------------------------------------------------------------
class Receiver:
    """A real HTTP server on 127.0.0.1:<free port> recording every POST.

    ``respond(n)`` gives the status (and extra headers) of the n-th request (0-based); a handler
    whose ``hold`` is set waits until :attr:`release` is set before answering.
    """

    def __init__(self, respond: Callable[[int], tuple[int, dict[str, str]]] | None = None, hold: bool = False) -> None:
        self.requests: list[dict[str, Any]] = []
        self.answered = 0
        self.release = threading.Event()
        self._lock = threading.Lock()
        respond = respond or (lambda n: (200, {}))
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                with outer._lock:
                    n = len(outer.requests)
                    outer.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                                           "body": body})
                if hold:
                    outer.release.wait(60)
                status, headers = respond(n)
                try:
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("content-length", "0")
                    self.end_headers()
                except OSError:  # the client gave up (timeout): nothing to answer
                    pass
                with outer._lock:
                    outer.answered += 1

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook?token=abc"

    def wait_for(self, count: int, timeout_s: float = 60) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.requests) >= count:
                    return list(self.requests)
            time.sleep(0.02)
        raise AssertionError(f"expected {count} request(s), got {len(self.requests)}")

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@contextlib.contextmanager
def receiver(respond: Callable[[int], tuple[int, dict[str, str]]] | None = None, hold: bool = False) -> Iterator[Receiver]:
    r = Receiver(respond, hold)
    try:
        yield r
    finally:
        r.close()


def write_config(home: Path, **webhook: Any) -> None:
    (home / "config.json").write_text(json.dumps({"notifications": {"webhook": webhook}}))


def hook_home(tmp_path: Path, url: str, **extra: Any) -> Path:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    write_config(home, **{"enabled": True, "url": url, "secret": SECRET, "backoffMs": 10, **extra})
    return home


def finish(home: Path, status: str, task_id: str | None = None, **fields: Any) -> str:
    """A task record that reaches ``status`` the way the flow does it: details + finishedAt
    persisted, then the status event."""
    store = TaskStore(home)
    task_id = task_id or new_task_id()
    if not store.exists(task_id):
        store.create(task_id, {"projectPath": "/work/proj", "agentId": "scripted", "task": "Fix add", "autoVerify": True})
        store.event(task_id, "started", "running", "round 0: agent running")
    extra = {} if status == "needs_user" else {"finishedAt": utc_now()}
    store.update(task_id, **{**extra, **fields})
    store.event(task_id, status, status, f"ended {status}")
    return task_id


def pending(home: Path) -> list[Path]:
    return webhooks.pending_files(home)


def failed(home: Path) -> list[dict[str, Any]]:
    d = webhooks.failed_dir(home)
    return [json.loads(p.read_text()) for p in sorted(d.glob("*.json"))] if d.is_dir() else []


def signature_ok(req: dict[str, Any], secret: str = SECRET) -> bool:
    expected = "sha256=" + hmac.new(secret.encode(), req["body"], hashlib.sha256).hexdigest()
    return hmac.compare_digest(req["headers"].get("x-tianshu-signature", ""), expected)


@contextlib.contextmanager
def captured_log() -> Iterator[list[logging.LogRecord]]:
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger = logging.getLogger("tianshu_mcp")
    handler, level = Keep(logging.DEBUG), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield records
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


# --- config --------------------------------------------------------------------------------------
@pytest.mark.parametrize(("webhook", "field", "why"), [
    ({"url": "ftp://x"}, "notifications.webhook.url", "must be an http(s) URL, got 'ftp://x'"),
    ({"url": "file:///etc/passwd"}, "notifications.webhook.url", "must be an http(s) URL"),
    ({"url": "javascript:alert(1)"}, "notifications.webhook.url", "must be an http(s) URL"),
    ({"url": "example.com/hook"}, "notifications.webhook.url", "must be an http(s) URL"),
    ({"url": "https://"}, "notifications.webhook.url", "must be an http(s) URL"),
    ({"enabled": True}, "notifications.webhook.url", "is required when enabled is true"),
    ({"url": "https://h.example", "sign": True}, "notifications.webhook.sign", "is true but no secret is set"),
    ({"url": "https://h.example", "events": ["done", "finished"]}, "notifications.webhook.events.1", "'finished'"),
    ({"url": "https://h.example", "maxRetries": 6}, "notifications.webhook.maxRetries", "less than or equal to 5"),
    ({"url": "https://h.example", "timeoutMs": 0}, "notifications.webhook.timeoutMs", "greater than or equal to 1"),
    # breaker round: wrong JSON types, typos and a webhook that can never fire are refused
    ({"url": "https://h.example", "enabled": "yes"}, "notifications.webhook.enabled", "valid boolean"),
    ({"url": "https://h.example", "timeoutMs": "5000"}, "notifications.webhook.timeoutMs", "valid integer"),
    ({"url": "https://h.example", "secert": "s"}, "notifications.webhook.secert", "xtra inputs are not permitted"),
    ({"url": "https://h.example", "events": []}, "notifications.webhook.events", "at least 1 item"),
    ({"url": " https://h.example"}, "notifications.webhook.url", "must be an http(s) URL"),
])
def test_invalid_webhook_config_is_a_coded_error_naming_the_field(tmp_path: Path, webhook: dict[str, Any], field: str,
                                                                  why: str) -> None:
    write_config(tmp_path, **webhook)
    with pytest.raises(TianshuError) as info:
        check_config(tmp_path)
    assert info.value.code.value == "CONFIG_INVALID"
    assert str(tmp_path / "config.json") in info.value.message
    assert field in info.value.message and why in info.value.message


def test_config_defaults_and_sign_flag(tmp_path: Path) -> None:
    assert check_config(tmp_path).notifications.webhook is None  # no config.json at all
    write_config(tmp_path, url="https://h.example/x")
    hook = check_config(tmp_path).notifications.webhook
    assert hook is not None and (hook.enabled, hook.timeout_ms, hook.max_retries, hook.backoff_ms) == (False, 5000, 2, 500)
    assert hook.events == ["done", "failed", "needs_human"] and hook.signs is False
    write_config(tmp_path, url="https://h.example/x", secret="s")
    assert check_config(tmp_path).notifications.webhook.signs is True  # a secret signs by default
    write_config(tmp_path, url="https://h.example/x", secret="s", sign=False)
    assert check_config(tmp_path).notifications.webhook.signs is False
    (tmp_path / "config.json").write_text("{nope")
    with pytest.raises(TianshuError, match=r"invalid JSON at line 1"):
        check_config(tmp_path)


def test_hot_reload_keeps_the_last_valid_config_and_never_logs_the_secret(tmp_path: Path) -> None:
    write_config(tmp_path, enabled=True, url="https://h.example/x", secret=SECRET)
    assert load_config(tmp_path).notifications.webhook.enabled is True
    with captured_log() as records:
        write_config(tmp_path, enabled=True, url="ftp://h.example/x", secret=SECRET, maxRetries="many")
        hook = load_config(tmp_path).notifications.webhook
    assert hook.enabled is True and hook.url == "https://h.example/x"  # the last valid value
    text = "\n".join(r.getMessage() for r in records)
    assert "notifications.webhook.url must be an http(s) URL" in text and SECRET not in text


def test_config_check_command(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    write_config(home, enabled=True, url="https://h.example/x", secret=SECRET, events=["done", "needs_user"])
    out = subprocess.run([CONSOLE, "config", "check"], check=False, env=server_env(home), capture_output=True, text=True, timeout=60,
                         stdin=subprocess.DEVNULL)
    verdict = json.loads(out.stdout)
    assert out.returncode == 0 and verdict["ok"] is True and SECRET not in out.stdout
    assert verdict["config"]["notifications"]["webhook"]["events"] == ["done", "needs_user"]
    write_config(home, enabled=True, url="ftp://h.example/x")
    out = subprocess.run([CONSOLE, "config", "check"], check=False, env=server_env(home), capture_output=True, text=True, timeout=60,
                         stdin=subprocess.DEVNULL)
    verdict = json.loads(out.stdout)
    assert out.returncode == 1 and verdict["ok"] is False and verdict["error"]["code"] == "CONFIG_INVALID"
    assert "notifications.webhook.url must be an http(s) URL, got 'ftp://h.example/x'" in verdict["error"]["message"]


# --- enqueue + deliver ---------------------------------------------------------------------------
def test_signed_post_with_the_spec_headers_and_body(tmp_path: Path) -> None:
    with receiver() as rx:
        home = hook_home(tmp_path, rx.url)
        tid = finish(home, "succeeded", roundsUsed=2, reportRound=1, lastMessage="verification passed (report-1) — ✓",
                     reportMd="/r/report-1.md", reportJson="/r/report-1.json")
        files = pending(home)
        assert len(files) == 1 and rx.requests == []  # the status path did no network
        assert SECRET not in files[0].read_text()
        assert webhooks.deliver_pending(home) == 1
        (req,) = rx.wait_for(1)
    assert req["path"] == "/hook?token=abc"
    assert req["headers"]["content-type"] == "application/json" and req["headers"]["x-tianshu-event"] == "done"
    assert signature_ok(req) and not signature_ok(req, "wrong")
    body = json.loads(req["body"].decode("utf-8"))
    record = TaskStore(home).read(tid)
    assert body == {"taskId": tid, "event": "done", "status": "succeeded", "ts": body["ts"],
                    "finishedAt": record["finishedAt"], "agentId": "scripted", "projectPath": "/work/proj", "round": 1,
                    "roundsUsed": 2, "reportRound": 1, "message": "verification passed (report-1) — ✓", "reportMd": "/r/report-1.md",
                    "reportJson": "/r/report-1.json"}
    assert pending(home) == [] and failed(home) == []


def test_a_dry_run_says_so_and_names_its_dry_run_report(tmp_path: Path) -> None:
    # breaker: a dry run's "done" looked like finished work to a receiver
    with receiver() as rx:
        home = hook_home(tmp_path, rx.url)
        tid = finish(home, "succeeded", dryRun=True, lastMessage="dry run: 0 blockers",
                     dryRunReportMd="/r/dry-run-report-0.md", dryRunReportJson="/r/dry-run-report-0.json")
        assert webhooks.deliver_pending(home) == 1
        (req,) = rx.wait_for(1)
    body = json.loads(req["body"].decode("utf-8"))
    assert body["taskId"] == tid and body["dryRun"] is True and body["event"] == "done"
    assert (body["reportMd"], body["reportJson"]) == ("/r/dry-run-report-0.md", "/r/dry-run-report-0.json")
    assert "dryRun" not in json.loads(webhooks.build_body("tsk_x", "succeeded", {"dryRun": False}))


def test_status_map_subscriptions_and_opt_ins(tmp_path: Path) -> None:
    with receiver() as rx:
        home = hook_home(tmp_path, rx.url)
        for status in ("failed", "needs_attention", "needs_user", "cancelled", "interrupted"):
            finish(home, status)
        # default events: done, failed, needs_human — needs_user and cancelled are opt-in
        assert [json.loads(p.read_text())["event"] for p in pending(home)] == ["failed", "needs_human"]
        assert webhooks.deliver_pending(home) == 2
        write_config(home, enabled=True, url=rx.url, events=["needs_user", "cancelled"])
        asked = finish(home, "needs_user", needsUserKey="needs-user-1")
        interrupted = finish(home, "interrupted")
        TaskStore(home).event(asked, "running", "running", "not a status event of its own")  # event != state
        assert webhooks.enqueue(home, new_verify_id(), "succeeded") is None  # vfy_ records never notify
        assert webhooks.enqueue(home, asked, "running") is None  # active statuses notify nothing
        assert webhooks.deliver_pending(home) == 2
        reqs = rx.wait_for(4)
    sent = [(json.loads(r["body"])["taskId"], json.loads(r["body"])["event"], json.loads(r["body"])["status"]) for r in reqs[2:]]
    assert sent == [(asked, "needs_user", "needs_user"), (interrupted, "cancelled", "interrupted")]
    assert all("x-tianshu-signature" not in r["headers"] for r in reqs[2:])  # no secret, no signature


def test_disabled_or_unsubscribed_sends_nothing(tmp_path: Path) -> None:
    with receiver() as rx:
        home = hook_home(tmp_path, rx.url, enabled=False)
        finish(home, "succeeded")
        write_config(home, enabled=True, url=rx.url, events=["failed"])
        finish(home, "succeeded")
        assert pending(home) == [] and webhooks.deliver_pending(home) == 0
        assert not webhooks.webhooks_dir(home).exists()  # a home without webhooks gets no files
        assert rx.requests == []


def test_dedupe_on_task_status_and_finished_at(tmp_path: Path) -> None:
    with receiver() as rx:
        home = hook_home(tmp_path, rx.url, events=["done", "failed", "needs_user", "cancelled"])
        store = TaskStore(home)
        tid = finish(home, "failed", finishedAt="2026-01-01T00:00:01.000Z")
        store.event(tid, "failed", "failed", "the same ending written again")  # same finishedAt
        assert webhooks.enqueue(home, tid, "failed") is None
        assert len(pending(home)) == 1
        # a rework ends again: new finishedAt after new activity → a new notification
        store.event(tid, "rework_triggered", "queued", "rework requested")
        finish(home, "failed", tid, finishedAt="2026-01-01T00:00:02.000Z")
        assert len(pending(home)) == 2
        # two writers finishing one run (sweep, then the flow itself): one notification
        finish(home, "interrupted", tid, finishedAt="2026-01-01T00:00:03.000Z")
        finish(home, "interrupted", tid, finishedAt="2026-01-01T00:00:04.000Z")
        assert len(pending(home)) == 3
        # a second question of the same task is a new notification
        store.event(tid, "continued", "queued", "answered")
        finish(home, "needs_user", tid, finishedAt=None, needsUserKey="needs-user-1")
        store.event(tid, "continued", "queued", "answered")
        finish(home, "needs_user", tid, needsUserKey="needs-user-2")
        assert len(pending(home)) == 5
        assert webhooks.deliver_pending(home) == 5
        events = [json.loads(r["body"])["event"] for r in rx.wait_for(5)]
    assert events == ["failed", "failed", "cancelled", "needs_user", "needs_user"]
    ledger = json.loads((webhooks.webhooks_dir(home) / "sent.json").read_text())
    assert len(ledger["keys"]) == 5 and all(k.startswith(tid) for k in ledger["keys"])


def test_task_store_event_queues_without_network_and_the_drainer_never_blocks(tmp_path: Path) -> None:
    with receiver(hold=True) as rx:
        home = hook_home(tmp_path, rx.url, timeoutMs=60000)
        tid = finish(home, "succeeded")
        assert rx.requests == [] and len(pending(home)) == 1  # enqueue returned before any request
        drainer = webhooks.WebhookDrainer(home)
        assert drainer.kick() is True  # returns while the receiver holds the request
        rx.wait_for(1)
        assert drainer.busy() and rx.answered == 0
        assert drainer.kick() is False  # one pass at a time
        rx.release.set()
        until(lambda: not pending(home) and not drainer.busy(), 60, "the delivery", every=0.05)
    assert json.loads(rx.requests[0]["body"])["taskId"] == tid and failed(home) == []


def test_slow_receiver_is_retried_then_kept_in_failed(tmp_path: Path) -> None:
    with receiver(hold=True) as rx:
        home = hook_home(tmp_path, rx.url, timeoutMs=300, maxRetries=1)
        tid = finish(home, "failed")
        assert rx.requests == []
        with captured_log() as records:
            assert webhooks.deliver_pending(home) == 0
        assert len(rx.requests) == 2 and rx.answered == 0  # both attempts timed out unanswered
    assert pending(home) == []
    (kept,) = failed(home)
    assert kept["taskId"] == tid and kept["attempts"] == 2 and "Timeout" in kept["error"]
    assert json.loads(kept["body"])["event"] == "failed"
    warnings = [r.getMessage() for r in records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and tid in warnings[0] and "failed after 2 attempt(s)" in warnings[0]
    assert "token=abc" not in warnings[0]  # the URL is redacted to scheme://host:port
    everything = "\n".join(r.getMessage() for r in records) + json.dumps(kept)
    assert SECRET not in everything


def test_failing_receiver_is_delivered_on_the_third_attempt(tmp_path: Path) -> None:
    with receiver(lambda n: (500, {}) if n < 2 else (200, {})) as rx:
        home = hook_home(tmp_path, rx.url, maxRetries=2)
        finish(home, "succeeded")
        assert webhooks.deliver_pending(home) == 1
        reqs = rx.wait_for(3)
    assert len(reqs) == 3 and len({r["body"] for r in reqs}) == 1 and all(signature_ok(r) for r in reqs)
    assert pending(home) == [] and failed(home) == []


def test_retries_exhausted_with_fewer_retries(tmp_path: Path) -> None:
    with receiver(lambda n: (500, {}) if n < 2 else (200, {})) as rx:
        home = hook_home(tmp_path, rx.url, maxRetries=1)
        finish(home, "succeeded")
        assert webhooks.deliver_pending(home) == 0
        assert len(rx.requests) == 2
    (kept,) = failed(home)
    assert kept["attempts"] == 2 and kept["error"] == "NotDelivered: HTTP 500"


def test_redirect_is_never_followed(tmp_path: Path) -> None:
    with receiver() as target, receiver(lambda n: (302, {"location": target.url})) as redirector:
        home = hook_home(tmp_path, redirector.url, maxRetries=1)
        finish(home, "succeeded")
        assert webhooks.deliver_pending(home) == 0
        assert len(redirector.requests) == 2
        assert target.requests == []
    (kept,) = failed(home)
    assert "HTTP 302" in kept["error"]


def test_webhook_disabled_before_delivery_keeps_the_file(tmp_path: Path) -> None:
    with receiver() as rx:
        home = hook_home(tmp_path, rx.url)
        finish(home, "succeeded")
        write_config(home, enabled=False, url=rx.url)
        assert webhooks.deliver_pending(home) == 0 and rx.requests == []
    (kept,) = failed(home)
    assert "disabled" in kept["error"]


def test_pending_deliveries_survive_a_restart(tmp_path: Path) -> None:
    with receiver() as rx:
        home = hook_home(tmp_path, rx.url)
        tid = finish(home, "succeeded")  # queued; no deliverer runs in this process
        # a delivery interrupted after two of its three attempts gets the one that is left
        other = finish(home, "failed")
        entry_path = next(p for p in pending(home) if other in p.name)
        entry = json.loads(entry_path.read_text())
        entry_path.write_text(json.dumps({**entry, "attempts": 2}))
        assert rx.requests == []
        code = ("import sys; from pathlib import Path; from tianshu_mcp.core.webhooks import deliver_pending; "
                "sys.stderr.write(str(deliver_pending(Path(sys.argv[1]))))")
        out = subprocess.run([sys.executable, "-c", code, str(home)], check=False, capture_output=True, text=True, timeout=120,
                             env=server_env(home), stdin=subprocess.DEVNULL)
        assert out.returncode == 0 and out.stderr.strip().endswith("2"), out.stderr
        reqs = rx.wait_for(2)
    assert [json.loads(r["body"])["taskId"] for r in reqs] == [tid, other] and all(signature_ok(r) for r in reqs)
    assert pending(home) == []


def test_concurrent_deliverers_send_each_delivery_once(tmp_path: Path) -> None:
    with receiver() as rx:
        home = hook_home(tmp_path, rx.url)
        ids = [finish(home, "succeeded") for _ in range(8)]
        code = ("import sys; from pathlib import Path; from tianshu_mcp.core.webhooks import deliver_pending; "
                "deliver_pending(Path(sys.argv[1]))")
        procs = [subprocess.Popen([sys.executable, "-c", code, str(home)], env=server_env(home),
                                  stdin=subprocess.DEVNULL) for _ in range(2)]
        threads = [threading.Thread(target=webhooks.deliver_pending, args=(home,)) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        for p in procs:
            assert p.wait(120) == 0
        until(lambda: not pending(home), 60, "every delivery", every=0.05)
        sent = sorted(json.loads(r["body"])["taskId"] for r in rx.requests)
    assert sent == sorted(ids)  # each exactly once
    assert failed(home) == []


def test_a_damaged_submission_ends_failed_with_its_event_and_webhook(tmp_path: Path) -> None:
    import anyio
    from tianshu_mcp.core import submissions
    from tianshu_mcp.hosting.intake import submit_one

    with receiver() as rx:
        home = hook_home(tmp_path, rx.url)
        store = TaskStore(home)
        tid = new_task_id()
        store.create(tid, {"projectPath": "/work/proj", "agentId": "scripted", "task": "x"})
        (submissions.submissions_dir(home)).mkdir(parents=True, exist_ok=True)
        submissions.entry_path(home, tid).write_text(json.dumps({"id": tid, "deployment": "run-task/run-task"}))
        assert anyio.run(submit_one, None, home, tid) is None
        assert store.read(tid)["finalStatus"] == "failed"
        assert [e["event"] for e in map(json.loads, (store.dir(tid) / "task.jsonl").read_text().splitlines())][-1] == "failed"
        assert webhooks.deliver_pending(home) == 1
        assert json.loads(rx.wait_for(1)[0]["body"])["status"] == "failed"


# --- through the MCP server and the session's service ---------------------------------------------
@pytest.mark.prefect
@pytest.mark.anyio
async def test_end_to_end_the_service_delivers_a_signed_done(ts_daemon: dict[str, Any], calc_repo: Path) -> None:
    home = ts_daemon["home"]
    cfg_path = home / "config.json"
    original = cfg_path.read_text()
    with receiver() as rx:
        cfg_path.write_text(json.dumps({**json.loads(original), "notifications": {"webhook": {
            "enabled": True, "url": rx.url, "secret": SECRET, "events": ["done", "failed", "needs_human"]}}}))
        try:
            async with mcp_client(home) as client:
                sub = meta_of(await client.call_tool("run_task", {"projectPath": str(calc_repo), "agentId": "scripted",
                                                                  "task": "Fix add() so that test_add_negative passes"}))
                tid = sub["taskId"]
                done = meta_of(await client.call_tool("wait_task", {"taskId": tid, "timeoutMs": 180000}))
                assert done["status"] == "succeeded", done

                def mine() -> list[dict[str, Any]]:
                    return [r for r in rx.requests if json.loads(r["body"]).get("taskId") == tid]

                (req,) = await anyio_wait(mine)
                meta = meta_of(await client.call_tool("query_task", {"taskId": tid}))
        finally:
            cfg_path.write_text(original)
    assert signature_ok(req) and req["headers"]["x-tianshu-event"] == "done"
    body = json.loads(req["body"])
    assert body["event"] == "done" and body["status"] == meta["status"] == "succeeded"
    for key in ("taskId", "agentId", "projectPath", "round", "roundsUsed", "reportRound", "message", "finishedAt"):
        assert body[key] == meta[key], key
    assert body["reportMd"] == meta["reportFiles"]["md"] and body["reportJson"] == meta["reportFiles"]["json"]
    assert not any(tid in p.name for p in pending(home))


async def anyio_wait(cond: Callable[[], Any], timeout_s: float = 120) -> Any:
    import anyio

    with anyio.fail_after(timeout_s):
        while not (value := cond()):
            await anyio.sleep(0.1)
    return value


@pytest.mark.prefect
@pytest.mark.anyio
@pytest.mark.parametrize(("webhook", "field"), [
    ({"enabled": True, "url": "ftp://example"}, "notifications.webhook.url must be an http(s) URL, got 'ftp://example'"),
    ({"enabled": True, "url": "https://example.invalid/x", "sign": True}, "notifications.webhook.sign is true but no secret"),
])
async def test_run_task_refuses_an_invalid_config_before_writing(ts_daemon: dict[str, Any], calc_repo: Path,
                                                                  webhook: dict[str, Any], field: str) -> None:
    home = ts_daemon["home"]
    cfg_path = home / "config.json"
    original = cfg_path.read_text()
    before = set((home / "tasks").glob("*")) if (home / "tasks").exists() else set()
    try:
        cfg_path.write_text(json.dumps({**json.loads(original), "notifications": {"webhook": webhook}}))
        async with mcp_client(home) as client:
            r = await client.call_tool("run_task", {"projectPath": str(calc_repo), "task": "x", "agentId": "scripted"})
        assert r.is_error and text_of(r).startswith("Error: [CONFIG_INVALID]"), text_of(r)
        assert str(cfg_path) in text_of(r) and field in text_of(r)
    finally:
        cfg_path.write_text(original)
    after = set((home / "tasks").glob("*")) if (home / "tasks").exists() else set()
    assert after == before
