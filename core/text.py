"""Cutting text for display without cutting a line in two: the end of an output (:func:`line_tail`)
and the start of a long text (:func:`line_head`). Plain Python, no I/O."""

from __future__ import annotations

__all__ = ["line_tail", "line_head", "CUT_MARK"]

CUT_MARK = "[…]"
"""The line that stands for what a cut left out."""


def line_tail(text: str, max_chars: int) -> str:
    """The end of ``text`` in at most ``max_chars`` characters (plus a :data:`CUT_MARK` line), starting
    at a line boundary: a cut never starts mid-line or mid-word. ``text`` that fits is returned as it
    is. When the last ``max_chars`` characters hold no line break (one long line), the cut starts at
    a word boundary when there is one.

    Example:
        >>> line_tail("first line\\nsecond\\nthird", 12)
        '[…]\\nsecond\\nthird'
    """
    if max_chars <= 0:
        return ""
    if len(text) <= max_chars:
        return text
    cut = text[-max_chars:]
    if text[-max_chars - 1] != "\n":  # the cut starts mid-line: drop the partial line
        nl = cut.find("\n")
        if nl >= 0:
            cut = cut[nl + 1:]
        else:
            space = cut.find(" ")
            cut = cut[space + 1:] if 0 <= space < len(cut) - 1 else cut
    return f"{CUT_MARK}\n{cut}"


def line_head(text: str, max_chars: int) -> tuple[str, bool]:
    """``(head, cut)``: the start of ``text`` in at most ``max_chars`` characters, ending at a line
    boundary when the cut falls inside a line that is not the first; ``cut`` tells whether anything
    was left out."""
    if len(text) <= max_chars:
        return text, False
    head = text[:max_chars]
    nl = head.rfind("\n")
    return (head[: nl + 1] if nl > 0 else head), True
