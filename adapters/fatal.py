"""Recognising an agent that failed before doing any work (input issue: "agent failures are agent
failures, not verification failures").

A CLI agent that cannot reach its model prints one tell-tale line and exits — often with code 1,
sometimes with 0: an HTTP 401/403 or a rejected API key, a 429 or an exhausted quota, "not
logged in", a model that does not exist. :func:`fatal_line` finds the first such line in the
agent's output; profiles add their own patterns (``fatalPatterns``, regular expressions, matched
case-insensitively) to :data:`DEFAULT_FATAL_PATTERNS`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

DEFAULT_FATAL_PATTERNS: tuple[str, ...] = (
    # authentication
    r"\b(401|403)\b.{0,80}(unauthori[sz]ed|forbidden|api[ _-]?key|auth)",
    r"(invalid|incorrect|missing|expired|revoked)\s+(x-)?api[ _-]?key",
    r"api[ _-]?key\s+(is\s+)?(invalid|not valid|missing|not set|required)",
    r"authentication[ _](failed|error|required)|\bunauthori[sz]ed\b",
    r"not logged in|please (log ?in|sign ?in)|login required|\brun\b.{0,40}\blogin\b",
    # quota and rate limits
    r"\b429\b|rate[ _-]?limit(ed)?\b|too many requests",
    r"quota\b.{0,40}(exceeded|exhausted|reached)|insufficient[_ ]quota|billing|credit balance is too low",
    # model
    r"model.{0,80}(not found|does not exist|is not supported|unavailable)|model_not_found|unknown model",
)
TAIL_BYTES = 64 * 1024
QUOTE_CHARS = 300


def fatal_line(text: str, extra_patterns: Iterable[str] = ()) -> str | None:
    """The first line of ``text`` matching a fatal pattern (stripped, ≤ 300 chars), or None.

    Invalid ``extra_patterns`` are ignored (profiles are validated when loaded).
    """
    compiled = []
    for pattern in (*DEFAULT_FATAL_PATTERNS, *extra_patterns):
        try:
            compiled.append(re.compile(pattern, re.IGNORECASE))
        except re.error:
            continue
    for line in text.splitlines():
        if any(p.search(line) for p in compiled):
            return line.strip()[:QUOTE_CHARS]
    return None


def output_tail(log_file: str | Path | None, max_bytes: int = TAIL_BYTES) -> str:
    """The last ``max_bytes`` bytes of an agent log as text ("" when there is none)."""
    if not log_file:
        return ""
    try:
        with open(log_file, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - max_bytes))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
