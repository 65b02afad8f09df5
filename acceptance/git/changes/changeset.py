"""The change list of a round while :func:`.analyze.analyze_changes` builds it (:class:`ChangeSet`),
filled by the steps in order: tracked rows (:mod:`.tracked`), untracked files and unrecorded
renames (:mod:`.untracked`), the monorepo scope (:mod:`.scope`). Paths are relative to the
repository's top level, POSIX."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..diff import _RawEntry
from ..models import FileStat, Rename, Submodule

__all__ = ["ChangeSet", "UntrackedSkips"]


@dataclass
class UntrackedSkips:
    """Untracked files left out of the analysis, counted for its notes.

    Attributes:
        cache: tool caches (:data:`tianshu_mcp.core.git.status.CACHE_PATH_RE`).
        check_made: files the acceptance checks themselves created.
        owned: files the agent's CLI keeps for itself (``ownedPaths``).
        unattributable: pre-existing files beyond the baseline's hash cap.
    """

    cache: int = 0
    check_made: int = 0
    owned: int = 0
    unattributable: int = 0


@dataclass
class ChangeSet:
    """The net changes since the baseline, as collected so far.

    Attributes:
        rows: tracked changes, path → ``(added lines, deleted lines, binary)``, in diff order (a
            rename under its new path).
        renames: recorded renames, then the ones paired by content.
        submodules: submodules and embedded repositories whose commit changed.
        deletions: the diff's deletions (candidates for unrecorded renames).
        index_only: files removed from the index only (``git rm --cached``), unchanged on disk.
        added: per file, the added lines (all lines of a new untracked text file).
        removed: per file, the removed lines.
        untracked_files: untracked files counted as changes (new, or pre-existing and changed).
        untracked_rows: their diffstat rows (counted whole).
        new_untracked: untracked files that did not exist at the baseline.
        embedded: repositories nested in the work tree (listed in ``submodules`` too).
        deleted_files: deleted files not paired with a new file.
        outside: changes outside a monorepo project's sub-tree (left out of everything else).
        skipped: untracked files left out, counted.
        notes: notes for ``analysis.notes``, in the order found.
    """

    rows: dict[str, tuple[int, int, bool]] = field(default_factory=dict)
    renames: list[Rename] = field(default_factory=list)
    submodules: list[Submodule] = field(default_factory=list)
    deletions: list[_RawEntry] = field(default_factory=list)
    index_only: list[str] = field(default_factory=list)
    added: dict[str, list[str]] = field(default_factory=dict)
    removed: dict[str, list[str]] = field(default_factory=dict)
    untracked_files: list[str] = field(default_factory=list)
    untracked_rows: dict[str, FileStat] = field(default_factory=dict)
    new_untracked: list[str] = field(default_factory=list)
    embedded: list[str] = field(default_factory=list)
    deleted_files: list[str] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)
    skipped: UntrackedSkips = field(default_factory=UntrackedSkips)
    notes: list[str] = field(default_factory=list)

    def file_stats(self) -> list[FileStat]:
        """The diffstat rows: tracked rows (``binary`` only when true), then untracked ones."""
        per_file = [FileStat(file=f, add=a, del_=d, binary=True if b else None) for f, (a, d, b) in self.rows.items()]
        return per_file + list(self.untracked_rows.values())

    def changed_files(self) -> list[str]:
        """``changedFiles``: the tracked rows, then registered submodules without a row."""
        out = list(self.rows)
        for s in self.submodules:
            if s.path not in self.embedded and s.path not in self.rows:
                out.append(s.path)
        return out
