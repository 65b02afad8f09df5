"""Porcelain status and the pre-work baseline (docs/acceptance.md §4.1).

:func:`capture_baseline` snapshots the project's git state before work starts (HEAD, the dirty
entries, a fingerprint of every pre-existing changed file and of the first 5000 untracked files);
:func:`worktree_status`, :func:`parse_porcelain` and :func:`list_untracked` read ``git status``
without writing. Paths are relative to the repository's top level (git porcelain's convention),
POSIX separators. Part of the git side of acceptance (see :mod:`tianshu_mcp.acceptance.git`).
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from typing import Any, Iterable

from pydantic import BaseModel, ConfigDict, Field

from ...core.git.run import _rev, is_git_repo, work_tree_root
from ...core.git.status import CACHE_PATH_RE, status_entries as _status_entries
from ...core.i18n import N_, _
from .files import _fingerprint

UNTRACKED_HASH_CAP = 5000
"""Only the first 5000 untracked files are hashed at baseline (docs/acceptance.md §4.1)."""
DELETED_HASH = "deleted"
"""port: hash recorded for a pre-existing deletion (the file is absent at baseline)."""

def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_porcelain(entries: Iterable[tuple[str, str]]) -> tuple[list[str], list[str], list[str]]:
    """Classify status entries (docs/acceptance.md §4.1 ``parsePorcelain``).

    Returns:
        ``(changed, untracked, others)``: ``??`` → untracked; a code with any of ``MADRCTU`` →
        changed (port: type changes ``T`` and unmerged ``U``/``AA``/``DD`` entries, e.g. a merge in
        progress, are pre-existing work too, never the agent's); everything else (``!!``) → others.
    """
    changed: list[str] = []
    untracked: list[str] = []
    others: list[str] = []
    for code, path in entries:
        if code == "??":
            untracked.append(path)
        elif any(c in "MADRCTU" for c in code):
            changed.append(path)
        else:
            others.append(path)
    return changed, untracked, others


def list_untracked(project: str | os.PathLike[str]) -> list[str]:
    """Current untracked files (top-level-relative), ``[]`` for a non-repo. Raises GitFailed."""
    entries = _status_entries(project) if is_git_repo(project) else []
    return parse_porcelain(entries)[1]


# --------------------------------------------------------------------------------------------
# Baseline (§4.1)
# --------------------------------------------------------------------------------------------


class Baseline(BaseModel):
    """Pre-work git snapshot, persisted as ``<taskDir>/baseline.json`` (docs/acceptance.md §4.1).

    JSON (camelCase, via ``model_dump(by_alias=True)``): ``isRepo, head (None when the repo has no
    commit), dirty, dirtyFiles (raw ``XY path`` entries), preExistingChanged, preExistingUntracked,
    preDirtyHashes {path: sha1}, preUntrackedHashes {path: sha1}, untrackedHashTruncated (count of
    untracked files beyond the 5000 cap), capturedAt (ISO-8601 UTC), message``.
    """

    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    is_repo: bool = Field(alias="isRepo")
    head: str | None = None
    dirty: bool = False
    dirty_files: list[str] = Field(default_factory=list, alias="dirtyFiles")
    pre_existing_changed: list[str] = Field(default_factory=list, alias="preExistingChanged")
    pre_existing_untracked: list[str] = Field(default_factory=list, alias="preExistingUntracked")
    pre_dirty_hashes: dict[str, str] = Field(default_factory=dict, alias="preDirtyHashes")
    pre_untracked_hashes: dict[str, str] = Field(default_factory=dict, alias="preUntrackedHashes")
    untracked_hash_truncated: int = Field(0, alias="untrackedHashTruncated")
    captured_at: str = Field(default_factory=_now_iso, alias="capturedAt")
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        """The baseline.json object (camelCase keys)."""
        return self.model_dump(by_alias=True)


NON_REPO_MESSAGE = N_("Not a git repository: change list/diffstat unavailable (command checks still run).")
"""``Baseline.message`` of a non-repository (a msgid: stored in the current locale's words)."""


def capture_baseline(project: str | os.PathLike[str]) -> Baseline:
    """Snapshot the project's git state before work starts (docs/acceptance.md §4.1). Never modifies
    the repository; a non-repo yields ``isRepo: False``.

    Raises:
        GitFailed: git refused or failed (see :func:`is_git_repo`, :func:`_status_entries`): the
            baseline cannot be captured, so the task must not start.

    Fingerprints (:func:`_fingerprint`: SHA-1 of the bytes, size and mtime above 4 MiB, the target
    of a symbolic link): every pre-existing changed file plus the first 5000 untracked files; a
    pre-existing deletion gets ``"deleted"``, a submodule or nested repository ``gitlink:<HEAD
    sha>`` (port).
    """
    root = work_tree_root(project)
    if root is None:
        return Baseline(is_repo=False, message=_(NON_REPO_MESSAGE))
    head = _rev(project, "HEAD")
    entries = _status_entries(project)
    changed, untracked, _others = parse_porcelain(entries)
    dirty_hashes: dict[str, str] = {}
    untracked_hashes: dict[str, str] = {}
    for f in changed:
        h = _fingerprint(root, f)
        if h is None and not os.path.lexists(root / f):
            h = DELETED_HASH  # port: a pre-existing deletion
        if h is not None:
            dirty_hashes[f] = h
    hashable = [f for f in untracked if not CACHE_PATH_RE.search(f)]  # port: caches are never analysed
    for f in hashable[:UNTRACKED_HASH_CAP]:
        h = _fingerprint(root, f)
        if h is not None:
            dirty_hashes[f] = h
            untracked_hashes[f] = h
    truncated = max(0, len(hashable) - UNTRACKED_HASH_CAP)
    n = len(entries)
    if head is None:
        message = _("No HEAD (empty repository).") + (_(" Working tree has {n} entries.").format(n=n) if n else "")
    elif n:
        message = _("Baseline HEAD={head}, working tree dirty ({n} entries).").format(head=head, n=n)
    else:
        message = _("Baseline HEAD={head}, working tree clean.").format(head=head)
    if truncated:
        message += _(" {n} untracked file(s) beyond the first {cap} were not hashed; changes to them cannot be "
                     "attributed.").format(n=truncated, cap=UNTRACKED_HASH_CAP)
    return Baseline(
        is_repo=True,
        head=head,
        dirty=n > 0,
        dirty_files=[f"{code} {path}" for code, path in entries],
        pre_existing_changed=changed,
        pre_existing_untracked=untracked,
        pre_dirty_hashes=dirty_hashes,
        pre_untracked_hashes=untracked_hashes,
        untracked_hash_truncated=truncated,
        message=message,
    )
