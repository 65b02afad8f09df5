"""The published JSON Schema of ``acceptance.json`` (all three layers share it), generated from the
pydantic models so the schema and the validation can never disagree.

``acceptance/acceptance.schema.json`` is the checked-in copy (``tianshu-mcp config schema`` prints
the live one; a test keeps them equal). Editors can point ``"$schema"`` at it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .config import AcceptanceConfig
from .visual.config import visual_json_schema

SCHEMA_FILE = Path(__file__).with_name("acceptance.schema.json")
SCHEMA_ID = "https://tianshu-mcp.invalid/schemas/acceptance.schema.json"


def acceptance_json_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of one acceptance layer (camelCase keys, unknown top-level keys
    allowed); ``visual`` refers to the full ``VisualConfig`` definition (docs/visual.md §1, strict)."""
    schema = AcceptanceConfig.model_json_schema(by_alias=True, mode="validation")
    visual = visual_json_schema()
    defs = schema.setdefault("$defs", {})
    defs.update(visual.pop("$defs", {}))
    defs["VisualConfig"] = visual
    schema["properties"]["visual"] = {"$ref": "#/$defs/VisualConfig"}
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = SCHEMA_ID
    schema["title"] = "tianshu-mcp acceptance.json"
    schema.setdefault("description", "Acceptance configuration layer: global acceptance.default.json, "
                                     "project .tianshu-mcp/acceptance.json, or a task's acceptanceOverride.")
    return schema


def write_schema_file() -> Path:
    """Regenerate the checked-in schema file; returns its path."""
    SCHEMA_FILE.write_text(json.dumps(acceptance_json_schema(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return SCHEMA_FILE
