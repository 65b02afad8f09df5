"""Terminal escape codes out of agent output (opencode and aider colour their failure lines)."""

from __future__ import annotations

import re

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
"""CSI sequences (colours, cursor moves), OSC sequences (titles, hyperlinks) and two-byte escapes."""


def strip_ansi(text: str) -> str:
    """``text`` without ANSI/VT escape sequences (CSI, OSC, two-byte ESC codes); other text kept."""
    return _ANSI.sub("", text)
