"""``go test -json``: test counts from the test2json event stream (docs/toolchains.md §2).

``go test -json ./...`` prints one JSON object per line (``cmd/test2json``)::

    {"Time":"…","Action":"run","Package":"x/a","Test":"TestOk"}
    {"Time":"…","Action":"pass","Package":"x/a","Test":"TestOk","Elapsed":0}
    {"Time":"…","Action":"fail","Package":"x/a","Elapsed":0.008}

Actions: ``start`` (Go ≥ 1.20), ``run``, ``pause``, ``cont``, ``pass``, ``bench``, ``fail``,
``output``, ``skip``, ``attr`` (Go ≥ 1.25); an event without ``Test`` is about the whole package.
A package without test files ends with a package-level ``skip`` (its output says
``[no test files]``); ``-run`` matching nothing ends with a package-level ``pass`` and no test
event. Build failures: Go < 1.24 writes them as plain lines (``# x/broken [x/broken.test]``,
the compiler errors, ``FAIL	x/broken [build failed]``) between the JSON lines; Go ≥ 1.24 writes
``{"ImportPath":"x/broken [x/broken.test]","Action":"build-output"|"build-fail"}`` and then a
package-level ``fail`` carrying ``"FailedBuild"``. Recorded real outputs:
``tests/data/toolchains/go/`` (README there).

Counting rules (the same units as the text form of :mod:`..go`):

* only **leaf** tests count: a test that has subtests (``TestX/sub`` seen in the same package)
  is not a unit of its own, exactly as the text parser counts ``--- PASS/FAIL/SKIP`` lines;
  a run's outcome is its last ``pass``/``fail``/``skip`` event, and each run of ``-count=N`` is
  a unit (a ``run`` event after an outcome starts the next run); events of a package after its
  verdict are not test2json's and are ignored (a duplicated ``pass`` line counted twice); ids are ``<package>/<test>``
  (just ``<test>`` for events without a package, e.g. ``go tool test2json`` without ``-p``);
* a package that failed to build (``FailedBuild``, ``build-fail``, ``[build failed]`` or
  ``[setup failed]``) is one error whose id is the package path;
* a package that failed without any failing leaf test (panic outside a test, timeout, TestMain,
  ``os.Exit``, a parent test failing after its subtests passed) is one error; its ids are the
  tests that started and never finished (a timeout names the test that hung), else the failed
  parent tests, else the package;
* packages without tests (``[no test files]``, ``[no tests to run]``) add nothing, so a run in
  which no test ran has ``total == 0`` (:func:`go_json_zero`).

Tolerated: non-JSON lines anywhere (compiler output, a script's banner, ``go: downloading``),
a first line cut in the middle (the output may be a tail), lines cut by the engine's line limit
(an ``output`` event cut short is simply not read; test results are short lines). Linear in the
length of the text: each line is decoded once by :mod:`json`'s C decoder.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterator

from ..base import TestCounts, unique_ids

RUNNER = "go-json"
"""The ``TestCounts.runner`` (count-format id) of this format."""

_PLAIN_BUILD_FAIL = re.compile(r"^FAIL[ \t]+(\S+) \[(?:build|setup) failed\]")
_TERMINAL = frozenset({"pass", "fail", "skip"})
_KNOWN_ACTIONS = frozenset(
    {"start", "run", "pause", "cont", "pass", "bench", "fail", "output", "skip", "attr",
     "build-output", "build-fail"}
)
_MAX_DEPTH = 64
"""At most this many ``/`` levels of a test name are walked to find its parent tests."""


@dataclass
class _Package:
    tests: dict[str, str] = field(default_factory=dict)  # name -> "run" | "pass" | "fail" | "skip"
    earlier: dict[str, list[str]] = field(default_factory=dict)  # outcomes of earlier runs (-count=N)
    failed: bool = False
    build_failed: bool = False


@dataclass
class _Tally:
    counts: TestCounts = field(default_factory=lambda: TestCounts(RUNNER))
    failed_ids: list[str] = field(default_factory=list)
    passed_ids: list[str] = field(default_factory=list)
    errored: set[str] = field(default_factory=set)  # packages already counted as an error


def _ident(pkg: str, name: str) -> str:
    return f"{pkg}/{name}" if pkg else name


def _parents(names: dict[str, str]) -> set[str]:
    """The names (of ``names``) that have a subtest in ``names``."""
    out: set[str] = set()
    for name in names:
        end = len(name)
        for _ in range(_MAX_DEPTH):
            end = name.rfind("/", 0, end)
            if end <= 0:
                break
            prefix = name[:end]
            if prefix in names:
                out.add(prefix)
    return out


def _error(tally: _Tally, pkg: str, ids: list[str]) -> None:
    if pkg in tally.errored:
        return
    tally.errored.add(pkg)
    tally.counts.errors += 1
    tally.failed_ids.extend(ids or [pkg or "(go test)"])


def _flush(tally: _Tally, pkg: str, state: _Package) -> None:
    """Count one package's leaf tests (and its error, when it failed without a failing test)."""
    c = tally.counts
    if state.build_failed:
        _error(tally, pkg, [pkg])
        return
    parents = _parents(state.tests)
    leaf_failed = False
    unfinished: list[str] = []
    failed_parents: list[str] = []
    for name, last in state.tests.items():
        if name in parents:
            if last == "fail":
                failed_parents.append(_ident(pkg, name))
            continue
        for status in [*state.earlier.get(name, ()), last]:  # each run of ``-count=N`` is a unit
            if status == "pass":
                c.passed += 1
                tally.passed_ids.append(_ident(pkg, name))
            elif status == "fail":
                c.failed += 1
                leaf_failed = True
                tally.failed_ids.append(_ident(pkg, name))
            elif status == "skip":
                c.skipped += 1
            else:
                unfinished.append(_ident(pkg, name))
    if state.failed and not leaf_failed:
        _error(tally, pkg, unfinished or failed_parents)


_CANDIDATE_LINE = re.compile(r"^[ \t]*(\{[^\n]*\}|FAIL[ \t][^\n]*)", re.MULTILINE)


def _events(text: str) -> Iterator[tuple[dict[str, Any] | None, str]]:
    """``(event dict | None, line)`` for every line that may matter (a JSON object, a plain
    ``FAIL`` line); None for those that are not a test2json event. Other lines are skipped by
    the regex scan, in C."""
    for m in _CANDIDATE_LINE.finditer(text):
        s = m.group(1).rstrip()
        ev = None
        if s.startswith("{") and '"Action"' in s:
            try:
                ev = json.loads(s, strict=False)  # a raw control character in Output
            except (ValueError, RecursionError):
                ev = None
            if not isinstance(ev, dict) or not isinstance(ev.get("Action"), str):
                ev = None
        yield ev, s


def parse_go_json(text: str) -> TestCounts | None:
    """Count tests from ``go test -json`` output (see the module doc for the rules).

    Args:
        text: the (ANSI-cleaned) merged output, or a tail of it.

    Returns:
        ``TestCounts(runner="go-json")``; ``total == 0`` when no test ran (only packages without
        tests, ``-run`` matching nothing); None when the text holds no test2json event. Never
        raises.
    """
    tally = _Tally()
    packages: dict[str, _Package] = {}
    build_fail_paths: list[str] = []
    claimed_builds: set[str] = set()
    closed: set[str] = set()  # packages whose verdict was counted: later events are not test2json's
    seen = False
    for ev, line in _events(text):
        if ev is None:
            m = _PLAIN_BUILD_FAIL.match(line)
            if m and m.group(1) not in closed:  # Go < 1.24: the build failure is a plain line
                packages.setdefault(m.group(1), _Package()).build_failed = True
                _flush(tally, m.group(1), packages.pop(m.group(1)))
                closed.add(m.group(1))
            continue
        action = ev["Action"]
        if action not in _KNOWN_ACTIONS or any(k in ev and not isinstance(ev[k], str) for k in ("Package", "Test")):
            continue  # not test2json's (a garbage line that decodes): no phantom package error
        seen = True
        pkg = ev.get("Package")
        pkg = pkg if isinstance(pkg, str) else ""
        if action == "build-fail":
            path = ev.get("ImportPath")
            if isinstance(path, str) and path:
                build_fail_paths.append(path)
            continue
        if action == "build-output":
            continue
        if pkg in closed:
            continue
        test = ev.get("Test")
        state = packages.setdefault(pkg, _Package())
        if isinstance(test, str) and test:
            if action == "run":
                done = state.tests.get(test)
                if done in _TERMINAL:  # the test runs again (-count=N): keep the earlier outcome
                    state.earlier.setdefault(test, []).append(done)
                state.tests[test] = "run"
            elif action in _TERMINAL:
                state.tests[test] = action
            continue
        if action == "output":
            out = ev.get("Output")
            if isinstance(out, str) and _PLAIN_BUILD_FAIL.match(out):
                state.build_failed = True
            continue
        if action in _TERMINAL:  # the package's own verdict: count it now
            if action == "fail":
                state.failed = True
                failed_build = ev.get("FailedBuild")
                if isinstance(failed_build, str) and failed_build:
                    state.build_failed = True
                    claimed_builds.add(failed_build)
            _flush(tally, pkg, packages.pop(pkg))
            closed.add(pkg)
    if not seen:
        return None
    for pkg, state in packages.items():  # no verdict (a cut-off run): count what finished
        _flush(tally, pkg, state)
    for path in build_fail_paths:  # a build failure no package verdict claimed (tail, dependency)
        if path not in claimed_builds:
            base = path.split(" ", 1)[0].removesuffix(".test")
            _error(tally, base, [base])
    c = tally.counts
    c.failed_ids = unique_ids(tally.failed_ids)
    c.passed_ids = unique_ids(tally.passed_ids)
    return c


def go_json_console(text: str) -> tuple[str, set[str]] | None:
    """What a ``go test -json`` output stands for, in one pass over its lines:

    * the console text: every event's ``Output`` (the ``go test -v`` text, build output included)
      in order, and the lines that are not events as they are (compiler errors of Go < 1.24);
    * the tests whose last outcome is ``fail`` and that had a ``run`` event (Go 1.19's test2json
      also turns a ``--- FAIL: TestX`` line that a passing test printed into events: TestX's last
      outcome is then ``pass``, and a test that never ran has no ``run``).

    None when ``text`` holds no test2json event. Never raises; linear in the length of ``text``."""
    if '"Action"' not in text:
        return None
    parts: list[str] = []
    last: dict[tuple[str, str], str] = {}
    ran: set[tuple[str, str]] = set()
    seen = False
    for line in text.split("\n"):
        s = line.strip()
        if s.startswith("{") and '"Action"' in s:
            try:
                ev = json.loads(s, strict=False)  # a raw control character in Output
            except (ValueError, RecursionError):
                ev = None
            if isinstance(ev, dict) and isinstance(ev.get("Action"), str):
                seen = True
                out, pkg, test = ev.get("Output"), ev.get("Package"), ev.get("Test")
                if isinstance(out, str):
                    parts.append(out)  # carries its own newline (test2json may split a long line)
                if isinstance(test, str) and test and isinstance(pkg, (str, type(None))):
                    if ev["Action"] == "run":
                        ran.add((pkg or "", test))
                    elif ev["Action"] in _TERMINAL:
                        last[(pkg or "", test)] = ev["Action"]
                continue
        parts.append(line + "\n")
    if not seen:
        return None
    failed = {test for (pkg, test), action in last.items() if action == "fail" and (pkg, test) in ran}
    return "".join(parts), failed


def go_json_zero(text: str) -> bool:
    """True when ``text`` is ``go test -json`` output in which no test ran: every package had
    no test files or no test matching ``-run`` (and nothing failed to build). Never raises."""
    counts = parse_go_json(text)
    return counts is not None and counts.total == 0
