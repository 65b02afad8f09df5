"""Go: the ``go test ./...`` check of a module, counts of ``go test`` (plain and ``-v``), its
zero-test rules, and repair directives for build/vet lines, ``--- FAIL: TestX`` with its
``x_test.go:l:`` lines (mapped to the package directory) and panics.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ._files import walk_files
from .base import (
    CountFormat,
    Derived,
    Finding,
    ParseContext,
    TestCounts,
    TestInfra,
    Toolchain,
    hinted,
    read_small,
    unique_ids,
    when_file,
)
from .formats.go_json import go_json_console, go_json_zero, parse_go_json

_GO_PKG = re.compile(r"^(ok|FAIL|\?)[ ]*\t(\S+)(?:[\t ](.*))?$", re.M)
_GO_WARN_NONE = re.compile(r"testing: warning: no tests to run", re.I)
_GO_RAN = re.compile(r"^\s*--- (?:PASS|FAIL|SKIP):", re.M)

def _go_zero(text: str) -> bool:
    pkgs = _GO_PKG.findall(text)
    if pkgs:
        for status, _pkg, rest in pkgs:
            if status == "?" and "[no test files]" in rest:
                continue
            if status == "ok" and "[no tests to run]" in rest:
                continue
            return False
        return True
    return bool(_GO_WARN_NONE.search(text)) and not _GO_RAN.search(text)


_GO_RESULT = re.compile(r"^( *)--- (PASS|FAIL|SKIP): (\S+) \(")
_GO_PKG_LINE = re.compile(r"^(ok|FAIL|\?)[ ]*\t(\S+)(?:[\t ](.*))?$")


def _parse_go(text: str) -> TestCounts | None:
    lines = text.split("\n")
    if not any(_GO_PKG_LINE.match(x) or _GO_RESULT.match(x) for x in lines) and not _GO_WARN_NONE.search(text):
        return None
    counts = TestCounts("go")
    failed_ids: list[str] = []
    passed_ids: list[str] = []
    pending: list[tuple[str, str]] = []  # (status, name) since the last package line

    def flush(pkg: str) -> bool:
        names = [n for _, n in pending]
        leaves = [(s, n) for s, n in pending if not any(o.startswith(n + "/") for o in names)]
        seen: set[str] = set()
        for status, name in leaves:
            if name in seen:
                continue
            seen.add(name)
            ident = f"{pkg}/{name}" if pkg else name
            if status == "PASS":
                counts.passed += 1
                passed_ids.append(ident)
            elif status == "FAIL":
                counts.failed += 1
                failed_ids.append(ident)
            else:
                counts.skipped += 1
        had = bool(pending)
        pending.clear()
        return had

    for line in lines:
        rm = _GO_RESULT.match(line)
        if rm:
            pending.append((rm.group(2), rm.group(3)))
            continue
        pm = _GO_PKG_LINE.match(line)
        if not pm:
            continue
        status, pkg, rest = pm.group(1), pm.group(2), pm.group(3) or ""
        if status == "?":
            continue
        if "[build failed]" in rest or "[setup failed]" in rest:
            pending.clear()
            counts.errors += 1
            failed_ids.append(pkg)
            continue
        had_tests = flush(pkg)
        if had_tests:
            continue
        if status == "ok" and "[no tests to run]" not in rest:
            counts.passed += 1  # no -v: a passing package is one unit
            passed_ids.append(pkg)
        elif status == "FAIL":
            counts.errors += 1  # failed without a failing test: panic, timeout, TestMain
            failed_ids.append(pkg)
    flush("")
    counts.failed_ids = unique_ids(failed_ids)
    counts.passed_ids = unique_ids(passed_ids)
    return counts


_GO_LINE_RE = re.compile(r"^(?:vet: )?((?:\./)?[^\s:][^:]*\.go):(\d+)(?::(\d+))?: (.+)$")
_GO_FAIL_RE = re.compile(r"^(\s*)--- (FAIL|PASS|SKIP): (\S+)")
_GO_RUN_RE = re.compile(r"^=== (RUN|CONT|NAME|PAUSE) +(\S+)")
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


_MODULE_LINE = re.compile(r"^\s*module\s+\"?([^\s\"]+)", re.M)


def _go_modules(ctx: ParseContext) -> list[tuple[str, str]]:
    """``(module path, project-relative directory)`` of the project's ``go.mod`` files: the root's
    (:meth:`ParseContext.go_module`), else those found below it (a monorepo whose check runs
    ``cd svc && go test ./...``), longest module path first. Bounded search; never raises."""
    root = ctx.go_module()
    if root or not ctx.project:
        return [(root, "")] if root else []
    found: list[tuple[str, str]] = []
    base = Path(ctx.project)
    for path in walk_files(base, lambda name: name == "go.mod", max_depth=4, max_entries=5000):
        text = read_small(path, 64 << 10) or ""
        m = _MODULE_LINE.search(text)
        if m:
            found.append((m.group(1), path.parent.relative_to(base).as_posix()))
    return sorted(found, key=lambda mod: -len(mod[0]))


def _go_relpkg(importpath: str, ctx: ParseContext, modules: list[tuple[str, str]]) -> str:
    """The project-relative directory of a Go package (``""``: the root or unknown)."""
    for module, directory in modules:
        if importpath == module or importpath.startswith(module + "/"):
            rest = importpath[len(module) + 1:]
            return "/".join(p for p in (directory, rest) if p)
    if modules:
        return ""
    segs = importpath.split("/")
    module = "/".join(segs[:3]) if "." in segs[0] else segs[0]
    return importpath[len(module) + 1:] if importpath.startswith(module + "/") else ""


def parse_go(text: str, ctx: ParseContext) -> list[Finding]:
    """go build / go vet (``./x.go:l:c: msg``, after ``# pkg``) and go test (``--- FAIL: TestX``
    with its ``x_test.go:l: msg`` lines, mapped to the package directory; panics).

    Test logs are read in both layouts: without ``-v`` they follow their ``--- FAIL: TestX`` line;
    with ``-v`` (and ``-json``, whose ``Output`` fields are the ``-v`` text: :func:`go_json_console`)
    they follow ``=== RUN|CONT|NAME TestX`` and count only when ``--- FAIL: TestX`` comes later,
    so a passing or skipped test's log is never blamed on another test."""
    console = go_json_console(text)
    failed_only: set[str] | None = None  # -json: only tests whose events say they failed
    if console is not None:
        text, failed_only = console
    out: list[Finding] = []
    modules: list[tuple[str, str]] | None = None  # read when the first package line needs them
    vet = bool(re.search(r"\bvet\b", f"{ctx.check_name} {ctx.cmd}", re.I))
    tool = "go vet finding" if vet else "Go compile error"
    pending: list[Finding] = []  # go test findings whose file needs the package directory
    test: str | None = None  # the failed test whose log lines follow (no -v)
    running: str | None = None  # the test whose log lines follow (-v: === RUN/CONT/NAME)
    logs: dict[str, list[Finding]] = {}  # -v: log lines of tests whose verdict has not come yet
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
            action = hinted(f"fix the {tool} at this line", hint, f"fix the {tool} at this line")
            out.append(Finding(msg.strip(), action, ctx.rel(file), int(ln)))
            continue
        f = _GO_FAIL_RE.match(line)
        if f:
            verdict, name = f.group(2), f.group(3)
            logged = logs.pop(name, [])
            running = None
            if verdict == "FAIL" and (failed_only is None or name in failed_only):
                pending.extend(logged)
                test, panic, panic_done = name, None, False
            else:
                test = None
            continue
        r = _GO_RUN_RE.match(line)
        if r:
            running, test = (None if r.group(1) == "PAUSE" else r.group(2)), None
            continue
        t = _GO_TLOG_RE.match(line)
        if t and (test or running):
            who = test or running
            file, ln, msg = t.groups()
            found = Finding(f"{who} failed: {msg.strip()}",
                            f"make {who} pass: fix the code under test (do not weaken, skip or delete the test)",
                            file, int(ln))
            (pending if test else logs.setdefault(str(running), [])).append(found)
            continue
        p = _GO_PANIC_RE.match(line)
        if p:
            panic, panic_done = p.group(1), False
            continue
        fr = _GO_FRAME_RE.match(line)
        if fr and panic and not panic_done and ctx.own(fr.group(1)) and not fr.group(1).endswith("_testmain.go"):
            who = test or running or "the program"
            out.append(Finding(f"{who} panicked: {panic}",
                               f"fix the panic raised here (it makes {who} fail)", ctx.rel(fr.group(1)), int(fr.group(2))))
            panic_done = True
            continue
        e = _GO_PKG_END_RE.match(line)
        if e:
            if modules is None:
                modules = _go_modules(ctx)
            d = _go_relpkg(e.group(1), ctx, modules)
            for fd in pending:
                fd.file = f"{d}/{fd.file}" if d else fd.file
            out.extend(pending)
            pending, test, running, panic = [], None, None, None
            logs.clear()
    out.extend(pending)  # package line cut off: keep the bare file names
    return out



def _id_argv(argv: list[str]) -> list[str]:
    """``-v`` after ``go test`` (every test's ``--- PASS: TestX`` line)."""
    for i in range(len(argv) - 1):
        if os.path.basename(argv[i]) == "go" and argv[i + 1] == "test":
            return [*argv[: i + 2], "-v", *argv[i + 2 :]]
    return list(argv)


INFRA = TestInfra(
    files=("*_test.go", "**/testdata/**"),
    aware=(re.compile(r"\btesting\.(?:Testing|Short|Verbose)\(\)|^\s*(?:import\s+)?\"testing\"|flag\.Lookup\(\s*\"test\."),),
    aware_files=("*.go",),
    id_argv=_id_argv,
)
"""Go's test infrastructure: ``_test.go`` files (in-package tests are files of their own, so the
package's sources stay the agent's) and ``testdata`` (docs/integrity.md)."""

TOOLCHAIN = Toolchain(
    id="go",
    order=90,
    detect=when_file("go.mod", Derived("go-test", ("go", "test", "./..."))),  # port: mandatory, like pytest
    test_command=re.compile(r"\bgo\s+test\b"),
    hint=re.compile(r"\bgo\s+test\b"),
    hint_formats=("go-json", "go"),  # -json first: a Go 1.19 build failure is also a plain FAIL line
    formats=(CountFormat("go-json", parse_go_json, 55, whole_lines=True), CountFormat("go", _parse_go, 60)),
    zero=lambda text: _go_zero(text) or go_json_zero(text),
    directive_argv=re.compile(r"(?:^|[\s/])go\s+(?:build|vet|test|run|install)\b|golangci-lint|staticcheck", re.I),
    shape=re.compile(r"^(?:vet: )?(?:\./)?\S+\.go:\d+(?::\d+)?: |^\s*--- FAIL: |^\{\"(?:Time\":\"[^\"]*\",\")?"
                     r"(?:Action|ImportPath)\":", re.M),
    directives=parse_go,
    infra=INFRA,
)
