"""Benchmark one visual capture against Playwright's bare screenshot (docs/visual.md §3).

Serves ``tests/visual_site`` through the pool's static server and, at 1280×800, takes N times:

* ``capture``: :meth:`VisualBrowser.capture` of ``index.html`` — fresh context, navigation,
  fonts/images, stabilisation, stability loop (≥2 shots 100 ms apart), RGBA re-encode;
* ``raw screenshot``: ``page.screenshot()`` of the same page already loaded in one context;
* ``raw context+goto+screenshot``: what any fresh-context capture costs at least.

Prints the medians (ms) and the ratios against the raw screenshot.

Usage: ``.venv/bin/python bench/bench_visual_capture.py [--n 10]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from tianshu_mcp.acceptance.visual.capture import (
    DEFAULT_EXECUTABLE,
    CaptureSpec,
    VisualBrowser,
)
from tianshu_mcp.acceptance.visual.services import ServicePool


async def main(n: int) -> None:
    pool = ServicePool(ROOT / "tests")
    browser = await VisualBrowser.launch(executable_path=DEFAULT_EXECUTABLE)
    try:
        base = await pool.url_for({"type": "static", "root": "visual_site"}, time.monotonic() + 30)
        url = f"{base}/index.html"

        def make() -> CaptureSpec:
            return CaptureSpec(url=url, width=1280, height=800, item_deadline=time.monotonic() + 60)

        await browser.capture(make())  # warm-up
        captures, samples = [], []
        for _ in range(n):
            started = time.perf_counter()
            shot = await browser.capture(make())
            captures.append((time.perf_counter() - started) * 1000)
            samples.append(shot.samples)

        raw, fresh = [], []
        context = await browser._browser.new_context(viewport={"width": 1280, "height": 800})
        try:
            page = await context.new_page()
            await page.goto(url, wait_until="domcontentloaded")
            await page.screenshot()
            for _ in range(n):
                started = time.perf_counter()
                await page.screenshot()
                raw.append((time.perf_counter() - started) * 1000)
        finally:
            await context.close()
        for _ in range(n):
            started = time.perf_counter()
            context = await browser._browser.new_context(viewport={"width": 1280, "height": 800})
            try:
                page = await context.new_page()
                await page.goto(url, wait_until="domcontentloaded")
                await page.screenshot()
            finally:
                await context.close()
            fresh.append((time.perf_counter() - started) * 1000)
    finally:
        await browser.aclose()
        await pool.aclose()

    m_capture, m_raw, m_fresh = statistics.median(captures), statistics.median(raw), statistics.median(fresh)
    print(f"browser {browser.version}, 1280x800, n={n}, shots per capture: {sorted(set(samples))}")
    print(f"VisualBrowser.capture          median {m_capture:8.1f} ms")
    print(f"raw page.screenshot()          median {m_raw:8.1f} ms")
    print(f"raw context+goto+screenshot    median {m_fresh:8.1f} ms")
    print(f"ratio capture / raw screenshot        {m_capture / m_raw:8.1f}x")
    print(f"ratio capture / raw context+goto+shot {m_capture / m_fresh:8.1f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10)
    asyncio.run(main(parser.parse_args().n))
    sys.exit(0)
