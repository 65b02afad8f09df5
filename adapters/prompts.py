"""Recognising a CLI agent that waits for a person: a confirmation prompt or an authorization
request in its output (the semantic events of docs/lifecycle.md §4, ``confirmation_dialog_detected`` and
``awaiting_user_authorization``, docs/tools.md §3.4; docs/lifecycle.md §4).

The original saw these as dialogs in desktop apps. A CLI agent shows them as lines: ``Apply
these edits? [y/N]``, ``Do you want to run this command?``, or a login flow that prints a URL
and a device code. Headless, with stdin at EOF, such an agent is stuck or about to fail, so a
host should hear about it while the round runs, not only from the log afterwards.
:func:`classify_line` names the event a line stands for; profiles may add their own patterns
(``confirmationPatterns``, ``authorizationPatterns``: regular expressions, case-insensitive).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

CONFIRMATION = "confirmation_dialog_detected"
AUTHORIZATION = "awaiting_user_authorization"

DEFAULT_CONFIRMATION_PATTERNS: tuple[str, ...] = (
    r"[\[(]\s*(y/n|yes/no)\s*[\])]",
    r"\b(do you want to|would you like to|are you sure you want|shall i)\b.{0,200}\?",
    r"\b(allow|approve|confirm|accept)\b.{0,60}\b(command|edit|change|tool|action|execution|write)s?\b.{0,80}\?",
    r"\bpress (enter|return|any key) to (continue|proceed|confirm)\b",
    r"\bwaiting for (your )?(approval|confirmation|permission)\b",
)
DEFAULT_AUTHORIZATION_PATTERNS: tuple[str, ...] = (
    r"\b(open|visit|go to|navigate to)\b.{0,80}https?://\S+.{0,80}\b(authori[sz]e|log ?in|sign ?in|device|code|auth)",
    r"\b(authori[sz]e|log ?in|sign ?in|authenticate)\b.{0,80}\b(open|visit|go to)\b.{0,40}https?://",
    r"\b(enter|use|type) (the |this )?(one-time |device |verification )?code\b.{0,60}\b[A-Z0-9]{4}-[A-Z0-9]{4}\b",
    r"\bwaiting for (the )?(browser |oauth |device )?(authori[sz]ation|authentication|login|sign-in)\b",
)
QUOTE_CHARS = 300


@lru_cache(maxsize=64)
def _compile(patterns: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    """The patterns compiled (case-insensitive), a bad one left out; kept per pattern set, so
    a process compiles each set once (the fork server compiles the defaults for every flow run
    it forks, :func:`warm`)."""
    out = []
    for p in patterns:
        try:
            out.append(re.compile(p, re.IGNORECASE))
        except re.error:
            continue  # profiles are validated when loaded; a bad pattern never stops a round
    return tuple(out)


def warm() -> None:
    """Compile the default patterns now (≈9 ms a round otherwise, docs/design-notes.md note 85)."""
    PromptClassifier()


class PromptClassifier:
    """Classifies agent output lines; build once per round (patterns compiled once)."""

    def __init__(self, confirmation: Iterable[str] = (), authorization: Iterable[str] = ()) -> None:
        self._auth = _compile((*DEFAULT_AUTHORIZATION_PATTERNS, *authorization))
        self._confirm = _compile((*DEFAULT_CONFIRMATION_PATTERNS, *confirmation))

    def classify(self, line: str) -> str | None:
        """:data:`AUTHORIZATION`, :data:`CONFIRMATION` or None for one output line (an
        authorization request wins: a login prompt often ends with a question too)."""
        text = line.strip()[:2000]
        if not text:
            return None
        if any(p.search(text) for p in self._auth):
            return AUTHORIZATION
        if any(p.search(text) for p in self._confirm):
            return CONFIRMATION
        return None


def classify_line(line: str) -> str | None:
    """:meth:`PromptClassifier.classify` with the default patterns only."""
    return PromptClassifier().classify(line)
