"""Recognising an agent that failed before doing any work (docs/robustness.md §4: "agent failures are agent
failures, not verification failures").

A CLI agent that cannot reach its model prints one tell-tale line and exits — often with code 1,
sometimes with 0: an HTTP 401/403 or a rejected API key, a 429 or an exhausted quota, "not
logged in", a model that does not exist. :func:`fatal_line` finds the last such line in the
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
    r"resource has been exhausted|resource_exhausted",  # Gemini API's 429
    # model
    r"model(?! metadata).{0,80}(not found|does not exist|is not supported|unavailable)|model_not_found|unknown model",
)
TAIL_BYTES = 64 * 1024
QUOTE_CHARS = 300


def fatal_line(text: str, extra_patterns: Iterable[str] = ()) -> str | None:
    """The last line of ``text`` matching a fatal pattern (stripped, ≤ 300 chars), or None: the
    CLI's final word (a CLI that retries prints the same error several times, after warnings
    that may match too).

    Invalid ``extra_patterns`` are ignored (profiles are validated when loaded).
    """
    compiled = []
    for pattern in (*DEFAULT_FATAL_PATTERNS, *extra_patterns):
        try:
            compiled.append(re.compile(pattern, re.IGNORECASE))
        except re.error:
            continue
    for line in reversed(text.splitlines()):
        if any(p.search(line) for p in compiled):
            return line.strip()[:QUOTE_CHARS]
    return None


def agent_text(log_text: str) -> str:
    """``log_text`` without our own framing of a round's log: the ``===== spawn: … =====`` header
    (which quotes the brief and may span lines) and the ``[exit] …`` trailer, so that a fatal
    pattern matches what the agent said, never what we wrote about it."""
    out, in_header = [], False
    for line in log_text.splitlines():
        if line.startswith("===== spawn:"):
            in_header = True
        if in_header:
            in_header = not re.search(r"@ \S+ =====\s*$", line)
            continue
        if not line.startswith("[exit] "):
            out.append(line)
    return "\n".join(out)


_HEADER_END_RE = re.compile(r"@ \S+ =====\s*$")
"""The last line of one of our headers: ``===== spawn: <argv…> (cwd=…) @ <ISO> =====`` (whose argv
quotes the brief, so it may span many lines), ``===== acp: … @ <ISO> =====``, ``===== gui:… run @ … =====``."""


def agent_output(log_text: str) -> str:
    """What the agent itself said in the last run of a round's log text (the whole log or its
    end, :func:`output_tail`): the text after our last header (see :data:`_HEADER_END_RE`), without
    our ``[exit] code=…`` trailer lines. A report shows this, never our spawn line: a rework
    round's argv quotes the brief, which quotes the previous round's ``[FAIL]`` summary.

    A text without a header (the header lies before a tail's start) is the agent's output whole.
    The log file itself is left as it is.

    Example:
        >>> agent_output("\\n===== spawn: agent [FAIL] old (cwd=/p) @ 2026-01-01T00:00:00.000Z =====\\nfixed it\\n"
        ...              "[exit] code=0 duration=5ms\\n")
        'fixed it\\n'
    """
    lines = log_text.splitlines(keepends=True)
    start = 0
    for i in range(len(lines) - 1, -1, -1):
        if _HEADER_END_RE.search(lines[i]):
            start = i + 1
            break
    return "".join(ln for ln in lines[start:] if not ln.startswith("[exit] code="))


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


AGENT_TAIL_CHARS = 2000
"""A round's ``output_tail`` keeps at most this many characters of the agent's own output."""


def agent_output_tail(log_file: str | Path | None, max_chars: int = AGENT_TAIL_CHARS) -> str:
    """What a round's report shows of the agent's output: the end of ``log_file``
    (:func:`output_tail`), ANSI codes removed, without our framing (:func:`agent_output`), its last
    ``max_chars`` characters starting at a line (:func:`~tianshu_mcp.core.text.line_tail`); ``""``
    without a log. Never raises."""
    from ..core.text import line_tail
    from .output.ansi import strip_ansi

    return line_tail(agent_output(strip_ansi(output_tail(log_file))), max_chars)
