"""Git baseline, change analysis and the built-in ``git-diff-check`` (20-acceptance §4).

Everything runs plain ``git`` argv (no shell, no GitPython): stdin at EOF, own session, output to
temp files (never a pipe a grandchild could hold), a timeout (default 120000 ms) that kills the
whole group, ``-c core.quotepath=off`` and NUL-separated (``-z``) porcelain/numstat so paths with
spaces or non-ASCII characters arrive verbatim. ``GIT_OPTIONAL_LOCKS=0`` keeps ``git status`` from
refreshing the index: nothing here ever writes to the repository.

Paths in :class:`Baseline` and :class:`Analysis` are relative to the repository's top level
(git porcelain's convention), POSIX separators.

Deliberate deviations from the original (each marked ``port:`` in the code):
* the tracked change list is one net diff ``baseline commit → working tree`` with rename detection
  (``-M``): a rename is one row for the new path carrying its own line delta, plus a ``renames``
  entry; a worktree ``mv`` git has not recorded (deleted file + new untracked file) is paired by
  content; a commit the agent made and reverted in the worktree is not counted;
* submodules (and repositories nested inside the work tree) are reported by commit
  (``submodules``), never descended into; ``--ignore-submodules=dirty`` keeps their content out;
* signals cover more than §4.4 (debug leftovers and agent tampering, see :mod:`.signals`), computed
  from added *and* removed lines;
* a pre-existing deletion that is still deleted is recorded (hash ``"deleted"``) and excluded
  like any unchanged pre-existing dirty file;
* a baseline taken in a repository without commits diffs against the empty tree, so files the
  agent committed or staged are not lost; ``git-diff-check`` does the same instead of failing;
* ``+``-lines are attributed by tracking diff headers, so an added line that itself starts with
  ``++`` still counts;
* untracked tool caches (:data:`CACHE_PATH_RE`) and files the acceptance checks themselves created
  (passed by the engine) are not task output: a repo without a .gitignore would otherwise pass the
  zero-change gate just because pytest wrote ``.pytest_cache``.
"""

from __future__ import annotations

import difflib
import hashlib
import logging
import os
import posixpath
import re
import signal
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from ..core.childenv import scrub
from ..core.errors import ErrorCode, TianshuError
from ..core.i18n import N_, _
from .signals import Signals, SignalsReport, TamperingItem, scan_changes, scan_signals

__all__ = [
    "Baseline",
    "Analysis",
    "Diffstat",
    "FileStat",
    "Signals",
    "SignalsReport",
    "TamperingItem",
    "Rename",
    "Submodule",
    "GitResult",
    "GitFailed",
    "run_git",
    "capture_baseline",
    "analyze_changes",
    "git_diff_check",
    "scan_signals",
    "parse_porcelain",
    "is_git_repo",
    "list_untracked",
    "MAX_HASH_BYTES",
    "UNTRACKED_HASH_CAP",
]

log = logging.getLogger("tianshu_mcp")

GIT_TIMEOUT_MS = 120_000
"""Default timeout of one git call, ms (20-acceptance §3.3 git helper)."""
GIT_MAX_OUTPUT = 64 * 1024 * 1024
"""At most this many bytes of a git call's stdout/stderr are read (64 MiB)."""
MAX_HASH_BYTES = 4 * 1024 * 1024
"""Files larger than this (4 MiB) get no baseline hash (20-acceptance §4.1)."""
UNTRACKED_HASH_CAP = 5000
"""Only the first 5000 untracked files are hashed at baseline (20-acceptance §4.1)."""
BIG_FILE_LINES = 500
"""A row with add+del above this is a ``bigFileChanges`` entry (20-acceptance §4.2 step 5)."""
DELETED_HASH = "deleted"
"""port: hash recorded for a pre-existing deletion (the file is absent at baseline)."""

_BINARY_EXT = frozenset(
    "png jpg jpeg gif webp ico bmp zip gz tar 7z rar exe dll so dylib bin wasm class jar pyc pdf doc docx "
    "xls xlsx ttf woff woff2".split()
)
LOCKFILE_RE = re.compile(
    r"(^|/)(package-lock\.json|yarn\.lock|pnpm-lock\.yaml|Cargo\.lock|go\.sum|Pipfile\.lock|poetry\.lock|composer\.lock)$"
)

CACHE_PATH_RE = re.compile(
    r"(^|/)(__pycache__|\.pytest_cache|\.mypy_cache|\.ruff_cache|\.hypothesis|\.tox|\.nox|\.venv|node_modules)/"
    r"|\.py[co]$"
)
"""port: untracked tool caches (pytest/mypy/ruff caches, ``__pycache__``, ``.venv``, ``node_modules``)
that a repo without a .gitignore accumulates when tests run; never hashed nor counted as task output."""


_BASE_ARGS = (
    "git",
    "-c", "core.quotepath=off",
    "-c", "color.ui=never",
    "-c", "core.fsmonitor=false",
    "-c", "diff.noprefix=false",
)
_DIFF_OPTS = ("--no-ext-diff", "--no-textconv", "--no-color", "--ignore-submodules=dirty")
"""Options of every ``git diff``; rename detection (``-M``) is added explicitly where wanted."""


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# --------------------------------------------------------------------------------------------
# Running git
# --------------------------------------------------------------------------------------------


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


def run_git(args: Sequence[str], cwd: str | os.PathLike[str], timeout_ms: int = GIT_TIMEOUT_MS) -> GitResult:
    """Run ``git <args>`` in ``cwd`` (20-acceptance §3.3 git helper). Never raises.

    stdin is ``/dev/null``; the child gets its own session; stdout/stderr go to temp files (at most
    :data:`GIT_MAX_OUTPUT` bytes each are read back). On timeout (ms) the group is killed and
    ``status`` is None, ``timed_out`` True. A spawn failure gives ``status`` None and the error
    text in ``stderr``.
    """
    start = time.monotonic()
    argv = [*_BASE_ARGS, *args]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(  # noqa: S603 - argv, never a shell
                argv,
                cwd=os.fspath(cwd),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=_git_env(),
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            return GitResult(None, "", f"[spawn-error] {exc}", False, int((time.monotonic() - start) * 1000))
        timed_out = False
        try:
            proc.wait(timeout=timeout_ms / 1000 if timeout_ms and timeout_ms > 0 else None)
        except subprocess.TimeoutExpired:
            timed_out = True
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


# --------------------------------------------------------------------------------------------
# Porcelain status
# --------------------------------------------------------------------------------------------


def _status_entries(project: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """``[(XY, path)]`` from ``git status --porcelain=v1 -z --no-renames --untracked-files=all
    --ignore-submodules=dirty`` (per-path entries, never C-quoted; a nested repository is one
    ``?? dir/`` entry).

    Raises:
        GitFailed: git status failed (e.g. a clean/smudge filter program such as ``git-lfs`` is
            missing, a corrupt index): never read as a clean working tree.
    """
    r = _checked(
        ["status", "--porcelain=v1", "-z", "--no-renames", "--untracked-files=all", "--ignore-submodules=dirty"],
        project,
    )
    fields = r.stdout.split("\0")
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(fields):
        entry = fields[i]
        i += 1
        if len(entry) < 4:
            continue
        code, path = entry[:2], entry[3:]
        if "R" in code or "C" in code:  # defensive: a rename carries its source as the next field
            i += 1
        out.append((code, path))
    return out


def worktree_status(project: str | os.PathLike[str]) -> tuple[str | None, list[tuple[str, str]]]:
    """``(HEAD sha or None on an unborn branch, [(XY, path)] uncommitted entries)``, read
    without writing (``GIT_OPTIONAL_LOCKS=0``: no index refresh).

    Raises:
        GitFailed: git refused (see :func:`_status_entries`).
    """
    return _rev(project, "HEAD"), _status_entries(project)


def parse_porcelain(entries: Iterable[tuple[str, str]]) -> tuple[list[str], list[str], list[str]]:
    """Classify status entries (20-acceptance §4.1 ``parsePorcelain``).

    Returns:
        ``(changed, untracked, others)``: ``??`` → untracked; a code with any of ``MADRCTU`` →
        changed (port: type changes ``T`` and unmerged ``U``/``AA``/``DD`` entries, e.g. a merge in
        progress, are pre-existing work too, never the agent's); everything else (``!!``) → others.
    """
    changed: list[str] = []
    untracked: list[str] = []
    others: list[str] = []
    for code, path in entries:
        if code == "??":
            untracked.append(path)
        elif any(c in "MADRCTU" for c in code):
            changed.append(path)
        else:
            others.append(path)
    return changed, untracked, others


def file_sha1(path: Path) -> str | None:
    """SHA-1 hex of a regular file's bytes; None when unreadable, not a file or > 4 MiB."""
    try:
        st = path.stat()
        if not path.is_file() or st.st_size > MAX_HASH_BYTES:
            return None
        h = hashlib.sha1()  # noqa: S324 - content fingerprint, not security
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest()
    except OSError:
        return None


GITLINK_PREFIX = "gitlink:"
"""port: baseline fingerprint of a submodule / nested repository: ``gitlink:<HEAD sha>``."""


def _sub_head(path: Path) -> str | None:
    """The checked-out commit of a submodule / nested repository (None when absent or unborn)."""
    if not (path / ".git").exists():
        return None
    r = run_git(["rev-parse", "--verify", "--quiet", "HEAD"], path)
    sha = r.stdout.strip()
    return sha if r.ok and sha else None


def _fingerprint(root: Path, rel: str) -> str | None:
    """The content fingerprint of a path, as git would see it changed or not.

    * a symbolic link → ``link:<its target>`` (git stores the link, never what it points to; a
      dangling link or a link to a directory is a file to git);
    * a submodule / nested repository → ``gitlink:<HEAD>``;
    * a regular file → SHA-1 of its bytes (:func:`file_sha1`), or ``stat:<size>:<mtime ns>`` for
      one over 4 MiB (input issue: unhashed pre-existing files were counted as the agent's change);
    * anything else (a plain directory, a missing path) → None.
    """
    path = root / rel.rstrip("/")
    try:
        if path.is_symlink():
            return "link:" + os.readlink(path)
        if path.is_dir():
            if (path / ".git").exists():
                return GITLINK_PREFIX + (_sub_head(path) or "unborn")
            return None
        st = path.stat()
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    if st.st_size > MAX_HASH_BYTES:
        return f"stat:{st.st_size}:{st.st_mtime_ns}"
    return file_sha1(path)


# --------------------------------------------------------------------------------------------
# Baseline (§4.1)
# --------------------------------------------------------------------------------------------


class Baseline(BaseModel):
    """Pre-work git snapshot, persisted as ``<taskDir>/baseline.json`` (20-acceptance §4.1).

    JSON (camelCase, via ``model_dump(by_alias=True)``): ``isRepo, head (None when the repo has no
    commit), dirty, dirtyFiles (raw ``XY path`` entries), preExistingChanged, preExistingUntracked,
    preDirtyHashes {path: sha1}, preUntrackedHashes {path: sha1}, untrackedHashTruncated (count of
    untracked files beyond the 5000 cap), capturedAt (ISO-8601 UTC), message``.
    """

    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    is_repo: bool = Field(alias="isRepo")
    head: str | None = None
    dirty: bool = False
    dirty_files: list[str] = Field(default_factory=list, alias="dirtyFiles")
    pre_existing_changed: list[str] = Field(default_factory=list, alias="preExistingChanged")
    pre_existing_untracked: list[str] = Field(default_factory=list, alias="preExistingUntracked")
    pre_dirty_hashes: dict[str, str] = Field(default_factory=dict, alias="preDirtyHashes")
    pre_untracked_hashes: dict[str, str] = Field(default_factory=dict, alias="preUntrackedHashes")
    untracked_hash_truncated: int = Field(0, alias="untrackedHashTruncated")
    captured_at: str = Field(default_factory=_now_iso, alias="capturedAt")
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        """The baseline.json object (camelCase keys)."""
        return self.model_dump(by_alias=True)


NON_REPO_MESSAGE = N_("Not a git repository: change list/diffstat unavailable (command checks still run).")
"""``Baseline.message`` of a non-repository (a msgid: stored in the current locale's words)."""


def capture_baseline(project: str | os.PathLike[str]) -> Baseline:
    """Snapshot the project's git state before work starts (20-acceptance §4.1). Never modifies
    the repository; a non-repo yields ``isRepo: False``.

    Raises:
        GitFailed: git refused or failed (see :func:`is_git_repo`, :func:`_status_entries`): the
            baseline cannot be captured, so the task must not start.

    Fingerprints (:func:`_fingerprint`: SHA-1 of the bytes, size and mtime above 4 MiB, the target
    of a symbolic link): every pre-existing changed file plus the first 5000 untracked files; a
    pre-existing deletion gets ``"deleted"``, a submodule or nested repository ``gitlink:<HEAD
    sha>`` (port).
    """
    if not is_git_repo(project):
        return Baseline(is_repo=False, message=_(NON_REPO_MESSAGE))
    root = _toplevel(project)
    head = _rev(project, "HEAD")
    entries = _status_entries(project)
    changed, untracked, _others = parse_porcelain(entries)
    dirty_hashes: dict[str, str] = {}
    untracked_hashes: dict[str, str] = {}
    for f in changed:
        h = _fingerprint(root, f)
        if h is None and not os.path.lexists(root / f):
            h = DELETED_HASH  # port: a pre-existing deletion
        if h is not None:
            dirty_hashes[f] = h
    hashable = [f for f in untracked if not CACHE_PATH_RE.search(f)]  # port: caches are never analysed
    for f in hashable[:UNTRACKED_HASH_CAP]:
        h = _fingerprint(root, f)
        if h is not None:
            dirty_hashes[f] = h
            untracked_hashes[f] = h
    truncated = max(0, len(hashable) - UNTRACKED_HASH_CAP)
    n = len(entries)
    if head is None:
        message = _("No HEAD (empty repository).") + (_(" Working tree has {n} entries.").format(n=n) if n else "")
    elif n:
        message = _("Baseline HEAD={head}, working tree dirty ({n} entries).").format(head=head, n=n)
    else:
        message = _("Baseline HEAD={head}, working tree clean.").format(head=head)
    if truncated:
        message += _(" {n} untracked file(s) beyond the first {cap} were not hashed; changes to them cannot be "
                     "attributed.").format(n=truncated, cap=UNTRACKED_HASH_CAP)
    return Baseline(
        is_repo=True,
        head=head,
        dirty=n > 0,
        dirty_files=[f"{code} {path}" for code, path in entries],
        pre_existing_changed=changed,
        pre_existing_untracked=untracked,
        pre_dirty_hashes=dirty_hashes,
        pre_untracked_hashes=untracked_hashes,
        untracked_hash_truncated=truncated,
        message=message,
    )


# --------------------------------------------------------------------------------------------
# Analysis (§4.2) and signals (§4.4, issue §6: see .signals)
# --------------------------------------------------------------------------------------------


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
    """``report.json.analysis`` (20-acceptance §1.4 plus port fields).

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
        """The zero-change gate's test (20-acceptance §3.4; port: a moved submodule counts)."""
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


_NUMSTAT_RE = re.compile(r"^(\d+|-)\t(\d+|-)\t(.*)$", re.S)
_ZERO_SHA_RE = re.compile(r"^0+$")
GITLINK_MODE = "160000"


def _numstat(project: str | os.PathLike[str], revs: Sequence[str]) -> dict[str, tuple[int, int, bool]]:
    """``{path: (add, del, binary)}`` of ``git diff --numstat -z -M <revs>`` (renames keyed by the
    new path; binary sides count 0)."""
    r = _checked(["diff", "--numstat", "-z", "-M", *_DIFF_OPTS, *revs, "--"], project)
    out: dict[str, tuple[int, int, bool]] = {}
    fields = r.stdout.split("\0")
    i = 0
    while i < len(fields):
        m = _NUMSTAT_RE.match(fields[i])
        i += 1
        if not m:
            continue
        path = m.group(3)
        if path == "":  # rename: "add\tdel\t\0old\0new"
            if i + 1 >= len(fields):
                break
            path = fields[i + 1]
            i += 2
        binary = m.group(1) == "-" or m.group(2) == "-"
        add = 0 if m.group(1) == "-" else int(m.group(1))
        dele = 0 if m.group(2) == "-" else int(m.group(2))
        out[path] = (add, dele, binary)
    return out


@dataclass
class _RawEntry:
    status: str
    score: int | None
    old_mode: str
    new_mode: str
    old_sha: str
    new_sha: str
    path: str
    old_path: str | None = None


def _raw(project: str | os.PathLike[str], revs: Sequence[str]) -> list[_RawEntry]:
    """Entries of ``git diff --raw -z -M --no-abbrev <revs>`` (status letter, similarity score,
    modes, shas, new path, and for renames the old path)."""
    r = _checked(["diff", "--raw", "-z", "-M", "--no-abbrev", *_DIFF_OPTS, *revs, "--"], project)
    out: list[_RawEntry] = []
    fields = r.stdout.split("\0")
    i = 0
    while i < len(fields):
        head = fields[i]
        i += 1
        if not head.startswith(":"):
            continue
        parts = head[1:].split()
        if len(parts) < 5:
            continue
        old_mode, new_mode, old_sha, new_sha, st = parts[:5]
        letter, score_s = st[:1], st[1:]
        score = int(score_s) if score_s.isdigit() else None
        if letter in ("R", "C"):
            if i + 1 >= len(fields):
                break
            old_path, path = fields[i], fields[i + 1]
            i += 2
        else:
            if i >= len(fields):
                break
            old_path, path = None, fields[i]
            i += 1
        out.append(_RawEntry(letter, score, old_mode, new_mode, old_sha, new_sha, path, old_path))
    return out


_C_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def _c_unquote(s: str) -> str:
    """Undo git's C-style quoting of a path (``"b/q\\"x"`` → ``b/q"x``)."""
    if len(s) < 2 or not (s.startswith('"') and s.endswith('"')):
        return s
    body = s[1:-1]
    out = bytearray()
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in _C_ESCAPES:
                out.append(_C_ESCAPES[nxt])
                i += 2
                continue
            if re.match(r"[0-7]{3}", body[i + 1 : i + 4]):
                out.append(int(body[i + 1 : i + 4], 8))
                i += 4
                continue
        out.extend(ch.encode("utf-8"))
        i += 1
    return out.decode("utf-8", errors="replace")


def _header_path(value: str, prefix: str) -> str | None:
    """The path of a ``--- a/…``/``+++ b/…`` header value (None for ``/dev/null``)."""
    value = value.removesuffix("\t")  # git appends a tab after a name containing a space
    value = _c_unquote(value)
    if value == "/dev/null":
        return None
    return value[len(prefix):] if value.startswith(prefix) else None


def _changed_lines(
    project: str | os.PathLike[str], revs: Sequence[str], skip: set[str]
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """``(added, removed)``: per file, the ``+`` and ``-`` lines of ``git diff -U0 -M <revs>``.

    Files are attributed through the ``---``/``+++`` headers (C-quoted names unquoted): the new
    path, or the old one for a deletion. Paths in ``skip`` (unchanged pre-existing files,
    submodules) are left out.
    """
    r = _checked(["diff", "-U0", "-M", *_DIFF_OPTS, "--src-prefix=a/", "--dst-prefix=b/", *revs, "--"], project)
    added: dict[str, list[str]] = {}
    removed: dict[str, list[str]] = {}
    if not r.ok:
        return added, removed
    current: str | None = None
    old: str | None = None
    in_header = False
    for line in r.stdout.split("\n"):
        if line.startswith("diff --git "):
            in_header, current, old = True, None, None
            continue
        if in_header:
            if line.startswith("--- "):
                old = _header_path(line[4:], "a/")
            elif line.startswith("+++ "):
                current = _header_path(line[4:], "b/") or old
            elif line.startswith("@@"):
                in_header = False
            continue
        if current is None or current in skip:
            continue
        if line.startswith("+"):
            added.setdefault(current, []).append(line[1:])
        elif line.startswith("-"):
            removed.setdefault(current, []).append(line[1:])
    return added, removed


def _probe(path: Path) -> tuple[bool, bool]:
    """``(binary, text_for_signals)`` of a file (20-acceptance §4.2 step 4)."""
    ext = path.suffix[1:].lower() if path.suffix else ""
    bin_ext = ext in _BINARY_EXT
    try:
        with open(path, "rb") as fh:
            head = fh.read(8000)
    except OSError:
        return True, False
    nul = head.count(b"\0")
    binary = bin_ext or (len(head) > 0 and nul > len(head) * 0.10)
    text = not bin_ext and b"\0" not in head[:4000]
    return binary, text


def _count_lines(path: Path) -> int:
    """``len(text.split("\\n"))`` without holding the file: newlines + 1."""
    n = 0
    try:
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                n += chunk.count(b"\n")
    except OSError:
        return 0
    return n + 1


def _read_text(path: Path, cap: int) -> str | None:
    try:
        with open(path, "rb") as fh:
            return fh.read(cap).decode("utf-8", errors="replace")
    except OSError:
        return None


def _same_blob(path: Path, sha: str) -> bool:
    """``path`` on disk holds exactly git blob ``sha`` (a symbolic link: its target text)."""
    try:
        if path.is_symlink():
            data = os.readlink(path).encode()
            return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == sha  # noqa: S324
    except OSError:
        return False
    return _blob_sha(path) == sha


def _blob_sha(path: Path) -> str | None:
    """Git's blob id of a file (``sha1("blob <n>\\0" + bytes)``); None when unreadable or > 4 MiB."""
    try:
        if not path.is_file() or path.stat().st_size > MAX_HASH_BYTES:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # noqa: S324


_SIGNAL_READ_CAP = 4 * 1024 * 1024
_RENAME_PAIR_BYTES = 256 * 1024
"""port: unstaged renames are matched by similarity only for files up to this size (exact copies of any
size up to 4 MiB are always matched)."""
_RENAME_PAIR_BUDGET = 200
"""port: at most this many (deleted, new) pairs are compared by similarity."""
RENAME_THRESHOLD = 50
"""Minimum similarity (percent) for a rename, as git's default ``-M``."""


def _line_delta(old: list[str], new: list[str]) -> tuple[int, int, list[str], list[str], int]:
    """``(add, del, added_lines, removed_lines, similarity%)`` between two line lists."""
    sm = difflib.SequenceMatcher(None, old, new, autojunk=False)
    add = dele = 0
    plus: list[str] = []
    minus: list[str] = []
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag in ("replace", "delete"):
            dele += i2 - i1
            minus.extend(old[i1:i2])
        if tag in ("replace", "insert"):
            add += j2 - j1
            plus.extend(new[j1:j2])
    return add, dele, plus, minus, round(sm.ratio() * 100)


@dataclass
class _UnstagedRename:
    old: str
    new: str
    similarity: int
    add: int
    dele: int
    binary: bool
    added: list[str]
    removed: list[str]


def _pair_unstaged_renames(
    project: str | os.PathLike[str], root: Path, deletions: Sequence[_RawEntry], new_files: Sequence[str]
) -> list[_UnstagedRename]:
    """port: match files deleted from the worktree with new untracked files (a ``mv`` git has not
    recorded): identical content first (any type), then line similarity ≥ 50 % for text files up to
    256 KiB, best pairs first."""
    if not deletions or not new_files:
        return []
    pairs: list[_UnstagedRename] = []
    by_sha: dict[str, list[_RawEntry]] = {}
    for d in deletions:
        by_sha.setdefault(d.old_sha, []).append(d)
    left_new: list[str] = []
    used_old: set[str] = set()
    for f in new_files:
        sha = _blob_sha(root / f)
        cands = [d for d in by_sha.get(sha or "", []) if d.path not in used_old]
        if cands:
            d = min(cands, key=lambda e: (posixpath.basename(e.path) != posixpath.basename(f), e.path))
            used_old.add(d.path)
            binary, _text = _probe(root / f)
            pairs.append(_UnstagedRename(d.path, f, 100, 0, 0, binary, [], []))
        else:
            left_new.append(f)
    left_old = [d for d in deletions if d.path not in used_old]
    if not left_old or not left_new:
        return pairs
    news: dict[str, list[str]] = {}
    for f in left_new:
        p = root / f
        try:
            size = p.stat().st_size
        except OSError:
            continue
        binary, text = _probe(p)
        if binary or not text or size > _RENAME_PAIR_BYTES:
            continue
        content = _read_text(p, _RENAME_PAIR_BYTES)
        if content is not None:
            news[f] = content.splitlines()
    olds: dict[str, list[str]] = {}
    for d in left_old:
        r = run_git(["cat-file", "-s", d.old_sha], project)
        if not r.ok or not r.stdout.strip().isdigit() or int(r.stdout.strip()) > _RENAME_PAIR_BYTES:
            continue
        blob = run_git(["cat-file", "blob", d.old_sha], project)
        if blob.ok and "\0" not in blob.stdout[:4000]:
            olds[d.path] = blob.stdout.splitlines()
    scored: list[tuple[int, str, str]] = []
    budget = _RENAME_PAIR_BUDGET
    for o, olines in olds.items():
        for n, nlines in news.items():
            if budget <= 0:
                break
            budget -= 1
            sm = difflib.SequenceMatcher(None, olines, nlines, autojunk=False)
            if sm.real_quick_ratio() * 100 < RENAME_THRESHOLD or sm.quick_ratio() * 100 < RENAME_THRESHOLD:
                continue
            sim = round(sm.ratio() * 100)
            if sim >= RENAME_THRESHOLD:
                scored.append((sim, o, n))
    scored.sort(key=lambda t: (-t[0], t[1], t[2]))
    taken_new: set[str] = set()
    for _sim, o, n in scored:
        if o in used_old or n in taken_new:
            continue
        used_old.add(o)
        taken_new.add(n)
        add, dele, plus, minus, sim = _line_delta(olds[o], news[n])
        pairs.append(_UnstagedRename(o, n, sim, add, dele, False, plus, minus))
    return pairs


_EXT_HINTS: list[tuple[re.Pattern[str], str, str]] = [
    (re.compile(r"\btypescript\b", re.I), "typescript", ".ts"),
    (re.compile(r"\bjavascript\b", re.I), "javascript", ".js"),
    (re.compile(r"\bpython\b", re.I), "python", ".py"),
    (re.compile(r"\bgo\b", re.I), "go", ".go"),
    (re.compile(r"\bjava\b", re.I), "java", ".java"),
    (re.compile(r"\bvue\b", re.I), "vue", ".vue"),
    (re.compile(r"\bcss\b|样式", re.I), "css", ".css"),
    (re.compile(r"\bhtml\b|页面", re.I), "html", ".html"),
    (re.compile(r"\brust\b", re.I), "rust", ".rs"),
    (re.compile(r"\bmarkdown\b|文档", re.I), "markdown", ".md"),
    (re.compile(r"\bjson\b", re.I), "json", ".json"),
    (re.compile(r"\bsql\b", re.I), "sql", ".sql"),
    (re.compile(r"\byaml\b|\byml\b", re.I), "yaml", ".yml"),
]


def _ext_hint_note(task_text: str, files: Sequence[str]) -> str | None:
    if not task_text:
        return None
    missing: list[str] = []
    lowered = [f.lower() for f in files]
    for rx, label, suffix in _EXT_HINTS:
        if rx.search(task_text) and not any(suffix in f for f in lowered):
            missing.append(f"{label} → {suffix}")
    if not missing:
        return None
    return (
        f"Task mentions file type(s) ({', '.join(missing)}) but no changed path has that suffix "
        "(hint only, not a failure)."
    )


def list_untracked(project: str | os.PathLike[str]) -> list[str]:
    """Current untracked files (top-level-relative), ``[]`` for a non-repo. Raises GitFailed."""
    entries = _status_entries(project) if is_git_repo(project) else []
    return parse_porcelain(entries)[1]


def _project_prefix(project: str | os.PathLike[str], root: Path) -> str:
    """The project's path relative to the repository top level, POSIX (``""`` at the top)."""
    try:
        rel = os.path.relpath(os.path.realpath(project), os.path.realpath(root))
    except ValueError:
        return ""
    rel = rel.replace(os.sep, "/")
    return "" if rel == "." or rel.startswith("..") else rel


def _normalize_argvs(check_argvs: Sequence[Sequence[str]], project: str | os.PathLike[str]) -> list[list[str]]:
    """Check argvs with absolute tokens inside the project made project-relative."""
    proj = os.path.realpath(project)
    out: list[list[str]] = []
    for argv in check_argvs:
        row: list[str] = []
        for tok in argv:
            t = str(tok)
            if os.path.isabs(t):
                real = os.path.realpath(t)
                if real == proj or real.startswith(proj.rstrip(os.sep) + os.sep):
                    t = os.path.relpath(real, proj).replace(os.sep, "/")
            row.append(t)
        out.append(row)
    return out


def analyze_changes(
    baseline: Baseline,
    project: str | os.PathLike[str],
    task_text: str = "",
    exclude_untracked: Iterable[str] = (),
    check_argvs: Sequence[Sequence[str]] = (),
) -> Analysis:
    """Net changes since the baseline (20-acceptance §4.2, issue §6). Never modifies the repo.

    Tracked rows come from one net diff ``baseline commit → working tree`` with rename detection
    (``-M``; agent commits are merged, a commit reverted in the worktree is not counted): a rename
    is one row for the new path (its own line delta; kept even when 0/0) plus a ``renames`` entry;
    binary rows carry ``binary: true``. Pre-existing dirty files whose content still equals the
    baseline fingerprint are excluded. Untracked files are included whole (new ones, or
    pre-existing ones whose content changed); identical pre-existing ones are excluded. A worktree
    deletion paired with a new untracked file by content (identical, or ≥50 % similar lines) is
    reported as a rename too. Submodules and embedded repositories are reported in
    ``submodules`` (commit before/after) and never descended into. Signals (:mod:`.signals`) are
    scanned over the added/removed lines (new files: all lines), deleted files and ``check_argvs``.

    port: untracked files matching :data:`CACHE_PATH_RE` and those in ``exclude_untracked`` (the
    engine passes the files the acceptance checks themselves created) are left out, with a note.

    Args:
        baseline: the pre-work baseline.
        project: project root (the checks' cwd).
        task_text: the task brief (extension-hint note).
        exclude_untracked: untracked files the checks themselves created.
        check_argvs: argv of each acceptance check (files they name are tampering candidates).

    Returns:
        :class:`Analysis`; a non-repo yields an empty analysis with an explanatory note.
    """
    if not baseline.is_repo or not is_git_repo(project):
        a = Analysis()
        a.notes.append("The project is not a git repository; no change list/diffstat analysis was done.")
        return a
    root = _toplevel(project)
    entries = _status_entries(project)
    _changed, untracked_now, _others = parse_porcelain(entries)
    notes: list[str] = []

    # 2. pre-existing dirty files that are unchanged since the baseline
    unchanged_pre: set[str] = set()
    for f in baseline.pre_existing_changed:
        base_hash = baseline.pre_dirty_hashes.get(f) or baseline.pre_untracked_hashes.get(f)
        if not base_hash:
            continue
        if base_hash == DELETED_HASH:
            if not os.path.lexists(root / f):
                unchanged_pre.add(f)
            continue
        if _fingerprint(root, f) == base_hash:
            unchanged_pre.add(f)

    # 3. tracked diff since the baseline: one net diff base → worktree
    cur_head = _rev(project, "HEAD")
    base: str
    if baseline.head and _valid_commit(project, baseline.head):
        base = baseline.head
    elif baseline.head is None:
        base = _empty_tree(project)  # port: the baseline repo had no commit yet
    else:
        # input issue: measuring against whatever HEAD is now let `rm -rf .git && git init` pass
        raise GitFailed(_("the baseline commit {commit} is no longer in the repository at {project} "
                          "(its history was replaced or rewritten and pruned): the work cannot be measured against "
                          "the pre-work state").format(commit=baseline.head[:12], project=project))
    raw = _raw(project, [base])
    stats = _numstat(project, [base])
    for e in raw:  # a pre-existing untracked file the agent only staged or committed, unchanged
        h = baseline.pre_untracked_hashes.get(e.path)
        if h and e.path not in unchanged_pre and _fingerprint(root, e.path) == h:
            unchanged_pre.add(e.path)

    def excluded(e: _RawEntry) -> bool:
        if e.path not in unchanged_pre:
            return False
        return e.old_path is None or e.old_path in unchanged_pre

    rows: dict[str, list[Any]] = {}
    renames: list[Rename] = []
    submodules: list[Submodule] = []
    deletions: list[_RawEntry] = []
    skip_lines: set[str] = set(unchanged_pre)
    untracked_set = set(untracked_now)
    index_only: list[str] = []
    for e in raw:
        if GITLINK_MODE in (e.old_mode, e.new_mode):
            skip_lines.add(e.path)
            if e.path in unchanged_pre:
                continue
            before = e.old_sha if e.old_mode == GITLINK_MODE and not _ZERO_SHA_RE.match(e.old_sha) else None
            after: str | None = None
            if e.new_mode == GITLINK_MODE:
                after = e.new_sha if not _ZERO_SHA_RE.match(e.new_sha) else _sub_head(root / e.path)
            if before != after:
                submodules.append(Submodule(path=e.path, before=before, after=after))
            continue
        if excluded(e):
            continue
        if e.status == "D" and e.path in untracked_set and _same_blob(root / e.path, e.old_sha):
            index_only.append(e.path)  # removed from the index only (`git rm --cached`): the file is unchanged
            skip_lines.add(e.path)
            continue
        add, dele, binary = stats.get(e.path, (0, 0, False))
        is_rename = e.status == "R" and e.old_path is not None
        if not is_rename and add == 0 and dele == 0 and not binary and e.status not in ("A", "D") \
                and e.old_mode == e.new_mode:
            continue  # stat-only: the content and the mode are what they were
        rows[e.path] = [add, dele, binary]
        if is_rename:
            renames.append(Rename(from_=e.old_path or "", to=e.path, similarity=e.score if e.score is not None else 100))
        if e.status == "D":
            deletions.append(e)
    added, removed = _changed_lines(project, [base], skip_lines)

    # 4. untracked files (and embedded repositories)
    pre_untracked = set(baseline.pre_existing_untracked)
    unattributable_set = (
        set([f for f in baseline.pre_existing_untracked if not CACHE_PATH_RE.search(f)][UNTRACKED_HASH_CAP:])
        if baseline.untracked_hash_truncated
        else set()
    )
    unattributable = 0
    index_only_set = set(index_only)
    excluded_untracked = set(exclude_untracked)
    n_cache = n_check_made = 0
    untracked_files: list[str] = []
    new_untracked: list[str] = []
    embedded: list[str] = []
    untracked_rows: dict[str, FileStat] = {}
    for f in untracked_now:
        if f in rows or f in index_only_set:
            continue
        if CACHE_PATH_RE.search(f):
            n_cache += 1
            continue
        if f in excluded_untracked:
            n_check_made += 1
            continue
        if f in unattributable_set:
            unattributable += 1
            continue
        path = root / f
        if f.endswith("/"):  # git lists a nested repository as one directory entry: not descended into
            fp = _fingerprint(root, f)
            if f in pre_untracked and fp == (baseline.pre_untracked_hashes.get(f) or baseline.pre_dirty_hashes.get(f)):
                continue
            sub = f.rstrip("/")
            submodules.append(Submodule(path=sub, before=None, after=_sub_head(root / sub)))
            embedded.append(sub)
            continue
        if f in pre_untracked:
            base_hash = baseline.pre_untracked_hashes.get(f) or baseline.pre_dirty_hashes.get(f)
            if base_hash and _fingerprint(root, f) == base_hash:
                continue
            notes.append(
                f"Untracked file {f} existed before work started but its content changed; it is counted whole "
                "in this round's changes (line-level attribution is not possible)."
            )
        else:
            new_untracked.append(f)
        untracked_files.append(f)
        binary, is_text = _probe(path)
        if binary:
            untracked_rows[f] = FileStat(file=f, add=0, del_=0, binary=True)
        else:
            untracked_rows[f] = FileStat(file=f, add=_count_lines(path), del_=0)
        if is_text:
            content = _read_text(path, _SIGNAL_READ_CAP)
            if content is not None:
                added[f] = content.split("\n")

    # port: a worktree move git has not recorded (deleted tracked file + new untracked file)
    unstaged = _pair_unstaged_renames(project, root, deletions, new_untracked)
    for p in unstaged:
        rows.pop(p.old, None)
        untracked_rows.pop(p.new, None)
        untracked_files.remove(p.new)
        rows[p.new] = [p.add, p.dele, p.binary]
        renames.append(Rename(from_=p.old, to=p.new, similarity=p.similarity))
        removed.pop(p.old, None)
        added.pop(p.new, None)
        if p.added:
            added[p.new] = p.added
        if p.removed:
            removed[p.new] = p.removed
    if unstaged:
        notes.append(
            f"{len(unstaged)} rename(s) not recorded by git were detected by content: "
            + ", ".join(f"{p.old} → {p.new}" for p in unstaged)
            + "."
        )
    paired_old = {p.old for p in unstaged}
    deleted_files = [e.path for e in deletions if e.path not in paired_old]

    # a project that is a sub-tree of its repository (a monorepo package): changes elsewhere in the
    # repository are not this task's output; they are listed as a signal and left out of the
    # change list, the diffstat and the zero-change gate (input issue: repository-level gate)
    prefix = _project_prefix(project, root)
    outside: list[str] = []
    if prefix:
        def inside(path: str) -> bool:
            return path == prefix or path.startswith(prefix + "/")

        for f in [f for f in rows if not inside(f)]:
            rows.pop(f)
            outside.append(f)
        for f in [f for f in untracked_files if not inside(f)]:
            untracked_files.remove(f)
            untracked_rows.pop(f, None)
            outside.append(f)
        renames = [r for r in renames if inside(r.to)]
        submodules = [sm for sm in submodules if inside(sm.path)]
        for table in (added, removed):
            for f in [f for f in table if not inside(f)]:
                table.pop(f)
        deleted_files = [f for f in deleted_files if inside(f)]

    per_file = [FileStat(file=f, add=a_, del_=d_, binary=True if b_ else None) for f, (a_, d_, b_) in rows.items()]
    per_file += list(untracked_rows.values())
    changed_files = list(rows)
    for s in submodules:
        if s.path not in embedded and s.path not in rows:
            changed_files.append(s.path)

    # 5. totals, big files, lockfiles
    total_add = sum(r.add for r in per_file)
    total_del = sum(r.del_ for r in per_file)
    big = [f"{r.file} (+{r.add} -{r.del_})" for r in per_file if r.add + r.del_ > BIG_FILE_LINES]
    warnings = [
        f"Lockfile modified: {r.file} (confirm the dependency change is intended)" for r in per_file if LOCKFILE_RE.search(r.file)
    ]
    if outside:
        warnings.append(f"Edits outside the project's sub-tree {prefix}/ (not counted as this task's output): "
                        + ", ".join(sorted(outside)[:20]) + (" …" if len(outside) > 20 else ""))
    scanned = scan_changes(
        added,
        removed,
        deleted_files,
        [*changed_files, *untracked_files, *(r.from_ for r in renames)],
        _normalize_argvs(check_argvs, project),
        project_prefix=_project_prefix(project, root),
    )

    # 8. notes
    if unattributable:
        notes.append(
            f"{unattributable} untracked file(s) beyond the baseline's {UNTRACKED_HASH_CAP}-file hash cap cannot be "
            "attributed and were left out of this analysis."
        )
    if index_only:
        notes.append(f"{len(index_only)} file(s) were removed from git's index but are unchanged on disk (not "
                     "counted as changes): " + ", ".join(index_only[:20]) + (" …" if len(index_only) > 20 else ""))
    if n_cache:
        notes.append(f"{n_cache} untracked tool-cache file(s) (__pycache__, .pytest_cache, node_modules, …) were ignored.")
    if n_check_made:
        notes.append(f"{n_check_made} untracked file(s) created by the acceptance checks themselves were ignored.")
    if submodules:
        notes.append(
            "Submodules / embedded repositories changed (reported by commit, their contents are not analysed): "
            + ", ".join(
                f"{s.path} ({(s.before or 'none')[:7]} → {(s.after or 'none')[:7]})"
                + (" [embedded repository, not a registered submodule]" if s.path in embedded else "")
                for s in submodules
            )
            + "."
        )
    if baseline.dirty:
        a_cnt = len(baseline.pre_existing_changed)
        b_cnt = len(baseline.pre_existing_untracked)
        notes.append(
            f"The working tree already had {a_cnt} tracked dirty file(s) + {b_cnt} untracked file(s) before work "
            "started; this report attributes only net changes relative to the baseline."
        )
    if cur_head and cur_head != baseline.head:
        notes.append(
            "The agent created git commit(s) during the task; the change list merges baseline → current HEAD, "
            "nothing is lost."
        )
    if cur_head and not run_git(["symbolic-ref", "-q", "HEAD"], project).ok:
        notes.append(f"HEAD is detached (at {cur_head[:7]}).")
    hint = _ext_hint_note(task_text, [*changed_files, *untracked_files])
    if hint:
        notes.append(hint)
    return Analysis(
        changed_files=changed_files,
        untracked_files=untracked_files,
        diffstat=Diffstat(total_add=total_add, total_del=total_del, per_file=per_file),
        signals=scanned.signals,
        big_file_changes=big,
        warnings=warnings,
        notes=notes,
        renames=renames,
        submodules=submodules,
        tampering=scanned.tampering,
        outside_project=sorted(outside),
    )


# --------------------------------------------------------------------------------------------
# git-diff-check (§4.3)
# --------------------------------------------------------------------------------------------

GIT_CHECK_NAME = "git-diff-check"


def git_diff_check(project: str | os.PathLike[str], baseline: Baseline) -> dict[str, Any]:
    """The built-in whitespace check (20-acceptance §4.3), a CheckResult dict (§1.3).

    With a valid baseline commit: ``git diff --check <base> HEAD`` when HEAD moved (returned if it
    fails), then ``git diff --check HEAD``. Without one: ``git diff --check HEAD`` (port: against the
    empty tree when the repo has no commit, instead of failing). A non-repo gives a skip result.
    ``outputTail`` = last 2000 chars of stdout + last 2000 of stderr; ``durationMs`` sums the calls.
    Untracked files are not checked.

    Raises:
        GitFailed: git failed for another reason than whitespace problems (exit 2).
    """
    if not baseline.is_repo or not is_git_repo(project):
        return {
            "name": GIT_CHECK_NAME,
            "cmd": "git diff --check",
            "passed": True,
            "durationMs": 0,
            "exitCode": None,
            "outputTail": "",
            "timeout": False,
            "skipped": True,
            "reason": "not a git repository, skipped",
            "aborted": False,
        }
    base = baseline.head if baseline.head and _valid_commit(project, baseline.head) else None
    cmd = f"git diff --check (base={base[:7]})" if base else "git diff --check"
    cur_head = _rev(project, "HEAD")
    if base is None and baseline.head is None and cur_head:
        base = _empty_tree(project)  # port: baseline had no commit; check what the agent committed too
    total_ms = 0
    result: GitResult | None = None
    if base and cur_head and cur_head != base:
        r1 = _checked(["diff", "--check", "-M", *_DIFF_OPTS, base, cur_head, "--"], project, ok_status=(0, 2))
        total_ms += r1.duration_ms
        if r1.status != 0:
            result = r1
    if result is None:
        target = cur_head or _empty_tree(project)
        r2 = _checked(["diff", "--check", "-M", *_DIFF_OPTS, target, "--"], project, ok_status=(0, 2))
        total_ms += r2.duration_ms
        result = r2
    return {
        "name": GIT_CHECK_NAME,
        "cmd": cmd,
        "passed": result.status == 0,
        "durationMs": total_ms,
        "exitCode": result.status,
        "outputTail": result.stdout[-2000:] + result.stderr[-2000:],
        "timeout": result.timed_out,
        "aborted": False,
    }


def resolve_commit(project: str, ref: str) -> str | None:
    """The commit sha ``ref`` names in ``project`` (``git rev-parse --verify --quiet <ref>^{commit}``), or None."""
    try:
        out = subprocess.run(["git", "-C", project, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
                             capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=30, check=False,
                             env=_git_env())
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None
