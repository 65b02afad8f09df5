"""The pristine tree (docs/integrity.md §1): the baseline's test infrastructure with the agent's other
changes on top, in a throwaway worktree.

:func:`agent_changes` lists what the agent changed relative to the pre-work tree (tracked files
against the baseline head — also what it committed —, and untracked files); :func:`pristine_tree`
starts from the baseline worktree (:func:`..grading.baseline_runs.baseline_worktree`: head + the
pre-work dirty state) and copies every changed file that is not test infrastructure
(:mod:`.infra`) from the project. Test infrastructure stays as it was: a changed test file keeps
its baseline text, a deleted one is there, a new one is left out; ``package.json`` takes the
baseline's ``scripts`` (and the runners' config keys) into the agent's file; a Rust source keeps
the agent's code with the baseline's ``#[cfg(test)]`` modules. The worktree is removed on exit.

The project is never written.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Mapping

from ...core.i18n import _
from ..git import Baseline, run_git
from ..grading.baseline_runs import Worktree, baseline_worktree
from .ignored import planted
from .infra import InfraKind, InfraRules, follow_test_links

__all__ = ["AgentChanges", "PristineTree", "agent_changes", "pristine_tree", "write_holdout_files"]


@dataclass
class AgentChanges:
    """Top-relative paths the agent changed since the pre-work tree (candidates: a path whose
    content equals the baseline's is dropped when the tree is built).

    Attributes:
        paths: changed, added or deleted paths (tracked and untracked, not ignored).
        infra: those that are test infrastructure, with how each is kept.
        notes: what cannot be protected (a test directory linking outside the repository).
        ignored: ignored code or test-infrastructure files the agent wrote (left out too).
    """

    paths: list[str] = field(default_factory=list)
    infra: dict[str, InfraKind] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)


def agent_changes(project: Path, baseline: Baseline, rules: InfraRules,
                  ignored_before: Mapping[str, str] | None = None) -> AgentChanges:
    """What the agent changed (see :class:`AgentChanges`).

    Tracked: ``git diff --name-only --no-renames <baseline head>`` (working tree against the
    baseline commit, so commits the agent made count too); untracked: ``ls-files --others
    --exclude-standard``; plus the pre-work dirty and untracked paths (they may have changed
    again). Paths are relative to the repository's top level. Ignored code and test-infrastructure
    files new or changed since ``ignored_before`` (:mod:`.ignored`) are test infrastructure the
    pristine tree leaves out. Never raises: git errors give fewer candidates, never a wrong
    "clean" (the caller builds the tree from what it gets).
    """
    top_r = run_git(["rev-parse", "--show-toplevel"], project)
    top = Path(top_r.stdout.strip()) if top_r.ok and top_r.stdout.strip() else project
    try:
        prefix = Path(os.path.realpath(project)).relative_to(os.path.realpath(top)).as_posix()
    except ValueError:
        prefix = ""
    prefix = "" if prefix == "." else prefix
    found: dict[str, None] = {}
    if baseline.head:
        r = run_git(["diff", "--name-only", "--no-renames", "-z", baseline.head, "--", "."], top)
        for p in r.stdout.split("\0") if r.ok else []:
            if p:
                found[p] = None
    r = run_git(["ls-files", "--others", "--exclude-standard", "-z", "--", "."], top)
    for p in r.stdout.split("\0") if r.ok else []:
        if p:
            found[p] = None
    # files git was told not to look at (assume-unchanged: a lower-case tag; skip-worktree: S):
    # `git diff` trusts those bits, so their content is compared here instead
    r = run_git(["ls-files", "-v", "-z"], top)
    for e in r.stdout.split("\0") if r.ok else []:
        if len(e) > 2 and (e[0].islower() or e[0] == "S"):
            found[e[2:]] = None
    for p in [*baseline.pre_existing_changed, *baseline.pre_existing_untracked]:
        found[f"{prefix}/{p}" if prefix else p] = None
    r = run_git(["ls-files", "-s", "-z"], top)
    links = [e.split("\t", 1)[1] for e in (r.stdout.split("\0") if r.ok else []) if e.startswith("120000 ") and "\t" in e]
    out = AgentChanges(paths=sorted(found), notes=follow_test_links(rules, top, links))
    for p in out.paths:
        kind = rules.kind(p)
        if kind is not None:
            out.infra[p] = kind
    for p in planted(top, ignored_before, lambda rel: rules.kind(rel) is not None):
        out.ignored.append(p)
        out.infra[p] = InfraKind.FILE
        if p not in found:
            out.paths.append(p)
    return out


@dataclass
class PristineTree:
    """A built pristine tree (yielded by :func:`pristine_tree`).

    Attributes:
        project: the project's directory inside the worktree (where checks run).
        top: the worktree's top level.
        restored: test-infrastructure files the agent changed or deleted, kept at the baseline.
        excluded: test-infrastructure files the agent added, left out.
        merged: files partly kept (``package.json`` keys, Rust test modules), with what.
        copied: the agent's non-test files copied in (count).
        build_ms: time to build the tree, ms.
        notes: what could not be reproduced.
    """

    project: Path
    top: Path
    restored: list[str] = field(default_factory=list)
    excluded: list[str] = field(default_factory=list)
    merged: list[str] = field(default_factory=list)
    copied: int = 0
    build_ms: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def differs(self) -> bool:
        """True when the tree differs from the agent's tree (some test infrastructure was kept)."""
        return bool(self.restored or self.excluded or self.merged)


def _read(path: Path) -> bytes | None:
    try:
        if path.is_symlink():
            return b"\0link:" + os.readlink(path).encode("utf-8", "surrogateescape")
        return path.read_bytes() if path.is_file() else None
    except OSError:
        return None


def _place(src: Path, dst: Path) -> None:
    """Make ``dst`` what ``src`` is (a file, a symlink, or nothing)."""
    if os.path.lexists(dst) and not dst.is_dir():
        dst.unlink()
    elif dst.is_dir() and not dst.is_symlink():
        shutil.rmtree(dst)
    if not os.path.lexists(src):
        return
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_symlink():
        os.symlink(os.readlink(src), dst)
    else:
        shutil.copy2(src, dst)


def _merge_json(agent: bytes, base: bytes | None, keys: tuple[str, ...]) -> bytes | None:
    """The agent's JSON object with ``keys`` as in ``base`` (absent there → removed). None when
    the agent's file is not a JSON object (the baseline's file is then used whole)."""
    try:
        mine = json.loads(agent.decode("utf-8-sig"))
        theirs = json.loads(base.decode("utf-8-sig")) if base is not None else {}
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(mine, dict) or not isinstance(theirs, dict):
        return None
    for k in keys:
        if k in theirs:
            mine[k] = theirs[k]
        else:
            mine.pop(k, None)
    return (json.dumps(mine, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _splice(agent: str, base: str | None, spans_of) -> str:  # type: ignore[no-untyped-def]
    """The agent's source without its embedded test code, with the baseline's appended."""
    kept, pos = [], 0
    for a, b in spans_of(agent):
        kept.append(agent[pos:a])
        pos = b
    kept.append(agent[pos:])
    text = "".join(kept).rstrip("\n") + "\n"
    if base:
        blocks = [base[a:b] for a, b in spans_of(base)]
        if blocks:
            text += "\n" + "\n\n".join(blocks) + "\n"
    return text


def _apply(wt: Worktree, project_top: Path, changes: AgentChanges, rules: InfraRules, tree: PristineTree) -> None:
    for rel in changes.paths:
        src, dst = project_top / rel, wt.top / rel
        mine, theirs = _read(src), _read(dst)
        if mine == theirs:
            continue
        kind = changes.infra.get(rel)
        if kind is None:
            _place(src, dst)
            tree.copied += 1
        elif kind is InfraKind.FILE:
            (tree.excluded if theirs is None else tree.restored).append(rel)
        elif kind is InfraKind.JSON_KEYS:
            keys = rules.json_keys.get(os.path.basename(rel), ())
            merged = _merge_json(mine, theirs, keys) if mine is not None and not mine.startswith(b"\0link:") else None
            if merged is None:
                (tree.excluded if theirs is None else tree.restored).append(rel)
                continue
            agents = _merge_json(mine, mine, keys)  # the agent's file in the same layout
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(merged)
            if merged != agents:  # some kept key differs from the agent's: the trees differ
                tree.merged.append(f"{rel} ({', '.join(k for k in keys)})")
            else:
                tree.copied += 1
        else:  # embedded test code
            spans = rules.spans(rel)
            if mine is None or mine.startswith(b"\0link:") or spans is None:
                _place(src, dst)
                tree.copied += 1
                continue
            agent_text = mine.decode("utf-8", "surrogateescape")
            base_text = theirs.decode("utf-8", "surrogateescape") if theirs is not None else None
            spliced = _splice(agent_text, base_text, spans)
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(spliced.encode("utf-8", "surrogateescape"))
            agent_tests = [agent_text[a:b] for a, b in spans(agent_text)]
            base_tests = [base_text[a:b] for a, b in spans(base_text)] if base_text else []
            if agent_tests != base_tests:
                tree.merged.append(f"{rel} (test modules)")
            tree.copied += 1


@contextmanager
def pristine_tree(project: str | os.PathLike[str], task_dir: str | os.PathLike[str], baseline: Baseline,
                  rules: InfraRules, changes: AgentChanges | None = None) -> Iterator[PristineTree | None]:
    """Build the pristine tree of ``project`` (see the module doc); remove it on exit.

    Args:
        project: the project root (the agent's tree).
        task_dir: the task directory holding the baseline state (:mod:`..grading.state`).
        baseline: the pre-work baseline (needs a head).
        rules: the test-infrastructure rules (:func:`.infra.infra_rules`).
        changes: :func:`agent_changes` when already computed.

    Yields:
        :class:`PristineTree`, or None when no worktree could be made (the notes list is lost;
        the caller reports "pristine tree unavailable"). Never writes the project.
    """
    started = time.monotonic()
    proj = Path(project)
    notes: list[str] = []
    changes = changes if changes is not None else agent_changes(proj, baseline, rules)
    with baseline_worktree(proj, Path(task_dir), baseline, notes) as wt:
        if wt is None:
            yield None
            return
        tree = PristineTree(project=wt.project, top=wt.top, notes=notes)
        _apply(wt, wt.source_top, changes, rules, tree)
        tree.build_ms = int((time.monotonic() - started) * 1000)
        yield tree


def write_holdout_files(tree: PristineTree, files: Mapping[str, str]) -> list[str]:
    """Write a holdout check's ``files`` (project-relative) into the pristine tree (never the
    project). Returns the paths written; a path that would leave the tree is skipped."""
    written: list[str] = []
    root = os.path.realpath(tree.project)
    for rel, text in files.items():
        dst = Path(os.path.realpath(tree.project / rel))
        if not str(dst).startswith(root + os.sep):
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        if dst.is_symlink():
            dst.unlink()
        dst.write_text(text, encoding="utf-8")
        written.append(rel)
    if not written and files:
        tree.notes.append(_("a holdout check's files could not be placed in the pristine tree"))
    return written
