"""The round's change as one patch: ``git diff`` of the analysed files against the baseline, untracked
files included as added files (:func:`change_patch`, written next to the report as ``report-<N>.patch``).

The patch covers exactly the files the change analysis counts (:class:`.models.Analysis`: the tracked
rows, rename sources, submodules and the untracked files counted whole), so pre-existing dirty files
the agent did not touch, tool caches and the checks' own files stay out of it. Untracked files are
shown as new files the way ``git diff`` shows an intent-to-add entry: they are marked ``git add -N``
in a private copy of the index (``GIT_INDEX_FILE``), with a private object directory in front of the
repository's (``GIT_OBJECT_DIRECTORY`` + ``GIT_ALTERNATE_OBJECT_DIRECTORIES``), so nothing is written
to the repository or its index. One diff with rename detection (``-M``) then pairs a moved file git
has not recorded too. Binary files appear as git shows them (``Binary files … differ``). Part of the
git side of acceptance (see :mod:`.git`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator, Sequence

from ...core.git.run import _DIFF_OPTS, git_failed, run_git, work_tree_root
from .baseline import Baseline
from .changes.tracked import diff_base
from .models import Analysis

__all__ = ["change_patch", "PATHSPEC_CHUNK_BYTES"]

PATHSPEC_CHUNK_BYTES = 96 * 1024
"""At most this many bytes of paths per git call (the argv limit is larger; a huge change list is
diffed in several calls, renames first so a pair stays in one call)."""


def _chunks(paths: Sequence[str], limit: int = PATHSPEC_CHUNK_BYTES) -> Iterator[list[str]]:
    chunk: list[str] = []
    size = 0
    for p in paths:
        n = len(p.encode("utf-8")) + 1
        if chunk and size + n > limit:
            yield chunk
            chunk, size = [], 0
        chunk.append(p)
        size += n
    if chunk:
        yield chunk


def _git(args: Sequence[str], root: Path, env: dict[str, str], ok: Sequence[int] = (0,)) -> str:
    r = run_git(args, root, env=env)
    if r.timed_out or r.status not in ok:
        raise git_failed(args, root, r)
    return r.stdout


def change_patch(baseline: Baseline, project: str | os.PathLike[str], analysis: Analysis) -> str:
    """The unified diff (``git diff -M``, 3 context lines, ``a/``/``b/`` prefixes) of the files
    ``analysis`` counts, from the baseline commit (or the empty tree) to the working tree, untracked
    files as new files; ``""`` when nothing changed or the project is not a git repository.

    Args:
        baseline: the round's pre-work baseline.
        project: the project root (a monorepo package: paths stay relative to the repository's top).
        analysis: the round's change analysis (:func:`.changes.analyze_changes`).

    Returns:
        The patch text (UTF-8, undecodable bytes replaced; at most 64 MiB per git call).

    Raises:
        GitFailed: git failed or timed out, or the baseline commit is gone.
    """
    root = work_tree_root(project) if baseline.is_repo else None
    if root is None:
        return ""
    froms = [r.from_ for r in analysis.renames]
    paths = list(dict.fromkeys([*froms, *(r.to for r in analysis.renames), *analysis.changed_files,
                                *analysis.untracked_files]))
    if not paths:
        return ""
    base = diff_base(project, baseline)
    with tempfile.TemporaryDirectory(prefix="tianshu-patch-") as tmp:
        env = {"GIT_LITERAL_PATHSPECS": "1"}
        index = Path(_git(["rev-parse", "--git-path", "index"], root, env).strip())
        index = index if index.is_absolute() else root / index
        objects = Path(_git(["rev-parse", "--git-path", "objects"], root, env).strip())
        objects = objects if objects.is_absolute() else root / objects
        private = Path(tmp) / "index"
        if index.is_file():
            # with its times: a copy stamped now makes git take a file changed in the index's
            # second at the same size for unchanged (racy git), and the patch left out calc.py
            shutil.copy2(index, private)
        env.update(GIT_INDEX_FILE=str(private), GIT_OBJECT_DIRECTORY=str(Path(tmp) / "objects"),
                   GIT_ALTERNATE_OBJECT_DIRECTORIES=str(objects.resolve()))
        (Path(tmp) / "objects").mkdir()
        untracked = {f for chunk in _chunks(paths)
                     for f in _git(["ls-files", "--others", "-z", "--", *chunk], root, env).split("\0") if f}
        for chunk in _chunks(sorted(untracked)):
            _git(["add", "--intent-to-add", "--force", "--", *chunk], root, env)
        # the private index's stat data refreshed from the files' contents: a diff never trusts
        # a stale entry (exit 1: some paths need an update, which is what a refresh reports)
        _git(["update-index", "-q", "--really-refresh"], root, env, ok=(0, 1))
        parts = [_git(["diff", "-M", *_DIFF_OPTS, "--src-prefix=a/", "--dst-prefix=b/", base, "--", *chunk],
                      root, env) for chunk in _chunks(paths)]
    return "".join(parts)

