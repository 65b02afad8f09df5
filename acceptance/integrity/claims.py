"""Claims against evidence (docs/integrity.md §7, advisory): what the agent's final message says it did,
compared with what verification measured. Never gates a round on its own; the report and the
task's meta list ``unsupportedClaims``.

Recognised claims (English, case-insensitive):

* "all tests pass" / "tests are passing" / "N tests pass" → no failing check or test, and N
  not more than were counted;
* "added a test ``X``" / "added test X" → a test whose id names X ran in this round;
* "fixed/changed/modified/updated … in ``path``" and "``path``: fixed …" → ``path`` changed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

from ...core.i18n import _
from .targets import match

__all__ = ["Claim", "check_claims"]

MAX_MESSAGE_CHARS = 8000
"""Only the end of the agent's output (its final message) is read."""

_ALL_PASS = re.compile(r"\b(?:all(?: (?:the|of the))?(?: \d+)? tests? (?:now )?(?:pass(?:es|ed)?|are passing|succeed(?:ed)?|green)"
                       r"|tests? (?:are|is) (?:all )?(?:now )?(?:passing|green))\b", re.I)
_N_PASS = re.compile(r"\b(\d{1,6}) tests? (?:now )?(?:pass(?:ed)?|are passing)\b", re.I)
_ADDED = re.compile(r"\badded (?:a |an |the )?(?:new )?(?:unit |regression )?tests? (?:case )?(?:named |called )?[`'\"]?([\w:./\[\]-]{3,200})", re.I)
_FILE = re.compile(r"\b(?:fixed|changed|modified|updated|edited|patched)\b[^\n]{0,80}?\bin [`'\"]?([\w./-]+\.\w{1,8})\b", re.I)


@dataclass
class Claim:
    """One claim: its text, and ``why`` it is unsupported (empty: supported)."""

    claim: str
    why: str = ""

    def to_json(self) -> dict[str, str]:
        """``{"claim", "why"}``."""
        return {"claim": self.claim[:200], "why": self.why}


def check_claims(message: str, *, failing: Sequence[str], passed_count: int | None, ran_ids: Iterable[str],
                 changed_files: Iterable[str]) -> list[Claim]:
    """Every recognised claim of ``message`` with its verdict.

    Args:
        message: the agent's output tail (its final message is at the end).
        failing: names of failing checks or tests of the round (empty: everything passed).
        passed_count: tests counted as passed in the round (None: unknown).
        ran_ids: test ids that ran in the round (agent's tree and pristine tree).
        changed_files: paths the task changed (project-relative).
    """
    text = (message or "")[-MAX_MESSAGE_CHARS:]
    ids = list(ran_ids)
    changed = [c.strip("/") for c in changed_files]
    out: list[Claim] = []

    def said(m: re.Match[str]) -> str:
        return m.group(0).rstrip(".,;:!`'\"")

    for m in _ALL_PASS.finditer(text):
        why = _("checks or tests failed: {what}").format(what=", ".join(failing[:5])) if failing else ""
        out.append(Claim(said(m), why))
    for m in _N_PASS.finditer(text):
        n = int(m.group(1))
        why = ""
        if failing:
            why = _("checks or tests failed: {what}").format(what=", ".join(failing[:5]))
        elif passed_count is not None and n > passed_count:
            why = _("{n} tests passed, not {claimed}").format(n=passed_count, claimed=n)
        out.append(Claim(said(m), why))
    for m in _ADDED.finditer(text):
        name = m.group(1).strip(".,:;`'\"")
        if name.lower() in ("for", "that", "which", "to", "case", "cases", "file", "files", "suite"):
            continue
        why = "" if any(match(name, i) for i in ids) else _("no test named {name} ran").format(name=name)
        out.append(Claim(said(m), why))
    for m in _FILE.finditer(text):
        path = m.group(1).strip("./") if m.group(1).startswith("./") else m.group(1)
        ok = any(c == path or c.endswith("/" + path) for c in changed)
        out.append(Claim(said(m), "" if ok else _("{path} was not changed").format(path=path)))
    seen: set[str] = set()
    unique = []
    for c in out:
        if c.claim.lower() not in seen:
            seen.add(c.claim.lower())
            unique.append(c)
    return unique
