"""The ``visual`` block of acceptance.json: models, defaults, validation, digest (30-visual §1).

Pydantic v2 models whose attribute names are the JSON keys (camelCase; a snake_case spelling of a
field also reads it, e.g. ``cfg.limits.item_timeout_ms``). Every object is strict: unknown keys,
explicit ``null`` and wrong JSON types are refused; integral floats (``1280.0``) count as integers,
as in JSON. Value rules and the cross-field rules 1–8 live in :mod:`.config_rules`.

``browser.mode`` keeps the original's four modes for compatibility; the Python port drives Debian's
Chromium through Playwright, and ``managed`` means :data:`MANAGED_CHROMIUM`.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import sys
from typing import TYPE_CHECKING, Annotated, Any, Literal, Mapping, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_serializer, model_validator
from pydantic_core import PydanticCustomError

from .config_rules import (ERROR_MESSAGES, JsonNumber, Number, Arg, ArgsTemplate, Capture, Coordinate, EnvName,
                           EnvRef, Id, Locale, LocalUrl, NoNullSchema, Opt, Origin, PngPath, PosInt, Positive,
                           ProjectPath, Ratio, Route, Samples, Selector, Text, Timezone, error_path,
                           first_rule_violation)

__all__ = [
    "VisualConfigError", "VisualConfig", "Viewport", "Defaults", "Limits", "Browser", "BrowserManaged",
    "BrowserChrome", "BrowserEdge", "BrowserExecutable", "Page", "Source", "SourceExisting", "SourceStatic",
    "SourceCommand", "Step", "StepClick", "StepInput", "StepHover", "StepScroll", "StepWait", "ImageRule",
    "Range", "ContentCheck", "ContentRule", "ContentConfig", "MANAGED_CHROMIUM", "parse_visual",
    "config_digest", "page_viewports", "effective_capture", "effective_thresholds", "effective_rules",
    "baseline_relative", "content_id", "platform_name", "visual_json_schema",
]

MANAGED_CHROMIUM = "/usr/lib/chromium/chromium"
"""The browser of ``browser.mode == "managed"``: Debian's Chromium (never downloaded)."""


class VisualConfigError(ValueError):
    """The ``visual`` block is invalid (30-visual §1; the layer becomes ``CONFIG_INVALID``).

    Attributes: ``path`` — JSON path of the first problem (``visual.pages[0].source.readyUrl``);
    ``detail`` — English reason; ``code`` — ``CONFIG_INVALID``. ``str(err)`` is ``"<path>: <detail>"``.
    """

    code = "CONFIG_INVALID"

    def __init__(self, path: str, detail: str) -> None:
        super().__init__(f"{path}: {detail}")
        self.path = path
        self.detail = detail


# --------------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------------


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
    """``{mode: "managed"}``: Debian's Chromium at :data:`MANAGED_CHROMIUM` (Python port)."""

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
    """The ``visual`` block (30-visual §1) with defaults applied. Cross-field rules 1–8 are checked
    on validation (:func:`~.config_rules.first_rule_violation`)."""

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


# --------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------


def parse_visual(data: Any) -> VisualConfig:
    """Validate a decoded ``visual`` block and apply the defaults (30-visual §1).

    Args:
        data: the decoded JSON object (a ``dict``).

    Returns:
        :class:`VisualConfig` with every default applied.

    Raises:
        VisualConfigError: (code ``CONFIG_INVALID``) naming the JSON path of the first problem, e.g.
            ``visual.pages[0].source.readyUrl: host must be exactly localhost, 127.0.0.1 or [::1]``.
    """
    if not isinstance(data, Mapping):
        raise VisualConfigError("visual", "must be a JSON object")
    data = dict(data)
    try:
        return VisualConfig.model_validate(data)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        if err["type"] == "visual_rule":
            raise VisualConfigError(err["ctx"]["path"], err["ctx"]["detail"]) from None
        msg = ERROR_MESSAGES.get(err["type"], err["msg"])
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]
        raise VisualConfigError(error_path(data, tuple(err["loc"])), msg) from None


def config_digest(cfg: VisualConfig | None) -> str:
    """sha256 hex of the canonical JSON of the block with defaults applied (sorted keys, separators
    ``,``/``:``, omitted optional keys absent), or of ``null`` when there is no block (§9)."""
    if cfg is None:
        return hashlib.sha256(b"null").hexdigest()
    text = json.dumps(cfg.model_dump(by_alias=True, mode="json"), sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


# --------------------------------------------------------------------------------------------
# Effective values
# --------------------------------------------------------------------------------------------


def page_viewports(cfg: VisualConfig, page: Page) -> list[Viewport]:
    """The viewports a page is captured at: ``page.viewports`` in its order, else all of
    ``cfg.viewports`` (§2 step 4, §9). Ids are matched exactly (rule 7 guarantees they exist)."""
    if page.viewports is None:
        return list(cfg.viewports)
    by_id = {vp.id: vp for vp in cfg.viewports}
    return [by_id[v] for v in page.viewports if v in by_id]


def effective_capture(cfg: VisualConfig, page: Page) -> tuple[str, str | None]:
    """``(capture, selector)``: ``page.capture ?? defaults.capture`` and, for ``element`` capture,
    ``page.selector ?? defaults.selector`` (None for viewport/fullPage) (§1 rule 7, §3 step 9)."""
    capture = page.capture if page.capture is not None else cfg.defaults.capture
    if capture != "element":
        return capture, None
    return capture, page.selector if page.selector is not None else cfg.defaults.selector


def effective_thresholds(cfg: VisualConfig, page: Page) -> tuple[float, float]:
    """``(pixelThreshold, maxDiffRatio)``: the page's values, else the defaults (ratios 0..1, §2.2)."""
    d = cfg.defaults
    return (page.pixelThreshold if page.pixelThreshold is not None else d.pixelThreshold,
            page.maxDiffRatio if page.maxDiffRatio is not None else d.maxDiffRatio)


def effective_rules(cfg: VisualConfig, page: Page) -> dict[str, Any]:
    """``{...defaults, ...page}`` as JSON (the ``rules`` of a capture result, §3)."""
    return {**cfg.defaults.model_dump(mode="json"), **page.model_dump(mode="json")}


def platform_name(platform: str | None = None) -> str:
    """``sys.platform`` normalised to ``linux`` | ``darwin`` | ``win32`` (others unchanged)."""
    p = platform if platform is not None else sys.platform
    if p.startswith("linux"):
        return "linux"
    if p in ("win32", "cygwin", "msys"):
        return "win32"
    return p


def baseline_relative(cfg: VisualConfig, page: Page, viewport: Viewport | str, *, platform: str | None = None) -> str:
    """Project-relative baseline PNG of a page at a viewport (§2.2 ``baselineRelative``).

    ``page.baseline`` when set (shared by all viewports), else
    ``<baselineRoot>/<platform>/<browser.mode>/<page.id>/<viewport.id>.png`` ('/'-joined, normalised
    like Node's ``path.join``); ``platform`` defaults to :func:`platform_name`.
    """
    if page.baseline is not None:
        return page.baseline
    vid = viewport.id if isinstance(viewport, Viewport) else str(viewport)
    return posixpath.normpath(posixpath.join(cfg.baselineRoot, platform_name(platform), cfg.browser.mode,
                                             page.id, f"{vid}.png"))


def content_id(page: Page) -> str:
    """The result id of a page's content check: ``<page.id>-content`` (§2.2)."""
    return f"{page.id}-content"


# --------------------------------------------------------------------------------------------
# JSON Schema
# --------------------------------------------------------------------------------------------


def visual_json_schema(ref_template: str = "#/$defs/{model}") -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of the ``visual`` block: the :class:`VisualConfig` schema with its
    ``$defs``. Per-object rules and cross-field rules 1, 2, 3 and 8 are expressed; 4–7 (budgets,
    duplicates, references) only by the models."""
    return VisualConfig.model_json_schema(by_alias=True, mode="validation", ref_template=ref_template,
                                          schema_generator=NoNullSchema)
