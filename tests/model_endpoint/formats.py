"""The four wire formats of the scripted model endpoint: how each reads a request (tools offered,
turns taken, conversation text) and writes an answer (streamed or whole) or an error, in the
provider's own shapes: Anthropic Messages, OpenAI Responses, OpenAI Chat Completions and Gemini
generateContent.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from .plan import Call, Tool, json_for_schema

USAGE = {"input": 1200, "output": 80}
"""Token figures every answer reports (input, output)."""


@dataclass
class Answer:
    """What to say: a tool call, or text."""

    call: Call | None = None
    text: str = ""


def _text_of(value: Any) -> str:
    """Every string inside a JSON value, joined (the conversation's text, to match plans on)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return "\n".join(_text_of(v) for v in value.values())
    if isinstance(value, list):
        return "\n".join(_text_of(v) for v in value)
    return ""


def _since_prompt(items: list[dict[str, Any]], is_prompt: Callable[[dict[str, Any]], bool],
                  is_turn: Callable[[dict[str, Any]], bool]) -> int:
    """The model's turns since the last prompt of the user: a CLI starts a conversation per round,
    an ACP agent continues its session, and a rework round's brief is then a new user message in
    the same history."""
    start = 0
    for i, item in enumerate(items):
        if is_prompt(item):
            start = i + 1
    return sum(1 for item in items[start:] if is_turn(item))


def _props(schema: Any) -> dict[str, Any]:
    return (schema or {}).get("properties") or {} if isinstance(schema, dict) else {}


class Format:
    """One wire format. Subclasses read requests and write answers."""

    name = ""

    def tools(self, body: dict[str, Any]) -> list[Tool]:
        raise NotImplementedError

    def turn(self, body: dict[str, Any]) -> int:
        raise NotImplementedError

    def conversation(self, body: dict[str, Any]) -> str:
        return _text_of(body.get("messages") or body.get("input") or body.get("contents") or "")

    def system(self, body: dict[str, Any]) -> str:
        return _text_of(body.get("system") or body.get("instructions") or body.get("systemInstruction") or "")

    def json_schema(self, body: dict[str, Any]) -> Any:
        """The schema of a structured answer the request asks for, or None."""
        return None

    def streaming(self, path: str, body: dict[str, Any]) -> bool:
        return bool(body.get("stream"))

    def error(self, status: int) -> dict[str, Any]:
        raise NotImplementedError

    def whole(self, answer: Answer, model: str) -> dict[str, Any]:
        raise NotImplementedError

    def stream(self, answer: Answer, model: str) -> Iterator[bytes]:
        raise NotImplementedError


def sse(event: str | None, data: Any) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


class Anthropic(Format):
    """POST /v1/messages (Claude Code, claude-agent-acp)."""

    name = "anthropic"

    def tools(self, body: dict[str, Any]) -> list[Tool]:
        return [Tool(t.get("name", ""), _props(t.get("input_schema"))) for t in body.get("tools") or []
                if isinstance(t, dict)]

    def turn(self, body: dict[str, Any]) -> int:
        def prompt(m: dict[str, Any]) -> bool:
            content = m.get("content")
            if isinstance(content, str):
                return True
            blocks = [b for b in content or [] if isinstance(b, dict)]
            return not any(b.get("type") == "tool_result" for b in blocks) and any(
                b.get("type") == "text" and not str(b.get("text", "")).lstrip().startswith("<system-reminder>")
                for b in blocks)

        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        return _since_prompt(messages, lambda m: m.get("role") == "user" and prompt(m),
                             lambda m: m.get("role") == "assistant")

    def error(self, status: int) -> dict[str, Any]:
        kind = {401: "authentication_error", 403: "permission_error", 429: "rate_limit_error"}.get(status, "api_error")
        message = {401: "invalid x-api-key", 403: "Your API key does not have permission to use the specified resource.",
                   429: "Number of request tokens has exceeded your per-minute rate limit"}.get(status, "Internal server error")
        return {"type": "error", "error": {"type": kind, "message": message}}

    def _blocks(self, answer: Answer) -> list[dict[str, Any]]:
        if answer.call:
            return [{"type": "tool_use", "id": "toolu_" + uuid.uuid4().hex[:20], "name": answer.call.tool.name,
                     "input": answer.call.arguments}]
        return [{"type": "text", "text": answer.text}]

    def whole(self, answer: Answer, model: str) -> dict[str, Any]:
        return {"id": "msg_" + uuid.uuid4().hex[:20], "type": "message", "role": "assistant", "model": model,
                "content": self._blocks(answer), "stop_reason": "tool_use" if answer.call else "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": USAGE["input"], "output_tokens": USAGE["output"]}}

    def stream(self, answer: Answer, model: str) -> Iterator[bytes]:
        msg = self.whole(answer, model)
        start = dict(msg, content=[], stop_reason=None, usage={"input_tokens": USAGE["input"], "output_tokens": 1})
        yield sse("message_start", {"type": "message_start", "message": start})
        for i, block in enumerate(msg["content"]):
            if block["type"] == "text":
                yield sse("content_block_start", {"type": "content_block_start", "index": i,
                                                  "content_block": {"type": "text", "text": ""}})
                yield sse("content_block_delta", {"type": "content_block_delta", "index": i,
                                                  "delta": {"type": "text_delta", "text": block["text"]}})
            else:
                yield sse("content_block_start", {"type": "content_block_start", "index": i,
                                                  "content_block": dict(block, input={})})
                yield sse("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {
                    "type": "input_json_delta", "partial_json": json.dumps(block["input"])}})
            yield sse("content_block_stop", {"type": "content_block_stop", "index": i})
        yield sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": msg["stop_reason"],
                                                                       "stop_sequence": None},
                                    "usage": {"output_tokens": USAGE["output"]}})
        yield sse("message_stop", {"type": "message_stop"})


def openai_error(status: int) -> dict[str, Any]:
    if status == 401:
        return {"error": {"message": "Incorrect API key provided: sk-test. You can find your API key at "
                          "https://platform.openai.com/account/api-keys.", "type": "invalid_request_error",
                          "param": None, "code": "invalid_api_key"}}
    if status == 429:
        return {"error": {"message": "Rate limit reached for requests. Please try again in 20s.",
                          "type": "requests", "param": None, "code": "rate_limit_exceeded"}}
    if status == 403:
        return {"error": {"message": "You are not allowed to sample from this model", "type": "invalid_request_error",
                          "param": None, "code": "model_not_allowed"}}
    return {"error": {"message": "The server had an error while processing your request.", "type": "server_error",
                      "param": None, "code": None}}


class Responses(Format):
    """POST /v1/responses (Codex, codex-acp)."""

    name = "responses"

    def tools(self, body: dict[str, Any]) -> list[Tool]:
        if self._guardian(body):
            return []  # a structured side call: answered with JSON, never with the plan's edit
        out = []
        for t in body.get("tools") or []:
            if not isinstance(t, dict):
                continue
            if t.get("type") == "custom":
                out.append(Tool(t.get("name", ""), {}, "custom"))
            elif t.get("type") == "function":
                out.append(Tool(t.get("name", ""), _props(t.get("parameters"))))
            elif t.get("type") == "local_shell":
                out.append(Tool("local_shell", {"command": {"type": "array"}}, "local_shell"))
        return out

    def turn(self, body: dict[str, Any]) -> int:
        items = body.get("input")
        if not isinstance(items, list):
            return 0
        return _since_prompt([it for it in items if isinstance(it, dict)],
                             lambda it: it.get("type", "message") == "message" and it.get("role") == "user",
                             lambda it: it.get("type") in ("function_call", "custom_tool_call", "local_shell_call")
                             or (it.get("type", "message") == "message" and it.get("role") == "assistant"))

    def json_schema(self, body: dict[str, Any]) -> Any:
        fmt = ((body.get("text") or {}).get("format") or {}) if isinstance(body.get("text"), dict) else {}
        return fmt.get("schema") if fmt.get("type") == "json_schema" else None

    def _guardian(self, body: dict[str, Any]) -> bool:
        """Codex's approval reviewer ("Guardian Review", codex-acp's default "agent" mode): a side
        request that offers read-only tools (exec_command, write_stdin, view_image) but asks for a
        JSON verdict {outcome: allow|deny, risk_level, ...}; it gets the schema's minimal JSON."""
        props = _props(self.json_schema(body))
        return "outcome" in props and "risk_level" in props

    def error(self, status: int) -> dict[str, Any]:
        return openai_error(status)

    def _item(self, answer: Answer) -> dict[str, Any]:
        call_id = "call_" + uuid.uuid4().hex[:20]
        if answer.call and answer.call.tool.kind == "custom":
            return {"type": "custom_tool_call", "id": "ctc_" + call_id, "call_id": call_id, "status": "completed",
                    "name": answer.call.tool.name, "input": answer.call.arguments}
        if answer.call and answer.call.tool.kind == "local_shell":
            args = answer.call.arguments
            return {"type": "local_shell_call", "id": "lsh_" + call_id, "call_id": call_id, "status": "completed",
                    "action": {"type": "exec", "command": args["command"] if isinstance(args, dict) else [args]}}
        if answer.call:
            return {"type": "function_call", "id": "fc_" + call_id, "call_id": call_id, "status": "completed",
                    "name": answer.call.tool.name, "arguments": answer.call.arguments_json()}
        return {"type": "message", "id": "msg_" + call_id, "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": answer.text, "annotations": []}]}

    def whole(self, answer: Answer, model: str) -> dict[str, Any]:
        return {"id": "resp_" + uuid.uuid4().hex[:20], "object": "response", "created_at": int(time.time()),
                "status": "completed", "model": model, "output": [self._item(answer)],
                "usage": {"input_tokens": USAGE["input"], "input_tokens_details": {"cached_tokens": 0},
                          "output_tokens": USAGE["output"], "output_tokens_details": {"reasoning_tokens": 0},
                          "total_tokens": USAGE["input"] + USAGE["output"]}}

    def stream(self, answer: Answer, model: str) -> Iterator[bytes]:
        resp = self.whole(answer, model)
        item = resp["output"][0]
        seq = iter(range(1000))
        pending = dict(resp, status="in_progress", output=[], usage=None)
        yield sse("response.created", {"type": "response.created", "sequence_number": next(seq), "response": pending})
        yield sse("response.in_progress", {"type": "response.in_progress", "sequence_number": next(seq),
                                           "response": pending})
        if item["type"] == "message":
            empty = dict(item, status="in_progress", content=[])
            yield sse("response.output_item.added", {"type": "response.output_item.added", "sequence_number": next(seq),
                                                     "output_index": 0, "item": empty})
            yield sse("response.content_part.added", {
                "type": "response.content_part.added", "sequence_number": next(seq), "item_id": item["id"],
                "output_index": 0, "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}})
            yield sse("response.output_text.delta", {
                "type": "response.output_text.delta", "sequence_number": next(seq), "item_id": item["id"],
                "output_index": 0, "content_index": 0, "delta": item["content"][0]["text"]})
            yield sse("response.output_text.done", {
                "type": "response.output_text.done", "sequence_number": next(seq), "item_id": item["id"],
                "output_index": 0, "content_index": 0, "text": item["content"][0]["text"]})
            yield sse("response.content_part.done", {
                "type": "response.content_part.done", "sequence_number": next(seq), "item_id": item["id"],
                "output_index": 0, "content_index": 0, "part": item["content"][0]})
        else:
            yield sse("response.output_item.added", {"type": "response.output_item.added", "sequence_number": next(seq),
                                                     "output_index": 0, "item": item})
        yield sse("response.output_item.done", {"type": "response.output_item.done", "sequence_number": next(seq),
                                                "output_index": 0, "item": item})
        yield sse("response.completed", {"type": "response.completed", "sequence_number": next(seq), "response": resp})


_READ_TOOLS = ("read_file", "read")
"""Read tools of the Chat CLIs (Qwen Code ``read_file``, opencode ``read``). Qwen Code 0.24's edit
refuses a file not read in the session ("File ... has not been read in this session. Use the
read_file tool first ..."), so the model reads a file with one of these before its first edit of it
(opencode 1.18 does not need it but reads just the same)."""


class Chat(Format):
    """POST /v1/chat/completions (Qwen Code, opencode, aider).

    An edit of a file the conversation has not read yet is preceded by a call of the offered read
    tool (``read_file``/``read``) on it; those read turns do not count as plan turns.
    """

    name = "chat"
    _local = threading.local()

    def tools(self, body: dict[str, Any]) -> list[Tool]:
        self._local.body = body  # the request this handler thread is answering (see _message)
        return [Tool(t["function"].get("name", ""), _props(t["function"].get("parameters")))
                for t in body.get("tools") or [] if isinstance(t, dict) and isinstance(t.get("function"), dict)]

    @staticmethod
    def _calls(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """(name, arguments) of every tool call in the request's history."""
        out = []
        for m in body.get("messages") or []:
            for call in (m.get("tool_calls") or []) if isinstance(m, dict) else []:
                fn = (call.get("function") or {}) if isinstance(call, dict) else {}
                try:
                    args = json.loads(fn.get("arguments") or "{}")
                except ValueError:
                    args = {}
                out.append((str(fn.get("name", "")), args if isinstance(args, dict) else {}))
        return out

    def turn(self, body: dict[str, Any]) -> int:
        self._local.body = body
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]

        def read_only(m: dict[str, Any]) -> bool:
            return bool(m.get("tool_calls")) and all(
                ((c.get("function") or {}).get("name") in _READ_TOOLS) for c in m["tool_calls"])

        # aider's canned turns (examples, repo map, files) come before its last user message, the brief
        return _since_prompt(messages, lambda m: m.get("role") == "user",
                             lambda m: m.get("role") == "assistant" and not read_only(m))

    def _read_first(self, call: Call) -> Call | None:
        """The read call to make before ``call`` (an edit of a file not read yet), or None."""
        body = getattr(self._local, "body", None)
        args = call.arguments if isinstance(call.arguments, dict) else {}
        path_key = next((k for k in ("file_path", "filePath", "absolute_path", "path") if k in args), None)
        if body is None or path_key is None or call.tool.name in _READ_TOOLS:
            return None
        path = args[path_key]
        if any(name in _READ_TOOLS and path in done.values() for name, done in self._calls(body)):
            return None
        for tool in self.tools(body):
            key = next((k for k in ("file_path", "filePath", "absolute_path", "path") if k in tool.properties), None)
            if tool.name in _READ_TOOLS and key:
                return Call(tool, {key: path})
        return None

    def system(self, body: dict[str, Any]) -> str:
        return _text_of([m.get("content") for m in body.get("messages") or []
                         if isinstance(m, dict) and m.get("role") == "system"])

    def json_schema(self, body: dict[str, Any]) -> Any:
        fmt = body.get("response_format")
        if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
            return (fmt.get("json_schema") or {}).get("schema")
        return None

    def error(self, status: int) -> dict[str, Any]:
        return openai_error(status)

    def _usage(self) -> dict[str, int]:
        return {"prompt_tokens": USAGE["input"], "completion_tokens": USAGE["output"],
                "total_tokens": USAGE["input"] + USAGE["output"]}

    def _message(self, answer: Answer) -> dict[str, Any]:
        if answer.call:
            call = self._read_first(answer.call) or answer.call
            return {"role": "assistant", "content": None, "tool_calls": [{
                "id": "call_" + uuid.uuid4().hex[:20], "type": "function",
                "function": {"name": call.tool.name, "arguments": call.arguments_json()}}]}
        return {"role": "assistant", "content": answer.text}

    def whole(self, answer: Answer, model: str) -> dict[str, Any]:
        return {"id": "chatcmpl-" + uuid.uuid4().hex[:20], "object": "chat.completion", "created": int(time.time()),
                "model": model, "choices": [{"index": 0, "message": self._message(answer),
                                             "finish_reason": "tool_calls" if answer.call else "stop"}],
                "usage": self._usage()}

    def stream(self, answer: Answer, model: str) -> Iterator[bytes]:
        base = {"id": "chatcmpl-" + uuid.uuid4().hex[:20], "object": "chat.completion.chunk",
                "created": int(time.time()), "model": model}
        msg = self._message(answer)

        def chunk(delta: dict[str, Any], finish: str | None = None, usage: Any = None) -> bytes:
            data = dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": finish}])
            if usage is not None:
                data["usage"] = usage
            return b"data: " + json.dumps(data).encode() + b"\n\n"

        yield chunk({"role": "assistant", "content": ""})
        if answer.call:
            call = msg["tool_calls"][0]
            yield chunk({"tool_calls": [dict(call, index=0)]})
            yield chunk({}, "tool_calls")
        else:
            yield chunk({"content": answer.text})
            yield chunk({}, "stop")
        usage = dict(base, choices=[], usage=self._usage())
        yield b"data: " + json.dumps(usage).encode() + b"\n\n"
        yield b"data: [DONE]\n\n"


def _bounded(schema: Any) -> Any:
    """The schema with each number property pinned to its lower bound ("minimum", or a "from 1-100"
    range in its description), so the minimal answer passes the CLI's own check (Gemini CLI's
    model router asks for a complexity_score of 1-100 and rejects 0)."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    if str(out.get("type", "")).lower() in ("integer", "number") and not out.get("enum"):
        low = out.get("minimum")
        found = re.search(r"(-?\d+)\s*(?:-|to)\s*-?\d+", str(out.get("description", "")))
        if low is None and found:
            low = int(found.group(1))
        if low is not None:
            out["enum"] = [low]
    if isinstance(out.get("properties"), dict):
        out["properties"] = {k: _bounded(v) for k, v in out["properties"].items()}
    return out


class Gemini(Format):
    """POST /v1beta/models/<model>:generateContent and :streamGenerateContent (Gemini CLI)."""

    name = "gemini"

    def tools(self, body: dict[str, Any]) -> list[Tool]:
        out: list[Tool] = []
        for group in body.get("tools") or []:
            for decl in (group or {}).get("functionDeclarations") or []:
                schema = decl.get("parametersJsonSchema") or decl.get("parameters")
                tool = Tool(decl.get("name", ""), _props(schema))
                required = (schema or {}).get("required") if isinstance(schema, dict) else None
                tool.required = [str(k) for k in required or []]  # type: ignore[attr-defined]
                out.append(tool)
        return out

    def _arguments(self, call: Call) -> Any:
        """The call's arguments with every required parameter the plan left out filled in (Gemini
        CLI's ``replace`` requires an ``instruction`` besides the path and the strings)."""
        args = call.arguments
        if not isinstance(args, dict):
            return args
        args = dict(args)
        for key in getattr(call.tool, "required", []):
            if key not in args:
                schema = call.tool.properties.get(key)
                if key == "instruction":
                    args[key] = "Apply the planned change to the file as described in the task."
                else:
                    args[key] = json_for_schema(schema if isinstance(schema, dict) else {"type": "string"})
        return args

    def turn(self, body: dict[str, Any]) -> int:
        contents = [c for c in body.get("contents") or [] if isinstance(c, dict)]
        return _since_prompt(contents, lambda c: c.get("role") == "user" and not any(
                                 isinstance(p, dict) and "functionResponse" in p for p in c.get("parts") or []),
                             lambda c: c.get("role") == "model")

    def json_schema(self, body: dict[str, Any]) -> Any:
        cfg = body.get("generationConfig") or {}
        if cfg.get("responseMimeType") == "application/json":
            schema = cfg.get("responseJsonSchema") or cfg.get("responseSchema") or {"type": "object"}
            return _bounded(schema)
        return None

    def streaming(self, path: str, body: dict[str, Any]) -> bool:
        return ":streamGenerateContent" in path

    def error(self, status: int) -> dict[str, Any]:
        state = {401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 429: "RESOURCE_EXHAUSTED"}.get(status, "INTERNAL")
        message = {401: "API key not valid. Please pass a valid API key.",
                   403: "Permission denied on resource project.",
                   429: "Resource has been exhausted (e.g. check quota)."}.get(status, "Internal error encountered.")
        return {"error": {"code": status, "message": message, "status": state}}

    def whole(self, answer: Answer, model: str) -> dict[str, Any]:
        if answer.call:
            part: dict[str, Any] = {"functionCall": {"name": answer.call.tool.name,
                                                     "args": self._arguments(answer.call)}}
        else:
            part = {"text": answer.text}
        return {"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
                "usageMetadata": {"promptTokenCount": USAGE["input"], "candidatesTokenCount": USAGE["output"],
                                  "totalTokenCount": USAGE["input"] + USAGE["output"]},
                "modelVersion": model}

    def stream(self, answer: Answer, model: str) -> Iterator[bytes]:
        yield b"data: " + json.dumps(self.whole(answer, model)).encode() + b"\r\n\r\n"


FORMATS: list[tuple[Callable[[str], bool], Format]] = [
    (lambda p: p.endswith("/messages"), Anthropic()),
    (lambda p: p.endswith("/responses"), Responses()),
    (lambda p: p.endswith("/chat/completions"), Chat()),
    (lambda p: "GenerateContent" in p or "generateContent" in p, Gemini()),
]


def format_for(path: str) -> Format | None:
    """The format a POST path speaks (query string removed), or None."""
    for test, fmt in FORMATS:
        if test(path):
            return fmt
    return None


def structured(fmt: Format, body: dict[str, Any]) -> str | None:
    """The JSON text of a structured side call's answer, or None when the request asks for none."""
    schema = fmt.json_schema(body)
    return None if schema is None else json.dumps(json_for_schema(schema))
