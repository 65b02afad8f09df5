"""Baseline-aware grading (SWE-bench's FAIL_TO_PASS / PASS_TO_PASS idea), opt-in.

When an acceptance layer sets ``baselineChecks: true``, the same command checks also run once per
task on the **pre-work baseline**, in a temporary git worktree, and every check (and every test id
a runner reports) is classified after the agent's work:

============== ===========================================================================
``passing``    passes now (and did not fail at baseline)
``fixed``      failed at baseline, passes now
``regression`` passed at baseline, fails now
``still_failing`` failed at baseline, fails now
``new_failure`` fails now and did not exist at baseline (new check, new test id), or the baseline
               could not say (its run timed out, could not start, ran no test)
============== ===========================================================================

``baselinePolicy`` (see :data:`~tianshu_mcp.acceptance.config.BASELINE_POLICIES`) decides which
failing mandatory checks still fail the round; the others are reported as *not counted*.

Baseline reproduction: :func:`capture_baseline_state` (called before the agent starts) records
``git stash create`` of the tracked dirty state (run on a *copy* of the index, so the user's index,
worktree and stash list are untouched; only unreferenced objects are written) and copies the
pre-existing untracked files into ``<taskDir>/baseline-untracked/`` (≤ 50 MiB). At grading time
``git worktree add --detach <tmp> <head>`` + ``git read-tree --reset -u <stash>`` + the copies
rebuild the pre-work tree; the worktree is always removed afterwards. Without a stored state
the dirty files that are still byte-identical to their baseline hash are copied from the project
(the others cannot be reproduced, and a note says so).

Files in the task dir: ``baseline-state.json``, ``baseline-untracked/``, ``baseline-checks.json``
(the cached baseline results, reused by later rounds: a check runs at most once per task on the
baseline), ``baseline-checks.log``.

Plain Python: no Prefect, no adapters. Never modifies the project's sources, index, refs or stash.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..core.childenv import scrub
from ..core.files import atomic_write_json, read_json_safe
from ..core.i18n import _
from .config import BASELINE_POLICIES, DEFAULT_BASELINE_POLICY, CheckDef, resolve_layers
from ..core.procs import stop_requested
from .git import CACHE_PATH_RE, DELETED_HASH, Baseline, file_sha1, is_git_repo, run_git
from . import runner as _runner
from .runner import SKIP_CANCELLED, SPAWN_REASON_PREFIX, ZERO_TEST_REASON, run_checks

_NO_TEST_REASONS = {ZERO_TEST_REASON, getattr(_runner, "ALL_SKIPPED_REASON", ZERO_TEST_REASON)}
"""Fail-closed reasons meaning "no test really ran" (the check is not comparable)."""

__all__ = [
    "TestIds",
    "Grading",
    "parse_test_ids",
    "capture_baseline_state",
    "maybe_capture_baseline_state",
    "load_baseline_state",
    "run_baseline_checks",
    "grade_round",
    "classify",
    "is_targeted",
    "log_sections",
    "STATE_FILE",
    "CACHE_FILE",
    "LOG_FILE",
    "UNTRACKED_DIR",
    "UNTRACKED_CAP_BYTES",
    "WORKTREE_PREFIX",
]

log = logging.getLogger("tianshu_mcp")

STATE_FILE = "baseline-state.json"
CACHE_FILE = "baseline-checks.json"
LOG_FILE = "baseline-checks.log"
UNTRACKED_DIR = "baseline-untracked"
UNTRACKED_CAP_BYTES = 50 * 1024 * 1024
"""Pre-existing untracked files copied into the task dir, in total at most this many bytes."""
WORKTREE_PREFIX = "tianshu-baseline-"
MAX_TEST_ENTRIES = 200
"""``baselineGrading.tests`` lists at most this many entries (a note gives the rest's count)."""
MAX_LOG_READ = 64 * 1024 * 1024
"""A verify log larger than this is not parsed for test ids (``outputTail`` is used instead)."""
LINKED_DEP_DIRS = ("node_modules", ".venv", "venv")
"""Ignored dependency directories of the project symlinked into the baseline worktree, so the
baseline run resolves the same tools (the runner puts ``.venv/bin`` and ``node_modules/.bin`` first
on ``PATH``) instead of failing for want of them."""

_STATE_VERSION = 1
_GIT_BASE = ("git", "-c", "core.quotepath=off", "-c", "color.ui=never", "-c", "core.fsmonitor=false")
_NO_HOOKS = ("-c", "core.hooksPath=/dev/null")
_WORKTREE_TIMEOUT_MS = 300_000


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# --------------------------------------------------------------------------------------------
# Test ids
# --------------------------------------------------------------------------------------------


@dataclass
class TestIds:
    """Test ids one run reported.

    Attributes:
        runner: ``pytest``, ``jest``, ``go``, ….
        passed_ids / failed_ids: ids as the runner prints them (failed includes errors).
        failed_count: failures + errors the runner's summary counted (None: unknown); when it is
            larger than ``len(failed_ids)`` the id list is incomplete.
    """

    __test__ = False  # not a pytest class

    runner: str
    passed_ids: list[str] = field(default_factory=list)
    failed_ids: list[str] = field(default_factory=list)
    failed_count: int | None = None

    @property
    def complete(self) -> bool:
        """True when every failure the summary counted has an id."""
        return self.failed_count is None or self.failed_count <= len(set(self.failed_ids))

    def to_json(self) -> dict[str, Any]:
        """``{runner, passedIds, failedIds, failedCount}``."""
        return {
            "runner": self.runner,
            "passedIds": list(self.passed_ids),
            "failedIds": list(self.failed_ids),
            "failedCount": self.failed_count,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> "TestIds | None":
        """Inverse of :meth:`to_json` (None for None/invalid)."""
        if not isinstance(data, Mapping):
            return None
        fc = data.get("failedCount")
        return cls(
            runner=str(data.get("runner") or ""),
            passed_ids=[str(x) for x in data.get("passedIds") or []],
            failed_ids=[str(x) for x in data.get("failedIds") or []],
            failed_count=int(fc) if isinstance(fc, int) else None,
        )


_PYTEST_SHORT = re.compile(r"^(PASSED|FAILED|ERROR|XPASS|XFAIL)\s+(\S+)(?:\s+-\s.*)?$", re.M)
_PYTEST_VERBOSE = re.compile(r"^(\S+::\S+(?:\[[^\]]*\])?)\s+(PASSED|FAILED|ERROR|XPASS|XFAIL)\b", re.M)
_PYTEST_SUMMARY = re.compile(r"^=*\s*((?:\d+ \w+(?:, )?)+) in [\d.]+s\b", re.M)


def _parse_pytest_ids(output: str) -> TestIds | None:
    """Minimal pytest parser: ``-rA``/``-rfE`` short-summary lines (``PASSED id``, ``FAILED id -
    msg``, ``ERROR id``) and ``-v`` lines (``id PASSED``); counts from the final summary line."""
    passed: dict[str, None] = {}
    failed: dict[str, None] = {}
    for m in _PYTEST_SHORT.finditer(output):
        (failed if m.group(1) in ("FAILED", "ERROR") else passed)[m.group(2)] = None
    for m in _PYTEST_VERBOSE.finditer(output):
        (failed if m.group(2) in ("FAILED", "ERROR") else passed)[m.group(1)] = None
    summaries = _PYTEST_SUMMARY.findall(output)
    count: int | None = None
    if summaries:
        c = {k.lower(): int(v) for v, k in re.findall(r"(\d+) (\w+)", summaries[-1])}
        count = c.get("failed", 0) + c.get("error", 0) + c.get("errors", 0)
    if not passed and not failed and count is None:
        return None
    for k in failed:
        passed.pop(k, None)
    return TestIds("pytest", list(passed), list(failed), count)


def parse_test_ids(output: str, argv: Sequence[str]) -> TestIds | None:
    """Test ids of one run: ``testcount.parse_tests(output, argv)`` when available (pytest, jest,
    vitest, go, cargo…), else (or when it finds no id) the minimal pytest parser here.

    Returns:
        :class:`TestIds`, or None when the output shows no recognisable test result.
    """
    if not output:
        return None
    found: TestIds | None = None
    try:
        from . import testcount

        parse_tests = getattr(testcount, "parse_tests", None)
        tc = parse_tests(output, list(argv)) if callable(parse_tests) else None
    except Exception:  # noqa: BLE001 - a parser bug must not sink the round
        log.debug("testcount.parse_tests failed", exc_info=True)
        tc = None
    if tc is not None:
        failed_ids = [str(x) for x in getattr(tc, "failed_ids", None) or []]
        passed_ids = [str(x) for x in getattr(tc, "passed_ids", None) or []]
        n_failed = getattr(tc, "failed", None)
        n_errors = getattr(tc, "errors", None)
        count = (int(n_failed or 0) + int(n_errors or 0)) if (n_failed is not None or n_errors is not None) else None
        found = TestIds(str(getattr(tc, "runner", "") or ""), passed_ids, failed_ids, count)
    mini = _parse_pytest_ids(output) if found is None or found.runner in ("", "pytest") else None
    if found is not None and (found.passed_ids or found.failed_ids):
        # testcount keeps a bounded number of ids; the local pytest parser keeps them all
        if mini is not None and len(mini.passed_ids) + len(mini.failed_ids) > len(found.passed_ids) + len(found.failed_ids):
            return mini
        return found
    if mini is not None and (mini.passed_ids or mini.failed_ids):
        return mini
    return found or mini


def _is_pytest_argv(argv: Sequence[str]) -> int | None:
    """Index of the ``pytest`` token (``pytest``, ``py.test``, ``…/pytest``, ``-m pytest``), or None."""
    for i, a in enumerate(argv):
        base = os.path.basename(a)
        if base in ("pytest", "py.test", "pytest.exe") or (a == "pytest" and i > 0 and argv[i - 1] == "-m"):
            return i
    return None


# --------------------------------------------------------------------------------------------
# git helpers (never write the user's index, refs, stash or worktree)
# --------------------------------------------------------------------------------------------


def _git_env_run(args: Sequence[str], cwd: str | os.PathLike[str], env_extra: Mapping[str, str], timeout_ms: int = 120_000) -> tuple[int | None, str, str]:
    """Like :func:`git.run_git` but with extra environment (``GIT_INDEX_FILE``). Never raises."""
    env = scrub()
    env["GIT_OPTIONAL_LOCKS"] = "0"
    env["GIT_TERMINAL_PROMPT"] = "0"
    env.update(env_extra)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(  # noqa: S603 - argv, never a shell
                [*_GIT_BASE, *args], cwd=os.fspath(cwd), stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                env=env, start_new_session=True, close_fds=True,
            )
        except OSError as exc:
            return None, "", str(exc)
        try:
            proc.wait(timeout=timeout_ms / 1000)
            status: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait()
            status = None
        out.seek(0)
        err.seek(0)
        return status, out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace")


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
            if index.is_file():
                shutil.copyfile(index, tmp_index)
        except OSError as exc:
            return None, _("the index could not be copied ({error})").format(error=exc)
        env = {
            "GIT_INDEX_FILE": str(tmp_index),
            # stash needs an identity; never depend on the user's config for an unreferenced commit
            "GIT_AUTHOR_NAME": "tianshu-mcp", "GIT_AUTHOR_EMAIL": "tianshu-mcp@localhost",
            "GIT_COMMITTER_NAME": "tianshu-mcp", "GIT_COMMITTER_EMAIL": "tianshu-mcp@localhost",
        }
        status, out, err = _git_env_run(["stash", "create", "tianshu-mcp baseline"], top, env)
    if status != 0:
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
    state.update(untrackedFiles=copied, untrackedBytes=total, untrackedSkipped=skipped, capped=skipped > 0)
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
    ``baselineChecks: true`` (and no state is stored yet); None otherwise. Never raises (a broken
    config layer is reported by the verify round itself)."""
    try:
        merged, _sources = resolve_layers(project, home, override)
    except Exception:  # noqa: BLE001
        return None
    if not merged.baseline_checks:
        return None
    existing = load_baseline_state(task_dir)
    return existing if existing is not None else capture_baseline_state(project, task_dir)


def load_baseline_state(task_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The stored ``baseline-state.json``, or None."""
    data = read_json_safe(Path(task_dir) / STATE_FILE)
    return data if isinstance(data, dict) else None


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


def _remove_worktree(top: Path, wt: Path) -> bool:
    """Remove our worktree: ``worktree remove --force --force``; if its entry survives, delete the
    directory and ``worktree prune``. Returns True when the entry is gone."""
    real = os.path.realpath(wt)
    run_git([*_NO_HOOKS, "worktree", "remove", "--force", "--force", str(wt)], top, timeout_ms=_WORKTREE_TIMEOUT_MS)
    if real in _worktree_paths(top) or wt.exists():
        shutil.rmtree(wt, ignore_errors=True)
        run_git(["worktree", "prune"], top)
    return real not in _worktree_paths(top)


def _sweep_stale(top: Path) -> None:
    """Remove worktrees a dead tianshu process left behind (owner pid recorded next to them)."""
    tmp_root = os.path.realpath(tempfile.gettempdir())
    for path in _worktree_paths(top):
        parent = Path(path).parent
        if not parent.name.startswith(WORKTREE_PREFIX) or os.path.realpath(parent.parent) != tmp_root:
            continue
        owner = read_json_safe(parent / "owner.json")
        pid = owner.get("pid") if isinstance(owner, dict) else None
        if isinstance(pid, int) and _pid_alive(pid):
            continue
        _remove_worktree(top, Path(path))
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


def _baseline_argv(check: CheckDef, wt_project: Path, project: Path) -> CheckDef:
    """The command as run on the baseline: a relative executable path missing from the worktree
    (e.g. ``.venv/bin/pytest``, ignored by git) points to the project's; pytest gets ``-rA`` so
    passing ids are listed too (reporting only)."""
    argv = list(check.cmd)
    if argv and ("/" in argv[0] or os.sep in argv[0]) and not os.path.isabs(argv[0]):
        if not (wt_project / argv[0]).exists() and (project / argv[0]).exists():
            argv[0] = str(project / argv[0])
    i = _is_pytest_argv(argv)
    if i is not None and "-rA" not in argv:
        argv.insert(i + 1, "-rA")
    return CheckDef(check.name, tuple(argv), check.display_cmd, check.timeout_ms, check.optional)


def _check_key(check: CheckDef) -> str:
    return json.dumps([check.name, list(check.cmd)], ensure_ascii=False)


def _status(result: Mapping[str, Any]) -> str:
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
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The baseline results of ``checks``, running only those not cached yet.

    Cached in ``<task_dir>/baseline-checks.json`` (keyed by name + argv, tied to the baseline
    head); the missing ones run in a temporary worktree of the baseline head with the pre-work
    dirty state reproduced, output to ``<task_dir>/baseline-checks.log``. The worktree is removed
    in every case (timeout, cancellation, exception). Cancelled runs are not cached.

    Returns:
        ``({key: {name, cmd, status, passed, exitCode, timeout, reason, durationMs, tests}}, notes)``
        where ``key`` = JSON ``[name, argv]``. Never raises.
    """
    tdir = Path(task_dir)
    notes: list[str] = []
    cache_path = tdir / CACHE_FILE
    cache = read_json_safe(cache_path)
    if not isinstance(cache, dict) or cache.get("head") != baseline.head or not isinstance(cache.get("checks"), dict):
        cache = {"version": _STATE_VERSION, "head": baseline.head, "createdAt": _now_iso(), "checks": {}, "notes": []}
    entries: dict[str, dict[str, Any]] = cache["checks"]
    missing = [c for c in checks if _check_key(c) not in entries]
    if missing:
        if stop_requested(should_stop):
            return entries, notes
        try:
            ran, run_notes = _run_in_worktree(Path(project), tdir, baseline, missing, default_timeout_ms, concurrency, should_stop)
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


def _run_in_worktree(
    project: Path,
    tdir: Path,
    baseline: Baseline,
    checks: Sequence[CheckDef],
    default_timeout_ms: int,
    concurrency: int,
    should_stop: Callable[[], bool] | None,
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    notes: list[str] = []
    top = _toplevel(project)
    if top is None or baseline.head is None:
        return {}, [_("the baseline worktree could not be created (no repository top level or HEAD)")]
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
        r = run_git([*_NO_HOOKS, "worktree", "add", "--detach", "--quiet", str(wt), baseline.head], top,
                    timeout_ms=_WORKTREE_TIMEOUT_MS)
        added = os.path.realpath(wt) in _worktree_paths(top)
        if not r.ok or not added:
            return {}, [_("git worktree add failed: {said}").format(said=(r.stderr or r.stdout).strip()[:300])]
        _reproduce_dirty(wt, top, state, baseline, tdir, notes)
        wt_project = wt / rel
        for name in LINKED_DEP_DIRS:
            src, dst = project / name, wt_project / name
            if src.is_dir() and not os.path.lexists(dst):
                try:
                    os.symlink(src, dst, target_is_directory=True)
                except OSError:
                    pass
        if (top / ".gitmodules").is_file():
            notes.append(_("submodules are not checked out in the baseline worktree"))
        defs = [_baseline_argv(c, wt_project, project) for c in checks]
        log_path = tdir / LOG_FILE
        results = run_checks(defs, wt_project, log_path, default_timeout_ms, concurrency=concurrency, should_stop=should_stop)
        outputs = _outputs_from_log(log_path, defs, results, wt=str(wt_project), project=str(project))
        out: dict[str, dict[str, Any]] = {}
        for c, d, res, text in zip(checks, defs, results, outputs):
            st = _status(res)
            ids = parse_test_ids(text, list(d.cmd)) if st in ("passed", "failed") else None
            out[_check_key(c)] = {
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
            }
            if st == "timeout":
                notes.append(_("baseline run of {check} timed out: not comparable, its failures count").format(
                    check=c.name))
        return out, notes
    finally:
        if (added or wt.exists()) and not _remove_worktree(top, wt):
            log.warning("the baseline worktree %s could not be removed", wt)
        shutil.rmtree(tmp, ignore_errors=True)


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


def _outputs_from_log(
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


# --------------------------------------------------------------------------------------------
# Classification and the verdict policy
# --------------------------------------------------------------------------------------------

_FAILING = ("failed", "timeout", "error", "no-tests")


def classify(before: str | None, after: str) -> str:
    """Classification of a check from its baseline and current status.

    ``before`` in ``passed|failed|timeout|error|no-tests|skipped`` or None (absent at baseline);
    ``after`` likewise (not None). Returns ``passing|fixed|regression|still_failing|new_failure``.
    """
    if after not in _FAILING:
        return "fixed" if before == "failed" else "passing"
    if before == "passed":
        return "regression"
    if before == "failed":
        return "still_failing"
    return "new_failure"


def _targets(test_id: str) -> list[str]:
    """Strings whose presence in the task text targets ``test_id``: the id, its file (path and
    base name) and its test name (last ``::``/``/``/``.`` component, parameters stripped)."""
    out = [test_id]
    file_part = test_id.split("::", 1)[0]
    if file_part != test_id:
        out.append(file_part)
        out.append(os.path.basename(file_part))
    last = re.split(r"::|/| > |\.", test_id)[-1]
    last = re.sub(r"\[.*\]$", "", last).strip()
    if len(last) >= 4:
        out.append(last)
    return [t for t in dict.fromkeys(out) if t]


def is_targeted(test_id: str, task_text: str) -> bool:
    """True when the task text names the test (id, file or test name, on token boundaries)."""
    if not task_text:
        return False
    for t in _targets(test_id):
        if re.search(rf"(?<![\w./-]){re.escape(t)}(?![\w/-])", task_text):
            return True
    return False


def _check_targeted(name: str, task_text: str) -> bool:
    return bool(task_text) and re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", task_text, re.I) is not None


@dataclass
class Grading:
    """Outcome of :func:`grade_round`.

    Attributes:
        report: ``report["baselineGrading"]`` (``{enabled, policy, checks, tests, notes}``).
        not_counted: indices (into the graded results) of failing mandatory checks the policy does
            not count.
        bits: message fragments (regressions, new failures, still failing not counted/counted).
        classes: classification per graded result index.
    """

    report: dict[str, Any]
    not_counted: list[int] = field(default_factory=list)
    bits: list[str] = field(default_factory=list)
    classes: dict[int, str] = field(default_factory=dict)


def _skipped(policy: str, note: str) -> Grading:
    return Grading({"enabled": True, "policy": policy, "checks": [], "tests": [], "notes": [note]})


def grade_round(
    *,
    project: str | os.PathLike[str],
    task_dir: str | os.PathLike[str],
    baseline: Baseline,
    check_defs: Sequence[CheckDef],
    results: Sequence[Mapping[str, Any]],
    log_path: str | os.PathLike[str],
    policy: str = DEFAULT_BASELINE_POLICY,
    task_text: str = "",
    default_timeout_ms: int = 300_000,
    concurrency: int = 1,
    should_stop: Callable[[], bool] | None = None,
) -> Grading:
    """Grade this round's command checks against their baseline runs.

    Args:
        project: project root.
        task_dir: directory of the baseline's files (state, untracked copies, cache, baseline log):
            the task directory, or the directory of the task whose baseline is used.
        baseline: the pre-work baseline.
        check_defs: the command checks of the round; ``results`` their CheckResults, same order.
        log_path: this round's ``verify-<round>.log`` (full outputs, for test ids).
        policy: ``baselinePolicy``.
        task_text: the task brief (targeting).
        default_timeout_ms, concurrency, should_stop: as for the round's own checks.

    Returns:
        :class:`Grading`. Never raises; when grading is impossible (not a repository, unborn
        HEAD) the report says why and nothing is excused.
    """
    policy = policy if policy in BASELINE_POLICIES else DEFAULT_BASELINE_POLICY
    if not baseline.is_repo:
        return _skipped(policy, _("baseline grading skipped: the project is not a git repository"))
    if not baseline.head:
        return _skipped(policy, _("baseline grading skipped: the repository has no commit at baseline (unborn HEAD)"))
    try:
        return _grade(Path(project), Path(task_dir), baseline, check_defs, results, Path(log_path), policy,
                      task_text, default_timeout_ms, concurrency, should_stop)
    except Exception as exc:  # noqa: BLE001 - grading never sinks the round; nothing is excused
        log.exception("baseline grading failed")
        return _skipped(policy, _("baseline grading failed, every failing check counts: {error}").format(error=exc))


def _grade(
    project: Path,
    tdir: Path,
    baseline: Baseline,
    check_defs: Sequence[CheckDef],
    results: Sequence[Mapping[str, Any]],
    log_path: Path,
    policy: str,
    task_text: str,
    default_timeout_ms: int,
    concurrency: int,
    should_stop: Callable[[], bool] | None,
) -> Grading:
    to_run = [d for d, r in zip(check_defs, results) if not r.get("skipped")]
    entries, notes = run_baseline_checks(project, tdir, baseline, to_run, default_timeout_ms, concurrency, should_stop)
    outputs = _outputs_from_log(log_path, check_defs, results)
    g = Grading({"enabled": True, "policy": policy, "checks": [], "tests": [], "notes": list(notes)})
    tests: list[dict[str, Any]] = []
    regress: list[str] = []
    new: list[str] = []
    excused: list[str] = []
    still_counted: list[str] = []
    for i, (d, r) in enumerate(zip(check_defs, results)):
        after = _status(r)
        if after == "skipped":
            continue
        entry = entries.get(_check_key(d))
        before = entry.get("status") if entry else None
        cls = classify(before, after)
        mandatory = not d.optional
        row: dict[str, Any] = {"name": d.name, "before": before or "absent", "after": after, "classification": cls}
        if not mandatory:
            row["optional"] = True
        now_ids = parse_test_ids(outputs[i], list(d.cmd)) if after in ("passed", "failed") else None
        base_ids = TestIds.from_json(entry.get("tests")) if entry else None
        per_test = _classify_tests(d.name, now_ids, base_ids, before, project, task_text)
        tests.extend(per_test)
        if after in _FAILING:
            counted, why = _decide(policy, before, after, r, entry, now_ids, base_ids, per_test, d.name, task_text)
            row["counted"] = counted if mandatory else False
            if why:
                row["note"] = why
            by_cls: dict[str, list[str]] = {"regression": [], "new_failure": [], "still_failing": []}
            for t in per_test:
                by_cls.get(t["classification"], []).append(t["id"])
            if mandatory:
                if cls == "regression" or by_cls["regression"]:
                    regress.append(_label(d.name, by_cls["regression"]))
                if cls == "new_failure" or by_cls["new_failure"]:
                    new.append(_label(d.name, by_cls["new_failure"]))
                if not counted:
                    g.not_counted.append(i)
                    excused.append(_label(d.name, by_cls["still_failing"]))
                elif cls == "still_failing" and not by_cls["regression"] and not by_cls["new_failure"]:
                    still_counted.append(_label(d.name, by_cls["still_failing"]) + (f" ({why})" if why else ""))
        g.report["checks"].append(row)
        g.classes[i] = cls
    if len(tests) > MAX_TEST_ENTRIES:
        g.report["notes"].append(_("{n} more test entries not listed").format(n=len(tests) - MAX_TEST_ENTRIES))
        tests = tests[:MAX_TEST_ENTRIES]
    g.report["tests"] = tests
    sep = _("; ")
    if regress:
        g.bits.append(_("regressions relative to the pre-work baseline: {checks}").format(checks=sep.join(regress)))
    if new:
        g.bits.append(_("new failures (not present at baseline): {checks}").format(checks=sep.join(new)))
    if still_counted:
        g.bits.append(_("still failing before the task, counted: {checks}").format(checks=sep.join(still_counted)))
    if excused:
        g.bits.append(_("still failing before the task (not counted): {checks}").format(checks=sep.join(excused)))
    g.report["notes"] = list(dict.fromkeys(g.report["notes"]))
    return g


def _label(name: str, ids: Sequence[str]) -> str:
    if not ids:
        return name
    shown = ", ".join(ids[:5]) + (_(", +{n} more").format(n=len(ids) - 5) if len(ids) > 5 else "")
    return f"{name} ({shown})"


def _classify_tests(
    check: str, now: TestIds | None, base: TestIds | None, before: str | None, project: Path, task_text: str
) -> list[dict[str, Any]]:
    """Per-test rows: every failing id (``regression``/``still_failing``/``new_failure``) and every
    baseline failure that passes now (``fixed``). Passing tests are not listed."""
    if now is None:
        return []
    rows: list[dict[str, Any]] = []
    base_failed = set(base.failed_ids) if base else set()
    base_passed = set(base.passed_ids) if base else set()
    for tid in dict.fromkeys(now.failed_ids):
        if tid in base_failed:
            cls = "still_failing"
        elif tid in base_passed:
            cls = "regression"
        else:
            cls = "new_failure"
        rows.append({"check": check, "id": tid, "classification": cls, "targeted": is_targeted(tid, task_text)})
    now_failed = set(now.failed_ids)
    now_passed = set(now.passed_ids)
    for tid in dict.fromkeys(base.failed_ids if base else []):
        if tid in now_failed:
            continue
        if tid in now_passed or (not now.passed_ids and (project / tid.split("::", 1)[0]).exists()):
            rows.append({"check": check, "id": tid, "classification": "fixed", "targeted": is_targeted(tid, task_text)})
    return rows


def _decide(
    policy: str,
    before: str | None,
    after: str,
    result: Mapping[str, Any],
    entry: Mapping[str, Any] | None,
    now: TestIds | None,
    base: TestIds | None,
    per_test: Sequence[Mapping[str, Any]],
    name: str,
    task_text: str,
) -> tuple[bool, str]:
    """Whether a failing check counts against the round under ``policy``, and why (or why not)."""
    if policy == "strict":
        return True, ""
    if before != "failed":
        if before in ("timeout", "error", "no-tests"):
            return True, _("the baseline run ended with {status}: not comparable").format(status=before)
        return True, ""
    if after != "failed":
        return True, _("the check ended with {status} now").format(status=after)
    failing = [t for t in per_test if t["classification"] != "fixed"]
    if now is not None and now.failed_ids:
        if base is None or not (base.failed_ids or base.passed_ids):
            return True, _("the baseline run reported no test ids to compare")
        if any(t["classification"] != "still_failing" for t in failing):
            return True, ""
        if not now.complete:
            return True, _("not every failure has a test id")
        if policy != "regressions-only" and any(t["targeted"] for t in failing):
            return True, _("targeted by the task")
        return False, _("every failing test already failed at baseline")
    # no test ids now: compare at check level
    if now is not None and (now.failed_count or 0) > 0:
        return True, _("failures without test ids")
    if base is not None and base.failed_ids:
        return True, _("the baseline run reported failing tests, this run none")
    if policy == "regressions-only":
        return False, _("failed at baseline too (check level)")
    if _check_targeted(name, task_text):
        return True, _("targeted by the task")
    same = entry is not None and entry.get("exitCode") is not None and entry.get("exitCode") == result.get("exitCode")
    if not same:
        return True, _("exit code differs from the baseline run")
    return False, _("failed at baseline too with the same exit code (check level, no test ids)")
