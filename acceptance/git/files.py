"""What a file on disk holds, as git would see it: fingerprints, blob ids and content probes.

:func:`_fingerprint` is the baseline's content fingerprint (SHA-1 of the bytes, size and mtime above
4 MiB, a symbolic link's target, ``gitlink:<HEAD>`` for a submodule or nested repository);
:func:`_blob_sha`/:func:`_same_blob` compare a file with a git blob; :func:`_probe`,
:func:`_count_lines` and :func:`_read_text` classify and read changed files for the analysis.
Part of the git side of acceptance (see :mod:`.git`).
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from ...core.git.run import run_git

MAX_HASH_BYTES = 4 * 1024 * 1024
"""Files larger than this (4 MiB) get no baseline hash (docs/acceptance.md §4.1)."""

_BINARY_EXT = frozenset(
    "png jpg jpeg gif webp ico bmp zip gz tar 7z rar exe dll so dylib bin wasm class jar pyc pdf doc docx "
    "xls xlsx ttf woff woff2".split()
)


def file_sha1(path: Path) -> str | None:
    """SHA-1 hex of a regular file's bytes; None when unreadable, not a file or > 4 MiB."""
    try:
        st = path.stat()
        if not path.is_file() or st.st_size > MAX_HASH_BYTES:
            return None
        h = hashlib.sha1()  # noqa: S324 - content fingerprint, not security
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest()
    except OSError:
        return None


GITLINK_PREFIX = "gitlink:"
"""port: baseline fingerprint of a submodule / nested repository: ``gitlink:<HEAD sha>``."""


def _sub_head(path: Path) -> str | None:
    """The checked-out commit of a submodule / nested repository (None when absent or unborn)."""
    if not (path / ".git").exists():
        return None
    r = run_git(["rev-parse", "--verify", "--quiet", "HEAD"], path)
    sha = r.stdout.strip()
    return sha if r.ok and sha else None


def _fingerprint(root: Path, rel: str) -> str | None:
    """The content fingerprint of a path, as git would see it changed or not.

    * a symbolic link → ``link:<its target>`` (git stores the link, never what it points to; a
      dangling link or a link to a directory is a file to git);
    * a submodule / nested repository → ``gitlink:<HEAD>``;
    * a regular file → SHA-1 of its bytes (:func:`file_sha1`), or ``stat:<size>:<mtime ns>`` for
      one over 4 MiB (docs/robustness.md §10: unhashed pre-existing files were counted as the agent's change);
    * anything else (a plain directory, a missing path) → None.
    """
    path = root / rel.rstrip("/")
    try:
        if path.is_symlink():
            return "link:" + os.readlink(path)
        if path.is_dir():
            if (path / ".git").exists():
                return GITLINK_PREFIX + (_sub_head(path) or "unborn")
            return None
        st = path.stat()
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    if st.st_size > MAX_HASH_BYTES:
        return f"stat:{st.st_size}:{st.st_mtime_ns}"
    return file_sha1(path)


def _probe(path: Path) -> tuple[bool, bool]:
    """``(binary, text_for_signals)`` of a file (docs/acceptance.md §4.2 step 4)."""
    ext = path.suffix[1:].lower() if path.suffix else ""
    bin_ext = ext in _BINARY_EXT
    try:
        with open(path, "rb") as fh:
            head = fh.read(8000)
    except OSError:
        return True, False
    nul = head.count(b"\0")
    binary = bin_ext or (len(head) > 0 and nul > len(head) * 0.10)
    text = not bin_ext and b"\0" not in head[:4000]
    return binary, text


def _count_lines(path: Path) -> int:
    """``len(text.split("\\n"))`` without holding the file: newlines + 1."""
    n = 0
    try:
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                n += chunk.count(b"\n")
    except OSError:
        return 0
    return n + 1


def _read_text(path: Path, cap: int) -> str | None:
    try:
        with open(path, "rb") as fh:
            return fh.read(cap).decode("utf-8", errors="replace")
    except OSError:
        return None


def _same_blob(path: Path, sha: str) -> bool:
    """``path`` on disk holds exactly git blob ``sha`` (a symbolic link: its target text)."""
    try:
        if path.is_symlink():
            data = os.readlink(path).encode()
            return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == sha  # noqa: S324
    except OSError:
        return False
    return _blob_sha(path) == sha


def _blob_sha(path: Path) -> str | None:
    """Git's blob id of a file (``sha1("blob <n>\\0" + bytes)``); None when unreadable or > 4 MiB."""
    try:
        if not path.is_file() or path.stat().st_size > MAX_HASH_BYTES:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # noqa: S324
