"""Benchmark the visual pixel gate (run on demand; not part of the test suite).

On a rendered-looking 1920×1080 UI pair (header, sidebar, 12 cards of anti-aliased text; the actual
has an error panel drawn over one card and one title changed):

* the in-memory core (:func:`compare_arrays`: masks, NumPy pixelmatch, 4-connected regions; no PNG
  encoding, no files) — median over ``--runs``;
* the reference Python port ``pixelmatch`` 0.3.0 on the same pair (pure Python per pixel, so only
  ``--port-runs`` runs; its input lists are built outside the timing) — and the ratio of the medians;
  the two ``differentPixels`` must be equal;
* the full :func:`compare_images` with files (decode both PNGs, re-encode baseline, diff.png,
  regions.png, metrics.json) — median over ``--file-runs`` fresh item directories, also with SSIM.

Usage: ``.venv/bin/python bench/bench_visual_compare.py [--runs 20] [--port-runs 3] [--file-runs 5]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont
from tianshu_mcp.acceptance.visual.compare import compare_arrays, compare_images
from tianshu_mcp.acceptance.visual.decode import encode_png


def ui_image(changed: bool, width: int = 1920, height: int = 1080) -> np.ndarray:
    """A dashboard-like screenshot: text is FreeType anti-aliased, so edges are what pixelmatch
    treats as anti-aliasing when they move."""
    im = Image.new("RGBA", (width, height), (250, 250, 252, 255))
    draw = ImageDraw.Draw(im)
    body, title = ImageFont.load_default(15), ImageFont.load_default(22)
    draw.rectangle((0, 0, width, 56), fill=(32, 41, 64, 255))
    draw.text((24, 14), "Dashboard - tianshu", fill=(255, 255, 255, 255), font=title)
    draw.rectangle((0, 56, 240, height), fill=(240, 242, 246, 255))
    for i in range(20):
        draw.text((24, 80 + i * 34), f"Menu item {i}", fill=(60, 60, 70, 255), font=body)
    for row in range(3):
        for col in range(4):
            x, y = 280 + col * 400, 90 + row * 300
            draw.rounded_rectangle((x, y, x + 370, y + 270), 12, fill=(255, 255, 255, 255),
                                   outline=(220, 222, 230, 255), width=2)
            draw.text((x + 16, y + 14), f"Card {row}-{col}: quarterly summary", fill=(30, 30, 40, 255), font=title)
            for k in range(7):
                draw.text((x + 16, y + 54 + k * 26), f"Line {k}: value {(row * 31 + col * 7 + k * 13) % 97} units, "
                          f"delta +{k}.{col}%", fill=(80, 80, 90, 255), font=body)
            draw.ellipse((x + 300, y + 210, x + 350, y + 260), fill=(66, 133, 244, 255))
    if changed:
        draw.rounded_rectangle((1100, 420, 1460, 640), 10, fill=(255, 230, 230, 255))
        draw.text((1120, 440), "Error: request failed (503)", fill=(180, 20, 20, 255), font=title)
        draw.rectangle((296, 100, 660, 130), fill=(255, 255, 255, 255))
        draw.text((296, 104), "Card 0-0: annual summary", fill=(30, 30, 40, 255), font=title)
    return np.asarray(im).copy()


def timed(fn: Callable[[], object], runs: int) -> tuple[list[float], object]:
    times, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return times, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--port-runs", type=int, default=3)
    parser.add_argument("--file-runs", type=int, default=5)
    args = parser.parse_args()
    baseline, actual = ui_image(False), ui_image(True)
    kwargs = {"pixel_threshold": 0.1, "max_diff_ratio": 0.001}
    compare_arrays(baseline, actual, **kwargs)  # warm-up: lazy imports (scikit-image, SciPy)
    ours, core = timed(lambda: compare_arrays(baseline, actual, **kwargs), args.runs)
    m = core.metrics  # type: ignore[attr-defined]
    print(f"pair 1920x1080: {m['differentPixels']} different pixels, {len(core.regions)} regions kept "  # type: ignore[attr-defined]
          f"(+{m['omittedRegions']} omitted), diffRatio {m['diffRatio']:.5f}")
    med = statistics.median(ours)
    print(f"compare_arrays (NumPy pixelmatch + regions, in memory): median {med * 1000:.1f} ms over {len(ours)} runs "
          f"(min {min(ours) * 1000:.1f} ms)")

    from pixelmatch import pixelmatch

    flat_a, flat_b = baseline.ravel().tolist(), actual.ravel().tolist()
    port, count = timed(lambda: pixelmatch(flat_a, flat_b, 1920, 1080, threshold=0.1), args.port_runs)
    port_med = statistics.median(port)
    print(f"pixelmatch 0.3.0 Python port (count only, lists prepared outside the timing): median "
          f"{port_med:.2f} s over {len(port)} runs (fewer runs: it is pure Python per pixel); "
          f"differentPixels {count} ({'equal' if count == m['differentPixels'] else 'DIFFERENT'})")
    print(f"ratio port / ours: {port_med / med:.0f}x")

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "baseline.png").write_bytes(encode_png(baseline))
        (root / "actual.png").write_bytes(encode_png(actual))
        for ssim in (False, True):
            dirs = iter(root / f"item-{ssim}-{i}" for i in range(args.file_runs))

            def full(ssim: bool = ssim, dirs: Iterator[Path] = dirs) -> object:
                return compare_images(root / "baseline.png", root / "actual.png", next(dirs), ssim=ssim, **kwargs)
            files, result = timed(full, args.file_runs)
            extra = f", ssim {result.metrics['ssim']:.4f}" if ssim else ""  # type: ignore[attr-defined]
            print(f"compare_images with files{' + SSIM' if ssim else ''} (decode 2 PNGs, 3 PNGs + metrics.json "
                  f"written): median {statistics.median(files) * 1000:.0f} ms over {len(files)} runs "
                  f"(min {min(files) * 1000:.0f} ms){extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
