"""Baseline runs for baseline grading: the checks on the pre-work tree (see :mod:`.grading`).

:func:`run_baseline_checks` runs the checks not cached yet in a temporary ``git worktree add
--detach`` of the baseline head, with the pre-work dirty state rebuilt (``git read-tree --reset -u
<stash>`` + the untracked copies of :mod:`.state`, or the hash fallback), and caches the
results in ``baseline-checks.json`` (a check runs at most once per task on the baseline; output in
``baseline-checks.log``). The worktree is always removed afterwards. :func:`log_sections` splits a
verify log into its checks' outputs.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from filelock import FileLock, Timeout

from ...core.files import atomic_write_json, read_json_safe
from ...core.git.registration import forget_worktree
from ...core.i18n import _
from ...core.procs import stop_requested
from ..config import CheckDef
from ..git import CACHE_PATH_RE, DELETED_HASH, Baseline, file_sha1, run_git
from .. import runner as _runner
from ..runner import SKIP_CANCELLED, SPAWN_REASON_PREFIX, ZERO_TEST_REASON, run_checks
from .ids import parse_test_ids
from ..integrity.infra import id_argv
from ..integrity.pycache import bytecode_env
from .state import (
    _STATE_VERSION,
    UNTRACKED_DIR,
    _copy_entry,
    _now_iso,
    _safe_rel,
    _toplevel,
    load_baseline_state,
)

_NO_TEST_REASONS = {ZERO_TEST_REASON, getattr(_runner, "ALL_SKIPPED_REASON", ZERO_TEST_REASON)}
"""Fail-closed reasons meaning "no test really ran" (the check is not comparable)."""

log = logging.getLogger("tianshu_mcp")

CACHE_FILE = "baseline-checks.json"
LOCK_FILE = ".baseline-checks.lock"
LOG_FILE = "baseline-checks.log"
WORKTREE_PREFIX = "tianshu-baseline-"
_OWNERLESS_GRACE_S = 60.0
"""A temporary worktree directory without an owner file is another process's in the making for this long (s)."""
MAX_LOG_READ = 64 * 1024 * 1024
"""A verify log larger than this is not parsed for test ids (``outputTail`` is used instead)."""
LINKED_DEP_DIRS = ("node_modules", ".venv", "venv")
"""Ignored dependency directories of the project symlinked into the baseline worktree, so the
baseline run resolves the same tools (the runner puts ``.venv/bin`` and ``node_modules/.bin`` first
on ``PATH``) instead of failing for want of them."""

_NO_HOOKS = ("-c", "core.hooksPath=/dev/null")
_WORKTREE_TIMEOUT_MS = 300_000


# --------------------------------------------------------------------------------------------
# The baseline worktree
# --------------------------------------------------------------------------------------------


def _worktree_paths(top: Path) -> set[str]:
    r = run_git(["worktree", "list", "--porcelain"], top)
    out: set[str] = set()
    for line in r.stdout.splitlines() if r.ok else []:
        if line.startswith("worktree "):
            out.add(os.path.realpath(line[len("worktree "):]))
    return out


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def _repo_lock(top: Path) -> threading.Lock:
    """One lock per repository for ``git worktree add/remove`` in this process: the baseline and
    the pristine worktree of a round are made at the same time, and git refuses a second add
    while the first holds its admin files."""
    key = os.path.realpath(top)
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(key, threading.Lock())


def _remove_worktree(top: Path, wt: Path) -> bool:
    """Remove our worktree: git's registration of it, then its directory, by reading files
    (:func:`tianshu_mcp.core.git.registration.forget_worktree`: no git process a cancel could cut
    off half-way, and no ``worktree prune``, which would also forget the user's own worktrees on
    an unmounted disk). Returns True when git no longer lists it."""
    with _repo_lock(top):
        forget_worktree(str(top), wt)
    return os.path.realpath(wt) not in _worktree_paths(top)


def _owner_gone(parent: Path) -> bool:
    """True unless ``parent/owner.json`` names a live process. A directory without a readable
    owner counts as gone only after :data:`_OWNERLESS_GRACE_S` (its creator writes the owner
    right after ``mkdtemp``)."""
    owner = read_json_safe(parent / "owner.json")
    pid = owner.get("pid") if isinstance(owner, dict) else None
    if isinstance(pid, int):
        return not _pid_alive(pid)
    try:
        return time.time() - parent.stat().st_mtime > _OWNERLESS_GRACE_S
    except OSError:
        return True


def _sweep_stale(top: Path) -> None:
    """Remove what a dead tianshu process left of its temporary worktrees (owner pid recorded
    next to them): those ``top`` still lists, even when their directory is gone (an older
    version's half-done removal), and the temporary directories themselves, whose registration
    may live in another repository (the owner's ``project``)."""
    tmp_root = Path(os.path.realpath(tempfile.gettempdir()))
    for path in _worktree_paths(top):
        parent = Path(path).parent
        if parent.name.startswith(WORKTREE_PREFIX) and os.path.realpath(parent.parent) == str(tmp_root) \
                and _owner_gone(parent):
            _remove_worktree(top, Path(path))
            shutil.rmtree(parent, ignore_errors=True)
    for parent in tmp_root.glob(WORKTREE_PREFIX + "*"):
        if parent.is_dir() and not parent.is_symlink() and _owner_gone(parent):
            owner = read_json_safe(parent / "owner.json")
            project = owner.get("project") if isinstance(owner, dict) else None
            forget_worktree(str(project) if isinstance(project, str) else str(top), parent / "wt")
            shutil.rmtree(parent, ignore_errors=True)


def _reproduce_dirty(
    wt_top: Path, top: Path, state: Mapping[str, Any] | None, baseline: Baseline, tdir: Path, notes: list[str]
) -> None:
    """Bring the fresh worktree to the pre-work state (stored state, else the hash fallback)."""
    if state is None:
        if baseline.dirty:
            _copy_unchanged(wt_top, top, baseline, [*baseline.pre_existing_changed, *baseline.pre_existing_untracked],
                            notes, _("baseline-state.json is missing"))
        return
    sha = state.get("dirtyStashCommit")
    if sha:
        exists = run_git(["cat-file", "-e", f"{sha}^{{commit}}"], top)
        r = run_git(["read-tree", "--reset", "-u", sha], wt_top) if exists.ok else None
        if r is None or not r.ok:
            notes.append(
                _("the pre-work tracked changes could not be reproduced in the baseline worktree "
                  "(stash commit {commit} unavailable)").format(commit=str(sha)[:12])
            )
            sha = None
    if not sha and baseline.pre_existing_changed:
        _copy_unchanged(wt_top, top, baseline, list(baseline.pre_existing_changed), notes, _("no stash commit"))
    src_root = tdir / str(state.get("untrackedDir") or UNTRACKED_DIR)
    for rel in state.get("untrackedFiles") or []:
        if not _safe_rel(rel):
            continue
        try:
            _copy_entry(src_root / rel, wt_top / rel)
        except OSError as exc:
            notes.append(_("pre-existing untracked file {file} could not be restored: {error}").format(file=rel, error=exc))
    for n in state.get("notes") or []:
        notes.append(str(n))


def _copy_unchanged(wt_top: Path, top: Path, baseline: Baseline, paths: Sequence[str], notes: list[str], why: str) -> None:
    """Fallback: copy the pre-work dirty files that are still byte-identical to their baseline hash
    (and re-delete pre-work deletions); note the ones that cannot be reproduced."""
    lost: list[str] = []
    for rel in paths:
        if not _safe_rel(rel) or CACHE_PATH_RE.search(rel):
            continue
        want = baseline.pre_dirty_hashes.get(rel) or baseline.pre_untracked_hashes.get(rel)
        src, dst = top / rel, wt_top / rel
        try:
            if want == DELETED_HASH and not os.path.lexists(src):
                if dst.is_file() or dst.is_symlink():
                    dst.unlink()
            elif want is not None and (not src.is_symlink() and file_sha1(src) == want):
                _copy_entry(src, dst)
            else:
                lost.append(rel)
        except OSError:
            lost.append(rel)
    notes.append(_("{why}: the pre-work dirty files were rebuilt from the project where they are still "
                   "byte-identical to the baseline").format(why=why))
    if lost:
        shown = ", ".join(lost[:10]) + (_(" (+{n} more)").format(n=len(lost) - 10) if len(lost) > 10 else "")
        notes.append(_("{n} pre-work dirty file(s) changed since the baseline and could not be reproduced (the "
                       "baseline run used their committed version): {files}").format(n=len(lost), files=shown))


def worktree_argv(check: CheckDef, wt_project: Path, project: Path) -> CheckDef:
    """The command as run in a worktree (baseline, pristine): a relative executable path missing
    from the worktree (e.g. ``.venv/bin/pytest``, ignored by git) points to the project's, and the
    toolchain's id-listing flags are added (:func:`.integrity.infra.id_argv`: pytest ``-rA``, go and
    unittest ``-v``) so every test's id is listed (reporting only)."""
    argv = list(check.cmd)
    if argv and ("/" in argv[0] or os.sep in argv[0]) and not os.path.isabs(argv[0]):
        if not (wt_project / argv[0]).exists() and (project / argv[0]).exists():
            argv[0] = str(project / argv[0])
    if "-rA" not in argv:
        argv = id_argv(argv)
    return CheckDef(check.name, tuple(argv), check.display_cmd, check.timeout_ms, check.optional, check.junit_xml)



def check_key(check: CheckDef) -> str:
    """The baseline cache's key of a check: JSON ``[name, argv]``."""
    return json.dumps([check.name, list(check.cmd)], ensure_ascii=False)


def check_status(result: Mapping[str, Any]) -> str:
    """``passed|failed|timeout|error|no-tests|skipped`` of a CheckResult."""
    if result.get("skipped"):
        return "skipped"
    if result.get("timeout"):
        return "timeout"
    reason = str(result.get("reason") or "")
    if result.get("aborted") or reason.startswith(SPAWN_REASON_PREFIX) or reason.startswith("internal runner error"):
        return "error"
    if reason in _NO_TEST_REASONS:
        return "no-tests"
    return "passed" if result.get("passed") else "failed"


def run_baseline_checks(
    project: str | os.PathLike[str],
    task_dir: str | os.PathLike[str],
    baseline: Baseline,
    checks: Sequence[CheckDef],
    default_timeout_ms: int = 300_000,
    concurrency: int = 1,
    should_stop: Callable[[], bool] | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The baseline results of ``checks``, running only those not cached yet.

    Cached in ``<task_dir>/baseline-checks.json`` (keyed by name + argv, tied to the baseline
    head); the missing ones run in a temporary worktree of the baseline head with the pre-work
    dirty state reproduced, output to ``<task_dir>/baseline-checks.log``. The worktree is removed
    in every case (timeout, cancellation, exception). Cancelled runs are not cached. One run per
    task directory at a time (a file lock): a second caller waits for the first, then reads the
    cache; a cancel (``should_stop``) ends the wait. ``extra_env`` is added to every check's
    environment; default: verification's bytecode cache (:func:`..integrity.pycache.bytecode_env`),
    as for a round's own runs.

    Returns:
        ``({key: {name, cmd, status, passed, exitCode, timeout, reason, durationMs, tests}}, notes)``
        where ``key`` = JSON ``[name, argv]``. Never raises.
    """
    tdir = Path(task_dir)
    # one run per task at a time: the run started with the task (:func:`.baseline_warm
    # .warm_baseline_run`) and a round's own are the same run; the second waits and reads the cache
    lock = FileLock(str(tdir / LOCK_FILE), thread_local=False, is_singleton=False)
    locked = False
    while True:
        try:
            lock.acquire(timeout=0.5)
            locked = True
            break
        except Timeout:
            if stop_requested(should_stop):
                return {}, [_("the baseline run was stopped by a cancel")]
        except OSError as exc:  # a task directory that cannot hold the lock: run unserialised
            log.warning("baseline run lock %s: %s", lock.lock_file, exc)
            break
    try:
        return _run_baseline_locked(project, tdir, baseline, checks, default_timeout_ms, concurrency, should_stop,
                                    extra_env)
    finally:
        if locked:
            lock.release()


def _run_baseline_locked(project: str | os.PathLike[str], tdir: Path, baseline: Baseline, checks: Sequence[CheckDef],
                         default_timeout_ms: int, concurrency: int, should_stop: Callable[[], bool] | None,
                         extra_env: Mapping[str, str] | None = None) -> tuple[dict[str, dict[str, Any]], list[str]]:
    notes: list[str] = []
    cache_path = tdir / CACHE_FILE
    cache = read_json_safe(cache_path)
    if not isinstance(cache, dict) or cache.get("head") != baseline.head or not isinstance(cache.get("checks"), dict):
        cache = {"version": _STATE_VERSION, "head": baseline.head, "createdAt": _now_iso(), "checks": {}, "notes": []}
    entries: dict[str, dict[str, Any]] = cache["checks"]
    missing = [c for c in checks if check_key(c) not in entries]
    if missing:
        if stop_requested(should_stop):
            return entries, notes
        try:
            ran, run_notes = _run_in_worktree(Path(project), tdir, baseline, missing, default_timeout_ms, concurrency,
                                              should_stop, extra_env=extra_env)
        except Exception as exc:  # noqa: BLE001 - the caller falls back to counting every failure
            log.exception("baseline checks failed")
            ran, run_notes = {}, [_("the baseline checks could not run: {error}").format(error=exc)]
        stopped = stop_requested(should_stop)
        keep = {
            k: v for k, v in ran.items()
            if not stopped and not v.get("aborted") and v.get("reason") != SKIP_CANCELLED
        }
        entries.update(keep)
        cache["notes"] = list(dict.fromkeys([*cache.get("notes", []), *run_notes]))
        cache["updatedAt"] = _now_iso()
        if keep:
            try:
                atomic_write_json(cache_path, cache)
            except OSError as exc:
                log.warning("could not write %s: %s", cache_path, exc)
        for k, v in ran.items():
            if k not in keep:
                entries[k] = v  # this round only
    notes.extend(cache.get("notes", []))
    return entries, notes


@dataclass
class Worktree:
    """A temporary worktree of the pre-work tree (see :func:`baseline_worktree`).

    Attributes:
        top: the worktree's top level; ``project``: the project's directory inside it.
        rel: the project's path relative to the repository's top level.
        source_top: the project's repository top level.
    """

    top: Path
    project: Path
    rel: Path
    source_top: Path


@contextmanager
def baseline_worktree(project: Path, tdir: Path, baseline: Baseline, notes: list[str],
                      link_deps: bool = True) -> Iterator[Worktree | None]:
    """A temporary ``git worktree add --detach`` of the baseline head with the pre-work dirty state
    reproduced (the stored state of :mod:`.state`, else the hash fallback) and the
    project's dependency directories (:data:`LINKED_DEP_DIRS`) linked in; removed on exit in every
    case. Yields None (and appends a note) when it cannot be made. Never writes the project."""
    top = _toplevel(project)
    if top is None or baseline.head is None:
        notes.append(_("the baseline worktree could not be created (no repository top level or HEAD)"))
        yield None
        return
    state = load_baseline_state(tdir)
    if state is not None and state.get("head") != baseline.head:
        notes.append(_("baseline-state.json belongs to another baseline head; ignored"))
        state = None
    try:
        rel = Path(os.path.realpath(project)).relative_to(os.path.realpath(top))
    except ValueError:
        rel = Path()
    _sweep_stale(top)
    tmp = Path(tempfile.mkdtemp(prefix=WORKTREE_PREFIX))
    wt = tmp / "wt"
    added = False
    try:
        atomic_write_json(tmp / "owner.json", {"pid": os.getpid(), "project": str(project), "createdAt": _now_iso()})
        for attempt in range(3):  # git locks its worktree admin files: another add may hold them
            with _repo_lock(top):
                r = run_git([*_NO_HOOKS, "worktree", "add", "--detach", "--quiet", str(wt), baseline.head], top,
                            timeout_ms=_WORKTREE_TIMEOUT_MS)
            added = os.path.realpath(wt) in _worktree_paths(top)
            if added or r.timed_out:
                break
            with _repo_lock(top):
                forget_worktree(str(top), wt)
            time.sleep(0.2 * (attempt + 1))
        if not r.ok or not added:
            notes.append(_("git worktree add failed: {said}").format(said=(r.stderr or r.stdout).strip()[:300]))
            yield None
            return
        _reproduce_dirty(wt, top, state, baseline, tdir, notes)
        wt_project = wt / rel
        if link_deps:
            link_dependency_dirs(project, wt_project)
        if (top / ".gitmodules").is_file():
            notes.append(_("submodules are not checked out in the baseline worktree"))
        yield Worktree(top=wt, project=wt_project, rel=rel, source_top=top)
    finally:
        if (added or wt.exists()) and not _remove_worktree(top, wt):
            log.warning("the baseline worktree %s could not be removed", wt)
        shutil.rmtree(tmp, ignore_errors=True)


def link_dependency_dirs(project: Path, wt_project: Path) -> None:
    """Symlink the project's :data:`LINKED_DEP_DIRS` into a worktree's project directory."""
    for name in LINKED_DEP_DIRS:
        src, dst = project / name, wt_project / name
        if src.is_dir() and not os.path.lexists(dst):
            try:
                os.symlink(src, dst, target_is_directory=True)
            except OSError:
                pass


def _run_in_worktree(
    project: Path,
    tdir: Path,
    baseline: Baseline,
    checks: Sequence[CheckDef],
    default_timeout_ms: int,
    concurrency: int,
    should_stop: Callable[[], bool] | None,
    reruns: int = 0,
    extra_env: Mapping[str, str] | None = None,
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    notes: list[str] = []
    env = dict(extra_env) if extra_env is not None else bytecode_env()
    with baseline_worktree(project, tdir, baseline, notes) as wt:
        if wt is None:
            return {}, notes
        defs = [worktree_argv(c, wt.project, project) for c in checks]
        log_path = tdir / LOG_FILE
        results = run_checks(defs, wt.project, log_path, default_timeout_ms, concurrency=concurrency, should_stop=should_stop,
                             extra_env=env)
        outputs = outputs_from_log(log_path, defs, results, wt=str(wt.project), project=str(project))
        out: dict[str, dict[str, Any]] = {}
        for c, d, res, text in zip(checks, defs, results, outputs):
            st = check_status(res)
            ids = parse_test_ids(text, list(d.cmd)) if st in ("passed", "failed") else None
            entry: dict[str, Any] = {
                "name": c.name,
                "cmd": list(d.cmd),
                "status": st,
                "passed": bool(res.get("passed")),
                "exitCode": res.get("exitCode"),
                "timeout": bool(res.get("timeout")),
                "aborted": bool(res.get("aborted")),
                "reason": res.get("reason"),
                "durationMs": res.get("durationMs", 0),
                "ranAt": _now_iso(),
                "tests": ids.to_json() if ids is not None else None,
                "counts": res.get("tests"),
            }
            if reruns > 0 and st == "failed" and not stop_requested(should_stop):
                entry["reruns"] = _rerun(d, wt.project, log_path, default_timeout_ms, should_stop, reruns,
                                         str(wt.project), str(project), env)
            out[check_key(c)] = entry
            if st == "timeout":
                notes.append(_("baseline run of {check} timed out: not comparable, its failures count").format(
                    check=c.name))
        return out, notes


def rerun_on_baseline(project: Path, tdir: Path, baseline: Baseline, check: CheckDef, times: int,
                      default_timeout_ms: int, should_stop: Callable[[], bool] | None) -> dict[str, Any] | None:
    """Run ``check`` on a fresh baseline worktree once and, when it fails, ``times`` more times
    (flake detection, docs/integrity.md §6; not cached). Returns its entry (``reruns``: ``[{status,
    tests}]``) or None when no worktree could be made."""
    ran, _notes = _run_in_worktree(project, tdir, baseline, [check], default_timeout_ms, 1, should_stop, times)
    return ran.get(check_key(check))


def _rerun(d: CheckDef, cwd: Path, log_path: Path, default_timeout_ms: int, should_stop: Callable[[], bool] | None,
           times: int, wt: str, project: str, env: Mapping[str, str]) -> list[dict[str, Any]]:
    """Run a failed baseline check ``times`` more times (flake detection): ``[{status, tests}]``."""
    out: list[dict[str, Any]] = []
    for _k in range(times):
        if stop_requested(should_stop):
            break
        res = run_checks([d], cwd, log_path, default_timeout_ms, should_stop=should_stop, extra_env=env)[0]
        text = outputs_from_log(log_path, [d], [res], wt=wt, project=project)[0]
        st = check_status(res)
        ids = parse_test_ids(text, list(d.cmd)) if st in ("passed", "failed") else None
        out.append({"status": st, "tests": ids.to_json() if ids is not None else None})
    return out


# --------------------------------------------------------------------------------------------
# Outputs of a verify log
# --------------------------------------------------------------------------------------------

_HEADER_RE = re.compile(r"^=== check: (.*) — (.*) @ (\S+) ===$", re.M)
_TRAILER_RE = re.compile(r"\n\[exit\] code=[^\n]*\n?$")


def log_sections(text: str) -> list[tuple[str, str]]:
    """``[(header line, body)]`` of a ``verify-<round>.log``-style log, in order (bodies without
    the ``[exit] code=…`` trailer)."""
    heads = list(_HEADER_RE.finditer(text))
    out: list[tuple[str, str]] = []
    for i, m in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        body = text[m.end() + 1 : end]
        out.append((m.group(0), _TRAILER_RE.sub("", body.rstrip("\n") + "\n")))
    return out


def outputs_from_log(
    log_path: Path,
    defs: Sequence[CheckDef],
    results: Sequence[Mapping[str, Any]],
    wt: str | None = None,
    project: str | None = None,
) -> list[str]:
    """Full output of each check (matched to the log sections in order, by header), falling back
    to ``outputTail``; worktree paths are rewritten to the project's."""
    outs = [str(r.get("outputTail") or "") for r in results]
    try:
        size = log_path.stat().st_size
        if size <= MAX_LOG_READ:
            text = log_path.read_bytes().decode("utf-8", "replace")
            sections = log_sections(text)
            # the baseline log accumulates across rounds: take the last section per header prefix
            for i, (d, r) in enumerate(zip(defs, results)):
                if r.get("skipped"):
                    continue
                prefix = f"=== check: {d.name} — {' '.join(d.cmd)} @ "
                match = [body for head, body in sections if head.startswith(prefix)]
                if match:
                    outs[i] = match[-1]
    except OSError:
        pass
    if wt and project:
        outs = [o.replace(wt, project) for o in outs]
    return outs
