"""Readers of agent output, one per format (docs/real-agents.md §3): each turns one line into typed events.

A profile names its format in ``outputFormat`` (None: plain text). A structured reader reads JSON
lines; a line that is not JSON (what the CLI prints on stderr) goes to the plain-text reader,
which knows how the text-mode CLIs say that they retry a failed model call. Every reader is
forgiving: an unknown event type or a missing field yields nothing, never an exception.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable

from .ansi import strip_ansi
from .events import FinalMessage, GaveUp, ModelRetry, OutputEvent, ToolUse, Usage

QUOTE_CHARS = 300
_PATH_KEYS = ("file_path", "filePath", "absolute_path", "notebook_path", "path", "file")

_TEXT_RETRIES: tuple[tuple[re.Pattern[str], int | None], ...] = (
    # what the ACP driver logs for an agent's retry notice (codex-acp's _meta.codex.error)
    (re.compile(r"^\[model-retry\] HTTP (\d{3})"), None),
    # Qwen Code 0.24 (stderr, also with stream-json): "Retrying in 60s (attempt 1/10): [API Error: 429 …]"
    (re.compile(r"retrying in \d+s \(attempt \d+/\d+\): \[api error: (\d{3})", re.I), None),
    # Gemini CLI / Qwen Code: "Attempt 2 failed with status 429. Retrying with backoff..."
    (re.compile(r"attempt \d+ failed with status (\d{3})", re.I), None),
    # aider (litellm): "The API provider has rate limited you. Try again later or check your quotas."
    # (then "Retrying in 0.2 seconds...", once per attempt: the first line is the one counted)
    (re.compile(r"api provider has rate limited you", re.I), 429),
    # a generic "429 Too Many Requests … retrying" / "401 … retry"
    (re.compile(r"\b(401|403|429)\b.{0,120}\bretry", re.I), None),
)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _quote(text: str) -> str:
    return " ".join(text.split())[:QUOTE_CHARS]


def _files(args: Any) -> tuple[str, ...]:
    if not isinstance(args, dict):
        return ()
    return tuple(str(args[k]) for k in _PATH_KEYS if isinstance(args.get(k), str) and args[k])


def _detail(args: Any) -> str:
    if not isinstance(args, dict):
        return ""
    for key in ("command", "cmd", *_PATH_KEYS, "pattern", "url", "description"):
        value = args.get(key)
        if isinstance(value, list):
            value = " ".join(str(v) for v in value)
        if isinstance(value, str) and value:
            return _quote(value)[:200]
    return ""


_ATTEMPT = re.compile(r"\battempt (\d+)\b", re.I)
_DELAY = re.compile(r"retrying in (\d+(?:\.\d+)?)\s*(s|seconds?)\b", re.I)


def read_text_line(line: str) -> list[OutputEvent]:
    """A plain-text line: a :class:`ModelRetry` when it says a model call is retried on an error
    (with the announced wait when the line names one)."""
    for pattern, status in _TEXT_RETRIES:
        match = pattern.search(line)
        if match:
            code = status
            if code is None and match.groups():
                code = int(match.group(1))
            delay = _DELAY.search(line)
            attempt = _ATTEMPT.search(line)
            return [ModelRetry(code, _quote(line), int(attempt.group(1)) if attempt else None,
                               int(float(delay.group(1)) * 1000) if delay else None)]
    return []


def read_claude(data: dict[str, Any]) -> list[OutputEvent]:
    """``claude -p --output-format stream-json --verbose`` (Claude Code 2.1; the same events in
    claude-agent-acp's SDK): ``system/api_retry``, ``assistant`` messages with ``tool_use`` blocks,
    and the ``result`` line with totals, cost and the final text (``is_error`` when it gave up)."""
    kind = data.get("type")
    if kind == "system" and data.get("subtype") == "api_retry":
        status = data.get("error_status") if isinstance(data.get("error_status"), int) else None
        attempt = data.get("attempt") if isinstance(data.get("attempt"), int) else None
        line = f"API retry {attempt}/{data.get('max_retries')}: {data.get('error') or 'error'}" + (
            f" (HTTP {status})" if status else "")
        return [ModelRetry(status, line, attempt)]
    if kind == "assistant":
        content = (data.get("message") or {}).get("content") or []
        return [ToolUse(str(b.get("name") or "tool"), _files(b.get("input")), _detail(b.get("input")))
                for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
    if kind == "result":
        usage = data.get("usage") or {}
        cost = data.get("total_cost_usd")
        out: list[OutputEvent] = [Usage(
            _int(usage.get("input_tokens")) + _int(usage.get("cache_read_input_tokens"))
            + _int(usage.get("cache_creation_input_tokens")), _int(usage.get("output_tokens")),
            float(cost) if isinstance(cost, (int, float)) else None, total=True)]
        text = data.get("result") if isinstance(data.get("result"), str) else ""
        if data.get("is_error"):
            status = data.get("api_error_status") if isinstance(data.get("api_error_status"), int) else None
            out.append(GaveUp(_quote(text or str(data.get("subtype") or "error")), status))
        elif text:
            out.append(FinalMessage(text))
        return out
    return []


_STATUS = re.compile(r"(?:status:?|HTTP)\s*(\d{3})\b", re.I)


def _status_in(text: str) -> int | None:
    match = _STATUS.search(text)
    return int(match.group(1)) if match else None


def read_codex(data: dict[str, Any]) -> list[OutputEvent]:
    """``codex exec --json`` (Codex CLI 0.171): ``item.started`` of a ``command_execution``,
    ``item.completed`` of a ``file_change`` or an ``agent_message``, ``turn.completed`` usage (per
    turn), top-level ``error`` lines (``Reconnecting... 1/5 (<why>)`` while it retries) and
    ``turn.failed`` when it gives up. An ``item`` of type ``error`` is a warning, not a failure."""
    kind = data.get("type")
    item = data.get("item") if isinstance(data.get("item"), dict) else {}
    if kind == "item.started" and item.get("type") == "command_execution":
        return [ToolUse("shell", (), _quote(str(item.get("command") or ""))[:200])]
    if kind == "item.completed" and item.get("type") == "file_change":
        paths = tuple(str(c.get("path")) for c in item.get("changes") or [] if isinstance(c, dict) and c.get("path"))
        return [ToolUse("apply_patch", paths, ", ".join(paths)[:200])]
    if kind == "item.completed" and item.get("type") == "agent_message" and isinstance(item.get("text"), str):
        return [FinalMessage(item["text"])]
    if kind == "turn.completed" and isinstance(data.get("usage"), dict):
        usage = data["usage"]
        return [Usage(_int(usage.get("input_tokens")), _int(usage.get("output_tokens")))]
    if kind == "error" and isinstance(data.get("message"), str):
        message = data["message"]
        retry = re.match(r"Reconnecting\.\.\. (\d+)/\d+", message)
        if retry:
            return [ModelRetry(_status_in(message), _quote(message), int(retry.group(1)))]
        return []
    if kind == "turn.failed":
        message = str((data.get("error") or {}).get("message") or "turn failed")
        return [GaveUp(_quote(message), _status_in(message))]
    return []


def read_qwen(data: dict[str, Any]) -> list[OutputEvent]:
    """``qwen --output-format stream-json`` (Qwen Code 0.24): Claude Code's event shapes
    (``assistant`` tool_use blocks, the ``result`` line; its ``error.message`` when it gave up).
    Its ``system/retry`` events carry no status: the retry is read from the stderr line that
    comes with it (``Retrying in 60s (attempt 1/10): [API Error: 429 …]``)."""
    if data.get("type") == "result" and data.get("is_error"):
        usage = data.get("usage") or {}
        message = str((data.get("error") or {}).get("message") or data.get("subtype") or "error")
        return [Usage(_int(usage.get("input_tokens")), _int(usage.get("output_tokens")), None, total=True),
                GaveUp(_quote(message), _status_in(message) or _api_error_status(message))]
    if data.get("type") == "system":
        return []
    return read_claude(data)


def _api_error_status(text: str) -> int | None:
    match = re.search(r"api error: (\d{3})", text, re.I)
    return int(match.group(1)) if match else None


def read_opencode(data: dict[str, Any]) -> list[OutputEvent]:
    """``opencode run --format json`` (opencode 1.18): ``tool_use`` parts (tool, input with
    ``filePath``, state), ``step_finish`` tokens and cost per step, ``text`` parts (the last is
    the final message) and one ``error`` line when it gives up (``statusCode`` in ``data``).
    A tool call the permission rules rejected is a ``tool_use`` in state ``error``."""
    kind = data.get("type")
    part = data.get("part") if isinstance(data.get("part"), dict) else {}
    if kind == "tool_use":
        state = part.get("state") if isinstance(part.get("state"), dict) else {}
        args = state.get("input")
        detail = _detail(args)
        if state.get("status") == "error" and state.get("error"):
            detail = _quote(f"{detail} failed: {state['error']}")[:200]
        return [ToolUse(str(part.get("tool") or "tool"), _files(args), detail)]
    if kind == "step_finish":
        tokens = part.get("tokens") if isinstance(part.get("tokens"), dict) else {}
        cost = part.get("cost")
        return [Usage(_int(tokens.get("input")), _int(tokens.get("output")),
                      float(cost) if isinstance(cost, (int, float)) else None)]
    if kind == "text" and isinstance(part.get("text"), str) and part["text"].strip():
        return [FinalMessage(part["text"])]
    if kind == "error":
        error = data.get("error") if isinstance(data.get("error"), dict) else {}
        info = error.get("data") if isinstance(error.get("data"), dict) else {}
        message = str(info.get("message") or error.get("name") or "error")
        status = info.get("statusCode") if isinstance(info.get("statusCode"), int) else None
        return [GaveUp(_quote(message), status)]
    return []


def read_gemini(data: dict[str, Any]) -> list[OutputEvent]:
    """``gemini --output-format stream-json`` (Gemini CLI 0.61): ``tool_use`` (``tool_name``,
    ``parameters``), ``message`` pieces of the assistant (``delta``), and the ``result`` line with
    ``stats`` tokens, or ``status: error`` with the error it gave up on. Its retries are not in the
    stream: they are stderr lines (``Attempt 2 failed with status 429. Retrying with backoff...``),
    read by the text reader."""
    kind = data.get("type")
    if kind == "tool_use":
        args = data.get("parameters")
        return [ToolUse(str(data.get("tool_name") or "tool"), _files(args), _detail(args))]
    if kind == "message" and data.get("role") == "assistant" and isinstance(data.get("content"), str):
        return [FinalMessage(data["content"], delta=bool(data.get("delta")))]
    if kind == "result":
        stats = data.get("stats") if isinstance(data.get("stats"), dict) else {}
        out: list[OutputEvent] = [Usage(_int(stats.get("input_tokens")), _int(stats.get("output_tokens")), None,
                                        total=True)]
        if data.get("status") == "error":
            message = str((data.get("error") or {}).get("message") or "error")
            out.append(GaveUp(_quote(message), _status_in(message) or _code_in(message)))
        return out
    return []


def _code_in(text: str) -> int | None:
    match = re.search(r'"code":\s*(\d{3})', text)
    return int(match.group(1)) if match else None


READERS: dict[str, Callable[[dict[str, Any]], list[OutputEvent]]] = {
    "claude-stream-json": read_claude,
    "codex-json": read_codex,
    "qwen-stream-json": read_qwen,
    "opencode-json": read_opencode,
    "gemini-stream-json": read_gemini,
}
"""Structured readers by ``outputFormat`` name."""


class OutputReader:
    """Reads the lines of one round's output in the profile's ``outputFormat`` (None: text)."""

    def __init__(self, output_format: str | None) -> None:
        self._json = READERS.get(output_format or "")

    def read(self, raw_line: str) -> list[OutputEvent]:
        """The events of one line (ANSI codes removed first); never raises."""
        line = strip_ansi(raw_line).strip()
        if not line:
            return []
        if self._json is not None and line.startswith("{"):
            try:
                data = json.loads(line)
            except ValueError:
                data = None
            if isinstance(data, dict):
                try:
                    return self._json(data)
                except Exception:  # noqa: BLE001 - a reader must never end a round
                    return []
        return read_text_line(line)

    @property
    def structured(self) -> bool:
        """True when the profile's output is read as JSON events."""
        return self._json is not None
