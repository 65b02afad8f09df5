"""The result contract: human text + meta block, structuredContent, coded errors (docs/tools.md §2,
docs/architecture.md §7)."""

from __future__ import annotations

import json
import re
from typing import Any, Mapping

import mcp_types as types
from jsonschema import Draft202012Validator

from ..core.errors import ErrorCode, TianshuError
from ..core.i18n import _

META_FENCE = "---tianshu-mcp-meta---"
QUOTE_CHARS = 200
"""At most this many characters of a caller's bad value are quoted back (docs/robustness.md §8)."""
MAX_ERROR_CHARS = 8192
"""No error message is longer (a reply to bad input stays far below 64 KiB)."""
MAX_PROBLEMS = 10
_IMPOSSIBLE = re.compile("[\x00\ud800-\udfff]")


def clip(text: str, limit: int = QUOTE_CHARS) -> str:
    """``text`` cut to ``limit`` characters, with how much was left out."""
    return text if len(text) <= limit else text[:limit] + _("… ({n} more characters)").format(n=len(text) - limit)


MAX_META_STRING = 8192
"""A meta value string is cut at this many characters (a task.json with a 10 MB lastMessage made
30 MB replies)."""
MAX_META_ITEMS = 200
"""A meta list shows at most this many items, then ``"… N more"``."""
MAX_BODY_CHARS = 60000
"""A reply's human text is cut at this many characters."""


def bounded(value: Any) -> Any:
    """``value`` with every string clipped to :data:`MAX_META_STRING` characters and every list and
    object to :data:`MAX_META_ITEMS` items (recursively; a task.json whose ``diffstat`` held
    100,000 keys made 23 MB replies)."""
    if isinstance(value, str):
        return clip(value, MAX_META_STRING)
    if isinstance(value, Mapping):
        out = {clip(str(k), 200): bounded(v) for k, v in list(value.items())[:MAX_META_ITEMS]}
        if len(value) > MAX_META_ITEMS:
            out["…"] = f"{len(value) - MAX_META_ITEMS} more keys"
        return out
    if isinstance(value, list):
        items = [bounded(v) for v in value[:MAX_META_ITEMS]]
        if len(value) > MAX_META_ITEMS:
            items.append(f"… {len(value) - MAX_META_ITEMS} more")
        return items
    return value


def ok_result(body: str, meta: Mapping[str, Any] | None) -> types.CallToolResult:
    """Success: ``body`` + the meta block (when ``meta`` is given) and the same fields as
    ``structuredContent``. ``isError`` is False. None values are dropped from the meta; the body
    and the meta are bounded (:data:`MAX_BODY_CHARS`, :func:`bounded`)."""
    if len(body) > MAX_BODY_CHARS:
        body = body[:MAX_BODY_CHARS] + "\n" + _("… (reply cut: {n} more characters)").format(n=len(body) - MAX_BODY_CHARS)
    if meta is None:
        return types.CallToolResult(content=[types.TextContent(text=body)], is_error=False)
    clean = {k: bounded(v) for k, v in meta.items() if v is not None}
    text = f"{body}\n{META_FENCE}\n{json.dumps(clean, indent=2, ensure_ascii=False)}\n{META_FENCE}"
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=clean, is_error=False)


def error_result(err: TianshuError) -> types.CallToolResult:
    """Failure: text ``Error: [CODE] message``, ``isError: true``, never a meta block; the code and
    message are also given as ``structuredContent`` ``{"error": {"code", "message"}}``."""
    message = clip(err.message, MAX_ERROR_CHARS)
    return types.CallToolResult(
        content=[types.TextContent(text=f"Error: [{err.code.value}] {message}")],
        structured_content={"error": {"code": err.code.value, "message": message}},
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
    given = dict(arguments or {})
    known = schema.get("properties", {})
    args = {k: v for k, v in given.items() if k in known}
    # an unknown key is dropped (refused by a strict tool), but one no JSON text should hold is always refused
    problems = impossible_strings({k: None for k in given if k not in known})
    if schema.get("additionalProperties") is False:
        problems.extend(_("{field}: unknown key (this tool is strict)").format(field=clip(k)) for k in sorted(given) if k not in known)
    problems.extend(oversized(schema, args))
    if not problems:  # the full validation walks every item: only once the sizes are sane
        validator = Draft202012Validator(dict(schema))
        for err in sorted(validator.iter_errors(args), key=lambda e: list(e.absolute_path)):
            if err.validator == "required":
                missing = err.message.split("'")[1] if "'" in err.message else err.message
                problems.append(_("{field}: required").format(field=clip(_field([*err.absolute_path, missing]))))
            else:
                problems.append(f"{clip(_field(err.absolute_path))}: {_describe(err)}")
        problems.extend(impossible_strings(args))
    if problems:
        more = _("; … {n} more").format(n=len(problems) - MAX_PROBLEMS) if len(problems) > MAX_PROBLEMS else ""
        raise TianshuError(ErrorCode.INVALID_ARGUMENT,
                           _("invalid arguments for {tool}: ").format(tool=tool) + "; ".join(problems[:MAX_PROBLEMS]) + more)
    return args


def _describe(err: Any) -> str:
    """jsonschema's message with the offending value quoted at most :data:`QUOTE_CHARS` chars
    (its own message embeds the whole value: a 10 MB string made a 20 MB reply)."""
    instance = err.instance
    shown = repr(instance)
    if len(shown) <= QUOTE_CHARS:
        return clip(err.message, 2 * QUOTE_CHARS)
    kind = type(instance).__name__
    size = f"{len(instance)} items" if isinstance(instance, (list, dict)) else f"{len(shown)} characters"
    rule = f"{err.validator} {clip(json.dumps(err.validator_value, default=str), 80)}"
    return f"{clip(shown)} ({kind} of {size}) violates {rule}"


def oversized(schema: Mapping[str, Any], value: Any, path: tuple[Any, ...] = ()) -> list[str]:
    """Arrays over their schema's ``maxItems`` and strings over ``maxLength``, found without
    looking inside an oversized array (1,000,000 task ids took 16 s to validate item by item).
    Follows ``properties``, an object-valued ``items`` and the ``oneOf``/``anyOf`` branch of the
    value's JSON type; one problem per field."""
    branches = schema.get("oneOf") or schema.get("anyOf")
    if isinstance(branches, list):
        kind = "array" if isinstance(value, list) else "string" if isinstance(value, str) else None
        schema = next((b for b in branches if isinstance(b, dict) and b.get("type") == kind), schema)
    if isinstance(value, list):
        limit = schema.get("maxItems")
        if isinstance(limit, int) and len(value) > limit:
            return [_("{field}: {n} items, at most {limit} allowed").format(field=clip(_field(path)), n=len(value), limit=limit)]
        items = schema.get("items")
        if isinstance(items, dict):
            return [p for i, v in enumerate(value) for p in oversized(items, v, (*path, i))]
        return []
    if isinstance(value, str):
        limit = schema.get("maxLength")
        if isinstance(limit, int) and len(value) > limit:
            return [_("{field}: {n} characters, at most {limit} allowed").format(field=clip(_field(path)), n=len(value),
                                                                                 limit=limit)]
        return []
    if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
        props = schema["properties"]
        return [p for k, v in value.items() if isinstance(props.get(k), dict) for p in oversized(props[k], v, (*path, k))]
    return []


MAX_DEPTH = 64
"""Arguments nested deeper than this are refused (no tool takes more than a few levels)."""


def impossible_strings(value: Any, path: tuple[Any, ...] = ()) -> list[str]:
    """Fields whose strings hold a NUL or an unpaired surrogate (no file, argv or path can carry
    them), and values nested deeper than :data:`MAX_DEPTH`: one problem per field."""
    if len(path) > MAX_DEPTH:
        return [_("{field}…: nested more than {n} levels deep").format(field=clip(_field(path[:3])), n=MAX_DEPTH)]
    if isinstance(value, str):
        m = _IMPOSSIBLE.search(value)
        if m:
            what = _("a NUL character") if m.group() == "\x00" else _("an unpaired surrogate (not valid Unicode text)")
            return [_("{field}: contains {what} at position {pos}").format(field=clip(_field(path)), what=what, pos=m.start())]
        return []
    if isinstance(value, dict):
        out: list[str] = []
        for k, v in value.items():
            out.extend(impossible_strings(k, (*path, "<key>")) if isinstance(k, str) and _IMPOSSIBLE.search(k) else [])
            out.extend(impossible_strings(v, (*path, k)))
        return out
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in impossible_strings(v, (*path, i))]
    return []
