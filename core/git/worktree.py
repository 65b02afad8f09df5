"""Worktree isolation (docs/isolation.md §1): a task that works in a git worktree of its own.

A task with ``isolation: "worktree"`` never touches the user's work tree or index. Its flow run
adds ``<home>/worktrees/<taskId>`` on a new branch ``tianshu/<taskId>`` from the baseline commit
(the project's HEAD when the task starts); the agent, the checks, grading and the reports run
there. When the task ends, what the agent changed (the files its last verification counted, or
every changed path but tool caches when verification was off) is committed to the branch, the
diff from the baseline commit is written to ``<taskDir>/result.patch`` and the worktree directory
is removed. The branch is the result: ``manage_task(action="merge")`` merges it into the project
(:func:`merge_result`), or by hand ``git merge tianshu/<taskId>`` / ``git apply result.patch``.

The user's uncommitted changes are *not* carried into the worktree (it starts at HEAD); the paths
left behind are recorded in ``task.json`` (``dirtyNotCarried``) and said in the task's events.

Cleanup policy: the worktree is removed when the task's flow run ends (succeeded, failed,
needs_attention, cancelled); it stays while the task waits for the user (needs_user) and is
re-created from the branch for a rework. A flow-run process holds ``<home>/worktrees/<taskId>.lock``
(an OS lock: released by the kernel even on SIGKILL) while it works there, so
:func:`sweep_worktrees` can tell a live worktree from one a crash left: an unlocked worktree
of a task that does not wait for the user is committed (nothing is lost) and removed. Branches stay
until merged (a merge through ``manage_task`` deletes the merged branch).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from filelock import FileLock, Timeout
from pydantic import BaseModel, ConfigDict

from ..errors import ErrorCode, TianshuError
from ..gate import kill_project_processes
from ..i18n import _
from ..paths import norm_path, project_key
from ..record import TaskRecord
from ..settings import home_tag
from .run import GitFailed, GitResult, git_failed, run_git
from .registration import forget_worktree
from .status import CACHE_PATH_RE, worktree_status

BRANCH_PREFIX = "tianshu/"
PATCH_FILE = "result.patch"
COMMIT_IDENTITY = ("tianshu-mcp", "tianshu-mcp@localhost")
"""Author of result commits when the repository has no ``user.email`` of its own."""
NO_HOOKS = ("-c", "core.hooksPath=/dev/null")
"""The user's hooks (post-checkout, reference-transaction, pre-commit …) never decide our git
operations: verification judges the work, and a hook's exit 1 would make a worktree half-made."""
LOCK_RETRIES = 8
"""How often a git command that met another worktree operation's lock is tried again."""


def worktrees_root(home: Path) -> Path:
    """``<home>/worktrees``: one directory (and one ``.lock``) per worktree task."""
    return home / "worktrees"


def worktree_dir(home: Path, task_id: str) -> Path:
    """``<home>/worktrees/<taskId>``: the task's worktree (top level of its checkout)."""
    return worktrees_root(home) / task_id


def branch_name(task_id: str) -> str:
    """``tianshu/<taskId>``: the task's result branch."""
    return BRANCH_PREFIX + task_id


def _git(args: list[str], cwd: str | os.PathLike[str], ok: tuple[int, ...] = (0,)) -> GitResult:
    """``git <args>`` in ``cwd``; retried while another worktree operation holds a lock.

    Raises:
        GitFailed: git refused (the message quotes it).
    """
    for attempt in range(LOCK_RETRIES):
        r = run_git([*NO_HOOKS, *args], cwd)
        if not r.timed_out and r.status in ok:
            return r
        said = r.stderr.lower()
        if ".lock" not in said and "could not lock" not in said and "unable to create" not in said:
            break
        time.sleep(0.05 * (2 ** attempt))
    shown = list(args)
    while len(shown) > 1 and shown[0] == "-c":
        shown = shown[2:]
    raise git_failed(shown, cwd, r)


def repo_top(project: str) -> tuple[str, str]:
    """The git top level of ``project`` and ``project``'s POSIX path relative to it (``""`` at the top).

    Raises:
        TianshuError: WORKTREE_UNAVAILABLE when ``project`` is not in a git repository or its
            HEAD has no commit (a worktree needs a commit to start from).
    """
    r = run_git(["rev-parse", "--show-toplevel"], project)
    if not r.ok or not r.stdout.strip():
        raise TianshuError(ErrorCode.WORKTREE_UNAVAILABLE,
                           _("isolation \"worktree\" needs a git repository; {project} is not in one (git said: "
                             "{said}). Use isolation \"inplace\" or git init it").format(
                               project=project, said=(r.stderr.strip() or "nothing")[:300]))
    top = os.path.realpath(r.stdout.strip())
    if not run_git(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], project).ok:
        raise TianshuError(ErrorCode.WORKTREE_UNAVAILABLE,
                           _("isolation \"worktree\" starts from the project's HEAD commit, and {top} has no commit "
                             "yet; commit once (or use isolation \"inplace\")").format(top=top))
    rel = os.path.relpath(os.path.realpath(project), top).replace(os.sep, "/")
    rel = "" if rel == "." else rel
    if rel and not run_git(["cat-file", "-e", f"HEAD:{rel}"], top).ok:
        raise TianshuError(ErrorCode.WORKTREE_UNAVAILABLE,
                           _("{project} is not part of {top}'s HEAD commit (a new or untracked directory), so a "
                             "worktree from HEAD would not have it; commit it first or use isolation \"inplace\"").format(
                               project=project, top=top))
    if run_git(["rev-parse", "--verify", "--quiet", "refs/heads/" + BRANCH_PREFIX.rstrip("/")], top).ok:
        raise TianshuError(ErrorCode.WORKTREE_UNAVAILABLE,
                           _("{top} has a branch named \"{name}\", so git cannot create the result branches "
                             "{prefix}<taskId>; rename it or use isolation \"inplace\"").format(
                               top=top, name=BRANCH_PREFIX.rstrip("/"), prefix=BRANCH_PREFIX))
    return top, rel


def dirty_paths(project_top: str) -> list[str]:
    """Paths ``git status`` lists in a work tree (top-level relative, tool caches skipped), read
    without an index refresh.

    Raises:
        GitFailed: git refused (never read as a clean tree).
    """
    _, entries = worktree_status(project_top)
    return [path for _, path in entries if not CACHE_PATH_RE.search(path)]


@dataclass
class Workspace:
    """Where a worktree task works.

    Attributes:
        top: the worktree's top level (``<home>/worktrees/<taskId>``).
        work_path: ``top`` plus the project's path inside its repository (a monorepo package).
        branch: ``tianshu/<taskId>``.
        base_commit: the commit the branch started from (40 hex).
        project_top: the user's repository top level.
        created: True when this call made the worktree (False: re-used or re-created).
        dirty_not_carried: the user's uncommitted paths the worktree does not have (creation only).
    """

    top: str
    work_path: str
    branch: str
    base_commit: str
    project_top: str
    created: bool = False
    dirty_not_carried: list[str] = field(default_factory=list)


class WorktreeClose(BaseModel):
    """What :func:`close_worktree` did: ``{resultBranch, resultCommit, resultPatch, patchBytes, error?}``.

    Attributes:
        resultBranch: ``tianshu/<taskId>``.
        resultCommit: the branch's commit after the close; None when the agent changed nothing.
        resultPatch: ``<taskDir>/result.patch``.
        patchBytes: its size, bytes (0 when git refused before writing it).
        error: git's refusal (the worktree is removed all the same), else None.
    """

    model_config = ConfigDict(frozen=True)

    resultBranch: str
    resultCommit: str | None = None
    resultPatch: str
    patchBytes: int = 0
    error: str | None = None


class MergeResult(BaseModel):
    """What :func:`merge_result` did: ``{branch, mergeCommit, alreadyMerged}`` (manage_task's ``merge``).

    Attributes:
        branch: the merged branch (``tianshu/<taskId>``; None only in a merge recorded before).
        mergeCommit: the merge commit, None when the branch was part of HEAD already.
        alreadyMerged: nothing was merged (the branch was already in HEAD's history).
    """

    model_config = ConfigDict(frozen=True)

    branch: str | None = None
    mergeCommit: str | None = None
    alreadyMerged: bool = False


def _is_worktree(path: Path) -> bool:
    r = run_git(["rev-parse", "--show-toplevel"], path) if path.is_dir() else None
    return bool(r and r.ok and os.path.realpath(r.stdout.strip()) == os.path.realpath(path))


def branch_exists(top: str, branch: str) -> bool:
    """True when ``branch`` is a local branch of the repository at ``top``."""
    return run_git(["rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"], top).ok


def open_worktree(home: Path, task_id: str, project_path: str, base_commit: str | None = None,
                  start: str | None = None) -> Workspace:
    """Make (or find) the task's worktree: a new branch from HEAD on the first run, the existing
    branch when the task is reworked, the existing directory when it resumes after needs_user.

    Args:
        base_commit: the task's recorded baseline commit (a re-run keeps it); None on the first run.
        start: the commit a new branch starts from instead of HEAD (a remote task's ``ref``, in a
            worker's clone whose checkout is not the user's: nothing is "not carried").

    Raises:
        TianshuError: WORKTREE_UNAVAILABLE (not a git repository, no commit); GitFailed (git refused).
    """
    top, rel = repo_top(project_path)
    path = worktree_dir(home, task_id)
    branch = branch_name(task_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    created = False
    dirty: list[str] = []
    if _is_worktree(path):
        pass
    elif branch_exists(top, branch):
        forget_worktree(top, path)
        _git(["worktree", "add", "--quiet", str(path), branch], top)
    elif base_commit:  # a re-run (rework, verify_task) of a task whose result branch is gone
        raise TianshuError(ErrorCode.INVALID_STATE,
                           _("the result branch {branch} no longer exists in {top} (merged and deleted, or deleted by "
                             "hand); there is no work of this task to continue or verify — start a new task").format(
                               branch=branch, top=top))
    else:
        forget_worktree(top, path)
        base = start or _git(["rev-parse", "--verify", "HEAD^{commit}"], top).stdout.strip()
        dirty = [] if start else dirty_paths(top)
        _git(["worktree", "add", "--quiet", "-b", branch, str(path), base], top)
        created = True
    base = base_commit or _git(["rev-parse", "--verify", f"{branch}^{{commit}}"], top).stdout.strip()
    work = str(path / rel) if rel else str(path)
    return Workspace(str(path), work, branch, base, top, created, dirty)


def hold(home: Path, task_id: str) -> FileLock:
    """Take the task's worktree lock (held by the flow-run process while it works there).

    Raises:
        TianshuError: INVALID_STATE when another live process holds it (two runs of one task).
    """
    lock = FileLock(str(worktrees_root(home) / f"{task_id}.lock"), timeout=30)
    worktrees_root(home).mkdir(parents=True, exist_ok=True)
    try:
        lock.acquire()
    except Timeout as exc:
        raise TianshuError(ErrorCode.INVALID_STATE,
                           _("the worktree of {taskId} is in use by another process").format(taskId=task_id)) from exc
    return lock


def _commit_identity(top: str) -> list[str]:
    has_email = run_git(["config", "user.email"], top).stdout.strip()
    name, email = COMMIT_IDENTITY
    return [] if has_email else ["-c", f"user.name={name}", "-c", f"user.email={email}"]


def commit_result(top: str, files: list[str] | None, message: str) -> str | None:
    """Commit what the task changed in the worktree at ``top``; return the new commit (None: nothing to commit).

    Args:
        files: top-level-relative paths to commit (the last passing verification's changed
            files); None commits every changed path except tool caches. Everything git sees is
            staged first and only what is known to be outside ``files`` (or a tool cache) is
            unstaged again, so a path whose name does not survive decoding (a non-UTF-8 name)
            stays in the commit: the agent's verified work is never dropped.

    The user's hooks and signing are skipped (``--no-verify``, ``commit.gpgsign=false``): the
    verification already ran, and a prompt for a signing key would hang a flow run.

    Raises:
        GitFailed: git refused.
    """
    _git(["add", "-A"], top)
    staged = [p for p in _git(["diff", "--cached", "--name-only", "-z", "--no-renames"], top).stdout.split("\0") if p]
    keep = set(files) if files is not None else None
    drop = [p for p in staged if "\ufffd" not in p and (CACHE_PATH_RE.search(p) or (keep is not None and p not in keep))]
    if drop:
        with tempfile.NamedTemporaryFile("wb", suffix=".pathspec", delete=False) as fh:
            fh.write(b"\0".join(p.encode("utf-8", "surrogateescape") for p in drop))
        try:
            _git(["--literal-pathspecs", "reset", "-q", f"--pathspec-from-file={fh.name}", "--pathspec-file-nul"], top)
        finally:
            os.unlink(fh.name)
    if run_git(["diff", "--cached", "--quiet"], top).ok:
        return None
    _git([*_commit_identity(top), "-c", "commit.gpgsign=false", "commit", "--quiet", "--no-verify", "-m", message], top)
    return _git(["rev-parse", "HEAD"], top).stdout.strip()


def _pin_branch(top: str, branch: str) -> None:
    """Point ``branch`` at the worktree's HEAD when the agent switched to a branch of its own
    (its commits, and ours after them, would otherwise never reach the result branch)."""
    on = run_git(["symbolic-ref", "-q", "HEAD"], top).stdout.strip()
    if on != f"refs/heads/{branch}":
        head = _git(["rev-parse", "HEAD"], top).stdout.strip()
        _git(["update-ref", f"refs/heads/{branch}", head], top)


def write_patch(top: str, base_commit: str, out: Path) -> int:
    """Write ``git diff --binary <base>..HEAD`` of the worktree to ``out`` (git writes the bytes
    itself: names and contents in any encoding survive); return its size, bytes."""
    tmp = out.with_name(out.name + ".tmp")
    _git(["diff", "--binary", "--no-color", "--no-ext-diff", f"--output={tmp}", f"{base_commit}..HEAD"], top)
    os.replace(tmp, out)
    return out.stat().st_size


def remove_worktree(project_top: str, top: str) -> None:
    """Remove the worktree directory and its registration (the branch stays)."""
    forget_worktree(project_top, Path(top))


def close_worktree(ws: Workspace, task_dir: Path, files: list[str] | None, message: str) -> WorktreeClose:
    """Commit the result, write ``result.patch`` and remove the worktree (the end of a task).

    Returns:
        The :class:`WorktreeClose` (``resultCommit`` None when the agent changed nothing). On a
        git refusal the worktree is still removed and ``error`` says why.
    """
    commit: str | None = None
    size = 0
    error: str | None = None
    try:
        commit_result(ws.top, files, message)
        _pin_branch(ws.top, ws.branch)
        commit = _git(["rev-parse", "HEAD"], ws.top).stdout.strip()
        size = write_patch(ws.top, ws.base_commit, task_dir / PATCH_FILE)
        if commit == ws.base_commit:
            commit = None
    except GitFailed as exc:
        error = exc.message
    finally:
        remove_worktree(ws.project_top, ws.top)
    return WorktreeClose(resultBranch=ws.branch, resultCommit=commit, resultPatch=str(task_dir / PATCH_FILE),
                         patchBytes=size, error=error)


def leftover_worktrees(home: Path) -> list[str]:
    """Task ids with a worktree directory that no live process holds (its ``.lock`` is free)."""
    root = worktrees_root(home)
    found = []
    for entry in sorted(root.iterdir()) if root.is_dir() else []:
        if not entry.is_dir():
            continue
        lock = FileLock(str(root / f"{entry.name}.lock"), timeout=0)
        try:
            lock.acquire()
        except Timeout:
            continue
        lock.release()
        found.append(entry.name)
    return found


def sweep_worktrees(home: Path, describe: Callable[[str], TaskRecord | None],
                    closed: Callable[[str, WorktreeClose], None] | None = None) -> list[str]:
    """Commit and remove worktrees that a killed flow run left (cleanup policy in the module doc).

    Args:
        describe: ``taskId -> `` its :class:`TaskRecord` (None when the record is gone). A task waiting for the
            user (``pendingQuestion`` set) keeps its worktree.
        closed: called with ``(taskId, close_worktree's result)`` when the task's record names its
            baseline commit (``worktreeBase``): the result was committed, pinned to the branch and
            ``result.patch`` written into ``<home>/tasks/<taskId>``, as at a flow run's own end.

    Returns:
        The task ids whose worktree was removed.
    """
    removed = []
    for task_id in leftover_worktrees(home):
        meta = describe(task_id)
        if meta is not None and meta.pendingQuestion:
            continue
        lock = FileLock(str(worktrees_root(home) / f"{task_id}.lock"), timeout=0)
        try:
            lock.acquire()
        except Timeout:
            continue  # a flow run took it meanwhile
        try:
            path = worktree_dir(home, task_id)
            # an agent or check of the killed run may still write there (its own session)
            kill_project_processes(f"{home_tag(home)}/{project_key(norm_path(os.path.realpath(path)))}")
            project_path = meta.projectPath if meta is not None else None
            base = meta.worktreeBase if meta is not None else None
            project_top = _main_repo(path) or (repo_top(project_path)[0] if project_path else None)
            message = f"tianshu: {task_id} (work left by an interrupted run)"
            task_dir = home / "tasks" / task_id
            if project_top and _is_worktree(path) and base and task_dir.is_dir():
                ws = Workspace(str(path), str(path), branch_name(task_id), base, project_top)
                out = close_worktree(ws, task_dir, None, message)
                if closed is not None:
                    closed(task_id, out)
            else:
                if project_top and _is_worktree(path):
                    try:
                        commit_result(str(path), None, message)
                        _pin_branch(str(path), branch_name(task_id))
                    except GitFailed:
                        pass
                if project_top:
                    remove_worktree(project_top, str(path))
                else:
                    shutil.rmtree(path, ignore_errors=True)
            removed.append(task_id)
        except TianshuError:
            shutil.rmtree(worktree_dir(home, task_id), ignore_errors=True)
            removed.append(task_id)
        finally:
            lock.release()
    return removed


def sweep_home(home: Path) -> list[str]:
    """:func:`sweep_worktrees` for the tasks of ``home``: a swept task's ``task.json`` records its
    result as a flow run's own end would (``resultCommit``, ``resultPatch``, no ``workPath``).
    Run by the per-home service and by ``tianshu-mcp worker`` every few seconds."""
    from ..taskstore import TaskStore

    store = TaskStore(home)
    return sweep_worktrees(home, store.load, lambda task_id, out: store.update(
        task_id, workPath=None, worktreePath=None, resultCommit=out.resultCommit, resultPatch=out.resultPatch))


def _main_repo(path: Path) -> str | None:
    """The top level of the repository whose worktree ``path`` is (None: not a worktree)."""
    if not path.is_dir():
        return None
    r = run_git(["rev-parse", "--path-format=absolute", "--git-common-dir"], path)
    if not r.ok:
        return None
    common = Path(r.stdout.strip())
    return str(common.parent) if common.name == ".git" else None


IN_PROGRESS = ("MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "REBASE_HEAD", "rebase-merge", "rebase-apply",
               "BISECT_LOG")
"""Files in a repository's git dir that say the user is in the middle of an operation."""


def merge_result(home: Path, project_path: str, task_id: str, message: str) -> MergeResult:
    """Merge the task's result branch into the project's current branch (``git merge --no-ff``),
    then delete the merged branch. Merges into one repository run one at a time (a file lock in
    ``<home>/worktrees``).

    Returns:
        The :class:`MergeResult` ``{branch, mergeCommit, alreadyMerged}``.

    Raises:
        TianshuError: INVALID_STATE (no result branch; a detached HEAD or the result branch
            checked out; the user is in the middle of a merge, rebase, cherry-pick or bisect:
            nothing is touched), MERGE_CONFLICT (our merge was aborted, the project is as it
            was; the conflicting paths are named); GitFailed (git refused to start the merge,
            e.g. a staged change or uncommitted edits of files the branch changes).
    """
    top, _rel = repo_top(project_path)
    branch = branch_name(task_id)
    worktrees_root(home).mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(worktrees_root(home) / f"merge-{project_key(norm_path(top))}.lock"), timeout=300)
    try:
        lock.acquire()
    except Timeout as exc:
        raise TianshuError(ErrorCode.INVALID_STATE,
                           _("another merge into {top} has held it for 5 minutes").format(top=top)) from exc
    try:
        return _merge_locked(top, branch, task_id, message)
    finally:
        lock.release()


def _merge_locked(top: str, branch: str, task_id: str, message: str) -> MergeResult:
    if not branch_exists(top, branch):
        raise TianshuError(ErrorCode.INVALID_STATE, _("{taskId} has no result branch {branch} in {top} (merged and "
                                                      "deleted already, or deleted by hand)").format(
                               taskId=task_id, branch=branch, top=top))
    on = run_git(["symbolic-ref", "-q", "HEAD"], top).stdout.strip()
    if not on:
        raise TianshuError(ErrorCode.INVALID_STATE, _("{top}'s HEAD is detached; check out the branch {branch} should "
                                                      "be merged into, then merge again").format(top=top, branch=branch))
    if on == f"refs/heads/{branch}":
        raise TianshuError(ErrorCode.INVALID_STATE, _("{top} has {branch} itself checked out; check out the branch it "
                                                      "should be merged into, then merge again").format(
                               top=top, branch=branch))
    git_dir = Path(_git(["rev-parse", "--path-format=absolute", "--git-dir"], top).stdout.strip())
    busy = [name for name in IN_PROGRESS if (git_dir / name).exists()]
    if busy:
        raise TianshuError(ErrorCode.INVALID_STATE, _("{top} is in the middle of a git operation ({operations}); "
                                                      "finish or abort it first — nothing was touched").format(
                               top=top, operations=", ".join(busy)))
    if run_git(["merge-base", "--is-ancestor", branch, "HEAD"], top).ok:
        run_git([*NO_HOOKS, "branch", "-d", branch], top)
        return MergeResult(branch=branch, mergeCommit=None, alreadyMerged=True)
    args = [*_commit_identity(top), "-c", "commit.gpgsign=false", "merge", "--no-ff", "--no-edit", "--no-verify",
            "-m", message, branch]
    r = run_git(args, top)
    if not r.ok:
        conflicts = [c for c in run_git(["diff", "--name-only", "--diff-filter=U", "-z"], top).stdout.split("\0") if c]
        if (git_dir / "MERGE_HEAD").exists():  # ours: there was none before
            run_git(["merge", "--abort"], top)
            raise TianshuError(ErrorCode.MERGE_CONFLICT,
                               _("merging {branch} into {top} conflicts in {files}; the merge was aborted and the "
                                 "project is unchanged. Resolve by hand: git -C {top} merge {branch}").format(
                                   branch=branch, top=top, files=", ".join(conflicts[:20]) or _("some files")))
        raise git_failed(["merge", branch], top, r)
    commit = _git(["rev-parse", "HEAD"], top).stdout.strip()
    run_git([*NO_HOOKS, "branch", "-d", branch], top)
    return MergeResult(branch=branch, mergeCommit=commit, alreadyMerged=False)
