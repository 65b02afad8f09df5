"""The models of the ``visual`` block of acceptance.json (docs/visual.md §1).

Pydantic v2 models whose attribute names are the JSON keys (camelCase; a snake_case spelling of a
field also reads it, e.g. ``cfg.limits.item_timeout_ms``). Every object is strict: unknown keys,
explicit ``null`` and wrong JSON types are refused; integral floats (``1280.0``) count as integers,
as in JSON. Value rules and the cross-field rules 1–8 live in :mod:`.config_rules` and
:mod:`.config_crossfield`; parsing, the digest and the effective values in :mod:`.config`, which
re-exports these models.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_serializer, model_validator
from pydantic_core import PydanticCustomError

from .config_crossfield import first_rule_violation
from .config_rules import (JsonNumber, Number, Arg, ArgsTemplate, Capture, Coordinate, EnvName,
                           EnvRef, Id, Locale, LocalUrl, Opt, Origin, PngPath, PosInt, Positive,
                           ProjectPath, Ratio, Route, Samples, Selector, Text, Timezone)



def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


class _Strict(BaseModel):
    """Base: unknown keys refused, strict JSON types, ``None`` (omitted optional keys) left out of dumps."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @model_serializer(mode="wrap")
    def _omit_none(self, handler: Any) -> Any:
        data = handler(self)
        return {k: v for k, v in data.items() if v is not None} if isinstance(data, dict) else data

    if not TYPE_CHECKING:  # runtime convenience only: type checkers keep flagging misspelt fields

        def __getattr__(self, name: str) -> Any:
            try:
                return super().__getattr__(name)
            except AttributeError:
                camel = _camel(name)
                if camel != name and camel in type(self).model_fields:
                    return getattr(self, camel)
                raise


class Viewport(_Strict):
    """``{id, width: int px > 0, height: int px > 0, deviceScaleFactor: 0 < n ≤ 4 = 1}`` (§1)."""

    id: Id
    width: PosInt
    height: PosInt
    deviceScaleFactor: Annotated[Number, JsonNumber("a number in (0, 4]", gt=0, le=4)] = 1


DEFAULT_VIEWPORTS = (("desktop", 1280, 720), ("mobile", 390, 844))


def _default_viewports() -> list[Viewport]:
    return [Viewport(id=i, width=w, height=h) for i, w, h in DEFAULT_VIEWPORTS]


class BrowserManaged(_Strict):
    """``{mode: "managed"}``: Debian's Chromium at :data:`.config.MANAGED_CHROMIUM` (Python port)."""

    mode: Literal["managed"]


class BrowserChrome(_Strict):
    """``{mode: "chrome", executablePath?}`` (standard install paths / PATH when omitted)."""

    mode: Literal["chrome"]
    executablePath: Opt[Text] = None


class BrowserEdge(_Strict):
    """``{mode: "edge", executablePath?}``."""

    mode: Literal["edge"]
    executablePath: Opt[Text] = None


class BrowserExecutable(_Strict):
    """``{mode: "executable", executablePath}`` (required)."""

    mode: Literal["executable"]
    executablePath: Text


Browser = Annotated[Union[BrowserManaged, BrowserChrome, BrowserEdge, BrowserExecutable], Field(discriminator="mode")]


class Defaults(_Strict):
    """Page defaults (§1): capture, selector?, pixelThreshold, maxDiffRatio, locale, timezone, colorScheme."""

    model_config = ConfigDict(json_schema_extra={"if": {"properties": {"capture": {"const": "element"}},
                                                        "required": ["capture"]},
                                                 "then": {"required": ["selector"]}})

    capture: Capture = "viewport"
    selector: Opt[Selector] = None
    pixelThreshold: Ratio = 0.1
    maxDiffRatio: Ratio = 0.001
    locale: Locale = "en-US"
    timezone: Timezone = "UTC"
    colorScheme: Literal["light", "dark", "no-preference"] = "light"


class Limits(_Strict):
    """Budgets (§1, §8): ms for ``*Ms``, bytes for ``*Bytes``, px for ``decodedPixels``."""

    concurrency: Annotated[int, JsonNumber("an integer in 1..4", integer=True, ge=1, le=4)] = 1
    serviceTimeoutMs: PosInt = 60_000
    navigationTimeoutMs: PosInt = 30_000
    itemTimeoutMs: PosInt = 60_000
    roundTimeoutMs: PosInt = 300_000
    stabilitySamples: Annotated[int, JsonNumber("an integer in 2..3", integer=True, ge=2, le=3)] = 3
    inputBytes: PosInt = 20_971_520
    decodedPixels: PosInt = 32_000_000
    artifactBytes: PosInt = 524_288_000


class SourceExisting(_Strict):
    """``{type: "existing", url: localUrl}``: used as-is, never started or stopped (§3.1)."""

    type: Literal["existing"]
    url: LocalUrl


class SourceStatic(_Strict):
    """``{type: "static", root: projectRelativePath, port?: 1..65535}`` (§3.1)."""

    type: Literal["static"]
    root: ProjectPath
    port: Opt[Annotated[int, JsonNumber("an integer in 1..65535", integer=True, gt=0, le=65535)]] = None


class SourceCommand(_Strict):
    """``{type: "command", command, args = [], cwd = ".", env = {CHILD: HOST_VAR}, readyUrl: localUrl}``."""

    type: Literal["command"]
    command: Text
    args: list[Arg] = Field(default_factory=list)
    cwd: ProjectPath = "."
    env: dict[EnvName, EnvName] = Field(default_factory=dict)
    readyUrl: LocalUrl


Source = Annotated[Union[SourceExisting, SourceStatic, SourceCommand], Field(discriminator="type")]


class StepClick(_Strict):
    """``{type: "click", selector}``."""

    type: Literal["click"]
    selector: Selector


class StepInput(_Strict):
    """``{type: "input", selector, value}`` (the field is cleared, then typed)."""

    type: Literal["input"]
    selector: Selector
    value: str


class StepHover(_Strict):
    """``{type: "hover", selector}``."""

    type: Literal["hover"]
    selector: Selector


def _has(*keys: str) -> dict[str, Any]:
    """JSON Schema: at least one of ``keys`` is present."""
    return {"anyOf": [{"required": [k]} for k in keys]}


class StepScroll(_Strict):
    """``{type: "scroll", selector?, x?, y?}``: a selector alone, or at least one of x/y (px)."""

    model_config = ConfigDict(json_schema_extra={"oneOf": [{"required": ["selector"], "not": _has("x", "y")},
                                                           {"not": {"required": ["selector"]}, **_has("x", "y")}]})

    type: Literal["scroll"]
    selector: Opt[Selector] = None
    x: Opt[Coordinate] = None
    y: Opt[Coordinate] = None

    @model_validator(mode="after")
    def _one_kind(self) -> "StepScroll":
        coords = self.x is not None or self.y is not None
        if (self.selector is not None) == coords:
            raise ValueError("scroll needs either a selector or coordinates (x and/or y), not both")
        return self


class StepWait(_Strict):
    """``{type: "wait", selector?, state?: visible|hidden, url?: localUrl, durationMs?: 1..60000}``:
    exactly one of selector/url/durationMs; ``state`` only with selector."""

    model_config = ConfigDict(json_schema_extra={
        "oneOf": [{"required": [k]} for k in ("selector", "url", "durationMs")],
        "dependentRequired": {"state": ["selector"]}})

    type: Literal["wait"]
    selector: Opt[Selector] = None
    state: Opt[Literal["visible", "hidden"]] = None
    url: Opt[LocalUrl] = None
    durationMs: Opt[Annotated[int, JsonNumber("an integer in 1..60000 (ms)", integer=True, gt=0, le=60_000)]] = None

    @model_validator(mode="after")
    def _one_condition(self) -> "StepWait":
        if sum(v is not None for v in (self.selector, self.url, self.durationMs)) != 1:
            raise ValueError("wait needs exactly one of selector, url or durationMs")
        if self.state is not None and self.selector is None:
            raise ValueError("wait state is only allowed with a selector")
        return self


Step = Annotated[Union[StepClick, StepInput, StepHover, StepScroll, StepWait], Field(discriminator="type")]


class Range(_Strict):
    """``{exact?, min?, max?}`` of finite numbers > 0: at least one; exact excludes min/max; min ≤ max."""

    model_config = ConfigDict(json_schema_extra={"minProperties": 1, "not": {
        "anyOf": [{"required": ["exact", "min"]}, {"required": ["exact", "max"]}]}})

    exact: Opt[Positive] = None
    min: Opt[Positive] = None
    max: Opt[Positive] = None

    @model_validator(mode="after")
    def _consistent(self) -> "Range":
        if self.exact is None and self.min is None and self.max is None:
            raise ValueError("range needs exact, min or max")
        if self.exact is not None and (self.min is not None or self.max is not None):
            raise ValueError("range exact excludes min and max")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError("range min exceeds max")
        return self


def _unique_files(files: list[str]) -> list[str]:
    seen: set[str] = set()
    for f in files:
        key = f.replace("\\", "/").lower()
        if key in seen:
            raise ValueError(f"duplicate file '{f}' (compared case-insensitively, '\\' as '/')")
        seen.add(key)
    return files


Files = Annotated[list[ProjectPath], Field(min_length=1), AfterValidator(_unique_files)]


class ImageRule(_Strict):
    """An image rule (§1 Image, §2.3): id, optional, files, formats?, width/height/aspectRatio/
    fileSizeBytes (bytes)/dpi ranges, transparency?."""

    id: Id
    optional: bool = False
    files: Files
    formats: Opt[Annotated[list[Literal["png", "jpeg", "webp"]], Field(min_length=1)]] = None
    width: Opt[Range] = None
    height: Opt[Range] = None
    aspectRatio: Opt[Range] = None
    fileSizeBytes: Opt[Range] = None
    dpi: Opt[Range] = None
    transparency: Opt[Literal["transparent", "opaque"]] = None


class ContentCheck(_Strict):
    """A content check (§1, §6.1): expect (1..4000 chars), blocking = false, samples? (1..9),
    allowRemote?, command?, argsTemplate?, cwd?, env? — unset keys fall back to ``visual.content``."""

    expect: Annotated[str, Field(min_length=1, max_length=4000)]
    blocking: bool = False
    samples: Opt[Samples] = None
    allowRemote: Opt[bool] = None
    command: Opt[Text] = None
    argsTemplate: Opt[ArgsTemplate] = None
    cwd: Opt[ProjectPath] = None
    env: Opt[EnvRef] = None


class ContentRule(ContentCheck):
    """A content rule over files (§1): :class:`ContentCheck` + ``id`` + ``files``."""

    id: Id
    files: Files


class ContentConfig(_Strict):
    """Global content-judge settings (§1, §6): enabled, command?, argsTemplate?, cwd?, env?,
    allowRemote, samples, timeoutMs (per sample, ms), minConfidence? (absent = gate off), cache."""

    enabled: bool = False
    command: Opt[Text] = None
    argsTemplate: Opt[ArgsTemplate] = None
    cwd: Opt[ProjectPath] = None
    env: Opt[EnvRef] = None
    allowRemote: bool = False
    samples: Samples = 3
    timeoutMs: PosInt = 90_000
    minConfidence: Opt[Ratio] = None
    cache: bool = True


class Page(_Strict):
    """A page rule (§1 Page, §2.2, §3)."""

    model_config = ConfigDict(json_schema_extra={
        "if": {"properties": {"pixel": {"const": False}}, "required": ["pixel"]},
        "then": {"required": ["content"], "not": _has("baseline", "pixelThreshold", "maxDiffRatio")}})

    id: Id
    optional: bool = False
    source: Source
    route: Route = "/"
    viewports: Opt[Annotated[list[Id], Field(min_length=1, json_schema_extra={"uniqueItems": True})]] = None
    capture: Opt[Capture] = None
    selector: Opt[Selector] = None
    readySelector: Opt[Selector] = None
    maskSelectors: list[Selector] = Field(default_factory=list)
    steps: list[Step] = Field(default_factory=list)
    storageState: Opt[ProjectPath] = None
    baseline: Opt[PngPath] = None
    pixelThreshold: Opt[Ratio] = None
    maxDiffRatio: Opt[Ratio] = None
    pixel: bool = True
    content: Opt[ContentCheck] = None


def _nonempty(key: str) -> dict[str, Any]:
    """JSON Schema: ``key`` is present and a non-empty array."""
    return {"required": [key], "properties": {key: {"minItems": 1}}}


class VisualConfig(_Strict):
    """The ``visual`` block (docs/visual.md §1) with defaults applied. Cross-field rules 1–8 are checked
    on validation (:func:`~.config_crossfield.first_rule_violation`)."""

    model_config = ConfigDict(json_schema_extra={"allOf": [
        {"if": {"properties": {"enabled": {"const": True}}, "required": ["enabled"]},
         "then": {"anyOf": [_nonempty("pages"), _nonempty("images"), _nonempty("contents")]}},
        {"if": {"anyOf": [_nonempty("contents"),
                          {"required": ["pages"], "properties": {"pages": {"contains": {"required": ["content"]}}}}]},
         "then": {"required": ["content"], "properties": {"content": {
             "required": ["enabled"], "properties": {"enabled": {"const": True}}}}}},
    ]})

    enabled: bool = False
    browser: Browser = Field(default_factory=lambda: BrowserManaged(mode="managed"))
    baselineRoot: ProjectPath = "tests/visual/baselines"
    viewports: Annotated[list[Viewport], Field(min_length=1)] = Field(default_factory=_default_viewports)
    defaults: Defaults = Field(default_factory=Defaults)
    limits: Limits = Field(default_factory=Limits)
    allowedOrigins: list[Origin] = Field(default_factory=list)
    pages: list[Page] = Field(default_factory=list)
    images: list[ImageRule] = Field(default_factory=list)
    content: ContentConfig = Field(default_factory=ContentConfig)
    contents: list[ContentRule] = Field(default_factory=list)

    @model_validator(mode="after")
    def _cross_field_rules(self) -> "VisualConfig":
        found = first_rule_violation(self)
        if found is not None:
            raise PydanticCustomError("visual_rule", "{detail}", {"path": found[0], "detail": found[1]})
        return self
