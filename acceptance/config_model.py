"""Acceptance check and layer models: the raw JSON shapes (pydantic, published as the
acceptance.json schema), their parsing with coded errors, ``split_cmd`` and the normalised
:class:`CheckDef`.

Source: docs/acceptance.md §1.1–§1.2 (check definition, ``split_cmd``), §2.1 (layer fields). The layers,
derived checks and the resolved check set are in :mod:`.config`, which re-exports all of this.

Plain Python: no Prefect, no adapters.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..core.errors import ErrorCode, TianshuError
from ..core.i18n import _
from ..core.settings import MAX_TIMEOUT_MS
from .toolchains.formats.junit_files import check_pattern
from .visual.config import VisualConfigError, parse_visual

GLOBAL_FILE = "acceptance.default.json"
PROJECT_DIR = ".tianshu-mcp"
PROJECT_FILE = "acceptance.json"

BASELINE_POLICIES = ("tolerate-untargeted", "strict", "regressions-only")
"""Values of ``baselinePolicy`` (see :mod:`tianshu_mcp.acceptance.grading.grade`):

* ``tolerate-untargeted`` (default): regressions and new failures of mandatory checks fail the round;
  a mandatory check whose failing tests were all already failing at baseline, and none of which the
  task text names, does not (reported as ``still_failing``, not counted);
* ``strict``: every failing mandatory check fails the round (the baseline comparison is only reported);
* ``regressions-only``: only what got worse than the baseline (regressions and new failures) fails
  the round; still-failing tests never count, even when the task names them.
"""
DEFAULT_BASELINE_POLICY = "tolerate-untargeted"
TEST_INTEGRITY_POLICIES = ("protect", "allow-test-edits", "off")
"""Values of ``testIntegrity`` (docs/integrity.md; see :mod:`tianshu_mcp.acceptance.integrity`), default
``protect``."""
MAX_CHECKS = 100
"""At most this many checks per layer or per ``extraChecks`` (docs/robustness.md §10: 200,000 extra checks
were accepted and ran for 48 s; 20,000 override checks all ran)."""

_SPLIT_RE = re.compile(r'"([^"]*)"|\'([^\']*)\'|(\S+)')


def split_cmd(s: str) -> list[str]:
    """Split a command string into argv exactly like the original ``splitCmd`` (docs/acceptance.md §1.2).

    Left to right, first match wins: ``"…"`` → inside, ``'…'`` → inside, else a maximal run of
    non-whitespace verbatim. No escapes, no error on an unclosed quote (it stays part of a plain
    token), ``""`` gives an empty token, quotes glued to other text are kept.

    Examples:
        >>> split_cmd('npm run "a b"')
        ['npm', 'run', 'a b']
        >>> split_cmd('node "a\\\\"b"')
        ['node', 'a\\\\', 'b"']
        >>> split_cmd('a"b c"')
        ['a"b', 'c"']
    """
    out: list[str] = []
    for m in _SPLIT_RE.finditer(s):
        if m.group(1) is not None:
            out.append(m.group(1))
        elif m.group(2) is not None:
            out.append(m.group(2))
        else:
            out.append(m.group(3))
    return out


# --------------------------------------------------------------------------------------------
# Raw config models (partial schema, unknown keys dropped)
# --------------------------------------------------------------------------------------------


def _reject_null(data: Any, keys: Iterable[str]) -> Any:
    if isinstance(data, Mapping):
        for key in keys:
            if key in data and data[key] is None:
                raise ValueError(f"{key}: must not be null (omit the key instead)")
    return data


def _wire(schema: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    """``json_schema_extra`` that replaces a field's generated schema with its real wire contract
    (the before-validators enforce more than the Python types say: no nulls, non-empty argv,
    positive timeouts, the policy names), so the published schema rejects what the models reject."""

    def apply(generated: dict[str, Any]) -> None:
        title = generated.get("title")
        generated.clear()
        generated.update(schema)
        if title:
            generated["title"] = title

    return apply


def _drop_null_branch(generated: dict[str, Any]) -> None:
    """``json_schema_extra``: keep the generated schema minus its ``null`` alternative (explicit
    JSON null is rejected; an optional key is simply omitted)."""
    branches = [b for b in generated.pop("anyOf", []) if b.get("type") != "null"]
    generated.pop("default", None)
    if len(branches) == 1:
        generated.update(branches[0])
    elif branches:
        generated["anyOf"] = branches


_STR1 = {"type": "string", "minLength": 1}
# a standalone shell operator token, or a token glued to a trailing ';' (see AcceptanceCheck._check_cmd)
_SHELL_OP_PATTERN = r"(^|\s)(&&|\|\||\||;|&|>|>>|<|2>|2>&1|\|&)(\s|$)|\S;(\s|$)"

SHELL_OPERATORS = frozenset({"&&", "||", "|", ";", "&", ">", ">>", "<", "2>", "2>&1", "|&"})


class AcceptanceCheck(BaseModel):
    """One raw check of an acceptance layer (docs/acceptance.md §1.1, docs/tools.md AcceptanceCheck).

    ``{name: str≥1, cmd: str≥1 | [str≥1, …≥1], timeoutMs?: int>0 (ms), optional?: bool,
    junitXml?: str}``; unknown keys are dropped. ``junitXml`` is a project-relative glob of the JUnit
    XML reports the command writes (docs/toolchains.md): the counts, failed ids and directives then come from
    them, before any text heuristic; a report older than the check's start is ignored and said so.
    """

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    name: str = Field(min_length=1, strict=True, json_schema_extra=_wire(
        {"type": "string", "minLength": 1, "pattern": "^[^\\x00-\\x1f\\x7f]+$",
         "description": "one line: shown in reports"}))
    cmd: str | list[str] = Field(json_schema_extra=_wire({
        "oneOf": [{**_STR1, "pattern": "\\S", "not": {"pattern": _SHELL_OP_PATTERN}},
                  {"type": "array", "items": _STR1, "minItems": 1}],
        "description": "argv array (preferred) or a string split by the splitCmd rules; never run through a shell"}))
    timeout_ms: int | None = Field(None, alias="timeoutMs", le=MAX_TIMEOUT_MS, json_schema_extra=_wire(
        {"type": "integer", "exclusiveMinimum": 0, "maximum": MAX_TIMEOUT_MS, "description": "per-check timeout, ms (at most 24 h)"}))
    optional: bool | None = Field(None, strict=True, json_schema_extra=_wire({"type": "boolean"}))
    junit_xml: str | None = Field(None, alias="junitXml", json_schema_extra=_wire({
        "type": "string", "minLength": 1, "maxLength": 500, "pattern": "^(?!/)(?!.*(^|/)\\.\\.(/|$))[^\\x00-\\x1f\\x7f]+$",
        "description": "project-relative glob of the JUnit XML reports the command writes (e.g. "
                       "target/surefire-reports/TEST-*.xml): counts and failed tests come from them"}))

    @model_validator(mode="before")
    @classmethod
    def _no_null(cls, data: Any) -> Any:
        return _reject_null(data, ("name", "cmd", "timeoutMs", "optional", "junitXml"))

    @field_validator("junit_xml", mode="before")
    @classmethod
    def _check_junit_xml(cls, value: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip() or len(value) > 500:
            raise ValueError("junitXml must be a non-empty glob of at most 500 characters")
        if re.search(r"[\x00-\x1f\x7f]", value):
            raise ValueError("junitXml must be one line without control characters")
        try:
            check_pattern(value)
        except ValueError as exc:
            raise ValueError(str(exc).removeprefix("junitXml: ")) from None
        return value

    @field_validator("name", mode="before")
    @classmethod
    def _one_line_name(cls, value: Any) -> Any:
        # port: a newline in a name could forge lines in the markdown report
        if isinstance(value, str) and re.search(r"[\x00-\x1f\x7f]", value):
            raise ValueError("name must be a single line without control characters")
        return value

    @field_validator("cmd", mode="before")
    @classmethod
    def _check_cmd(cls, value: Any) -> Any:
        if isinstance(value, str):
            if not value.strip():
                raise ValueError("cmd must be a non-empty string or a non-empty list of non-empty strings")
            # port: checks never run through a shell, so a shell operator in the string form would
            # silently become an argument (`true && false` passes); refuse it with the reason
            ops = [t for t in split_cmd(value) if t in SHELL_OPERATORS or (len(t) > 1 and t.endswith(";"))]
            if ops:
                raise ValueError(f"cmd contains the shell operator '{ops[0]}', but checks never run through a shell; "
                                 "use an argv array, and a script for pipelines or chains")
            return value
        if isinstance(value, list):
            if not value or not all(isinstance(v, str) and v for v in value):
                raise ValueError("cmd must be a non-empty string or a non-empty list of non-empty strings")
            return list(value)
        raise ValueError("cmd must be a string or a list of strings")

    @field_validator("timeout_ms", mode="before")
    @classmethod
    def _check_timeout(cls, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError("timeoutMs must be a positive integer (milliseconds)")
        if isinstance(value, float):
            if not math.isfinite(value) or value != int(value):
                raise ValueError("timeoutMs must be a positive integer (milliseconds)")
            value = int(value)
        if value <= 0:
            raise ValueError("timeoutMs must be a positive integer (milliseconds)")
        return value


def _one_of(value: Any, allowed: Sequence[str], name: str) -> Any:
    """``value`` when it is None or one of ``allowed``; else ValueError naming the field."""
    if value is not None and (not isinstance(value, str) or value not in allowed):
        raise ValueError(f"{name} must be one of {', '.join(allowed)}")
    return value


class AcceptanceConfig(BaseModel):
    """One acceptance layer, partial: no defaults are materialised (docs/acceptance.md §2.1).

    ``{checks?: [AcceptanceCheck], requireChanges?: bool, verifyConcurrency?: number, visual?: object,
    baselineChecks?: bool, baselinePolicy?: "tolerate-untargeted"|"strict"|"regressions-only",
    testIntegrity?: "protect"|"allow-test-edits"|"off"}``.
    ``verifyConcurrency`` is normalised: non-finite → 1, else ``clamp(round(n), 1, 4)``. ``visual`` is
    validated with :func:`.visual.config.parse_visual` (docs/visual.md §1) and kept as the raw object.
    ``None`` means "not defined by this layer"; explicit JSON ``null`` is rejected. Unknown top-level
    keys are dropped.
    """

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    checks: list[AcceptanceCheck] | None = Field(None, max_length=MAX_CHECKS, json_schema_extra=_drop_null_branch)
    require_changes: bool | None = Field(None, alias="requireChanges", strict=True, json_schema_extra=_wire(
        {"type": "boolean", "description": "fail a git project whose work changed no file (default true)"}))
    verify_concurrency: int | None = Field(None, alias="verifyConcurrency", json_schema_extra=_wire(
        {"type": "number", "description": "checks run at once; rounded and clamped to 1..4"}))
    visual: dict[str, Any] | None = Field(None, json_schema_extra=_wire({"type": "object"}))
    baseline_checks: bool | None = Field(None, alias="baselineChecks", strict=True, json_schema_extra=_wire(
        {"type": "boolean", "description": "also run the checks on the pre-work baseline and grade against it"}))
    baseline_policy: str | None = Field(None, alias="baselinePolicy", json_schema_extra=_wire(
        {"enum": list(BASELINE_POLICIES)}))
    test_integrity: str | None = Field(None, alias="testIntegrity", json_schema_extra=_wire(
        {"enum": list(TEST_INTEGRITY_POLICIES),
         "description": "protect (default): judge on the baseline's tests; allow-test-edits: the brief is to "
                        "change tests; off"}))

    @model_validator(mode="before")
    @classmethod
    def _no_null(cls, data: Any) -> Any:
        if data is not None and not isinstance(data, Mapping):
            raise ValueError("the acceptance config must be a JSON object")
        return _reject_null(
            data, ("checks", "requireChanges", "verifyConcurrency", "visual", "baselineChecks", "baselinePolicy",
                   "testIntegrity")
        )

    @field_validator("baseline_policy", mode="before")
    @classmethod
    def _policy(cls, value: Any) -> Any:
        return _one_of(value, BASELINE_POLICIES, "baselinePolicy")

    @field_validator("test_integrity", mode="before")
    @classmethod
    def _integrity(cls, value: Any) -> Any:
        return _one_of(value, TEST_INTEGRITY_POLICIES, "testIntegrity")

    @field_validator("verify_concurrency", mode="before")
    @classmethod
    def _clamp(cls, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError("verifyConcurrency must be a number")
        if isinstance(value, float) and not math.isfinite(value):
            return 1
        return max(1, min(4, math.floor(value + 0.5)))

    @field_validator("visual", mode="before")
    @classmethod
    def _visual_obj(cls, value: Any) -> Any:
        # docs/visual.md §1: the whole block is validated (rule 2 even when disabled) but stored raw, since
        # layers replace it wholesale; the message names the path below "visual", e.g.
        # "visual: pages[0].source.readyUrl: host must be exactly localhost, 127.0.0.1 or [::1]"
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise ValueError("visual must be an object")
        try:
            parse_visual(value)
        except VisualConfigError as exc:
            rel = exc.path[len("visual"):].lstrip(".")
            raise ValueError(f"{rel}: {exc.detail}" if rel else exc.detail) from None
        return dict(value)

    def defined(self) -> dict[str, Any]:
        """The keys this layer defines (non-None), by field name."""
        return {k: getattr(self, k) for k in type(self).model_fields if getattr(self, k) is not None}

    def to_json(self) -> dict[str, Any]:
        """Wire form (camelCase), defined keys only."""
        return self.model_dump(by_alias=True, exclude_none=True)


class AcceptanceConfigError(TianshuError):
    """A config layer could not be read (``CONFIG_UNREADABLE``) or parsed (``CONFIG_INVALID``).

    Attributes: ``layer`` (``global``/``project``/``override``), ``path`` (file path or
    ``acceptanceOverride``). The message names both and, for schema errors, the offending field.
    """

    def __init__(self, code: ErrorCode, message: str, *, layer: str, path: str) -> None:
        super().__init__(code, message)
        self.layer = layer
        self.path = path


def _format_validation(exc: ValidationError) -> str:
    parts: list[str] = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ())) or "(root)"
        msg = err.get("msg", "invalid")
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        parts.append(f"{loc}: {msg}")
    return "; ".join(parts) or str(exc)


def parse_layer(data: Any, layer: str, path: str) -> AcceptanceConfig:
    """Validate one layer's decoded JSON with the partial schema (docs/acceptance.md §2.1).

    Raises:
        AcceptanceConfigError: ``CONFIG_INVALID``, message
            ``"<layer> acceptance config <path> is invalid: <field>: <msg>"``.
    """
    try:
        return AcceptanceConfig.model_validate(data)
    except ValidationError as exc:
        raise AcceptanceConfigError(
            ErrorCode.CONFIG_INVALID,
            _("{layer} acceptance config {path} is invalid: {details}").format(layer=layer, path=path,
                                                                               details=_format_validation(exc)),
            layer=layer,
            path=path,
        ) from exc



# --------------------------------------------------------------------------------------------
# Normalised check definitions
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckDef:
    """A normalised check (docs/acceptance.md §1.1 ``AcceptanceCheckDef``).

    ``cmd`` is argv (never run through a shell); ``display_cmd`` = ``" ".join(cmd)``;
    ``timeout_ms`` in ms (None → the engine default); ``optional`` checks never fail the round.
    """

    name: str
    cmd: tuple[str, ...]
    display_cmd: str
    timeout_ms: int | None = None
    optional: bool = False
    junit_xml: str | None = None

    @classmethod
    def make(cls, name: str, cmd: Sequence[str], *, timeout_ms: int | None = None, optional: bool = False,
             junit_xml: str | None = None) -> "CheckDef":
        """Build from argv; ``display_cmd`` is derived."""
        argv = tuple(cmd)
        return cls(name=name, cmd=argv, display_cmd=" ".join(argv), timeout_ms=timeout_ms, optional=optional,
                   junit_xml=junit_xml)

    def to_json(self) -> dict[str, Any]:
        """``{name, cmd: [..], displayCmd, timeoutMs?, optional?, junitXml?}``."""
        out: dict[str, Any] = {"name": self.name, "cmd": list(self.cmd), "displayCmd": self.display_cmd}
        if self.timeout_ms is not None:
            out["timeoutMs"] = self.timeout_ms
        if self.optional:
            out["optional"] = True
        if self.junit_xml:
            out["junitXml"] = self.junit_xml
        return out


def to_check_def(check: AcceptanceCheck | CheckDef | Mapping[str, Any]) -> CheckDef:
    """Normalise a raw check (``toAcceptanceDef``): list cmd copied, str cmd → :func:`split_cmd`.

    Raises:
        pydantic.ValidationError: a mapping that violates the :class:`AcceptanceCheck` schema.
    """
    if isinstance(check, CheckDef):
        return check
    if not isinstance(check, AcceptanceCheck):
        check = AcceptanceCheck.model_validate(check)
    argv = list(check.cmd) if isinstance(check.cmd, list) else split_cmd(check.cmd)
    return CheckDef.make(check.name, argv, timeout_ms=check.timeout_ms, optional=bool(check.optional),
                         junit_xml=check.junit_xml)
