"""Repair directives: turn the output of failing checks into ``file:line`` instructions.

Source: 20-acceptance §6 (``extractRepairDirectives``). The original had two sources (a tsc line
parser and the diffstat signals) and sent every test and lint failure to the fallback; the port
(issue "Repair directives for failed rounds, beyond the original's tsc-only parser") reads the
output of the common toolchains:

============  =================================================================================
source        what it reads
============  =================================================================================
tsc           ``file(l,c): error TSxxxx: msg`` and ``file:l:c - error TSxxxx: msg``; file-less
              ``error TSxxxx: msg`` (configuration errors)
eslint        stylish (a path line, then ``  l:c  error  msg  rule``), ``unix``
              (``file:l:c: msg [Error/rule]``) and ``compact`` (``file: line l, col c, Error - msg
              (rule)``); also inside ``npm run lint``
ruff          concise ``path:l:c: CODE msg`` and the full format (``CODE msg`` then ``--> path:l:c``)
mypy          ``path:l[:c]: error: msg  [code]`` (notes skipped)
pytest        ``FAILED``/``ERROR`` summary lines joined with the failure sections (``E`` lines for
              the message, the deepest traceback location inside the project for file:line),
              ``--tb=line`` locations, collection errors
jest          ``● Suite › test`` blocks with their first ``at … (path:line:col)`` in the project
vitest        ``FAIL path > suite > test`` blocks with their first ``❯ path:line:col``
go            build/vet ``./x.go:l:c: msg``; ``go test`` ``--- FAIL: TestX`` with ``x_test.go:l:``
              lines (mapped to the package directory) and panics (first frame in the project)
cargo         ``error[E0425]: msg``/``warning: msg`` followed by ``--> src/x.rs:l:c`` (clippy
              lint names from the notes); ``cargo test`` ``---- t stdout ----`` +
              ``thread 't' panicked at src/lib.rs:l:c:`` + message
git-diff-check ``file:l: trailing whitespace.`` / ``leftover conflict marker`` …
diffstat      the analysis: big files, lockfiles, TODO / console / secret-like signals
============  =================================================================================

A parser runs on a failing check when the check's name or command names its tool **or** when the
output has the parser's shape (so ``npm run lint`` printing ESLint's stylish format is read too).
ANSI colour codes are stripped first; file names become project-relative POSIX paths (absolute
paths outside the project are kept as printed). Each parser runs in ``try``/``except``: one broken
parser never sinks the others. Items are deduplicated across checks by ``(file, line, issue)``,
ordered errors → warnings → diffstat signals (items of optional checks one step later), taking
turns between the failing checks within each step so the first lines cover every check, and capped
at :data:`MAX_ITEMS`.

Plain Python: no Prefect, no adapters; reads nothing but ``<project>/go.mod`` (to map ``go test``
file names to package directories).
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any, Callable, Mapping, Sequence

from .git import LOCKFILE_RE

__all__ = [
    "MAX_ITEMS",
    "NO_ITEMS_REASON",
    "Finding",
    "OutputParser",
    "ReportSource",
    "ParseContext",
    "DEFAULT_REGISTRY",
    "extract_directives",
    "strip_ansi",
]

log = logging.getLogger("tianshu_mcp")

MAX_ITEMS = 50
"""At most this many items are kept (the most useful first); the rest are counted in ``omitted``."""
ISSUE_MAX_CHARS = 300

NO_ITEMS_REASON = (
    "this round's failures cannot be turned into directly actionable directives: no failing check "
    "printed a file:line diagnostic in a known format (tsc, eslint, ruff, mypy, pytest, jest, vitest, "
    "go, cargo, git diff --check)"
)
NO_OUTPUT_REASON = (
    "this round's failures cannot be turned into directly actionable directives: no failing command "
    "check printed any output (see the blocking issues and gates in the report)"
)

ERROR, WARNING, INFO = 0, 1, 2

# --- text and paths ------------------------------------------------------------------------------

_ANSI_RE = re.compile(
    r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC (hyperlinks, titles)
    r"|\x1b\[[0-?]*[ -/]*[@-~]"  # CSI (colours, cursor)
    r"|\x1b[@-Z\\-_]"  # other two-byte escapes
)


def strip_ansi(text: str) -> str:
    """Remove ANSI escape sequences and normalise line ends (``\\r\\n`` and lone ``\\r`` → ``\\n``)."""
    text = _ANSI_RE.sub("", text or "")
    return text.replace("\r\n", "\n").replace("\r", "\n")


_WIN_ABS_RE = re.compile(r"^[A-Za-z]:[\\/]")
_DEP_DIRS = ("node_modules/", "site-packages/", "dist-packages/", "/.cargo/registry/", "/rustc/", "/usr/lib/go")


@dataclass
class ParseContext:
    """What a parser knows about the check whose output it reads.

    Attributes:
        project: the project root (absolute), as in ``report.projectPath``.
        check_name: the check's name; ``cmd``: its command line (argv joined by spaces).
    """

    project: str = ""
    check_name: str = ""
    cmd: str = ""
    _go_module: str | None = field(default=None, repr=False)

    def rel(self, path: str) -> str:
        """``path`` as a project-relative POSIX path; absolute paths outside the project (or equal
        to its root) are kept as printed, relative ones only lose ``./`` and backslashes."""
        f = path.strip().strip("'\"")
        f = f.removeprefix("file://")
        if _WIN_ABS_RE.match(f):
            return self._rel_windows(f)
        if f.startswith("/"):
            root = os.path.normpath(self.project) if self.project else ""
            norm = os.path.normpath(f)
            for r, n in ((root, norm), (_real(root), _real(norm))):
                if r and n != r and n.startswith(r.rstrip("/") + "/"):
                    return PurePosixPath(os.path.relpath(n, r)).as_posix()
            return f
        f = f.replace("\\", "/")
        while f.startswith("./"):
            f = f[2:]
        return f

    def _rel_windows(self, f: str) -> str:
        if self.project and _WIN_ABS_RE.match(self.project):
            root, p = PureWindowsPath(self.project), PureWindowsPath(f)
            try:
                rel = p.relative_to(root) if str(p).lower().startswith(str(root).lower()) else None
            except ValueError:
                rel = None
            if rel is None and str(p).lower().startswith(str(root).lower().rstrip("\\") + "\\"):
                rel = PureWindowsPath(str(p)[len(str(root).rstrip("\\")) + 1:])
            if rel is not None and str(rel) not in ("", "."):
                return rel.as_posix()
        return f

    def own(self, path: str) -> bool:
        """True when ``path`` (as printed) is the project's own code: inside the project and not in
        a dependency directory (``node_modules``, ``site-packages``, the Rust/Go toolchains)."""
        rel = self.rel(path)
        if rel.startswith(("/", "../", "node:")) or _WIN_ABS_RE.match(rel):
            return False
        probe = "/" + rel
        return not any(d in probe for d in _DEP_DIRS)

    def go_module(self) -> str | None:
        """The ``module`` line of ``<project>/go.mod`` (None when unreadable)."""
        if self._go_module is None:
            self._go_module = ""
            try:
                with open(os.path.join(self.project, "go.mod"), encoding="utf-8") as fh:
                    for line in fh:
                        m = re.match(r"^\s*module\s+(\S+)", line)
                        if m:
                            self._go_module = m.group(1).strip('"')
                            break
            except (OSError, ValueError):
                pass
        return self._go_module or None


def _real(p: str) -> str:
    try:
        return os.path.realpath(p) if p else ""
    except (OSError, ValueError):
        return ""


def _clip(text: str, limit: int = ISSUE_MAX_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


# --- findings and the registry -----------------------------------------------------------------


@dataclass
class Finding:
    """One directive before ordering: ``{file?, line?, issue, action}`` plus its severity
    (:data:`ERROR`, :data:`WARNING`, :data:`INFO`); ``source`` is filled in by the registry."""

    issue: str
    action: str
    file: str | None = None
    line: int | None = None
    severity: int = ERROR
    source: str = ""

    def to_item(self) -> dict[str, Any]:
        item: dict[str, Any] = {}
        if self.file:
            item["file"] = self.file
        if self.line:
            item["line"] = int(self.line)
        item["issue"] = _clip(self.issue)
        item["action"] = self.action
        item["source"] = self.source
        return item


@dataclass(frozen=True)
class OutputParser:
    """A parser of one tool's output.

    Attributes:
        id: the ``source`` id of its items.
        parse: ``(ANSI-stripped output, context) -> findings``; may raise (the registry catches it).
        argv: searched (case-insensitive) in ``"<check name> <cmd>"``: the check runs this tool.
        shape: searched (multi-line) in the output: the output looks like this tool's.
    """

    id: str
    parse: Callable[[str, ParseContext], list[Finding]]
    argv: re.Pattern[str]
    shape: re.Pattern[str]

    def applies(self, name: str, cmd: str, text: str) -> bool:
        """Whether to run this parser on a check's output (by name/argv, or by content shape)."""
        return bool(self.argv.search(f"{name} {cmd}") or self.shape.search(text))


@dataclass(frozen=True)
class ReportSource:
    """A source that reads the whole report (not a check's output), e.g. ``diffstat``."""

    id: str
    collect: Callable[[Mapping[str, Any]], list[Finding]]


def _hinted(prefix: str, hint: str | None, generic: str) -> str:
    return f"{prefix}: {hint}" if hint else generic


# --- tsc -----------------------------------------------------------------------------------------

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


# --- eslint --------------------------------------------------------------------------------------

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
        action = _hinted(f"fix eslint {rule} at this line", _ESL_HINTS.get(rule),
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


# --- ruff ----------------------------------------------------------------------------------------

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
    action = _hinted(f"fix ruff {code} at this line", _RUFF_HINTS.get(code),
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


# --- mypy ----------------------------------------------------------------------------------------

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
            action = _hinted(f"fix mypy [{code}] at this line", _MYPY_HINTS.get(code),
                             f"fix this mypy [{code}] error at this line")
        else:
            action = "fix this mypy error at this line"
        out.append(Finding(issue, action, ctx.rel(file), int(ln), ERROR if sev == "error" else WARNING))
    return out


# --- pytest --------------------------------------------------------------------------------------

_PT_REGION_RE = re.compile(r"^={3,} (.+?) ={3,}$")
_PT_SECTION_RE = re.compile(r"^_{3,} (.+?) _{3,}$")
_PT_SUMMARY_RE = re.compile(r"^(FAILED|ERROR) (\S+?)(?: - (.*))?$")
_PT_LOC_RE = re.compile(r"^(\S.*?\.py):(\d+):(?: (.*))?$")
_PT_E_RE = re.compile(r"^E\s+(.*)$")


@dataclass
class _PtSection:
    name: str
    locs: list[tuple[str, int]] = field(default_factory=list)
    message: str = ""
    line_msg: str = ""


def _pt_key(nodeid: str) -> str:
    """The section title pytest prints for a node id (``a.py::C::t[1]`` → ``C.t[1]``)."""
    parts = nodeid.split("::")
    return ".".join(parts[1:]) if len(parts) > 1 else nodeid


def parse_pytest(text: str, ctx: ParseContext) -> list[Finding]:
    """pytest: short-summary ``FAILED path::test - msg`` / ``ERROR path`` joined with the failure
    sections (``E`` lines → message, deepest in-project traceback location → file:line);
    ``--tb=line`` locations; collection and setup errors. A section cut at the top of the output
    (the engine keeps a tail) is given to the summary entry just before the first whole section."""
    orphan = _PtSection("")  # locations before any header: the end of a section cut off at the top
    sections: list[_PtSection] = []
    tb_line: list[tuple[str, int, str]] = []  # --tb=line: "path:l: msg" in the FAILURES region
    summary: list[tuple[str, str, str]] = []
    region = "pre"
    cur: _PtSection | None = orphan
    for raw in text.split("\n"):
        line = raw.rstrip()
        r = _PT_REGION_RE.match(line)
        if r:
            title = r.group(1).strip().lower()
            region = "failures" if title in ("failures", "errors") else ("summary" if "short test summary" in title else "other")
            cur = None
            continue
        if region == "summary":
            s = _PT_SUMMARY_RE.match(line)
            if s:
                summary.append((s.group(1), s.group(2), (s.group(3) or "").strip()))
            continue
        if region not in ("failures", "pre"):
            continue
        head = _PT_SECTION_RE.match(line)
        if head:
            cur = _PtSection(head.group(1).strip())
            sections.append(cur)
            continue
        loc = _PT_LOC_RE.match(line)
        if loc:
            file, ln, rest = loc.group(1), int(loc.group(2)), (loc.group(3) or "").strip()
            if cur is not None:
                cur.locs.append((file, ln))
            else:
                tb_line.append((file, ln, rest))
            continue
        e = _PT_E_RE.match(line)
        if e and cur is not None and not cur.message and e.group(1).strip():
            cur.message = e.group(1).strip()
    by_name: dict[str, list[_PtSection]] = {}
    for one in sections:
        by_name.setdefault(one.name, []).append(one)
    used: set[int] = set()

    def find(name: str, test_file: str) -> _PtSection | None:
        cands = [c for c in by_name.get(name, []) if id(c) not in used]
        for c in cands:  # the same test name in two files: prefer the section that ran this file
            if any(ctx.rel(f) == test_file for f, _n in c.locs):
                return c
        return cands[0] if cands else None

    def pick(locs: Sequence[tuple[str, int]]) -> tuple[str, int] | None:
        own = [(ctx.rel(f), n) for f, n in locs if ctx.own(f)]
        if own:
            return own[-1]
        return (ctx.rel(locs[-1][0]), locs[-1][1]) if locs else None

    matched: list[_PtSection | None] = []
    for kind, nodeid, _msg in summary:
        test_file = ctx.rel(nodeid.split("::")[0])
        sec: _PtSection | None
        if "::" in nodeid:
            sec = find(_pt_key(nodeid), test_file)
            if sec is None and kind == "ERROR":
                sec = find(f"ERROR at setup of {_pt_key(nodeid)}", test_file) or find(
                    f"ERROR at teardown of {_pt_key(nodeid)}", test_file)
        else:
            sec = find(f"ERROR collecting {nodeid}", test_file)
        if sec is not None:
            used.add(id(sec))
        matched.append(sec)
    if orphan.locs:
        first = next((k for k, m in enumerate(matched) if m is not None), len(matched))
        if first > 0 and matched[first - 1] is None:
            matched[first - 1] = orphan
            used.add(id(orphan))

    out: list[Finding] = []
    failed_idx = [k for k, s in enumerate(summary) if s[0] == "FAILED"]
    for k, ((kind, nodeid, msg), got) in enumerate(zip(summary, matched, strict=True)):
        test_file = ctx.rel(nodeid.split("::")[0])
        where: tuple[str, int] | None = None
        # the section's own message first: pytest cuts summary lines to the terminal width ("...")
        if got is not None:
            where = pick(got.locs)
            msg = got.message or msg
        elif kind == "FAILED" and tb_line and len(tb_line) == len(failed_idx):
            f, n, m2 = tb_line[failed_idx.index(k)]
            where = (ctx.rel(f), n)
            msg = m2 or msg
        out.append(_pt_finding(kind, nodeid, test_file, "::" in nodeid, where, msg))
    for left in sections:  # sections whose summary line fell out of the output (or -rN)
        if id(left) in used:
            continue
        where = pick(left.locs)
        if left.name.startswith("ERROR collecting "):
            nodeid = left.name.removeprefix("ERROR collecting ")
            out.append(_pt_finding("ERROR", nodeid, ctx.rel(nodeid), False, where, left.message))
        else:
            name = left.name
            for prefix in ("ERROR at setup of ", "ERROR at teardown of "):
                name = name.removeprefix(prefix)
            out.append(_pt_finding("FAILED", name, where[0] if where else "", True, where, left.message))
    if not summary and not sections:
        for f, n, m2 in tb_line:
            out.append(_pt_finding("FAILED", f"{ctx.rel(f)}:{n}", ctx.rel(f), True, (ctx.rel(f), n), m2))
    return out


def _pt_finding(kind: str, nodeid: str, test_file: str, is_node: bool,
                where: tuple[str, int] | None, msg: str) -> Finding:
    msg = msg or "(no message)"
    if not is_node:
        return Finding(f"collecting {nodeid} failed: {msg}",
                       "fix the import or syntax error so pytest can collect this file",
                       where[0] if where else test_file or None, where[1] if where else None)
    verb = "failed" if kind == "FAILED" else "errored"
    issue = f"{nodeid} {verb}: {msg}"
    if where is None:
        return Finding(issue, f"make {nodeid} pass (do not weaken, skip or delete the test)", test_file or None)
    file, line = where
    if file == test_file:
        action = f"make {nodeid} pass: fix the code under test so this line holds (do not weaken, skip or delete the test)"
    else:
        action = f"fix the error raised here, which makes {nodeid} {'fail' if kind == 'FAILED' else 'error'} (do not weaken, skip or delete the test)"
    return Finding(issue, action, file, line)


# --- jest / vitest -------------------------------------------------------------------------------

_JEST_FILE_RE = re.compile(r"^\s*(?:FAIL|PASS)\s+(\S+)")
_JEST_BLOCK_RE = re.compile(r"^\s*● (.+?)\s*$")
_JEST_AT_RE = re.compile(r"^\s+at (?:.*? \()?(.+?):(\d+):(\d+)\)?\s*$")
_JEST_END_RE = re.compile(r"^(?:Test Suites:|Tests:|Snapshots:|Time:|Ran all test suites|Summary of all failing tests)")


def _test_action(runner: str, title: str, at: tuple[str, int] | None, test_file: str | None) -> str:
    if at is None or (test_file and at[0] == test_file):
        return f"make the {runner} test '{title}' pass: fix the code under test (do not weaken the assertion, skip or delete the test)"
    return f"fix the error thrown here, which makes the {runner} test '{title}' fail (do not weaken, skip or delete the test)"


_JEST_FRAME_LINE_RE = re.compile(r"^(?:>\s*)?\d+\s*\||^\|")


def _jest_message(lines: Sequence[str]) -> str:
    """The first message line, plus ``Expected``/``Received`` lines before the code frame."""
    if not lines:
        return "(no message)"
    parts = [lines[0]]
    for s in lines[1:]:
        if _JEST_FRAME_LINE_RE.match(s):
            break
        if re.match(r"^(?:Expected|Received)\b", s) and len(parts) < 3:
            parts.append(s)
    return "; ".join(parts)


def parse_jest(text: str, ctx: ParseContext) -> list[Finding]:
    """jest ``● Suite › test`` blocks: the message after the title, the first ``at …(path:l:c)``
    frame in the project's own code; ``● Test suite failed to run`` blocks."""
    out: list[Finding] = []
    suite: str | None = None
    block: dict[str, Any] | None = None

    def flush() -> None:
        if block is None:
            return
        title, at = block["title"], block["at"]
        suite_file = ctx.rel(block["suite"]) if block["suite"] else None
        msg = _jest_message(block["lines"])
        file, line = at if at else (suite_file, None)
        if title == "Test suite failed to run":
            out.append(Finding(f"test suite {suite_file or '?'} failed to run: {msg}",
                               "fix the error that stops the test file from loading (import path, syntax, missing module)",
                               file, line))
        else:
            out.append(Finding(f"test '{title}' failed: {msg}", _test_action("jest", title, at, suite_file), file, line))

    for raw in text.split("\n"):
        line = raw.rstrip()
        f = _JEST_FILE_RE.match(line)
        if f and not line.startswith("    "):
            flush()
            block, suite = None, f.group(1)
            continue
        b = _JEST_BLOCK_RE.match(line)
        if b:
            flush()
            block = {"title": b.group(1), "suite": suite, "lines": [], "at": None}
            continue
        if _JEST_END_RE.match(line.strip()):
            flush()
            block = None
            continue
        if block is None:
            continue
        a = _JEST_AT_RE.match(line)
        if a:
            if block["at"] is None and ctx.own(a.group(1)):
                block["at"] = (ctx.rel(a.group(1)), int(a.group(2)))
            continue
        if line.strip():
            block["lines"].append(line.strip())
    flush()
    return out


_VT_FAIL_RE = re.compile(r"^\s*FAIL\s+(\S+)(?:\s+>\s+(.+?))?(?:\s+\[\s*\S+\s*\])?\s*$")
_VT_FRAME_RE = re.compile(r"^\s*❯\s+(?:\S+\s+)?(\S+?):(\d+):(\d+)\s*$")
_VT_END_RE = re.compile(r"^\s*(?:⎯{3,}|Test Files\b|Tests\b\s+\d)")


def parse_vitest(text: str, ctx: ParseContext) -> list[Finding]:
    """vitest ``FAIL path > suite > test`` blocks: the first line after the header is the message,
    the first ``❯ [fn] path:l:c`` frame in the project's own code the location."""
    out: list[Finding] = []
    block: dict[str, Any] | None = None

    def flush() -> None:
        if block is None:
            return
        path, title = block["file"], block["title"]
        at = block["at"]
        msg = block["msg"] or "(no message)"
        test_file = ctx.rel(path)
        file, line = (at if at else (test_file, None))
        if title:
            out.append(Finding(f"test '{title}' failed: {msg}", _test_action("vitest", title, at, test_file), file, line))
        else:
            out.append(Finding(f"test file {test_file} failed: {msg}",
                               "fix the error that stops the test file from loading (import path, syntax, missing module)",
                               file, line))

    for raw in text.split("\n"):
        line = raw.rstrip()
        f = _VT_FAIL_RE.match(line)
        if f and (f.group(2) or "[" in line):
            flush()
            block = {"file": f.group(1), "title": (f.group(2) or "").strip(), "msg": "", "at": None}
            continue
        if block is None:
            continue
        if _VT_END_RE.match(line):
            flush()
            block = None
            continue
        fr = _VT_FRAME_RE.match(line)
        if fr:
            if block["at"] is None and ctx.own(fr.group(1)):
                block["at"] = (ctx.rel(fr.group(1)), int(fr.group(2)))
            continue
        s = line.strip()
        if s and not block["msg"]:
            block["msg"] = s
    flush()
    return out


# --- go ------------------------------------------------------------------------------------------

_GO_LINE_RE = re.compile(r"^(?:vet: )?((?:\./)?[^\s:][^:]*\.go):(\d+)(?::(\d+))?: (.+)$")
_GO_FAIL_RE = re.compile(r"^(\s*)--- FAIL: (\S+)")
_GO_TLOG_RE = re.compile(r"^\s+([\w.-]+\.go):(\d+): (.*)$")
_GO_PKG_END_RE = re.compile(r"^(?:FAIL|ok)\s+(\S+)(?:\s|$)")
_GO_PANIC_RE = re.compile(r"^panic: (.+?)(?: \[recovered\])?$")
_GO_FRAME_RE = re.compile(r"^\t(.+\.go):(\d+)(?: \+0x[0-9a-f]+)?$")
_GO_HINTS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^undefined: (\S+)"), "define or import `{0}` (check the spelling)"),
    (re.compile(r"imported and not used|imported but not used"), "remove the unused import"),
    (re.compile(r"declared and not used|declared but not used"), "use the variable or remove it"),
    (re.compile(r"^missing return"), "add the missing return statement"),
    (re.compile(r"^cannot use .+ as .+ value"), "convert the value to the expected type, or change the declared type"),
    (re.compile(r"too many arguments|not enough arguments"), "call it with the arguments its signature expects"),
    (re.compile(r"has no field or method"), "use a field or method the type has, or add it"),
    (re.compile(r"format %\S* has arg|wrong type|arg list ends with redundant newline|missing argument|possible formatting directive"),
     "make the format verbs and the arguments match"),
    (re.compile(r"unreachable code"), "remove the unreachable code"),
    (re.compile(r"passes lock by value"), "pass a pointer instead of copying the lock"),
]


def _go_relpkg(importpath: str, ctx: ParseContext) -> str:
    module = ctx.go_module()
    if not module:
        segs = importpath.split("/")
        module = "/".join(segs[:3]) if "." in segs[0] else segs[0]
    if importpath == module:
        return ""
    if importpath.startswith(module + "/"):
        return importpath[len(module) + 1:]
    return ""


def parse_go(text: str, ctx: ParseContext) -> list[Finding]:
    """go build / go vet (``./x.go:l:c: msg``, after ``# pkg``) and go test (``--- FAIL: TestX``
    with its ``x_test.go:l: msg`` lines, mapped to the package directory; panics)."""
    out: list[Finding] = []
    vet = bool(re.search(r"\bvet\b", f"{ctx.check_name} {ctx.cmd}", re.I))
    tool = "go vet finding" if vet else "Go compile error"
    pending: list[Finding] = []  # go test findings whose file needs the package directory
    test: str | None = None
    panic: str | None = None
    panic_done = False
    for raw in text.split("\n"):
        line = raw.rstrip()
        m = _GO_LINE_RE.match(line)
        if m:
            file, ln, _c, msg = m.groups()
            hint = None
            for rx, h in _GO_HINTS:
                hm = rx.search(msg)
                if hm:
                    hint = h.format(*hm.groups())
                    break
            action = _hinted(f"fix the {tool} at this line", hint, f"fix the {tool} at this line")
            out.append(Finding(msg.strip(), action, ctx.rel(file), int(ln)))
            continue
        f = _GO_FAIL_RE.match(line)
        if f:
            test, panic, panic_done = f.group(2), None, False
            continue
        t = _GO_TLOG_RE.match(line)
        if t and test:
            name, ln, msg = t.groups()
            pending.append(Finding(f"{test} failed: {msg.strip()}",
                                   f"make {test} pass: fix the code under test (do not weaken, skip or delete the test)",
                                   name, int(ln)))
            continue
        p = _GO_PANIC_RE.match(line)
        if p:
            panic, panic_done = p.group(1), False
            continue
        fr = _GO_FRAME_RE.match(line)
        if fr and panic and not panic_done and ctx.own(fr.group(1)):
            who = test or "the program"
            out.append(Finding(f"{who} panicked: {panic}",
                               f"fix the panic raised here (it makes {who} fail)", ctx.rel(fr.group(1)), int(fr.group(2))))
            panic_done = True
            continue
        e = _GO_PKG_END_RE.match(line)
        if e:
            d = _go_relpkg(e.group(1), ctx)
            for fd in pending:
                fd.file = f"{d}/{fd.file}" if d else fd.file
            out.extend(pending)
            pending, test, panic = [], None, None
    out.extend(pending)  # package line cut off: keep the bare file names
    return out


# --- cargo ---------------------------------------------------------------------------------------

_RS_HEAD_RE = re.compile(r"^(error|warning)(?:\[(\w+)\])?: (.+)$")
_RS_ARROW_RE = re.compile(r"^\s*--> (.+?):(\d+):(\d+)\s*$")
_RS_LINT_RE = re.compile(r"#\[(?:warn|deny|forbid)\(([\w:]+)\)\]|`-D ([\w:-]+)` implied")
_RS_HELP_RE = re.compile(r"^\s*(?:= )?help: (.+)$")
_RS_TEST_RE = re.compile(r"^---- (.+?) stdout ----$")
_RS_PANIC_NEW_RE = re.compile(r"^thread '([^']*)'(?: \(\d+\))? panicked at (.+?):(\d+):(\d+):$")
_RS_PANIC_OLD_RE = re.compile(r"^thread '([^']*)'(?: \(\d+\))? panicked at '(.*)', (.+?):(\d+):(\d+)$")
_RS_AT_RE = re.compile(r"^\s+at (.+?):(\d+):(\d+)$")
_RS_HINTS = {
    "E0061": "call it with the number of arguments it expects",
    "E0063": "add the missing struct fields",
    "E0277": "use a type that implements the required trait, or implement it",
    "E0282": "add a type annotation",
    "E0308": "make the expression's type match the expected type (convert it or correct the annotation)",
    "E0369": "use operand types the operator supports (or implement the operator trait)",
    "E0382": "do not use the value after it was moved (borrow or clone it, or restructure)",
    "E0384": "declare the variable `mut` or do not assign it twice",
    "E0425": "define or import the missing name (check the spelling)",
    "E0432": "fix the `use` path",
    "E0433": "fix the path or add the missing `use`",
    "E0499": "do not hold two mutable borrows at once",
    "E0502": "do not borrow mutably while an immutable borrow is alive",
    "E0599": "call a method that exists for this type, or import/implement the trait",
    "E0609": "use a field the type has",
    "unused_variables": "remove the variable, or prefix it with `_` if it is intentionally unused",
    "unused_imports": "remove the unused import",
    "unused_mut": "remove the `mut`",
    "dead_code": "remove the unused code, or use it",
    "unused_must_use": "handle the returned value (e.g. the Result)",
}


def _rs_action(code: str | None, severity: int, help_: str | None) -> str:
    hint = _RS_HINTS.get(code or "")
    if code and code.startswith("clippy::"):
        return f"fix {code} at this line: apply clippy's suggestion" + (f" ({help_})" if help_ else "")
    if code and hint:
        return f"fix {code} at this line: {hint}"
    extra = f" (rustc: {help_})" if help_ else ""
    if severity == ERROR:
        tail = f" (`rustc --explain {code}`)" if code and code.startswith("E") else ""
        return f"fix the Rust compile error at this line{tail}{extra}"
    return f"fix the warning at this line{extra}"


def parse_cargo(text: str, ctx: ParseContext) -> list[Finding]:
    """cargo build/check/clippy diagnostics (``error[E…]: msg`` / ``warning: msg`` + `` --> path:l:c``)
    and cargo test panics (``---- name stdout ----`` + ``thread … panicked at path:l:c:`` + message)."""
    out: list[Finding] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i].rstrip()
        h = _RS_HEAD_RE.match(line)
        if h:
            sev_s, code, msg = h.groups()
            arrow = None
            for j in range(i + 1, min(i + 4, len(lines))):
                arrow = _RS_ARROW_RE.match(lines[j].rstrip())
                if arrow or _RS_HEAD_RE.match(lines[j]):
                    break
            if arrow:
                lint = None
                help_ = None
                k = i + 1
                while k < len(lines) and not _RS_HEAD_RE.match(lines[k]) and k < i + 40:
                    body = lines[k]
                    lm = _RS_LINT_RE.search(body)
                    if lm and lint is None:
                        lint = (lm.group(1) or lm.group(2)).replace("-", "_")
                    hm = _RS_HELP_RE.match(body)
                    if hm and help_ is None and "for further information visit" not in hm.group(1) \
                            and "to override" not in hm.group(1):
                        help_ = hm.group(1).strip().rstrip(":")
                    k += 1
                severity = ERROR if sev_s == "error" else WARNING
                tag = code or lint
                if lint and lint.startswith("clippy::"):
                    tag = lint
                issue = f"{tag}: {msg.strip()}" if tag else msg.strip()
                out.append(Finding(issue, _rs_action(tag, severity, help_), ctx.rel(arrow.group(1)), int(arrow.group(2)), severity))
            i += 1
            continue
        top = _RS_PANIC_NEW_RE.match(line) or _RS_PANIC_OLD_RE.match(line)
        if top:  # a panic outside a test block (cargo run, a build script)
            if top.re is _RS_PANIC_NEW_RE:
                path, ln = top.group(2), int(top.group(3))
                nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
                msg = nxt if nxt and not nxt.startswith("note:") else "(no panic message)"
            else:
                msg, path, ln = top.group(2), top.group(3), int(top.group(4))
            if ctx.own(path):
                out.append(Finding(f"thread '{top.group(1)}' panicked: {msg}", "fix the panic raised at this line",
                                   ctx.rel(path), ln))
            i += 1
            continue
        t = _RS_TEST_RE.match(line)
        if t:
            name = t.group(1)
            where: tuple[str, int] | None = None
            msg_lines: list[str] = []
            j = i + 1
            while j < len(lines) and not _RS_TEST_RE.match(lines[j].rstrip()) and lines[j].strip() != "failures:":
                cur = lines[j].rstrip()
                pn = _RS_PANIC_NEW_RE.match(cur)
                po = _RS_PANIC_OLD_RE.match(cur)
                if pn:
                    path, ln = pn.group(2), int(pn.group(3))
                    k = j + 1
                    while k < len(lines) and lines[k].strip() and not lines[k].startswith(("note:", "stack backtrace:")):
                        msg_lines.append(lines[k].strip())
                        k += 1
                elif po:
                    msg_lines.append(po.group(2))
                    path, ln = po.group(3), int(po.group(4))
                if (pn or po) and ctx.own(path):
                    where = (ctx.rel(path), ln)
                a = _RS_AT_RE.match(cur)
                if a and where is None and ctx.own(a.group(1)):
                    where = (ctx.rel(a.group(1)), int(a.group(2)))
                j += 1
            msg = "; ".join(msg_lines[:4]) or "(no panic message)"
            out.append(Finding(f"test {name} failed: {msg}",
                               f"make test {name} pass: fix the code under test (do not weaken the assertion, ignore or delete the test)",
                               where[0] if where else None, where[1] if where else None))
            i = j
            continue
        i += 1
    return out


# --- git diff --check ----------------------------------------------------------------------------

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


# --- diffstat (the analysis) ---------------------------------------------------------------------


def collect_diffstat(report: Mapping[str, Any]) -> list[Finding]:
    """Big files, lockfiles and TODO / console / secret-like signals (20-acceptance §6, English)."""
    a = report.get("analysis") or {}
    out: list[Finding] = []
    for entry in a.get("bigFileChanges") or []:
        out.append(Finding("single-file change too large (>500 lines)",
                           "split the change or confirm such a large change is really necessary",
                           str(entry).replace("\\", "/"), severity=INFO))
    for f in [*(a.get("changedFiles") or []), *(a.get("untrackedFiles") or [])]:
        if LOCKFILE_RE.search(f):
            out.append(Finding("lockfile modified",
                               "confirm the dependency change is intended; revert the lockfile if it is not",
                               f, severity=INFO))
    sig = a.get("signals") or {}
    if (sig.get("todo") or 0) > 0:
        out.append(Finding(f"added/changed lines contain TODO/FIXME/HACK ({sig['todo']} hit(s))",
                           "implement or remove these to-do markers", severity=INFO))
    if (sig.get("consoleDebug") or 0) > 0:
        out.append(Finding(f"added/changed lines contain console.log/debugger ({sig['consoleDebug']} hit(s))",
                           "remove the debug output", severity=INFO))
    if (sig.get("secretLike") or 0) > 0:
        out.append(Finding(f"added/changed lines contain secret/token-like literals ({sig['secretLike']} hit(s))",
                           "read them from environment variables or configuration; never hard-code credentials",
                           severity=INFO))
    return out


# --- the registry --------------------------------------------------------------------------------


def _argv(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.I)


DEFAULT_REGISTRY: tuple[OutputParser | ReportSource, ...] = (
    OutputParser("tsc", parse_tsc, _argv(r"\b(?:vue-)?tsc\b|--noEmit|typecheck|type-check"),
                 re.compile(r"\berror\s+TS\d+:")),
    OutputParser("eslint", parse_eslint, _argv(r"\beslint\b|\blint\b"),
                 re.compile(r"^\s+\d+:\d+\s+(?:error|warning)\s+\S|\[(?:Error|Warning)(?:/[^\]]+)?\]$"
                            r"|: line \d+, col \d+, (?:Error|Warning) - ", re.M)),
    OutputParser("ruff", parse_ruff, _argv(r"\bruff\b"),
                 re.compile(rf"^\S.*?:\d+:\d+: {_RUFF_CODE}:? |^{_RUFF_CODE}:? .*\n\s*--> ", re.M)),
    OutputParser("mypy", parse_mypy, _argv(r"\b[d]?mypy\b"),
                 re.compile(r"^\S.*?\.pyi?:\d+(?::\d+)?: error: ", re.M)),
    OutputParser("pytest", parse_pytest, _argv(r"\bpytest\b|\bpy\.test\b"),
                 re.compile(r"^(?:FAILED|ERROR) \S+\.py|^={3,} (?:FAILURES|ERRORS|short test summary info) ={3,}$", re.M)),
    OutputParser("jest", parse_jest, _argv(r"\bjest\b"), re.compile(r"^\s*● \S", re.M)),
    OutputParser("vitest", parse_vitest, _argv(r"\bvitest\b"),
                 re.compile(r"^\s*FAIL\s+\S+\s+>\s|^\s*❯\s+(?:\S+\s+)?\S+:\d+:\d+\s*$", re.M)),
    OutputParser("go", parse_go, _argv(r"(?:^|[\s/])go\s+(?:build|vet|test|run|install)\b|golangci-lint|staticcheck"),
                 re.compile(r"^(?:vet: )?(?:\./)?\S+\.go:\d+(?::\d+)?: |^\s*--- FAIL: ", re.M)),
    OutputParser("cargo", parse_cargo, _argv(r"\bcargo\b|\brustc\b|\bclippy\b"),
                 re.compile(r"^\s*--> \S+\.rs:\d+:\d+|^---- .+ stdout ----$|panicked at ", re.M)),
    OutputParser("git-diff-check", parse_git_diff_check, _argv(r"git-diff-check|git\s+diff\s+--check"),
                 re.compile(_GITDIFF_RE.pattern, re.M)),
    ReportSource("diffstat", collect_diffstat),
)


def _checks(report: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [c for c in report.get("checks") or [] if not c.get("passed") and not c.get("skipped")]


def _interleave(ranked: list[tuple[int, int, str, Finding]]) -> list[Finding]:
    """Rank order (errors, warnings, signals); within a rank, round-robin over the (check, source)
    groups so that the first lines of the feedback cover every failing check, not just the noisiest."""
    ranked = sorted(ranked, key=lambda t: (t[0], t[1]))
    out: list[Finding] = []
    i = 0
    while i < len(ranked):
        j = i
        groups: dict[str, list[Finding]] = {}
        while j < len(ranked) and ranked[j][0] == ranked[i][0]:
            groups.setdefault(ranked[j][2], []).append(ranked[j][3])
            j += 1
        queues = list(groups.values())
        for k in range(max(len(q) for q in queues)):
            out.extend(q[k] for q in queues if k < len(q))
        i = j
    return out


def extract_directives(
    report: Mapping[str, Any],
    registry: Sequence[OutputParser | ReportSource] = DEFAULT_REGISTRY,
    max_items: int = MAX_ITEMS,
) -> dict[str, Any]:
    """Structured repair directives of a failed round. Never raises.

    Args:
        report: the round's report (``checks``, ``analysis``, ``projectPath``).
        registry: the sources, in order (:data:`DEFAULT_REGISTRY`).
        max_items: cap on the items kept.

    Returns:
        ``{"items": [{file?, line?, issue, action, source}], "sources": [ids with ≥1 kept item, in
        registry order], "fallbackReason"?: str, "omitted"?: int}``: ``fallbackReason`` only when
        there is no item, ``omitted`` only when the cap dropped items.

    Example:
        >>> r = {"projectPath": "/p", "checks": [{"name": "lint", "cmd": "ruff check .", "passed": False,
        ...      "outputTail": "a.py:1:8: F401 [*] `os` imported but unused"}]}
        >>> extract_directives(r)["items"][0]["action"]
        'fix ruff F401 at this line: remove the unused import'
    """
    project = str(report.get("projectPath") or "")
    ranked: list[tuple[int, int, str, Finding]] = []  # (rank, seq, group, finding)
    errors: list[str] = []
    seq = 0
    checks = _checks(report)
    for ci, c in enumerate(checks):
        name, cmd = str(c.get("name") or ""), str(c.get("cmd") or "")
        text = strip_ansi(str(c.get("outputTail") or ""))
        if not text.strip():
            continue
        optional = 1 if c.get("optional") else 0
        for src in registry:
            if not isinstance(src, OutputParser):
                continue
            try:
                if not src.applies(name, cmd, text):
                    continue
                got = src.parse(text, ParseContext(project=project, check_name=name, cmd=cmd))
            except Exception as exc:  # noqa: BLE001 - one broken parser must not sink the others
                errors.append(f"{src.id} on check '{name}': {type(exc).__name__}: {exc}")
                continue
            for f in got:
                f.source = src.id
                ranked.append((f.severity + optional, seq, f"{ci}:{src.id}", f))
                seq += 1
    for src in registry:
        if not isinstance(src, ReportSource):
            continue
        try:
            got = src.collect(report)
        except Exception as exc:  # noqa: BLE001
            errors.append(f"{src.id}: {type(exc).__name__}: {exc}")
            continue
        for f in got:
            f.source = src.id
            ranked.append((f.severity, seq, src.id, f))
            seq += 1
    if errors:
        log.warning("repair directive parsers failed: %s", "; ".join(errors))
    items: list[dict[str, Any]] = []
    seen: set[tuple[Any, Any, str]] = set()
    for f in _interleave(ranked):
        item = f.to_item()
        key = (item.get("file"), item.get("line"), item["issue"])
        if key in seen:
            continue
        seen.add(key)
        items.append(item)
    omitted = max(0, len(items) - max_items)
    items = items[:max_items]
    used = {i["source"] for i in items}
    out: dict[str, Any] = {"items": items, "sources": [s.id for s in registry if s.id in used]}
    if not items:
        if errors:
            out["fallbackReason"] = f"structured extraction failed ({'; '.join(errors)})"
        elif any(str(c.get("outputTail") or "").strip() for c in checks):
            out["fallbackReason"] = NO_ITEMS_REASON
        else:
            out["fallbackReason"] = NO_OUTPUT_REASON
    if omitted:
        out["omitted"] = omitted
    return out
