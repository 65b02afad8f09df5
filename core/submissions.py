"""Durable submissions: a task is accepted before its flow run exists (docs/hosting.md §2, "instant
acceptance").

``run_task`` and ``verify_task`` write the record's ``task.json`` and then a submission entry
``<home>/submissions/<id>.json``::

    {"id", "deployment": "run-task/run-task" | "verify/verify", "flowRunName", "parameters",
     "tags", "projectKey", "createdAt", "queueLimit", "workPool"?, "acceptedSeq", "acceptedAt"}

and answer at once. Whoever has the home's Prefect API ready — the per-home service right after
start and every half second, and the client that wrote the entry — turns the entry into a flow
run (:mod:`tianshu_mcp.hosting.intake`), records ``flowRunId`` in ``task.json`` and removes
the entry. Creation uses the Prefect idempotency key ``<deployment>:<id>``, so two submitters
racing for one entry get the same flow run. An entry is written atomically and only after
``task.json``; a process death at any point loses nothing: the next start submits what is left.

**Acceptance order** (design note 53). :func:`enqueue` takes the home's next acceptance number
and time under one home-wide file lock and writes the entry before it lets go, so on one data
home, whatever process accepts:

* ``acceptedSeq`` (int) is strictly increasing: 1, 2, 3, … in the order entries were accepted;
* ``acceptedAt`` (ISO-8601 UTC, microseconds) is strictly increasing with it (at least 1 µs
  apart; the flow run's scheduled start time, which the work pool orders its queues by);
* when an entry exists, every entry accepted before it already exists (or was removed).

:func:`pending_entries` orders by that number (entries an earlier version wrote, without one, go
first, by ``createdAt`` then id). ``<home>/submissions/.acceptance`` holds the last number and time.

This module is plain file work (no Prefect import), so accepting a task never waits for Prefect.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from filelock import FileLock

from .files import atomic_write_json, read_json_safe
from .ids import is_record_id
from .taskstore import TaskStore

log = logging.getLogger("tianshu_mcp")

SEQUENCE_FILE = ".acceptance"
"""``<home>/submissions/.acceptance``: ``{"seq": last number, "at": last acceptedAt}``."""
SEQUENCE_LOCK_TIMEOUT_S = 30.0
"""How long :func:`enqueue` waits for the home's acceptance lock (held for two small file writes)."""
CLOCK_BACK_LIMIT = timedelta(seconds=2)
"""When the last ``acceptedAt`` is further than this ahead of the clock (the clock was set back),
the next one is the clock's time: a flow run scheduled hours ahead would not start for hours."""


@dataclass(frozen=True)
class Acceptance:
    """One acceptance: ``seq`` (1, 2, … per home) and ``at`` (UTC, strictly increasing with ``seq``
    except after the clock was set back by more than :data:`CLOCK_BACK_LIMIT`)."""

    seq: int
    at: datetime

    @property
    def at_iso(self) -> str:
        """``at`` as ``2026-11-30T09:15:00.123456Z``."""
        return _iso_us(self.at)


@dataclass(frozen=True)
class PendingEntry:
    """What ordering needs of one pending entry (see :func:`pending_entries`).

    Attributes:
        id: the record id. seq: ``acceptedSeq`` (None: written by an earlier version).
        created_at: ``createdAt`` (ISO, ms). queue: ``(work pool or "", projectKey)`` — entries
            with the same queue are one FIFO; None when the entry is unreadable or has no string
            ``projectKey`` (damaged: it belongs to no order and is failed when handled).
    """

    id: str
    seq: int | None
    created_at: str
    queue: tuple[str, str] | None

    @property
    def order(self) -> tuple[int, int, str, str]:
        """The sort key: entries without a number first (by ``createdAt``, id), then by number."""
        if self.seq is None:
            return (0, 0, self.created_at, self.id)
        return (1, self.seq, "", self.id)


def submissions_dir(home: Path) -> Path:
    """``<home>/submissions``."""
    return home / "submissions"


def entry_path(home: Path, record_id: str) -> Path:
    """``<home>/submissions/<id>.json``. Raises ValueError for a malformed id."""
    if not is_record_id(record_id):
        raise ValueError(f"not a task id: {record_id!r}")
    return submissions_dir(home) / f"{record_id}.json"


def enqueue(home: Path, record_id: str, deployment: str, parameters: dict[str, Any], tags: list[str],
            project_key: str, created_at: str, queue_limit: int = 1, work_pool: str | None = None,
            name: str | None = None) -> dict[str, Any]:
    """Accept ``record_id``: take the home's next :class:`Acceptance` and write its submission
    entry (atomic) under the home's acceptance lock; then copy ``acceptedSeq``/``acceptedAt`` into
    its ``task.json`` (when that exists). Returns the entry. A caller that writes the record
    itself uses :func:`accepting` and :func:`write_entry` instead, with the acceptance in the
    record from its first write (run_task's answer: one record write fewer).

    Args:
        project_key: names the work queue (``project-<key>``): the serial key of the work tree
            (``<key>-wt`` for the worktree tasks of a repository). Entries with the same
            ``(work_pool, project_key)`` are submitted in acceptance order.
        queue_limit: that queue's concurrency limit (1: one task at a time).
        work_pool: the pool whose queue and deployment take the flow run (a remote task's
            ``workPool``); None: the home's own pool.
        name: the flow run's name (:func:`flow_run_name`); None: ``record_id``.

    Raises:
        filelock.Timeout: the acceptance lock stayed held for :data:`SEQUENCE_LOCK_TIMEOUT_S`.
        OSError: the entry could not be written.
    """
    with accepting(home) as accepted:
        entry = write_entry(home, record_id, deployment, parameters, tags, project_key, created_at, accepted,
                            queue_limit=queue_limit, work_pool=work_pool, name=name)
    try:  # the record's own copy (shown by no tool; read by people and tests)
        TaskStore(home).update(record_id, acceptedSeq=accepted.seq, acceptedAt=accepted.at_iso)
    except FileNotFoundError:
        pass  # no task.json (a caller that writes none): the entry alone decides
    return entry


@contextmanager
def accepting(home: Path) -> Iterator[Acceptance]:
    """Hold the home's acceptance lock and yield its next :class:`Acceptance`, already recorded
    in the sequence file (a death before the entry is written leaves a gap in the numbers, never
    a number twice). Write the record's entry with :func:`write_entry` before the block ends: no
    later number may exist while this entry does not.

    Raises:
        filelock.Timeout: the lock stayed held for :data:`SEQUENCE_LOCK_TIMEOUT_S`.
        OSError: the sequence file could not be written.
    """
    with _sequence_lock(home):
        accepted = _next_acceptance(home)
        atomic_write_json(_sequence_path(home), {"seq": accepted.seq, "at": accepted.at_iso}, sync=False)
        yield accepted


FLOW_RUN_NAME_BRIEF = 60
"""Characters of the brief a flow run's name carries (:func:`flow_run_name`)."""


def _cut(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters at a word's end, or after a path's ``/`` (a
    brief quoting a long path); a word longer than half the limit is cut inside: a run name must
    still say something."""
    head = text[:limit + 1]
    at = max(head.rfind(" "), head[:limit].rfind("/") + 1 if "/" in head[:limit] else -1)
    return (head[:at] if at >= limit // 2 else text[:limit]).rstrip(" ,.;:-")


def flow_run_name(record_id: str, project: str | None = None, brief: str | None = None) -> str:
    """A flow run's name in the Prefect UI: ``<record id> · <project name> · <brief's first line>``.

    The id comes first (the UI's search finds a task by it), then what a list of runs needs to
    tell them apart: the project directory's (or repository's) last path part and the brief's
    first line, whitespace folded, cut at a word's end within :data:`FLOW_RUN_NAME_BRIEF`
    characters, with "…".
    Parts that are absent or empty are left out (``record_id`` alone when both are).
    """
    parts = [record_id]
    if project:
        name = project.rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".git")
        if name:
            parts.append(name)
    if brief:
        first = " ".join(next((ln for ln in brief.splitlines() if ln.strip()), "").split())
        if first:
            parts.append(first if len(first) <= FLOW_RUN_NAME_BRIEF else _cut(first, FLOW_RUN_NAME_BRIEF - 1) + "…")
    return " · ".join(parts)


def write_entry(home: Path, record_id: str, deployment: str, parameters: dict[str, Any], tags: list[str],
                project_key: str, created_at: str, accepted: Acceptance, queue_limit: int = 1,
                work_pool: str | None = None, name: str | None = None) -> dict[str, Any]:
    """Write ``record_id``'s submission entry (atomic) with ``accepted``, inside its
    :func:`accepting` block, after its ``task.json``; arguments as :func:`enqueue`'s. Returns the
    entry. Raises OSError when it cannot be written."""
    entry: dict[str, Any] = {"id": record_id, "deployment": deployment, "flowRunName": name or record_id,
                             "parameters": parameters, "tags": tags, "projectKey": project_key,
                             "createdAt": created_at, "queueLimit": queue_limit,
                             "acceptedSeq": accepted.seq, "acceptedAt": accepted.at_iso}
    if work_pool:
        entry["workPool"] = work_pool
    atomic_write_json(entry_path(home, record_id), entry, sync=False)
    return entry


def read(home: Path, record_id: str) -> dict[str, Any] | None:
    """The entry, or None when absent or unreadable."""
    data = read_json_safe(entry_path(home, record_id))
    return data if isinstance(data, dict) else None


def has_pending(home: Path) -> bool:
    """True when any submission entry waits (a directory listing, no entry is read)."""
    try:
        return any(p.name.endswith(".json") and is_record_id(p.name[:-5]) for p in submissions_dir(home).iterdir())
    except FileNotFoundError:
        return False


def pending_entries(home: Path) -> list[PendingEntry]:
    """Every pending entry, in acceptance order (:attr:`PendingEntry.order`); damaged ones
    (``queue`` None) are included, in the place their number or id gives them."""
    try:
        names = [p.name[:-5] for p in submissions_dir(home).iterdir() if p.name.endswith(".json")]
    except FileNotFoundError:
        return []
    found = []
    for record_id in names:
        if not is_record_id(record_id):
            continue
        data = read(home, record_id)
        if data is None and not entry_path(home, record_id).exists():
            continue  # submitted or withdrawn since the listing
        found.append(summarize(record_id, data))
    return sorted(found, key=lambda e: e.order)


def summarize(record_id: str, data: dict[str, Any] | None) -> PendingEntry:
    """The :class:`PendingEntry` of entry ``data`` (None: unreadable)."""
    data = data or {}
    seq = data.get("acceptedSeq")
    seq = seq if isinstance(seq, int) and not isinstance(seq, bool) and seq > 0 else None
    created = data.get("createdAt")
    key, pool = data.get("projectKey"), data.get("workPool") or ""
    queue = (pool, key) if isinstance(key, str) and key and isinstance(pool, str) else None
    return PendingEntry(record_id, seq, created if isinstance(created, str) else "", queue)


def pending(home: Path) -> list[str]:
    """Ids with a submission entry, in acceptance order (see :func:`pending_entries`)."""
    return [e.id for e in pending_entries(home)]


def is_pending(home: Path, record_id: str) -> bool:
    """True while ``record_id`` waits for its flow run."""
    try:
        return entry_path(home, record_id).exists()
    except ValueError:
        return False


def remove(home: Path, record_id: str) -> None:
    """Drop the entry (its flow run exists, or it was refused for good) and its lock file (a
    submitter that opens a new one finds no entry and does nothing)."""
    entry_path(home, record_id).unlink(missing_ok=True)
    _lock_path(home, record_id).unlink(missing_ok=True)


def entry_lock(home: Path, record_id: str, timeout_s: float = 0) -> FileLock:
    """The lock that one submitter (or a cancel) holds while it handles ``record_id``'s entry."""
    submissions_dir(home).mkdir(parents=True, exist_ok=True)
    return FileLock(str(_lock_path(home, record_id)), timeout=timeout_s)


def last_acceptance(home: Path) -> Acceptance | None:
    """The home's last :class:`Acceptance` as recorded (None: none yet, or the file is damaged)."""
    data = read_json_safe(_sequence_path(home))
    if not isinstance(data, dict):
        return None
    seq, at = data.get("seq"), _parse_iso(data.get("at"))
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0 or at is None:
        return None
    return Acceptance(seq, at)


def accepted_at(entry: dict[str, Any]) -> datetime | None:
    """An entry's ``acceptedAt`` as an aware UTC datetime (None: absent or malformed)."""
    return _parse_iso(entry.get("acceptedAt"))


def _next_acceptance(home: Path) -> Acceptance:
    """The next number and time (call under :func:`_sequence_lock`). A missing or damaged
    sequence file is rebuilt from the pending entries, so no new number is below a waiting one."""
    last = last_acceptance(home)
    if last is None:
        waiting = [e.seq for e in pending_entries(home) if e.seq is not None]
        if _sequence_path(home).exists():
            log.warning("%s is damaged; numbering goes on after the pending entries", _sequence_path(home))
        last = Acceptance(max(waiting, default=0), datetime.fromtimestamp(0, UTC))
    now = datetime.now(UTC)
    at = max(now, last.at + timedelta(microseconds=1))
    if last.at - now > CLOCK_BACK_LIMIT:
        log.warning("the clock is %.1f s behind the last acceptance; scheduling from the clock",
                    (last.at - now).total_seconds())
        at = now
    return Acceptance(last.seq + 1, at)


def _sequence_path(home: Path) -> Path:
    return submissions_dir(home) / SEQUENCE_FILE


def _sequence_lock(home: Path) -> FileLock:
    submissions_dir(home).mkdir(parents=True, exist_ok=True)
    return FileLock(str(submissions_dir(home) / f"{SEQUENCE_FILE}.lock"), timeout=SEQUENCE_LOCK_TIMEOUT_S)


def _lock_path(home: Path, record_id: str) -> Path:
    return submissions_dir(home) / f".{record_id}.lock"


def _iso_us(value: datetime) -> str:
    return value.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _parse_iso(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None
