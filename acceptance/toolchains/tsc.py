"""TypeScript's compiler: the optional ``npx tsc --noEmit`` check of a project with a
``tsconfig.json`` and no npm scripts, and repair directives from ``file(l,c): error TSxxxx``,
``file:l:c - error TSxxxx`` and file-less ``error TSxxxx`` lines.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

from .base import Derived, Detection, Finding, ParseContext, Toolchain
from .npm import package_scripts

_TSC_PAREN_RE = re.compile(r"^(.+?)\((\d+),(\d+)\):\s*error\s+(TS\d+):\s*(.+)$")
_TSC_DASH_RE = re.compile(r"^(.+?):(\d+):(\d+)\s+-\s+error\s+(TS\d+):\s*(.+)$")
_TSC_GLOBAL_RE = re.compile(r"^error\s+(TS\d+):\s*(.+)$")
_TSC_HINTS = {
    "TS1005": "fix the syntax error (a token is missing)",
    "TS1128": "fix the syntax error (a declaration or statement is expected)",
    "TS2304": "define or import the missing name (check the spelling)",
    "TS2305": "import a name the module really exports",
    "TS2307": "fix the import path, or add the missing module or its type declarations",
    "TS2322": "make the value match the declared type (or correct the declaration)",
    "TS2339": "use a property that exists on this type, or add it to the type",
    "TS2345": "pass an argument of the parameter's type (or widen the parameter's type)",
    "TS2352": "remove the unsafe type assertion or convert the value properly",
    "TS2362": "use number-typed operands for this arithmetic",
    "TS2366": "return a value on every code path (or include undefined in the return type)",
    "TS2531": "handle the null case before using the value",
    "TS2532": "handle the undefined case before using the value",
    "TS2551": "use the property name the compiler suggests (check the spelling)",
    "TS2552": "use the name the compiler suggests, or define/import the missing name",
    "TS2554": "pass the number of arguments the function expects",
    "TS2564": "initialise the property in the constructor or at its declaration",
    "TS2741": "add the missing property to the object",
    "TS6133": "remove the unused declaration, or use it",
    "TS7006": "add a type annotation to the parameter",
    "TS7016": "add type declarations for the module (a @types package or a .d.ts file)",
    "TS18003": "fix the tsconfig include/files so the compiler finds the sources",
    "TS18046": "narrow the unknown value's type before using it",
    "TS18047": "handle the null case before using the value",
    "TS18048": "handle the undefined case before using the value",
}


def _tsc_action(code: str) -> str:
    base = f"fix this type error (per the {code} diagnostic)"  # the original's wording, kept as the prefix
    hint = _TSC_HINTS.get(code)
    return f"{base}: {hint}" if hint else base


def parse_tsc(text: str, ctx: ParseContext) -> list[Finding]:
    """tsc ``--pretty false`` (``file(l,c): error TS…``), pretty (``file:l:c - error TS…``) and
    file-less configuration errors (``error TS18003: …``)."""
    out: list[Finding] = []
    for raw in text.split("\n"):
        line = raw.strip()
        m = _TSC_PAREN_RE.match(line) or _TSC_DASH_RE.match(line)
        if m:
            file, ln, _col, code, msg = m.groups()
            out.append(Finding(f"{code}: {msg.strip()}", _tsc_action(code), ctx.rel(file), int(ln)))
            continue
        g = _TSC_GLOBAL_RE.match(line)
        if g:
            code, msg = g.groups()
            out.append(Finding(f"{code}: {msg.strip()}", _tsc_action(code)))
    return out


def _detect(root: Path, already: Sequence[Derived]) -> Detection:
    """``tsconfig.json`` in a project whose ``package.json`` has no scripts → the optional
    ``typecheck-tsc`` ``npx tsc --noEmit`` (docs/acceptance.md §2.3)."""
    if package_scripts(root) is None and (root / "tsconfig.json").is_file():
        return [Derived("typecheck-tsc", ("npx", "tsc", "--noEmit"), optional=True)], []
    return [], []


TOOLCHAIN = Toolchain(
    id="tsc",
    order=20,
    detect=_detect,
    directive_argv=re.compile(r"\b(?:vue-)?tsc\b|--noEmit|typecheck|type-check", re.I),
    shape=re.compile(r"\berror\s+TS\d+:"),
    directives=parse_tsc,
)
