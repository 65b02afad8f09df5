"""A requester of the MCP tasks extension for tests, on the Python SDK's client extension interface.

The Python SDK has no tasks extension of its own; this is the requester side of SEP-2663 as a
:class:`mcp.client.extension.ClientExtension`: it declares ``io.modelcontextprotocol/tasks`` on
every request, claims ``resultType: "task"`` results of ``tools/call`` and resolves them by polling
``tasks/get`` at the server's ``pollIntervalMs`` until the task is final, answering an
``input_required`` question with ``answer`` (when given) through ``tasks/update``.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Literal

import anyio
import mcp_types as types
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from pydantic import ConfigDict, Field, TypeAdapter

EXTENSION_ID = "io.modelcontextprotocol/tasks"
_ANY = TypeAdapter(dict[str, Any])


class CreatedTask(types.Result):
    """``CreateTaskResult``: the seed state of a task."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    result_type: Literal["task"] = Field("task", alias="resultType")
    task_id: str = Field(alias="taskId")
    status: str


async def tasks_request(session: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """Send ``tasks/get|update|cancel`` and return the raw result (raises MCPError)."""
    request = types.Request[dict[str, Any], str](method=method, params=params)  # type: ignore[arg-type]
    return await session.send_request(request, _ANY)


class TasksRequester(ClientExtension):
    """Declares the extension; resolves claimed tasks by polling (``answer``: reply to a question)."""

    identifier = EXTENSION_ID

    def __init__(self, answer: Callable[[dict[str, Any]], str | None] | None = None, timeout_s: float = 300) -> None:
        self.answer = answer
        self.timeout_s = timeout_s
        self.seen: list[dict[str, Any]] = []

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=self._resolve,
                            protocol_versions=frozenset({"2026-07-28"}))]

    async def _resolve(self, created: CreatedTask, ctx: ClaimContext) -> types.CallToolResult:
        deadline = time.monotonic() + self.timeout_s
        answered: set[str] = set()
        while True:
            task = await tasks_request(ctx.session, "tasks/get", {"taskId": created.task_id})
            self.seen.append(task)
            if task["status"] == "completed":
                return types.CallToolResult.model_validate(task["result"])
            if task["status"] in ("cancelled", "failed"):
                raise RuntimeError(f"task {created.task_id} ended {task['status']}: {task.get('statusMessage')}")
            if task["status"] == "input_required" and self.answer is not None:
                for key, req in task["inputRequests"].items():
                    reply = self.answer(req) if key not in answered else None
                    if reply is not None:
                        answered.add(key)
                        await tasks_request(ctx.session, "tasks/update", {"taskId": created.task_id, "inputResponses": {
                            key: {"action": "accept", "content": {"message": reply}}}})
            if time.monotonic() > deadline:
                raise TimeoutError(f"task {created.task_id} still {task['status']} after {self.timeout_s} s")
            await anyio.sleep(min(task.get("pollIntervalMs", 1000), 1000) / 1000)
