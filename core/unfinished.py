"""The index of unfinished task records: ``<home>/tasks/.unfinished/<taskId>`` (docs/design-notes.md,
note 83).

run_task's answer names the in-place task of the project that its new task will wait behind. It
used to read every record of the home, so the answer grew with the history (18.6 ms at 50 tasks,
42 ms at 1,000 in a soak). Here an empty file per record without ``finishedAt`` lets it read
only the few records that can match. (A merge, which refuses while an in-place task of the
repository is unfinished, still reads every record: a stdio server of an earlier version that
still runs writes records this index does not know.)

Rules that keep the index from ever missing an unfinished record (an extra entry is harmless:
readers check each record and :meth:`TaskStore.unfinished` drops an entry whose record is
finished, under that record's lock):

* every change is made under the record's own lock, an entry *before* a record that becomes
  unfinished is written, its removal *after* the record that finishes it is written;
* the index is built once per home, by a scan of every record, under ``.unfinished.lock``; a
  writer waits for that build before it adds or removes an entry, so no change made during the
  build is lost; the finished index appears by one rename;
* a reader of a home without the index (nothing was written since this version) scans every
  record, as before; reading builds nothing, so a refused call leaves the home as it was.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

from filelock import FileLock

INDEX_NAME = ".unfinished"
"""The index's directory under ``<home>/tasks`` (a dot name: no record id, so listings skip it)."""


class UnfinishedIndex:
    """The unfinished-records index of one ``<home>/tasks`` directory.

    Args:
        root: ``<home>/tasks``.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = os.path.join(root, INDEX_NAME)

    def ids(self) -> list[str] | None:
        """The ids the index holds (unordered; an entry may be stale), or None when this home has
        no index yet (the caller scans every record)."""
        try:
            return os.listdir(self.path)
        except (FileNotFoundError, NotADirectoryError):  # none yet, or a file in its place
            return None

    def add(self, task_id: str, scan: Callable[[], Iterable[str]]) -> None:
        """Record ``task_id`` as unfinished; call under its record lock, before the record is
        written. ``scan`` yields the ids of every unfinished record (used once, to build the
        index). Raises OSError when the data home cannot be written."""
        self._ensure(scan)
        with open(os.path.join(self.path, task_id), "ab"):
            pass

    def remove(self, task_id: str, scan: Callable[[], Iterable[str]]) -> None:
        """Drop ``task_id``; call under its record lock, after the record saying it finished is
        written. ``scan`` as in :meth:`add`."""
        self._ensure(scan)
        try:
            os.unlink(os.path.join(self.path, task_id))
        except FileNotFoundError:
            pass

    def _ensure(self, scan: Callable[[], Iterable[str]]) -> None:
        if os.path.isdir(self.path):
            return
        self.root.mkdir(parents=True, exist_ok=True)
        with FileLock(os.path.join(self.root, INDEX_NAME + ".lock"), timeout=60):
            if os.path.isdir(self.path):
                return
            if os.path.lexists(self.path):  # something else in its place (a file, a link): the index is ours
                os.unlink(self.path)
            building = os.path.join(self.root, f"{INDEX_NAME}.{os.getpid()}.{secrets.token_hex(6)}.tmp")
            os.mkdir(building)
            try:
                for task_id in scan():
                    with open(os.path.join(building, task_id), "ab"):
                        pass
                os.rename(building, self.path)
            except BaseException:
                shutil.rmtree(building, ignore_errors=True)
                raise
