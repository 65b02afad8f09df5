"""The shapes of a change analysis: ``report.json.analysis`` (docs/acceptance.md §1.4, §4.2).

:class:`Analysis` (changed and untracked files, :class:`Diffstat` of :class:`FileStat` rows,
:class:`Rename` and :class:`Submodule` entries, the signal counts and tampering hits of
:mod:`..signals`), filled in by :func:`.changes.analyze_changes`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..signals import Signals, TamperingItem


class FileStat(BaseModel):
    """One diffstat row: ``{file, add, del, binary?}`` (``binary`` present only when true)."""

    model_config = ConfigDict(populate_by_name=True)

    file: str
    add: int = 0
    del_: int = Field(0, alias="del")
    binary: bool | None = None


class Diffstat(BaseModel):
    """``{totalAdd, totalDel, perFile: [FileStat]}`` (line counts)."""

    model_config = ConfigDict(populate_by_name=True)

    total_add: int = Field(0, alias="totalAdd")
    total_del: int = Field(0, alias="totalDel")
    per_file: list[FileStat] = Field(default_factory=list, alias="perFile")


class Rename(BaseModel):
    """A rename since the baseline: ``{from, to, similarity}`` (similarity in percent, 0–100)."""

    model_config = ConfigDict(populate_by_name=True)

    from_: str = Field(alias="from")
    to: str
    similarity: int


class Submodule(BaseModel):
    """A submodule (or embedded repository) whose checked-out commit changed: ``{path, before,
    after}`` (commit shas; None when absent on that side or the repository has no commit)."""

    path: str
    before: str | None = None
    after: str | None = None


class Analysis(BaseModel):
    """``report.json.analysis`` (docs/acceptance.md §1.4 plus port fields).

    JSON: ``changedFiles, untrackedFiles, diffstat, signals, bigFileChanges, warnings, notes`` and
    ``renames [{from, to, similarity}]``, ``submodules [{path, before, after}]``, ``tampering
    [{kind, file, detail}]`` (always present, possibly empty).
    """

    model_config = ConfigDict(populate_by_name=True)

    changed_files: list[str] = Field(default_factory=list, alias="changedFiles")
    untracked_files: list[str] = Field(default_factory=list, alias="untrackedFiles")
    diffstat: Diffstat = Field(default_factory=Diffstat)
    signals: Signals = Field(default_factory=Signals)
    big_file_changes: list[str] = Field(default_factory=list, alias="bigFileChanges")
    warnings: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    renames: list[Rename] = Field(default_factory=list)
    submodules: list[Submodule] = Field(default_factory=list)
    tampering: list[TamperingItem] = Field(default_factory=list)
    outside_project: list[str] = Field(default_factory=list, alias="outsideProject")

    @property
    def has_changes(self) -> bool:
        """The zero-change gate's test (docs/acceptance.md §3.4; port: a moved submodule counts)."""
        return bool(
            self.changed_files
            or self.untracked_files
            or self.diffstat.total_add > 0
            or self.diffstat.total_del > 0
            or self.submodules
        )

    def to_json(self) -> dict[str, Any]:
        """The report.json ``analysis`` object (camelCase; ``binary`` only where true; submodule
        ``before``/``after`` always present, null when absent)."""
        data = self.model_dump(by_alias=True, exclude_none=True)
        data["submodules"] = [s.model_dump() for s in self.submodules]
        return data
