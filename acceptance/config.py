"""Acceptance configuration: check definitions, the three config layers, the resolved check set.

Source: 20-acceptance §1.1–§1.2 (check definition, ``split_cmd``), §2 (layers, merge, base check set,
extraChecks, derived defaults). Deliberate deviation from §2.3: Python projects are detected from
``pytest.ini``, ``pyproject.toml [tool.pytest.ini_options]``, ``setup.cfg [tool:pytest]``,
``tox.ini [pytest]`` or a ``tests/`` directory holding ``test_*.py``, and the derived ``pytest`` check is
then **mandatory** (a Python project's tests must gate the round).

Plain Python: no Prefect, no adapters.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Literal, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..core.errors import ErrorCode, TianshuError
from ..core.i18n import _
from .toolchains.base import Derived
from .toolchains.pytest import detect_pytest  # noqa: F401 - part of this module's API
from .toolchains.registry import toolchains
from .visual.config import VisualConfigError, parse_visual

log = logging.getLogger("tianshu_mcp")

__all__ = [
    "AcceptanceCheck",
    "AcceptanceConfig",
    "AcceptanceConfigError",
    "CheckDef",
    "ResolvedChecks",
    "split_cmd",
    "to_check_def",
    "parse_layer",
    "read_layer",
    "merge_configs",
    "resolve_layers",
    "derive_default_checks",
    "resolve_checks",
    "summarize_resolved",
    "global_layer_path",
    "project_layer_path",
    "BASELINE_POLICIES",
    "DEFAULT_BASELINE_POLICY",
]

GLOBAL_FILE = "acceptance.default.json"
PROJECT_DIR = ".tianshu-mcp"
PROJECT_FILE = "acceptance.json"

BASELINE_POLICIES = ("tolerate-untargeted", "strict", "regressions-only")
"""Values of ``baselinePolicy`` (see :mod:`tianshu_mcp.acceptance.grading`):

* ``tolerate-untargeted`` (default): regressions and new failures of mandatory checks fail the round;
  a mandatory check whose failing tests were all already failing at baseline, and none of which the
  task text names, does not (reported as ``still_failing``, not counted);
* ``strict``: every failing mandatory check fails the round (the baseline comparison is only reported);
* ``regressions-only``: only what got worse than the baseline (regressions and new failures) fails
  the round; still-failing tests never count, even when the task names them.
"""
DEFAULT_BASELINE_POLICY = "tolerate-untargeted"
MAX_CHECKS = 100
"""At most this many checks per layer or per ``extraChecks`` (input issue: 200,000 extra checks were
accepted and ran for 48 s; 20,000 override checks all ran)."""

_SPLIT_RE = re.compile(r'"([^"]*)"|\'([^\']*)\'|(\S+)')


def split_cmd(s: str) -> list[str]:
    """Split a command string into argv exactly like the original ``splitCmd`` (20-acceptance §1.2).

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
    """One raw check of an acceptance layer (20-acceptance §1.1, 10-tools AcceptanceCheck).

    ``{name: str≥1, cmd: str≥1 | [str≥1, …≥1], timeoutMs?: int>0 (ms), optional?: bool,
    junitXml?: str}``; unknown keys are dropped. ``junitXml`` is a project-relative glob of the JUnit
    XML reports the command writes (issue 13): the counts, failed ids and directives then come from
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
    timeout_ms: int | None = Field(None, alias="timeoutMs", json_schema_extra=_wire(
        {"type": "integer", "exclusiveMinimum": 0, "description": "per-check timeout, ms"}))
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
        if value.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", value) or ".." in re.split(r"[\\/]", value):
            raise ValueError("junitXml must be a glob relative to the project, without '..'")
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


class AcceptanceConfig(BaseModel):
    """One acceptance layer, partial: no defaults are materialised (20-acceptance §2.1).

    ``{checks?: [AcceptanceCheck], requireChanges?: bool, verifyConcurrency?: number, visual?: object,
    baselineChecks?: bool, baselinePolicy?: "tolerate-untargeted"|"strict"|"regressions-only"}``.
    ``verifyConcurrency`` is normalised: non-finite → 1, else ``clamp(round(n), 1, 4)``. ``visual`` is
    validated with :func:`.visual.config.parse_visual` (30-visual §1) and kept as the raw object.
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

    @model_validator(mode="before")
    @classmethod
    def _no_null(cls, data: Any) -> Any:
        if data is not None and not isinstance(data, Mapping):
            raise ValueError("the acceptance config must be a JSON object")
        return _reject_null(
            data, ("checks", "requireChanges", "verifyConcurrency", "visual", "baselineChecks", "baselinePolicy")
        )

    @field_validator("baseline_policy", mode="before")
    @classmethod
    def _policy(cls, value: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, str) or value not in BASELINE_POLICIES:
            raise ValueError(f"baselinePolicy must be one of {', '.join(BASELINE_POLICIES)}")
        return value

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
        # 30-visual §1: the whole block is validated (rule 2 even when disabled) but stored raw, since
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
    """Validate one layer's decoded JSON with the partial schema (20-acceptance §2.1).

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


MAX_LAYER_BYTES = 1 << 20  # an acceptance layer is a small JSON file


def read_layer_bytes(path: str | os.PathLike[str], layer: str) -> bytes | None:
    """The raw bytes of one acceptance layer file, None when it does not exist (ENOENT only).

    Raises:
        AcceptanceConfigError: ``CONFIG_UNREADABLE`` for any other read error (e.g. the path is a
            directory, a FIFO, larger than :data:`MAX_LAYER_BYTES`, no permission).
    """
    p = os.fspath(path)
    try:
        st = os.stat(p)
        if not stat.S_ISREG(st.st_mode):
            # port: a FIFO would block the round forever, /dev/zero would exhaust memory
            raise AcceptanceConfigError(ErrorCode.CONFIG_UNREADABLE,
                                        _("{layer} acceptance config {path} is not a regular file").format(
                                            layer=layer, path=p),
                                        layer=layer, path=p)
        if st.st_size > MAX_LAYER_BYTES:
            raise AcceptanceConfigError(ErrorCode.CONFIG_UNREADABLE,
                                        _("{layer} acceptance config {path} is larger than {n} bytes").format(
                                            layer=layer, path=p, n=MAX_LAYER_BYTES),
                                        layer=layer, path=p)
        with open(p, "rb") as fh:
            return fh.read(MAX_LAYER_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise AcceptanceConfigError(
            ErrorCode.CONFIG_UNREADABLE,
            _("{layer} acceptance config {path} cannot be read: {error}").format(layer=layer, path=p,
                                                                                 error=exc.strerror or exc),
            layer=layer,
            path=p,
        ) from exc


def parse_layer_bytes(raw: bytes, layer: str, path: str) -> AcceptanceConfig:
    """Decode (UTF-8, BOM allowed) and validate one layer's bytes.

    Raises:
        AcceptanceConfigError: ``CONFIG_INVALID`` for bad JSON or a schema violation.
    """
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise AcceptanceConfigError(
            ErrorCode.CONFIG_INVALID,
            _("{layer} acceptance config {path} is not valid JSON: {error}").format(layer=layer, path=path, error=exc),
            layer=layer,
            path=path,
        ) from exc
    return parse_layer(data, layer, path)


def read_layer(path: str | os.PathLike[str], layer: str) -> AcceptanceConfig | None:
    """Read one acceptance layer file (20-acceptance §2.1 ``readAcceptanceLayer``).

    Returns:
        The parsed layer, or None when the file does not exist (ENOENT only).

    Raises:
        AcceptanceConfigError: ``CONFIG_UNREADABLE`` (:func:`read_layer_bytes`) or
            ``CONFIG_INVALID`` (:func:`parse_layer_bytes`). The message contains the layer label
            and the path.
    """
    raw = read_layer_bytes(path, layer)
    return None if raw is None else parse_layer_bytes(raw, layer, os.fspath(path))


@dataclass(frozen=True)
class PinnedRules:
    """The acceptance rules as they were at the task's baseline (input issue: an agent rewrote
    the files it is judged by and passed). Made and stored by :mod:`.pinning`.

    Attributes:
        global_raw: bytes of ``<home>/acceptance.default.json``, None when it did not exist.
        project_raw: bytes of ``<project>/.tianshu-mcp/acceptance.json``, None when absent.
        project_verify: the projects.json ``verify`` entries, None when there were none.
        derived: the derived default checks (``CheckDef.to_json`` form) at the baseline.
        tool_dirs: the project's tool directories (``.venv/bin``, ``node_modules/.bin``) that
            existed at the baseline (None: unknown, use those that exist now).
    """

    global_raw: bytes | None
    project_raw: bytes | None
    project_verify: list[dict[str, Any]] | None = None
    derived: list[dict[str, Any]] = field(default_factory=list)
    tool_dirs: list[str] | None = None


def merge_configs(base: AcceptanceConfig, over: AcceptanceConfig) -> AcceptanceConfig:
    """Shallow merge (20-acceptance §2.1): every key ``over`` defines replaces ``base``'s wholesale.

    ``checks`` lists replace (never concatenate); ``visual`` replaces (no deep merge).
    """
    merged = base.defined()
    merged.update(over.defined())
    return AcceptanceConfig.model_construct(**merged)


def global_layer_path(home: str | os.PathLike[str]) -> Path:
    """``<home>/acceptance.default.json``."""
    return Path(home) / GLOBAL_FILE


def project_layer_path(project: str | os.PathLike[str]) -> Path:
    """``<project>/.tianshu-mcp/acceptance.json``."""
    return Path(project) / PROJECT_DIR / PROJECT_FILE


def resolve_layers(
    project: str | os.PathLike[str] | None,
    home: str | os.PathLike[str],
    override: Mapping[str, Any] | AcceptanceConfig | None,
    pinned: PinnedRules | None = None,
) -> tuple[AcceptanceConfig, list[dict[str, str]]]:
    """Fold global → project → override (20-acceptance §2.1 ``resolveAcceptanceLayers``).

    ``pinned`` replaces the global and project files with their content at the task's baseline.

    Returns:
        ``(merged, applied)`` where ``applied`` = ``[{"source", "path"}]`` for existing layers only.

    Raises:
        AcceptanceConfigError: from :func:`read_layer` / :func:`parse_layer`.
    """
    merged = AcceptanceConfig()
    applied: list[dict[str, str]] = []
    gpath = global_layer_path(home)
    if pinned is None:
        layer = read_layer(gpath, "global")
    else:
        layer = None if pinned.global_raw is None else parse_layer_bytes(
            pinned.global_raw, "global", f"{gpath} (as of the task's baseline)")
    if layer is not None:
        merged = merge_configs(merged, layer)
        applied.append({"source": "global", "path": str(gpath)})
    if project is not None:
        ppath = project_layer_path(project)
        if pinned is None:
            layer = read_layer(ppath, "project")
        else:
            label = f"{ppath} (as of the task's baseline)"
            layer = None if pinned.project_raw is None else parse_layer_bytes(pinned.project_raw, "project", label)
        if layer is not None:
            merged = merge_configs(merged, layer)
            applied.append({"source": "project", "path": str(ppath)})
    if override is not None:
        layer = override if isinstance(override, AcceptanceConfig) else parse_layer(override, "override", "acceptanceOverride")
        merged = merge_configs(merged, layer)
        applied.append({"source": "override", "path": "acceptanceOverride"})
    return merged, applied


# --------------------------------------------------------------------------------------------
# Normalised check definitions
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckDef:
    """A normalised check (20-acceptance §1.1 ``AcceptanceCheckDef``).

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


# --------------------------------------------------------------------------------------------
# Derived defaults (§2.3, extended: every registered toolchain's ``detect``)
# --------------------------------------------------------------------------------------------


def derive_default_checks(project: str | os.PathLike[str]) -> tuple[list[CheckDef], list[str]]:
    """Default checks from the project's tech stack (20-acceptance §2.3, extended).

    Every registered toolchain (:mod:`.toolchains.registry`, in its order) may derive checks:
    ``package.json`` scripts → ``npm run <s>`` for each of typecheck/lint/test/build (mandatory);
    else ``tsconfig.json`` → the optional ``typecheck-tsc``; a pytest project → ``pytest -q``
    (mandatory; the project's virtualenv pytest when present); ``go.mod`` → ``go-test``;
    ``Cargo.toml`` → ``cargo-test`` (port: tests gate the round whatever the language; the original
    made them optional); and the newer toolchains (Maven, Gradle, .NET, …), which also name the
    JUnit XML their runner writes (``junitXml``). A name already derived is not derived twice.

    Returns:
        ``(checks, notes)``; an empty project gives ``([], [])``. Never raises (a toolchain whose
        detection raises is logged and skipped).
    """
    root = Path(project)
    derived: list[Derived] = []
    notes: list[str] = []
    for tc in toolchains():
        if tc.detect is None:
            continue
        try:
            found, said = tc.detect(root, tuple(derived))
        except Exception as exc:  # noqa: BLE001 - one broken toolchain must not sink the others
            log.warning("toolchain %s: detection failed on %s: %s: %s", tc.id, root, type(exc).__name__, exc)
            continue
        names = {d.name for d in derived}
        derived += [d for d in found if d.name not in names]
        notes += said
    checks = [CheckDef.make(d.name, d.argv, optional=d.optional, junit_xml=d.junit_xml) for d in derived]
    return checks, notes


# --------------------------------------------------------------------------------------------
# Full resolution (§2.1 final values + §2.2 base set and extraChecks)
# --------------------------------------------------------------------------------------------


@dataclass
class ResolvedChecks:
    """Outcome of :func:`resolve_checks`.

    Attributes:
        checks: the command checks to run, in order (``git-diff-check`` is NOT included; the engine
            always runs it first).
        require_changes: the zero-change gate switch (default True).
        verify_concurrency: the merged layers' value 1..4, or None (inherit the server config).
        notes: notes for ``analysis.notes``, in the current locale (:mod:`~tianshu_mcp.core.i18n`).
        applied: ``[{"source": "global"|"project"|"override", "path"}]`` of existing layers.
        visual: the merged, still-unvalidated ``visual`` object, or None.
        config: the merged layer config.
        baseline_checks: run the command checks on the baseline too and grade against it
            (``baselineChecks``, default False).
        baseline_policy: ``baselinePolicy`` (default :data:`DEFAULT_BASELINE_POLICY`).
        warnings: warnings for ``analysis.warnings`` (the task changed the project layer), in the
            current locale.
    """

    checks: list[CheckDef]
    require_changes: bool
    verify_concurrency: int | None
    notes: list[str]
    applied: list[dict[str, str]]
    visual: dict[str, Any] | None = None
    config: AcceptanceConfig = field(default_factory=AcceptanceConfig)
    baseline_checks: bool = False
    baseline_policy: str = DEFAULT_BASELINE_POLICY
    warnings: list[str] = field(default_factory=list)


def summarize_resolved(resolved: ResolvedChecks, checks_defined: bool | None = None) -> str:
    """One-line summary logged per round (``summarizeResolved``, 20-acceptance §2.1), English.

    Example: ``layers=global>project checks=2 requireChanges=true verifyConcurrency=(server config) visual=(not configured)``.
    """
    cfg = resolved.config
    layers = ">".join(a["source"] for a in resolved.applied) or "(none)"
    n_checks = str(len(cfg.checks)) if cfg.checks is not None else "(default set)"
    rc = str(cfg.require_changes).lower() if cfg.require_changes is not None else "(default true)"
    vc = str(cfg.verify_concurrency) if cfg.verify_concurrency is not None else "(server config)"
    vis = "overridden" if cfg.visual is not None else "(not configured)"
    out = f"layers={layers} checks={n_checks} requireChanges={rc} verifyConcurrency={vc} visual={vis}"
    if resolved.baseline_checks:
        out += f" baselineChecks=true baselinePolicy={resolved.baseline_policy}"
    return out


def resolve_checks(
    project: str | os.PathLike[str] | None,
    home: str | os.PathLike[str],
    override: Mapping[str, Any] | AcceptanceConfig | None,
    extra_checks: Sequence[AcceptanceCheck | CheckDef | Mapping[str, Any]] | None = None,
    checks_mode: Literal["append", "replace"] | str = "append",
    project_verify: Sequence[AcceptanceCheck | CheckDef | Mapping[str, Any]] | None = None,
    pinned: PinnedRules | None = None,
) -> ResolvedChecks:
    """Resolve the command checks and switches of one verify round (20-acceptance §2.1–§2.3).

    Base set (skipped when ``checks_mode == "replace"`` and extra checks exist): merged layer
    ``checks`` when defined (even ``[]``), else ``project_verify`` (projects.json ``verify``) when
    non-empty, else :func:`derive_default_checks`. ``extra_checks`` are then appended.

    Args:
        project: project root (None in project-less mode: only global + override layers).
        home: data home holding ``acceptance.default.json``.
        override: the task's ``acceptanceOverride`` (raw dict) or None.
        extra_checks: verify_task ``extraChecks`` (raw dicts, models or CheckDefs).
        checks_mode: ``"append"`` (default) or ``"replace"``.
        project_verify: projects.json ``verify`` entries.
        pinned: the rules as of the task's baseline. An agent's round is judged by them: the
            global and project layers and projects.json ``verify`` come from the pin (a change the
            task made is reported in ``warnings`` and applies to later tasks), and derived checks
            are those derivable now plus those derivable at the baseline (the agent may add a
            toolchain, never remove one by deleting its files).

    Returns:
        :class:`ResolvedChecks`.

    Raises:
        AcceptanceConfigError: a layer is unreadable/invalid, or an extra/project check violates
            the schema (``CONFIG_INVALID``, layer ``extraChecks``/``projects.json``).
    """
    merged, applied = resolve_layers(project, home, override, pinned)
    notes: list[str] = []
    warnings = _pin_warnings(project, home, project_verify, pinned) if pinned is not None else []
    if pinned is not None:
        project_verify = pinned.project_verify
    extra = _normalise_list(extra_checks or [], "extraChecks", "extraChecks")
    has_extra = len(extra) > 0
    mode = checks_mode or "append"
    base: list[CheckDef] = []
    if not (mode == "replace" and has_extra):
        if merged.checks is not None:
            base = [to_check_def(c) for c in merged.checks]
            sources = "+".join(a["source"] for a in applied)
            notes.append(_("Using the checks of the acceptance config layers (effective layers {sources}, {n} "
                           "item(s)).").format(sources=sources, n=len(base)))
        elif project_verify:
            base = _normalise_list(project_verify, "projects.json", "projects.json verify")
            notes.append(_("Using the acceptance checks registered in the data home's projects.json ({n} item(s)).")
                         .format(n=len(base)))
        elif project is not None:
            derived, dnotes = derive_default_checks(project)
            base = derived
            notes.extend(dnotes)
            if pinned is not None:
                # the checks derived at the baseline run as they were then (a pytest the task put in a
                # new .venv is not the one that judges it); a toolchain the task added is derived now
                pinned_defs = [to_check_def(d) for d in pinned.derived]
                names = {d.name for d in pinned_defs}
                gone = sorted(names - {d.name for d in derived})
                base = pinned_defs + [d for d in derived if d.name not in names]
                if gone:
                    warnings.append(_("derived at the task's baseline but no longer derivable (kept: the task removed "
                                      "what they run): {checks}").format(checks=", ".join(gone)))
            notes.append(_("Using the default acceptance set (derived from the project's tech stack)."))
    checks = list(base)
    if has_extra:
        checks.extend(extra)
        if mode == "replace":
            notes.append(_("checksMode=replace: only the caller's extraChecks run (project/default checks skipped)."))
        else:
            notes.append(_("extraChecks appends {n} temporary check(s) (the base gate is not replaced).").format(
                n=len(extra)))
    return ResolvedChecks(
        checks=checks,
        require_changes=merged.require_changes if merged.require_changes is not None else True,
        verify_concurrency=merged.verify_concurrency,
        notes=notes,
        applied=applied,
        visual=merged.visual,
        config=merged,
        baseline_checks=bool(merged.baseline_checks),
        baseline_policy=merged.baseline_policy or DEFAULT_BASELINE_POLICY,
        warnings=warnings,
    )


def _pin_warnings(project: str | os.PathLike[str] | None, home: str | os.PathLike[str],
                  project_verify: Sequence[Any] | None, pinned: PinnedRules) -> list[str]:
    """One warning per rule source the task changed since its baseline."""
    def now(path: Path, layer: str) -> bytes | None:
        try:
            return read_layer_bytes(path, layer)
        except AcceptanceConfigError:
            return b"\0unreadable"

    changed = []
    if now(global_layer_path(home), "global") != pinned.global_raw:
        changed.append(str(global_layer_path(home)))
    if project is not None and now(project_layer_path(project), "project") != pinned.project_raw:
        changed.append(str(project_layer_path(project)))
    if (list(project_verify) if project_verify else None) != pinned.project_verify:
        changed.append(_("the project's verify entry in projects.json"))
    return [_("the rules changed since the task started ({source}); this round was judged by them as they were "
              "then (the change applies to later tasks)").format(source=c) for c in changed]


def _normalise_list(items: Sequence[Any], layer: str, path: str) -> list[CheckDef]:
    out: list[CheckDef] = []
    for i, item in enumerate(items):
        try:
            out.append(to_check_def(item))
        except ValidationError as exc:
            raise AcceptanceConfigError(
                ErrorCode.CONFIG_INVALID,
                _("{layer} check #{i} ({path}) is invalid: {details}").format(layer=layer, i=i, path=path,
                                                                              details=_format_validation(exc)),
                layer=layer,
                path=path,
            ) from exc
    return out
