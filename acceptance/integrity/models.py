"""Typed values of verification integrity (docs/integrity.md): the policy, holdout checks, and the
``report["integrity"]`` section.

Plain pydantic models; the judge (:mod:`.judge`) fills :class:`IntegrityReport`.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "IntegrityPolicy",
    "DEFAULT_POLICY",
    "HoldoutCheck",
    "MAX_TARGETS",
    "MAX_HOLDOUT_CHECKS",
    "MAX_HOLDOUT_FILE_BYTES",
    "validate_target",
]


class IntegrityPolicy(str, Enum):
    """``testIntegrity`` (acceptance.json, ``acceptanceOverride``).

    * ``protect`` (default): the round is judged on the pristine tree (the baseline's test
      infrastructure + the agent's other changes), the baseline's tests must still run, targets must
      pass there, test-aware production code is refused;
    * ``allow-test-edits``: for briefs whose job is to change tests: the agent's tree is judged;
      tests that disappeared, were skipped or lost assertions are named in the report; a target
      must still exist, run and pass;
    * ``off``: none of it (the report says so).
    """

    PROTECT = "protect"
    ALLOW_TEST_EDITS = "allow-test-edits"
    OFF = "off"


DEFAULT_POLICY = IntegrityPolicy.PROTECT
MAX_TARGETS = 100
"""At most this many ``targetTests``."""
MAX_HOLDOUT_CHECKS = 20
"""At most this many holdout checks per task (argument) or per project (data home)."""
MAX_HOLDOUT_FILE_BYTES = 1 << 20
"""A holdout check's ``files`` hold at most this many bytes in total."""

_CONTROL = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]")


def validate_target(value: Any) -> str:
    """One ``targetTests`` entry: a test id or name, 1..500 characters, one line.

    Raises:
        ValueError: not a string, empty, too long, or with control characters.
    """
    if not isinstance(value, str) or not value.strip():
        raise ValueError("a target test must be a non-empty string")
    if len(value) > 500:
        raise ValueError("a target test has at most 500 characters")
    if _CONTROL.search(value):
        raise ValueError("a target test must be one line without control characters")
    return value.strip()


class HoldoutCheck(BaseModel):
    """A check the agent never sees (docs/integrity.md §5).

    ``{name, cmd: [argv…] | "string", area, timeoutMs?, files?: {relpath: text}}``. ``cmd`` runs in
    the pristine tree (never in the project), after ``files`` were written there (paths relative
    to the project root, no ``..``, at most :data:`MAX_HOLDOUT_FILE_BYTES` in total). ``area`` is
    the only thing rework feedback may say about it (a behaviour area, e.g. "overflow handling").
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str = Field(min_length=1, max_length=200)
    cmd: str | list[str]
    area: str = Field(min_length=1, max_length=200)
    timeout_ms: int | None = Field(None, alias="timeoutMs", gt=0, le=3_600_000)
    files: dict[str, str] = Field(default_factory=dict)

    @field_validator("name", "area")
    @classmethod
    def _one_line(cls, value: str) -> str:
        if _CONTROL.search(value):
            raise ValueError("must be one line without control characters")
        return value

    @field_validator("cmd")
    @classmethod
    def _cmd(cls, value: str | list[str]) -> str | list[str]:
        if isinstance(value, str):
            if not value.strip() or "\x00" in value:
                raise ValueError("cmd must be a non-empty argv or string")
        elif not value or not all(isinstance(a, str) and a and "\x00" not in a for a in value):
            raise ValueError("cmd must be a non-empty list of non-empty strings")
        return value

    @field_validator("files")
    @classmethod
    def _files(cls, value: dict[str, str]) -> dict[str, str]:
        total = 0
        for rel, text in value.items():
            parts = rel.replace("\\", "/").split("/")
            if not rel or rel.startswith("/") or ".." in parts or _CONTROL.search(rel) or ".git" in parts:
                raise ValueError(f"files: {rel[:100]!r} must be a relative path inside the project (no '..', not .git)")
            total += len(text.encode("utf-8", "surrogatepass"))
        if total > MAX_HOLDOUT_FILE_BYTES:
            raise ValueError(f"files hold at most {MAX_HOLDOUT_FILE_BYTES} bytes")
        return value

    def argv(self) -> list[str]:
        """``cmd`` as argv (a string is split by the acceptance rules, never by a shell)."""
        from ..config_model import split_cmd

        return list(self.cmd) if isinstance(self.cmd, list) else split_cmd(self.cmd)
