"""TAP (node --test's TAP reporter, mocha --reporter tap, any TAP producer): counts from the
``ok``/``not ok`` lines, directives ``# SKIP``/``# TODO``, ``Bail out!`` and the ``# tests N``
summary (the engine's generic ``# tests 0`` rule is its zero-test rule).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .base import CountFormat, TestCounts, Toolchain

_TAP_LINE = re.compile(r"^( *)(not ok|ok) (\d+)(?: -)?(?: (.*?))?\s*$")
_TAP_DIRECTIVE = re.compile(r"\s+#\s*(SKIP|TODO)\b\S*\s*(.*)$", re.I)
_TAP_VERSION = re.compile(r"^TAP version \d+", re.M)
_TAP_PLAN = re.compile(r"^ *1\.\.\d+", re.M)
_TAP_SUM = re.compile(r"^# (tests|suites|pass|fail|cancelled|skipped|todo) (\d+)\s*$", re.M)
_TAP_BAIL = re.compile(r"^Bail out!", re.M)


@dataclass
class _TapEntry:
    indent: int
    ok: bool
    name: str
    directive: str
    parent: bool = False
    children: list[int] = field(default_factory=list)


def _tap_entries(text: str) -> list[_TapEntry]:
    entries: list[_TapEntry] = []
    yaml_indent: int | None = None
    for line in text.split("\n"):
        stripped = line.strip()
        indent = len(line) - len(line.lstrip(" "))
        if yaml_indent is not None:
            if stripped == "..." and indent <= yaml_indent + 2:
                yaml_indent = None
            continue
        if stripped == "---" and entries:
            yaml_indent = indent
            continue
        m = _TAP_LINE.match(line)
        if not m:
            continue
        name = m.group(4) or ""
        directive = ""
        dm = _TAP_DIRECTIVE.search(name)
        if dm:
            directive = dm.group(1).upper()
            name = name[: dm.start()]
        entries.append(_TapEntry(len(m.group(1)), m.group(2) == "ok", name.strip(), directive))
    # a line followed (before it) by deeper-indented lines is a parent (suite or test with subtests)
    pending: list[int] = []  # indices not yet claimed by a parent
    for i, e in enumerate(entries):
        claimed = [j for j in pending if entries[j].indent > e.indent]
        if claimed:
            e.parent = True
            e.children = claimed
            pending = [j for j in pending if j not in claimed]
        pending.append(i)
    return entries


def _tap_names(entries: list[_TapEntry]) -> list[str]:
    names = [e.name for e in entries]
    for i in range(len(entries) - 1, -1, -1):  # outermost parents are last: prefix downwards
        if entries[i].parent:
            stack = list(entries[i].children)
            while stack:
                j = stack.pop()
                names[j] = f"{entries[i].name} > {names[j]}" if entries[i].name else names[j]
                stack.extend(entries[j].children)
    return names


def _parse_tap(text: str) -> TestCounts | None:
    if not (_TAP_VERSION.search(text) or _TAP_PLAN.search(text)):
        return None
    entries = _tap_entries(text)
    summary: dict[str, int] = {}
    for k, v in _TAP_SUM.findall(text):
        summary[k] = summary.get(k, 0) + int(v)
    if not entries and "tests" not in summary and not _TAP_VERSION.search(text):
        return None
    names = _tap_names(entries)
    passed = failed = skipped = 0
    failed_ids: list[str] = []
    passed_ids: list[str] = []
    for e, name in zip(entries, names):
        if e.parent:
            continue
        if e.directive == "SKIP" or (e.directive == "TODO"):
            skipped += 1
        elif e.ok:
            passed += 1
            passed_ids.append(name)
        else:
            failed += 1
            failed_ids.append(name)
    node = bool(summary.keys() & {"suites", "cancelled", "todo"})
    if node:  # node's own summary is authoritative (it knows what the TAP lines nest)
        passed = summary.get("pass", passed)
        failed = summary.get("fail", failed) + summary.get("cancelled", 0)
        skipped = summary.get("skipped", 0) + summary.get("todo", 0)
    elif "pass" in summary or "fail" in summary:  # e.g. mocha: pass/fail from the summary, skips from lines
        passed = summary.get("pass", passed)
        failed = summary.get("fail", failed)
    return TestCounts(
        "node-tap" if node else "tap",
        passed=passed,
        failed=failed,
        skipped=skipped,
        errors=len(_TAP_BAIL.findall(text)),
        failed_ids=failed_ids,
        passed_ids=passed_ids,
    )


TOOLCHAIN = Toolchain(id="tap", order=87, formats=(CountFormat("tap", _parse_tap, 80),))
