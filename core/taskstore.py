"""The task directory: ``task.json`` details and the ``task.jsonl`` event stream (docs/agents-tasks.md
§2.3–§2.4).

``<home>/tasks/<taskId>/`` holds everything about one task. ``task.json`` is rewritten atomically
under a file lock (the MCP server and the flow-run process both write it); ``task.jsonl`` is
append-only. Status is *not* owned here: it is the flow-run state's (docs/architecture.md §4); ``task.json``
carries the details (rounds used, phase, changed files, errorType, last message, report paths…).
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from filelock import FileLock

from . import webhooks
from .files import append_jsonl, atomic_write_json, file_signature, read_json_safe, read_jsonl_tail
from .ids import is_record_id
from .model import AGENT_EVENT_NAMES
from .record import RECORD_FILE, RECORD_VERSION, TaskRecord, check_fields, read_record
from .settings import data_home
from .unfinished import UnfinishedIndex

_PARSED: dict[str, tuple[tuple[int, int, int], dict[str, Any]]] = {}  # task.json path -> (signature, record)
_PARSED_MAX = 16384  # records kept (≈2 KiB each); the whole cache is dropped beyond it


def utc_now() -> str:
    """ISO-8601 UTC timestamp with milliseconds, e.g. ``2026-11-30T09:15:00.123Z``."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def age_s(iso: str | None) -> float | None:
    """Seconds since an ISO-8601 timestamp such as :func:`utc_now` writes; None when unreadable."""
    try:
        at = datetime.fromisoformat((iso or "").replace("Z", "+00:00"))
    except ValueError:
        return None
    return (datetime.now(timezone.utc) - at).total_seconds()


def _acceptance_order(task: dict[str, Any]) -> tuple[int, str, str]:
    seq = task.get("acceptedSeq")
    return (seq if isinstance(seq, int) and not isinstance(seq, bool) else -1,
            str(task.get("createdAt") or ""), str(task.get("taskId") or ""))


class TaskStore:
    """Reads and writes task directories under ``<home>/tasks``.

    Args:
        home: the data home (default :func:`core.settings.data_home`).
    """

    def __init__(self, home: Path | None = None) -> None:
        self.home = home or data_home()
        self.root = self.home / "tasks"
        self.index = UnfinishedIndex(self.root)

    def dir(self, task_id: str) -> Path:
        """The task's directory. Raises ValueError when ``task_id`` is not a task/verify id."""
        if not is_record_id(task_id):
            raise ValueError(f"not a task id: {task_id!r}")
        return self.root / task_id

    def _lock(self, task_id: str) -> FileLock:
        return FileLock(str(self.dir(task_id) / ".task.lock"), timeout=30)

    def create(self, task_id: str, fields: dict[str, Any], foreign: bool = False) -> dict[str, Any]:
        """Create the task dir and its ``task.json`` (``createdAt``/``updatedAt`` set), append ``created``.

        Raises:
            ValueError: a field :class:`core.record.TaskRecord` does not declare or a value of
                the wrong type; with ``foreign`` (a record seeded from another host's) such
                fields are kept as they are.
        """
        d = self.dir(task_id)
        d.mkdir(parents=True, exist_ok=True)
        now = utc_now()
        record = {"taskId": task_id, "recordVersion": RECORD_VERSION, "roundsUsed": 0, "createdAt": now,
                  "updatedAt": now, **{k: v for k, v in check_fields(fields, foreign).items() if v is not None}}
        with self._lock(task_id):
            if not record.get("finishedAt"):
                self.index.add(task_id, self._scan_unfinished)
            atomic_write_json(d / RECORD_FILE, record, sync=False)
        self.event(task_id, "created", "queued", "task created")
        return record

    def read(self, task_id: str) -> dict[str, Any] | None:
        """Return ``task.json`` or None when the task does not exist (or the id is malformed)."""
        try:
            value = read_json_safe(self.dir(task_id) / RECORD_FILE)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

    def signature(self, task_id: str) -> tuple[int, int, int] | None:
        """``(inode, mtime ns, size)`` of the task's ``task.json``: a record is replaced whole on
        every write, so a new signature is a new record; None when it cannot be read or the id is
        malformed."""
        if not is_record_id(task_id):
            return None
        return file_signature(os.path.join(self.root, task_id, RECORD_FILE))  # strings: pathlib was half a hit's cost

    def read_cached(self, task_id: str) -> dict[str, Any] | None:
        """:meth:`read` for scans over every record (the answer of run_task looks for the
        project's unfinished task; listings): a record whose file is unchanged since this process
        last parsed it — same inode, mtime (ns) and size; ``task.json`` is only ever replaced by a
        rename — is not read again. Returns a shallow copy; None as :meth:`read` does.

        Measured on 1,000 records: 0.065 ms a record read and parsed, 0.035 ms a cache hit (a
        stat and a copy): the scan of run_task's answer still grows with the history, at half
        the rate (docs/design-notes.md, note 56). With string paths instead of ``pathlib`` a
        hit costs half as much again: a warm scan of 1,000 records 7.5 → 3.6 ms
        (``bench/bench_taskstore.py``).
        """
        signature = self.signature(task_id)
        if signature is None:
            return None
        key = os.path.join(self.root, task_id, RECORD_FILE)
        hit = _PARSED.get(key)
        if hit is not None and hit[0] == signature:
            return dict(hit[1])
        value = self.read(task_id)
        if value is not None:
            if len(_PARSED) >= _PARSED_MAX:
                _PARSED.clear()
            _PARSED[key] = (signature, value)
            return dict(value)
        return None

    def problem(self, task_id: str, record: Any) -> str | None:
        """Why ``record`` (the parsed ``task.json`` of ``task_id``) cannot be a task record, or None.

        Required: ``taskId`` equal to the folder name, ``createdAt`` and ``projectPath`` strings;
        when present, ``task``/``agentId``/``flowRunId``/``finishedAt`` strings and
        ``roundsUsed``/``autoFixRounds``/``taskTimeoutMs`` integers. A record failing this is shown
        as TASK_RECORD_CORRUPT (one record) or skipped with a note (lists), never INTERNAL.
        """
        if not isinstance(record, dict):
            return "not a JSON object"
        if record.get("taskId") != task_id:
            return f"taskId is {str(record.get('taskId'))[:40]!r}, not the folder's name {task_id}"
        for key in ("createdAt", "projectPath"):
            if not isinstance(record.get(key), str):
                return f"{key} is missing or not a string"
        for key in ("task", "agentId", "flowRunId", "finishedAt", "status", "lastMessage"):
            if key in record and record[key] is not None and not isinstance(record[key], str):
                return f"{key} is not a string"
        for key in ("roundsUsed", "autoFixRounds", "taskTimeoutMs"):
            if key in record and (not isinstance(record[key], int) or isinstance(record[key], bool)):
                return f"{key} is not an integer"
        return None

    def exists(self, task_id: str) -> bool:
        """True when ``task.json`` exists for ``task_id``."""
        try:
            return (self.dir(task_id) / RECORD_FILE).is_file()
        except ValueError:
            return False

    def exists_dir(self, task_id: str) -> bool:
        """True when the task's directory exists (even if its task.json is damaged)."""
        try:
            return self.dir(task_id).is_dir()
        except ValueError:
            return False

    def path(self, task_id: str) -> Path:
        """The task's ``task.json`` path. Raises ValueError for a malformed id."""
        return self.dir(task_id) / RECORD_FILE

    def load(self, task_id: str) -> TaskRecord | None:
        """The typed view of the record (:func:`core.record.read_record`: a value this version
        cannot read, such as a newer worker's enum member, is left out of the view, never
        sinking the record); None when absent, unreadable or not a record at all."""
        raw = self.read(task_id)
        try:
            return read_record(raw)[0] if raw is not None else None
        except ValueError:
            return None

    def update(self, task_id: str, **fields: Any) -> dict[str, Any]:
        """Merge ``fields`` into ``task.json`` under the task lock; a None value deletes the key.

        Returns the new record.

        Raises:
            FileNotFoundError: the task does not exist.
            ValueError: a field that :class:`core.record.TaskRecord` does not declare, or a value
                of the wrong type (checked before anything is written).
        """
        return self._merge(task_id, check_fields(fields))

    def update_unless_set(self, task_id: str, key: str, **fields: Any) -> dict[str, Any]:
        """:meth:`update`, unless the record already holds ``key`` once the task lock is held: then
        nothing is written and the record is returned as it is. For a reader's repair that must
        not overwrite what the record's owner wrote after the reader's copy was taken (a flow that
        recorded its own ``finishedAt`` between a query's read of ``task.json`` and its read of
        the flow run's final state).

        Raises:
            FileNotFoundError: the task does not exist.
            ValueError: as :meth:`update`.
        """
        return self._merge(task_id, check_fields(fields), unless_set=key)

    def update_foreign(self, task_id: str, fields: dict[str, Any]) -> dict[str, Any]:
        """:meth:`update` with fields copied from another record (a remote worker's, maybe of a
        newer version): names and values this version does not know are kept as they are."""
        return self._merge(task_id, check_fields(fields, foreign=True))

    def _merge(self, task_id: str, checked: dict[str, Any], unless_set: str | None = None) -> dict[str, Any]:
        path = self.dir(task_id) / RECORD_FILE
        with self._lock(task_id):
            record = read_json_safe(path)
            if not isinstance(record, dict):
                raise FileNotFoundError(str(path))
            if unless_set is not None and record.get(unless_set) is not None:
                return record
            was_finished = bool(record.get("finishedAt"))
            for key, value in checked.items():
                if value is None:
                    record.pop(key, None)
                else:
                    record[key] = value
            record["updatedAt"] = utc_now()
            finished = bool(record.get("finishedAt"))
            if was_finished and not finished:  # reopened (a rework): in the index before it says so
                self.index.add(task_id, self._scan_unfinished)
            atomic_write_json(path, record, sync=False)
            if finished and not was_finished:
                self.index.remove(task_id, self._scan_unfinished)
            return record

    def event(
        self,
        task_id: str,
        event: str,
        state: str,
        detail: str | None = None,
        data: dict[str, Any] | None = None,
    ) -> None:
        """Append ``{"ts","event","state","detail"?,"data"?}`` to ``task.jsonl``.

        A status event of a task (``event == state``, a notifiable status such as ``succeeded``,
        id ``tsk_…``) also queues its webhook (:func:`core.webhooks.enqueue`: no network, never
        raises; docs/agents-tasks.md §2.4, §2.12). Callers persist ``task.json`` first.
        """
        rec: dict[str, Any] = {"ts": utc_now(), "event": event, "state": state}
        if detail is not None:
            rec["detail"] = detail
        if data is not None:
            rec["data"] = data
        append_jsonl(self.dir(task_id) / "task.jsonl", rec)
        if event == state and state in webhooks.STATUS_EVENTS and task_id.startswith("tsk_"):
            webhooks.enqueue(self.home, task_id, state)

    def recent_agent_events(self, task_id: str, limit: int) -> list[dict[str, Any]]:
        """The last ``limit`` host-visible events (docs/tools.md §3.4), oldest first, from a 64 KiB tail."""
        events = read_jsonl_tail(self.dir(task_id) / "task.jsonl", 65536)
        picked = [
            {k: e[k] for k in ("ts", "event", "detail", "data") if k in e}
            for e in events
            if e.get("event") in AGENT_EVENT_NAMES
        ]
        return picked[-limit:] if limit > 0 else []

    def unfinished(self, prefixes: tuple[str, ...] = ("tsk_", "vfy_"), *, every: bool = False) -> list[dict[str, Any]]:
        """The records without ``finishedAt`` whose id starts with one of ``prefixes``, the last
        accepted first (``acceptedSeq``, then ``createdAt``, then id: ids of one second are
        not in acceptance order); copies, from :meth:`read_cached`.

        Reads only the records of the unfinished index (:mod:`core.unfinished`), or every record
        in a home written only by an earlier version, or with ``every``: a check that must not
        miss a record that a stdio server of an earlier version wrote into this home meanwhile
        (the merge's). An index entry whose record says it finished (a writer stopped between
        the two) is dropped under that record's lock."""
        indexed = None if every else self.index.ids()
        ids = self.list_ids(prefixes) if indexed is None else [i for i in indexed if i.startswith(prefixes)
                                                                and is_record_id(i)]
        found = []
        for record_id in ids:
            task = self.read_cached(record_id)
            if task is not None and not task.get("finishedAt"):
                found.append(task)
            elif indexed is not None:
                self._drop_stale(record_id)
        found.sort(key=_acceptance_order, reverse=True)
        return found

    def unfinished_inplace(self, norm: str) -> dict[str, Any] | None:
        """The last accepted in-place task or verify record of project ``norm`` without
        ``finishedAt``, or None: what run_task's answer names as the task its new one waits behind (records only,
        no Prefect call: it answers before the service is up; worktree tasks run beside it).
        Reads the unfinished records only (:meth:`unfinished`); ``bench/bench_taskstore.py``
        measures it."""
        for task in self.unfinished():
            if task.get("projectPath") == norm and task.get("isolation") != "worktree":
                return task
        return None

    def _scan_unfinished(self) -> list[str]:
        """Every record id whose ``task.json`` lacks ``finishedAt`` (builds the index once)."""
        return [i for i in self.list_ids(("tsk_", "vfy_")) if not (self.read_cached(i) or {}).get("finishedAt")]

    def _drop_stale(self, task_id: str) -> None:
        """Remove ``task_id`` from the index if its record, read under its lock, is finished or
        was never written (a creation that stopped between the entry and the record)."""
        try:
            if not self.dir(task_id).is_dir():  # its creation makes the directory before the entry
                self.index.remove(task_id, self._scan_unfinished)
                return
            with self._lock(task_id):
                record = self.read(task_id)
                if record is None or record.get("finishedAt"):
                    self.index.remove(task_id, self._scan_unfinished)
        except OSError:
            pass  # a home that cannot be written: the entry stays, readers skip it

    def list_ids(self, prefixes: tuple[str, ...] = ("tsk_",)) -> list[str]:
        """Ids of the task dirs present (unordered), filtered by id prefix."""
        if not self.root.is_dir():
            return []
        return [name for name in os.listdir(self.root) if name.startswith(prefixes) and is_record_id(name)]
