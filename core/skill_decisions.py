"""The skill self-install's decision table and its stable warning codes (docs/agents-tasks.md §2.14).

Pure: 5 target states × 3 modes → an :class:`Action`, a code and the human text. The file work
is :mod:`.skill_install`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Literal

# stable codes that start the result's warning lines (log searches and tests match on them)
SKILL_INSTALL_FAILED = "SKILL_INSTALL_FAILED"
"""The target could not be read or written (the OS error follows); nothing else changed."""
SKILL_INSTALL_BUSY = "SKILL_INSTALL_BUSY"
"""Another process held the install lock past the timeout; this start did nothing."""
SKILL_SOURCE_MISSING = "SKILL_SOURCE_MISSING"
"""The package has no skill directory (a broken install); nothing was done."""
SKILL_UPDATED = "SKILL_UPDATED"
"""An existing tree was backed up and replaced (stale copy, or an approved unknown one)."""
SKILL_UPDATE_PENDING = "SKILL_UPDATE_PENDING"
"""``prompt`` mode kept a stale copy and recorded ``pendingUpdate`` in the manifest."""
SKILL_LOCAL_EDITS = "SKILL_LOCAL_EDITS"
"""The installed tree differs from its manifest record: kept, whatever the mode."""
SKILL_UNKNOWN_SOURCE = "SKILL_UNKNOWN_SOURCE"
"""A tree without a valid manifest differs from the package's: kept unless approved."""
SKILL_ROLLBACK_FAILED = "SKILL_ROLLBACK_FAILED"
"""A failed install could not rename the old tree back; the message names where it is."""
SKILL_PRUNE_FAILED = "SKILL_PRUNE_FAILED"
"""An old backup could not be removed."""

Mode = Literal["auto", "prompt", "approve"]
"""Decision column: ``auto`` (default), ``prompt`` (``skills.autoInstall: "prompt"``),
``approve`` (``--approve-skill-update`` / ``TIANSHU_MCP_APPROVE_SKILL_UPDATE=1``)."""
MODES: tuple[Mode, ...] = ("auto", "prompt", "approve")


class TargetState(str, Enum):
    """What the target directory holds, relative to the package's skill (docs/agents-tasks.md §2.14)."""

    ABSENT = "absent"
    """Nothing at the target path."""
    CURRENT = "current"
    """A directory whose content equals the package's."""
    STALE = "stale"
    """Valid manifest; content equals its record but not the package: an untouched older copy."""
    LOCAL_EDITS = "local_edits"
    """Valid manifest; content differs from its record: someone edited the installed skill."""
    UNKNOWN = "unknown"
    """No valid manifest (missing, corrupt, or the target is not a directory) and content ≠ package."""


class Action(str, Enum):
    """What :func:`install_skill` does for a decision."""

    INSTALL = "install"
    SKIP = "skip"
    OVERWRITE = "overwrite"
    """Back the old tree up, then install."""
    KEEP = "keep"
    """Leave the target untouched (a warning says why)."""
    HOLD = "hold"
    """Leave the content untouched and record ``pendingUpdate`` in the manifest."""


@dataclass(frozen=True)
class Decision:
    """One cell of the decision table.

    Attributes:
        state, mode: the cell. action: what happens. code: the warning's stable code (None:
        nothing to warn about, the text is logged at INFO). text: the human explanation.
    """

    state: TargetState
    mode: Mode
    action: Action
    code: str | None
    text: str


_APPROVE_HINT = "start the server once with --approve-skill-update (or TIANSHU_MCP_APPROVE_SKILL_UPDATE=1)"
_TEXTS = {
    "install": "not installed yet: installing the package's skill",
    "skip": "already equals the package's skill: nothing to install",
    "stale": "is an untouched copy of an older package: backed up and replaced by this package's version",
    "hold": ("is an untouched copy of an older package and skills.autoInstall is \"prompt\": kept as it is "
             f"(not overwritten automatically), pendingUpdate recorded in the manifest; {_APPROVE_HINT} to update it"),
    "local": ("has local edits (its content differs from the manifest's record): kept as it is and NOT updated; "
              "approval does not override local edits — move the directory away to get this package's version"),
    "unknown": ("holds a skill of unknown origin (no valid manifest) that differs from the package's: kept as it is "
                f"(not overwritten automatically); {_APPROVE_HINT} to back it up and replace it"),
    "approved": "holds a skill of unknown origin; the update is approved: backed up and replaced by this package's version",
}
_TABLE: dict[tuple[TargetState, Mode], tuple[Action, str | None, str]] = {}
for _mode in MODES:
    _TABLE[(TargetState.ABSENT, _mode)] = (Action.INSTALL, None, _TEXTS["install"])
    _TABLE[(TargetState.CURRENT, _mode)] = (Action.SKIP, None, _TEXTS["skip"])
    _TABLE[(TargetState.LOCAL_EDITS, _mode)] = (Action.KEEP, SKILL_LOCAL_EDITS, _TEXTS["local"])
    _TABLE[(TargetState.STALE, _mode)] = ((Action.HOLD, SKILL_UPDATE_PENDING, _TEXTS["hold"]) if _mode == "prompt"
                                          else (Action.OVERWRITE, SKILL_UPDATED, _TEXTS["stale"]))
    _TABLE[(TargetState.UNKNOWN, _mode)] = ((Action.OVERWRITE, SKILL_UPDATED, _TEXTS["approved"]) if _mode == "approve"
                                            else (Action.KEEP, SKILL_UNKNOWN_SOURCE, _TEXTS["unknown"]))


def decide(state: TargetState, mode: Mode) -> Decision:
    """The decision table of docs/agents-tasks.md §2.14 (pure).

    ============ ====================== ========================= ======================
    state        auto                   prompt                    approve
    ============ ====================== ========================= ======================
    absent       install                install                   install
    current      skip (repair manifest) skip                      skip
    stale        backup+overwrite       keep + warn + pending     backup+overwrite
    local_edits  keep + loud warn       keep + loud warn          keep + loud warn
    unknown      keep + warn            keep + warn               backup+overwrite
    ============ ====================== ========================= ======================

    Raises:
        ValueError: an unknown mode.
    """
    if mode not in MODES:
        raise ValueError(f"unknown skill install mode {mode!r} (one of {', '.join(MODES)})")
    action, code, text = _TABLE[(TargetState(state), mode)]
    return Decision(state=TargetState(state), mode=mode, action=action, code=code, text=text)
