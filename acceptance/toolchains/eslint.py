"""ESLint: repair directives from its stylish, ``unix`` and ``compact`` formats (also inside
``npm run lint``).
"""

from __future__ import annotations

import re

from .base import ERROR, WARNING, Finding, ParseContext, Toolchain, hinted

_ESL_STYLISH_RE = re.compile(r"^\s+(\d+):(\d+)\s+(error|warning)\s+(.+?)(?:\s{2,}([@\w][\w@/.-]*))?\s*$")
_ESL_UNIX_RE = re.compile(r"^(.+?):(\d+):(\d+): (.+) \[(Error|Warning)(?:/([^\]]+))?\]$")
_ESL_COMPACT_RE = re.compile(r"^(.+?): line (\d+), col (\d+), (Error|Warning) - (.+?)(?: \(([@\w][\w@/.-]*)\))?$")
_ESL_PATH_RE = re.compile(r"^(?:[A-Za-z]:[\\/]|/|\.{1,2}/)?[^\s>✖].*\.[A-Za-z0-9]+$")
_ESL_HINTS = {
    "no-unused-vars": "remove the unused variable or import, or use it",
    "@typescript-eslint/no-unused-vars": "remove the unused variable or import, or use it",
    "no-undef": "define or import the name (declare a global in the ESLint config only if it really is one)",
    "prefer-const": "declare it with `const`; it is never reassigned",
    "eqeqeq": "use `===`/`!==` instead of `==`/`!=`",
    "no-console": "remove the console call",
    "no-debugger": "remove the debugger statement",
    "no-var": "use `let` or `const` instead of `var`",
    "no-empty": "handle the case or explain in a comment why the block is empty",
    "no-unreachable": "remove the unreachable code",
    "no-redeclare": "remove the duplicate declaration",
    "no-dupe-keys": "remove the duplicate key",
    "no-constant-condition": "replace the constant condition with a real one",
    "no-prototype-builtins": "call the method through Object.prototype (e.g. Object.hasOwn)",
    "react-hooks/exhaustive-deps": "add the missing dependencies to the hook's dependency array",
    "react-hooks/rules-of-hooks": "call hooks only at the top level of components and custom hooks",
    "@typescript-eslint/no-explicit-any": "replace `any` with a precise type",
    "@typescript-eslint/ban-ts-comment": "remove the @ts- comment and fix the underlying type error",
    "semi": "apply the project's formatting rule (`eslint --fix` can do it)",
    "quotes": "apply the project's formatting rule (`eslint --fix` can do it)",
    "indent": "apply the project's formatting rule (`eslint --fix` can do it)",
}


def _eslint_finding(ctx: ParseContext, file: str, ln: str, sev: str, msg: str, rule: str | None) -> Finding:
    msg = msg.strip().rstrip(".")  # stylish drops the final period, unix/compact keep it
    issue = f"{rule}: {msg}" if rule else msg
    if rule:
        action = hinted(f"fix eslint {rule} at this line", _ESL_HINTS.get(rule),
                         f"fix the eslint {rule} violation at this line (do not disable the rule)")
    elif msg.lower().startswith("parsing error"):
        action = "fix the syntax error at this line"
    else:
        action = "fix the eslint problem at this line"
    severity = WARNING if sev.lower() == "warning" else ERROR
    return Finding(issue, action, ctx.rel(file), int(ln), severity)


def parse_eslint(text: str, ctx: ParseContext) -> list[Finding]:
    """ESLint stylish (default), ``unix`` and ``compact`` formats."""
    out: list[Finding] = []
    current: str | None = None
    for raw in text.split("\n"):
        line = raw.rstrip()
        m = _ESL_UNIX_RE.match(line)
        if m:
            file, ln, _c, msg, sev, rule = m.groups()
            out.append(_eslint_finding(ctx, file, ln, sev, msg.rstrip(), rule))
            continue
        m = _ESL_COMPACT_RE.match(line)
        if m:
            file, ln, _c, sev, msg, rule = m.groups()
            out.append(_eslint_finding(ctx, file, ln, sev, msg, rule))
            continue
        m = _ESL_STYLISH_RE.match(line)
        if m and current:
            ln, _c, sev, msg, rule = m.groups()
            out.append(_eslint_finding(ctx, current, ln, sev, msg, rule))
            continue
        if line and not line[0].isspace():
            current = line.strip() if _ESL_PATH_RE.match(line.strip()) else None
    return out


TOOLCHAIN = Toolchain(
    id="eslint",
    order=30,
    directive_argv=re.compile(r"\beslint\b|\blint\b", re.I),
    shape=re.compile(r"^\s+\d+:\d+\s+(?:error|warning)\s+\S|\[(?:Error|Warning)(?:/[^\]]+)?\]$"
                     r"|: line \d+, col \d+, (?:Error|Warning) - ", re.M),
    directives=parse_eslint,
)
