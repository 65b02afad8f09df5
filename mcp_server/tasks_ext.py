"""The MCP tasks extension ``io.modelcontextprotocol/tasks`` (SEP-2663, revision 2026-07-28) on our tasks.

Built on the SDK's extension interface (:class:`mcp.server.extension.Extension`): the extension
contributes three request methods and one ``tools/call`` interceptor, and
:func:`apply_extension` installs them on the low-level server the same way ``MCPServer`` applies
an extension (methods gated to 2026-07-28, the interceptor folded around the tool handler, the
identifier advertised under ``capabilities.extensions``).

* **Task creation** — ``run_task`` and ``verify_task`` answer a ``CreateTaskResult``
  (``resultType: "task"``) instead of their ``CallToolResult`` when the request's per-request
  client capabilities declare the extension. The extension's ``taskId`` is our task id (``tsk_…``
  or ``vfy_…``), so ``tasks/get`` and ``query_task`` read one record: there is no second store.
  A call that fails (a coded tool error) stays an ordinary ``isError`` result: no task exists.
* **Status** — from :meth:`.taskops.TaskService.view`, the status mapping query_task uses:
  queued/running/verify_start/fixing → ``working``; ``needs_user`` → ``input_required`` with the
  agent's question as an ``elicitation/create`` form request keyed by the question's
  ``needsUserKey`` (unique per question of a task); ``cancelled`` → ``cancelled``; every other
  final status (succeeded, failed, needs_attention, interrupted) → ``completed`` with ``result`` =
  the ``CallToolResult`` the classic contract gives at that stop (query_task's for a task, the
  verification summary for a ``vfy_`` record). ``failed`` is never used: it is reserved for
  JSON-RPC errors, and a failed task is a completed call (SEP-2663 "Task Execution Errors").
* **tasks/update** — an ``accept`` response to the outstanding question continues the task
  exactly like ``manage_task(action="continue", message=…)``. Responses to keys that are not
  outstanding are ignored (spec); ``decline``/``cancel`` leave the question open (the task keeps
  waiting; ``tasks/cancel`` or ``manage_task`` ends it).
* **tasks/cancel** — ``manage_task(action="cancel")``; on a final task, and on a ``vfy_``
  verification (not cancellable through manage_task either), it is acknowledged and changes
  nothing (cancellation is cooperative, spec "Task Cancellation").
* An answer through ``tasks/update`` meets ``manage_task(action="continue")``'s argument rules
  (no NUL character, at most its length), else ``-32602`` and the question stays open.
* ``ttlMs`` is null (records are kept until the user deletes them) and ``pollIntervalMs``
  :data:`POLL_INTERVAL_MS`.

Errors: an unknown id → ``-32602`` "Failed to retrieve task: Task not found"; a client that did
not declare the extension on the request → ``-32021``; before 2026-07-28 the methods do not exist
(``-32601``). Hosts that negotiate an older revision keep the classic contract (taskId + wait_task).
"""

from __future__ import annotations

import logging
from typing import Any

import mcp_types as types
from mcp.server.extension import Extension, MethodBinding, compose_tool_call_handler
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolRequestParams, RequestParams
from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, MISSING_REQUIRED_CLIENT_CAPABILITY
from pydantic import Field

from ..core.errors import TianshuError
from ..core.i18n import _
from ..core.model import TERMINAL
from ..core.taskstore import utc_now

log = logging.getLogger("tianshu_mcp")

EXTENSION_ID = "io.modelcontextprotocol/tasks"
PROTOCOL_VERSIONS = frozenset({"2026-07-28"})
"""Revisions that carry the extension (older hosts keep the classic contract)."""
TASK_TOOLS = frozenset({"run_task", "verify_task"})
POLL_INTERVAL_MS = 5000
"""Suggested ``tasks/get`` interval (the classic contract's 5–10 s polling advice, docs/tools.md §3.1)."""
WORKING = frozenset({"queued", "running", "verify_start", "fixing"})


class TaskIdParams(RequestParams):
    """``tasks/get`` and ``tasks/cancel`` params."""

    task_id: str = Field(alias="taskId", min_length=1, max_length=200)


class UpdateParams(TaskIdParams):
    """``tasks/update`` params: ``inputResponses`` keyed by ``inputRequests`` keys."""

    input_responses: dict[str, Any] = Field(alias="inputResponses")


def declared(ctx: Any) -> bool:
    """The request comes from a 2026-07-28 client that declared the extension on it."""
    if getattr(ctx, "protocol_version", None) not in PROTOCOL_VERSIONS:
        return False
    caps = getattr(getattr(ctx, "session", None), "client_capabilities", None)
    return bool(caps is not None and caps.extensions and EXTENSION_ID in caps.extensions)


def _require(ctx: Any) -> None:
    if not declared(ctx):
        raise MCPError(code=MISSING_REQUIRED_CLIENT_CAPABILITY, message="Missing required client capability",
                       data={"requiredCapabilities": {"extensions": {EXTENSION_ID: {}}}})


def _not_found(task_id: str) -> MCPError:
    return MCPError(code=INVALID_PARAMS, message=_("Failed to retrieve task: Task not found ({taskId})").format(
        taskId=task_id[:80]))


def _dump(result: types.CallToolResult) -> dict[str, Any]:
    return result.model_dump(by_alias=True, mode="json", exclude_none=True)


class TasksExtension(Extension):
    """``io.modelcontextprotocol/tasks`` over the task records and flow runs of ``handlers``.

    Args:
        handlers: the server's :class:`.handlers.Handlers` (its service reads and changes tasks).
    """

    identifier = EXTENSION_ID

    def __init__(self, handlers: Any) -> None:
        self.handlers = handlers
        self.service = handlers.service

    def methods(self) -> list[MethodBinding]:
        """``tasks/get``, ``tasks/update``, ``tasks/cancel``, at 2026-07-28 only."""
        return [MethodBinding("tasks/get", TaskIdParams, self.get, PROTOCOL_VERSIONS),
                MethodBinding("tasks/update", UpdateParams, self.update, PROTOCOL_VERSIONS),
                MethodBinding("tasks/cancel", TaskIdParams, self.cancel, PROTOCOL_VERSIONS)]

    async def intercept_tool_call(self, params: CallToolRequestParams, ctx: Any, call_next: Any) -> Any:
        """run_task / verify_task of a declaring client: the tool's own result turned into a task."""
        result = await call_next(ctx)
        if params.name not in TASK_TOOLS or not declared(ctx) or not isinstance(result, types.CallToolResult):
            return result
        meta = result.structured_content or {}
        task_id = meta.get("taskId") if not result.is_error else None
        if not isinstance(task_id, str) or meta.get("idempotencyReplay") == "hit" and params.name == "verify_task":
            return result  # an error, an agent that cannot run (no task), or a finished replay
        if params.name == "verify_task" and meta.get("verifyId"):
            task_id = str(meta["verifyId"])
        return {"resultType": "task", **await self.task_object(task_id)}

    # --- the three methods ------------------------------------------------------------------
    async def _view(self, task_id: str) -> Any:
        """The task's view; MCPError -32602 when it cannot be read (unknown, damaged record), -32603
        with ``[PREFECT_UNAVAILABLE]`` when the Prefect API does not answer."""
        import httpx

        try:
            return await self.service.view(task_id)
        except TianshuError as err:
            if err.code.value == "TASK_NOT_FOUND":
                raise _not_found(task_id) from None
            code = INTERNAL_ERROR if err.code.value in ("PREFECT_UNAVAILABLE", "INTERNAL") else INVALID_PARAMS
            raise MCPError(code=code, message=f"[{err.code.value}] {err.message}") from None
        except httpx.HTTPError as exc:
            raise MCPError(code=INTERNAL_ERROR, message=_("[PREFECT_UNAVAILABLE] the Prefect API did not answer "
                                                          "({error}); try again shortly").format(
                error=type(exc).__name__)) from None

    async def get(self, ctx: Any, params: TaskIdParams) -> dict[str, Any]:
        """``tasks/get``: the task's current :func:`task_object`."""
        _require(ctx)
        return await self.task_object(params.task_id)

    async def update(self, ctx: Any, params: UpdateParams) -> dict[str, Any]:
        """``tasks/update``: an accepted answer to the open question continues the task."""
        _require(ctx)
        view = await self._view(params.task_id)
        key = question_key(view.task)
        response = params.input_responses.get(key) if view.status == "needs_user" and key else None
        if not isinstance(response, dict) or response.get("action") != "accept":
            return {}  # not outstanding, declined or dismissed: nothing changes (spec: ignore)
        content = response.get("content") if isinstance(response.get("content"), dict) else {}
        message = content.get("message")
        if not isinstance(message, str) or not message.strip():
            raise MCPError(code=INVALID_PARAMS, message=_("inputResponses.{key}.content.message must be a non-empty "
                                                          "string (the answer to the agent's question)").format(key=key))
        from .format import validate_arguments
        from .resume import continue_task
        from .tools import TOOLS_BY_NAME

        try:  # the answer meets manage_task(action="continue")'s rules: no NUL, at most its length
            validate_arguments("manage_task", TOOLS_BY_NAME["manage_task"].input_schema,
                               {"taskId": params.task_id, "action": "continue", "message": message})
        except TianshuError as err:
            raise MCPError(code=INVALID_PARAMS, message=f"[{err.code.value}] {err.message}") from None

        try:
            await continue_task(self.service, params.task_id, message)
        except TianshuError as err:
            if err.code.value != "INVALID_STATE":  # answered meanwhile (another client): spec says ignore
                raise MCPError(code=INVALID_PARAMS, message=f"[{err.code.value}] {err.message}") from None
        return {}

    async def cancel(self, ctx: Any, params: TaskIdParams) -> dict[str, Any]:
        """``tasks/cancel``: ``manage_task(action="cancel")``; a final task stays as it is."""
        _require(ctx)
        view = await self._view(params.task_id)
        if view.status in TERMINAL or params.task_id.startswith("vfy_"):
            return {}  # a verification is not cancellable (as with manage_task): it runs to its verdict
        await self.service.cancel(params.task_id, _("cancelled through tasks/cancel"))
        return {}

    # --- the Task object -------------------------------------------------------------------
    async def task_object(self, task_id: str) -> dict[str, Any]:
        """The extension's ``DetailedTask`` for ``task_id`` (shape: SEP-2663 ``Task`` + status payload).

        Raises:
            MCPError: -32602 for an unknown id.
        """
        view = await self._view(task_id)
        task = view.task
        status = view.status
        if status == "needs_user" and not question_key(task):
            # the record was read before the run's state: the flow wrote its question and paused
            # in between, so the question is in the record now (else the task is still working)
            task = self.service.store.read(task_id) or task
            status = status if question_key(task) else "running"
        created = _text(task.get("createdAt")) or utc_now()
        obj: dict[str, Any] = {
            "taskId": task_id,
            "createdAt": created,
            "lastUpdatedAt": _text(task.get("updatedAt")) or created,
            "ttlMs": None,
            "pollIntervalMs": POLL_INTERVAL_MS,
        }
        message = _text(task.get("lastMessage"))
        if status in WORKING:
            # a record's message may still be its queue note while the run already works on it
            stale = status != "queued" and message.startswith("queued")
            obj.update(status="working", statusMessage=status if stale or not message else message)
        elif status == "needs_user":
            key = str(question_key(task))
            question = _text(task.get("pendingQuestion")) or message or _("the agent asks for an answer")
            obj.update(status="input_required", statusMessage=question, inputRequests={key: {
                "method": "elicitation/create",
                "params": {"mode": "form", "message": question, "requestedSchema": {
                    "type": "object", "required": ["message"],
                    "properties": {"message": {"type": "string", "description": _("your answer to the agent")}}}},
            }})
        elif status == "cancelled":
            obj.update(status="cancelled", statusMessage=message or "cancelled")
        else:
            obj.update(status="completed", statusMessage=message or status, result=_dump(await self.final_result(view)))
        return obj

    async def final_result(self, view: Any) -> types.CallToolResult:
        """The ``CallToolResult`` of a finished task, as the classic contract shows it at that stop
        (through :func:`.outputs.fit_output`: a damaged field is left out and named)."""
        from .outputs import fit_output

        task_id = view.task["taskId"]
        if task_id.startswith("vfy_"):
            target_id = view.task.get("targetTaskId")
            target = self.service.store.read(target_id) if isinstance(target_id, str) and target_id else None
            return fit_output("verify_task", await self.handlers.verify_result(view, target))
        return fit_output("query_task", await self.handlers.query_task({"taskId": task_id}))


def question_key(task: dict[str, Any]) -> str | None:
    """The ``inputRequests`` key of a task's open question: its ``needsUserKey``, or
    ``needs-user`` for a (hand-edited) record that has a question but lost its key; None: no question."""
    key = task.get("needsUserKey")
    if isinstance(key, str) and key:
        return key
    return "needs-user" if _text(task.get("pendingQuestion")) else None


def _text(value: Any) -> str:
    """A record's string field, or "" for anything else (a damaged record never breaks the Task shape)."""
    return value if isinstance(value, str) else ""


def apply_extension(server: Server[Any], extension: Extension, call_tool: Any) -> None:
    """Install ``extension`` on the low-level ``server`` as ``MCPServer(extensions=[...])`` would.

    Registers its methods (version-gated: another revision gets METHOD_NOT_FOUND), folds its
    ``tools/call`` interceptor around ``call_tool`` and advertises it under
    ``capabilities.extensions``.
    """
    for method in extension.methods():
        server.add_request_handler(method.method, method.params_type, _gated(method))
    server.add_request_handler("tools/call", CallToolRequestParams, compose_tool_call_handler([extension], call_tool))
    server.extensions[extension.identifier] = extension.settings()


def _gated(method: MethodBinding) -> Any:
    async def handler(ctx: Any, params: Any) -> Any:
        if method.protocol_versions is not None and ctx.protocol_version not in method.protocol_versions:
            raise MCPError(code=METHOD_NOT_FOUND, message="Method not found", data=method.method)
        return await method.handler(ctx, params)

    return handler
