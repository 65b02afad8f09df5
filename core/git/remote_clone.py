"""A worker's copy of a remote repository (docs/isolation.md §2): clone or fetch, resolve, push.

A worker cannot see the caller's files. A remote task names a git remote (``repoUrl``) and a
``ref``; the worker keeps one clone per remote under its own data home,
``<home>/remotes/<key>`` (``key`` = :func:`tianshu_mcp.core.remotes.repo_key`), fetches it before
each task (under a per-remote file lock: two flow runs of one worker never fetch into one clone
at once), and the task then works in a worktree of that clone on ``tianshu/<taskId>``
(:mod:`.worktree`). The clone's own checkout is never edited. At the end the result branch is
pushed back to the remote (:func:`push_result`).

git runs with the worker's environment: its credential helper, SSH key or ``GIT_ASKPASS`` log
in; nothing prompts (``GIT_TERMINAL_PROMPT=0``, SSH in batch mode), so a remote that needs
credentials the worker lacks fails at once with ``REMOTE_AUTH_FAILED`` instead of hanging.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from filelock import FileLock

from ..errors import ErrorCode, TianshuError
from ..i18n import _
from ..remotes import repo_key
from .run import GitResult, run_git

NETWORK_TIMEOUT_MS = 600_000
"""A clone, fetch or push that has not finished after this long is killed, ms."""
_AUTH_WORDS = ("terminal prompts disabled", "authentication failed", "could not read username",
               "could not read password", "permission denied (publickey", "host key verification failed",
               "the requested url returned error: 401", "the requested url returned error: 403", "access denied")


def remotes_root(home: Path) -> Path:
    """``<home>/remotes``: one clone (and one ``.lock``) per remote repository."""
    return home / "remotes"


def clone_dir(home: Path, repo_url: str) -> Path:
    """``<home>/remotes/<key>``: the worker's clone of ``repo_url``."""
    return remotes_root(home) / repo_key(repo_url)


def _net_env() -> None:
    """No prompt can hang a worker: SSH in batch mode unless the worker's environment says how."""
    os.environ.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")


def _refused(what: str, url: str, r: GitResult) -> TianshuError:
    said = (r.stderr or r.stdout).strip()
    text = said.lower()
    if r.timed_out:
        return TianshuError(ErrorCode.REMOTE_UNAVAILABLE,
                            _("git {what} of {url} did not finish within {s} s").format(
                                what=what, url=url, s=NETWORK_TIMEOUT_MS // 1000))
    if any(w in text for w in _AUTH_WORDS):
        return TianshuError(ErrorCode.REMOTE_AUTH_FAILED,
                            _("git {what} of {url} needs credentials this worker does not have (give them to the "
                              "worker's environment: a credential helper, an SSH key or GIT_ASKPASS); git said: "
                              "{said}").format(what=what, url=url, said=said[:600]))
    return TianshuError(ErrorCode.REMOTE_UNAVAILABLE,
                        _("git {what} of {url} failed; git said: {said}").format(what=what, url=url, said=said[:600]))


def sync_clone(home: Path, repo_url: str, ref: str, task_id: str) -> tuple[str, str]:
    """Clone ``repo_url`` into the worker's cache, or fetch it; resolve ``ref``.

    The task's own result branch ``tianshu/<taskId>`` is fetched too when the remote has it (a
    rework that lands on another worker continues the pushed work).

    Args:
        home: the worker's data home. ref: branch, tag, commit or ``HEAD`` (the remote's default branch).

    Returns:
        ``(clone path, commit)``: where the task's worktree is added, and the commit ``ref`` names.

    Raises:
        TianshuError: REMOTE_UNAVAILABLE (no such repository, host unreachable, timeout),
            REMOTE_AUTH_FAILED, REF_NOT_FOUND.
    """
    _net_env()
    path = clone_dir(home, repo_url)
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock"):
        if not (path / ".git").is_dir():
            tmp = path.with_name(path.name + ".tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            r = run_git(["clone", "--quiet", "--no-checkout", "--", repo_url, str(tmp)], path.parent,
                        timeout_ms=NETWORK_TIMEOUT_MS)
            if r.status != 0:
                shutil.rmtree(tmp, ignore_errors=True)
                raise _refused("clone", repo_url, r)
            shutil.rmtree(path, ignore_errors=True)
            os.replace(tmp, path)
        else:
            r = run_git(["fetch", "--quiet", "--prune", "--tags", "--force", "origin",
                         "+refs/heads/*:refs/remotes/origin/*"], path, timeout_ms=NETWORK_TIMEOUT_MS)
            if r.status != 0:
                raise _refused("fetch", repo_url, r)
            run_git(["remote", "set-head", "origin", "--auto"], path, timeout_ms=NETWORK_TIMEOUT_MS)
        branch = f"tianshu/{task_id}"
        if run_git(["rev-parse", "--verify", "--quiet", f"refs/remotes/origin/{branch}"], path).status == 0:
            run_git(["branch", "--force", "--no-track", branch, f"refs/remotes/origin/{branch}"], path)
        return str(path), _resolve(path, ref, repo_url)


def _resolve(path: Path, ref: str, url: str) -> str:
    """The commit ``ref`` names in the clone: the remote's branch, a tag, or a commit id."""
    if ref == "HEAD":
        candidates = ["refs/remotes/origin/HEAD", "HEAD"]
    else:
        short = ref.removeprefix("refs/heads/")
        candidates = [f"refs/remotes/origin/{short}", f"refs/tags/{ref.removeprefix('refs/tags/')}",
                      *([ref] if not ref.startswith("refs/") or ref.startswith("refs/tags/") else [])]
    for name in candidates:
        r = run_git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{name}^{{commit}}"], path)
        if r.status == 0 and r.stdout.strip():
            return r.stdout.strip()
    raise TianshuError(ErrorCode.REF_NOT_FOUND,
                       _("ref {ref} names no branch, tag or commit of {url}").format(ref=repr(ref), url=url))


def push_result(clone: str, branch: str, repo_url: str) -> None:
    """Push the task's result branch to the remote (``+refs/heads/<branch>``: the ``tianshu/``
    branches are the task's own; a rework's new result replaces the old one).

    Raises:
        TianshuError: REMOTE_UNAVAILABLE / REMOTE_AUTH_FAILED with git's words.
    """
    _net_env()
    r = run_git(["-c", "core.hooksPath=/dev/null", "push", "--quiet", "origin",
                 f"+refs/heads/{branch}:refs/heads/{branch}"], clone, timeout_ms=NETWORK_TIMEOUT_MS)
    if r.status != 0:
        raise _refused("push", repo_url, r)
