"""Running ``git`` and asking it about the repository (docs/acceptance.md §3.3 git helper).

Everything runs plain ``git`` argv (no shell, no GitPython): stdin at EOF, own session, output to
temp files (never a pipe a grandchild could hold), a timeout (default 120000 ms) that kills the
whole group, ``-c core.quotepath=off`` and NUL-separated (``-z``) porcelain/numstat so paths with
spaces or non-ASCII characters arrive verbatim. ``GIT_OPTIONAL_LOCKS=0`` keeps ``git status`` from
refreshing the index: nothing here ever writes to the repository.

:func:`run_git` never raises; the helpers whose answer matters raise :class:`GitFailed` quoting
git's own words. Part of the git side of acceptance (see :mod:`.git`, which re-exports the public
names).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..childenv import scrub
from ..procs import wait_exit
from ..errors import ErrorCode, TianshuError
from ..i18n import _

GIT_TIMEOUT_MS = 120_000
"""Default timeout of one git call, ms (docs/acceptance.md §3.3 git helper)."""
GIT_MAX_OUTPUT = 64 * 1024 * 1024
"""At most this many bytes of a git call's stdout/stderr are read (64 MiB)."""

_BASE_ARGS = (
    "git",
    "-c", "core.quotepath=off",
    "-c", "color.ui=never",
    "-c", "core.fsmonitor=false",
    "-c", "diff.noprefix=false",
)
_DIFF_OPTS = ("--no-ext-diff", "--no-textconv", "--no-color", "--ignore-submodules=dirty")
"""Options of every ``git diff``; rename detection (``-M``) is added explicitly where wanted."""


@dataclass
class GitResult:
    """Outcome of :func:`run_git`: ``status`` (None on timeout or spawn failure), decoded
    ``stdout``/``stderr`` (UTF-8, invalid bytes replaced), ``timed_out``, ``duration_ms``."""

    status: int | None
    stdout: str
    stderr: str
    timed_out: bool
    duration_ms: int

    @property
    def ok(self) -> bool:
        """True when git exited 0."""
        return self.status == 0


class GitFailed(TianshuError):
    """git refused or failed where its answer matters (code ``GIT_FAILED``); made by
    :func:`git_failed`.

    The message names the command and the project and quotes git's own stderr (its ``fatal:``
    line and ``hint:``/advice lines, at most :data:`GIT_QUOTE_CHARS` characters), so the user sees
    what git said: "detected dubious ownership … git config --global --add safe.directory …",
    "git-lfs: command not found", "index file corrupt", "index.lock: File exists".
    """

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.GIT_FAILED, message)


def git_failed(args: Sequence[str], project: str | os.PathLike[str], result: GitResult) -> GitFailed:
    """The :class:`GitFailed` for ``git <args>`` in ``project`` that ended as ``result``."""
    said = result.stderr.strip() or result.stdout.strip()  # git's own words: quoted, never translated
    if result.timed_out:
        said = _("timed out")
    elif result.status is None and not said:
        said = _("could not start git")
    if len(said) > GIT_QUOTE_CHARS:
        said = said[:GIT_QUOTE_CHARS] + " …"
    exit_text = _("timeout") if result.timed_out else _("exit {status}").format(status=result.status)
    return GitFailed(_("git {command} failed in {project} ({exit}): {said}").format(
        command=" ".join(args[:3]), project=os.fspath(project), exit=exit_text, said=said))


GIT_QUOTE_CHARS = 800
"""How much of git's stderr a :class:`GitFailed` message quotes, characters."""


def _checked(args: Sequence[str], project: str | os.PathLike[str], ok_status: Sequence[int] = (0,)) -> GitResult:
    """:func:`run_git`, raising :class:`GitFailed` unless git exited with one of ``ok_status``."""
    r = run_git(args, project)
    if r.timed_out or r.status not in ok_status:
        raise git_failed(args, project, r)
    return r


def _git_env() -> dict[str, str]:
    env = scrub()
    env["GIT_OPTIONAL_LOCKS"] = "0"
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["GIT_NO_REPLACE_OBJECTS"] = "1"  # an agent's `git replace` must not rewrite the baseline we compare to
    return env


def _read_capped(fh: Any, limit: int) -> str:
    fh.seek(0)
    return fh.read(limit).decode("utf-8", errors="replace")


def run_git(args: Sequence[str], cwd: str | os.PathLike[str], timeout_ms: int = GIT_TIMEOUT_MS,
            env: Mapping[str, str] | None = None) -> GitResult:
    """Run ``git <args>`` in ``cwd`` (docs/acceptance.md §3.3 git helper). Never raises.

    stdin is ``/dev/null``; the child gets its own session; stdout/stderr go to temp files (at most
    :data:`GIT_MAX_OUTPUT` bytes each are read back). On timeout (ms) the group is killed and
    ``status`` is None, ``timed_out`` True. A spawn failure gives ``status`` None and the error
    text in ``stderr``. ``env`` adds variables to the scrubbed environment (e.g. ``GIT_INDEX_FILE``
    for a private index); it cannot undo the scrub.
    """
    start = time.monotonic()
    argv = [*_BASE_ARGS, *args]
    child_env = _git_env()
    if env:
        child_env.update(env)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(  # noqa: S603 - argv, never a shell
                argv,
                cwd=os.fspath(cwd),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=child_env,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            return GitResult(None, "", f"[spawn-error] {exc}", False, int((time.monotonic() - start) * 1000))
        timed_out = not wait_exit(proc, timeout_ms / 1000 if timeout_ms and timeout_ms > 0 else None)
        if timed_out:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        status = None if timed_out else proc.returncode
        return GitResult(
            status,
            _read_capped(out, GIT_MAX_OUTPUT),
            _read_capped(err, GIT_MAX_OUTPUT),
            timed_out,
            int((time.monotonic() - start) * 1000),
        )


NOT_A_REPO_RE = re.compile(r"not a git repository", re.IGNORECASE)


def is_git_repo(project: str | os.PathLike[str]) -> bool:
    """True when ``git rev-parse --is-inside-work-tree`` prints ``true``; False for a directory
    git says is not in a repository (or that does not exist) and that has no ``.git`` of its own
    or above it.

    Raises:
        GitFailed: git refused to answer (dubious ownership, a bad environment), a ``.git`` exists
            but git cannot read it (a garbage ``HEAD``, a ``gitdir:`` file pointing nowhere), or
            ``project`` is inside a ``.git`` directory: never read as "no repository", which
            would skip every git gate.
    """
    if not os.path.isdir(project):
        return False
    args = ["rev-parse", "--is-inside-work-tree"]
    r = run_git(args, project)
    if r.ok:
        if r.stdout.strip() == "true":
            return True
        raise GitFailed(_("{project} is inside a repository's git directory (.git), not its work tree; "
                          "give the work tree as projectPath").format(project=os.fspath(project)))
    if r.status == 128 and NOT_A_REPO_RE.search(r.stderr) and "safe.directory" not in r.stderr:
        marker = _git_marker(project)
        if marker is None:
            return False
        raise git_failed(args, project, GitResult(r.status, r.stdout, _("{marker} exists but git cannot read it: {said}").format(
            marker=marker, said=r.stderr.strip()), r.timed_out, r.duration_ms))
    raise git_failed(args, project, r)


def work_tree_root(project: str | os.PathLike[str]) -> Path | None:
    """The top level of the work tree ``project`` is in, or None when it is in none: what
    :func:`is_git_repo` and then ``git rev-parse --show-toplevel`` answer, in one git call where
    both succeed (one process fewer on the way to the agent and in every verification,
    docs/design-notes.md note 85); anything else is asked again the way :func:`is_git_repo` asks.

    Raises:
        GitFailed: as :func:`is_git_repo`.
    """
    if not os.path.isdir(project):
        return None
    r = run_git(["rev-parse", "--is-inside-work-tree", "--show-toplevel"], project)
    lines = r.stdout.splitlines()
    if r.ok and len(lines) == 2 and lines[0].strip() == "true" and lines[1].strip():
        return Path(lines[1].strip())
    return _toplevel(project) if is_git_repo(project) else None


def _git_marker(project: str | os.PathLike[str]) -> Path | None:
    """The nearest ``.git`` (directory or ``gitdir:`` file) at or above ``project``, or None."""
    here = Path(os.path.realpath(project))
    for d in (here, *here.parents):
        if os.path.lexists(d / ".git"):
            return d / ".git"
    return None


def _toplevel(project: str | os.PathLike[str]) -> Path:
    top = _checked(["rev-parse", "--show-toplevel"], project).stdout.strip()
    return Path(top) if top else Path(project)


def _rev(project: str | os.PathLike[str], ref: str) -> str | None:
    """The sha ``ref`` names, None when it names nothing (exit 1). Raises GitFailed otherwise."""
    r = _checked(["rev-parse", "--verify", "--quiet", ref], project, ok_status=(0, 1))
    sha = r.stdout.strip()
    return sha if r.ok and sha else None


def _valid_commit(project: str | os.PathLike[str], ref: str | None) -> bool:
    return bool(ref) and _rev(project, f"{ref}^{{commit}}") is not None


def _empty_tree(project: str | os.PathLike[str]) -> str:
    sha = _checked(["hash-object", "-t", "tree", "/dev/null"], project).stdout.strip()
    return sha or "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


def resolve_commit(project: str, ref: str) -> str | None:
    """The commit sha ``ref`` names in ``project`` (``git rev-parse --verify --quiet <ref>^{commit}``), or None."""
    r = run_git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], project, timeout_ms=30_000)
    return (r.stdout.strip() or None) if r.ok else None
