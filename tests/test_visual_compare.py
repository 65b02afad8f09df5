"""Pixel gate, regions, SSIM and comparison artifacts (docs/visual.md §4).

The NumPy gate is checked against the reference Python port ``pixelmatch`` 0.3.0 on generated pairs
(anti-aliased text, alpha, noise, flat palettes, 1-px strips, masks); regions against a direct port of
the original's BFS. Real files in tmp_path.
"""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFilter, ImageFont
from pixelmatch import pixelmatch
from tianshu_mcp.acceptance.visual.compare import (
    Rect,
    compare_arrays,
    compare_images,
    diff_regions,
    exclusion_map,
    pixelmatch_mask,
)
from tianshu_mcp.acceptance.visual.decode import decode_image, encode_png
from tianshu_mcp.acceptance.visual.errors import VisualError

RNG = np.random.default_rng(20260101)
PALETTE = np.array([[255, 255, 255, 255], [0, 0, 0, 255], [128, 128, 128, 255], [30, 90, 200, 128]], np.uint8)
METRIC_KEYS = ["width", "height", "differentPixels", "effectivePixels", "diffRatio", "includeAA", "pixelThreshold",
               "maxDiffRatio", "omittedRegions", "bounds"]


def text_image(width: int, height: int, text: str, dx: int = 0, size: int = 14, block: bool = True) -> np.ndarray:
    """White card with anti-aliased text (FreeType) and a solid block: the edges pixelmatch calls AA."""
    im = Image.new("RGBA", (width, height), (255, 255, 255, 255))
    draw = ImageDraw.Draw(im)
    draw.text((3 + dx, 2), text, fill=(20, 20, 30, 255), font=ImageFont.load_default(size))
    if block:
        draw.rectangle((width // 2, height // 2, width // 2 + 10, height // 2 + 6), fill=(40, 120, 200, 255))
    return np.asarray(im).copy()


def reference_count(a: np.ndarray, b: np.ndarray, threshold: float) -> int:
    return pixelmatch(a.ravel().tolist(), b.ravel().tolist(), a.shape[1], a.shape[0], threshold=threshold)


def pairs() -> list[tuple[str, np.ndarray, np.ndarray]]:
    base = text_image(120, 40, "Hello World")
    translucent = base.copy()
    translucent[..., 3] = RNG.integers(0, 256, base.shape[:2], dtype=np.uint8)
    noise = RNG.integers(0, 256, (30, 37, 4), dtype=np.uint8)
    noise2 = noise.copy()
    noise2[RNG.random((30, 37)) < 0.3] = RNG.integers(0, 256, 4, dtype=np.uint8)
    flat = RNG.integers(0, 4, (40, 50))
    flat2 = flat.copy()
    flat2[RNG.random((40, 50)) < 0.2] = 1
    blur = Image.new("RGBA", (48, 36), (255, 255, 255, 255))
    ImageDraw.Draw(blur).ellipse((8, 6, 30, 28), fill=(200, 40, 40, 255))
    shifted = Image.new("RGBA", (48, 36), (255, 255, 255, 255))
    ImageDraw.Draw(shifted).ellipse((9, 6, 31, 29), fill=(200, 40, 40, 255))
    both_alpha = translucent.copy()
    both_alpha[10:20, 30:60, 3] //= 2
    return [
        ("blurred shape moved", np.asarray(blur.filter(ImageFilter.GaussianBlur(1.5))).copy(),
         np.asarray(shifted.filter(ImageFilter.GaussianBlur(1.5))).copy()),
        ("alpha both sides", translucent, both_alpha),
        ("text changed", base, text_image(120, 40, "Hello Warld")),
        ("text shifted 1px", base, text_image(120, 40, "Hello World", dx=1)),
        ("text bigger", text_image(90, 30, "Abc 123", block=False), text_image(90, 30, "Abc 123", size=15, block=False)),
        ("alpha", base, translucent),
        ("noise", noise, noise2),
        ("flat palette", PALETTE[flat], PALETTE[flat2]),
        ("1 px column", PALETTE[flat][:, :1].copy(), PALETTE[flat2][:, :1].copy()),
        ("1 px row", PALETTE[flat][:1].copy(), PALETTE[flat2][:1].copy()),
        ("identical", base, base.copy()),
    ]


@pytest.mark.parametrize("threshold", [0.0, 0.05, 0.1, 0.3])
def test_pixel_gate_matches_pixelmatch_port(threshold: float) -> None:
    """differentPixels == the reference port's count, pair by pair (anti-aliasing excluded both ways)."""
    for name, a, b in pairs():
        assert int(pixelmatch_mask(a, b, threshold).sum()) == reference_count(a, b, threshold), name
        assert int(pixelmatch_mask(b, a, threshold).sum()) == reference_count(b, a, threshold), name


def test_batches_do_not_change_the_result() -> None:
    """Candidates are processed in batches; tiny batches give the same mask as one batch."""
    for name, a, b in pairs():
        assert np.array_equal(pixelmatch_mask(a, b, 0.1, chunk=7), pixelmatch_mask(a, b, 0.1)), name


def test_anti_aliasing_is_not_counted() -> None:
    """The shifted-text pair has pixels over the colour threshold that pixelmatch calls AA: the port
    counts them only with includeAA=True; the gate does not count them."""
    a, b = text_image(120, 40, "Hello World"), text_image(120, 40, "Hello World", dx=1)
    with_aa = pixelmatch(a.ravel().tolist(), b.ravel().tolist(), 120, 40, threshold=0.1, includeAA=True)
    assert 0 < int(pixelmatch_mask(a, b, 0.1).sum()) < with_aa


def test_masks_parity_with_port_on_zeroed_images() -> None:
    """With masks, the count equals the port run on both images with excluded pixels zeroed (§4.3)."""
    a, b = text_image(120, 40, "Hello World"), text_image(120, 40, "Jello Wurld")
    masks = [Rect(2.5, 1.2, 20.1, 12.7), Rect(100, 30, 500, 500), Rect(-50, -50, 10, 10)]
    out = compare_arrays(a, b, pixel_threshold=0.1, max_diff_ratio=0.0, masks=masks)
    excluded = exclusion_map(masks, 120, 40)
    za, zb = a.copy(), b.copy()
    za[excluded] = 0
    zb[excluded] = 0
    assert out.metrics["differentPixels"] == reference_count(za, zb, 0.1)
    assert out.metrics["effectivePixels"] == 120 * 40 - int(excluded.sum())
    assert not out.diff[excluded].any()


def test_exclusion_map_clipping() -> None:
    """x ∈ [max(0,⌊x⌋), min(W,⌈x+w⌉)); a rect wholly outside the image excludes nothing."""
    m = exclusion_map([Rect(1.5, 0.2, 1.1, 0.9)], 5, 4)
    assert np.argwhere(m).tolist() == [[0, 1], [0, 2], [1, 1], [1, 2]]
    assert not exclusion_map([Rect(5, 0, 3, 3), Rect(0, -9, 5, 2), Rect(1, 1, 0, 3)], 5, 4).any()
    assert exclusion_map([{"x": -3, "y": -3, "width": 100, "height": 100}], 5, 4).all()


def bfs_regions(mask: np.ndarray) -> tuple[list[dict[str, int]], int, dict[str, int] | None]:
    """Direct port of the original's diffRegions (raster scan, BFS, sort after each push, keep 100)."""
    height, width = mask.shape
    flat = mask.ravel()
    seen = np.zeros(flat.size, bool)
    regions: list[dict[str, int]] = []
    count, left, top, right, bottom = 0, width, height, -1, -1
    for start in range(flat.size):
        if not flat[start] or seen[start]:
            continue
        queue, seen[start], n = deque([start]), True, 0
        min_x, min_y, max_x, max_y = width, height, 0, 0
        while queue:
            p = queue.popleft()
            n += 1
            x, y = p % width, p // width
            min_x, min_y, max_x, max_y = min(min_x, x), min(min_y, y), max(max_x, x), max(max_y, y)
            for q, ok in ((p - 1, x > 0), (p + 1, x + 1 < width), (p - width, y > 0), (p + width, y + 1 < height)):
                if ok and flat[q] and not seen[q]:
                    seen[q] = True
                    queue.append(q)
        count += 1
        left, top, right, bottom = min(left, min_x), min(top, min_y), max(right, max_x), max(bottom, max_y)
        regions.append({"x": min_x, "y": min_y, "width": max_x - min_x + 1, "height": max_y - min_y + 1, "area": n})
        regions.sort(key=lambda r: -r["area"])
        if len(regions) > 100:
            regions.pop()
    bounds = {"x": left, "y": top, "width": right - left + 1, "height": bottom - top + 1} if count else None
    return regions, count - len(regions), bounds


def test_regions_match_original_bfs() -> None:
    """Same kept regions (order included, ties in scan order), omitted count and bounds as the original."""
    for density, shape in ((0.05, (60, 80)), (0.35, (50, 70)), (0.6, (40, 40))):
        mask = RNG.random(shape) < density
        assert diff_regions(mask) == bfs_regions(mask)
    mask = np.zeros((10, 10), bool)
    mask[2:4, 3:8] = True
    mask[3:9, 7] = True
    mask[9, 8] = True  # touches (8, 7) only diagonally: a component of its own (4-connectivity)
    mask[0, 9] = True
    regions, omitted, bounds = diff_regions(mask)
    assert regions == [{"x": 3, "y": 2, "width": 5, "height": 7, "area": 15},
                       {"x": 9, "y": 0, "width": 1, "height": 1, "area": 1},  # ties: scan order
                       {"x": 8, "y": 9, "width": 1, "height": 1, "area": 1}]
    assert (omitted, bounds) == (0, {"x": 3, "y": 0, "width": 7, "height": 10})
    assert diff_regions(np.zeros((3, 3), bool)) == ([], 0, None)


def test_regions_keep_100_largest() -> None:
    mask = np.zeros((40, 80), bool)
    mask[::2, ::2] = True  # 800 single-pixel components
    mask[0, 0:5] = True  # one of 5 px
    regions, omitted, bounds = diff_regions(mask)
    assert len(regions) == 100 and omitted == 798 - 100  # the 5-px run merges 3 dots into one component
    assert regions[0] == {"x": 0, "y": 0, "width": 5, "height": 1, "area": 5}
    assert (regions[1]["x"], regions[1]["y"]) == (6, 0)  # ties in scan order
    assert bounds == {"x": 0, "y": 0, "width": 79, "height": 39}


def save_png(path: Path, rgba: np.ndarray) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(encode_png(rgba))
    return path


def test_compare_images_writes_artifacts(tmp_path: Path) -> None:
    a, b = text_image(120, 40, "Hello World"), text_image(120, 40, "Hello Warld")
    baseline = save_png(tmp_path / "proj" / "base.png", a)
    item = tmp_path / "round" / "home" / "desktop"
    actual = save_png(item / "actual.png", b)
    before = actual.read_bytes()
    out = compare_images(baseline, actual, item, pixel_threshold=0.1, max_diff_ratio=0.001)
    assert (out.passed, out.code) == (False, "PIXEL_DIFFERENCE")
    assert list(out.artifacts) == ["baseline", "actual", "diff", "regions", "metrics"]
    assert out.artifacts == {k: str(item / n) for k, n in (("baseline", "baseline.png"), ("actual", "actual.png"),
                             ("diff", "diff.png"), ("regions", "regions.png"), ("metrics", "metrics.json"))}
    assert actual.read_bytes() == before  # the capture's file is used, not rewritten
    assert sorted(p.name for p in item.iterdir()) == ["actual.png", "baseline.png", "diff.png", "metrics.json", "regions.png"]
    m = out.metrics
    assert list(m) == METRIC_KEYS and m["includeAA"] is False
    assert m["differentPixels"] == reference_count(a, b, 0.1)
    assert m["diffRatio"] == m["differentPixels"] / (120 * 40) and m["effectivePixels"] == 4800
    text = (item / "metrics.json").read_text()
    assert json.loads(text) == m and text == json.dumps(m, indent=2)
    assert np.array_equal(decode_image(item / "baseline.png").rgba, a)
    diff = decode_image(item / "diff.png").rgba
    red = np.all(diff == [255, 0, 0, 255], axis=2)
    assert red.sum() == m["differentPixels"] and (diff[~red] == 0).all()
    assert sum(r["area"] for r in out.regions) == m["differentPixels"] and m["omittedRegions"] == 0
    regions_png = decode_image(item / "regions.png").rgba
    r = out.regions[0]
    assert regions_png[r["y"], r["x"]].tolist() == [255, 0, 0, 255]  # inner line of the 2 px outline
    assert regions_png[r["y"] - 1, r["x"] - 1].tolist() == [255, 0, 0, 255]  # outer line
    far = regions_png[0:1, -1]
    assert far.tolist() == b[0:1, -1].tolist()  # away from regions: the actual's pixels


def test_pass_is_inclusive_and_identical_images_match(tmp_path: Path) -> None:
    a = text_image(60, 20, "abc", block=False)
    b = a.copy()
    b[10, 30] = [255, 0, 0, 255]
    base = save_png(tmp_path / "b.png", a)
    out = compare_images(base, save_png(tmp_path / "a.png", b), tmp_path / "i1", pixel_threshold=0.1,
                         max_diff_ratio=1 / 1200)
    assert (out.passed, out.code, out.metrics["diffRatio"]) == (True, "PIXELS_MATCH", 1 / 1200)
    assert out.regions == [{"x": 30, "y": 10, "width": 1, "height": 1, "area": 1}]
    assert (tmp_path / "i1" / "actual.png").read_bytes() == (tmp_path / "a.png").read_bytes()  # copied there
    same = compare_images(base, base, tmp_path / "i2", pixel_threshold=0.1, max_diff_ratio=0)
    assert (same.passed, same.code, same.regions, same.metrics["bounds"]) == (True, "PIXELS_MATCH", [], None)


def test_dimension_mismatch(tmp_path: Path) -> None:
    base = save_png(tmp_path / "b.png", text_image(60, 20, "abc"))
    actual = save_png(tmp_path / "item" / "actual.png", text_image(61, 20, "abc"))
    out = compare_images(base, actual, tmp_path / "item", pixel_threshold=0.1, max_diff_ratio=1.0)
    assert (out.passed, out.code, out.regions) == (False, "DIMENSION_MISMATCH", [])
    assert out.metrics == {"baselineWidth": 60, "baselineHeight": 20, "actualWidth": 61, "actualHeight": 20,
                           "diffRatio": None}
    assert "60x20" in out.message and "61x20" in out.message
    assert sorted(p.name for p in (tmp_path / "item").iterdir()) == ["actual.png", "baseline.png"]
    assert set(out.artifacts) == {"baseline", "actual"}


def test_masks_in_compare_images(tmp_path: Path) -> None:
    a = text_image(60, 20, "abc", block=False)
    b = a.copy()
    b[5:8, 40:44] = [255, 0, 0, 255]
    base, act = save_png(tmp_path / "b.png", a), save_png(tmp_path / "a.png", b)
    out = compare_images(base, act, tmp_path / "m1", pixel_threshold=0.1, max_diff_ratio=0,
                         masks=[Rect(39.5, 4.5, 4.2, 3.1)])
    assert (out.passed, out.metrics["differentPixels"], out.metrics["effectivePixels"]) == (True, 0, 1200 - 5 * 4)
    out = compare_images(base, act, tmp_path / "m2", pixel_threshold=0.1, max_diff_ratio=0,
                         masks=[Rect(500, 500, 10, 10)])  # wholly outside: excludes nothing
    assert (out.passed, out.metrics["differentPixels"], out.metrics["effectivePixels"]) == (False, 12, 1200)
    with pytest.raises(VisualError) as info:
        compare_images(base, act, tmp_path / "m3", pixel_threshold=0.1, max_diff_ratio=0,
                       masks=[Rect(0, 0, 30, 20), Rect(29.5, -1, 40, 40)])
    assert (info.value.code, info.value.kind) == ("MASK_ALL_PIXELS", "blocked")
    assert not (tmp_path / "m3").exists() or not any((tmp_path / "m3").iterdir())  # nothing half-written


def test_refuses_to_overwrite_artifacts(tmp_path: Path) -> None:
    a, b = text_image(60, 20, "abc"), text_image(60, 20, "abd")
    base = save_png(tmp_path / "b.png", a)
    actual = save_png(tmp_path / "item" / "actual.png", b)
    compare_images(base, actual, tmp_path / "item", pixel_threshold=0.1, max_diff_ratio=0)
    before = {p.name: p.read_bytes() for p in (tmp_path / "item").iterdir()}
    with pytest.raises(VisualError) as info:
        compare_images(base, actual, tmp_path / "item", pixel_threshold=0.5, max_diff_ratio=0)
    assert (info.value.code, info.value.kind) == ("ARTIFACT_EXISTS", "blocked")
    assert {p.name: p.read_bytes() for p in (tmp_path / "item").iterdir()} == before
    (tmp_path / "item2").mkdir()
    (tmp_path / "item2" / "regions.png").write_bytes(b"evidence")
    with pytest.raises(VisualError):
        compare_images(base, actual, tmp_path / "item2", pixel_threshold=0.1, max_diff_ratio=0)
    assert sorted(p.name for p in (tmp_path / "item2").iterdir()) == ["regions.png"]  # no partial set


def test_decode_errors_surface_before_writing(tmp_path: Path) -> None:
    base = save_png(tmp_path / "b.png", text_image(60, 20, "abc"))
    bad = tmp_path / "item" / "actual.png"
    bad.parent.mkdir()
    bad.write_bytes(encode_png(text_image(60, 20, "abc"))[:70])
    with pytest.raises(VisualError) as info:
        compare_images(base, bad, tmp_path / "item", pixel_threshold=0.1, max_diff_ratio=0)
    assert info.value.code == "IMAGE_CORRUPT"
    assert [p.name for p in (tmp_path / "item").iterdir()] == ["actual.png"]


def test_ssim_optional(tmp_path: Path) -> None:
    a, b = text_image(60, 20, "abc"), text_image(60, 20, "abd")
    assert "ssim" not in compare_arrays(a, b, pixel_threshold=0.1, max_diff_ratio=0).metrics
    s = compare_arrays(a, b, pixel_threshold=0.1, max_diff_ratio=0, ssim=True).metrics["ssim"]
    assert isinstance(s, float) and 0 < s < 1
    assert compare_arrays(a, a, pixel_threshold=0.1, max_diff_ratio=0, ssim=True).metrics["ssim"] == pytest.approx(1.0)
    tiny = np.zeros((2, 5, 4), np.uint8)
    assert compare_arrays(tiny, tiny, pixel_threshold=0.1, max_diff_ratio=0, ssim=True).metrics["ssim"] is None
    small = np.zeros((4, 5, 4), np.uint8)  # window shrinks to 3
    assert compare_arrays(small, small, pixel_threshold=0.1, max_diff_ratio=0, ssim=True).metrics["ssim"] == pytest.approx(1.0)
    out = compare_images(save_png(tmp_path / "b.png", a), save_png(tmp_path / "a.png", b), tmp_path / "i",
                         pixel_threshold=0.1, max_diff_ratio=0, ssim=True)
    assert list(out.metrics) == METRIC_KEYS + ["ssim"]
    assert json.loads((tmp_path / "i" / "metrics.json").read_text())["ssim"] == out.metrics["ssim"]
