"""The four markers of docs/acceptance.md §4.4, exact original rules (``scanChangedLinesForSignals``):
:func:`scan_signals`. Plain Python, no I/O."""

from __future__ import annotations

import re
from typing import Iterable

from .models import Signals

__all__ = ["scan_signals"]

_TODO_RE = re.compile(r"\b(TODO|FIXME|HACK|XXX)\b", re.I)
_CONSOLE_RE = re.compile(r"\bconsole\.(log|debug|info|warn|error)\s*\(|\bdebugger\s*;?")
_SECRET_RE = re.compile(
    r"(['\"]?(?:api[_-]?key|secret|token|passwd|password|authorization|access[_-]?key|pwd)['\"]?\s*[:=]\s*['\"][^'\"]{6,}['\"])",
    re.I,
)
_LONG_LITERAL_RE = re.compile(r"['\"][A-Za-z0-9+/=]{32,}['\"]")
_COMMENT_PREFIXES = ("//", "#", "--", ";", "*")
_BLOCK_START_RE = re.compile(r"^(/\*|<!--)")


def scan_signals(lines: Iterable[str]) -> Signals:
    """Count the four §4.4 markers over changed lines (``scanChangedLinesForSignals``).

    Per line (trailing whitespace stripped): todo, consoleDebug, secretLike (at most one per line)
    and commentedBlock (one per run of ≥3 consecutive comment lines; the run continues across file
    boundaries). The other counts of the returned :class:`Signals` are 0.
    """
    s = Signals()
    in_block = False
    run = 0
    for raw in lines:
        line = raw.rstrip()
        if _TODO_RE.search(line):
            s.todo += 1
        if _CONSOLE_RE.search(line):
            s.console_debug += 1
        if _SECRET_RE.search(line):
            s.secret_like += 1
        elif len(line) > 40 and _LONG_LITERAL_RE.search(line):
            s.secret_like += 1
        stripped = line.strip()
        if _BLOCK_START_RE.match(stripped):
            in_block = True
        if in_block or stripped.startswith(_COMMENT_PREFIXES):
            run += 1
            if run == 3:
                s.commented_block += 1
        else:
            run = 0
        if "*/" in stripped or "-->" in stripped:
            in_block = False
    return s
