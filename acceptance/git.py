"""Git baseline, change analysis and the built-in ``git-diff-check`` (20-acceptance §4).

Everything runs plain ``git`` argv (no shell, no GitPython): stdin at EOF, own session, output to
temp files (never a pipe a grandchild could hold), a timeout (default 120000 ms) that kills the
whole group, ``-c core.quotepath=off`` and NUL-separated (``-z``) porcelain/numstat so paths with
spaces or non-ASCII characters arrive verbatim. ``GIT_OPTIONAL_LOCKS=0`` keeps ``git status`` from
refreshing the index: nothing here ever writes to the repository.

Paths in :class:`Baseline` and :class:`Analysis` are relative to the repository's top level
(git porcelain's convention), POSIX separators.

Deliberate deviations from the original (each marked ``port:`` in the code):
* renames are disabled (``--no-renames``), so a rename shows as a deletion + an addition;
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

import hashlib
import logging
import os
import re
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Sequence

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "Baseline",
    "Analysis",
    "Diffstat",
    "FileStat",
    "Signals",
    "GitResult",
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
_DIFF_OPTS = ("--no-renames", "--no-ext-diff", "--no-textconv", "--no-color")


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


def _git_env() -> dict[str, str]:
    env = dict(os.environ)
    env["GIT_OPTIONAL_LOCKS"] = "0"
    env["GIT_TERMINAL_PROMPT"] = "0"
    env.pop("GIT_DIR", None)
    env.pop("GIT_WORK_TREE", None)
    env.pop("GIT_INDEX_FILE", None)
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


def is_git_repo(project: str | os.PathLike[str]) -> bool:
    """True when ``git rev-parse --is-inside-work-tree`` succeeds and prints ``true``."""
    if not os.path.isdir(project):
        return False
    r = run_git(["rev-parse", "--is-inside-work-tree"], project)
    return r.ok and r.stdout.strip() == "true"


def _toplevel(project: str | os.PathLike[str]) -> Path:
    r = run_git(["rev-parse", "--show-toplevel"], project)
    top = r.stdout.strip() if r.ok else ""
    return Path(top) if top else Path(project)


def _rev(project: str | os.PathLike[str], ref: str) -> str | None:
    r = run_git(["rev-parse", "--verify", "--quiet", ref], project)
    sha = r.stdout.strip()
    return sha if r.ok and sha else None


def _valid_commit(project: str | os.PathLike[str], ref: str | None) -> bool:
    return bool(ref) and _rev(project, f"{ref}^{{commit}}") is not None


def _empty_tree(project: str | os.PathLike[str]) -> str:
    r = run_git(["hash-object", "-t", "tree", "/dev/null"], project)
    sha = r.stdout.strip()
    return sha if r.ok and sha else "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


# --------------------------------------------------------------------------------------------
# Porcelain status
# --------------------------------------------------------------------------------------------


def _status_entries(project: str | os.PathLike[str]) -> list[tuple[str, str]] | None:
    """``[(XY, path)]`` from ``git status --porcelain=v1 -z --no-renames --untracked-files=all``."""
    r = run_git(["status", "--porcelain=v1", "-z", "--no-renames", "--untracked-files=all"], project)
    if not r.ok:
        return None
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


def parse_porcelain(entries: Iterable[tuple[str, str]]) -> tuple[list[str], list[str], list[str]]:
    """Classify status entries (20-acceptance §4.1 ``parsePorcelain``).

    Returns:
        ``(changed, untracked, others)``: ``??`` → untracked; a code with any of ``MADRC`` →
        changed; everything else (``!!``, ``UU``, ``T``…) → others.
    """
    changed: list[str] = []
    untracked: list[str] = []
    others: list[str] = []
    for code, path in entries:
        if code == "??":
            untracked.append(path)
        elif any(c in "MADRC" for c in code):
            changed.append(path)
        else:
            others.append(path)
    return changed, untracked, others


def _sha1(path: Path) -> str | None:
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


NON_REPO_MESSAGE = "Not a git repository: change list/diffstat unavailable (command checks still run)."


def capture_baseline(project: str | os.PathLike[str]) -> Baseline:
    """Snapshot the project's git state before work starts (20-acceptance §4.1). Never modifies
    the repository; never raises for git failures (a non-repo yields ``isRepo: False``).

    Hashes (SHA-1 of file bytes, files ≤ 4 MiB): every pre-existing changed file plus the first
    5000 untracked files; a pre-existing deletion gets ``"deleted"`` (port).
    """
    if not is_git_repo(project):
        return Baseline(is_repo=False, message=NON_REPO_MESSAGE)
    root = _toplevel(project)
    head = _rev(project, "HEAD")
    entries = _status_entries(project) or []
    changed, untracked, _others = parse_porcelain(entries)
    dirty_hashes: dict[str, str] = {}
    untracked_hashes: dict[str, str] = {}
    for f in changed:
        h = _sha1(root / f)
        if h is None and not os.path.lexists(root / f):
            h = DELETED_HASH  # port: a pre-existing deletion
        if h is not None:
            dirty_hashes[f] = h
    hashable = [f for f in untracked if not CACHE_PATH_RE.search(f)]  # port: caches are never analysed
    for f in hashable[:UNTRACKED_HASH_CAP]:
        h = _sha1(root / f)
        if h is not None:
            dirty_hashes[f] = h
            untracked_hashes[f] = h
    truncated = max(0, len(hashable) - UNTRACKED_HASH_CAP)
    n = len(entries)
    if head is None:
        message = "No HEAD (empty repository)." + (f" Working tree has {n} entries." if n else "")
    elif n:
        message = f"Baseline HEAD={head}, working tree dirty ({n} entries)."
    else:
        message = f"Baseline HEAD={head}, working tree clean."
    if truncated:
        message += (
            f" {truncated} untracked file(s) beyond the first {UNTRACKED_HASH_CAP} were not hashed; "
            "changes to them cannot be attributed."
        )
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
# Analysis (§4.2) and signals (§4.4)
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


class Signals(BaseModel):
    """Suspicious-marker counts (20-acceptance §4.4); informational, never fail a round."""

    model_config = ConfigDict(populate_by_name=True)

    todo: int = 0
    console_debug: int = Field(0, alias="consoleDebug")
    commented_block: int = Field(0, alias="commentedBlock")
    secret_like: int = Field(0, alias="secretLike")


class Analysis(BaseModel):
    """``report.json.analysis`` (20-acceptance §1.4): ``changedFiles, untrackedFiles, diffstat,
    signals, bigFileChanges, warnings, notes``."""

    model_config = ConfigDict(populate_by_name=True)

    changed_files: list[str] = Field(default_factory=list, alias="changedFiles")
    untracked_files: list[str] = Field(default_factory=list, alias="untrackedFiles")
    diffstat: Diffstat = Field(default_factory=Diffstat)
    signals: Signals = Field(default_factory=Signals)
    big_file_changes: list[str] = Field(default_factory=list, alias="bigFileChanges")
    warnings: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    @property
    def has_changes(self) -> bool:
        """The zero-change gate's test (20-acceptance §3.4)."""
        return bool(
            self.changed_files or self.untracked_files or self.diffstat.total_add > 0 or self.diffstat.total_del > 0
        )

    def to_json(self) -> dict[str, Any]:
        """The report.json ``analysis`` object (camelCase; ``binary`` only where true)."""
        return self.model_dump(by_alias=True, exclude_none=True)


_TODO_RE = re.compile(r"\b(TODO|FIXME|HACK|XXX)\b", re.I)
_CONSOLE_RE = re.compile(r"\bconsole\.(log|debug|info|warn|error)\s*\(|\bdebugger\s*;?")
_SECRET_RE = re.compile(
    r"(['\"]?(?:api[_-]?key|secret|token|passwd|password|authorization|access[_-]?key|pwd)['\"]?\s*[:=]\s*['\"][^'\"]{6,}['\"])",
    re.I,
)
_LONG_LITERAL_RE = re.compile(r"['\"][A-Za-z0-9+/=]{32,}['\"]")
_COMMENT_PREFIXES = ("//", "#", "--", ";", "*")


def scan_signals(lines: Iterable[str]) -> Signals:
    """Count suspicious markers over changed lines (20-acceptance §4.4 ``scanChangedLinesForSignals``).

    todo, consoleDebug, secretLike (≤1 per line) and commentedBlock (one per run of ≥3 consecutive
    comment lines; the run continues across file boundaries).
    """
    s = Signals()
    in_block = False
    run = 0
    for raw in lines:
        line = raw.rstrip()
        if _TODO_RE.search(line):
            s.todo += 1
        if _CONSOLE_RE.search(line):
            s.console_debug += 1
        if _SECRET_RE.search(line):
            s.secret_like += 1
        elif len(line) > 40 and _LONG_LITERAL_RE.search(line):
            s.secret_like += 1
        stripped = line.strip()
        if re.match(r"^(/\*|<!--)", stripped):
            in_block = True
        is_comment = in_block or stripped.startswith(_COMMENT_PREFIXES)
        if is_comment:
            run += 1
            if run == 3:
                s.commented_block += 1
        else:
            run = 0
        if "*/" in stripped or "-->" in stripped:
            in_block = False
    return s


_NUMSTAT_RE = re.compile(r"^(\d+|-)\t(\d+|-)\t(.+)$", re.S)


def _numstat(project: str | os.PathLike[str], revs: Sequence[str]) -> list[tuple[str, int, int, bool]]:
    r = run_git(["diff", "--numstat", "-z", *_DIFF_OPTS, *revs, "--"], project)
    if not r.ok:
        return []
    rows: list[tuple[str, int, int, bool]] = []
    for rec in r.stdout.split("\0"):
        m = _NUMSTAT_RE.match(rec)
        if not m:
            continue
        binary = m.group(1) == "-" or m.group(2) == "-"
        add = 0 if m.group(1) == "-" else int(m.group(1))
        dele = 0 if m.group(2) == "-" else int(m.group(2))
        rows.append((m.group(3), add, dele, binary))
    return rows


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


def _added_lines(project: str | os.PathLike[str], revs: Sequence[str], exclude: set[str]) -> list[str]:
    """``+`` lines of ``git diff -U0 <revs>``, attributed to files via the diff headers."""
    r = run_git(["diff", "-U0", *_DIFF_OPTS, "--src-prefix=a/", "--dst-prefix=b/", *revs, "--"], project)
    if not r.ok:
        return []
    out: list[str] = []
    current: str | None = None
    in_header = False
    for line in r.stdout.split("\n"):
        if line.startswith("diff --git "):
            in_header, current = True, None
            continue
        if in_header:
            if line.startswith("+++ "):
                name = line[4:]
                if name.endswith("\t"):
                    name = name[:-1]
                name = _c_unquote(name)
                current = name[2:] if name.startswith("b/") else None
            elif line.startswith("@@"):
                in_header = False
            continue
        if line.startswith("+") and current is not None and current not in exclude:
            out.append(line[1:])
    return out


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


_SIGNAL_READ_CAP = 4 * 1024 * 1024

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
    """Current untracked files (top-level-relative), ``[]`` for a non-repo or on git failure."""
    entries = _status_entries(project) if is_git_repo(project) else None
    return parse_porcelain(entries or [])[1]


def analyze_changes(
    baseline: Baseline,
    project: str | os.PathLike[str],
    task_text: str = "",
    exclude_untracked: Iterable[str] = (),
) -> Analysis:
    """Net changes since the baseline (20-acceptance §4.2). Never modifies the repo.

    Tracked rows: ``base..HEAD`` (when HEAD moved) merged with ``HEAD..worktree``; pre-existing dirty
    files whose content still equals the baseline hash are excluded. Untracked files are included
    whole (new ones, or pre-existing ones whose content changed); identical pre-existing ones are
    excluded. Signals are scanned over added lines plus included untracked text files.

    port: untracked files matching :data:`CACHE_PATH_RE` and those in ``exclude_untracked`` (the
    engine passes the files the acceptance checks themselves created) are left out, with a note.

    Returns:
        :class:`Analysis`; a non-repo yields an empty analysis with an explanatory note.
    """
    if not baseline.is_repo or not is_git_repo(project):
        a = Analysis()
        a.notes.append("The project is not a git repository; no change list/diffstat analysis was done.")
        return a
    root = _toplevel(project)
    entries = _status_entries(project) or []
    _changed, untracked_now, _others = parse_porcelain(entries)

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
        if _sha1(root / f) == base_hash:
            unchanged_pre.add(f)

    # 3. tracked diff since the baseline
    cur_head = _rev(project, "HEAD")
    base: str | None = None
    if baseline.head and _valid_commit(project, baseline.head):
        base = baseline.head
    elif baseline.head is None:
        base = _empty_tree(project)  # port: the baseline repo had no commit yet
    rows: dict[str, list[Any]] = {}
    added: list[str] = []

    def merge(new_rows: list[tuple[str, int, int, bool]]) -> None:
        for f, a_, d_, b_ in new_rows:
            if f in unchanged_pre:
                continue
            if f in rows:
                rows[f][0] += a_
                rows[f][1] += d_
                rows[f][2] = rows[f][2] or b_
            else:
                rows[f] = [a_, d_, b_]

    if base is not None:
        if cur_head and cur_head != base:
            merge(_numstat(project, [base, cur_head]))
            added += _added_lines(project, [base, cur_head], unchanged_pre)
        worktree_base = cur_head or base
    else:
        worktree_base = cur_head or _empty_tree(project)
    merge(_numstat(project, [worktree_base]))
    added += _added_lines(project, [worktree_base], unchanged_pre)
    per_file: list[FileStat] = []
    for f, (a_, d_, b_) in rows.items():
        if a_ == 0 and d_ == 0 and not b_:
            continue
        per_file.append(FileStat(file=f, add=a_, del_=d_, binary=True if b_ else None))
    changed_files = [r.file for r in per_file]
    tracked_set = set(changed_files)

    # 4. untracked files
    notes: list[str] = []
    pre_untracked = set(baseline.pre_existing_untracked)
    unattributable_set = (
        set([f for f in baseline.pre_existing_untracked if not CACHE_PATH_RE.search(f)][UNTRACKED_HASH_CAP:])
        if baseline.untracked_hash_truncated
        else set()
    )
    unattributable = 0
    excluded = set(exclude_untracked)
    n_cache = n_check_made = 0
    untracked_files: list[str] = []
    untracked_text: list[str] = []
    for f in untracked_now:
        if f in tracked_set:
            continue
        if CACHE_PATH_RE.search(f):
            n_cache += 1
            continue
        if f in excluded:
            n_check_made += 1
            continue
        if f in unattributable_set:
            unattributable += 1
            continue
        path = root / f
        if f in pre_untracked:
            base_hash = baseline.pre_untracked_hashes.get(f) or baseline.pre_dirty_hashes.get(f)
            if base_hash and _sha1(path) == base_hash:
                continue
            notes.append(
                f"Untracked file {f} existed before work started but its content changed; it is counted whole "
                "in this round's changes (line-level attribution is not possible)."
            )
        untracked_files.append(f)
        binary, is_text = _probe(path)
        if binary:
            per_file.append(FileStat(file=f, add=0, del_=0, binary=True))
        else:
            per_file.append(FileStat(file=f, add=_count_lines(path), del_=0))
        if is_text:
            try:
                with open(path, "rb") as fh:
                    untracked_text.extend(fh.read(_SIGNAL_READ_CAP).decode("utf-8", errors="replace").split("\n"))
            except OSError:
                pass

    # 5. totals, big files, lockfiles
    total_add = sum(r.add for r in per_file)
    total_del = sum(r.del_ for r in per_file)
    big = [f"{r.file} (+{r.add} -{r.del_})" for r in per_file if r.add + r.del_ > BIG_FILE_LINES]
    warnings = [
        f"Lockfile modified: {r.file} (confirm the dependency change is intended)" for r in per_file if LOCKFILE_RE.search(r.file)
    ]
    signals = scan_signals([*added, *untracked_text])

    # 8. notes
    if unattributable:
        notes.append(
            f"{unattributable} untracked file(s) beyond the baseline's {UNTRACKED_HASH_CAP}-file hash cap cannot be "
            "attributed and were left out of this analysis."
        )
    if n_cache:
        notes.append(f"{n_cache} untracked tool-cache file(s) (__pycache__, .pytest_cache, node_modules, …) were ignored.")
    if n_check_made:
        notes.append(f"{n_check_made} untracked file(s) created by the acceptance checks themselves were ignored.")
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
    hint = _ext_hint_note(task_text, [*changed_files, *untracked_files])
    if hint:
        notes.append(hint)
    return Analysis(
        changed_files=changed_files,
        untracked_files=untracked_files,
        diffstat=Diffstat(total_add=total_add, total_del=total_del, per_file=per_file),
        signals=signals,
        big_file_changes=big,
        warnings=warnings,
        notes=notes,
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
    Untracked files are not checked. Never raises.
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
        r1 = run_git(["diff", "--check", *_DIFF_OPTS, base, cur_head, "--"], project)
        total_ms += r1.duration_ms
        if r1.status != 0:
            result = r1
    if result is None:
        target = cur_head or _empty_tree(project)
        r2 = run_git(["diff", "--check", *_DIFF_OPTS, target, "--"], project)
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
