"""Who answers an ACP agent's ``session/request_permission``: the profile's policy, or the user.

A profile with ``"driver": "acp"`` may carry ``"acp": {"permissions": {...}}``
(:class:`AcpSettings`); each request is judged by where it acts (its tool call's ``locations``):

* every location inside the project (or its worktree) → ``insideProject`` (default ``allow``);
* any location outside it → ``outsideProject`` (default ``deny``);
* no location (a shell command, a fetch) → ``noLocation`` (default ``allow``: the agent runs the
  project's tests; the task's timeout, process-tree kill and verification still bound it).

``ask`` leaves the request to the user: the round ends ``needs_user`` with kind
``user_confirmation``, and the answer (``manage_task continue``) is remembered for that request
(:mod:`.answers`). Plain Python: no Prefect, no acceptance import.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ...core.i18n import _

Decision = Literal["allow", "deny", "ask"]


class AcpPermissions(BaseModel):
    """``acp.permissions`` of a profile: a :data:`Decision` per kind of request."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, strict=True)

    inside_project: Decision = Field("allow", alias="insideProject")
    outside_project: Decision = Field("deny", alias="outsideProject")
    no_location: Decision = Field("allow", alias="noLocation")


class AcpSettings(BaseModel):
    """``acp`` of a profile.

    Fields:
        permissions: :class:`AcpPermissions`.
        init_timeout_ms (``initTimeoutMs``, 60000): how long ``initialize`` + ``session/new``
            may take before the round is a ``setup_failed`` hard failure, ms.
        cancel_grace_ms (``cancelGraceMs``, 3000): after ``session/cancel``, how long the turn
            may take to end before the tree is killed, ms.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True, strict=True)

    permissions: AcpPermissions = Field(default_factory=AcpPermissions)
    init_timeout_ms: int = Field(60_000, gt=0, alias="initTimeoutMs")
    cancel_grace_ms: int = Field(3_000, ge=0, alias="cancelGraceMs")


@dataclass(frozen=True)
class PermissionAsk:
    """One permission request, reduced to what decides it.

    Attributes:
        title: the tool call's title ("Edit calc.py", "Run pytest").
        kind: the tool kind (``edit``, ``execute``, …) or "".
        paths: the absolute paths it acts on (may be empty).
    """

    title: str
    kind: str
    paths: tuple[str, ...]

    @property
    def key(self) -> str:
        """Stable identity of the request (what a user's answer applies to)."""
        raw = json.dumps([self.kind, sorted(self.paths), self.title if not self.paths else ""])
        return hashlib.sha256(raw.encode()).hexdigest()[:16]

    def question(self) -> str:
        """The text the user is asked (``pendingQuestion``)."""
        where = ", ".join(self.paths) if self.paths else _("no file named")
        return _("The agent asks for permission: {what} ({where}). Answer \"yes\" to allow it, anything else to deny "
                 "it.").format(what=self.title or self.kind or _("a tool call"), where=where)


def _inside(path: str, roots: list[str]) -> bool:
    real = os.path.realpath(path)
    return any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def decide(ask: PermissionAsk, permissions: AcpPermissions, project: str) -> Decision:
    """The profile's decision for ``ask`` in ``project`` (see the module doc)."""
    if not ask.paths:
        return permissions.no_location
    roots = [os.path.realpath(project)] if project else []
    if roots and all(_inside(p, roots) for p in ask.paths):
        return permissions.inside_project
    return permissions.outside_project
