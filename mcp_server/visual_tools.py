"""The two visual tools (docs/tools.md §1, §1.2; docs/visual.md §7): ``prepare_visual_baseline`` and
``approve_visual_baseline``. Both are strict (unknown keys are refused) and both need the host's
approval: automated repair never approves a baseline.

The work is :mod:`tianshu_mcp.acceptance.visual.baselines`; this module validates the caller's
input, resolves the task of an approval and renders the result (pretty JSON + the meta block).
A :class:`~tianshu_mcp.acceptance.visual.errors.VisualError` reaches the host as
``Error: [CODE] message`` with the visual package's code.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import mcp_types as types

from ..acceptance.visual.errors import VisualError
from ..core.errors import ErrorCode, TianshuError
from ..core.i18n import _
from ..core.paths import check_project_path
from .format import MAX_ERROR_CHARS, clip, ok_result
from .taskops import TaskService

def visual_error(exc: VisualError) -> types.CallToolResult:
    """``Error: [CODE] message`` for a visual failure (same shape as every tool error)."""
    message = clip(exc.message, MAX_ERROR_CHARS)
    return types.CallToolResult(content=[types.TextContent(text=f"Error: [{exc.code}] {message}")],
                                structured_content={"error": {"code": exc.code, "message": message}}, is_error=True)


class VisualHandlers:
    """Handlers of the visual tools; ``service`` gives the data home and the task views."""

    def __init__(self, service: TaskService) -> None:
        self.service = service
        self.home = service.runtime.home

    async def prepare_visual_baseline(self, args: dict[str, Any], ctx: Any = None) -> types.CallToolResult:
        """docs/visual.md §7 Prepare."""
        from ..acceptance.visual.baselines import prepare  # Playwright, NumPy: loaded on first use, not at start

        project = check_project_path(args["projectPath"], self.home)
        try:
            out = await anyio.to_thread.run_sync(lambda: prepare(
                self.home, project.norm, case_ids=args.get("caseIds"), viewport_ids=args.get("viewportIds"),
                imports=args.get("imports") or ()))
        except VisualError as exc:
            return visual_error(exc)
        return ok_result(json.dumps(out, indent=2, ensure_ascii=False) +
                         "\n" + _("next: review preview.html, then approve_visual_baseline(candidateId, expectedDigest=digest, approvalNote)"),
                         {"ok": True, **out})

    async def approve_visual_baseline(self, args: dict[str, Any], ctx: Any = None) -> types.CallToolResult:
        """docs/visual.md §7 Approve; a ``taskId`` must name a ``needs_attention`` task of the same
        project."""
        from ..acceptance.visual.baselines import TaskGate, approve

        gate = None
        if args.get("taskId"):
            view = await self.service.view(args["taskId"])  # TASK_NOT_FOUND when unknown
            blocked = view.status == "needs_attention"
            gate = TaskGate(args["taskId"], self.service.store.dir(args["taskId"]), str(view.task.get("projectPath") or ""),
                            lambda: blocked)
            if not view.task.get("projectPath"):
                raise TianshuError(ErrorCode.INVALID_STATE, _("task {taskId} has no project; nothing to approve for it").format(
                    taskId=args["taskId"]))
        try:
            out = await anyio.to_thread.run_sync(lambda: approve(self.home, args["candidateId"], args["expectedDigest"],
                                                                 args["approvalNote"], gate))
        except VisualError as exc:
            return visual_error(exc)
        if gate is not None:
            self.service.store.update(gate.task_id, pendingVisualVerification=True,
                                      lastMessage=_("baseline approved; rework the task to re-verify it"))
            self.service.store.event(gate.task_id, "note", "needs_attention",
                                     f"visual baseline approved ({len(out['targets'])} target(s)); rework re-verifies first")
        return ok_result(json.dumps(out, indent=2, ensure_ascii=False), {"ok": True, **out})
