"""``git diff --check`` (the engine's own whitespace gate): repair directives from
``file:l: trailing whitespace.`` / ``leftover conflict marker`` …
"""

from __future__ import annotations

import re

from .base import Finding, ParseContext, Toolchain

_GITDIFF_RE = re.compile(
    r"^(.+?):(\d+): (trailing whitespace\.|space before tab in indent\.|indent with spaces\.|tab in indent\.|"
    r"new blank line at EOF\.|leftover conflict marker)$"
)
_GITDIFF_HINTS = {
    "trailing whitespace.": "remove the trailing whitespace",
    "leftover conflict marker": "resolve the merge conflict and remove the conflict markers",
    "new blank line at EOF.": "remove the blank line(s) at the end of the file",
}


def parse_git_diff_check(text: str, ctx: ParseContext) -> list[Finding]:
    """``git diff --check``: ``file:l: trailing whitespace.`` / ``leftover conflict marker`` …"""
    out: list[Finding] = []
    for raw in text.split("\n"):
        m = _GITDIFF_RE.match(raw.rstrip())
        if m:
            file, ln, msg = m.groups()
            out.append(Finding(msg, _GITDIFF_HINTS.get(msg, "fix the whitespace error at this line"), ctx.rel(file), int(ln)))
    return out


TOOLCHAIN = Toolchain(
    id="git-diff-check",
    order=110,
    directive_argv=re.compile(r"git-diff-check|git\s+diff\s+--check", re.I),
    shape=re.compile(_GITDIFF_RE.pattern, re.M),
    directives=parse_git_diff_check,
)
