"""What every step of a verify round shares (docs/acceptance.md §3.0): :class:`RoundContext` (the
request, the round allocated by :func:`next_round`, the baseline, git failures, blocking issues)
and :class:`GitGuard` (a git failure becomes a blocking ``GIT_FAILED``, never "clean" or "no
changes")."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, TypeVar

from ...core.errors import ErrorCode
from ..git import Baseline, GitFailed
from .request import VerifyRequest

__all__ = ["GitGuard", "RoundContext", "next_round", "now_iso"]

_T = TypeVar("_T")

_REPORT_RE = re.compile(r"^report-(\d+)\.(md|json)$")


def now_iso() -> str:
    """The current UTC time, ISO 8601 with milliseconds and ``Z`` (``startedAt``/``finishedAt``)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def next_round(task_dir: str | Path, requested: int) -> int:
    """``max(requested, highest existing report-N.(md|json) + 1)`` (docs/acceptance.md §3.0)."""
    d = Path(task_dir)
    best = requested
    try:
        for p in d.iterdir():
            m = _REPORT_RE.match(p.name)
            if m:
                best = max(best, int(m.group(1)) + 1)
    except OSError:
        pass
    return best


@dataclass
class GitGuard:
    """Runs git steps of the round: a :class:`GitFailed` is recorded in :attr:`failures` (the
    round gets a blocking ``GIT_FAILED``, never "clean"/"no changes") and the step's default is used."""

    failures: list[GitFailed] = field(default_factory=list)

    def __call__(self, call: Callable[[], _T], default: _T) -> _T:
        """``call()``, or ``default`` when it raised :class:`GitFailed` (recorded)."""
        try:
            return call()
        except GitFailed as exc:
            self.failures.append(exc)
            return default

    def blocking_issues(self) -> list[dict[str, str]]:
        """One ``{code: GIT_FAILED, message}`` per distinct failure message, in order."""
        seen: set[str] = set()
        issues: list[dict[str, str]] = []
        for exc in self.failures:
            if exc.message not in seen:
                seen.add(exc.message)
                issues.append({"code": ErrorCode.GIT_FAILED.value, "message": exc.message})
        return issues


@dataclass
class RoundContext:
    """One round being verified, shared by its steps.

    Attributes:
        req: the request.
        task_dir: the task directory (created).
        round: the round actually used (:func:`next_round`).
        started_at: ``startedAt`` of the report (ISO, UTC).
        baseline: the pre-work baseline (captured now when the request had none).
        fresh_baseline: True when the baseline was captured by this round (a pure health check).
        git: the round's git failures.
        blocking: the round's ``blockingIssues`` ``[{code, message}]``, in the order found.
    """

    req: VerifyRequest
    task_dir: Path
    round: int
    started_at: str
    baseline: Baseline
    fresh_baseline: bool
    git: GitGuard
    blocking: list[dict[str, str]] = field(default_factory=list)

    @property
    def project(self) -> str:
        """The project root (``req.project_path``)."""
        return self.req.project_path

    @property
    def default_timeout_ms(self) -> int:
        """The default per-check timeout, ms (300 000 when the request gave none)."""
        return self.req.verify_command_timeout_ms or 300_000

    @property
    def log_path(self) -> Path:
        """``<taskDir>/verify-<round>.log``."""
        return self.task_dir / f"verify-{self.round}.log"
