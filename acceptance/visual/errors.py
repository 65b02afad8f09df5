"""Coded visual failures (docs/visual.md §2.1, §3, §5, §6, §8).

A :class:`VisualError` carries the spec's code and a *kind* that decides the result's status:
``blocked`` (the default: the environment or the configuration stops the check; a person acts),
``failed`` (the project's output is wrong: repairable by the agent) or ``cancelled`` (the round
was cancelled: the item is ``skipped``).
"""

from __future__ import annotations

from typing import Literal

from ...core.errors import ErrorCode

Kind = Literal["blocked", "failed", "cancelled"]

VISUAL_CODES = frozenset({
    # configuration, baselines and integrity (docs/visual.md §1, §7, §9)
    "BASELINE_APPROVAL_REQUIRED", "BASELINE_CHANGED", "BASELINE_CONFIG", "BASELINE_IGNORED", "BASELINE_IMPORT_CONFLICT",
    "BASELINE_SELECTION", "BASELINE_TARGET_CONFLICT", "CANDIDATE_CHANGED", "CANDIDATE_NOT_FOUND", "CANDIDATE_PROJECT",
    "APPROVAL_NOTE_REQUIRED", "CONFIG_CHANGED", "VISUAL_INTEGRITY", "SNAPSHOT_INVALID", "VISUAL_BUSY", "VISUAL_EXISTS",
    "TASK_NOT_BLOCKED", "TASK_ID_INVALID", "TASK_NO_PROJECT", "TASK_ACTIVE", "REVIEW_INVALID", "REVIEW_CHANGED",
    "REVIEW_STALE", "ARTIFACT_PATH", "ARTIFACT_EXISTS", "ARTIFACT_BUDGET", "VISUAL_INTERNAL",
    # browser and capture (docs/visual.md §3, §3.1, §8)
    "BROWSER_MISSING", "BROWSER_VERSION", "BROWSER_DEPENDENCY_MISSING", "BROWSER_INSTALL_UNSUPPORTED",
    "RUNTIME_UNSUPPORTED", "IMAGE_DEPENDENCY_MISSING", "PAGE_UNREACHABLE", "RESOURCE_BLOCKED", "PAGE_NOT_READY",
    "INTERACTION_FAILED", "ELEMENT_AMBIGUOUS", "ELEMENT_HIDDEN", "MASK_NOT_FOUND", "MASK_NOT_VISIBLE", "MASK_ALL_PIXELS",
    "PIXEL_BUDGET", "SCREENSHOT_UNSTABLE", "LOGIN_STATE_INVALID", "LOGIN_STATE_EXPIRED", "STATIC_ROOT", "PORT_CONFLICT",
    "SERVICE_PORT_REQUIRED", "SERVICE_ENV_MISSING", "SERVICE_EXITED", "ITEM_TIMEOUT", "ROUND_TIMEOUT", "CANCELLED",
    # images and comparison (docs/visual.md §4, §5, §2.3)
    "PATH_OUTSIDE_PROJECT", "INPUT_BUDGET", "INPUT_CHANGED", "IMAGE_INVALID", "IMAGE_EMPTY", "IMAGE_MISSING",
    "IMAGE_UNREADABLE", "IMAGE_UNSUPPORTED", "IMAGE_CORRUPT", "DIMENSION_MISMATCH", "PIXEL_DIFFERENCE",
    "IMAGE_SPEC_MISMATCH",
    # the content judge (docs/visual.md §6)
    "CONTENT_CONFIG_INVALID", "CONTENT_COMMAND_MISSING", "CONTENT_ENV_MISSING", "CONTENT_TIMEOUT",
    "CONTENT_COMMAND_FAILED", "CONTENT_OUTPUT_INVALID", "CONTENT_RULE_NOT_FOUND",
})
"""Every code a visual failure carries (stable: hosts and tests match on them; results that pass or
warn carry ``PIXELS_MATCH``, ``IMAGE_MATCH``, ``CONTENT_MATCH``, ``CONTENT_MISMATCH``,
``CONTENT_UNCERTAIN``). A visual tool's error reads ``Error: [CODE] message`` like every other."""

FAILED_CODES = frozenset({
    "INTERACTION_FAILED", "ELEMENT_AMBIGUOUS", "ELEMENT_HIDDEN", "IMAGE_INVALID", "IMAGE_EMPTY", "IMAGE_MISSING",
    "IMAGE_UNSUPPORTED", "IMAGE_CORRUPT", "DIMENSION_MISMATCH", "PIXEL_DIFFERENCE", "IMAGE_SPEC_MISMATCH",
})
"""Codes whose default kind is ``failed`` (the project's output is wrong; the agent can repair it)."""


class VisualError(Exception):
    """A coded visual failure.

    Attributes:
        code: the spec's code (``PAGE_UNREACHABLE``, ``IMAGE_CORRUPT``, ``VISUAL_BUSY`` …).
        message: one English sentence for the report.
        kind: ``blocked`` | ``failed`` | ``cancelled``; default: ``failed`` for :data:`FAILED_CODES`,
            ``cancelled`` for ``CANCELLED``, else ``blocked``.
    """

    def __init__(self, code: str, message: str, kind: Kind | None = None) -> None:
        super().__init__(f"[{code}] {message}")
        self.code = code
        self.message = message
        self.kind: Kind = kind or ("failed" if code in FAILED_CODES else "cancelled" if code == "CANCELLED" else "blocked")


def status_of(kind: Kind) -> str:
    """The result status of an error kind: blocked → ``blocked``, failed → ``failed``,
    cancelled → ``skipped`` (docs/visual.md §2.1)."""
    return {"blocked": "blocked", "failed": "failed", "cancelled": "skipped"}[kind]


_CORE_CODES = frozenset(c.value for c in ErrorCode)


def is_visual_code(code: str) -> bool:
    """True for a code of the visual package (every code outside the core catalogue
    :class:`~tianshu_mcp.core.errors.ErrorCode`): a blocking issue that a person resolves by
    approving baselines or rules, after which a rework re-verifies first."""
    return code not in _CORE_CODES
