"""Baseline state capture for baseline grading, before the agent starts (see :mod:`.grading`).

:func:`capture_baseline_state` records ``git stash create`` of the tracked dirty state (run on a
*copy* of the index: the user's index, worktree and stash list are untouched; only unreferenced
objects are written) and copies the pre-existing untracked files into
``<taskDir>/baseline-untracked/`` (≤ 50 MiB); ``baseline-state.json`` holds the rest. Also the small
git and file helpers the baseline worktree (:mod:`.baseline_runs`) shares. Never modifies the
project's sources, index, refs or stash.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

from ...core.files import atomic_write_json, read_json_safe
from ...core.i18n import _
from ..config import resolve_layers
from ..git import CACHE_PATH_RE, is_git_repo, run_git
from ..integrity.ignored import ignored_snapshot

log = logging.getLogger("tianshu_mcp")

STATE_FILE = "baseline-state.json"
UNTRACKED_DIR = "baseline-untracked"
UNTRACKED_CAP_BYTES = 50 * 1024 * 1024
"""Pre-existing untracked files copied into the task dir, in total at most this many bytes."""

_STATE_VERSION = 1


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# --------------------------------------------------------------------------------------------
# git helpers (never write the user's index, refs, stash or worktree)
# --------------------------------------------------------------------------------------------


def _toplevel(project: str | os.PathLike[str]) -> Path | None:
    r = run_git(["rev-parse", "--show-toplevel"], project)
    top = r.stdout.strip() if r.ok else ""
    return Path(top) if top else None


def _head(project: str | os.PathLike[str]) -> str | None:
    r = run_git(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], project)
    sha = r.stdout.strip()
    return sha if r.ok and sha else None


def _safe_rel(rel: str) -> bool:
    p = Path(rel)
    return bool(rel) and not p.is_absolute() and ".." not in p.parts


def _copy_entry(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.is_symlink() or dst.is_file():
        dst.unlink()
    if src.is_symlink():
        os.symlink(os.readlink(src), dst)
    else:
        shutil.copy2(src, dst)


# --------------------------------------------------------------------------------------------
# Baseline state capture (before the agent starts)
# --------------------------------------------------------------------------------------------


def _stash_create(top: Path) -> tuple[str | None, str | None]:
    """``git stash create`` on a copy of the index: (commit id or None, error note or None)."""
    r = run_git(["rev-parse", "--git-path", "index"], top)
    rel = r.stdout.strip() if r.ok else ""
    index = Path(rel) if os.path.isabs(rel) else top / rel
    with tempfile.TemporaryDirectory(prefix="tianshu-index-") as tmp:
        tmp_index = Path(tmp) / "index"
        try:
            if index.is_file():  # with its times: a copy stamped now hides a same-size edit of that second (racy git)
                shutil.copy2(index, tmp_index)
        except OSError as exc:
            return None, _("the index could not be copied ({error})").format(error=exc)
        env = {
            "GIT_INDEX_FILE": str(tmp_index),
            # stash needs an identity; never depend on the user's config for an unreferenced commit
            "GIT_AUTHOR_NAME": "tianshu-mcp", "GIT_AUTHOR_EMAIL": "tianshu-mcp@localhost",
            "GIT_COMMITTER_NAME": "tianshu-mcp", "GIT_COMMITTER_EMAIL": "tianshu-mcp@localhost",
        }
        r = run_git(["stash", "create", "tianshu-mcp baseline"], top, env=env)
        status, out, err = r.status, r.stdout, r.stderr
    if status != 0:
        if status == 1 and not (err or out).strip() and run_git(["diff", "--quiet", "HEAD", "--"], top).ok:
            return None, None  # nothing to stash: a fresh index copy of an unchanged tree answers 1
        return None, _("git stash create failed: {said}").format(said=(err or out).strip()[:300])
    sha = out.strip()
    return (sha or None), None


def _list_untracked_top(top: Path) -> list[str]:
    r = run_git(["ls-files", "--others", "--exclude-standard", "-z"], top)
    if not r.ok:
        return []
    return [p for p in r.stdout.split("\0") if p]


def capture_baseline_state(project: str | os.PathLike[str], task_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Record what is needed to rebuild the pre-work tree later; call it before the agent starts.

    Writes ``<task_dir>/baseline-state.json`` and copies the pre-existing untracked files (tool
    caches skipped, at most :data:`UNTRACKED_CAP_BYTES` in total) into
    ``<task_dir>/baseline-untracked/``. The tracked dirty state is kept as a ``git stash create``
    commit (``dirtyStashCommit``), made on a temporary copy of the index: the user's index,
    working tree, refs and stash list are not touched (the commit is unreferenced).

    Args:
        project: project root (inside a git repository or not).
        task_dir: the task directory.

    Returns:
        The state: ``{version, capturedAt, isRepo, head, toplevel, projectRel, dirtyStashCommit,
        untrackedDir, untrackedFiles, untrackedBytes, untrackedSkipped, capped, notes}``. Never
        raises (an I/O problem becomes a note).
    """
    tdir = Path(task_dir)
    state: dict[str, Any] = {
        "version": _STATE_VERSION,
        "capturedAt": _now_iso(),
        "isRepo": False,
        "head": None,
        "toplevel": None,
        "projectRel": "",
        "dirtyStashCommit": None,
        "untrackedDir": UNTRACKED_DIR,
        "untrackedFiles": [],
        "untrackedBytes": 0,
        "untrackedSkipped": 0,
        "capped": False,
        "notes": [],
    }
    try:
        _capture_into(Path(project), tdir, state)
    except Exception as exc:  # noqa: BLE001 - a capture problem must not stop the task
        log.exception("capturing the baseline state failed")
        state["notes"].append(_("capturing the baseline state failed: {error}").format(error=exc))
    try:
        atomic_write_json(tdir / STATE_FILE, state)
    except OSError as exc:
        log.warning("could not write %s: %s", tdir / STATE_FILE, exc)
    return state


def _capture_into(project: Path, tdir: Path, state: dict[str, Any]) -> None:
    if not is_git_repo(project):
        state["notes"].append(_("not a git repository: baseline checks cannot run"))
        return
    top = _toplevel(project)
    if top is None:
        state["notes"].append(_("the repository's top level could not be determined"))
        return
    state.update(isRepo=True, toplevel=str(top))
    try:
        state["projectRel"] = Path(os.path.realpath(project)).relative_to(os.path.realpath(top)).as_posix()
        if state["projectRel"] == ".":
            state["projectRel"] = ""
    except ValueError:
        state["projectRel"] = ""
    head = _head(project)
    state["head"] = head
    if head is None:
        state["notes"].append(_("unborn HEAD (no commit yet): baseline checks cannot run"))
        return
    sha, err = _stash_create(top)
    state["dirtyStashCommit"] = sha
    if err:
        state["notes"].append(err)
    dest = tdir / UNTRACKED_DIR
    total = 0
    copied: list[str] = []
    skipped = 0
    for rel in sorted(_list_untracked_top(top)):
        if CACHE_PATH_RE.search(rel) or not _safe_rel(rel):
            continue
        src = top / rel
        try:
            if not (src.is_symlink() or src.is_file()):
                continue
            size = 0 if src.is_symlink() else src.stat().st_size
            if total + size > UNTRACKED_CAP_BYTES:
                skipped += 1
                continue
            _copy_entry(src, dest / rel)
        except OSError as exc:
            state["notes"].append(_("untracked file {file} could not be copied: {error}").format(file=rel, error=exc))
            continue
        total += size
        copied.append(rel)
    state.update(untrackedFiles=copied, untrackedBytes=total, untrackedSkipped=skipped, capped=skipped > 0,
                 ignored=ignored_snapshot(top))
    if skipped:
        state["notes"].append(
            _("{n} pre-existing untracked file(s) were not copied (the copies are capped at {mb} MB): the baseline "
              "run does not see them").format(n=skipped, mb=UNTRACKED_CAP_BYTES // (1024 * 1024))
        )


def maybe_capture_baseline_state(
    project: str | os.PathLike[str],
    task_dir: str | os.PathLike[str],
    home: str | os.PathLike[str],
    override: Mapping[str, Any] | None = None,
) -> dict[str, Any] | None:
    """:func:`capture_baseline_state` when the resolved acceptance layers set
    ``baselineChecks: true`` or leave ``testIntegrity`` on (its default; the pristine tree and the
    baseline run rebuild the pre-work tree from it), and no state is stored yet; None otherwise. Never raises (a broken
    config layer is reported by the verify round itself)."""
    try:
        merged, _sources = resolve_layers(project, home, override)
    except Exception:  # noqa: BLE001
        return None
    if not merged.baseline_checks and (merged.test_integrity or "protect") == "off":
        return None  # neither baseline grading nor verification integrity (docs/integrity.md) needs the state
    existing = load_baseline_state(task_dir)
    return existing if existing is not None else capture_baseline_state(project, task_dir)


def load_baseline_state(task_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The stored ``baseline-state.json``, or None."""
    data = read_json_safe(Path(task_dir) / STATE_FILE)
    return data if isinstance(data, dict) else None
