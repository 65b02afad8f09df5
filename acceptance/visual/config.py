"""The ``visual`` block of acceptance.json: validation, digest, effective values, schema (docs/visual.md §1).

The models (re-exported here) live in :mod:`.config_models`: pydantic v2 models whose attribute names
are the JSON keys (camelCase; a snake_case spelling of a field also reads it, e.g.
``cfg.limits.item_timeout_ms``). Every object is strict: unknown keys, explicit ``null`` and wrong
JSON types are refused; integral floats (``1280.0``) count as integers, as in JSON. Value rules live
in :mod:`.config_rules`, the cross-field rules 1–8 in :mod:`.config_crossfield`.

``browser.mode`` keeps the original's four modes for compatibility; the Python port drives Debian's
Chromium through Playwright, and ``managed`` means :data:`MANAGED_CHROMIUM`.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import sys
from typing import Any, Mapping

from pydantic import ValidationError

from .config_models import (Browser, BrowserChrome, BrowserEdge, BrowserExecutable, BrowserManaged, ContentCheck,
                            ContentConfig, ContentRule, Defaults, ImageRule, Limits, Page, Range, Source,
                            SourceCommand, SourceExisting, SourceStatic, Step, StepClick, StepHover, StepInput,
                            StepScroll, StepWait, Viewport, VisualConfig)
from .config_rules import ERROR_MESSAGES, NoNullSchema, error_path

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
    """The ``visual`` block is invalid (docs/visual.md §1; the layer becomes ``CONFIG_INVALID``).

    Attributes: ``path`` — JSON path of the first problem (``visual.pages[0].source.readyUrl``);
    ``detail`` — English reason; ``code`` — ``CONFIG_INVALID``. ``str(err)`` is ``"<path>: <detail>"``.
    """

    code = "CONFIG_INVALID"

    def __init__(self, path: str, detail: str) -> None:
        super().__init__(f"{path}: {detail}")
        self.path = path
        self.detail = detail


# --------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------


def parse_visual(data: Any) -> VisualConfig:
    """Validate a decoded ``visual`` block and apply the defaults (docs/visual.md §1).

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
