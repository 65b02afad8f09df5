"""Pixel gate: pixelmatch in NumPy, difference regions, optional SSIM, comparison artifacts (docs/visual.md
§4).

The gate counts the pixels pixelmatch (``includeAA = false``) marks as different, exactly: a pixel is a
candidate when its YIQ colour delta (semi-transparent pixels blended on white) exceeds
``35215 · threshold²``, and it is *not* counted when pixelmatch's ``antialiased()`` holds for it in
either image (Vysniauskas 2009: darkest and brightest neighbours, 3+ equal siblings in both images).
The reference is the Python port ``pixelmatch`` 0.3.0 (per-pixel Python, ≈minutes at 1080p); here
every step runs on arrays of the candidate pixels only, in the port's float64 arithmetic and neighbour
order, so ``differentPixels`` is identical (tests/test_visual_compare.py checks parity).

Regions are the 4-connected components of the difference mask (``skimage.measure.label``), the 100
largest kept (ties: scan order, as the original's stable sort). Files, each created exclusively in
``<itemDir>``: ``baseline.png`` (re-encoded), ``actual.png`` (when the actual lies elsewhere),
``diff.png`` (transparent, red differences), ``regions.png`` (actual with kept regions outlined 2 px
red), ``metrics.json`` (2-space JSON).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...core.files import write_new_bytes
from .decode import (
    DEFAULT_DECODED_PIXELS,
    DEFAULT_INPUT_BYTES,
    decode_image,
    encode_png,
)
from .errors import VisualError

MAX_REGIONS = 100
"""Regions kept in a comparison (the rest are counted in ``omittedRegions``)."""

# pixelmatch's neighbour order in antialiased()/has_many_siblings(): x outer, y inner (dx, dy).
_DX = np.array([-1, -1, -1, 0, 0, 1, 1, 1])
_DY = np.array([-1, 0, 1, -1, 1, -1, 0, 1])
_CHUNK = 1 << 16  # candidate pixels per vectorised batch (bounds the n × 8 temporaries to ~4 MB each)
_RED = np.array([255, 0, 0, 255], dtype=np.uint8)


@dataclass(frozen=True)
class Rect:
    """A mask rectangle in screenshot pixels (may be fractional or reach outside the image)."""

    x: float
    y: float
    width: float
    height: float


@dataclass
class Comparison:
    """Outcome of :func:`compare_images` (docs/visual.md §4).

    Attributes:
        passed: ``diffRatio <= maxDiffRatio`` (False on a dimension mismatch).
        code: ``PIXELS_MATCH`` | ``PIXEL_DIFFERENCE`` | ``DIMENSION_MISMATCH``.
        metrics: §4.7 keys (+ ``ssim`` when asked), or for ``DIMENSION_MISMATCH``
            ``{baselineWidth, baselineHeight, actualWidth, actualHeight, diffRatio: None}``.
        regions: kept regions ``{x, y, width, height, area}`` (px), largest first.
        artifacts: kind (``baseline``, ``actual``, ``diff``, ``regions``, ``metrics``) → absolute path.
        message: one English sentence (names both sizes on a dimension mismatch).
    """

    passed: bool
    code: str
    metrics: dict[str, Any]
    regions: list[dict[str, int]]
    artifacts: dict[str, str]
    message: str = ""


@dataclass
class ArrayComparison:
    """The in-memory core of a comparison (no files): see :func:`compare_arrays`."""

    passed: bool
    code: str
    metrics: dict[str, Any]
    regions: list[dict[str, int]]
    diff: np.ndarray = field(repr=False)  # H × W bool: counted different pixels
    actual: np.ndarray = field(repr=False)  # H × W × 4 uint8: actual with excluded pixels zeroed


# ---------------------------------------------------------------- pixelmatch (vectorised port)

def _channels(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """r, g, b (float64) of packed little-endian RGBA, blended on white when alpha < 255 (``blend``)."""
    r = (values & 0xFF).astype(np.float64)
    g = ((values >> 8) & 0xFF).astype(np.float64)
    b = ((values >> 16) & 0xFF).astype(np.float64)
    a = values >> 24
    translucent = a < 255
    if translucent.any():
        af = a / 255
        r = np.where(translucent, 255 + (r - 255) * af, r)
        g = np.where(translucent, 255 + (g - 255) * af, g)
        b = np.where(translucent, 255 + (b - 255) * af, b)
    return r, g, b


def _luma(values: np.ndarray) -> np.ndarray:
    r, g, b = _channels(values)
    return r * 0.29889531 + g * 0.58662247 + b * 0.11448223  # rgb2y


def _color_delta(v1: np.ndarray, v2: np.ndarray) -> np.ndarray:
    """pixelmatch ``color_delta`` (squared YIQ distance) of differing packed pixels."""
    r1, g1, b1 = _channels(v1)
    r2, g2, b2 = _channels(v2)
    y = (r1 * 0.29889531 + g1 * 0.58662247 + b1 * 0.11448223) - (r2 * 0.29889531 + g2 * 0.58662247 + b2 * 0.11448223)
    i = (r1 * 0.59597799 - g1 * 0.27417610 - b1 * 0.32180189) - (r2 * 0.59597799 - g2 * 0.27417610 - b2 * 0.32180189)
    q = (r1 * 0.21147017 - g1 * 0.52261711 + b1 * 0.31114694) - (r2 * 0.21147017 - g2 * 0.52261711 + b2 * 0.31114694)
    return 0.5053 * y * y + 0.299 * i * i + 0.1957 * q * q


def _neighbours(idx: np.ndarray, width: int, height: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(flat neighbour indices n × 8 (clamped), valid n × 8, on-border n) in pixelmatch's order."""
    x = idx % width
    y = idx // width
    nx = x[:, None] + _DX
    ny = y[:, None] + _DY
    valid = (nx >= 0) & (nx < width) & (ny >= 0) & (ny < height)
    nidx = np.clip(ny, 0, height - 1) * width + np.clip(nx, 0, width - 1)
    border = (x == 0) | (x == width - 1) | (y == 0) | (y == height - 1)
    return nidx, valid, border


def _many_siblings(img: np.ndarray, idx: np.ndarray, width: int, height: int) -> np.ndarray:
    """pixelmatch ``has_many_siblings``: 3+ neighbours of exactly equal RGBA (image border counts one)."""
    nidx, valid, border = _neighbours(idx, width, height)
    equal = valid & (img[nidx] == img[idx][:, None])
    return border.astype(np.int64) + np.count_nonzero(equal, axis=1) > 2


def _antialiased(img: np.ndarray, img2: np.ndarray, idx: np.ndarray, width: int, height: int) -> np.ndarray:
    """pixelmatch ``antialiased(img, x, y, width, height, img2)`` for each flat index in ``idx``."""
    nidx, valid, border = _neighbours(idx, width, height)
    delta = _luma(img[idx])[:, None] - _luma(img[nidx])
    zeroes = border.astype(np.int64) + np.count_nonzero(valid & (delta == 0), axis=1)
    rows = np.arange(idx.size)
    kmin = np.where(valid, delta, np.inf).argmin(axis=1)  # first darkest, as the strict '<' scan
    kmax = np.where(valid, delta, -np.inf).argmax(axis=1)  # first brightest
    result = np.zeros(idx.size, dtype=bool)
    live = np.flatnonzero((zeroes <= 2) & (delta[rows, kmin] < 0) & (delta[rows, kmax] > 0))
    if live.size:
        darkest = nidx[live, kmin[live]]
        brightest = nidx[live, kmax[live]]
        result[live] = ((_many_siblings(img, darkest, width, height) & _many_siblings(img2, darkest, width, height))
                        | (_many_siblings(img, brightest, width, height)
                           & _many_siblings(img2, brightest, width, height)))
    return result


def pixelmatch_mask(img1: np.ndarray, img2: np.ndarray, threshold: float, *, chunk: int = _CHUNK) -> np.ndarray:
    """The pixels pixelmatch (``includeAA=False``) counts as different, as an ``H × W`` bool array.

    Args:
        img1, img2: ``H × W × 4`` uint8 RGBA of the same shape.
        threshold: pixelmatch ``threshold`` (0..1); max squared YIQ delta = ``35215 · threshold²``.

    ``mask.sum()`` equals ``pixelmatch.pixelmatch(img1, img2, W, H, threshold=threshold)`` (port 0.3.0).
    ``chunk`` bounds the candidate pixels handled per vectorised batch (memory, not results).
    """
    if img1.shape != img2.shape or img1.ndim != 3 or img1.shape[2] != 4:
        raise ValueError(f"expected two H x W x 4 arrays of one shape, got {img1.shape} and {img2.shape}")
    height, width = img1.shape[:2]
    a = np.ascontiguousarray(img1, dtype=np.uint8).view("<u4").reshape(-1)
    b = np.ascontiguousarray(img2, dtype=np.uint8).view("<u4").reshape(-1)
    out = np.zeros(height * width, dtype=bool)
    max_delta = 35215 * threshold * threshold
    changed = np.flatnonzero(a != b)
    for start in range(0, changed.size, chunk):
        idx = changed[start:start + chunk]
        idx = idx[_color_delta(a[idx], b[idx]) > max_delta]
        if idx.size:
            aa = _antialiased(a, b, idx, width, height)
            rest = idx[~aa]
            if rest.size:
                rest = rest[~_antialiased(b, a, rest, width, height)]
            out[rest] = True
    return out.reshape(height, width)


# ---------------------------------------------------------------- masks, regions, SSIM

def _rect_fields(rect: Rect | Mapping[str, Any]) -> tuple[float, float, float, float]:
    if isinstance(rect, Mapping):
        return float(rect["x"]), float(rect["y"]), float(rect["width"]), float(rect["height"])
    return float(rect.x), float(rect.y), float(rect.width), float(rect.height)


def exclusion_map(masks: Sequence[Rect | Mapping[str, Any]], width: int, height: int) -> np.ndarray:
    """``H × W`` bool of excluded pixels: per rect x ∈ [max(0, ⌊x⌋), min(W, ⌈x+w⌉)), y likewise (§4.3).

    A rect wholly outside the image (or empty, or not finite) excludes nothing.
    """
    excluded = np.zeros((height, width), dtype=bool)
    for rect in masks:
        x, y, w, h = _rect_fields(rect)
        if not all(math.isfinite(v) for v in (x, y, w, h)):
            continue
        x0, x1 = max(0, math.floor(x)), min(width, math.ceil(x + w))
        y0, y1 = max(0, math.floor(y)), min(height, math.ceil(y + h))
        if x0 < x1 and y0 < y1:
            excluded[y0:y1, x0:x1] = True
    return excluded


def diff_regions(mask: np.ndarray, keep: int = MAX_REGIONS) -> tuple[list[dict[str, int]], int, dict[str, int] | None]:
    """4-connected components of ``mask`` (§4.6).

    Returns:
        (kept regions ``{x, y, width, height, area}`` largest first — ties in scan order of their first
        pixel —, omitted count, union bounds ``{x, y, width, height}`` or None).
    """
    from scipy.ndimage import find_objects  # type: ignore[import-untyped]
    from skimage.measure import label

    ys = np.flatnonzero(mask.any(axis=1))
    if not ys.size:
        return [], 0, None
    xs = np.flatnonzero(mask.any(axis=0))
    bounds = {"x": int(xs[0]), "y": int(ys[0]), "width": int(xs[-1] - xs[0] + 1), "height": int(ys[-1] - ys[0] + 1)}
    # label only the union box: scan order inside it is the image's scan order
    crop = mask[ys[0]:ys[-1] + 1, xs[0]:xs[-1] + 1]
    labels, count = label(crop, connectivity=1, return_num=True)
    areas = np.bincount(labels.ravel(), minlength=count + 1)[1:]
    order = np.argsort(-areas, kind="stable")[:keep]  # labels are numbered in scan order
    boxes = find_objects(labels)
    regions = []
    for k in order:
        rows, cols = boxes[k]
        regions.append({"x": int(cols.start + xs[0]), "y": int(rows.start + ys[0]),
                        "width": int(cols.stop - cols.start), "height": int(rows.stop - rows.start),
                        "area": int(areas[k])})
    return regions, int(count - len(regions)), bounds


def _gray(rgba: np.ndarray) -> np.ndarray:
    """float32 luminance (scikit-image's rgb2gray weights) of ``rgba`` blended on white, like the gate;
    float32 makes scikit-image compute SSIM in float32 (half the memory traffic of float64)."""
    rgb = rgba[..., :3].astype(np.float32)
    alpha = rgba[..., 3:4].astype(np.float32) / np.float32(255)
    rgb = np.float32(255) + (rgb - np.float32(255)) * alpha
    return rgb @ np.array([0.2125, 0.7154, 0.0721], dtype=np.float32)


def grayscale_ssim(img1: np.ndarray, img2: np.ndarray) -> float | None:
    """Grayscale SSIM (``skimage.metrics.structural_similarity``, data range 255, 7 px window or the
    largest odd window that fits); None when a side is under 3 px."""
    from skimage.metrics import structural_similarity

    win = min(7, img1.shape[0], img1.shape[1])
    win -= 1 - win % 2
    if win < 3:
        return None
    return float(structural_similarity(_gray(img1), _gray(img2), data_range=255.0, win_size=win))


# ---------------------------------------------------------------- comparison

def compare_arrays(baseline: np.ndarray, actual: np.ndarray, *, pixel_threshold: float, max_diff_ratio: float,
                   masks: Sequence[Rect | Mapping[str, Any]] = (), ssim: bool = False) -> ArrayComparison:
    """The §4 steps 3–7 on two same-size ``H × W × 4`` uint8 arrays, without files.

    Excluded pixels are zeroed in copies of both images, pixelmatch runs, regions are found.

    Raises:
        ValueError: shapes differ (callers check dimensions first: ``DIMENSION_MISMATCH``).
        VisualError: ``MASK_ALL_PIXELS`` (blocked) when the masks exclude every pixel.
    """
    if baseline.shape != actual.shape:
        raise ValueError(f"shapes differ: {baseline.shape} vs {actual.shape}")
    height, width = actual.shape[:2]
    excluded = exclusion_map(masks, width, height)
    effective = int(excluded.size - np.count_nonzero(excluded))
    if effective == 0:
        raise VisualError("MASK_ALL_PIXELS", "Masks exclude every comparison pixel")
    if effective != excluded.size:
        baseline = baseline.copy()
        actual = actual.copy()
        baseline[excluded] = 0
        actual[excluded] = 0
    diff = pixelmatch_mask(baseline, actual, pixel_threshold)
    different = int(np.count_nonzero(diff))
    regions, omitted, bounds = diff_regions(diff)
    ratio = different / effective
    passed = ratio <= max_diff_ratio
    metrics: dict[str, Any] = {
        "width": width, "height": height, "differentPixels": different, "effectivePixels": effective,
        "diffRatio": ratio, "includeAA": False, "pixelThreshold": pixel_threshold, "maxDiffRatio": max_diff_ratio,
        "omittedRegions": omitted, "bounds": bounds,
    }
    if ssim:
        metrics["ssim"] = grayscale_ssim(baseline, actual)
    return ArrayComparison(passed=passed, code="PIXELS_MATCH" if passed else "PIXEL_DIFFERENCE", metrics=metrics,
                           regions=regions, diff=diff, actual=actual)


def diff_image(diff: np.ndarray) -> np.ndarray:
    """pixelmatch's ``diff_mask`` output: transparent, counted differences red (``H × W × 4``)."""
    out = np.zeros((*diff.shape, 4), dtype=np.uint8)
    out[diff] = _RED
    return out


def regions_image(actual: np.ndarray, regions: Sequence[Mapping[str, int]]) -> np.ndarray:
    """``actual`` with each region outlined in red, 2 px centred on the box edge (the original's SVG
    ``stroke-width="2"``: one pixel outside, one inside), clipped to the image."""
    out = actual.copy()
    height, width = out.shape[:2]
    for r in regions:
        x0, y0 = r["x"] - 1, r["y"] - 1
        x1, y1 = r["x"] + r["width"], r["y"] + r["height"]  # inclusive outer edge
        cx0, cx1, cy0, cy1 = max(0, x0), min(width, x1 + 1), max(0, y0), min(height, y1 + 1)
        for ys, xs in ((slice(max(0, y0), min(height, y0 + 2)), slice(cx0, cx1)),
                       (slice(max(0, y1 - 1), min(height, y1 + 1)), slice(cx0, cx1)),
                       (slice(cy0, cy1), slice(max(0, x0), min(width, x0 + 2))),
                       (slice(cy0, cy1), slice(max(0, x1 - 1), min(width, x1 + 1)))):
            out[ys, xs] = _RED
    return out


def _write_exclusive(path: Path, data: bytes) -> None:
    """Create ``path`` with ``data``; never replaces an existing file (``ARTIFACT_EXISTS``)."""
    try:
        write_new_bytes(path, data)
    except FileExistsError:
        raise VisualError("ARTIFACT_EXISTS", f"Refusing to overwrite existing artifact {path}") from None


def _write_all(files: list[tuple[Path, bytes]]) -> None:
    """Write every artifact or none (files created by this call are removed on failure)."""
    for path, _ in files:
        if os.path.lexists(path):
            raise VisualError("ARTIFACT_EXISTS", f"Refusing to overwrite existing artifact {path}")
    written: list[Path] = []
    try:
        for path, data in files:
            _write_exclusive(path, data)
            written.append(path)
    except BaseException:
        for path in written:
            path.unlink(missing_ok=True)
        raise


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def compare_images(baseline: str | os.PathLike[str], actual: str | os.PathLike[str], item_dir: str | os.PathLike[str],
                   *, pixel_threshold: float, max_diff_ratio: float, masks: Sequence[Rect | Mapping[str, Any]] = (),
                   ssim: bool = False, input_bytes: int = DEFAULT_INPUT_BYTES,
                   decoded_pixels: int = DEFAULT_DECODED_PIXELS, deadline: float | None = None) -> Comparison:
    """Compare an actual screenshot with its baseline and write the evidence (docs/visual.md §4).

    Args:
        baseline, actual: image files (decoded per §5 with ``input_bytes``/``decoded_pixels``/``deadline``).
        item_dir: ``<roundDir>/<page>/<viewport>``; created if missing. ``actual`` may already be
            ``<item_dir>/actual.png``; otherwise it is copied there (PNG bytes as is, else re-encoded).
        pixel_threshold: pixelmatch threshold 0..1; max_diff_ratio: pass when diffRatio ≤ this.
        masks: rectangles in image pixels excluded from both images (clipped to the image).
        ssim: also compute grayscale SSIM into ``metrics["ssim"]``.

    Returns:
        :class:`Comparison`; a dimension mismatch writes only ``baseline.png`` (+ the actual copy).

    Raises:
        VisualError: the §5 decode codes, ``MASK_ALL_PIXELS`` (nothing written), ``ARTIFACT_EXISTS``
            (an artifact other than the actual is already there; nothing written).
    """
    base = decode_image(baseline, input_bytes=input_bytes, decoded_pixels=decoded_pixels, deadline=deadline)
    act = decode_image(actual, input_bytes=input_bytes, decoded_pixels=decoded_pixels, deadline=deadline)
    directory = Path(os.path.abspath(item_dir))
    directory.mkdir(parents=True, exist_ok=True)
    paths = {kind: directory / name for kind, name in (
        ("baseline", "baseline.png"), ("actual", "actual.png"), ("diff", "diff.png"),
        ("regions", "regions.png"), ("metrics", "metrics.json"))}
    files: list[tuple[Path, bytes]] = [(paths["baseline"], encode_png(base.rgba))]
    if not _same_file(Path(actual), paths["actual"]):
        files.append((paths["actual"], act.data if act.format == "png" else encode_png(act.rgba)))
    artifacts = {"baseline": str(paths["baseline"]), "actual": str(paths["actual"])}
    if (base.width, base.height) != (act.width, act.height):
        _write_all(files)
        return Comparison(
            passed=False, code="DIMENSION_MISMATCH",
            metrics={"baselineWidth": base.width, "baselineHeight": base.height, "actualWidth": act.width,
                     "actualHeight": act.height, "diffRatio": None},
            regions=[], artifacts=artifacts,
            message=(f"Image size differs from the baseline: baseline {base.width}x{base.height}, "
                     f"actual {act.width}x{act.height}"))
    core = compare_arrays(base.rgba, act.rgba, pixel_threshold=pixel_threshold, max_diff_ratio=max_diff_ratio,
                          masks=masks, ssim=ssim)
    files += [(paths["diff"], encode_png(diff_image(core.diff))),
              (paths["regions"], encode_png(regions_image(core.actual, core.regions))),
              (paths["metrics"], json.dumps(core.metrics, indent=2).encode("utf-8"))]
    _write_all(files)
    artifacts.update({kind: str(paths[kind]) for kind in ("diff", "regions", "metrics")})
    m = core.metrics
    summary = f"{m['differentPixels']} of {m['effectivePixels']} pixels differ (ratio {m['diffRatio']:.6g}"
    message = (f"Screenshot matches the baseline: {summary} <= {max_diff_ratio})" if core.passed
               else f"Screenshot differs from the baseline: {summary} > {max_diff_ratio})")
    return Comparison(passed=core.passed, code=core.code, metrics=core.metrics, regions=core.regions,
                      artifacts=artifacts, message=message)
