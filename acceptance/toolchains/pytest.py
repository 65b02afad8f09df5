"""pytest: the ``pytest -q`` check of a Python project, its counts (``-q``, ``-v``, ``-rA``, and
pytest-xdist's ``-n N -v`` lines ``[gw0] [ 33%] PASSED <id>``, recorded in
``tests/data/toolchains/pytest/``: xdist prints the summary as without it), its zero-test rules and its repair directives (``FAILED``/``ERROR`` summary lines joined with the
failure sections, ``--tb=line`` locations, collection errors).

Sources: docs/acceptance.md §2.3 (derived check, extended), §3.2 (zero tests), §6 (directives).
"""

from __future__ import annotations

import os
import re
import tomllib
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from ...core.i18n import _
from .base import (
    CountFormat,
    Derived,
    Detection,
    Finding,
    ParseContext,
    TestCounts,
    TestInfra,
    Toolchain,
    read_small,
)

_PYTEST_COLLECTED0 = re.compile(r"\bcollected 0 items\b", re.I)
_PYTEST_RAN = re.compile(r"\b\d+ (?:passed|failed|errors?|xfailed|xpassed)\b", re.I)
_PYTEST_SUMMARY = re.compile(
    r"^(?:=+ )?((?:\d+ \w+)(?:, \d+ \w+)*|no tests ran) in [\d.]+s(?: \(\d+:\d\d:\d\d\))?(?: =+)?[ \t]*$", re.M
)

XDIST_RESULT = re.compile(
    r"^\[gw\d+\] \[ {0,2}\d{1,3}%\] (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) ([^\n]+)$", re.M
)
"""One verbose pytest-xdist result line: ``[gw0] [ 33%] PASSED tests/test_calc.py::test_add``."""
_PYTEST_SHORT = re.compile(r"^(PASSED|FAILED|ERROR|XPASS|XFAIL) (.+?)(?: - .*)?$", re.M)
_PYTEST_VERBOSE = re.compile(
    r"^(\S[^\n]*?::[^\n]*?) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)(?: \([^\n]*\))?(?:\s+\[\s*\d+%\])?[ \t]*$", re.M
)


def _parse_pytest(text: str) -> TestCounts | None:
    summaries = _PYTEST_SUMMARY.findall(text)
    if not summaries:
        return None
    body = summaries[-1]
    c: dict[str, int] = {}
    for n, kind in re.findall(r"(\d+) (\w+)", body):
        c[kind.lower()] = c.get(kind.lower(), 0) + int(n)
    if body != "no tests ran" and not c.keys() & {
        "passed", "failed", "error", "errors", "skipped", "xfailed", "xpassed", "deselected", "warning", "warnings"
    }:
        return None
    failed_ids: list[str] = []
    passed_ids: list[str] = []
    for m in _PYTEST_VERBOSE.finditer(text):
        if m.group(2) in ("FAILED", "ERROR"):
            failed_ids.append(m.group(1))
        elif m.group(2) in ("PASSED", "XPASS"):
            passed_ids.append(m.group(1))
    for pattern in (XDIST_RESULT, _PYTEST_SHORT):
        for m in pattern.finditer(text):
            if m.group(1) in ("FAILED", "ERROR"):
                failed_ids.append(m.group(2).split(" - ", 1)[0].strip())
            elif m.group(1) in ("PASSED", "XPASS"):
                passed_ids.append(m.group(2).strip())
    return TestCounts(
        "pytest",
        passed=c.get("passed", 0) + c.get("xpassed", 0),
        failed=c.get("failed", 0),
        skipped=c.get("skipped", 0) + c.get("xfailed", 0),
        errors=c.get("error", 0) + c.get("errors", 0),
        failed_ids=failed_ids,
        passed_ids=passed_ids,
    )


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
    # queues of sections by name, and by (name, a file it ran); a used section is skipped when it
    # comes up, so each is passed over at most once per queue: linear in the output (the same
    # test name can stand thousands of times in a long log)
    by_name: dict[str, deque[_PtSection]] = {}
    by_file: dict[tuple[str, str], deque[_PtSection]] = {}
    for one in sections:
        by_name.setdefault(one.name, deque()).append(one)
        for f in {ctx.rel(f) for f, _n in one.locs}:
            by_file.setdefault((one.name, f), deque()).append(one)
    used: set[int] = set()

    def first_unused(queue: deque[_PtSection] | None) -> _PtSection | None:
        while queue and id(queue[0]) in used:
            queue.popleft()
        return queue[0] if queue else None

    def find(name: str, test_file: str) -> _PtSection | None:
        # the same test name in two files: prefer the section that ran this file
        return first_unused(by_file.get((name, test_file))) or first_unused(by_name.get(name))

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
    failed_idx = {k: i for i, k in enumerate(k for k, s in enumerate(summary) if s[0] == "FAILED")}
    for k, ((kind, nodeid, msg), got) in enumerate(zip(summary, matched, strict=True)):
        test_file = ctx.rel(nodeid.split("::")[0])
        where: tuple[str, int] | None = None
        # the section's own message first: pytest cuts summary lines to the terminal width ("...")
        if got is not None:
            where = pick(got.locs)
            msg = got.message or msg
        elif kind == "FAILED" and tb_line and len(tb_line) == len(failed_idx):
            f, n, m2 = tb_line[failed_idx[k]]
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


def _zero(text: str) -> bool:
    """``collected 0 items`` with no ``N passed/failed/error``; or a last summary line made only of
    ``deselected``/``warnings`` counts."""
    if _PYTEST_COLLECTED0.search(text) and not _PYTEST_RAN.search(text):
        return True
    summaries = _PYTEST_SUMMARY.findall(text)
    if summaries:
        kinds = {m.group(2).lower() for m in re.finditer(r"(\d+) (\w+)", summaries[-1])}
        if kinds and kinds <= {"deselected", "warning", "warnings"}:
            return True
    return False


def _has_ini_section(path: Path, section: str) -> bool:
    text = read_small(path)
    if text is None:
        return False
    return re.search(rf"^\s*\[{re.escape(section)}\]\s*$", text, re.M) is not None


def _pyproject_has_pytest(path: Path) -> bool:
    text = read_small(path)
    if text is None:
        return False
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return re.search(r"^\s*\[tool\.pytest\.ini_options\]\s*$", text, re.M) is not None
    tool = data.get("tool")
    return isinstance(tool, dict) and isinstance(tool.get("pytest"), dict) and "ini_options" in tool["pytest"]


def _tests_dir_has_tests(tests: Path, max_entries: int = 2000) -> bool:
    if not tests.is_dir():
        return False
    seen = 0
    for root, dirs, files in os.walk(tests):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("node_modules", "__pycache__")]
        for name in files:
            seen += 1
            if name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py")):
                return True
            if seen >= max_entries:
                return False
    return False


def detect_pytest(project: str | os.PathLike[str]) -> str | None:
    """Return why the project is a pytest project (a short English reason), or None.

    Checked in order: ``pytest.ini``, ``pyproject.toml [tool.pytest.ini_options]``,
    ``setup.cfg [tool:pytest]``, ``tox.ini [pytest]``, ``tests/`` holding ``test_*.py``/``*_test.py``.
    """
    root = Path(project)
    if (root / "pytest.ini").is_file():
        return "pytest.ini"
    if _pyproject_has_pytest(root / "pyproject.toml"):
        return "pyproject.toml [tool.pytest.ini_options]"
    if _has_ini_section(root / "setup.cfg", "tool:pytest"):
        return "setup.cfg [tool:pytest]"
    if _has_ini_section(root / "tox.ini", "pytest"):
        return "tox.ini [pytest]"
    if _tests_dir_has_tests(root / "tests"):
        return "tests/ contains test_*.py"
    return None


_VENV_DIRS = (".venv", "venv", "env")


def _project_venv_pytest(root: Path) -> str | None:
    """port: ``<project>/{.venv,venv,env}/bin/pytest`` (``Scripts/pytest.exe`` on Windows) when
    present, so the project's own dependencies are importable; None otherwise."""
    for d in _VENV_DIRS:
        for rel in (("bin", "pytest"), ("Scripts", "pytest.exe")):
            cand = root / d / rel[0] / rel[1]
            if cand.is_file() and os.access(cand, os.X_OK):
                return str(cand)
    return None


def _detect(root: Path, already: Sequence[Derived]) -> Detection:
    """A pytest project (:func:`detect_pytest`) → ``pytest -q``, **mandatory** (port: the project's
    ``.venv``/``venv``/``env`` pytest when present)."""
    why = detect_pytest(root)
    if why is None:
        return [], []
    exe = _project_venv_pytest(root)
    notes = [_("Python tests detected ({why}): pytest -q is a mandatory check.").format(why=why)]
    if exe:
        notes.append(_("Using the project's virtualenv pytest: {path}.").format(path=exe))
    return [Derived("pytest", (exe or "pytest", "-q"))], notes



def _id_argv(argv: list[str]) -> list[str]:
    """``-rA`` after the pytest token: every test's outcome line with its node id (reporting only;
    a later ``-r`` wins over the ini's ``addopts``)."""
    for i, a in enumerate(argv):
        if os.path.basename(a) in ("pytest", "py.test") or (a == "pytest" and i > 0 and argv[i - 1] == "-m"):
            return [*argv[: i + 1], "-rA", *argv[i + 1 :]]
    return list(argv)


INFRA = TestInfra(
    files=("test_*.py", "*_test.py", "conftest.py", "**/tests/**", "**/test/**", "pytest.ini", ".pytest.ini",
           "pytest.toml", ".pytest.toml", "pyproject.toml", "setup.cfg", "tox.ini", "noxfile.py", "sitecustomize.py",
           "usercustomize.py", "*.pth", "**/*.dist-info/**", "**/*.egg-info/**", "**/*.egg-link", "*.pyc", "*.pyo"),
    aware=(re.compile(r"^\s*(?:import|from)\s+(?:_?pytest|unittest)\b(?!\.mock)"),
           re.compile(r"PYTEST_(?:CURRENT_TEST|VERSION|XDIST)|[\'\"](?:_?pytest|unittest|nose2?)[\'\"]\s+(?:not\s+)?in\s+sys\.modules"
                      r"|sys\.modules\s*(?:\[|\.get\()\s*[\'\"](?:_?pytest|unittest)[\'\"]|\bsys\._getframe\b"
                      r"|\binspect\.stack\(\)|__import__\(\s*[\'\"](?:_?pytest|unittest)"),
           # production code that defeats the assertions instead of detecting the run (breaker
           # findings): a value equal to anything, an assertion method replaced
           re.compile(r"__eq__\s*=\s*lambda[^:\n]*:\s*True\b|__ne__\s*=\s*lambda[^:\n]*:\s*False\b"
                      r"|def\s+__eq__\s*\([^)]*\)\s*(?:->\s*\w+\s*)?:\s*(?:\n\s*)?return\s+True\b"
                      r"|\.assert[A-Z]\w*\s*=(?!=)|\bsetattr\([^)\n]*[\'\"]assert[A-Z]\w*[\'\"]")),
    aware_files=("*.py",),
    id_argv=_id_argv,
)
"""pytest's test infrastructure: test modules and conftest files, everything under a ``tests``
directory, the ini files (``pytest.toml`` first, as pytest 9 reads it), the interpreter's start-up
hooks and package metadata that can register a plugin (``entry_points.txt`` of a ``.dist-info``)
(docs/integrity.md)."""

TOOLCHAIN = Toolchain(
    id="pytest",
    order=60,
    detect=_detect,
    test_command=re.compile(r"\bpytest\b"),
    hint=re.compile(r"\bpytest\b|\bpy\.test\b"),
    hint_formats=("pytest",),
    formats=(CountFormat("pytest", _parse_pytest, 10),),
    zero=_zero,
    directive_argv=re.compile(r"\bpytest\b|\bpy\.test\b", re.I),
    shape=re.compile(r"^(?:FAILED|ERROR) \S+\.py|^={3,} (?:FAILURES|ERRORS|short test summary info) ={3,}$", re.M),
    directives=parse_pytest,
    infra=INFRA,
)
