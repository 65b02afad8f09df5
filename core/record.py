"""The task record: the typed schema of ``<home>/tasks/<id>/task.json`` (docs/design-notes.md, note 52).

Every field a task or verification record may carry is declared here with its type; the
closed vocabularies (status, phase, error type, abort source, …) are enums. The store
(:class:`tianshu_mcp.core.taskstore.TaskStore`) is the only writer of ``task.json`` and checks
every field it writes against this schema: an undeclared name or a value outside its enum is a
programming error (``ValueError``), never a silently new key. Records read from disk load as
they are: keys this version does not know (a newer worker's, published back to its caller) are
kept, and :func:`migrate` brings older formats to :data:`RECORD_VERSION`.

Status is *not* a field here: it is derived from the flow-run state (:mod:`tianshu_mcp.core.status`).
``finalStatus`` only exists for a record whose flow run is gone or never existed.
"""

from __future__ import annotations

from enum import Enum
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Optional, Union

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from .model import TaskStatus

RECORD_FILE = "task.json"
"""The record's file name in its task directory; only :mod:`tianshu_mcp.core.taskstore` writes it."""


def record_path(home: Path, task_id: str) -> Path:
    """``<home>/tasks/<id>/task.json`` (no id check: for reads and messages)."""
    return home / "tasks" / task_id / RECORD_FILE


RECORD_VERSION = 1
"""The format this build writes (``recordVersion``). Records without the key are version 1:
the format has not changed since records were first written, so they load unchanged."""


class Phase(str, Enum):
    """What a RUNNING flow run is doing (refines status ``running``; docs/design-notes.md note 4)."""

    RUNNING = "running"
    VERIFY_START = "verify_start"
    FIXING = "fixing"
    FETCHING = "fetching"  # a remote task's worker fetches the repository (reported as running)


class ErrorType(str, Enum):
    """Why a task ended other than ``succeeded`` (``errorType``; docs/agents-tasks.md §2)."""

    TIMEOUT = "timeout"
    IDLE_TIMEOUT = "idle_timeout"
    SPAWN = "spawn"
    SETUP_FAILED = "setup_failed"
    AGENT_FAILED = "agent_failed"
    AGENT_UNRESOLVED = "agent_unresolved"
    VERIFY_FAILED = "verify_failed"
    GIT_FAILED = "git_failed"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"
    INTERNAL = "internal"
    CDP_DISCONNECTED = "cdp_disconnected"
    NEEDS_USER_UNSUPPORTED = "needs_user_unsupported"
    SUBMIT_FAILED = "submit_failed"
    NO_WORKER = "no_worker"
    REMOTE_UNAVAILABLE = "remote_unavailable"
    REMOTE_AUTH_FAILED = "remote_auth_failed"
    REF_NOT_FOUND = "ref_not_found"


class AbortSource(str, Enum):
    """Who stopped a task (``abortSource``)."""

    USER = "user"
    SHUTDOWN = "shutdown"
    TIMEOUT = "timeout"
    RESTART = "restart"  # the service that ran it stopped; archived at start-up
    UI = "ui"  # cancelled or deleted in the Prefect UI
    INTERNAL = "internal"


class RecordKind(str, Enum):
    """A ``vfy_`` record's kind; a task record has none."""

    VERIFY = "verify"
    REVERIFY = "reverify"


class WorkspaceMode(str, Enum):
    """Where a task works: a project path on this host, or a remote repository."""

    PROJECT = "project"
    REMOTE = "remote"


class Isolation(str, Enum):
    """``inplace`` (the project's own tree) or ``worktree`` (a branch of its own)."""

    INPLACE = "inplace"
    WORKTREE = "worktree"


class VerificationSource(str, Enum):
    """Who asked for the latest verification: the flow's round, a verify_task call, a schedule."""

    AUTO = "auto"
    MANUAL = "manual"
    SCHEDULED = "scheduled"


class RoundVerdict(str, Enum):
    """``latestVerificationVerdict``."""

    PASSED = "passed"
    FAILED = "failed"


class TaskRecord(BaseModel):
    """``task.json`` of a task (``tsk_…``) or verification record (``vfy_…``).

    Field names are the file's (camelCase). Times are ISO-8601 UTC strings (``utc_now``);
    durations are ms. Required: ``taskId``, ``createdAt``; every other field is optional and
    absent when unset (a None written through the store deletes the key).
    """

    model_config = ConfigDict(extra="allow", use_enum_values=True)

    # identity and the call that created it
    taskId: str
    createdAt: str
    updatedAt: Optional[str] = None
    recordVersion: Optional[int] = None
    kind: Optional[RecordKind] = None
    workspaceMode: Optional[WorkspaceMode] = None
    projectPath: Optional[str] = None
    displayPath: Optional[str] = None
    projectKey: Optional[str] = None
    isolation: Optional[Isolation] = None
    homeTag: Optional[str] = None
    agentId: Optional[str] = None
    task: Optional[str] = None
    context: Optional[str] = None
    model: Optional[str] = None
    mode: Optional[str] = None
    reasoningLevel: Optional[str] = None
    autoVerify: Optional[bool] = None
    autoFixRounds: Optional[int] = None
    taskTimeoutMs: Optional[int] = None
    acceptanceOverride: Optional[dict[str, Any]] = None
    idempotencyKey: Optional[str] = None
    targetTests: Optional[list[str]] = None
    holdoutCount: Optional[int] = None
    dryRun: Optional[bool] = None
    targetTaskId: Optional[str] = None
    acceptedSeq: Optional[int] = None  # the home's acceptance number (FIFO order, design note 53)
    acceptedAt: Optional[str] = None  # its time, ISO-8601 UTC with microseconds
    # a remote task
    workPool: Optional[str] = None
    repoUrl: Optional[str] = None
    ref: Optional[str] = None
    remoteCommit: Optional[str] = None
    remoteRecordId: Optional[str] = None
    remoteFinal: Optional[bool] = None
    resultPushed: Optional[bool] = None
    pushError: Optional[str] = None
    # its flow run
    flowRunId: Optional[str] = None
    workQueue: Optional[str] = None
    submittedAt: Optional[str] = None
    startedAt: Optional[str] = None
    phase: Optional[Phase] = None
    lastMessage: Optional[str] = None
    roundsUsed: Optional[int] = None
    currentRound: Optional[int] = None  # the number of the agent round running or last run (0-based)
    # the agent's last round
    logFile: Optional[str] = None
    agentExitCode: Optional[int] = None
    agentDurationMs: Optional[int] = None
    guiStop: Optional[dict[str, Any]] = None
    progressSummary: Optional[str] = None
    # worktree isolation
    workPath: Optional[str] = None
    worktreePath: Optional[str] = None
    worktreeBase: Optional[str] = None
    worktreeStart: Optional[str] = None
    resultBranch: Optional[str] = None
    resultCommit: Optional[str] = None
    resultPatch: Optional[str] = None
    dirtyNotCarried: Optional[int] = None
    mergeCommit: Optional[str] = None
    mergedAt: Optional[str] = None
    # the latest verification
    reportMd: Optional[str] = None
    reportJson: Optional[str] = None
    reportHtml: Optional[str] = None
    reportRound: Optional[int] = None
    verificationSource: Optional[VerificationSource] = None
    latestVerificationVerdict: Optional[RoundVerdict] = None
    changedFiles: Optional[list[str]] = None
    diffstat: Optional[Union[str, dict[str, Any]]] = None
    testIntegrity: Optional[str] = None
    unsupportedClaims: Optional[list[Any]] = None
    summary: Optional[str] = None
    pendingVisualVerification: Optional[bool] = None
    dryRunReportMd: Optional[str] = None
    dryRunReportJson: Optional[str] = None
    dryRunPlanDoc: Optional[str] = None
    # the ending
    finishedAt: Optional[str] = None
    errorType: Optional[ErrorType] = None
    abortSource: Optional[AbortSource] = None
    cancelReason: Optional[str] = None
    cancelRequestedAt: Optional[str] = None
    finalStatus: Optional[TaskStatus] = None
    # a question to the user (needs_user)
    needsUserKind: Optional[str] = None
    pendingQuestion: Optional[str] = None
    needsUserQuestion: Optional[str] = None
    needsUserRound: Optional[int] = None
    needsUserKey: Optional[str] = None
    needsUserFeedback: Optional[str] = None
    needsUserCount: Optional[int] = None
    continueMessage: Optional[str] = None
    continueKey: Optional[str] = None


FIELDS: frozenset[str] = frozenset(TaskRecord.model_fields)
"""Every declared field name of ``task.json``."""


@lru_cache(maxsize=None)
def _adapter(name: str) -> TypeAdapter[Any]:
    return TypeAdapter(TaskRecord.model_fields[name].annotation)


def warm_validators() -> None:
    """Build every field's validator now: each flow run used to build the ones it writes at
    first use (≈9 ms before its agent started); the fork server builds them once for all
    (docs/design-notes.md, note 85)."""
    for name in FIELDS:
        _adapter(name)


def check_fields(fields: Mapping[str, Any], foreign: bool = False) -> dict[str, Any]:
    """The JSON values to write for ``fields`` (enums as their values; None kept: it deletes).

    Args:
        fields: field name → value, as passed to the store.
        foreign: True for fields copied from another record (a remote worker's, which may be a
            newer version): undeclared names are kept as they are instead of refused.

    Values are validated in pydantic's lax mode: an unambiguous form is written as the field's
    type (``"3"`` → 3 for an integer); an enum value must be a member.

    Raises:
        ValueError: an undeclared field name (unless ``foreign``), or a value that is not of the
            field's type (e.g. an ``errorType`` outside :class:`ErrorType`).
    """
    out: dict[str, Any] = {}
    for name, value in fields.items():
        if name not in FIELDS:
            if not foreign:
                raise ValueError(f"task.json has no field {name!r} (declare it in core/record.py)")
            out[name] = value
            continue
        if value is None:
            out[name] = None
            continue
        try:
            checked = _adapter(name).validate_python(value)
        except ValidationError as exc:
            if foreign:
                out[name] = value  # another version's value: kept, not ours to judge
                continue
            raise ValueError(f"task.json field {name}={value!r:.80}: {exc.errors()[0]['msg']}") from None
        out[name] = checked.value if isinstance(checked, Enum) else checked
    return out


_MIGRATIONS: dict[int, Any] = {}
"""``version → function(dict) -> dict`` bringing a record of that version to the next one.
Empty: version 1 is the only format so far."""


def migrate(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A record read from disk in this version's format: migrated step by step from its
    ``recordVersion`` (absent: 1); every key kept, unknown ones included.

    Raises:
        ValueError: a ``recordVersion`` newer than :data:`RECORD_VERSION` that this build cannot
            read safely, or not an integer.
    """
    data = dict(raw)
    version = data.get("recordVersion", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ValueError(f"recordVersion is {version!r}, not a positive integer")
    if version > RECORD_VERSION:
        raise ValueError(f"recordVersion {version} is newer than this build's ({RECORD_VERSION})")
    while version < RECORD_VERSION:
        data = _MIGRATIONS[version](data)
        version += 1
    return data


def load_record(raw: Mapping[str, Any]) -> TaskRecord:
    """The typed record of a ``task.json`` object (migrated; unknown keys kept as extras).

    Raises:
        ValueError: not a record (see :func:`migrate`; pydantic's ValidationError is a ValueError).
    """
    return TaskRecord.model_validate(migrate(raw))


def read_record(raw: Mapping[str, Any]) -> tuple[TaskRecord, dict[str, Any]]:
    """The typed view of a record as a reader needs it, whatever else is in the file: a value
    this version cannot read (a newer worker's enum member, a damaged type) is left out of the
    view instead of sinking the whole record, and so is a newer ``recordVersion`` (its fields
    are read as far as they are this version's). The file itself is never changed here.

    Returns:
        ``(record, unread)``: the view and the declared fields left out of it, with their values.

    Raises:
        ValueError: not a record at all (no ``taskId``/``createdAt`` string).
    """
    data = dict(raw)
    unread: dict[str, Any] = {}
    try:
        data = migrate(data)
    except ValueError:
        unread["recordVersion"] = data.pop("recordVersion", None)
    for _ in range(len(FIELDS)):
        try:
            return TaskRecord.model_validate(data), unread
        except ValidationError as exc:
            names = {str(e["loc"][0]) for e in exc.errors() if e["loc"]}
            bad = names & (FIELDS - {"taskId", "createdAt"})
            if not bad:
                raise ValueError(f"not a task record: {exc.errors()[0]['msg']}") from None
            for name in bad:
                unread[name] = data.pop(name)
    raise ValueError("not a task record")  # pragma: no cover - every pass removes a field


def dump_record(record: TaskRecord) -> dict[str, Any]:
    """The JSON object of ``record``: set fields only, in declaration order, extras after."""
    return record.model_dump(mode="json", exclude_none=True)
