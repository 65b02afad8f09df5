"""Ruff: repair directives from its concise (``path:l:c: CODE msg``) and full formats.
"""

from __future__ import annotations

import re

from .base import Finding, ParseContext, Toolchain, hinted

_RUFF_CODE = r"(?:[A-Z]{1,4}[0-9]{1,4}|invalid-syntax|SyntaxError)"
_RUFF_CONCISE_RE = re.compile(rf"^(.+?):(\d+):(\d+): ({_RUFF_CODE}):? (?:\[\*\] )?(.+)$")
_RUFF_HEAD_RE = re.compile(rf"^({_RUFF_CODE}):? (?:\[\*\] )?(.+)$")
_RUFF_ARROW_RE = re.compile(r"^\s*-->\s+(.+?):(\d+):(\d+)\s*$")
_RUFF_HINTS = {
    "F401": "remove the unused import",
    "F403": "replace the star import with explicit names",
    "F405": "import the name explicitly instead of relying on a star import",
    "F541": "remove the `f` prefix (the f-string has no placeholders)",
    "F811": "remove the redefinition or rename one of them",
    "F821": "define or import the undefined name (check the spelling)",
    "F841": "remove the unused local variable, or use it",
    "F632": "compare with `==`/`!=` (use `is` only for None, True, False)",
    "E402": "move the import to the top of the module",
    "E501": "shorten the line",
    "E701": "put the statement on its own line",
    "E711": "compare with `is None` / `is not None`",
    "E712": "test the truth value directly (`if x:` / `if not x:`)",
    "E721": "use `isinstance()` (or `is`) to compare types",
    "E722": "catch a specific exception instead of a bare `except`",
    "E731": "define a function with `def` instead of assigning a lambda",
    "E741": "rename the ambiguous variable",
    "W291": "remove the trailing whitespace",
    "W293": "remove the whitespace on the blank line",
    "I001": "sort and format the import block (`ruff check --fix` can do it)",
    "B006": "use None as the default and create the mutable value inside the function",
    "B008": "do not call functions in argument defaults; compute the value inside the function",
    "UP006": "use the builtin generic type (e.g. `list` instead of `List`)",
    "UP035": "import from the modern location the message names",
    "invalid-syntax": "fix the syntax error",
    "SyntaxError": "fix the syntax error",
}


def _ruff_finding(ctx: ParseContext, file: str, ln: str, code: str, msg: str) -> Finding:
    action = hinted(f"fix ruff {code} at this line", _RUFF_HINTS.get(code),
                     f"fix ruff {code} at this line (see `ruff rule {code}`)")
    return Finding(f"{code}: {msg.strip()}", action, ctx.rel(file), int(ln))


def parse_ruff(text: str, ctx: ParseContext) -> list[Finding]:
    """ruff concise (``path:l:c: CODE msg``) and full (``CODE msg`` then `` --> path:l:c``)."""
    out: list[Finding] = []
    pending: tuple[str, str] | None = None
    since = 0
    for raw in text.split("\n"):
        line = raw.rstrip()
        m = _RUFF_CONCISE_RE.match(line)
        if m:
            file, ln, _c, code, msg = m.groups()
            out.append(_ruff_finding(ctx, file, ln, code, msg))
            pending = None
            continue
        h = _RUFF_HEAD_RE.match(line)
        if h:
            pending, since = (h.group(1), h.group(2)), 0
            continue
        a = _RUFF_ARROW_RE.match(line)
        if a and pending:
            out.append(_ruff_finding(ctx, a.group(1), a.group(2), pending[0], pending[1]))
            pending = None
            continue
        since += 1
        if since > 3:
            pending = None
    return out


TOOLCHAIN = Toolchain(
    id="ruff",
    order=40,
    directive_argv=re.compile(r"\bruff\b", re.I),
    shape=re.compile(rf"^\S.*?:\d+:\d+: {_RUFF_CODE}:? |^{_RUFF_CODE}:? .*\n\s*--> ", re.M),
    directives=parse_ruff,
)
