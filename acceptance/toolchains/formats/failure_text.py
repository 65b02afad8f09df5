"""Where a test failed, from the text of its failure: the traceback or stack trace a JUnit or TRX
report carries (docs/toolchains.md, break-test).

A JUnit report's ``file``/``line`` attributes, when it has them, name the test's declaration
(PHPUnit, pytest's ``xunit1`` family) or nothing at all (pytest's default ``xunit2``, Surefire,
Gradle); the failing line is in the failure's text. :func:`frames` lists the candidate locations
found there, most useful first; which of them is the project's own file is decided by the reader,
which knows the project (:func:`~tianshu_mcp.acceptance.directives.collect_junit_failures`).

Forms read:

* pytest's traceback entries ``tests/test_a.py:5: AssertionError`` (``--tb=long|short``), deepest
  first (the failing assert, then its callers);
* Python's native traceback ``File "/p/tests/test_a.py", line 5, in test_x`` (``--tb=native``,
  unittest), deepest first;
* JVM stack frames ``at demo.Calc.parse(Calc.java:10)``: the file is placed in its package's
  directory (``demo/Calc.java``), innermost first;
* .NET frames ``at Calc.Tests.Adds() in /src/CalcTests.cs:line 12``, innermost first;
* any other ``path.ext:line`` (JavaScript, PHP, Ruby, Elixir), in printed order (innermost first).

A failure's text is kept bounded while the XML streams (:class:`HeadTail`): its first and last
:data:`KEEP_CHARS` characters, so a long table printed before the location, or a 100,000-frame
trace, still shows the deepest pytest entry (last) and the innermost frame (first).
"""

from __future__ import annotations

import re
from collections import deque

KEEP_CHARS = 16384
"""Characters kept of a failure's text at each end (:class:`HeadTail`)."""
MAX_FRAMES = 64
"""At most this many candidate locations per failure."""

_PYTEST = re.compile(r"^([^\s:<>\"']+\.py):(\d{1,9}): ", re.M)
_PY_NATIVE = re.compile(r"^\s*File \"([^\"\n]+)\", line (\d{1,9})", re.M)
_JVM = re.compile(r"\bat ([\w$]+(?:\.[\w$]+)*)\.[\w$<>]+\(([\w$]+\.(?:java|kt|kts|groovy|scala)):(\d{1,9})\)")
_DOTNET = re.compile(r"\bin ((?:[A-Za-z]:)?[^\s:][^:\n]*?):line (\d{1,9})")
_ANY = re.compile(r"((?:\b[A-Za-z]:)?[^\s()<>\"':]+\.[A-Za-z][A-Za-z0-9]{0,5}):(\d{1,9})")


class HeadTail:
    """The first and the last ``limit`` characters of a text fed in pieces; memory stays
    O(``limit`` + the largest piece)."""

    def __init__(self, limit: int = KEEP_CHARS) -> None:
        self.limit = limit
        self._head: list[str] = []
        self._head_len = 0
        self._tail: deque[str] = deque()
        self._tail_len = 0
        self._dropped = False

    def add(self, text: str) -> None:
        """Feed the next piece."""
        if self._head_len < self.limit:
            take = text[: self.limit - self._head_len]
            self._head.append(take)
            self._head_len += len(take)
            text = text[len(take):]
        if text:
            self._tail.append(text)
            self._tail_len += len(text)
            while self._tail_len - len(self._tail[0]) >= self.limit:
                self._tail_len -= len(self._tail.popleft())
                self._dropped = True

    def text(self) -> str:
        """The head, then (``\\n`` between them when something in the middle was dropped) the tail."""
        tail = "".join(self._tail)
        if len(tail) > self.limit:
            tail, self._dropped = tail[-self.limit:], True
        return "".join(self._head) + ("\n" if self._dropped else "") + tail


def frames(text: str) -> list[tuple[str, int]] | None:
    """Candidate ``(file, line)`` locations of a failure in its ``text`` (module doc), most useful
    first, each once, at most :data:`MAX_FRAMES`; None when there is none. Never raises."""
    found = [(m.group(1), int(m.group(2))) for m in _PYTEST.finditer(text)][::-1]
    if not found:
        found = [(m.group(1), int(m.group(2))) for m in _PY_NATIVE.finditer(text)][::-1]
    if not found:
        found = [("/".join([*cls.split(".")[:-1], name]), int(line)) for cls, name, line in _JVM.findall(text)]
    if not found:
        found = [(m.group(1).strip(), int(m.group(2))) for m in _DOTNET.finditer(text)]
    if not found:
        found = [(m.group(1), int(m.group(2))) for m in _ANY.finditer(text)]
    out: list[tuple[str, int]] = []
    for frame in found:
        if frame not in out:
            out.append(frame)
            if len(out) >= MAX_FRAMES:
                break
    return out or None
