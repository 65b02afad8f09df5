"""The check log of a verify round: per-check part files and their merge (docs/acceptance.md §3.2).

A check's output goes to ``verify-<round>.parts/<NNN>-<safe>.log`` (:func:`parts_dir_for`,
:func:`part_file_name`); :func:`_read_tail` reads its end back without holding the file, and
:func:`_merge_part` appends it to ``verify-<round>.log`` (a huge output compacted to its head and
tail first) and removes it. Used by :mod:`.runner`, which re-exports the public names.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from pathlib import Path

log = logging.getLogger("tianshu_mcp")

_READ_TAIL_BYTES = 16384
"""Bytes read back from the end of a part file (the original keeps a 16384-char tail)."""
KEEP_HEAD_BYTES = 1 << 20  # what verify-N.log keeps of a huge check output: its head …
KEEP_TAIL_BYTES = 8 << 20  # … and its tail (the tail is what reports and parsers read)


def parts_dir_for(log_path: str | os.PathLike[str]) -> Path:
    """``verify-<round>.log`` → ``verify-<round>.parts`` (same directory)."""
    p = Path(log_path)
    return p.with_name(p.stem + ".parts")


def part_file_name(index: int, name: str) -> str:
    """``<NNN>-<safe>.log``: 3-digit index; runs outside ``[A-Za-z0-9._-]`` → ``_``, ≤40 chars,
    ``check`` if empty (docs/acceptance.md §3.2)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name)[:40] or "check"
    return f"{index:03d}-{safe}.log"


def _read_tail(path: Path, start: int, max_bytes: int = _READ_TAIL_BYTES) -> str:
    """Decode the last ``max_bytes`` of ``path`` after byte ``start``, minus ``run_process``'s trailer."""
    try:
        size = os.path.getsize(path)
        begin = max(start, size - max_bytes)
        with open(path, "rb") as fh:
            fh.seek(begin)
            data = fh.read(size - begin)
    except OSError:
        return ""
    if begin > start:
        i = 0
        while i < len(data) and i < 4 and (data[i] & 0xC0) == 0x80:  # drop a split UTF-8 sequence
            i += 1
        data = data[i:]
    text = data.decode("utf-8", errors="replace")
    cut = text.rfind("\n[exit] code=")
    if cut >= 0 and "\n" not in text[cut + 1 :].rstrip("\n"):
        text = text[:cut]
    return text


def _append_file(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    with open(src, "rb") as fin, open(dst, "ab") as fout:
        shutil.copyfileobj(fin, fout, 1 << 20)


def _compact(part: Path) -> None:
    """Keep a huge check log readable and bounded: its first ``KEEP_HEAD_BYTES`` and last
    ``KEEP_TAIL_BYTES``, with a line saying how much was left out (atomic rewrite)."""
    size = part.stat().st_size
    if size <= KEEP_HEAD_BYTES + KEEP_TAIL_BYTES:
        return
    tmp = part.with_name(part.name + ".compact")
    with open(part, "rb") as src, open(tmp, "wb") as dst:
        dst.write(src.read(KEEP_HEAD_BYTES))
        dst.write(f"\n[… {size - KEEP_HEAD_BYTES - KEEP_TAIL_BYTES} bytes of output left out …]\n".encode())
        src.seek(size - KEEP_TAIL_BYTES)
        shutil.copyfileobj(src, dst)
    os.replace(tmp, part)


def _merge_part(part: Path, log_path: Path) -> None:
    try:
        if part.exists() and part.stat().st_size > 0:
            _compact(part)
            _append_file(part, log_path)
        part.unlink(missing_ok=True)
    except OSError as exc:
        log.warning("could not merge %s into %s (part kept): %s", part, log_path, exc)


def _remove_dir_if_empty(path: Path) -> None:
    try:
        path.rmdir()
    except OSError:
        pass
