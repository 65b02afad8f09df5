"""idempotencyKey records (10-tools §3.2, 40-agents-tasks §2.11).

``<home>/idempotency.json`` = ``{"version": 1, "entries": [{scope, key, digest, taskId, kind,
createdAt}]}``. A key maps to the first call's argument digest and task; the same key with the
same arguments is a *hit* (no new task), with different arguments a *conflict*. Entries expire
after ``ttl_ms`` (24 h) and the file keeps at most ``max_entries`` (2000, oldest evicted).
Check-and-record runs under a file lock, so two concurrent calls with one key create one task.
Raw keys are stored only here; logs get ``key_digest`` (sha256[:8]).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from filelock import FileLock

from .errors import ErrorCode, TianshuError
from .files import atomic_write_json, read_json_safe

TTL_MS = 86_400_000
MAX_ENTRIES = 2000
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def normalize_key(raw: str) -> str:
    """Trim and check a key: 1..128 chars, no control characters.

    Raises TianshuError(INVALID_ARGUMENT) naming ``idempotencyKey``.
    """
    key = raw.strip()
    if not key:
        raise TianshuError(ErrorCode.INVALID_ARGUMENT, "idempotencyKey must not be blank")
    if len(key) > 128:
        raise TianshuError(ErrorCode.INVALID_ARGUMENT, "idempotencyKey is too long (max 128 characters)")
    if _CONTROL.search(key):
        raise TianshuError(ErrorCode.INVALID_ARGUMENT, "idempotencyKey must not contain control characters")
    return key


def digest(value: Any) -> str:
    """sha256 of a stable JSON form (sorted keys, None dropped) of the caller's arguments."""
    def clean(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: clean(x) for k, x in sorted(v.items()) if x is not None}
        if isinstance(v, list):
            return [clean(x) for x in v]
        return v

    return hashlib.sha256(json.dumps(clean(value), sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()).hexdigest()


def key_digest(key: str) -> str:
    """The short fingerprint of a key for logs and events (sha256[:8])."""
    return hashlib.sha256(key.encode()).hexdigest()[:8]


@dataclass
class Lookup:
    """Outcome of :meth:`IdempotencyStore.claim`: ``kind`` miss|hit|conflict and the bound ``task_id``."""

    kind: Literal["miss", "hit", "conflict"]
    task_id: str


class IdempotencyStore:
    """The idempotency file of a data home."""

    def __init__(self, home: Path, ttl_ms: int = TTL_MS, max_entries: int = MAX_ENTRIES) -> None:
        self.path = home / "idempotency.json"
        self.lock = FileLock(str(home / ".idempotency.lock"), timeout=30)
        self.ttl_ms = ttl_ms
        self.max_entries = max_entries

    def _load(self) -> list[dict[str, Any]]:
        data = read_json_safe(self.path)
        entries = data.get("entries") if isinstance(data, dict) else None
        now = time.time() * 1000
        return [e for e in entries or [] if isinstance(e, dict) and now - float(e.get("createdAtMs", 0)) < self.ttl_ms]

    def claim(self, scope: str, key: str, args_digest: str, new_task_id: str, kind: str = "task") -> Lookup:
        """Look ``(scope, key)`` up and, on a miss, bind it to ``new_task_id`` before the task exists.

        Returns hit/conflict with the bound task id, or miss (now recorded for ``new_task_id``).
        """
        with self.lock:
            entries = self._load()
            for e in entries:
                if e.get("scope") == scope and e.get("key") == key:
                    return Lookup("hit" if e.get("digest") == args_digest else "conflict", str(e.get("taskId")))
            entries.append({"scope": scope, "key": key, "digest": args_digest, "taskId": new_task_id, "kind": kind,
                            "createdAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                            "createdAtMs": int(time.time() * 1000)})
            entries = entries[-self.max_entries:]
            atomic_write_json(self.path, {"version": 1, "entries": entries})
            return Lookup("miss", new_task_id)

    def release(self, scope: str, key: str, task_id: str) -> None:
        """Drop the binding of ``(scope, key)`` to ``task_id`` (the task could not be created)."""
        with self.lock:
            entries = [e for e in self._load() if not (e.get("scope") == scope and e.get("key") == key and e.get("taskId") == task_id)]
            atomic_write_json(self.path, {"version": 1, "entries": entries})
