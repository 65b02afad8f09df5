"""The published JSON Schema of acceptance.json agrees with the models that validate it (docs/acceptance.md
§8.2)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from tianshu_mcp.acceptance.config import AcceptanceConfigError, parse_layer
from tianshu_mcp.acceptance.schema import SCHEMA_FILE, acceptance_json_schema


def test_the_checked_in_schema_is_the_generated_one() -> None:
    # regenerate with: python -c "from tianshu_mcp.acceptance.schema import write_schema_file; write_schema_file()"
    assert json.loads(SCHEMA_FILE.read_text()) == acceptance_json_schema()
    Draft202012Validator.check_schema(acceptance_json_schema())


CASES: list[tuple[Any, bool]] = [
    ({}, True),
    ({"checks": [{"name": "t", "cmd": ["pytest", "-q"], "timeoutMs": 1000, "optional": True}]}, True),
    ({"checks": [{"name": "t", "cmd": "npm test"}], "requireChanges": False, "verifyConcurrency": 3}, True),
    ({"baselineChecks": True, "baselinePolicy": "strict"}, True),
    ({"visual": {"enabled": False}}, True),
    ({"unknownKey": 1}, True),  # unknown keys are dropped, not errors
    ({"checks": [{"name": "t"}]}, False),
    ({"checks": [{"name": "", "cmd": ["x"]}]}, False),
    ({"checks": [{"name": "t", "cmd": []}]}, False),
    ({"checks": [{"name": "t", "cmd": ["x"], "timeoutMs": 0}]}, False),
    ({"checks": [{"name": "t", "cmd": ["x"], "timeoutMs": -5}]}, False),
    ({"checks": "pytest"}, False),
    ({"checks": [{"name": "t", "cmd": "   "}]}, False),
    ({"checks": [{"name": "t", "cmd": "a && b"}]}, False),
    ({"checks": [{"name": "t", "cmd": "echo hi; false"}]}, False),
    ({"checks": [{"name": "t", "cmd": ["echo", "a && b"]}]}, True),
    ({"checks": [{"name": "two\nlines", "cmd": ["x"]}]}, False),
    ({"requireChanges": "yes"}, False),
    ({"baselinePolicy": "whatever"}, False),
    ([], False),
]


@pytest.mark.parametrize(("config", "valid"), CASES)
def test_schema_and_models_agree(config: Any, valid: bool) -> None:
    schema_ok = Draft202012Validator(acceptance_json_schema()).is_valid(config)
    try:
        parse_layer(config, "project", "acceptance.json")
        model_ok = True
    except AcceptanceConfigError:
        model_ok = False
    assert (schema_ok, model_ok) == (valid, valid)
