"""The worker's side of a remote task (docs/isolation.md §2).

A remote task's flow run carries ``remote = {"repoUrl", "ref", "pool", "parallel", "record"}`` in its
parameters (:class:`~tianshu_mcp.core.remotes.RemoteSpec`): ``record`` is the caller's ``task.json`` without the caller's paths (the brief, the
agent id, the verification settings; never a credential — the caller refuses a ``repoUrl`` with
one, :func:`tianshu_mcp.core.remotes.check_repo_url`). On the worker:

1. :func:`enter_remote` writes the task's ``task.json`` into the worker's own data home, fetches
   the remote into the worker's clone (:mod:`tianshu_mcp.core.git.remote_clone`) and points the task
   at that clone with isolation ``worktree`` starting at ``ref``'s commit;
2. the flow runs as for a local worktree task (agent, checks, grading in the worktree);
3. :func:`leave_remote` pushes ``tianshu/<taskId>`` to the remote and publishes the task's
   record and reports as the artifact ``<taskId>-record`` (:func:`publish_record`), which the
   caller turns back into its own ``task.json`` and report files
   (:mod:`tianshu_mcp.mcp_server.remote_sync`).

The record is also published when a round's verification ends, so ``query_task`` shows a remote
task's progress while it runs.

The whole remote run holds one slot of the repository's global concurrency limit
(:func:`repo_slot`): the work queue's limit is applied when a worker polls, so two workers
polling at once could both start a run of one repository past ``worktreeParallel``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager

from prefect import get_run_logger
from prefect.artifacts import create_markdown_artifact
from prefect.states import Failed, State
from pydantic import BaseModel, ConfigDict, JsonValue

from ..core.errors import ErrorCode, TianshuError
from ..core.files import read_text_tail
from ..core.i18n import _
from ..core.remotes import (
    CALLER_KEYS,
    PATH_KEYS,
    RECORD_FORMAT,
    RemoteSpec,
    check_ref,
    check_repo_url,
    record_artifact_key,
    repo_key,
    repo_limit_name,
)
from ..core.settings import data_home, load_config
from ..tasks.common import record, store
from ..core.git.remote_clone import push_result, sync_clone
from .states import NEEDS_ATTENTION

log = logging.getLogger("tianshu_mcp")

MAX_FILE_BYTES = 256 * 1024
"""A published file (report, agent log) keeps at most its last this many bytes."""
MAX_FILES_BYTES = 1024 * 1024
"""All published files of one record together, bytes (the newest rounds first)."""


@contextmanager
def repo_slot(task_id: str, remote: RemoteSpec) -> Iterator[None]:
    """Hold one slot of the repository's global concurrency limit ``tianshu-repo-<key>-<pool>``
    (limit = the submitter's ``remote.parallel``, else this worker's
    ``concurrency.worktreeParallel``) for the whole remote run; wait for it first.

    Prefect takes the slot atomically on the server, with a lease the run renews (a killed
    worker's slot comes back when the lease expires, 300 s). The work queue's limit alone is
    applied at poll time: two workers polling at once each started a third run of one repository
    with ``worktreeParallel`` 2 (the remote e2e test, on a loaded machine).

    Raises:
        whatever Prefect raises when the API is unreachable (the flow run then fails or crashes).
    """
    from prefect.client.orchestration import get_client
    from prefect.concurrency.sync import concurrency
    from prefect.exceptions import ObjectAlreadyExists

    url = remote.repoUrl
    limit = remote.parallel or load_config(data_home()).concurrency.worktree_parallel  # parallel: 1..32 or None
    name = repo_limit_name(remote.pool, repo_key(url))
    with get_client(sync_client=True) as client:
        try:
            client.upsert_global_concurrency_limit_by_name(name, limit)
        except ObjectAlreadyExists:
            pass  # another worker made it at the same moment
    get_run_logger().info("task %s: waiting for a slot of %s (%d tasks of it at once, limit %s)", task_id, url, limit, name)
    with concurrency(name, occupy=1, strict=True, raise_on_lease_renewal_failure=False):
        yield


def enter_remote(task_id: str, remote: RemoteSpec) -> str:
    """Seed the task in the worker's home and make its clone ready; return the clone's path.

    A re-run of the task (rework, resumed question) on the same worker keeps the worker's own
    record and only takes the caller's newer brief-side fields.

    Raises:
        TianshuError: INVALID_ARGUMENT (a damaged ``remote`` parameter), REMOTE_UNAVAILABLE,
            REMOTE_AUTH_FAILED, REF_NOT_FOUND.
    """
    st = store()
    sent = remote.record
    own = st.read(task_id)
    fields = {k: v for k, v in sent.items() if k not in CALLER_KEYS and k not in PATH_KEYS and k != "taskId"}
    if own is None:
        st.create(task_id, {**fields, "projectPath": "", "isolation": "worktree"}, foreign=True)
    else:
        st.update_foreign(task_id, {k: v for k, v in fields.items()
                                    if k not in own or k in ("task", "context", "autoFixRounds")})
    url = check_repo_url(remote.repoUrl)
    ref = check_ref(remote.ref or "HEAD")
    record(task_id, phase="fetching", lastMessage=_("fetching {url} ({ref}) into this worker's clone").format(url=url, ref=ref))
    clone, commit = sync_clone(data_home(), url, ref, task_id)
    record(task_id, projectPath=clone, isolation="worktree", worktreeStart=commit, remoteCommit=commit,
           repoUrl=url, ref=ref)
    st.event(task_id, "note", "running", f"{url} {ref} = {commit[:12]}; clone {clone}")
    record(task_id, lastMessage=_("running on this worker: {url} at {commit}").format(url=url, commit=commit[:12]))
    publish_record(task_id)  # the caller sees that a worker took the task
    return clone


def leave_remote(task_id: str, state: State | None) -> State | None:
    """Push the result branch and publish the record; return the task's final state.

    A result that cannot be pushed turns a ``succeeded`` task into ``needs_attention`` (the
    caller would otherwise see a pass whose work it cannot reach); the branch stays in the
    worker's clone and the message says so. A task that committed nothing (``resultCommit``
    unset: the agent never started, or changed nothing) pushes nothing: its branch would only be
    the base commit under a new name on the shared remote.
    """
    meta = store().read(task_id) or {}
    branch, url = meta.get("resultBranch"), meta.get("repoUrl")
    if state is not None and branch and url and meta.get("projectPath") and meta.get("resultCommit"):
        try:
            push_result(str(meta["projectPath"]), str(branch), str(url))
            record(task_id, resultPushed=True, pushError=None)
            store().event(task_id, "note", "running", f"result branch {branch} pushed to {url}")
        except TianshuError as exc:
            record(task_id, resultPushed=False, pushError=exc.render())
            if state.is_completed():
                msg = _("{message} — but the result branch {branch} could not be pushed to {url} (it stays in the "
                        "worker's clone {clone}): {error}").format(message=state.message or "succeeded", branch=branch,
                                                                    url=url, clone=meta["projectPath"],
                                                                    error=exc.render())
                record(task_id, lastMessage=msg, errorType=exc.code.value.lower())
                state = Failed(name=NEEDS_ATTENTION, message=msg)
    publish_record(task_id)
    return state


class RecordPayload(BaseModel):
    """What :func:`publish_record` sends (read by :mod:`tianshu_mcp.mcp_server.remote_sync`):
    ``{"format", "taskDir", "record", "files": {name: text}}``.

    Attributes:
        format: :data:`~tianshu_mcp.core.remotes.RECORD_FORMAT`.
        taskDir: the task's directory on the worker (the caller rewrites paths under it).
        record: the worker's ``task.json`` as it is on disk, less ``clientEnv`` (JSON of this
            worker's version, taken over by the caller with ``foreign`` checks).
        files: file name in the task directory → its text (the tail of a long one).
    """

    model_config = ConfigDict(frozen=True)

    format: str
    taskDir: str
    record: dict[str, JsonValue]
    files: dict[str, str]


def record_payload(task_id: str) -> RecordPayload | None:
    """What :func:`publish_record` sends: the :class:`RecordPayload`.

    ``files`` holds the task directory's ``result.patch``, its reports (``report-<n>.md``/``.json``/``.html``,
    newest first) and the tail of the agent's log, within :data:`MAX_FILES_BYTES`. None when the task has no record.
    """
    st = store()
    meta = st.read(task_id)
    if meta is None:
        return None
    tdir = st.dir(task_id)
    names = sorted((p.name for p in tdir.glob("report-*.*") if p.suffix in (".md", ".json", ".html")), reverse=True)
    if (tdir / "result.patch").is_file():
        names.insert(0, "result.patch")
    log_file = meta.get("logFile")
    if isinstance(log_file, str) and log_file.startswith(str(tdir) + "/"):
        names.insert(0, log_file[len(str(tdir)) + 1:])
    files: dict[str, str] = {}
    total = 0
    for name in names:
        text = read_text_tail(tdir / name, MAX_FILE_BYTES)
        if text is None or total + len(text) > MAX_FILES_BYTES:
            continue
        files[name] = text
        total += len(text)
    return RecordPayload(format=RECORD_FORMAT, taskDir=str(tdir),
                         record={k: v for k, v in meta.items() if k not in ("clientEnv",)}, files=files)


def publish_record(task_id: str) -> None:
    """Publish the task's record as the markdown artifact ``<taskId>-record`` (a JSON block):
    the caller's copy of a remote task (query_task, wait_task, query_info(type=report))."""
    payload = record_payload(task_id)
    if payload is None:
        return
    try:
        create_markdown_artifact(
            key=record_artifact_key(task_id),
            markdown="```json\n" + json.dumps(payload.model_dump(mode="json"), ensure_ascii=False, indent=1) + "\n```\n",
            description=f"The record of remote task {task_id} (read by the MCP server that submitted it)",
        )
    except Exception as exc:  # noqa: BLE001 - the caller then shows the flow run's state and message
        log.warning("could not publish the record of %s: %s", task_id, exc)


def remote_error_type(exc: TianshuError) -> str:
    """The task's ``errorType`` for a failed :func:`enter_remote` (the code, lower case)."""
    return exc.code.value.lower() if exc.code != ErrorCode.INVALID_ARGUMENT else "setup_failed"
