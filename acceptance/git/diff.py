"""Reading ``git diff`` since the baseline: ``--numstat``, ``--raw`` and the ``-U0`` changed lines.

All three take the baseline commit (or the empty tree) as ``revs`` and compare it with the working
tree, with rename detection (``-M``) and :data:`~tianshu_mcp.core.git.run._DIFF_OPTS`. Paths arrive verbatim
(``-z``); the ``-U0`` patch attributes ``+``/``-`` lines through its ``---``/``+++`` headers, so an
added line that itself starts with ``++`` still counts. Part of the git side of acceptance (see
:mod:`.git`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Sequence

from ...core.git.run import _DIFF_OPTS, _checked

_NUMSTAT_RE = re.compile(r"^(\d+|-)\t(\d+|-)\t(.*)$", re.S)
_ZERO_SHA_RE = re.compile(r"^0+$")
GITLINK_MODE = "160000"


def _numstat(project: str | os.PathLike[str], revs: Sequence[str]) -> dict[str, tuple[int, int, bool]]:
    """``{path: (add, del, binary)}`` of ``git diff --numstat -z -M <revs>`` (renames keyed by the
    new path; binary sides count 0)."""
    r = _checked(["diff", "--numstat", "-z", "-M", *_DIFF_OPTS, *revs, "--"], project)
    out: dict[str, tuple[int, int, bool]] = {}
    fields = r.stdout.split("\0")
    i = 0
    while i < len(fields):
        m = _NUMSTAT_RE.match(fields[i])
        i += 1
        if not m:
            continue
        path = m.group(3)
        if path == "":  # rename: "add\tdel\t\0old\0new"
            if i + 1 >= len(fields):
                break
            path = fields[i + 1]
            i += 2
        binary = m.group(1) == "-" or m.group(2) == "-"
        add = 0 if m.group(1) == "-" else int(m.group(1))
        dele = 0 if m.group(2) == "-" else int(m.group(2))
        out[path] = (add, dele, binary)
    return out


@dataclass
class _RawEntry:
    status: str
    score: int | None
    old_mode: str
    new_mode: str
    old_sha: str
    new_sha: str
    path: str
    old_path: str | None = None


def _raw(project: str | os.PathLike[str], revs: Sequence[str]) -> list[_RawEntry]:
    """Entries of ``git diff --raw -z -M --no-abbrev <revs>`` (status letter, similarity score,
    modes, shas, new path, and for renames the old path)."""
    r = _checked(["diff", "--raw", "-z", "-M", "--no-abbrev", *_DIFF_OPTS, *revs, "--"], project)
    out: list[_RawEntry] = []
    fields = r.stdout.split("\0")
    i = 0
    while i < len(fields):
        head = fields[i]
        i += 1
        if not head.startswith(":"):
            continue
        parts = head[1:].split()
        if len(parts) < 5:
            continue
        old_mode, new_mode, old_sha, new_sha, st = parts[:5]
        letter, score_s = st[:1], st[1:]
        score = int(score_s) if score_s.isdigit() else None
        if letter in ("R", "C"):
            if i + 1 >= len(fields):
                break
            old_path, path = fields[i], fields[i + 1]
            i += 2
        else:
            if i >= len(fields):
                break
            old_path, path = None, fields[i]
            i += 1
        out.append(_RawEntry(letter, score, old_mode, new_mode, old_sha, new_sha, path, old_path))
    return out


_C_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def _c_unquote(s: str) -> str:
    """Undo git's C-style quoting of a path (``"b/q\\"x"`` → ``b/q"x``)."""
    if len(s) < 2 or not (s.startswith('"') and s.endswith('"')):
        return s
    body = s[1:-1]
    out = bytearray()
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in _C_ESCAPES:
                out.append(_C_ESCAPES[nxt])
                i += 2
                continue
            if re.match(r"[0-7]{3}", body[i + 1 : i + 4]):
                out.append(int(body[i + 1 : i + 4], 8))
                i += 4
                continue
        out.extend(ch.encode("utf-8"))
        i += 1
    return out.decode("utf-8", errors="replace")


def _header_path(value: str, prefix: str) -> str | None:
    """The path of a ``--- a/…``/``+++ b/…`` header value (None for ``/dev/null``)."""
    value = value.removesuffix("\t")  # git appends a tab after a name containing a space
    value = _c_unquote(value)
    if value == "/dev/null":
        return None
    return value[len(prefix):] if value.startswith(prefix) else None


def _changed_lines(
    project: str | os.PathLike[str], revs: Sequence[str], skip: set[str]
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """``(added, removed)``: per file, the ``+`` and ``-`` lines of ``git diff -U0 -M <revs>``.

    Files are attributed through the ``---``/``+++`` headers (C-quoted names unquoted): the new
    path, or the old one for a deletion. Paths in ``skip`` (unchanged pre-existing files,
    submodules) are left out.
    """
    r = _checked(["diff", "-U0", "-M", *_DIFF_OPTS, "--src-prefix=a/", "--dst-prefix=b/", *revs, "--"], project)
    added: dict[str, list[str]] = {}
    removed: dict[str, list[str]] = {}
    if not r.ok:
        return added, removed
    current: str | None = None
    old: str | None = None
    in_header = False
    for line in r.stdout.split("\n"):
        if line.startswith("diff --git "):
            in_header, current, old = True, None, None
            continue
        if in_header:
            if line.startswith("--- "):
                old = _header_path(line[4:], "a/")
            elif line.startswith("+++ "):
                current = _header_path(line[4:], "b/") or old
            elif line.startswith("@@"):
                in_header = False
            continue
        if current is None or current in skip:
            continue
        if line.startswith("+"):
            added.setdefault(current, []).append(line[1:])
        elif line.startswith("-"):
            removed.setdefault(current, []).append(line[1:])
    return added, removed
