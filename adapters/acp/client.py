"""Our side of an ACP connection: what we do when the agent streams updates or asks permission.

:class:`TianshuClient` is the ``acp.Client`` the :mod:`.acp` driver connects with. It runs on the
session's protocol thread: it writes the round's log and queues events for the caller's thread;
it never raises into the protocol (a bad update is logged and skipped).
"""

from __future__ import annotations

import logging
import queue
import threading
from pathlib import Path
from typing import Any

from ...core.i18n import _
from .policy import AcpPermissions, PermissionAsk, decide
from ..answers import Answers
from ..round import append_log

log = logging.getLogger("tianshu_mcp")

EDIT_KINDS = frozenset({"edit", "delete", "move"})
"""Tool kinds that change files: the first one of a round is ``file_modification_started``."""


class TianshuClient:
    """The client half of one ACP session (see the module doc).

    Attributes:
        permissions: the profile's policy.
        project: the project path (what "inside the project" means).
        answers: the user's earlier answers (:class:`~tianshu_mcp.adapters.answers.Answers`).
        log_file: the current round's log (set per round by the driver).
        events: ``(event, detail, data)`` waiting for the caller's thread.
        asked: the permission request left to the user in this round, or None.
    """

    def __init__(self, permissions: AcpPermissions, project: str, answers: Answers) -> None:
        self.permissions, self.project, self.answers = permissions, project, answers
        self.log_file: Path | None = None
        self.events: queue.Queue[tuple[str, str, dict[str, Any]]] = queue.Queue()
        self.asked: PermissionAsk | None = None
        self.round = 0
        self._text = ""
        self._kind = ""
        self._edit_sent = False
        self._calls_seen: set[Any] = set()
        self._lock = threading.Lock()

    # -- log ---------------------------------------------------------------------------------
    def begin_round(self, rnd: int) -> None:
        """Reset what is per round (the question, the first-edit event)."""
        self.round, self.asked, self._edit_sent = rnd, None, False

    def write_log(self, line: str) -> None:
        """Append one line to the round's log (thread-safe)."""
        if self.log_file is None:
            return
        with self._lock:
            append_log(self.log_file, line + "\n")

    def _stream(self, kind: str, text: str) -> None:
        """Streamed message/thought text: whole lines go to the log as ``[<kind>] …``."""
        if kind != self._kind:
            self.flush()
            self._kind = kind
        self._text += text
        *lines, self._text = self._text.split("\n")
        for line in lines:
            self.write_log(f"[{kind}] {line}")

    def flush(self) -> None:
        """Write what is left of a streamed line."""
        if self._text:
            self.write_log(f"[{self._kind}] {self._text}")
        self._text = ""

    def _event(self, name: str, detail: str, data: dict[str, Any] | None = None) -> None:
        self.events.put((name, detail, {"round": self.round, **(data or {})}))

    # -- acp.Client ----------------------------------------------------------------------------
    def on_connect(self, conn: Any) -> None:
        """Part of ``acp.Client``; nothing to keep."""
        del conn

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        """``session/update``: message, thought, tool call and plan updates → log lines and events."""
        del session_id, kwargs
        try:
            self._update(update)
        except Exception as exc:  # noqa: BLE001 - a strange update must not break the session
            log.warning("ACP update not understood: %s", exc)

    def _update(self, update: Any) -> None:
        kind = getattr(update, "session_update", "")
        if kind in ("agent_message_chunk", "agent_thought_chunk"):
            text = getattr(getattr(update, "content", None), "text", None)
            if isinstance(text, str):
                self._stream("agent" if kind == "agent_message_chunk" else "thought", text)
            return
        self.flush()
        if kind in ("tool_call", "tool_call_update"):
            paths = [loc.path for loc in (getattr(update, "locations", None) or [])]
            title = getattr(update, "title", None) or ""
            tool_kind = getattr(update, "kind", None) or ""
            status = getattr(update, "status", None) or ""
            where = f" {', '.join(paths)}" if paths else ""
            self.write_log(f"[tool] {title or update.tool_call_id} ({tool_kind or 'update'}) {status}{where}".rstrip())
            call_id = getattr(update, "tool_call_id", None)
            if kind == "tool_call" or call_id not in self._calls_seen:  # Gemini CLI sends updates only
                self._calls_seen.add(call_id)
                self._event("agent_tool_call", _("round {round}: {tool}").format(
                    round=self.round, tool=f"{title or tool_kind}{where}"), {"tool": tool_kind, "files": paths[:20]})
            if tool_kind in EDIT_KINDS and not self._edit_sent:
                self._edit_sent = True
                self._event("file_modification_started", _("round {round}: the agent started changing files ({files})")
                            .format(round=self.round, files=", ".join(paths[:5]) or title), {"files": paths[:20]})
        elif kind == "session_info_update":
            self._model_error(getattr(update, "field_meta", None))
        elif kind == "plan":
            entries = [f"[{e.status}] {e.content}" for e in (getattr(update, "entries", None) or [])]
            self.write_log("[plan] " + "; ".join(entries))
            self._event("progress", _("round {round}: plan: {plan}").format(round=self.round,
                                                                            plan="; ".join(entries)[:500]))

    def _model_error(self, meta: Any) -> None:
        """An agent's own report of a failed model call in a ``session_info_update``'s ``_meta``
        (codex-acp: ``{"codex": {"error": {"message": "Reconnecting... 1/5", "codexErrorInfo":
        {"…": {"httpStatusCode": 429}}, "additionalDetails": "…", "willRetry": true}}}``) → a
        ``[model-retry] HTTP <status>: …`` log line (read by the round's output watch, which ends a
        401/403/429 retry loop early) or ``[model-error] …`` when the agent will not retry."""
        error = ((meta or {}).get("codex") or {}).get("error") if isinstance(meta, dict) else None
        if not isinstance(error, dict):
            return
        info = error.get("codexErrorInfo")
        status = None
        if isinstance(info, dict):
            for value in info.values():
                if isinstance(value, dict) and isinstance(value.get("httpStatusCode"), int):
                    status = value["httpStatusCode"]
        words = " ".join(str(error.get(k)) for k in ("message", "additionalDetails") if error.get(k))
        prefix = "[model-retry]" if error.get("willRetry") else "[model-error]"
        self.write_log(f"{prefix} HTTP {status}: {words}" if status else f"{prefix} {words}")

    async def request_permission(self, options: list[Any], session_id: str, tool_call: Any, **kwargs: Any) -> Any:
        """``session/request_permission``: the user's earlier answer, else the profile's policy."""
        from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

        del session_id, kwargs
        self.flush()
        ask = PermissionAsk(title=getattr(tool_call, "title", None) or "", kind=getattr(tool_call, "kind", None) or "",
                            paths=tuple(loc.path for loc in (getattr(tool_call, "locations", None) or [])))
        earlier = self.answers.decided(ask.key)
        decision = ("allow" if earlier else "deny") if earlier is not None else decide(ask, self.permissions, self.project)
        self.write_log(f"[permission] {ask.title or ask.kind} ({', '.join(ask.paths) or 'no file'}) → "
                       + {"allow": "allowed", "deny": "denied", "ask": "left to the user"}[decision]
                       + (" (the user's answer)" if earlier is not None else ""))
        if decision == "ask":
            self.asked = ask
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        wanted = ("allow_once", "allow_always") if decision == "allow" else ("reject_once", "reject_always")
        for want in wanted:
            for option in options:
                if getattr(option, "kind", None) == want:
                    return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=option.option_id))
        return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
