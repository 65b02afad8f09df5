"""The stdio wire: every malformed JSON-RPC request that carries an id gets an answer.

The SDK's stdio transport validates each line and, when that fails, hands the session an
exception without the line: the caller's request id is lost and the caller waits for an answer
that never comes (observed: 13 of 32 malformed requests with an id got none; a ``tools/call``
whose arguments hold an unpaired surrogate such as ``"\\ud800"`` — valid JSON, but not
something pydantic's JSON parser accepts — hung its client). :class:`ScreenedStdin` reads the
lines in front of the SDK and answers such a line itself:

* not JSON, but an ``"id"`` can be recovered → JSON-RPC ``-32700`` (parse error) for that id;
* JSON, a request (``id`` + ``method``) the SDK cannot validate → ``-32600`` (invalid request);
* a ``tools/call`` whose arguments hold an unpaired surrogate → the tool's own error result,
  ``INVALID_ARGUMENT`` naming the field (the same answer as for a NUL character);
* a request whose ``id`` is neither a string nor an integer (``null``, ``1.5``, ``true``, a string
  that is not valid Unicode such as ``"\\ud800"``, which killed the SDK's writer: the SDK
  reads it as a notification and answers nothing) → ``-32600`` with id ``null``, as JSON-RPC 2.0
  prescribes when the id cannot be read;
* a batch (a JSON array; batching left MCP in protocol revision 2025-06-18) → ``-32600`` for each
  request in it that has an id, or one with id ``null``.

Lines without an id (notifications, garbage) go on to the SDK, which drops them as before.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncIterator
from io import TextIOWrapper
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

from ..core.errors import ErrorCode, TianshuError
from .format import clip, error_result, impossible_strings

_TOKEN_RE = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]]')
_VALUE_RE = re.compile(r'\s*:\s*("(?:[^"\\]|\\.){0,4096}"|-?\d{1,64}(?![\d.eE]))')
_NO_ID: Any = object()


def recover_id(text: str) -> Any:
    """The top-level ``"id"`` of a JSON object that failed to parse (its string or integer value,
    None when it has another type), or :data:`_NO_ID`. Only keys at depth 1 count: an ``"id"``
    inside ``params`` is not the request's (breaker finding: a nested id was answered instead)."""
    depth = 0
    for m in _TOKEN_RE.finditer(text):
        tok = m.group()
        if tok in "{[":
            depth += 1
        elif tok in "}]":
            depth -= 1
        elif depth == 1 and tok == '"id"':
            v = _VALUE_RE.match(text, m.end())
            if v is None:
                return None  # an id that is neither a string nor an integer
            try:
                value = json.loads(v.group(1))
            except ValueError:
                return None
            return value if _valid_id(value) else None
    return _NO_ID


def claim_stdin() -> Any:
    """Take fd 0 for the wire and point fd 0 at the null device (children read EOF, as with
    the SDK's own claim); return an async text file over the wire's duplicate."""
    wire = os.dup(0)
    os.set_inheritable(wire, False)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return anyio.wrap_file(TextIOWrapper(os.fdopen(wire, "rb", buffering=0), encoding="utf-8", errors="replace"))


class ScreenedStdin:
    """Async lines of ``source`` with malformed requests answered on ``write_stream`` (set it
    once the transport is open; until then nothing is answered, only passed on)."""

    def __init__(self, source: Any) -> None:
        self.source = source
        self.write_stream: Any = None

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        async for line in self.source:
            try:
                reply = screen(line)
            except RecursionError:  # nested deeper than Python's parser goes: never crash the server
                rid = recover_id(line)
                if rid is _NO_ID:
                    continue
                reply = _error(rid, -32600, "invalid request: nested too deeply")
            if reply is not None and self.write_stream is not None:
                for message in reply if isinstance(reply, list) else [reply]:
                    await self.write_stream.send(SessionMessage(message))
                continue
            yield line


MAX_METHOD_CHARS = 256
BATCH_REFUSED = ("batch requests are not supported (JSON-RPC batching left MCP in protocol revision "
                 "2025-06-18); send each request as its own message")


def screen(line: str) -> Any:
    """The answer to a malformed request on ``line`` (one JSON-RPC message, or a list of them
    for a batch), or None when the SDK should have the line."""
    stripped = line.strip()
    if not stripped:
        return None
    try:
        message = types.jsonrpc_message_adapter.validate_json(stripped, by_name=False)
        if isinstance(message, types.JSONRPCRequest) and len(message.method) > MAX_METHOD_CHARS:
            # no method is this long; the SDK's "method not found" would echo all of it
            return _error(message.id, -32601, f"method not found: {clip(message.method, 64)}")
        if not isinstance(message, types.JSONRPCNotification) or '"id"' not in stripped:
            return None
    except Exception:  # noqa: BLE001 - any validation failure is screened below
        pass
    try:
        obj = json.loads(stripped)
    except ValueError as exc:
        rid = recover_id(stripped)
        if rid is _NO_ID:
            return None
        return _error(rid, -32700, f"parse error: {clip(str(exc))}")
    if isinstance(obj, list):
        ids = [e["id"] for e in obj if isinstance(e, dict) and "method" in e and _valid_id(e.get("id"))]
        return [_error(i, -32600, BATCH_REFUSED) for i in dict.fromkeys(ids)] or _error(None, -32600, BATCH_REFUSED)
    if not isinstance(obj, dict) or "method" not in obj or "id" not in obj:
        return None
    rid = obj["id"]
    if not _valid_id(rid):
        return _error(None, -32600, f"invalid request: the id must be a string or an integer, got {clip(json.dumps(rid), 40)}")
    params = obj.get("params")
    if obj.get("method") == "tools/call" and isinstance(params, dict) and isinstance(params.get("name"), str):
        problems = impossible_strings(params.get("arguments"))
        if problems:
            err = TianshuError(ErrorCode.INVALID_ARGUMENT,
                               f"invalid arguments for {_printable(clip(params['name'], 64))}: " + "; ".join(problems[:10]))
            result = error_result(err).model_dump(by_alias=True, exclude_none=True, mode="json")
            return types.JSONRPCResponse(jsonrpc="2.0", id=rid, result=result)
    problems = impossible_strings(obj)
    why = "; ".join(problems[:5]) if problems else "not a valid JSON-RPC 2.0 request for this server"
    return _error(rid, -32600, f"invalid request: {why}")


def _valid_id(rid: Any) -> bool:
    """A JSON-RPC id we can answer with: an integer, or a string that is valid Unicode (an id such
    as ``"\\ud800"`` killed the SDK's writer when echoed)."""
    if isinstance(rid, str):
        return not impossible_strings(rid)
    return isinstance(rid, int) and not isinstance(rid, bool)


def _printable(text: str) -> str:
    """``text`` with what cannot be written as UTF-8 (lone surrogates) replaced."""
    return text.encode("utf-8", "replace").decode("utf-8")


def _error(rid: Any, code: int, message: str) -> Any:
    return types.JSONRPCError(jsonrpc="2.0", id=rid, error=types.ErrorData(code=code, message=message))
