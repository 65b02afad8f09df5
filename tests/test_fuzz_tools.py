"""Fuzzing every tool over a real stdio server (docs/robustness.md §9).

hypothesis + hypothesis-jsonschema draw arguments from each tool's *published* inputSchema, and a
mutation strategy breaks them (wrong types, huge strings, NUL, unpaired surrogates, other
unicode, extra keys, missing fields). ≥ 1,000 calls per run; every reply must be a coded result
(never ``[INTERNAL]``), at most 64 KiB, and the server must still answer a normal call at the end.

Side effects are kept out by construction: ``projectPath`` is always one that the gate refuses
or that does not exist, task ids are random, and ``wait_task`` waits at most 200 ms.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

from tianshu_mcp.acceptance.visual.errors import VISUAL_CODES
from tianshu_mcp.core.errors import ErrorCode
from tianshu_mcp.mcp_server.tools import TOOL_DEFS

from test_stdio_host import RawClient, _init

MAX_REPLY = 64 * 1024
CODES = ({c.value for c in ErrorCode} | VISUAL_CODES) - {"INTERNAL"}
CODE_RE = re.compile(r"^Error: \[([A-Z_]+)\] ")
SAFE_PATHS = ["/nonexistent/fuzz-project", "relative/path", "/proc", "/usr/share", "", "/nonexistent/\u4e2d\u6587"]
CALLS = {"n": 0}

nasty_text = st.one_of(
    st.text(max_size=40),
    st.just("\u0000"), st.just("a\u0000b"), st.just("\ud800"), st.just("x\udfffy"),
    st.just("\u202e\u200b\ufeff"), st.just("\U0001F600" * 50), st.just("中文任务"),
    st.integers(min_value=1000, max_value=300_000).map(lambda n: "x" * n),
)
any_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | nasty_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def make_safe(tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """Keep a call from doing real work: no real project, short waits."""
    out = dict(args)
    if "projectPath" in out and isinstance(out["projectPath"], str):
        out["projectPath"] = SAFE_PATHS[len(out["projectPath"]) % len(SAFE_PATHS)]
    if tool == "wait_task":
        out["timeoutMs"] = 200 if not isinstance(out.get("timeoutMs"), int) else min(max(out["timeoutMs"], 0), 200)
    if tool in ("run_task", "verify_task") and "projectPath" not in out and "taskId" not in out:
        out["projectPath"] = SAFE_PATHS[0]
    return out


@st.composite
def mutated(draw: Any, schema: dict[str, Any]) -> dict[str, Any]:
    """A valid argument object with 0-3 mutations."""
    args = dict(draw(from_schema(schema)))
    props = list(schema.get("properties", {}))
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["type", "text", "extra", "drop", "nest"]))
        key = draw(st.sampled_from(props)) if props else "x"
        if kind == "type":
            args[key] = draw(any_json)
        elif kind == "text":
            args[key] = draw(nasty_text)
        elif kind == "extra":
            args[draw(st.text(min_size=1, max_size=12))] = draw(any_json)
        elif kind == "drop":
            args.pop(key, None)
        else:
            args[key] = draw(st.recursive(st.just(1), lambda i: st.lists(i, min_size=1, max_size=1), max_leaves=200))
    return args


@pytest.fixture(scope="module")
def raw(ts_daemon: dict[str, Any]) -> Iterator[RawClient]:
    client = RawClient(ts_daemon["home"])
    _init(client, timeout=180)  # the first thing of a run: four workers start their services at once
    yield client
    assert not client.call("query_info", {"type": "profiles"})["isError"]  # alive after the storm
    client.close()
    assert CALLS["n"] >= 1000, CALLS


def check_reply(tool: str, args: dict[str, Any], result: dict[str, Any]) -> None:
    CALLS["n"] += 1
    size = len(json.dumps(result).encode())
    assert size <= MAX_REPLY, (tool, size)
    if result.get("isError"):
        text = result["content"][0]["text"]
        m = CODE_RE.match(text)
        assert m and m.group(1) in CODES, (tool, text[:500])


@pytest.mark.parametrize("tool", [t.name for t in TOOL_DEFS])
def test_fuzz_tool(raw: RawClient, tool: str) -> None:
    schema = next(t.input_schema for t in TOOL_DEFS if t.name == tool)

    @settings(max_examples=140, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
    @given(args=mutated(schema))
    def run(args: dict[str, Any]) -> None:
        safe = make_safe(tool, args)
        check_reply(tool, safe, raw.call(tool, safe, timeout=120))

    run()
