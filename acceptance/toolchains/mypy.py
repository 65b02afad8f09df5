"""mypy: repair directives from ``path:l[:c]: error: msg  [code]`` (notes skipped).
"""

from __future__ import annotations

import re

from .base import ERROR, WARNING, Finding, ParseContext, Toolchain, hinted

_MYPY_RE = re.compile(r"^(.+?\.pyi?):(\d+)(?::(\d+))?: (error|warning|note): (.+?)(?:  \[([\w-]+)\])?\s*$")
_MYPY_HINTS = {
    "name-defined": "define or import the name (check the spelling)",
    "attr-defined": "use an attribute that exists on this type, or add it",
    "arg-type": "pass an argument of the parameter's type (or widen the parameter's annotation)",
    "return-value": "return a value of the declared return type (or correct the annotation)",
    "assignment": "assign a value of the declared type (or correct the annotation)",
    "union-attr": "handle None / the other union members before the attribute access (narrow the type)",
    "call-arg": "call it with the arguments its signature expects",
    "call-overload": "call it with argument types one of its overloads accepts",
    "index": "index with a valid key/index type",
    "operator": "use operand types the operator supports",
    "override": "make the override's signature compatible with the base class",
    "import-not-found": "install the missing package or fix the import path",
    "import-untyped": "install the package's type stubs or add a typed wrapper",
    "import": "install the missing package/stubs or fix the import path",
    "no-untyped-def": "add type annotations to the function",
    "no-untyped-call": "annotate the called function",
    "var-annotated": "add a type annotation to the variable",
    "return": "return a value on every code path",
    "has-type": "annotate the variable so its type can be determined",
    "valid-type": "use a valid type in the annotation",
    "misc": "",
    "syntax": "fix the syntax error",
}


def parse_mypy(text: str, ctx: ParseContext) -> list[Finding]:
    """mypy ``path:l[:c]: error: msg  [code]`` (with or without ``--show-column-numbers``)."""
    out: list[Finding] = []
    for raw in text.split("\n"):
        m = _MYPY_RE.match(raw.rstrip())
        if not m:
            continue
        file, ln, _c, sev, msg, code = m.groups()
        if sev == "note":
            continue
        issue = f"{code}: {msg.strip()}" if code else msg.strip()
        if code:
            action = hinted(f"fix mypy [{code}] at this line", _MYPY_HINTS.get(code),
                             f"fix this mypy [{code}] error at this line")
        else:
            action = "fix this mypy error at this line"
        out.append(Finding(issue, action, ctx.rel(file), int(ln), ERROR if sev == "error" else WARNING))
    return out


TOOLCHAIN = Toolchain(
    id="mypy",
    order=50,
    directive_argv=re.compile(r"\b[d]?mypy\b", re.I),
    shape=re.compile(r"^\S.*?\.pyi?:\d+(?::\d+)?: error: ", re.M),
    directives=parse_mypy,
)
