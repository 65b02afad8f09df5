"""Test-aware production code (docs/integrity.md): an agent's change to a non-test file that makes the code
detect that it runs under test (``"pytest" in sys.modules``, ``testing.Testing()``,
``cfg!(test)``, ``process.env.NODE_TEST_CONTEXT``, a source module importing the test framework to
patch it). The tests then pass against behaviour no user gets, and the pristine tree cannot see
it: the change is in the agent's own code. Each toolchain declares its patterns
(:attr:`~..toolchains.base.TestInfra.aware`); only lines the agent *added* are read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from ..git import run_git
from .infra import InfraRules

__all__ = ["AwareHit", "scan_added_lines"]

MAX_FILE_BYTES = 2 << 20
"""A changed file larger than this is not scanned."""
MAX_HITS = 20

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")


@dataclass
class AwareHit:
    """One added line of production code that detects the test run: ``{file, line, text}``."""

    file: str
    line: int
    text: str

    def to_json(self) -> dict[str, object]:
        """``{"file", "line", "text"}`` (text ≤ 200 characters)."""
        return {"file": self.file, "line": self.line, "text": self.text.strip()[:200]}


def _strip_tests(rel: str, text: str, rules: InfraRules) -> str:
    """The text with its embedded test code blanked (a Rust ``#[cfg(test)]`` module is tests)."""
    spans = rules.spans(rel)
    if spans is None:
        return text
    out = list(text)
    for a, b in spans(text):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "
    return "".join(out)


def _starts_on(pat: re.Pattern[str], lines: list[str], n: int) -> bool:
    """``pat`` matches starting on line ``n`` (1-based); a pattern that spans a line break
    (``def __eq__(…):`` then ``return True``) sees that line and the next."""
    line = lines[n - 1]
    if "\\n" not in pat.pattern:
        return pat.search(line) is not None
    m = pat.search(line + "\n" + (lines[n] if n < len(lines) else ""))
    return m is not None and m.start() < len(line)


def scan_added_lines(top: Path, head: str | None, paths: Iterable[str], untracked: set[str],
                     rules: InfraRules) -> list[AwareHit]:
    """Added lines of ``paths`` (top-relative, production files) matching their patterns.

    Tracked files: the ``+`` lines of ``git diff -U0 <head>``; untracked ones: every line. Lines
    inside embedded test code (Rust test modules) do not count. A match starts on an added line
    (a two-line pattern also reads the line after it). Never raises.
    """
    hits: list[AwareHit] = []
    for rel in paths:
        pats = rules.aware_patterns(rel)
        if not pats:
            continue
        path = top / rel
        try:
            if not path.is_file() or path.is_symlink() or path.stat().st_size > MAX_FILE_BYTES:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        lines = _strip_tests(rel, text, rules).split("\n")
        added: list[int]
        if rel in untracked or not head:
            added = list(range(1, len(lines) + 1))
        else:
            r = run_git(["diff", "-U0", "--no-color", "--no-renames", head, "--", rel], top)
            added = []
            cur = 0
            for ln in r.stdout.split("\n") if r.ok else []:
                m = _HUNK.match(ln)
                if m:
                    cur = int(m.group(1))
                elif ln.startswith("+") and not ln.startswith("+++"):
                    added.append(cur)
                    cur += 1
        for n in added:
            if 1 <= n <= len(lines) and any(_starts_on(p, lines, n) for p in pats):
                hits.append(AwareHit(rel, n, lines[n - 1]))
                if len(hits) >= MAX_HITS:
                    return hits
    return hits
