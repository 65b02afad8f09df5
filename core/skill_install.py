"""Skill self-install: copy the package's skill document into the host's skill directory
(docs/agents-tasks.md §2.14). Pure file logic: no server, no threads; the caller (the stdio server)
runs :func:`install_skill` in the background and logs the result's lines.

* **Content hash** (:func:`hash_tree`): sha256 over the sorted relative paths and bytes of the
  regular files of a tree, leaving out the manifest (and a crashed write's temp file of it),
  ``.DS_Store``, ``Thumbs.db``, ``desktop.ini``, ``._*`` and ``.git*`` at any depth. Copies use
  the same predicate, so a fresh install hashes exactly like its source.
* **Manifest** ``<target>/.tianshu-mcp-install.json``: ``schema``, ``name``, ``packageVersion``,
  ``contentHash``, ``installedAt``, ``sourceDir`` and, when a ``prompt`` hold is recorded,
  ``pendingUpdate``.
* **Decision table** (:func:`.skill_decisions.decide`, pure): 5 target states × modes auto / prompt / approve.
* **Install** (:func:`install_skill`): copy into ``<parent>/.<name>.incoming-<pid>-<ms>`` (manifest
  included) → the old tree to ``<parent>/.<name>.bak-<ms>`` → rename into place; on failure the
  copy is removed and the old tree renamed back. After an overwrite the backups are pruned to
  ``backupKeep``; ``.incoming-*`` leftovers older than an hour are removed. The siblings are
  hidden so that a host scanning its skill directory never loads a backup as a second skill.
  A file lock beside the target serialises servers that start at the same time.

Nothing here raises for a file-system problem: the result carries warnings that start with a
stable code (``[SKILL_INSTALL_FAILED] …`` and the OS error for an unwritable target).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import logging
import os
import re
import shutil
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from filelock import FileLock, Timeout
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .files import atomic_write_json, read_json
from .skill_decisions import (  # noqa: F401  (re-exported: the install's public names)
    SKILL_INSTALL_FAILED,
    SKILL_INSTALL_BUSY,
    SKILL_SOURCE_MISSING,
    SKILL_UPDATED,
    SKILL_UPDATE_PENDING,
    SKILL_LOCAL_EDITS,
    SKILL_UNKNOWN_SOURCE,
    SKILL_ROLLBACK_FAILED,
    SKILL_PRUNE_FAILED,
    MODES,
    Action,
    Decision,
    Mode,
    TargetState,
    decide,
)

SKILL_NAME = "tianshu-mcp"
"""The skill's directory name (source ``<package>/skills/tianshu-mcp``)."""
MANIFEST_NAME = ".tianshu-mcp-install.json"
"""The install manifest, kept inside the target tree."""
MANIFEST_SCHEMA = 1
STALE_INCOMING_S = 3600.0
"""``.incoming-*`` trees older than this (mtime, seconds) are crash leftovers and removed."""
DEFAULT_BACKUP_KEEP = 3
NOISE_NAMES = frozenset({".DS_Store", "Thumbs.db", "desktop.ini"})

# --- content hash and manifest -------------------------------------------------------------------
def is_excluded(name: str) -> bool:
    """True for a path component left out of hashing and copying: the manifest (and a crashed
    write's ``<manifest>.<pid>.<hex>.tmp``), ``.DS_Store``, ``Thumbs.db``, ``desktop.ini``,
    ``._*`` and ``.git*``."""
    return (name == MANIFEST_NAME or name in NOISE_NAMES or name.startswith(("._", ".git"))
            or (name.startswith(MANIFEST_NAME + ".") and name.endswith(".tmp")))


def _raise(exc: OSError) -> None:
    raise exc


def _tree_files(root: Path) -> list[tuple[str, Path]]:
    """``(posix relative path, path)`` of the regular files under ``root`` (symlinks and
    excluded names skipped), sorted by relative path.

    Raises:
        OSError: a directory or file cannot be listed.
    """
    found: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(root, onerror=_raise):
        dirnames[:] = [d for d in dirnames if not is_excluded(d)]
        for name in filenames:
            if is_excluded(name):
                continue
            path = Path(dirpath) / name
            if stat.S_ISREG(os.lstat(path).st_mode):
                found.append((path.relative_to(root).as_posix(), path))
    found.sort(key=lambda item: item[0])
    return found


def hash_tree(root: str | os.PathLike[str]) -> str:
    """The content hash of a skill tree: hex sha256 over, per file in sorted relative-path
    order, ``<relative path> NUL <size> NUL <bytes>`` (see :func:`is_excluded`).

    Raises:
        OSError: the tree or one of its files cannot be read.
    """
    digest = hashlib.sha256()
    for rel, path in _tree_files(Path(root)):
        data = path.read_bytes()
        digest.update(rel.encode("utf-8", "surrogateescape") + b"\0" + str(len(data)).encode() + b"\0")
        digest.update(data)
    return digest.hexdigest()


class PendingUpdate(BaseModel):
    """``pendingUpdate`` of the manifest: the package version a ``prompt`` hold declined."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    package_version: str = Field(alias="packageVersion")
    content_hash: str = Field(alias="contentHash")
    detected_at: str = Field(alias="detectedAt")


class Manifest(BaseModel):
    """``<target>/.tianshu-mcp-install.json`` (docs/agents-tasks.md §2.14)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    schema_version: Literal[1] = Field(MANIFEST_SCHEMA, alias="schema")
    name: str
    package_version: str = Field(alias="packageVersion")
    content_hash: str = Field(alias="contentHash", pattern=r"^[0-9a-f]{64}$")
    installed_at: str = Field(alias="installedAt")
    source_dir: str = Field(alias="sourceDir")
    pending_update: PendingUpdate | None = Field(None, alias="pendingUpdate")

    def to_json(self) -> dict[str, Any]:
        """The file's JSON object (``pendingUpdate`` omitted when None)."""
        return self.model_dump(by_alias=True, exclude_none=True)


def read_manifest(target: str | os.PathLike[str], name: str = SKILL_NAME) -> Manifest | None:
    """The target's manifest, or None when absent, unreadable, not JSON, off-schema or naming
    another skill."""
    try:
        manifest = Manifest.model_validate(read_json(Path(target) / MANIFEST_NAME))
    except (OSError, ValueError, ValidationError):
        return None
    return manifest if manifest.name == name else None


def _utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def inspect_target(target: Path, package_hash: str, name: str = SKILL_NAME) -> tuple[TargetState, Manifest | None]:
    """Classify ``target`` against the package's content hash; returns the state and the valid
    manifest (None when there is none).

    Raises:
        OSError: the target exists but cannot be read.
    """
    if not os.path.lexists(target):
        return TargetState.ABSENT, None
    if not target.is_dir():
        return TargetState.UNKNOWN, None
    content = hash_tree(target)
    manifest = read_manifest(target, name)
    if content == package_hash:
        return TargetState.CURRENT, manifest
    if manifest is None:
        return TargetState.UNKNOWN, None
    return (TargetState.STALE if content == manifest.content_hash else TargetState.LOCAL_EDITS), manifest


# --- the install ---------------------------------------------------------------------------------
@dataclass
class InstallResult:
    """What :func:`install_skill` did.

    Attributes:
        source, target, manifest: the paths involved. decision: the table cell (None when the
        run failed before classifying the target). backup: the old tree's new place after an
        overwrite. pruned: backups removed. warnings: ``[CODE] …`` lines to log at WARNING.
        infos: lines to log at INFO. failed: a file-system error stopped the run (the target is
        as it was, or rolled back).
    """

    source: Path
    target: Path
    manifest: Path
    decision: Decision | None = None
    backup: Path | None = None
    pruned: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    infos: list[str] = field(default_factory=list)
    failed: bool = False

    @property
    def changed(self) -> bool:
        """True when a new tree was put in place."""
        return (not self.failed and self.decision is not None
                and self.decision.action in (Action.INSTALL, Action.OVERWRITE))

    def warn(self, code: str, text: str) -> None:
        """Add a ``[code] text`` warning."""
        self.warnings.append(f"[{code}] {text}")


def _hidden(parent: Path, name: str, kind: str, suffix: str) -> Path:
    return parent / f".{name}.{kind}-{suffix}"


def _clean_incoming(parent: Path, name: str, result: InstallResult, now: float) -> None:
    prefix = f".{name}.incoming-"
    for entry in os.scandir(parent):
        if not entry.name.startswith(prefix):
            continue
        try:
            if now - entry.stat(follow_symlinks=False).st_mtime <= STALE_INCOMING_S:
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
            result.infos.append(f"removed a stale install leftover {entry.path}")
        except OSError as exc:
            result.warn(SKILL_PRUNE_FAILED, f"cannot remove the stale install leftover {entry.path}: {exc}")


def prune_backups(parent: Path, name: str, keep: int, result: InstallResult) -> None:
    """Remove all but the newest ``keep`` backup trees ``.<name>.bak-<ms>`` of ``parent``
    (directories only, exact name pattern; ``keep`` 0 = keep all). Removals go to
    ``result.pruned``; a failed removal is a ``SKILL_PRUNE_FAILED`` warning."""
    if keep <= 0:
        return
    pattern = re.compile(rf"^\.{re.escape(name)}\.bak-(\d+)$")
    backups: list[tuple[int, Path]] = []
    for entry in os.scandir(parent):
        m = pattern.match(entry.name)
        if m and entry.is_dir(follow_symlinks=False):
            backups.append((int(m.group(1)), Path(entry.path)))
    backups.sort(reverse=True)
    for _, path in backups[keep:]:
        try:
            shutil.rmtree(path)
            result.pruned.append(path)
            result.infos.append(f"removed the old skill backup {path} (skills.backupKeep={keep})")
        except OSError as exc:
            result.warn(SKILL_PRUNE_FAILED, f"cannot remove the old skill backup {path}: {exc}")


def _copy_ignore(directory: str, names: list[str]) -> set[str]:
    skipped = set()
    for n in names:
        if is_excluded(n):
            skipped.add(n)
            continue
        mode = os.lstat(os.path.join(directory, n)).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            skipped.add(n)
    return skipped


def _swap_in(source: Path, target: Path, manifest: Manifest, package_hash: str,
             result: InstallResult, now: float) -> Path | None:
    """Copy → back up → rename in (rolled back on failure). Returns the backup path.

    Raises:
        OSError: any step failed; the target is as before (or ``SKILL_ROLLBACK_FAILED`` says where
            the old tree is).
    """
    parent, name = target.parent, target.name
    stamp = int(now * 1000)
    incoming = _hidden(parent, name, "incoming", f"{os.getpid()}-{stamp}")
    backup: Path | None = None
    try:
        shutil.copytree(source, incoming, ignore=_copy_ignore, copy_function=shutil.copyfile)
        copied = hash_tree(incoming)
        if copied != package_hash:
            raise OSError(f"the copy's content hash differs from the package's ({copied[:12]} ≠ {package_hash[:12]}): "
                          "the source changed while it was copied")
        atomic_write_json(incoming / MANIFEST_NAME, manifest.to_json())
        if os.path.lexists(target):
            while os.path.lexists(_hidden(parent, name, "bak", str(stamp))):
                stamp += 1
            backup = _hidden(parent, name, "bak", str(stamp))
            os.rename(target, backup)
        try:
            os.rename(incoming, target)
        except OSError:
            if backup is not None:
                try:
                    os.rename(backup, target)
                except OSError as exc:
                    result.warn(SKILL_ROLLBACK_FAILED, f"cannot move the previous skill back to {target}; "
                                f"it stays at {backup}: {exc}")
            raise
    finally:
        if os.path.lexists(incoming):
            shutil.rmtree(incoming, ignore_errors=True)
    return backup


def install_skill(source: str | os.PathLike[str], target: str | os.PathLike[str], *, mode: Mode = "auto",
                  package_version: str, backup_keep: int = DEFAULT_BACKUP_KEEP,
                  lock_timeout_s: float = 60.0, source_label: str | None = None) -> InstallResult:
    """Bring ``target`` in line with the skill tree ``source`` per the decision table
    (docs/agents-tasks.md §2.14). Runs under a file lock ``<parent>/.<name>.install-lock``.

    Args:
        source: the package's skill directory. target: the host's skill directory (``~``
        expanded; created with its parents). mode: decision column. package_version: recorded
        in the manifest. backup_keep: backups kept after an overwrite (0: all).
        lock_timeout_s: how long to wait for another process's install. source_label: what the
        manifest's ``sourceDir`` says (default ``source``; a rendered copy names its origin).

    Returns:
        The :class:`InstallResult`; never raises for a file-system problem (an unwritable or
        unreadable target → ``failed`` and a ``[SKILL_INSTALL_FAILED] … <OS error>`` warning).

    Raises:
        ValueError: an unknown ``mode`` (a programming error, not a file-system problem).
    """
    if mode not in MODES:
        raise ValueError(f"unknown skill install mode {mode!r}")
    src = Path(source)
    dst = Path(os.path.abspath(os.path.expanduser(os.fspath(target))))
    result = InstallResult(source=src, target=dst, manifest=dst / MANIFEST_NAME)
    try:
        if not src.is_dir():
            result.warn(SKILL_SOURCE_MISSING, f"the package has no skill directory at {src}; nothing installed")
            return result
        package_hash = hash_tree(src)
    except OSError as exc:
        result.failed = True
        result.warn(SKILL_INSTALL_FAILED, f"cannot read the package's skill at {src}: {exc}")
        return result
    try:
        dst.parent.mkdir(parents=True, exist_ok=True)
        lock_path = _hidden(dst.parent, dst.name, "install", "lock")
        open(lock_path, "a").close()  # an unwritable parent fails here, with its OS error (a lock
        # that cannot be created would otherwise read as "held by another process" until the timeout)
        with FileLock(str(lock_path), timeout=lock_timeout_s):
            _clean_incoming(dst.parent, dst.name, result, time.time())
            _install_locked(src, dst, mode, package_version, package_hash, backup_keep, result,
                            source_label or str(src))
    except Timeout:
        result.failed = True
        result.warn(SKILL_INSTALL_BUSY, f"another process kept the install lock of {dst} for {lock_timeout_s:.0f} s; "
                    "nothing done this time")
    except OSError as exc:
        result.failed = True
        result.warn(SKILL_INSTALL_FAILED, f"cannot install the skill into {dst} (the target is unchanged): {exc}")
    return result


def _install_locked(src: Path, dst: Path, mode: Mode, package_version: str, package_hash: str,
                    backup_keep: int, result: InstallResult, source_label: str) -> None:
    state, manifest = inspect_target(dst, package_hash)
    decision = result.decision = decide(state, mode)
    line = f"skill {dst} {decision.text}"
    if decision.code:
        result.warn(decision.code, line)
    else:
        result.infos.append(line)
    now_iso = _utc_now()
    fresh = Manifest(name=SKILL_NAME, package_version=package_version, content_hash=package_hash,
                     installed_at=now_iso, source_dir=source_label)
    if decision.action in (Action.INSTALL, Action.OVERWRITE):
        try:
            result.backup = _swap_in(src, dst, fresh, package_hash, result, time.time())
        except OSError as exc:
            result.failed = True
            result.warn(SKILL_INSTALL_FAILED, f"installing the skill into {dst} failed, the previous state is kept: {exc}")
            return
        result.infos.append(f"skill installed at {dst} (package {package_version}; a host loads it in its next session)")
        if result.backup is not None:
            result.infos.append(f"the previous skill is backed up at {result.backup}")
        if decision.action == Action.OVERWRITE:
            prune_backups(dst.parent, dst.name, backup_keep, result)
    elif decision.action == Action.SKIP:
        if (manifest is None or manifest.content_hash != package_hash or manifest.pending_update is not None
                or manifest.package_version != package_version):
            installed_at = manifest.installed_at if manifest is not None else now_iso
            atomic_write_json(dst / MANIFEST_NAME, fresh.model_copy(update={"installed_at": installed_at}).to_json())
            result.infos.append(f"skill manifest {dst / MANIFEST_NAME} written (repaired)")
    elif decision.action == Action.HOLD and manifest is not None:
        pending = manifest.pending_update
        if pending is None or pending.content_hash != package_hash or pending.package_version != package_version:
            held = manifest.model_copy(update={"pending_update": PendingUpdate(
                package_version=package_version, content_hash=package_hash, detected_at=now_iso)})
            atomic_write_json(dst / MANIFEST_NAME, held.to_json())


def log_result(result: InstallResult, logger: logging.Logger | None = None) -> None:
    """Log ``result``'s infos at INFO and its warnings at WARNING (the ``tianshu_mcp`` logger:
    stderr and server.log, never stdout)."""
    logger = logger or logging.getLogger("tianshu_mcp")
    for line in result.infos:
        logger.info("%s", line)
    for line in result.warnings:
        logger.warning("%s", line)

