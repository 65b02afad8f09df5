#!/usr/bin/env python3
"""A faithful fake ACP coding agent (an LLM cannot run here), written with the same
``agent-client-protocol`` package real Python agents use, speaking ACP on stdin/stdout.

It works on the fixture project of ``fixture_project.py`` like ``scripted_agent.py`` does: a
turn streams a message and a plan, starts an ``edit`` tool call on ``calc.py``, asks
``session/request_permission`` for it and, when allowed, makes the wrong fix unless some prompt
of the session names ``test_add_negative`` (then the right one). Sessions remember their prompts
(also in ``$FAKE_ACP_STATE``, so ``session/load`` works in a new process). ``$FAKE_ACP_TRACE``
receives one JSON line per ``initialize`` / ``new`` / ``load`` / ``prompt`` / ``cancel``
(``{"event", "pid", "session", "n", "text"}``). ``$FAKE_ACP_MODE``:

``normal``; ``outside`` (the edit targets a file outside the project); ``execute`` (asks to run
a command: a tool call with no location); ``hang`` (streams, then waits for ``session/cancel``
and ends the turn ``cancelled``); ``ignore-cancel`` (waits forever, even after a cancel);
``refuse`` (stop reason ``refusal``); ``crash`` (exits 3 mid-turn); ``init-fail``
(``initialize`` answers an error); ``auth`` (``session/new`` answers ``auth_required``);
``silent-init`` (never answers ``initialize``); ``no-load`` (does not offer ``loadSession``);
``max-tokens`` / ``max-turn-requests`` (a normal turn that ends on that stop reason instead of
``end_turn``: the edit is made, the turn is cut short).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import acp
from acp.schema import AgentCapabilities, PermissionOption, ToolCallLocation

from fixture_project import RIGHT_FIX as RIGHT, WRONG_FIX as WRONG  # noqa: E402 - beside this script
MODE = os.environ.get("FAKE_ACP_MODE", "normal")


def trace(**row: Any) -> None:
    path = os.environ.get("FAKE_ACP_TRACE")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"pid": os.getpid(), **row}) + "\n")


def load_state() -> dict[str, Any]:
    path = os.environ.get("FAKE_ACP_STATE")
    try:
        return json.loads(Path(path).read_text()) if path else {}
    except (OSError, ValueError):
        return {}


def save_state(state: dict[str, Any]) -> None:
    path = os.environ.get("FAKE_ACP_STATE")
    if path:
        Path(path).write_text(json.dumps(state))


class FakeAgent:
    """The agent side (``acp.Agent``)."""

    def __init__(self) -> None:
        self.conn: Any = None
        self.sessions: dict[str, dict[str, Any]] = load_state()
        self.cancelled: dict[str, asyncio.Event] = {}

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None,
                         **kwargs: Any) -> Any:
        trace(event="initialize")
        if MODE == "init-fail":
            raise acp.RequestError.internal_error({"reason": "the model backend is down"})
        if MODE == "silent-init":
            await asyncio.sleep(3600)
        return acp.InitializeResponse(protocol_version=protocol_version,
                                      agent_capabilities=AgentCapabilities(load_session=MODE != "no-load"))

    async def new_session(self, cwd: str, mcp_servers: Any = None, **kwargs: Any) -> Any:
        if MODE == "auth":
            raise acp.RequestError.auth_required({"reason": "run `fake-agent login` first"})
        sid = uuid.uuid4().hex
        self.sessions[sid] = {"cwd": cwd, "prompts": []}
        save_state(self.sessions)
        trace(event="new", session=sid)
        return acp.NewSessionResponse(session_id=sid)

    async def load_session(self, cwd: str, session_id: str, mcp_servers: Any = None, **kwargs: Any) -> Any:
        if session_id not in self.sessions:
            raise acp.RequestError.invalid_params({"sessionId": "unknown session"})
        trace(event="load", session=session_id)
        return acp.LoadSessionResponse()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        trace(event="cancel", session=session_id)
        if MODE != "ignore-cancel":
            self.cancelled.setdefault(session_id, asyncio.Event()).set()

    async def say(self, sid: str, text: str) -> None:
        await self.conn.session_update(session_id=sid, update=acp.update_agent_message_text(text))

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> Any:
        session = self.sessions[session_id]
        text = "".join(getattr(block, "text", "") for block in prompt)
        session["prompts"].append(text)
        save_state(self.sessions)
        trace(event="prompt", session=session_id, n=len(session["prompts"]), text=text[:4000])
        stop = self.cancelled.setdefault(session_id, asyncio.Event())
        stop.clear()
        await self.say(session_id, f"Reading the project (prompt {len(session['prompts'])} of this session).\n")
        if MODE == "refuse":
            return acp.PromptResponse(stop_reason="refusal")
        if MODE == "crash":
            os._exit(3)
        if MODE in ("hang", "ignore-cancel"):
            await self.say(session_id, "Thinking very hard...\n")
            if MODE == "hang":
                await stop.wait()
                return acp.PromptResponse(stop_reason="cancelled")
            await asyncio.sleep(3600)
        target = Path(session["cwd"]) / "calc.py"
        if MODE == "outside":
            target = Path(os.environ.get("FAKE_ACP_OUTSIDE", "/tmp/fake-acp-outside.txt"))
        await self.conn.session_update(session_id=session_id, update=acp.update_plan(
            [acp.plan_entry("Fix add() in calc.py", status="in_progress")]))
        kind = "execute" if MODE == "execute" else "edit"
        call = acp.start_tool_call("call-1", f"Edit {target.name}" if kind == "edit" else "Run pytest", kind=kind,
                                   status="pending",
                                   locations=[ToolCallLocation(path=str(target))] if kind == "edit" else None)
        await self.conn.session_update(session_id=session_id, update=call)
        options = [PermissionOption(option_id="allow", name="Allow", kind="allow_once"),
                   PermissionOption(option_id="reject", name="Reject", kind="reject_once")]
        answer = await self.conn.request_permission(session_id=session_id, tool_call=acp.update_tool_call(
            "call-1", title=call.title, kind=kind, locations=call.locations), options=options)
        outcome = answer.outcome
        if outcome.outcome == "cancelled" or stop.is_set():
            trace(event="permission", session=session_id, outcome="cancelled")
            return acp.PromptResponse(stop_reason="cancelled")
        trace(event="permission", session=session_id, outcome=outcome.option_id)
        if outcome.option_id != "allow":
            await self.say(session_id, "Permission denied: nothing changed.\n")
            return acp.PromptResponse(stop_reason="end_turn")
        if kind == "edit":
            right = any("test_add_negative" in p for p in session["prompts"])
            target.write_text(RIGHT if right else WRONG)
        await self.conn.session_update(session_id=session_id, update=acp.update_tool_call("call-1", status="completed"))
        await self.say(session_id, "Done: add() fixed.\n")
        cut = {"max-tokens": "max_tokens", "max-turn-requests": "max_turn_requests"}.get(MODE)
        return acp.PromptResponse(stop_reason=cut or "end_turn")


async def main() -> None:
    await acp.run_agent(FakeAgent())


if __name__ == "__main__":
    asyncio.run(main())
    sys.exit(0)
