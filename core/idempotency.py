"""idempotencyKey records (docs/tools.md §3.2, docs/agents-tasks.md §2.11).

``<home>/idempotency.json`` = ``{"version": 1, "entries": [{scope, key, digest, taskId, kind,
createdAt}]}``. A key maps to the first call's argument digest and task; the same key with the
same arguments is a *hit* (no new task), with different arguments a *conflict*. Entries expire
after ``ttl_ms`` (24 h) and the file keeps at most ``max_entries`` (2000, oldest evicted).
Check-and-record runs under a file lock (one per home, shared by every server process), so
concurrent calls with one key — on one connection, or from several servers — create one task:
the first binds the key before its task exists; the others get a *hit* on that binding, whether
or not the task's folder exists yet. Only a binding older than :data:`STALE_MS` whose task never
appeared (its caller died between the claim and the creation) is replaced.

A store that cannot be parsed fails closed (``IDEMPOTENCY_STORE_CORRUPT`` naming the file; never a
silent reset that would dispatch a second task); an entry with wrong types is ignored without
affecting other keys. Raw keys are stored only here; logs get ``key_digest`` (sha256[:8]).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Literal

from filelock import FileLock, Timeout

from .errors import ErrorCode, TianshuError
from .files import atomic_write_json
from .i18n import _

TTL_MS = 86_400_000
MAX_ENTRIES = 2000
STALE_MS = 120_000
"""A binding whose task folder still does not exist after this long was left by a dead caller, ms."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def normalize_key(raw: str) -> str:
    """Trim and check a key: 1..128 chars, no control characters.

    Raises TianshuError(INVALID_ARGUMENT) naming ``idempotencyKey``.
    """
    key = raw.strip()
    if not key:
        raise TianshuError(ErrorCode.INVALID_ARGUMENT, _("idempotencyKey must not be blank"))
    if len(key) > 128:
        raise TianshuError(ErrorCode.INVALID_ARGUMENT, _("idempotencyKey is too long (max 128 characters)"))
    if _CONTROL.search(key):
        raise TianshuError(ErrorCode.INVALID_ARGUMENT, _("idempotencyKey must not contain control characters"))
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


def _valid(entry: Any) -> bool:
    """An entry with the fields and types the store writes (others are ignored, never fatal)."""
    return (isinstance(entry, dict) and all(isinstance(entry.get(k), str) for k in ("scope", "key", "digest", "taskId"))
            and isinstance(entry.get("createdAtMs"), (int, float)) and not isinstance(entry.get("createdAtMs"), bool))


class IdempotencyStore:
    """The idempotency file of a data home."""

    def __init__(self, home: Path, ttl_ms: int = TTL_MS, max_entries: int = MAX_ENTRIES) -> None:
        self.path = home / "idempotency.json"
        self.lock = FileLock(str(home / ".idempotency.lock"), timeout=30)
        self.ttl_ms = ttl_ms
        self.max_entries = max_entries

    def _load(self) -> list[dict[str, Any]]:
        """The live entries. Raises IDEMPOTENCY_STORE_CORRUPT when the file exists but is not a
        store (unparseable, truncated, wrong shape)."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise self._corrupt(_("cannot be read ({error})").format(error=exc.strerror or exc)) from exc
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise self._corrupt(_("is not valid JSON ({error})").format(error=exc)) from exc
        if not isinstance(data, dict) or not isinstance(data.get("entries", []), list):
            raise self._corrupt(_("is not an idempotency store ({shape})").format(shape='{"version": 1, "entries": [...]}'))
        now = time.time() * 1000
        return [e for e in data.get("entries", []) if _valid(e) and now - e["createdAtMs"] < self.ttl_ms]

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """The store's file lock; a lock that cannot be taken (held for 30 s, not a file) is
        IDEMPOTENCY_STORE_CORRUPT naming it, never INTERNAL."""
        try:
            self.lock.acquire()
        except Timeout as exc:
            raise TianshuError(ErrorCode.IDEMPOTENCY_STORE_CORRUPT,
                               _("the idempotency store's lock {lock} has been held for 30 s by another process; no "
                                 "task was dispatched, try again").format(lock=self.lock.lock_file)) from exc
        except OSError as exc:
            raise self._corrupt(_("cannot be locked ({lock}: {error})").format(
                lock=self.lock.lock_file, error=exc.strerror or exc)) from exc
        try:
            yield
        finally:
            self.lock.release()

    def _corrupt(self, why: str) -> TianshuError:
        return TianshuError(ErrorCode.IDEMPOTENCY_STORE_CORRUPT,
                            _("the idempotency store {path} {why}; no task was dispatched. Move the file aside to "
                              "start a new store (replays of earlier keys are then no longer recognised)").format(
                                path=self.path, why=why))

    def claim(self, scope: str, key: str, args_digest: str, new_task_id: str, kind: str = "task",
              exists: Callable[[str], bool] | None = None) -> Lookup:
        """Look ``(scope, key)`` up and, on a miss, bind it to ``new_task_id`` before the task exists.

        Args:
            exists: tells whether a bound task exists; a binding older than :data:`STALE_MS` whose
                task does not exist is replaced (a caller that died before creating it). A younger
                one is a hit even without a task folder (its caller is still creating it).

        Returns:
            hit/conflict with the bound task id, or miss (now recorded for ``new_task_id``).

        Raises:
            TianshuError: IDEMPOTENCY_STORE_CORRUPT (see :meth:`_load`).
        """
        with self._locked():
            entries = self._load()
            now_ms = time.time() * 1000
            for e in list(entries):
                if e.get("scope") == scope and e.get("key") == key:
                    task_id = str(e.get("taskId"))
                    if exists is not None and now_ms - e["createdAtMs"] > STALE_MS and not exists(task_id):
                        entries.remove(e)
                        break
                    return Lookup("hit" if e.get("digest") == args_digest else "conflict", task_id)
            entries.append({"scope": scope, "key": key, "digest": args_digest, "taskId": new_task_id, "kind": kind,
                            "createdAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                            "createdAtMs": int(time.time() * 1000)})
            entries = entries[-self.max_entries:]
            atomic_write_json(self.path, {"version": 1, "entries": entries})
            return Lookup("miss", new_task_id)

    def release(self, scope: str, key: str, task_id: str) -> None:
        """Drop the binding of ``(scope, key)`` to ``task_id`` (the task could not be created)."""
        with self._locked():
            entries = [e for e in self._load() if not (e.get("scope") == scope and e.get("key") == key and e.get("taskId") == task_id)]
            atomic_write_json(self.path, {"version": 1, "entries": entries})
