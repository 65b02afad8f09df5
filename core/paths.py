"""projectPath normalisation and the safety gate (docs/tools.md §3.1, docs/agents-tasks.md §2.5)."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from .errors import ErrorCode, TianshuError
from .i18n import _

# docs/tools.md §3.1 rule 5: exact-match system/root directories (POSIX comparison is case-sensitive).
SYSTEM_DIRS = frozenset(
    {
        "/", "/etc", "/usr", "/bin", "/sbin", "/var", "/opt", "/system", "/library", "/private",
        "/users", "/home", "/root", "/tmp", "/applications", "/private/tmp", "/private/etc",
        "/private/var", "c:/", "c:/windows", "c:/users", "c:/program files",
        "c:/program files (x86)", "d:/",
        # port (docs/robustness.md §7): mount points and site data roots; a project may live inside them
        "/srv", "/mnt", "/media", "/snap", "/lost+found",
    }
)


# Whole trees no project can live in (docs/hosting.md, docs/robustness.md §7): kernel and device views, boot
# files, runtime state, system programs and libraries, configuration. Checked on the resolved path, so a
# symlink or ``..`` into them is refused too. ``/private/...`` is where macOS keeps /etc and /var.
SYSTEM_TREES = ("/proc", "/sys", "/dev", "/boot", "/run", "/lib", "/lib32", "/lib64", "/libx32", "/bin",
                "/sbin", "/usr", "/etc", "/private/etc", "/System")
# /var holds system state (/var/lib, /var/log, /var/cache, ...): refused, except these per-user
# work areas, and except a directory the (non-root) caller owns, e.g. /var/www/site.
VAR_TREES = ("/var", "/private/var")
VAR_WORK_TREES = ("/var/tmp", "/var/folders", "/private/var/tmp", "/private/var/folders")


def _within(path: str, tree: str) -> bool:
    return path == tree or path.startswith(tree.rstrip("/") + "/")


def program_tree(norm: str) -> str | None:
    """The tree of :data:`SYSTEM_TREES` (programs, libraries, configuration, kernel views) that
    ``norm`` lies in, or None; :data:`VAR_TREES` are not looked at."""
    return next((tree for tree in SYSTEM_TREES if _within(norm, tree)), None)


def system_tree(norm: str) -> str | None:
    """The system tree ``norm`` lies in (see :data:`SYSTEM_TREES`, :data:`VAR_TREES`), or None."""
    tree = program_tree(norm)
    if tree is not None:
        return tree
    for tree in VAR_TREES:
        if _within(norm, tree):
            if any(_within(norm, work) and norm != work for work in VAR_WORK_TREES):
                return None
            try:
                owned = os.geteuid() != 0 and os.stat(norm).st_uid == os.geteuid() and norm != tree
            except (OSError, AttributeError):
                owned = False
            return None if owned else tree
    return None


def norm_path(path: str) -> str:
    """Normalise an absolute path: forward slashes, lower-case drive letter, no trailing slash.

    ``"/"`` stays ``"/"``. Example: ``norm_path("/a/b/")`` → ``"/a/b"``.
    """
    p = os.path.normpath(path).replace("\\", "/")
    if len(p) >= 2 and p[1] == ":":
        p = p[0].lower() + p[1:]
    if len(p) > 1 and p.endswith("/") and not (len(p) == 3 and p[1] == ":"):
        p = p.rstrip("/") or "/"
    return p


def project_key(norm: str) -> str:
    """Stable 16-hex key of a normalised project path: ``sha256(norm)[:16]`` (projects.json key,
    Prefect work queue ``project-<key>``)."""
    return hashlib.sha256(norm.encode("utf-8")).hexdigest()[:16]


def repo_root(norm: str) -> str | None:
    """The normalised top level of the git work tree containing ``norm``, or None (not in a
    repository, or git cannot tell). ≈5 ms; git runs with a scrubbed environment."""
    from .git import run_git

    if not os.path.isdir(norm):
        return None
    out = run_git(["rev-parse", "--show-toplevel"], norm, timeout_ms=30_000)
    top = out.stdout.strip()
    return norm_path(os.path.realpath(top)) if out.ok and top else None


def serial_key(norm: str) -> str:
    """The key that serialises work on ``norm`` (work queue ``project-<key>``, project gate): the
    :func:`project_key` of its git work tree's top level, so packages of one monorepo never run
    at once (their tasks would see each other's edits); of ``norm`` itself outside git."""
    return project_key(repo_root(norm) or norm)


@dataclass(frozen=True)
class SafeProject:
    """A projectPath that passed the gate: ``norm`` (realpath, normalised), ``raw`` as given,
    ``via_symlink`` when they differ, ``key`` = :func:`project_key` of ``norm``."""

    norm: str
    raw: str
    via_symlink: bool
    key: str


def check_project_path(raw: str, data_home: Path | None = None) -> SafeProject:
    """Apply the projectPath safety gate of docs/tools.md §3.1 (rules 1–5), widened by docs/robustness.md §7.

    Rules on the resolved path (symlinks and ``..`` followed): the root and top-level system
    directories themselves (:data:`SYSTEM_DIRS`), everything inside :data:`SYSTEM_TREES` and /var
    (except :data:`VAR_WORK_TREES` and directories a non-root caller owns), the data home,
    anything inside it and any directory that contains it.

    Raises:
        TianshuError: ``PATH_NOT_ABSOLUTE`` (relative path), ``PATH_NOT_FOUND`` (missing, not a
            directory, unreadable), ``PATH_IS_HOME`` (the user's home itself), ``PATH_IS_SYSTEM``
            (a root or system directory, or inside a system tree), ``PATH_IS_DATA_HOME`` (the
            data home, inside it, or a directory that contains it).
    """
    if not raw or not os.path.isabs(raw):
        raise TianshuError(ErrorCode.PATH_NOT_ABSOLUTE, _("projectPath must be an absolute path, got: {path}").format(path=raw))
    if not os.path.isdir(raw):
        if os.path.exists(raw):
            raise TianshuError(ErrorCode.PATH_NOT_FOUND, _("projectPath is not a directory: {path}").format(path=raw))
        raise TianshuError(ErrorCode.PATH_NOT_FOUND, _("directory does not exist or is not accessible: {path}").format(path=raw))
    try:
        real = os.path.realpath(raw)
    except OSError:
        real = raw
    norm = norm_path(real)
    via_symlink = norm != norm_path(raw)
    home = norm_path(os.path.realpath(str(Path.home())))
    if norm == home:
        raise TianshuError(
            ErrorCode.PATH_IS_HOME,
            _("projectPath cannot be the user's home directory itself (the agent could write all of it): {path}").format(
                path=norm),
        )
    is_drive_root = len(norm) == 2 and norm[1] == ":"
    if norm in SYSTEM_DIRS or is_drive_root:
        raise TianshuError(
            ErrorCode.PATH_IS_SYSTEM,
            _("projectPath is a system or root-level directory (the agent could write the whole subtree); refused: {path}").format(
                path=norm),
        )
    tree = system_tree(norm)
    if tree is not None:
        raise TianshuError(ErrorCode.PATH_IS_SYSTEM,
                           _("projectPath is inside the system tree {tree} (no project lives there); refused: {path}").format(
                               tree=tree, path=norm))
    if data_home is not None:
        dh = norm_path(os.path.realpath(str(data_home)))
        if _within(norm, dh):
            raise TianshuError(ErrorCode.PATH_IS_DATA_HOME,
                               _("projectPath is tianshu-mcp's data home {home} or inside it (tasks, reports and "
                                 "Prefect's database live there); refused: {path}").format(home=dh, path=norm))
        if _within(dh, norm):  # an agent working there could rewrite the verdict's inputs
            raise TianshuError(ErrorCode.PATH_IS_DATA_HOME,
                               _("projectPath contains tianshu-mcp's data home {home} (an agent working there could "
                                 "read the hidden holdout checks and rewrite agent profiles, reports and Prefect's "
                                 "database); refused: {path}").format(home=dh, path=norm))
    return SafeProject(norm=norm, raw=raw, via_symlink=via_symlink, key=project_key(norm))
