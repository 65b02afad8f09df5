"""The result contract: human text + meta block, structuredContent, coded errors (10-tools §2, 00-design §7)."""

from __future__ import annotations

import json
from typing import Any, Mapping

import mcp_types as types
from jsonschema import Draft202012Validator

from ..core.errors import ErrorCode, TianshuError

META_FENCE = "---tianshu-mcp-meta---"


def ok_result(body: str, meta: Mapping[str, Any] | None) -> types.CallToolResult:
    """Success: ``body`` + the meta block (when ``meta`` is given) and the same fields as
    ``structuredContent``. ``isError`` is False. None values are dropped from the meta."""
    if meta is None:
        return types.CallToolResult(content=[types.TextContent(text=body)], is_error=False)
    clean = {k: v for k, v in meta.items() if v is not None}
    text = f"{body}\n{META_FENCE}\n{json.dumps(clean, indent=2, ensure_ascii=False)}\n{META_FENCE}"
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=clean, is_error=False)


def error_result(err: TianshuError) -> types.CallToolResult:
    """Failure: text ``Error: [CODE] message``, ``isError: true``, never a meta block; the code and
    message are also given as ``structuredContent`` ``{"error": {"code", "message"}}``."""
    return types.CallToolResult(
        content=[types.TextContent(text=err.render())],
        structured_content={"error": {"code": err.code.value, "message": err.message}},
        is_error=True,
    )


def _field(path: Any) -> str:
    parts = [str(p) if not isinstance(p, int) else f"[{p}]" for p in path]
    return ".".join(parts).replace(".[", "[") or "(root)"


def validate_arguments(tool: str, schema: Mapping[str, Any], arguments: Mapping[str, Any] | None) -> dict[str, Any]:
    """Check ``arguments`` against the tool's input schema; drop unknown top-level keys.

    Returns the cleaned arguments. Raises ``TianshuError(INVALID_ARGUMENT)`` whose message names
    every offending field, e.g. ``invalid arguments for run_task: autoFixRounds: 11 is greater
    than the maximum of 10``.
    """
    args = dict(arguments or {})
    known = schema.get("properties", {})
    args = {k: v for k, v in args.items() if k in known}
    validator = Draft202012Validator(dict(schema))
    problems = []
    for err in sorted(validator.iter_errors(args), key=lambda e: list(e.absolute_path)):
        if err.validator == "required":
            missing = err.message.split("'")[1] if "'" in err.message else err.message
            problems.append(f"{_field([*err.absolute_path, missing])}: required")
        else:
            problems.append(f"{_field(err.absolute_path)}: {err.message}")
    if problems:
        raise TianshuError(ErrorCode.INVALID_ARGUMENT, f"invalid arguments for {tool}: " + "; ".join(problems))
    return args
