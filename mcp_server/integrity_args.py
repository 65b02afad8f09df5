"""The verification-integrity arguments of ``run_task`` and ``verify_task`` (docs/integrity.md).

* ``targetTests``: test ids or names the round must find, run and pass (at most
  :data:`~tianshu_mcp.acceptance.integrity.models.MAX_TARGETS`, each one line of 1..500
  characters); stored in ``task.json`` as ``targetTests``.
* ``holdoutChecks``: checks the agent never sees (at most
  :data:`~tianshu_mcp.acceptance.integrity.models.MAX_HOLDOUT_CHECKS`
  :class:`~tianshu_mcp.acceptance.integrity.models.HoldoutCheck` objects); stored only in
  ``<home>/holdout/tasks/<taskId>.json`` (:mod:`tianshu_mcp.acceptance.integrity.holdout_store`), counted in
  ``task.json`` as ``holdoutCount``, hashed (never written in clear) for idempotency.

The JSON Schemas below are what ``tools/list`` publishes; the schema check runs first, then the
functions here apply the models' rules, so a bad value is ``INVALID_ARGUMENT`` naming the field
(``targetTests[2]``, ``holdoutChecks[0].files``) and never ``INTERNAL``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from ..acceptance.integrity.holdout_store import describe_error
from ..acceptance.integrity.models import (
    MAX_HOLDOUT_CHECKS,
    MAX_HOLDOUT_FILE_BYTES,
    MAX_TARGETS,
    HoldoutCheck,
    validate_target,
)
from ..core.errors import ErrorCode, TianshuError
from .format import clip

TARGET_TESTS_SCHEMA: dict[str, Any] = {
    "type": "array",
    "maxItems": MAX_TARGETS,
    "items": {"type": "string", "minLength": 1, "maxLength": 500},
    "description": f"Tests the work must make pass (test ids or names, e.g. tests/test_calc.py::test_add; at most "
                   f"{MAX_TARGETS}, one line of at most 500 characters each): each must exist, run and pass, on the "
                   f"tree with the baseline's test files. verify_task by taskId uses the task's own unless given.",
}

HOLDOUT_CHECKS_SCHEMA: dict[str, Any] = {
    "type": "array",
    "maxItems": MAX_HOLDOUT_CHECKS,
    "items": {
        "type": "object",
        "additionalProperties": False,
        "required": ["name", "cmd", "area"],
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 200},
            "cmd": {
                "oneOf": [{"type": "string", "minLength": 1, "maxLength": 100000},
                          {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 100000},
                           "minItems": 1, "maxItems": 4096}],
                "description": "argv array (preferred) or a string split like acceptance cmds; never a shell",
            },
            "area": {"type": "string", "minLength": 1, "maxLength": 200,
                     "description": "the behaviour area: all that rework feedback may say about a failure"},
            "timeoutMs": {"type": "integer", "exclusiveMinimum": 0, "maximum": 3600000},
            "files": {"type": "object", "maxProperties": 1000,
                      "additionalProperties": {"type": "string", "maxLength": MAX_HOLDOUT_FILE_BYTES},
                      "description": f"{{relative path: text}} written into the pristine tree before cmd runs "
                                     f"(no '..', not .git; at most {MAX_HOLDOUT_FILE_BYTES} bytes in total)"},
        },
    },
    "description": f"Checks the agent never sees (at most {MAX_HOLDOUT_CHECKS}): run on the pristine tree after "
                   f"the round's checks; a failure names only its area. Kept out of the task record, the brief "
                   f"and every reply (the meta shows holdoutCount). Not available for a remote task.",
}


def check_target_tests(value: Any, field: str = "targetTests") -> list[str]:
    """The validated ``targetTests`` (each stripped), in order.

    Raises:
        TianshuError: INVALID_ARGUMENT naming the field (``targetTests``, ``targetTests[2]``):
            not a list, more than :data:`MAX_TARGETS` items, an entry that is not a non-empty
            one-line string of at most 500 characters.
    """
    if not isinstance(value, list):
        raise TianshuError(ErrorCode.INVALID_ARGUMENT, f"{field}: must be an array of test ids or names")
    if len(value) > MAX_TARGETS:
        raise TianshuError(ErrorCode.INVALID_ARGUMENT, f"{field}: {len(value)} items, at most {MAX_TARGETS} allowed")
    out: list[str] = []
    for i, entry in enumerate(value):
        try:
            out.append(validate_target(entry))
        except ValueError as exc:
            shown = clip(entry) if isinstance(entry, str) else type(entry).__name__
            raise TianshuError(ErrorCode.INVALID_ARGUMENT, f"{field}[{i}]: {exc} (got {shown!r})") from exc
    return out


def check_holdout_checks(value: Any, field: str = "holdoutChecks") -> list[HoldoutCheck]:
    """The validated ``holdoutChecks`` as :class:`HoldoutCheck` models, in order.

    Raises:
        TianshuError: INVALID_ARGUMENT naming the field (``holdoutChecks[1].files``): not a list,
            more than :data:`MAX_HOLDOUT_CHECKS` items, an entry the model refuses (missing
            ``area``, empty ``cmd``, an unknown key, a path with ``..`` or absolute, files over
            :data:`MAX_HOLDOUT_FILE_BYTES` bytes), two checks of one name.
    """
    if not isinstance(value, list):
        raise TianshuError(ErrorCode.INVALID_ARGUMENT, f"{field}: must be an array of holdout checks")
    if len(value) > MAX_HOLDOUT_CHECKS:
        raise TianshuError(ErrorCode.INVALID_ARGUMENT,
                           f"{field}: {len(value)} items, at most {MAX_HOLDOUT_CHECKS} allowed")
    checks: list[HoldoutCheck] = []
    for i, entry in enumerate(value):
        if not isinstance(entry, dict):
            raise TianshuError(ErrorCode.INVALID_ARGUMENT, f"{field}[{i}]: must be an object {{name, cmd, area, ...}}")
        try:
            checks.append(HoldoutCheck.model_validate(entry))
        except ValidationError as exc:
            raise TianshuError(ErrorCode.INVALID_ARGUMENT, clip(describe_error(exc, f"{field}[{i}]"), 600)) from exc
    names = [c.name for c in checks]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise TianshuError(ErrorCode.INVALID_ARGUMENT, f"{field}[{i}].name: {clip(name)!r} is used twice; names "
                                                           f"are unique")
    return checks


def holdout_digest(checks: Sequence[HoldoutCheck]) -> str | None:
    """sha256 (hex) of the checks' canonical JSON, for the idempotency digest (the checks never
    reach ``idempotency.json`` in clear); None for no checks (so a call without them hashes as
    before)."""
    if not checks:
        return None
    text = json.dumps([c.model_dump(by_alias=True) for c in checks], sort_keys=True, ensure_ascii=False,
                      separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def integrity_args(args: dict[str, Any]) -> tuple[list[str] | None, list[HoldoutCheck]]:
    """``(targetTests or None when not given, holdout checks)`` of a run_task/verify_task call.
    Raises TianshuError(INVALID_ARGUMENT) naming the field (see the two checks above)."""
    targets = check_target_tests(args["targetTests"]) if args.get("targetTests") is not None else None
    holdout = check_holdout_checks(args["holdoutChecks"]) if args.get("holdoutChecks") is not None else []
    return targets, holdout
