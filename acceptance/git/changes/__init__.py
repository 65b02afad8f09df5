"""Net changes since the baseline: :func:`analyze_changes` (docs/acceptance.md §4.2, docs/acceptance.md §8.6).

One net diff ``baseline commit → working tree`` (:mod:`..diff`), untracked files counted whole,
unrecorded renames paired by content (:mod:`..renames`), pre-existing dirty files that are
unchanged excluded by their baseline fingerprint (:mod:`..baseline`), submodules reported by
commit, changes outside a monorepo project's sub-tree listed apart, and the signals of
:mod:`...signals` scanned over the added and removed lines. The result is an :class:`..models.Analysis`.
Part of the git side of acceptance (see :mod:`..git`, which re-exports the public names).

One module per step, called in this order by :mod:`.analyze` (each fills the
:class:`~.changeset.ChangeSet` the steps pass on):

* :mod:`.changeset`: the change list being built (:class:`~.changeset.ChangeSet`);
* :mod:`.tracked`: steps 2–3, unchanged pre-existing files, the diff base, the tracked rows;
* :mod:`.untracked`: step 4, untracked files and embedded repositories, unrecorded renames,
  :func:`owned_by_cli`;
* :mod:`.scope`: a monorepo project's sub-tree, check argvs made project-relative;
* :mod:`.summary`: steps 5 and 8, warnings and notes (:data:`BIG_FILE_LINES`, :data:`LOCKFILE_RE`);
* :mod:`.analyze`: :func:`analyze_changes`, the steps in order.
"""

from __future__ import annotations

from .analyze import analyze_changes
from .summary import BIG_FILE_LINES, LOCKFILE_RE
from .untracked import owned_by_cli

__all__ = ["analyze_changes", "owned_by_cli", "BIG_FILE_LINES", "LOCKFILE_RE"]
