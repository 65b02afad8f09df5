"""What a remote task names: a git remote (``repoUrl``), a ``ref`` and a work pool (docs/isolation.md §2).

Plain validation, no git and no Prefect: the MCP server refuses a bad call with a coded error
before anything is written, and the worker re-checks what reaches it in flow-run parameters.

Credentials never travel with a task: a ``repoUrl`` with a password or token in it
(``https://user:token@host/…``) is refused; the worker's own environment authenticates (git
credential helper, SSH key, ``GIT_ASKPASS``). Flow-run parameters are visible in the Prefect UI.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, JsonValue, model_validator

from .errors import ErrorCode, TianshuError

LOCAL_POOL = "tianshu"
"""The work pool of the home's own worker (:data:`tianshu_mcp.deployments.topology.WORK_POOL`)."""

CALLER_KEYS = ("projectPath", "displayPath", "projectKey", "homeTag", "flowRunId", "workQueue", "submittedAt",
               "remote", "workPath", "worktreePath", "worktreeStart", "clientEnv")
"""Keys of ``task.json`` that belong to one side of a remote task only (caller or worker): never sent, never taken over."""
PATH_KEYS = ("reportMd", "reportJson", "reportHtml", "logFile", "resultPatch", "dryRunReportMd", "dryRunReportJson")
"""Keys holding a path under the task directory (rewritten to the receiving side's directory)."""
RECORD_FORMAT = "tianshu-remote-record/1"
"""The ``format`` of a remote task's published record (a caller refuses one it does not know)."""


class RemoteSpec(BaseModel):
    """The ``remote`` parameter of a remote task's ``run-task`` flow run (docs/isolation.md §2):
    ``{"repoUrl", "ref", "pool", "parallel", "record"}``.

    Attributes:
        repoUrl: the git remote (checked again on the worker, :func:`check_repo_url`).
        ref: the branch, tag or commit to start from (:func:`check_ref`).
        pool: the work pool the task was sent to.
        parallel: the submitter's limit of runs of this repository at once (1..32), or None.
        record: the caller's ``task.json`` without its :data:`CALLER_KEYS`: JSON as the caller's
            version wrote it (taken over with ``foreign`` checks, so it stays untyped here).

    A damaged value (a wrong type from a hand-made flow run) is read as absent, so the worker
    refuses it with a coded error (INVALID_ARGUMENT) instead of failing the parameter check.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    repoUrl: str = ""
    ref: str = "HEAD"
    pool: str = ""
    parallel: int | None = None
    record: dict[str, JsonValue] = {}

    @model_validator(mode="before")
    @classmethod
    def _lenient(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        kept = {k: v for k, v in data.items() if k not in ("repoUrl", "ref", "pool") or isinstance(v, str)}
        parallel = data.get("parallel")
        if not isinstance(parallel, int) or isinstance(parallel, bool) or not 1 <= parallel <= 32:
            kept.pop("parallel", None)
        if not isinstance(data.get("record"), dict):
            kept.pop("record", None)
        return kept


def record_artifact_key(task_id: str) -> str:
    """``<taskid>-record``: the key of a remote task's record artifact (Prefect allows lowercase
    letters, digits and dashes only)."""
    return f"{task_id}-record".lower().replace("_", "-")


_POOL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
_SCP = re.compile(r"^(?:[A-Za-z0-9._-]+@)?[A-Za-z0-9.-]+:(?!//)[^\s]+$")
_SCHEMES = ("https", "http", "ssh", "git", "file")


def check_pool(pool: str) -> str:
    """A work pool name: 1..63 of ``[A-Za-z0-9_.-]``, starting with a letter or digit.

    Raises:
        TianshuError: INVALID_ARGUMENT.
    """
    if not isinstance(pool, str) or not _POOL.match(pool):
        raise TianshuError(ErrorCode.INVALID_ARGUMENT,
                           f"workPool: {str(pool)[:80]!r} is not a work pool name (letters, digits, '_', '.', '-'; ≤ 63)")
    return pool


def check_repo_url(url: str) -> str:
    """A git remote a worker can clone: ``https://``, ``http://``, ``ssh://``, ``git://``,
    ``file://``, scp-like ``user@host:path``, or an absolute path on the worker's machine.

    Returns:
        The URL, stripped.

    Raises:
        TianshuError: INVALID_ARGUMENT — empty, an unknown scheme, whitespace or a control
            character, an option-like value (``-…``), or credentials in the URL.
    """
    url = (url or "").strip() if isinstance(url, str) else ""
    if url.startswith("-"):
        raise TianshuError(ErrorCode.INVALID_ARGUMENT, "repoUrl: a value starting with '-' would be read as a git option")
    if not url or len(url) > 2048 or any(ord(c) < 32 or c.isspace() for c in url):
        raise TianshuError(ErrorCode.INVALID_ARGUMENT, "repoUrl: give a git remote URL (https://…, ssh://…, "
                           "user@host:path, file://… or an absolute path) without spaces")
    if url.startswith("/"):
        return url
    if re.match(r"^[A-Za-z0-9+.-]+::", url):  # git's <transport>::<address> runs a remote helper program
        raise TianshuError(ErrorCode.INVALID_ARGUMENT, "repoUrl: the <transport>::<address> form (a git remote "
                           "helper) is refused; give an https://, ssh://, git://, file:// URL or user@host:path")
    if "://" in url:
        parts = urlsplit(url)
        if parts.scheme not in _SCHEMES:
            raise TianshuError(ErrorCode.INVALID_ARGUMENT, f"repoUrl: scheme {parts.scheme!r} is not supported; "
                               f"use one of {', '.join(_SCHEMES)}")
        if parts.password is not None or (parts.scheme in ("http", "https") and parts.username):
            raise TianshuError(ErrorCode.INVALID_ARGUMENT,
                               "repoUrl: credentials in the URL are refused (flow-run parameters are visible in the "
                               "Prefect UI); give them to the worker's environment: a git credential helper, an SSH "
                               "key or GIT_ASKPASS")
        if parts.query or parts.fragment:
            raise TianshuError(ErrorCode.INVALID_ARGUMENT, "repoUrl: a query string or fragment is refused (it may carry "
                               "a token, and flow-run parameters are visible in the Prefect UI)")
        if parts.scheme != "file" and not parts.hostname:
            raise TianshuError(ErrorCode.INVALID_ARGUMENT, f"repoUrl: {url[:200]!r} names no host")
        return url
    if _SCP.match(url):
        head = url.split("/", 1)[0]
        if head.count("@") > 1 or ("@" in head and ":" in head.split("@", 1)[0]):
            raise TianshuError(ErrorCode.INVALID_ARGUMENT, "repoUrl: credentials in the URL are refused (flow-run "
                               "parameters are visible in the Prefect UI); give them to the worker's environment")
        return url
    raise TianshuError(ErrorCode.INVALID_ARGUMENT, f"repoUrl: {url[:200]!r} is not a git remote URL")


def check_ref(ref: str) -> str:
    """A branch, tag or commit name as ``git check-ref-format --allow-onelevel`` accepts it
    (a test holds the two together), or ``HEAD``.

    Raises:
        TianshuError: INVALID_ARGUMENT.
    """
    bad = (not isinstance(ref, str) or not ref or ref == "@" or len(ref) > 255 or ref.startswith(("-", "/")) or ref.endswith(("/", ".", ".lock"))
           or ".." in ref or "@{" in ref or "//" in ref
           or any(part.startswith(".") or part.endswith(".lock") for part in ref.split("/"))
           or any(ord(c) < 32 or c.isspace() or c in "~^:?*[\\\x7f" for c in ref))
    if bad:
        raise TianshuError(ErrorCode.INVALID_ARGUMENT, f"ref: {str(ref)[:80]!r} is not a branch, tag or commit name")
    return ref


def repo_limit_name(pool: str, key: str) -> str:
    """The global concurrency limit holding the remote runs of repository ``key`` (:func:`repo_key`)
    in work pool ``pool``: ``tianshu-repo-<key>-<pool>``."""
    return f"tianshu-repo-{key}-{pool}"


def repo_key(url: str) -> str:
    """16 hex digits naming a remote repository (its work queue ``project-<key>-wt``, its clone).
    Only a trailing ``/`` is ignored: ``r`` and ``r.git`` may be different repositories."""
    return hashlib.sha256(url.rstrip("/").encode("utf-8")).hexdigest()[:16]
