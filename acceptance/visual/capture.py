"""Screenshots of the project's pages in headless Chromium (docs/visual.md §3).

One :class:`VisualBrowser` per round: Playwright (async API) launching Debian's Chromium at
``/usr/lib/chromium/chromium`` with a fresh temporary profile; :meth:`VisualBrowser.aclose`
closes it, kills whatever is left of its process tree and removes the profile.
:meth:`VisualBrowser.capture` runs one :class:`CaptureSpec` in a fresh isolated context:
request guard, emulation, login state, navigation, steps, readySelector, lazy-loading scroll,
fonts and images, stabilisation, element/mask geometry, pixel budget, and the stability loop
(two consecutive masked screenshots identical, at most ``stability_samples`` shots 100 ms apart).
The context is force-closed at the item deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import platform
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from ...core.procs import ProcRecord, kill_tree, tagged_env, tree_alive
from .capture_page import (
    GEOMETRY_JS,
    LAZY_SCROLL_JS,
    RECTS_JS,
    STABILISE_CSS,
    STABILISE_JS,
    WAIT_ASSETS_JS,
    RequestGuard,
    apply_masks,
    decode_rgba,
    encode_png,
    load_storage_state,
    mask_rects,
)
from .errors import VisualError

__all__ = ["DEFAULT_EXECUTABLE", "Capture", "CaptureSpec", "VisualBrowser", "load_storage_state"]

DEFAULT_EXECUTABLE = "/usr/lib/chromium/chromium"
"""Debian's Chromium binary (the ``/usr/bin/chromium`` wrapper is slower to start)."""

SAMPLE_INTERVAL_S = 0.1
"""Pause between two stability samples (s)."""

LAUNCH_TIMEOUT_MS = 30000
CLOSE_TIMEOUT_S = 10.0


@dataclass
class CaptureSpec:
    """One capture (docs/visual.md §3). Sizes in CSS px, times in ms unless noted.

    ``capture``: ``viewport`` | ``fullPage`` | ``element`` (needs ``selector``); ``steps``: the
    Page's step dicts (``click``/``input``/``hover``/``scroll``/``wait``); ``storage_state``: a
    state from :func:`load_storage_state`; ``allowed_origins``: origins besides the page's own;
    ``item_deadline``: ``time.monotonic()`` seconds; ``decoded_pixels``: pixel budget of the
    final image (device pixels).
    """

    url: str
    width: int
    height: int
    device_scale_factor: float = 1
    capture: str = "viewport"
    selector: str | None = None
    ready_selector: str | None = None
    mask_selectors: list[str] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)
    storage_state: dict[str, Any] | None = None
    locale: str = "en-US"
    timezone: str = "UTC"
    color_scheme: str = "light"
    allowed_origins: list[str] = field(default_factory=list)
    navigation_timeout_ms: int = 30000
    item_deadline: float = field(default_factory=lambda: time.monotonic() + 60)
    stability_samples: int = 3
    decoded_pixels: int = 32000000


@dataclass
class Capture:
    """A stable screenshot: ``png`` (RGBA, masked pixels (0,0,0,0)), ``masks`` (``{x, y, width,
    height}`` in screenshot px), ``environment`` (``{platform, arch, os, browser, browserKind,
    viewport {width, height, deviceScaleFactor}, storageStateLoaded}``), ``samples`` (shots taken)."""

    png: bytes
    masks: list[dict[str, int]]
    environment: dict[str, Any]
    samples: int


def _same(a: Any, b: Any) -> bool:
    """Equal PNG bytes, or equal pixel arrays (same shape, same values)."""
    if isinstance(a, bytes) or isinstance(b, bytes):
        return a == b
    return bool(a.shape == b.shape and (a == b).all())


def _node_arch() -> str:
    machine = platform.machine().lower()
    return {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "i686": "ia32", "i386": "ia32"}.get(machine, machine)


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "message", None) or exc).strip()
    return (text.splitlines() or [type(exc).__name__])[0][:500]


class VisualBrowser:
    """One headless Chromium for a round (docs/visual.md §3). Create with :meth:`launch`."""

    def __init__(self, pw: Any, browser: Any, record: ProcRecord | None, profile: Path | None, kind: str) -> None:
        self._pw, self._browser, self._record, self._profile, self._kind = pw, browser, record, profile, kind
        self._errors = self._import_errors()
        self._closed = False
        self.version: str = browser.version

    @staticmethod
    def _import_errors() -> tuple[type[Exception], type[Exception]]:
        from playwright.async_api import Error
        from playwright.async_api import TimeoutError as PwTimeout

        return Error, PwTimeout

    @classmethod
    async def launch(cls, *, executable_path: str | None = None, locale: str = "en-US",
                     browser_kind: str = "managed") -> VisualBrowser:
        """Start headless Chromium (``--lang=<locale>``, ``--disable-background-networking``) with
        a fresh temporary profile.

        Args:
            executable_path: the browser binary (default :data:`DEFAULT_EXECUTABLE`).
            locale: BCP-47 language of the browser UI.
            browser_kind: ``managed`` | ``chrome`` | ``edge`` | ``executable``, recorded in captures.

        Raises:
            VisualError: ``BROWSER_MISSING`` (no executable file), ``RUNTIME_UNSUPPORTED``
                (Playwright is not installed), ``BROWSER_DEPENDENCY_MISSING`` (it would not start).
        """
        exe = executable_path or DEFAULT_EXECUTABLE
        if not os.path.isfile(exe) or not os.access(exe, os.X_OK):
            raise VisualError("BROWSER_MISSING", f"Browser executable {exe} is missing; install Chromium "
                              "or set visual.browser.executablePath")
        try:
            from playwright.async_api import Error, async_playwright
        except ImportError:
            raise VisualError("RUNTIME_UNSUPPORTED", "The Playwright package is not installed") from None
        env, tag = tagged_env()
        pw = await async_playwright().start()
        try:
            browser = await pw.chromium.launch(
                executable_path=exe, headless=True, env=env, timeout=LAUNCH_TIMEOUT_MS, chromium_sandbox=False,
                args=[f"--lang={locale}", "--disable-background-networking", "--disable-gpu", "--no-first-run",
                      "--no-default-browser-check", "--disable-component-update", "--disable-sync"])
        except Error as exc:
            await pw.stop()
            raise VisualError("BROWSER_DEPENDENCY_MISSING", f"Browser {exe} did not start: {_first_line(exc)}") from None
        except BaseException:
            await pw.stop()
            raise
        record, profile = _browser_root(tag)
        return cls(pw, browser, record, profile, browser_kind)

    async def capture(self, spec: CaptureSpec) -> Capture:
        """Run the §3 pipeline (steps 1–12) for ``spec`` in a fresh context, closed afterwards
        (forcibly at ``spec.item_deadline``).

        Raises:
            VisualError: ``ITEM_TIMEOUT``, ``CONFIG_INVALID`` (emulation the browser refuses),
                ``PAGE_UNREACHABLE``, ``RESOURCE_BLOCKED``, ``INTERACTION_FAILED`` (failed),
                ``PAGE_NOT_READY``, ``PIXEL_BUDGET``, ``ELEMENT_AMBIGUOUS`` / ``ELEMENT_HIDDEN``
                (failed), ``MASK_NOT_FOUND``, ``MASK_NOT_VISIBLE``, ``MASK_ALL_PIXELS``,
                ``SCREENSHOT_UNSTABLE``, ``PAGE_NOT_READY`` also when the page navigates away
                mid-capture, ``VISUAL_INTERNAL`` (the browser broke down).
        """
        if self._closed:
            raise VisualError("VISUAL_INTERNAL", "The browser was already closed")
        if spec.capture not in ("viewport", "fullPage", "element") or (spec.capture == "element" and not spec.selector):
            raise VisualError("CONFIG_INVALID", f"Capture {spec.capture!r} is not viewport, fullPage or element "
                              "(element needs a selector)")
        if spec.item_deadline - time.monotonic() <= 0:
            raise VisualError("ITEM_TIMEOUT", "Item deadline passed before the capture started")
        error, _ = self._errors
        guard = RequestGuard(spec.url, spec.allowed_origins)
        try:
            context = await self._browser.new_context(
                viewport={"width": spec.width, "height": spec.height}, device_scale_factor=spec.device_scale_factor,
                locale=spec.locale, timezone_id=spec.timezone, color_scheme=spec.color_scheme,
                storage_state=spec.storage_state, service_workers="block", accept_downloads=False, bypass_csp=True)
        except error as exc:
            message = _first_line(exc)
            code = "VISUAL_INTERNAL" if "closed" in message.lower() else "CONFIG_INVALID"
            raise VisualError(code, f"Browser context could not be created: {message}") from None
        try:
            remaining = spec.item_deadline - time.monotonic()
            try:
                return await asyncio.wait_for(self._pipeline(context, guard, spec), max(0.001, remaining))
            except TimeoutError:
                raise VisualError("ITEM_TIMEOUT", f"Capture of {spec.url} ran out of its item time") from None
            except error as exc:
                message = _first_line(exc)
                if "context was destroyed" in message or "navigat" in message.lower():
                    raise VisualError("PAGE_NOT_READY", f"The page navigated during the capture: {message}") from None
                raise VisualError("VISUAL_INTERNAL", f"Browser failed during the capture: {message}") from None
        finally:
            with contextlib.suppress(Exception):  # a context that would not close dies with the browser
                await asyncio.wait_for(context.close(), CLOSE_TIMEOUT_S)

    def _budget(self, spec: CaptureSpec, limit_ms: float) -> tuple[float, bool]:
        """``(timeout_ms, bounded_by_item)``: the smaller of ``limit_ms`` and the item's remaining
        time; ``ITEM_TIMEOUT`` when none is left."""
        left_ms = (spec.item_deadline - time.monotonic()) * 1000
        if left_ms <= 1:
            raise VisualError("ITEM_TIMEOUT", "Item deadline passed during the capture")
        return (left_ms, True) if left_ms < limit_ms else (float(limit_ms), False)

    async def _pipeline(self, context: Any, guard: RequestGuard, spec: CaptureSpec) -> Capture:
        error, pw_timeout = self._errors
        await guard.install(context)
        page = await context.new_page()
        # 4. navigate
        timeout, by_item = self._budget(spec, spec.navigation_timeout_ms)
        try:
            response = await page.goto(spec.url, wait_until="domcontentloaded", timeout=timeout)
        except pw_timeout:
            if by_item:
                raise VisualError("ITEM_TIMEOUT", f"Item deadline passed while loading {spec.url}") from None
            raise VisualError("PAGE_UNREACHABLE", f"Page {spec.url} timed out after {int(timeout)}ms") from None
        except error as exc:
            raise (guard.error() if guard.blocked else
                   VisualError("PAGE_UNREACHABLE", f"Page {spec.url} could not be loaded: {_first_line(exc)}")) from None
        if response is not None and not 200 <= response.status < 300:
            raise (guard.error() if guard.blocked else
                   VisualError("PAGE_UNREACHABLE", f"Page {spec.url} answered HTTP {response.status}"))
        # 5. steps
        for index, step in enumerate(spec.steps, 1):
            timeout, by_item = self._budget(spec, spec.navigation_timeout_ms)
            try:
                await _run_step(page, step, timeout)
            except VisualError:
                raise
            except pw_timeout as exc:
                if by_item:
                    raise VisualError("ITEM_TIMEOUT", f"Item deadline passed during step {index}") from None
                raise _step_error(index, step, exc) from None
            except error as exc:
                raise _step_error(index, step, exc) from None
        # 6. readySelector
        if spec.ready_selector:
            timeout, by_item = self._budget(spec, spec.navigation_timeout_ms)
            try:
                await page.locator(spec.ready_selector).first.wait_for(state="visible", timeout=timeout)
            except error as exc:
                if by_item and isinstance(exc, pw_timeout):
                    raise VisualError("ITEM_TIMEOUT", "Item deadline passed waiting for readySelector") from None
                raise VisualError("PAGE_NOT_READY", f"readySelector {spec.ready_selector!r} did not become visible: "
                                  f"{_first_line(exc)}") from None
        dpr = float(spec.device_scale_factor)
        # 7. fullPage: lazy content, budget
        if spec.capture == "fullPage":
            height = await page.evaluate(LAZY_SCROLL_JS, [spec.decoded_pixels, dpr])
            if height * spec.width * dpr * dpr > spec.decoded_pixels:
                raise _budget_error(spec.width, height, dpr, spec.decoded_pixels)
        # 8. fonts, images, stabilisation
        timeout, _ = self._budget(spec, spec.navigation_timeout_ms)
        await page.evaluate(WAIT_ASSETS_JS, [spec.capture == "fullPage", int(timeout)])
        await page.evaluate(STABILISE_JS, STABILISE_CSS)
        # 9. element, 11. final size
        shot_clip, full_page = None, spec.capture == "fullPage"
        if spec.capture == "element":
            geo, clip = await _element_clip(page, spec.selector or "", error)
            size = (clip["width"], clip["height"])
            offset = (clip["x"] - geo["sx"], clip["y"] - geo["sy"])  # viewport-relative origin of the clip
            inside = (offset[0] >= 0 and offset[1] >= 0 and offset[0] + size[0] <= spec.width
                      and offset[1] + size[1] <= spec.height)
            # in view: a viewport shot clipped to it; else a full-page shot clipped in page coordinates
            shot_clip = {**clip, "x": offset[0], "y": offset[1]} if inside else clip
            full_page = not inside
        else:
            geo = await page.evaluate(GEOMETRY_JS)
            if full_page:
                size, offset = (geo["width"], geo["height"]), (-geo["sx"], -geo["sy"])
            else:
                size, offset = (spec.width, spec.height), (0.0, 0.0)
        if size[0] * size[1] * dpr * dpr > spec.decoded_pixels:
            raise _budget_error(size[0], size[1], dpr, spec.decoded_pixels)
        # 10. masks (CSS px relative to the capture origin)
        boxes = await _mask_boxes(page, spec.mask_selectors, offset, error)
        # 12. stability loop
        return await self._stable_shot(page, guard, spec, shot_clip, full_page, boxes, dpr)

    async def _stable_shot(self, page: Any, guard: RequestGuard, spec: CaptureSpec, clip: dict[str, Any] | None,
                           full_page: bool, boxes: list[tuple[float, float, float, float]], dpr: float) -> Capture:
        """Step 12: shots until two consecutive ones are identical after masking. Without masks
        the screenshot PNG bytes are compared (Chromium's encoder is deterministic: equal bytes
        ⇔ equal pixels), with masks the masked RGBA pixels; the result is re-encoded once."""
        previous: Any = None
        rects: list[dict[str, int]] = []
        samples = max(2, int(spec.stability_samples))
        for shot in range(1, samples + 1):
            if guard.blocked:
                raise guard.error()
            timeout, _ = self._budget(spec, spec.navigation_timeout_ms)
            png = await page.screenshot(type="png", full_page=full_page, clip=clip,
                                        animations="disabled", caret="hide", scale="device", timeout=timeout)
            taken = time.monotonic()
            current: Any = png
            if boxes:
                current = await asyncio.to_thread(decode_rgba, png)
                rects = mask_rects(boxes, dpr, (current.shape[1], current.shape[0]))
                current = apply_masks(current, rects)
            if previous is not None and _same(previous, current):
                if guard.blocked:
                    raise guard.error()
                pixels = current if boxes else await asyncio.to_thread(decode_rgba, png)
                return Capture(png=await asyncio.to_thread(encode_png, pixels), masks=rects,
                               environment=self._environment(spec), samples=shot)
            previous = current
            if shot < samples:
                await asyncio.sleep(max(0.0, SAMPLE_INTERVAL_S - (time.monotonic() - taken)))
        raise VisualError("SCREENSHOT_UNSTABLE", f"No two consecutive screenshots of {spec.url} were identical "
                          f"in {samples} samples")

    def _environment(self, spec: CaptureSpec) -> dict[str, Any]:
        return {"platform": sys.platform, "arch": _node_arch(), "os": f"{platform.system()} {platform.release()}",
                "browser": self.version, "browserKind": self._kind,
                "viewport": {"width": spec.width, "height": spec.height, "deviceScaleFactor": spec.device_scale_factor},
                "storageStateLoaded": spec.storage_state is not None}

    async def aclose(self) -> None:
        """Close the browser and Playwright, kill what is left of the browser's process tree and
        remove its temporary profile. Idempotent; never raises."""
        if self._closed:
            return
        self._closed = True
        for step in (self._browser.close, self._pw.stop):
            with contextlib.suppress(Exception):  # the tree kill below finishes the job
                await asyncio.wait_for(step(), CLOSE_TIMEOUT_S)
        if self._record is not None:
            await asyncio.to_thread(kill_tree, self._record)
            if tree_alive(self._record):  # pragma: no cover - kill_tree escalates to SIGKILL
                await asyncio.to_thread(kill_tree, self._record, 0.1, 5.0)
        if self._profile is not None and self._profile.exists():
            await asyncio.to_thread(shutil.rmtree, self._profile, True)


def _browser_root(tag: str) -> tuple[ProcRecord | None, Path | None]:
    """The browser's root process (our descendant carrying ``tag``, without ``--type=``) and
    its ``--user-data-dir``."""
    from ...core.procs import TAG_ENV

    for proc in psutil.Process().children(recursive=True):
        try:
            if proc.environ().get(TAG_ENV) != tag:
                continue
            argv = proc.cmdline()
            if any(a.startswith("--type=") for a in argv):
                continue
            profile = next((Path(a.split("=", 1)[1]) for a in argv if a.startswith("--user-data-dir=")), None)
            return ProcRecord(proc.pid, os.getpgid(proc.pid), proc.create_time(), tag), profile
        except (psutil.Error, OSError):
            continue
    return None, None


async def _run_step(page: Any, step: dict[str, Any], timeout: float) -> None:
    """One Page step (docs/visual.md §1 Steps, §3 step 5). Raises Playwright errors, or
    ``INTERACTION_FAILED`` for an unknown step."""
    kind = step.get("type")
    selector = step.get("selector")
    if kind == "click":
        await page.locator(selector).click(timeout=timeout)
    elif kind == "input":
        target = page.locator(selector)
        await target.fill("", timeout=timeout)
        await target.press_sequentially(str(step.get("value", "")), timeout=timeout)
    elif kind == "hover":
        await page.locator(selector).hover(timeout=timeout)
    elif kind == "scroll":
        if selector:
            await page.locator(selector).scroll_into_view_if_needed(timeout=timeout)
        else:
            await page.evaluate("([x, y]) => window.scrollTo({left: x ?? window.scrollX, top: y ?? window.scrollY, "
                                "behavior: 'instant'})", [step.get("x"), step.get("y")])
    elif kind == "wait":
        if selector:
            await page.locator(selector).first.wait_for(state=step.get("state") or "visible", timeout=timeout)
        elif step.get("url"):
            await page.wait_for_url(step["url"], timeout=timeout)
        else:
            await asyncio.sleep(max(0, int(step.get("durationMs") or 0)) / 1000)
    else:
        raise VisualError("INTERACTION_FAILED", f"Unknown step type {kind!r}", "failed")


def _step_error(index: int, step: dict[str, Any], exc: BaseException) -> VisualError:
    target = f" on {step['selector']!r}" if step.get("selector") else ""
    return VisualError("INTERACTION_FAILED", f"Step {index} ({step.get('type')}{target}) failed: {_first_line(exc)}",
                       "failed")


def _budget_error(width: float, height: float, dpr: float, budget: int) -> VisualError:
    pixels = math.ceil(width * dpr) * math.ceil(height * dpr)
    return VisualError("PIXEL_BUDGET", f"Screenshot of {pixels} pixels exceeds the budget of {budget}")


async def _element_clip(page: Any, selector: str, error: type[Exception]) -> tuple[dict[str, Any], dict[str, int]]:
    """Step 9: the one element ``selector`` matches, scrolled into view; returns the page
    geometry (:data:`GEOMETRY_JS`) and the element's clip in page coordinates (CSS px, whole
    pixels, within the document).

    Raises:
        VisualError: ``ELEMENT_AMBIGUOUS`` (not exactly one match, or a bad selector),
            ``ELEMENT_HIDDEN`` (no box) — both of kind failed.
    """
    try:
        geo = await page.locator(selector).evaluate_all(GEOMETRY_JS)
    except error as exc:
        raise VisualError("ELEMENT_AMBIGUOUS", f"Selector {selector!r} is not usable: {_first_line(exc)}",
                          "failed") from None
    rects = geo["rects"]
    if len(rects) != 1:
        raise VisualError("ELEMENT_AMBIGUOUS", f"Selector {selector!r} matched {len(rects)} elements, expected "
                          "exactly one", "failed")
    x, y, w, h = rects[0]
    if w <= 0 or h <= 0:
        raise VisualError("ELEMENT_HIDDEN", f"Element {selector!r} has no visible box", "failed")
    x0, y0 = max(0, math.floor(x + geo["sx"])), max(0, math.floor(y + geo["sy"]))
    x1 = min(geo["width"], math.ceil(x + geo["sx"] + w))
    y1 = min(geo["height"], math.ceil(y + geo["sy"] + h))
    if x1 <= x0 or y1 <= y0:
        raise VisualError("ELEMENT_HIDDEN", f"Element {selector!r} lies outside the page", "failed")
    return geo, {"x": x0, "y": y0, "width": x1 - x0, "height": y1 - y0}


async def _mask_boxes(page: Any, selectors: list[str], offset: tuple[float, float],
                      error: type[Exception]) -> list[tuple[float, float, float, float]]:
    """Boxes (CSS px, relative to the capture origin) of every element of every mask selector."""
    boxes = []
    for selector in selectors:
        try:
            rects = await page.locator(selector).evaluate_all(RECTS_JS)
        except error as exc:
            raise VisualError("MASK_NOT_FOUND", f"Mask selector {selector!r} is not usable: {_first_line(exc)}") from None
        if not rects:
            raise VisualError("MASK_NOT_FOUND", f"Mask selector {selector!r} matched no element")
        for x, y, w, h in rects:
            if w <= 0 or h <= 0:
                raise VisualError("MASK_NOT_VISIBLE", f"An element of mask selector {selector!r} has no visible box")
            boxes.append((x - offset[0], y - offset[1], w, h))
    return boxes
