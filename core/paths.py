"""projectPath normalisation and the safety gate (10-tools §3.1, 40-agents-tasks §2.5)."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from .errors import ErrorCode, TianshuError

# 10-tools §3.1 rule 5: exact-match system/root directories (POSIX comparison is case-sensitive).
SYSTEM_DIRS = frozenset(
    {
        "/", "/etc", "/usr", "/bin", "/sbin", "/var", "/opt", "/system", "/library", "/private",
        "/users", "/home", "/root", "/tmp", "/applications", "/private/tmp", "/private/etc",
        "/private/var", "c:/", "c:/windows", "c:/users", "c:/program files",
        "c:/program files (x86)", "d:/",
    }
)


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


@dataclass(frozen=True)
class SafeProject:
    """A projectPath that passed the gate: ``norm`` (realpath, normalised), ``raw`` as given,
    ``via_symlink`` when they differ, ``key`` = :func:`project_key` of ``norm``."""

    norm: str
    raw: str
    via_symlink: bool
    key: str


def check_project_path(raw: str) -> SafeProject:
    """Apply the projectPath safety gate of 10-tools §3.1 (rules 1–5).

    Raises:
        TianshuError: ``PATH_NOT_ABSOLUTE`` (relative path), ``PATH_NOT_FOUND`` (missing, not a
            directory, unreadable), ``PATH_IS_HOME`` (the user's home itself), ``PATH_IS_SYSTEM``
            (a root or system directory; subdirectories pass).
    """
    if not raw or not os.path.isabs(raw):
        raise TianshuError(ErrorCode.PATH_NOT_ABSOLUTE, f"projectPath must be an absolute path, got: {raw}")
    if not os.path.isdir(raw):
        raise TianshuError(ErrorCode.PATH_NOT_FOUND, f"directory does not exist or is not accessible: {raw}")
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
            f"projectPath cannot be the user's home directory itself (the agent could write all of it): {norm}",
        )
    is_drive_root = len(norm) == 2 and norm[1] == ":"
    if norm in SYSTEM_DIRS or is_drive_root:
        raise TianshuError(
            ErrorCode.PATH_IS_SYSTEM,
            f"projectPath is a system or root-level directory (the agent could write the whole subtree); refused: {norm}",
        )
    return SafeProject(norm=norm, raw=raw, via_symlink=via_symlink, key=project_key(norm))
