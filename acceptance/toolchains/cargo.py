"""Cargo: the ``cargo test`` check of a crate, counts of libtest's output (``running N tests``,
``test result: …``), its zero-test rule, and repair directives for rustc/clippy diagnostics
(``error[E0425]: …`` + ``--> src/x.rs:l:c``) and test panics.
"""

from __future__ import annotations

import re

from .base import (
    ERROR,
    WARNING,
    CountFormat,
    Derived,
    Finding,
    ParseContext,
    TestCounts,
    TestInfra,
    Toolchain,
    when_file,
)
from .formats.nextest import parse_nextest

_CARGO_RUNNING = re.compile(r"^running (\d+) tests?\s*$", re.M)

_CARGO_RESULT = re.compile(
    r"^test result: (?:ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored(?:; (\d+) measured)?(?:; (\d+) filtered out)?",
    re.M,
)
_CARGO_TEST = re.compile(r"^test (.+?) \.\.\. (ok|FAILED|ignored(?:, .*)?)\s*$", re.M)
_CARGO_NO_COMPILE = re.compile(r"^error: could not compile `", re.M)


def _parse_cargo(text: str, hinted: bool = False) -> TestCounts | None:
    results = _CARGO_RESULT.findall(text)
    compile_errors = len(_CARGO_NO_COMPILE.findall(text))
    if not results and not _CARGO_RUNNING.search(text) and not (hinted and compile_errors):
        return None
    failed_ids: list[str] = []
    passed_ids: list[str] = []
    for name, status in _CARGO_TEST.findall(text):
        if status == "ok":
            passed_ids.append(name)
        elif status == "FAILED":
            failed_ids.append(name)
    if compile_errors:
        failed_ids += re.findall(r"^error: could not compile `([^`]+)`", text, re.M)
    return TestCounts(
        "cargo",
        passed=sum(int(r[0]) for r in results),
        failed=sum(int(r[1]) for r in results),
        skipped=sum(int(r[2]) for r in results),
        errors=compile_errors,
        failed_ids=failed_ids,
        passed_ids=passed_ids,
    )


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


def _zero(text: str) -> bool:
    """At least one ``running 0 tests`` and no ``running N tests`` with N > 0."""
    running = [int(n) for n in _CARGO_RUNNING.findall(text)]
    return bool(running) and all(n == 0 for n in running)



_CFG_TEST = re.compile(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{")


def rust_test_modules(text: str) -> list[tuple[int, int]]:
    """Character spans of the ``#[cfg(test)] mod name { … }`` blocks of a Rust source (attribute
    to closing brace). Braces inside strings, chars and comments are skipped; an unclosed block
    runs to the end of the text."""
    spans: list[tuple[int, int]] = []
    pos = 0
    while (m := _CFG_TEST.search(text, pos)) is not None:
        end = _close_brace(text, m.end())
        spans.append((m.start(), end))
        pos = end
    return spans


def _close_brace(text: str, i: int) -> int:
    depth, n = 1, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
            continue
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c == "'" and i + 2 < n and (text[i + 2] == "'" or text[i + 1] == "\\"):
            j = text.find("'", i + 2)
            i = n if j < 0 else j
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return n


INFRA = TestInfra(
    files=("**/tests/**", "**/benches/**", "Cargo.toml", ".cargo/config", ".cargo/config.toml", "build.rs"),
    embedded_files=("*.rs",),
    embedded=rust_test_modules,
    aware=(re.compile(r"cfg!\s*\(\s*(?:not\s*\(\s*)?test\b|#\[cfg\((?:not\()?test\)\]|#\[cfg_attr\(\s*test\b"
                      r"|RUST_TEST_THREADS|std::env::args\(\)[^\n]*--test"),),
    aware_files=("*.rs",),
)
"""Cargo's test infrastructure: ``tests/`` and ``benches/``, the manifest (``[[test]]``,
``harness``, ``test = false``), ``.cargo/config`` (a ``runner``), ``build.rs``, and the
``#[cfg(test)]`` modules inside the sources (docs/integrity.md)."""

TOOLCHAIN = Toolchain(
    id="cargo",
    order=100,
    detect=when_file("Cargo.toml", Derived("cargo-test", ("cargo", "test"))),  # port: mandatory, like pytest
    test_command=re.compile(r"\bcargo\s+test\b"),
    hint=re.compile(r"\bcargo\s+(?:test|nextest)\b"),
    # nextest first: it repeats a failing test's captured libtest summary inside its own output
    hint_formats=("nextest", "cargo"),
    formats=(CountFormat("nextest", parse_nextest, 45),
             CountFormat("cargo", lambda text: _parse_cargo(text, False), 50,
                         hinted=lambda text: _parse_cargo(text, True))),
    zero=_zero,
    directive_argv=re.compile(r"\bcargo\b|\brustc\b|\bclippy\b", re.I),
    shape=re.compile(r"^\s*--> \S+\.rs:\d+:\d+|^---- .+ stdout ----$|panicked at ", re.M),
    directives=parse_cargo,
    infra=INFRA,
)
