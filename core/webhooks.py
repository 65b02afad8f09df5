"""Webhook notifier: a task reaching a notifiable status POSTs a JSON body (docs/agents-tasks.md §2.12).

Two halves that never block each other:

* :func:`enqueue` — called by :meth:`TaskStore.event <tianshu_mcp.core.taskstore.TaskStore.event>`
  after ``task.json`` is persisted, in whatever process finished the task. It does no network:
  dedupe, config check, then one atomic file ``<home>/webhooks/pending/<name>.json``::

      {"version": 1, "taskId", "status", "event", "key", "body": "<exact JSON string>",
       "attempts": 0, "createdAt"}

  The secret is never in it: the signature is computed at delivery time.
* :func:`deliver_pending` — POSTs every pending file (the per-home service runs it in a
  :class:`WebhookDrainer` thread; design note 30). A per-file lock
  (``.<name>.lock``, non-blocking) keeps two deliverers of any process apart. 2xx → the file is
  removed; attempts exhausted (or the webhook was disabled meanwhile) → moved to
  ``<home>/webhooks/failed/`` with ``error`` and ``failedAt`` and one warning in the log.

Dedupe: ``taskId:status:finishedAt`` (``""`` when absent; a ``needs_user`` without finishedAt
uses its question key ``needs-user-<n>`` so a second question notifies again) in a bounded
ledger ``<home>/webhooks/sent.json``, checked before the config is read; and an ending that
repeats the task's previous ending with no activity in between (two writers finishing one
run, e.g. a shutdown sweep and the flow itself) is not notified twice.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from filelock import FileLock, Timeout

from .files import atomic_write_json, read_json_safe, read_jsonl_tail
from .ids import TASK_ID_RE
from .model import ACTIVE, latest_round
from .record import record_path
from .settings import WebhookConfig, load_config

log = logging.getLogger("tianshu_mcp")

STATUS_EVENTS: dict[str, str] = {
    "succeeded": "done",
    "failed": "failed",
    "needs_attention": "needs_human",
    "needs_user": "needs_user",
    "cancelled": "cancelled",
    "interrupted": "cancelled",
}
"""Task status → webhook event (docs/agents-tasks.md §2.12); active statuses notify nothing."""

LEDGER_MAX = 1000
"""Dedupe keys kept in ``sent.json`` (oldest dropped first)."""
FAILED_KEEP = 500
"""Failed deliveries kept in ``failed/`` (oldest removed first)."""
BODY_FIELDS = (("finishedAt", "finishedAt"), ("agentId", "agentId"), ("projectPath", "projectPath"),
               ("roundsUsed", "roundsUsed"), ("reportRound", "reportRound"), ("message", "lastMessage"),
               ("reportMd", "reportMd"), ("reportJson", "reportJson"))
"""Body field ← task.json key, after ``taskId``, ``event``, ``status``, ``ts``."""


def _utc_now() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def webhooks_dir(home: Path) -> Path:
    """``<home>/webhooks``: ``pending/``, ``failed/`` and the dedupe ledger ``sent.json``."""
    return home / "webhooks"


def pending_dir(home: Path) -> Path:
    """``<home>/webhooks/pending``: deliveries not yet made."""
    return webhooks_dir(home) / "pending"


def failed_dir(home: Path) -> Path:
    """``<home>/webhooks/failed``: deliveries given up on, kept for the user."""
    return webhooks_dir(home) / "failed"


def event_for(status: str) -> str | None:
    """The webhook event of a task status (``succeeded`` → ``done`` …), None when not notifiable."""
    return STATUS_EVENTS.get(status)


def dedupe_key(task_id: str, status: str, record: dict[str, Any]) -> str:
    """``taskId:status:finishedAt`` (``""`` when absent; needs_user: its ``needsUserKey``)."""
    stamp = record.get("finishedAt") or (record.get("needsUserKey") if status == "needs_user" else None) or ""
    return f"{task_id}:{status}:{stamp}"


def build_body(task_id: str, status: str, record: dict[str, Any], ts: str | None = None) -> str:
    """The exact body string: compact JSON ``{taskId, event, status, ts, finishedAt, agentId,
    projectPath, round (:func:`~.model.latest_round`), roundsUsed, reportRound, message (=
    lastMessage), reportMd, reportJson}``,
    absent fields omitted, non-ASCII kept (UTF-8 on the wire). A dry run (``dryRun`` in the
    record) adds ``"dryRun": true`` and names its dry-run report as ``reportMd``/``reportJson``."""
    import json

    body: dict[str, Any] = {"taskId": task_id, "event": event_for(status), "status": status, "ts": ts or _utc_now()}
    for name, key in BODY_FIELDS:
        if record.get(key) is not None:
            body[name] = record[key]
        if name == "projectPath" and (latest := latest_round(record)) is not None:
            body["round"] = latest  # the round numbering of the meta and the reports
    if record.get("dryRun"):  # a preview, not finished work: a receiver must be able to tell
        body["dryRun"] = True
        for name, key in (("reportMd", "dryRunReportMd"), ("reportJson", "dryRunReportJson")):
            if record.get(key):
                body[name] = record[key]
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def sign(secret: str, body: bytes) -> str:
    """``sha256=<hex HMAC-SHA256(secret, body)>``: the ``x-tianshu-signature`` header value."""
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def redact_url(url: str) -> str:
    """``scheme://host[:port]/…`` for logs (paths and queries often carry tokens)."""
    parts = urlsplit(url)
    host = parts.hostname or "?"
    return f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "") + ("/…" if parts.path.strip("/") or parts.query else "")


# --- enqueue -------------------------------------------------------------------------------------
def _ledger_path(home: Path) -> Path:
    return webhooks_dir(home) / "sent.json"


def _read_ledger(home: Path) -> list[str]:
    data = read_json_safe(_ledger_path(home))
    keys = data.get("keys") if isinstance(data, dict) else None
    return [k for k in keys if isinstance(k, str)] if isinstance(keys, list) else []


def _is_ending(ev: dict[str, Any]) -> bool:
    return ev.get("event") == ev.get("state") and ev.get("state") in STATUS_EVENTS


def _repeats_last_ending(home: Path, task_id: str, status: str) -> bool:
    """True when the ``status`` event just appended to task.jsonl repeats the task's previous
    ending: before it, the nearest ending or activity (an ACTIVE state) is the same ending."""
    events = read_jsonl_tail(home / "tasks" / task_id / "task.jsonl", 65536)
    own = next((i for i in range(len(events) - 1, -1, -1) if _is_ending(events[i]) and events[i]["state"] == status), None)
    for ev in reversed(events[:own] if own is not None else []):
        if ev.get("state") in ACTIVE:
            return False
        if _is_ending(ev):
            return ev["state"] == status
    return False


def _deliverable(hook: WebhookConfig | None, event: str) -> bool:
    return hook is not None and hook.enabled and hook.url is not None and event in hook.events


def enqueue(home: Path, task_id: str, status: str) -> Path | None:
    """Queue the notification of ``task_id`` reaching ``status``; return the pending file, or None
    when nothing is to be sent (not a ``tsk_`` id, not notifiable, a duplicate, webhook disabled,
    event not subscribed). Call it after ``task.json`` is persisted.

    No network, returns at once (a few small file reads/writes); never raises (a failure is
    logged as a warning and nothing is queued). Expects the ``status`` event already appended to
    ``task.jsonl`` (it tells a repeated ending apart). docs/agents-tasks.md §2.12 ``notify()``.
    """
    try:
        return _enqueue(home, task_id, status)
    except Exception as exc:  # noqa: BLE001 - a notification must never break the status path
        log.warning("webhook: could not queue the %s notification of %s: %s", status, task_id, exc)
        return None


def _enqueue(home: Path, task_id: str, status: str) -> Path | None:
    event = event_for(status)
    if event is None or not TASK_ID_RE.match(task_id):
        return None
    record = read_json_safe(record_path(home, task_id))
    record = record if isinstance(record, dict) else {}
    key = dedupe_key(task_id, status, record)
    if key in _read_ledger(home):  # before the config (spec): a repeat costs one small read
        return None
    if not _deliverable(load_config(home).notifications.webhook, event):
        return None
    if _repeats_last_ending(home, task_id, status):
        log.info("webhook: %s of %s repeats its previous ending; not notified twice", status, task_id)
        return None
    webhooks_dir(home).mkdir(parents=True, exist_ok=True)
    with FileLock(str(webhooks_dir(home) / ".sent.lock"), timeout=10):
        keys = _read_ledger(home)
        if key in keys:
            return None
        now = _utc_now()
        name = f"{time.time_ns() // 1000:017d}-{task_id}-{status}.json"
        path = pending_dir(home) / name
        atomic_write_json(path, {"version": 1, "taskId": task_id, "status": status, "event": event, "key": key,
                                 "body": build_body(task_id, status, record, now), "attempts": 0, "createdAt": now})
        atomic_write_json(_ledger_path(home), {"version": 1, "keys": (keys + [key])[-LEDGER_MAX:]})
    return path


# --- delivery ------------------------------------------------------------------------------------
class NotDelivered(Exception):
    """A delivery attempt got a non-2xx answer (a 3xx included: redirects are never followed)."""


def pending_files(home: Path) -> list[Path]:
    """Pending deliveries, oldest first (names start with the enqueue time in µs)."""
    try:
        names = [n for n in os.listdir(pending_dir(home)) if n.endswith(".json") and not n.startswith(".")]
    except FileNotFoundError:
        return []
    return [pending_dir(home) / n for n in sorted(names)]


def _lock_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.lock")


def _give_up(home: Path, path: Path, entry: dict[str, Any], error: str) -> None:
    """Move a delivery to ``failed/`` (with ``error``, ``failedAt``), prune to FAILED_KEEP."""
    atomic_write_json(failed_dir(home) / path.name, {**entry, "error": error, "failedAt": _utc_now()})
    path.unlink(missing_ok=True)
    try:
        kept = sorted(n for n in os.listdir(failed_dir(home)) if n.endswith(".json"))
        for old in kept[:-FAILED_KEEP]:
            (failed_dir(home) / old).unlink(missing_ok=True)
    except OSError:
        pass


def _post_with_retries(client: Any, hook: WebhookConfig, path: Path, entry: dict[str, Any]) -> None:
    """POST ``entry['body']`` until a 2xx, at most ``1 + maxRetries - attempts`` times, waiting
    ``backoffMs · n`` after attempt n. Persists ``attempts`` before each try. Raises the last
    error (NotDelivered, an httpx error, …) when every attempt failed."""
    from tenacity import Retrying, retry_if_exception_type, stop_after_attempt

    body = str(entry["body"]).encode("utf-8")
    headers = {"content-type": "application/json", "x-tianshu-event": str(entry.get("event") or "")}
    if hook.signs and hook.secret is not None:
        headers["x-tianshu-signature"] = sign(hook.secret.get_secret_value(), body)
    done = int(entry.get("attempts") or 0)
    remaining = 1 + hook.max_retries - done
    if remaining <= 0:
        raise NotDelivered(f"no attempt left ({done} made)")

    def attempt() -> None:
        entry["attempts"] = int(entry.get("attempts") or 0) + 1
        atomic_write_json(path, entry)
        response = client.post(str(hook.url), content=body, headers=headers, timeout=hook.timeout_ms / 1000)
        if not 200 <= response.status_code < 300:
            where = " (redirect, not followed)" if 300 <= response.status_code < 400 else ""
            raise NotDelivered(f"HTTP {response.status_code}{where}")

    Retrying(stop=stop_after_attempt(remaining), retry=retry_if_exception_type(Exception), reraise=True,
             wait=lambda rs: hook.backoff_ms / 1000 * (done + rs.attempt_number))(attempt)


def deliver_one(home: Path, path: Path, client: Any | None = None) -> bool | None:
    """Deliver one pending file. Returns True (delivered, file removed), False (given up, moved
    to ``failed/``) or None (held by another deliverer, or already gone). Raises OSError only
    when the pending/failed files themselves cannot be written."""
    lock = FileLock(str(_lock_path(path)), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        return None
    try:
        if not path.exists():
            return None  # another deliverer finished it before we got the lock
        entry = read_json_safe(path)
        if not isinstance(entry, dict) or not isinstance(entry.get("body"), str):
            log.warning("webhook: pending delivery %s is unreadable; moved to %s", path.name, failed_dir(home))
            _give_up(home, path, {"file": path.name}, "unreadable pending file")
            return False
        hook = load_config(home).notifications.webhook
        if hook is None or not hook.enabled or hook.url is None:
            log.warning("webhook: %s of %s not sent: the webhook is disabled now; kept in %s",
                        entry.get("event"), entry.get("taskId"), failed_dir(home))
            _give_up(home, path, entry, "the webhook was disabled before delivery")
            return False
        try:
            if client is None:
                import httpx

                with httpx.Client(follow_redirects=False) as own:
                    _post_with_retries(own, hook, path, entry)
            else:
                _post_with_retries(client, hook, path, entry)
        except Exception as exc:  # noqa: BLE001 - any failure ends in failed/, never raises
            error = f"{type(exc).__name__}: {exc}"[:500]
            log.warning("webhook: %s of %s to %s failed after %s attempt(s) (%s); kept in %s",
                        entry.get("event"), entry.get("taskId"), redact_url(str(hook.url)), entry.get("attempts"),
                        error, failed_dir(home) / path.name)
            _give_up(home, path, entry, error)
            return False
        path.unlink(missing_ok=True)
        log.info("webhook: %s of %s delivered (attempt %s)", entry.get("event"), entry.get("taskId"), entry.get("attempts"))
        return True
    finally:
        lock.release()
        _lock_path(path).unlink(missing_ok=True)  # a deliverer opening a new one finds no file


def deliver_pending(home: Path) -> int:
    """POST every pending delivery of ``home`` (oldest first); return how many got a 2xx.

    Each delivery: ``content-type: application/json``, ``x-tianshu-event: <event>``, when
    signing ``x-tianshu-signature: sha256=<hex HMAC-SHA256(secret, exact body bytes)>``;
    redirects are not followed (a 3xx fails); per-request timeout ``timeoutMs``; 1 + maxRetries
    attempts with ``backoffMs · n`` between them. Blocks for as long as the receivers take (run
    it in a thread: :class:`WebhookDrainer`). Never raises. docs/agents-tasks.md §2.12.
    """
    delivered = 0
    for path in pending_files(home):
        try:
            if deliver_one(home, path):
                delivered += 1
        except Exception as exc:  # noqa: BLE001
            log.warning("webhook: delivering %s failed: %s", path.name, exc)
    return delivered


class WebhookDrainer:
    """Runs :func:`deliver_pending` in a daemon thread, one pass at a time, so the caller (the
    service's maintain loop, every 0.5 s) never waits for a receiver.

    Args:
        home: the data home.
    """

    def __init__(self, home: Path) -> None:
        self.home = home
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def kick(self) -> bool:
        """Start a pass when deliveries are pending and none runs; True when one was started.
        Costs one directory listing; never raises."""
        try:
            if not pending_files(self.home):
                return False
            with self._lock:
                if self._thread is not None and self._thread.is_alive():
                    return False
                self._thread = threading.Thread(target=deliver_pending, args=(self.home,),
                                                 name="tianshu-webhooks", daemon=True)
                self._thread.start()
            return True
        except Exception as exc:  # noqa: BLE001
            log.warning("webhook: could not start a delivery pass: %s", exc)
            return False

    def busy(self) -> bool:
        """True while a delivery pass runs."""
        return self._thread is not None and self._thread.is_alive()
