"""The MCP stdio server: a thin protocol edge over :class:`.handlers.Handlers` (docs/architecture.md §7).

Built on the SDK's low-level ``Server`` rather than ``MCPServer``: our tools need hand-written
plain JSON Schemas and coded validation errors, while ``MCPServer`` derives schemas from Python
signatures (``anyOf`` with ``null`` for optionals) and reports pydantic's raw error dump.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from .. import __version__
from ..core.errors import ErrorCode, TianshuError
from ..core.i18n import _
from .format import clip, error_result, validate_arguments
from .handlers import Handlers
from .outputs import fit_output, output_schema
from .tasks_ext import TasksExtension, apply_extension
from .visual_tools import VisualHandlers
from .runtime import Runtime
from .taskops import TaskService
from .tools import TOOL_DEFS, TOOLS_BY_NAME
from .wire import ScreenedStdin, claim_stdin

log = logging.getLogger("tianshu_mcp")

INSTRUCTIONS = (
    "tianshu-mcp dispatches coding tasks to external agents and verifies the result objectively. "
    "run_task returns a taskId at once (the task is a Prefect flow run); then wait_task (or poll "
    "query_task every 5-10 s) until a stop point; read the report with query_info(type=\"report\"). "
    "A needs_user task is resumed with manage_task(action=\"continue\", message=...). A task blocked "
    "on visual acceptance waits for a person: prepare_visual_baseline, review, approve_visual_baseline. A client of "
    "protocol 2026-07-28 that declares the io.modelcontextprotocol/tasks extension gets run_task and verify_task as "
    "MCP tasks (tasks/get, tasks/update, tasks/cancel). Errors read "
    "'Error: [CODE] message'; every success ends with a ---tianshu-mcp-meta--- JSON block."
)


def tool_list() -> list[types.Tool]:
    """The wire tool list (order of docs/tools.md §1)."""
    return [
        types.Tool(
            name=t.name,
            title=t.name,
            description=t.description,
            input_schema=t.input_schema,
            output_schema=output_schema(t.name),
            annotations=types.ToolAnnotations(**{
                "title": t.name,
                "read_only_hint": t.capability == "read",
                "destructive_hint": t.destructive,
                "idempotent_hint": t.idempotent,
                "open_world_hint": t.open_world,
            }),
            _meta=t.meta(),
        )
        for t in TOOL_DEFS
    ]


def build_server(runtime: Runtime) -> tuple[Server[Any], TaskService]:
    """Assemble the low-level MCP server and its task service for ``runtime``."""
    service = TaskService(runtime)
    handlers = Handlers(service)
    visual = VisualHandlers(service)
    table = {"prepare_visual_baseline": visual.prepare_visual_baseline,
             "approve_visual_baseline": visual.approve_visual_baseline, **handlers.table()}

    async def on_list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tool_list())

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        name = params.name
        tool = TOOLS_BY_NAME.get(name)
        if tool is None:
            return error_result(TianshuError(ErrorCode.UNKNOWN_TOOL, _("tool {name} not found").format(name=clip(name, 64))))
        try:
            args = validate_arguments(name, tool.input_schema, params.arguments)
            return fit_output(name, await table[name](args, ctx))  # a damaged record never breaks the schema
        except TianshuError as err:
            return error_result(err)
        except httpx.TransportError as exc:
            runtime.invalidate()  # the service was stopped or killed: the next call reconnects
            return error_result(TianshuError(ErrorCode.PREFECT_UNAVAILABLE,
                                             _("the Prefect API at {url} is unreachable ({error}); "
                                               "reconnecting, try again in a few seconds").format(url=runtime.api_url, error=exc)))
        except Exception as exc:  # noqa: BLE001 - an escaping exception becomes a coded error
            log.exception("tool %s failed", name)
            return error_result(TianshuError(ErrorCode.INTERNAL, f"{type(exc).__name__}: {exc}"))

    @contextlib.asynccontextmanager
    async def lifespan(_: Server[Any]) -> AsyncIterator[dict[str, Any]]:
        runtime.start_background()
        try:
            yield {}
        finally:
            with anyio.CancelScope(shield=True):
                await shutdown(runtime, service)

    server: Server[Any] = Server(
        "tianshu-mcp",
        version=__version__,
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )
    apply_extension(server, TasksExtension(handlers), on_call_tool)  # run_task/verify_task as MCP tasks
    return server, service


async def shutdown(runtime: Runtime, service: TaskService) -> None:
    """Close the Prefect client and leave: a client's exit never touches a task. In in-process
    hosting the runtime interrupts every active task of the home (docs/agents-tasks.md §2.9)."""
    try:
        await service.close()
    finally:
        await anyio.to_thread.run_sync(runtime.stop)


async def serve_stdio(runtime: Runtime) -> None:
    """Serve MCP over stdin/stdout until the client closes stdin.

    While serving, fd 1 belongs to JSON-RPC: the SDK diverts fd 1 to stderr for everyone else,
    and ``sys.stdout`` is pointed at stderr so a stray ``print`` can never reach the wire, not
    even when flushed at exit (docs/architecture.md §6).
    """
    server, _ = build_server(runtime)
    stdin = ScreenedStdin(claim_stdin())
    async with stdio_server(stdin=stdin) as (read_stream, write_stream):  # type: ignore[arg-type]
        stdin.write_stream = write_stream
        real_stdout = sys.stdout
        sys.stdout = sys.stderr
        try:
            log.info("tianshu-mcp connected (stdio). data home: %s, tools: %d, Prefect UI: %s",
                     runtime.home, len(TOOL_DEFS),
                     runtime.ui_url or "not yet (the home's service is starting; the \"Prefect ready\" line names it)")
            signalled = False
            async with anyio.create_task_group() as group:

                async def on_signals() -> None:
                    # SIGTERM/SIGINT (a host stopping us) = the same orderly shutdown as closing stdin
                    nonlocal signalled
                    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                        async for signum in signals:
                            log.info("signal %s: shutting down", signum)
                            signalled = True
                            group.cancel_scope.cancel()
                            return

                group.start_soon(on_signals)
                await server.run(read_stream, write_stream, server.create_initialization_options())
                group.cancel_scope.cancel()
            if signalled:
                # the shutdown (lifespan) is done; the transport's blocking stdin reader cannot be
                # interrupted while the host keeps stdin open, so leave without waiting for it
                logging.shutdown()
                os._exit(0)
        finally:
            sys.stdout = real_stdout
