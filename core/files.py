"""Crash-safe files of the data home: atomic JSON/text writes, jsonl append, tail reads.

Rules from docs/agents-tasks.md §2.13: a write goes to ``<target>.<pid>.<12 hex>.tmp`` and is renamed
into place (retried on transient EPERM/EBUSY/EACCES), so a reader never sees half a file and no
``.tmp`` survives a failure.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import stat
import time
from pathlib import Path
from typing import Any

_RETRY_ERRNOS = {errno.EPERM, errno.EBUSY, errno.EACCES}


def _synced_temp(target: Path, data: bytes, hidden: bool, mode: int | None = None, sync: bool = True) -> Path:
    """A new temp file beside ``target`` holding ``data``, flushed to disk unless ``sync`` is
    false (parents created); ``mode`` (e.g. ``0o600``) is set on the temp file before any byte is
    written, so the file never exists with wider permissions."""
    tmp = target.with_name(f"{'.' if hidden else ''}{target.name}.{os.getpid()}.{secrets.token_hex(6)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(tmp, flags, 0o666 if mode is None else mode)
    except FileNotFoundError:  # the parents first (not tried on every write: a syscall each)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, flags, 0o666 if mode is None else mode)
    try:
        fh = os.fdopen(fd, "wb")
        if mode is not None:
            os.fchmod(fh.fileno(), mode)  # exactly ``mode``, whatever the umask
        with fh:
            fh.write(data)
            if sync:
                fh.flush()
                os.fsync(fh.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, mode: int | None = None, *,
                       sync: bool = True) -> None:
    """Write ``data`` to ``path`` atomically (temp file + fsync + rename); ``mode`` (e.g.
    ``0o600`` for a file holding secrets) is the new file's permission bits, default as the umask
    gives.

    ``sync=False`` leaves out the fsync (≈4 ms each, far more on a busy disk): the file is still
    replaced whole, and survives a crash of any process, but the newest write may be lost if the
    machine itself loses power, the durability Prefect's SQLite database has (WAL,
    ``synchronous=NORMAL``). The task-state records written on every task's path use it
    (docs/design-notes.md, note 65).

    Raises:
        OSError: when the directory cannot be created or the rename keeps failing (10 tries).
    """
    target = Path(path)
    tmp = _synced_temp(target, data, hidden=False, mode=mode, sync=sync)
    try:
        for attempt in range(10):
            try:
                os.replace(tmp, target)
                return
            except OSError as exc:
                if exc.errno not in _RETRY_ERRNOS or attempt == 9:
                    raise
                time.sleep(0.01 * (attempt + 1))
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_new_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Create ``path`` with ``data``, never replacing an existing file (evidence is never
    overwritten), atomically where the file system has hard links: a temp file is linked into
    place, so readers never see half a file. Parent directories are created.

    Raises:
        FileExistsError: ``path`` exists. OSError: the file cannot be written.
    """
    target = Path(path)
    tmp = _synced_temp(target, data, hidden=True)
    try:
        try:
            os.link(tmp, target)
        except FileExistsError:
            raise
        except OSError:  # no hard links here: a plain exclusive create
            with open(target, "xb") as fh:
                fh.write(data)
    finally:
        tmp.unlink(missing_ok=True)


def atomic_write_text(path: str | os.PathLike[str], text: str, mode: int | None = None, *, sync: bool = True) -> None:
    """Write UTF-8 ``text`` atomically; see :func:`atomic_write_bytes` (``mode`` and ``sync`` too)."""
    atomic_write_bytes(path, text.encode("utf-8"), mode=mode, sync=sync)


def atomic_write_json(path: str | os.PathLike[str], value: Any, mode: int | None = None, *, sync: bool = True) -> None:
    """Write ``value`` as 2-space indented UTF-8 JSON atomically (non-ASCII kept verbatim);
    ``mode``: the file's permission bits (e.g. ``0o600``), default as the umask gives; ``sync``:
    see :func:`atomic_write_bytes`."""
    atomic_write_text(path, json.dumps(value, indent=2, ensure_ascii=False) + "\n", mode=mode, sync=sync)


def file_signature(path: str | os.PathLike[str]) -> tuple[int, int, int] | None:
    """``(inode, mtime ns, size)`` of ``path``, None when it cannot be stat'ed. A file that is
    only ever replaced by a rename (:func:`atomic_write_bytes`) has a new signature after every
    write, so an unchanged signature means an unchanged content (the parse caches of task
    records and ``projects.json``)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


MAX_JSON_BYTES = 64 * 1024 * 1024
"""Larger JSON files are refused (a record pointed at /dev/zero must not exhaust memory)."""


def read_json(path: str | os.PathLike[str]) -> Any:
    """Read a JSON file: a regular file of at most :data:`MAX_JSON_BYTES` (checked with ``stat``
    first, so a FIFO or a device never blocks or floods the reader).

    Raises:
        FileNotFoundError: when absent. OSError: unreadable, or not a regular file.
        ValueError: too large, or invalid JSON (json.JSONDecodeError).
        OSError also for a ``path`` that is not a str or path (an int would be a file descriptor:
        a damaged record's field must never read or close one of ours).
    """
    if not isinstance(path, (str, os.PathLike)):
        raise OSError(f"not a file path: {type(path).__name__}")
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise OSError(f"{os.fspath(path)} is not a regular file")
    if st.st_size > MAX_JSON_BYTES:
        raise ValueError(f"{os.fspath(path)} is larger than {MAX_JSON_BYTES} bytes")
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def read_json_safe(path: str | os.PathLike[str]) -> Any | None:
    """Read a JSON file, returning ``None`` when it is absent, unreadable or invalid."""
    try:
        return read_json(path)
    except (OSError, ValueError):
        return None


def append_jsonl(path: str | os.PathLike[str], record: dict[str, Any]) -> None:
    """Append one JSON object as a line (``O_APPEND``, one ``write`` call, so lines never interleave)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
    fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def read_jsonl_tail(path: str | os.PathLike[str], max_bytes: int = 65536) -> list[dict[str, Any]]:
    """Parse the JSON lines in the last ``max_bytes`` bytes of ``path``; bad lines are skipped."""
    text = read_text_tail(path, max_bytes)
    out: list[dict[str, Any]] = []
    for line in (text or "").splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


def read_text_tail(path: str | os.PathLike[str], max_bytes: int) -> str | None:
    """Return the text of the last ``max_bytes`` bytes of ``path``, starting at a line boundary.

    Follows docs/agents-tasks.md §2.4: missing → None; size ≤ n → all; otherwise read bytes
    ``[size-n-1, size)`` and drop the partial first line. Invalid UTF-8 is replaced, never raised.
    A ``path`` that is not a string or path (an int would open that file descriptor) gives None.
    """
    if not isinstance(path, (str, os.PathLike)):
        return None
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as fh:
            if size <= max_bytes:
                return fh.read().decode("utf-8", errors="replace")
            fh.seek(size - max_bytes - 1)
            data = fh.read()
    except OSError:
        return None
    if data[:1] == b"\n":
        data = data[1:]
    else:
        cut = data.find(b"\n")
        data = data[cut + 1 :] if cut >= 0 else b""
    return data.decode("utf-8", errors="replace")


def tail_lines(path: str | os.PathLike[str], lines: int, max_bytes: int = 256 * 1024) -> str | None:
    """Return the last ``lines`` lines of a text file (reading at most ``max_bytes`` from its end)."""
    text = read_text_tail(path, max_bytes)
    if text is None:
        return None
    parts = text.splitlines()
    return "\n".join(parts[-lines:]) if lines > 0 else ""
