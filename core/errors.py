"""Stable error codes (docs/architecture.md §7).

Every tool error reaches the host as ``Error: [CODE] message`` with ``isError: true``. The codes
below are the complete, documented list; tests and hosts match on them, so never rename one.
"""

from __future__ import annotations

from enum import Enum


class ErrorCode(str, Enum):
    """Upper-snake identifiers for every failure a tool or a task can report."""

    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    """A parameter violates the tool's input schema or a cross-field rule (docs/tools.md §1.2–§1.3)."""
    UNKNOWN_TOOL = "UNKNOWN_TOOL"
    """tools/call named a tool that does not exist (docs/tools.md §2.5)."""
    TASK_NOT_FOUND = "TASK_NOT_FOUND"
    """No task (or verify record) with that id exists under the data home."""
    PATH_NOT_ABSOLUTE = "PATH_NOT_ABSOLUTE"
    """projectPath is relative (docs/tools.md §3.1 rule 1)."""
    PATH_NOT_FOUND = "PATH_NOT_FOUND"
    """projectPath does not exist or is not a directory (docs/tools.md §3.1 rule 2)."""
    PATH_IS_HOME = "PATH_IS_HOME"
    """projectPath is the user's home directory itself (docs/tools.md §3.1 rule 4)."""
    PATH_IS_SYSTEM = "PATH_IS_SYSTEM"
    """projectPath is a root or system directory, or inside a system tree such as /proc, /usr, /etc
    (docs/tools.md §3.1 rule 5, widened by docs/robustness.md §7; list in ``core/paths.py``)."""
    PATH_IS_DATA_HOME = "PATH_IS_DATA_HOME"
    """projectPath is tianshu-mcp's data home or inside it (docs/robustness.md §7)."""
    IDEMPOTENCY_CONFLICT = "IDEMPOTENCY_CONFLICT"
    """The idempotencyKey is already bound to a call with different arguments (docs/tools.md §3.2)."""
    INVALID_STATE = "INVALID_STATE"
    """The task's status does not allow the requested action."""
    CONFIG_UNREADABLE = "CONFIG_UNREADABLE"
    """A configuration file exists but cannot be read (a directory, no permission)."""
    CONFIG_INVALID = "CONFIG_INVALID"
    """A configuration file is not valid JSON or violates its schema; the message names the file."""
    PREFECT_UNAVAILABLE = "PREFECT_UNAVAILABLE"
    """The Prefect API did not become ready in time, or a call to it failed."""
    SERVICE_IDENTITY_MISMATCH = "SERVICE_IDENTITY_MISMATCH"
    """The API found at the home's published address belongs to another data home (or does not
    know this home's credentials); nothing was sent to it."""
    PREFECT_DB_CORRUPT = "PREFECT_DB_CORRUPT"
    """The home's Prefect database cannot be opened; the message names the file and how to recover
    (task files are never touched)."""
    SERVICE_START_FAILED = "SERVICE_START_FAILED"
    """The per-home background service exited before it became ready; the message quotes its log."""
    CHECK_NOT_RUNNABLE = "CHECK_NOT_RUNNABLE"
    """An acceptance check's program cannot be started (missing, not executable): a setup problem."""
    NOTHING_VERIFIED = "NOTHING_VERIFIED"
    """Verification had nothing to judge with: not a git repository and no command check ran."""
    TAMPERING = "TAMPERING"
    """Verification integrity (docs/integrity.md): the round's checks pass on the agent's tree but fail on
    the pristine tree (the baseline's test infrastructure with the agent's other changes), or the
    agent's production code detects that it is under test; the files that make the difference are
    named."""
    TESTS_REMOVED = "TESTS_REMOVED"
    """Verification integrity: tests that ran at the baseline no longer run with a real outcome
    (gone, skipped, xfail, todo, deselected, filtered); the ids (or counts) are named."""
    TARGET_FAILED = "TARGET_FAILED"
    """Verification integrity: a test the brief or ``targetTests`` names is missing, did not run,
    or did not pass."""
    TARGETS_NOT_JUDGED = "TARGETS_NOT_JUDGED"
    """``targetTests`` were named for a project without a git baseline commit (not a repository,
    or no commit yet): whether a target really ran and passed cannot be judged there, so the
    round fails closed and the task needs a person (commit the project first)."""
    HOLDOUT_FAILED = "HOLDOUT_FAILED"
    """Verification integrity: a holdout check (registered outside the repository, never shown to
    the agent) failed; only its behaviour area is said."""
    GIT_FAILED = "GIT_FAILED"
    """git refused or failed where its answer matters (dubious ownership, a missing filter
    program, a broken index, a held index.lock): the message quotes git's own text and hint; the
    task needs attention, never a pass and never "clean"."""
    WORKTREE_UNAVAILABLE = "WORKTREE_UNAVAILABLE"
    """``isolation: "worktree"`` for a project that cannot have one: not in a git repository, its
    HEAD has no commit to start the task's branch from or does not contain the project's
    directory, or a branch named ``tianshu`` blocks the ``tianshu/<taskId>`` branches."""
    MERGE_CONFLICT = "MERGE_CONFLICT"
    """``manage_task(action="merge")``: the result branch conflicts with the project's branch; the
    merge was aborted and the project is unchanged (the paths are named)."""
    REMOTE_UNAVAILABLE = "REMOTE_UNAVAILABLE"
    """A remote task's ``repoUrl`` could not be cloned or fetched by the worker: it does not
    exist, or the host cannot be reached (git's own words are quoted)."""
    REMOTE_AUTH_FAILED = "REMOTE_AUTH_FAILED"
    """The remote needs credentials the worker's environment does not give (git credential
    helper, SSH key, ``GIT_ASKPASS``): nothing prompts, the task ends with git's words."""
    REF_NOT_FOUND = "REF_NOT_FOUND"
    """A remote task's ``ref`` names no branch, tag or commit of its ``repoUrl``."""
    NO_WORKER = "NO_WORKER"
    """A task's work pool had no worker to take it within ``remote.queueTimeoutMs``."""
    IDEMPOTENCY_STORE_CORRUPT = "IDEMPOTENCY_STORE_CORRUPT"
    """``<home>/idempotency.json`` exists but cannot be parsed, or its lock cannot be taken: keyed
    calls fail closed (never a silent reset that would dispatch a second task); the message names
    the file and the way out."""
    TASK_RECORD_CORRUPT = "TASK_RECORD_CORRUPT"
    """A task directory exists but its task.json cannot be read or parsed."""
    SPAWN_FAILED = "SPAWN_FAILED"
    """A child process (agent, check) could not be started."""
    INTERNAL = "INTERNAL"
    """An unexpected exception; the message carries its text."""


class TianshuError(Exception):
    """An error with a stable code, rendered to hosts as ``Error: [CODE] message``.

    Args:
        code: one of :class:`ErrorCode`.
        message: human text (English); never contains secrets or raw idempotency keys.
    """

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def render(self) -> str:
        """Return the wire text ``Error: [CODE] message``."""
        return f"Error: [{self.code.value}] {self.message}"
