"""One page at one viewport, from the ``visual`` config to a screenshot (docs/visual.md §2.2, §3) — shared by
the round's visual stage (:mod:`.engine`) and baseline preparation (:mod:`.baselines`).

Also :func:`run_coro`: the browser is driven with Playwright's async API, and the callers are sync
(a Prefect task, a CLI command, a tool handler in a worker thread).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from typing import Any, Awaitable, TypeVar
from urllib.parse import urljoin

from .capture import Capture, CaptureSpec, VisualBrowser, load_storage_state
from .config import Page, Viewport, VisualConfig, effective_capture
from .services import ServicePool

T = TypeVar("T")

CHROMIUM = "/usr/lib/chromium/chromium"
"""Debian's Chromium binary (docs/architecture.md §8): the ``managed`` browser of the Python port."""


def browser_executable(cfg: VisualConfig) -> str | None:
    """The executable of ``cfg.browser``: ``managed`` → Debian's Chromium; ``chrome``/``edge``/
    ``executable`` → their ``executablePath`` (None: Playwright's lookup for that channel)."""
    mode = cfg.browser.mode
    path = getattr(cfg.browser, "executablePath", None)
    if mode == "managed":
        return CHROMIUM
    return path


def run_coro(coro: Awaitable[T]) -> T:
    """Run ``coro`` to completion from sync code: in this thread when no event loop runs here,
    else in a fresh thread with its own loop. Exceptions propagate."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)  # type: ignore[arg-type]
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)  # type: ignore[arg-type]
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    t = threading.Thread(target=target, name="visual-loop", daemon=True)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def item_deadline(cfg: VisualConfig, round_deadline: float) -> float:
    """``min(now + itemTimeoutMs, round deadline)`` in ``time.monotonic()`` seconds (docs/visual.md §8)."""
    return min(time.monotonic() + cfg.limits.itemTimeoutMs / 1000, round_deadline)


async def capture_page(browser: VisualBrowser, pool: ServicePool, cfg: VisualConfig, page: Page, viewport: Viewport,
                       project_root: str | os.PathLike[str], round_deadline: float) -> Capture:
    """Start (or reuse) the page's source, then capture ``page`` at ``viewport`` (docs/visual.md §3).

    Raises:
        VisualError: any code of docs/visual.md §3/§3.1 (``PAGE_UNREACHABLE``, ``SERVICE_EXITED``,
            ``PAGE_NOT_READY``, ``MASK_NOT_FOUND``, ``SCREENSHOT_UNSTABLE``, ``ITEM_TIMEOUT`` …).
    """
    deadline = item_deadline(cfg, round_deadline)
    base = await pool.url_for(page.source.model_dump(by_alias=True, mode="json"), deadline)
    capture, selector = effective_capture(cfg, page)
    storage = load_storage_state(project_root, page.storageState) if page.storageState else None
    spec = CaptureSpec(
        url=urljoin(base if base.endswith("/") else base + "/", page.route.lstrip("/")),
        width=viewport.width, height=viewport.height, device_scale_factor=viewport.deviceScaleFactor,
        capture=capture, selector=selector, ready_selector=page.readySelector,
        mask_selectors=list(page.maskSelectors), steps=[s.model_dump(by_alias=True, mode="json") for s in page.steps],
        storage_state=storage, locale=cfg.defaults.locale, timezone=cfg.defaults.timezone,
        color_scheme=cfg.defaults.colorScheme, allowed_origins=list(cfg.allowedOrigins),
        navigation_timeout_ms=cfg.limits.navigationTimeoutMs, item_deadline=deadline,
        stability_samples=cfg.limits.stabilitySamples, decoded_pixels=cfg.limits.decodedPixels)
    shot = await browser.capture(spec)
    shot.environment.setdefault("browserKind", cfg.browser.mode)
    return shot
