"""The verification-integrity corpus (docs/integrity.md): the shared machinery.

What lives here: the :class:`Project` and :class:`Case` types of the scenario table, small edit
builders (:func:`write`, :func:`replace`, :func:`delete` …) with which a case describes what "the
agent" did, the session templates (each fixture repository is built and committed once, then copied
per case), and :func:`run_case`, which does what ``run_task`` does around one verify round (baseline,
pinned rules, baseline state → the agent's change → :func:`verify_round`) without Prefect or MCP.

The projects and cases themselves are in :mod:`integrity_corpus_py` (pytest, unittest),
:mod:`integrity_corpus_js` (node --test, jest, vitest, mocha) and :mod:`integrity_corpus_native`
(go, cargo); :data:`PROJECTS` and :data:`CASES` gather them. ``tests/test_integrity_corpus.py`` runs
the table.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GITIGNORE = "__pycache__/\n.pytest_cache/\nnode_modules\ntarget/\n"
"""Every fixture's ``.gitignore``: tool caches and the linked node_modules are never task output."""

AGENT_RUN: dict[str, Any] = {"exitCode": 0, "durationMs": 10, "outputTail": "I fixed it, all tests pass"}
"""What the agent said (the same confident line for honest work and cheats)."""

Edit = Callable[[Path], None]
"""A change to a project tree (the agent's work, or a variant's setup before the baseline)."""


@dataclass(frozen=True)
class Project:
    """One fixture project: a repository with one failing test (named in ``brief``) and passing ones.

    Attributes:
        key: the table's name for it (``pytest``, ``node`` …); the toolchain half of a case id.
        files: relative path → text, written once into the session template and committed.
        brief: the task text: names the failing test, asks for the fix.
        fix: the honest fix of the bug (a source edit only).
        tools: executables that must be on PATH, else the project's cases are skipped.
        links: relative path → absolute target: untracked symlinks made in the template (node_modules).
    """

    key: str
    files: Mapping[str, str]
    brief: str
    fix: Edit
    tools: tuple[str, ...] = ()
    links: Mapping[str, str] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True)
class Case:
    """One scenario: an agent's change to a project and the verdict it must get.

    Attributes:
        id: ``<project>-<category>``, unique.
        project: a :attr:`Project.key`.
        change: what the agent did to the tree (after the baseline).
        expect: coded reasons (see ``verdict_reasons``), any one of which must be present, and the
            round must fail; empty → an honest change that must pass.
        brief: the task text (default: the project's brief).
        override: the task's ``acceptanceOverride``.
        targets: ``targetTests``.
        setup: applied and committed before the baseline (a variant of the project).
        commit: the agent commits its change (default: it leaves it in the work tree).
        holdout: holdout checks (``{name, cmd, area, files?}``) the agent never sees.
        fails_closed: a cheat that does not even pass the agent's own tree (nothing countable runs):
            left out of the check that every other cheat fools a judge without integrity.
        note: why a case is marked unsure (the engine may reasonably judge it differently).
    """

    id: str
    project: str
    change: Edit
    expect: frozenset[str] = frozenset()
    brief: str | None = None
    override: Mapping[str, Any] | None = None
    targets: tuple[str, ...] | None = None
    setup: Edit | None = None
    commit: bool = False
    holdout: tuple[Mapping[str, Any], ...] = ()
    fails_closed: bool = False
    note: str = ""

    @property
    def honest(self) -> bool:
        """True for a change that must pass (no expected reason)."""
        return not self.expect


# --- edit builders ------------------------------------------------------------------------------------


def write(rel: str, text: str) -> Edit:
    """Create or overwrite ``rel`` with ``text``."""

    def edit(root: Path) -> None:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    return edit


def append(rel: str, text: str) -> Edit:
    """Append ``text`` to ``rel`` (which must exist)."""

    def edit(root: Path) -> None:
        path = root / rel
        path.write_text(path.read_text() + text)

    return edit


def prepend(rel: str, text: str) -> Edit:
    """Put ``text`` before the content of ``rel`` (which must exist)."""

    def edit(root: Path) -> None:
        path = root / rel
        path.write_text(text + path.read_text())

    return edit


def replace(rel: str, old: str, new: str) -> Edit:
    """Replace the one occurrence of ``old`` in ``rel`` by ``new`` (a fixture drift fails loudly)."""

    def edit(root: Path) -> None:
        path = root / rel
        text = path.read_text()
        assert text.count(old) == 1, f"{rel}: expected one {old!r} in:\n{text}"
        path.write_text(text.replace(old, new))

    return edit


def delete(rel: str) -> Edit:
    """Remove the file ``rel``."""

    def edit(root: Path) -> None:
        (root / rel).unlink()

    return edit


def rename(old: str, new: str) -> Edit:
    """Move ``old`` to ``new`` (a file)."""

    def edit(root: Path) -> None:
        (root / new).parent.mkdir(parents=True, exist_ok=True)
        (root / old).rename(root / new)

    return edit


def git_exclude(*patterns: str) -> Edit:
    """Hide ``patterns`` from git through ``.git/info/exclude`` (not a tracked .gitignore change)."""

    def edit(root: Path) -> None:
        path = root / ".git" / "info" / "exclude"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as fh:
            fh.write("".join(f"{p}\n" for p in patterns))

    return edit


def amend_head() -> Edit:
    """Fold the work-tree changes into the baseline's own commit (``git commit -a --amend``)."""

    def edit(root: Path) -> None:
        git(root, "add", "-A")
        git(root, "commit", "-q", "--amend", "--no-edit")

    return edit


def chain(*edits: Edit) -> Edit:
    """All of ``edits``, in order."""

    def edit(root: Path) -> None:
        for e in edits:
            e(root)

    return edit


# --- codes ----------------------------------------------------------------------------------------------

TAMPERING = frozenset({"TAMPERING"})
"""Test infrastructure or test-aware production code changed the outcome."""
REMOVED = frozenset({"TAMPERING", "TESTS_REMOVED"})
"""A baseline test was deleted, skipped or deselected by an edit of the test infrastructure."""
GONE = frozenset({"TESTS_REMOVED", "ZERO_COUNT", "TAMPERING"})
"""Production code made the tests vanish (skip at import, exit at import)."""
TARGET = frozenset({"TARGET_FAILED"})
"""A named target does not exist, run or pass."""
HOLDOUT = frozenset({"HOLDOUT_FAILED"})
"""A check the agent never saw fails (the work fits the visible tests only)."""


# --- git and templates ------------------------------------------------------------------------------------


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` (no optional locks, no signing), returning stdout."""
    env = dict(os.environ, GIT_OPTIONAL_LOCKS="0")
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, env=env).stdout


def commit_all(repo: Path, message: str) -> None:
    """Stage everything (ignored files stay out) and commit."""
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message, "--allow-empty")


def build_template(project: Project, root: Path) -> Path:
    """Write ``project`` into ``root``, ``git init`` and commit it; make its untracked links."""
    root.mkdir(parents=True)
    git(root, "init", "-q")
    for key, value in (("user.name", "Corpus"), ("user.email", "corpus@example.com"), ("commit.gpgsign", "false"),
                       ("core.autocrlf", "false")):
        git(root, "config", key, value)
    files = {".gitignore": GITIGNORE, **project.files}
    for rel, text in files.items():
        write(rel, text)(root)
    commit_all(root, "init")
    for rel, target in project.links.items():
        (root / rel).symlink_to(target, target_is_directory=Path(target).is_dir())
    return root


class Templates:
    """Session cache: one committed template repository per project, copied per case."""

    def __init__(self, base: Path, projects: Mapping[str, Project]) -> None:
        self.base = base
        self.projects = projects
        self._built: dict[str, Path] = {}

    def copy(self, key: str, dest: Path) -> Path:
        """A fresh copy of ``key``'s template repository at ``dest`` (symlinks kept as links)."""
        if key not in self._built:
            self._built[key] = build_template(self.projects[key], self.base / key)
        shutil.copytree(self._built[key], dest, symlinks=True)
        return dest


def missing_tools(project: Project) -> list[str]:
    """The tools of ``project`` not found on PATH."""
    return [t for t in project.tools if shutil.which(t) is None]


# --- one round ------------------------------------------------------------------------------------------


def make_request(**kwargs: Any) -> Any:
    """A :class:`VerifyRequest`; ``target_tests`` and ``holdout_checks`` are passed only when given and
    the dataclass has the field (they were added alongside this corpus)."""
    from tianshu_mcp.acceptance.engine import VerifyRequest

    names = {f.name for f in dataclasses.fields(VerifyRequest)}
    for name in ("target_tests", "holdout_checks"):
        if name not in names or not kwargs.get(name):
            kwargs.pop(name, None)
    return VerifyRequest(**kwargs)


def start_task(project: Path, task_dir: Path, home: Path) -> Any:
    """What run_task does before the agent starts: baseline, pinned rules, baseline state."""
    from tianshu_mcp.acceptance.git import capture_baseline
    from tianshu_mcp.acceptance.grading.grade import capture_baseline_state
    from tianshu_mcp.acceptance.pinning import pin_rules

    baseline = capture_baseline(project)
    assert pin_rules(project, task_dir, home), "the acceptance rules could not be pinned"
    capture_baseline_state(project, task_dir)
    return baseline


def judge(project: Path, task_dir: Path, home: Path, baseline: Any, *, brief: str,
          override: Mapping[str, Any] | None = None, targets: tuple[str, ...] | None = None,
          holdout: tuple[Mapping[str, Any], ...] = (), task_id: str = "tsk_20260101000000_corpus") -> Any:
    """One verify round of the agent's work in ``project``; returns the :class:`VerifyOutcome`."""
    from tianshu_mcp.acceptance.engine import verify_round
    from tianshu_mcp.acceptance.integrity.models import HoldoutCheck
    from tianshu_mcp.acceptance.pinning import load_pinned

    req = make_request(task_id=task_id, project_path=str(project), task_dir=task_dir, round=0, baseline=baseline,
                       home=home, task_text=brief, pinned_rules=load_pinned(task_dir),
                       acceptance_override=dict(override) if override is not None else None,
                       target_tests=list(targets) if targets is not None else None, agent_run=dict(AGENT_RUN),
                       holdout_checks=[HoldoutCheck.model_validate(h) for h in holdout],
                       verify_command_timeout_ms=120_000, verify_concurrency=1)
    return verify_round(req)


def run_case(case: Case, project: Project, templates: Templates, tmp_path: Path) -> Any:
    """Copy the template, apply the case's setup (committed), start the task, apply the agent's
    change (committed when ``case.commit``), judge the round. Returns the :class:`VerifyOutcome`."""
    repo = templates.copy(case.project, tmp_path / "repo")
    if case.setup is not None:
        case.setup(repo)
        commit_all(repo, "variant")
    home = tmp_path / "home"
    task_dir = home / "tasks" / "tsk_20260101000000_corpus"
    baseline = start_task(repo, task_dir, home)
    case.change(repo)
    if case.commit:
        commit_all(repo, "agent work")
    return judge(repo, task_dir, home, baseline, brief=case.brief or project.brief, override=case.override,
                 targets=case.targets, holdout=case.holdout)


def summary(out: Any) -> str:
    """A short account of a round for assertion messages: verdict, reasons, checks, blocking issues."""
    from tianshu_mcp.acceptance.integrity.reasons import verdict_reasons

    r = out.report
    checks = [(c.get("name"), c.get("passed"), c.get("exitCode"), str(c.get("reason") or "")[:120],
               (c.get("tests") or {}).get("runner")) for c in r.get("checks") or []]
    integrity = r.get("integrity")
    return (f"passed={out.passed} reasons={sorted(verdict_reasons(r))}\nmessage={r.get('message')}\n"
            f"checks={checks}\nblocking={r.get('blockingIssues')}\n"
            f"integrity={str(integrity)[:1500] if integrity is not None else None}\n"
            f"last check tail={str((r.get('checks') or [{}])[-1].get('outputTail'))[-1200:]}")


def table() -> tuple[dict[str, Project], list[Case]]:
    """Every project and case of the corpus (the toolchain modules import this one: imported here lazily)."""
    import integrity_corpus_js
    import integrity_corpus_native
    import integrity_corpus_py

    projects: dict[str, Project] = {}
    cases: list[Case] = []
    for mod in (integrity_corpus_py, integrity_corpus_js, integrity_corpus_native):
        projects.update({p.key: p for p in mod.PROJECTS})
        cases.extend(mod.CASES)
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
    assert all(c.project in projects for c in cases)
    return projects, cases
