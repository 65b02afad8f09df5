"""Image decoding under budgets, the project path gate, and image rules (docs/visual.md §5, §2.3).

Real files in tmp_path, encoded by Pillow; no mocks.
"""

from __future__ import annotations

import io
import os
import struct
import time
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from tianshu_mcp.acceptance.visual.decode import (
    decode_bytes,
    decode_image,
    encode_png,
)
from tianshu_mcp.acceptance.visual.errors import VisualError
from tianshu_mcp.acceptance.visual.paths import project_file
from tianshu_mcp.acceptance.visual.images import check_image

BUDGET = {"input_bytes": 20_971_520, "decoded_pixels": 32_000_000}


def png_bytes(width: int = 8, height: int = 6, alpha: int = 255, **save: object) -> bytes:
    im = Image.new("RGBA", (width, height), (10, 200, 30, alpha))
    buf = io.BytesIO()
    im.save(buf, "PNG", **save)
    return buf.getvalue()


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def save(path: Path, im: Image.Image, fmt: str, **kw: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    im.save(path, fmt, **kw)
    return path


def header_only_png(width: int, height: int) -> bytes:
    """A PNG signature + IHDR (+ IEND) claiming ``width × height``, with no pixel data at all."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0))
            + chunk(b"IEND", b""))


def linear_rgb_icc() -> bytes:
    """A minimal ICC v2 matrix/TRC profile: sRGB primaries (D50-adapted), linear (identity) curves."""
    def s15(v: float) -> bytes:
        return struct.pack(">i", round(v * 65536))

    def xyz(x: float, y: float, z: float) -> bytes:
        return b"XYZ " + b"\0" * 4 + s15(x) + s15(y) + s15(z)
    text = b"Linear RGB test\0"
    desc = b"desc" + b"\0" * 4 + struct.pack(">I", len(text)) + text + b"\0" * 78
    curv = b"curv" + b"\0" * 4 + struct.pack(">I", 0)
    tags = [(b"desc", desc), (b"wtpt", xyz(0.9642, 1.0, 0.8249)), (b"rXYZ", xyz(0.4361, 0.2225, 0.0139)),
            (b"gXYZ", xyz(0.3851, 0.7169, 0.0971)), (b"bXYZ", xyz(0.1431, 0.0606, 0.7141)),
            (b"rTRC", curv), (b"gTRC", curv), (b"bTRC", curv), (b"cprt", b"text" + b"\0" * 4 + b"none\0")]
    start = 128 + 4 + 12 * len(tags)
    table, data = struct.pack(">I", len(tags)), b""
    for sig, body in tags:
        data += b"\0" * (-(start + len(data)) % 4)
        table += sig + struct.pack(">II", start + len(data), len(body))
        data += body
    header = (struct.pack(">I", start + len(data)) + b"none" + bytes([2, 0x10, 0, 0]) + b"mntrRGB XYZ "
              + b"\0" * 12 + b"acsp" + b"\0" * 28 + s15(0.9642) + s15(1.0) + s15(0.8249) + b"\0" * 48)
    return header + table + data


def code_of(fn, *args, **kw) -> VisualError:
    with pytest.raises(VisualError) as info:
        fn(*args, **kw)
    return info.value


# ---------------------------------------------------------------- decode: good inputs

def test_decodes_png_jpeg_webp_to_rgba(tmp_path: Path) -> None:
    """Each supported format decodes to H × W × 4 uint8 with its format name and the file bytes."""
    im = Image.new("RGB", (9, 5), (200, 100, 50))
    for fmt, name in (("PNG", "png"), ("JPEG", "jpeg"), ("WEBP", "webp")):
        path = save(tmp_path / f"a.{name}", im, fmt)
        d = decode_image(path, **BUDGET)
        assert (d.format, d.width, d.height, d.rgba.shape, d.rgba.dtype) == (name, 9, 5, (5, 9, 4), np.uint8)
        assert d.data == path.read_bytes()
        assert (d.rgba[..., 3] == 255).all()


def test_density_orientation_palette_and_16_bit(tmp_path: Path) -> None:
    """DPI from PNG pHYs / JPEG JFIF (None when absent); EXIF orientation applied; palette
    transparency and 16-bit grey converted (not clipped)."""
    im = Image.new("RGB", (4, 2), (1, 2, 3))
    assert decode_image(save(tmp_path / "d.png", im, "PNG", dpi=(300, 300)), **BUDGET).density == pytest.approx(300, abs=0.01)
    assert decode_image(save(tmp_path / "d.jpg", im, "JPEG", dpi=(150, 150)), **BUDGET).density == 150
    assert decode_image(save(tmp_path / "n.png", im, "PNG"), **BUDGET).density is None
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90° clockwise on display
    rotated = decode_image(save(tmp_path / "r.jpg", im, "JPEG", exif=exif.tobytes()), **BUDGET)
    assert (rotated.width, rotated.height) == (2, 4)
    pal = Image.new("P", (3, 1))
    pal.putpalette([0, 0, 0, 255, 0, 0] + [0] * 762)
    pal.putdata([0, 1, 1])
    d = decode_image(save(tmp_path / "p.png", pal, "PNG", transparency=0), **BUDGET)
    assert d.rgba[0, :, 3].tolist() == [0, 255, 255] and d.rgba[0, 1, :3].tolist() == [255, 0, 0]
    keyed = Image.new("L", (2, 1), 0)
    keyed.putpixel((1, 0), 200)
    d = decode_image(save(tmp_path / "k.png", keyed, "PNG", transparency=0), **BUDGET)  # tRNS colour key
    assert d.rgba[0, :, 3].tolist() == [0, 255] and d.rgba[0, 1, :3].tolist() == [200, 200, 200]
    grey = Image.fromarray(np.array([[0, 0x8000, 0xFFFF]], dtype=np.uint16))
    d = decode_image(save(tmp_path / "g.png", grey, "PNG"), **BUDGET)
    assert d.rgba[0, :, 0].tolist() == [0, 128, 255]


def test_embedded_icc_profile_converted_to_srgb() -> None:
    """Pixels tagged with a linear-RGB profile are converted to sRGB (128 linear → 188 sRGB); an
    unusable profile is ignored (pixels taken as sRGB)."""
    im = Image.new("RGBA", (2, 1), (128, 128, 128, 77))
    for icc, expected in ((linear_rgb_icc(), 188), (b"not a profile", 128)):
        buf = io.BytesIO()
        im.save(buf, "PNG", icc_profile=icc)
        assert decode_bytes(buf.getvalue()).rgba[0].tolist() == [[expected] * 3 + [77]] * 2


def test_decode_bytes_and_encode_png_round_trip() -> None:
    """encode_png is lossless and deterministic; decode_bytes applies the same rules in memory."""
    rgba = np.random.default_rng(3).integers(0, 256, (7, 11, 4), dtype=np.uint8)
    data = encode_png(rgba)
    assert data == encode_png(rgba)
    d = decode_bytes(data)
    assert d.format == "png" and np.array_equal(d.rgba, rgba)
    assert code_of(decode_bytes, b"").code == "IMAGE_EMPTY"
    assert code_of(decode_bytes, data, decoded_pixels=76).code == "PIXEL_BUDGET"
    assert code_of(decode_bytes, data[: len(data) // 2]).code == "IMAGE_CORRUPT"
    assert code_of(decode_bytes, b"<svg xmlns='http://www.w3.org/2000/svg'/>").code == "IMAGE_UNSUPPORTED"


# ---------------------------------------------------------------- decode: bad inputs, §5 codes and kinds

def test_missing_empty_directory_fifo(tmp_path: Path) -> None:
    err = code_of(decode_image, tmp_path / "nope.png", **BUDGET)
    assert (err.code, err.kind) == ("IMAGE_MISSING", "failed")
    err = code_of(decode_image, write(tmp_path / "empty.png", b""), **BUDGET)
    assert (err.code, err.kind) == ("IMAGE_EMPTY", "failed")
    err = code_of(decode_image, tmp_path, **BUDGET)
    assert (err.code, err.kind) == ("IMAGE_INVALID", "failed")
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)  # must be refused from stat, never opened (an open would block)
    assert code_of(decode_image, fifo, **BUDGET).code == "IMAGE_INVALID"


def test_input_budget_is_inclusive(tmp_path: Path) -> None:
    path = write(tmp_path / "a.png", png_bytes())
    size = path.stat().st_size
    assert decode_image(path, input_bytes=size, decoded_pixels=100).width == 8
    err = code_of(decode_image, path, input_bytes=size - 1, decoded_pixels=100)
    assert (err.code, err.kind) == ("INPUT_BUDGET", "blocked")


def test_pixel_budget_from_header_before_decoding(tmp_path: Path) -> None:
    """A header claiming too many pixels is refused as PIXEL_BUDGET although it carries no pixel
    data at all (a full decode would say IMAGE_CORRUPT): the check runs on the header."""
    big = write(tmp_path / "big.png", header_only_png(6000, 6000))  # 36 M > 32 M default
    err = code_of(decode_image, big, **BUDGET)
    assert (err.code, err.kind) == ("PIXEL_BUDGET", "blocked")
    huge = write(tmp_path / "huge.png", header_only_png(100_000, 100_000))  # beyond Pillow's bomb limit
    assert code_of(decode_image, huge, **BUDGET).code == "PIXEL_BUDGET"
    small = write(tmp_path / "s.png", png_bytes(8, 6))
    assert decode_image(small, input_bytes=10**6, decoded_pixels=48).width == 8
    assert code_of(decode_image, small, input_bytes=10**6, decoded_pixels=47).code == "PIXEL_BUDGET"


def test_corrupt_and_truncated(tmp_path: Path) -> None:
    good = png_bytes(64, 64)
    err = code_of(decode_image, write(tmp_path / "t.png", good[: len(good) // 2]), **BUDGET)
    assert (err.code, err.kind) == ("IMAGE_CORRUPT", "failed")
    assert code_of(decode_image, write(tmp_path / "h.png", header_only_png(4, 4)), **BUDGET).code == "IMAGE_CORRUPT"
    assert code_of(decode_image, write(tmp_path / "sig.png", b"\x89PNG\r\n\x1a\n" + b"\0" * 40), **BUDGET).code == "IMAGE_CORRUPT"
    jpeg = io.BytesIO()
    Image.new("RGB", (64, 64), (9, 9, 9)).save(jpeg, "JPEG")
    cut = jpeg.getvalue()[:200]
    assert code_of(decode_image, write(tmp_path / "t.jpg", cut), **BUDGET).code == "IMAGE_CORRUPT"


def test_unsupported_gif_svg_animated_webp(tmp_path: Path) -> None:
    frames = [Image.new("RGB", (6, 6), c) for c in ((255, 0, 0), (0, 255, 0))]
    gif = save(tmp_path / "a.gif", frames[0], "GIF")
    anim = save(tmp_path / "a.webp", frames[0], "WEBP", save_all=True, append_images=frames[1:], duration=100, loop=0)
    svg = write(tmp_path / "a.svg", b'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>')
    apng = save(tmp_path / "anim.png", frames[0], "PNG", save_all=True, append_images=frames[1:], duration=100)
    for path in (gif, anim, svg, apng):
        err = code_of(decode_image, path, **BUDGET)
        assert (err.code, err.kind) == ("IMAGE_UNSUPPORTED", "failed"), path.name
    # a camera JPEG with extra pictures (MPO) is a JPEG: its first picture is decoded
    mpo = decode_image(save(tmp_path / "cam.jpg", frames[0], "MPO", save_all=True, append_images=frames[1:]), **BUDGET)
    assert mpo.format == "jpeg" and mpo.rgba[3, 3, 0] > 200 and mpo.rgba[3, 3, 1] < 50


def test_unreadable_and_deadline(tmp_path: Path) -> None:
    path = write(tmp_path / "a.png", png_bytes())
    err = code_of(decode_image, path, deadline=time.monotonic() - 1, **BUDGET)
    assert (err.code, err.kind) == ("ITEM_TIMEOUT", "blocked")
    if os.geteuid() != 0:
        path.chmod(0)
        err = code_of(decode_image, path, **BUDGET)
        assert (err.code, err.kind) == ("IMAGE_UNREADABLE", "blocked")


# ---------------------------------------------------------------- project path gate

def test_project_file_gate(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    outside = tmp_path / "outside"
    (root / "img").mkdir(parents=True)
    outside.mkdir()
    write(outside / "x.png", png_bytes())
    real = root.resolve()
    assert project_file(root, "img/a.png") == real / "img" / "a.png"
    assert project_file(root, "new/dir/b.png") == real / "new" / "dir" / "b.png"  # missing tail allowed
    assert project_file(root, "img/../c.png") == real / "c.png"
    for rel in ("../outside/x.png", str(outside / "x.png"), "img/../../outside/x.png", "a\0b"):
        assert code_of(project_file, root, rel).code == "PATH_OUTSIDE_PROJECT", rel
    os.symlink(outside, root / "link")  # directory symlink escaping the project
    os.symlink(outside / "x.png", root / "img" / "file.png")  # file symlink escaping the project
    os.symlink(outside / "ghost.png", root / "img" / "dangling.png")  # dangling, pointing outside
    for rel in ("link/x.png", "link/missing/y.png", "img/file.png", "img/dangling.png"):
        err = code_of(project_file, root, rel)
        assert (err.code, err.kind) == ("PATH_OUTSIDE_PROJECT", "blocked"), rel
    os.symlink(root / "img", root / "alias")  # a symlink inside the project resolves to its target
    assert project_file(root, "alias/a.png") == real / "img" / "a.png"
    os.symlink(root, tmp_path / "rootlink")  # the root itself may be a symlink
    assert project_file(tmp_path / "rootlink", "img/a.png") == real / "img" / "a.png"


# ---------------------------------------------------------------- image rules (§2.3)

def test_check_image_passes_with_metrics(tmp_path: Path) -> None:
    path = save(tmp_path / "logo.png", Image.new("RGBA", (40, 20), (0, 0, 0, 0)), "PNG", dpi=(72, 72))
    rule = {"formats": ["png"], "width": {"exact": 40}, "height": {"min": 10, "max": 20},
            "aspectRatio": {"exact": 2}, "fileSizeBytes": {"max": 10_000}, "transparency": "transparent"}
    out = check_image(rule, path, **BUDGET)
    assert (out["status"], out["code"], out["message"], out["repairable"]) == (
        "passed", "IMAGE_MATCH", "Image meets specifications", False)
    m = out["metrics"]
    assert set(m) == {"width", "height", "aspectRatio", "fileSizeBytes", "format", "dpi", "transparentPixels"}
    assert (m["width"], m["height"], m["aspectRatio"], m["format"], m["transparentPixels"]) == (40, 20, 2.0, "png", 800)
    assert m["fileSizeBytes"] == path.stat().st_size and m["dpi"] == pytest.approx(72, abs=0.01)


def test_check_image_extension_rule(tmp_path: Path) -> None:
    """Extension vs encoded format: ``.jpg`` counts as jpeg, case-insensitive; a PNG named .jpg fails."""
    im = Image.new("RGB", (4, 4))
    assert check_image({}, save(tmp_path / "a.JPG", im, "JPEG"), **BUDGET)["status"] == "passed"
    assert check_image({}, save(tmp_path / "b.jpeg", im, "JPEG"), **BUDGET)["status"] == "passed"
    out = check_image({}, save(tmp_path / "c.jpg", im, "PNG"), **BUDGET)
    assert (out["status"], out["code"], out["message"], out["repairable"]) == (
        "failed", "IMAGE_SPEC_MISMATCH", "File extension does not match encoded format", True)
    # the rule's own file name decides when the caller passes it (the gate returns real paths)
    assert check_image({}, tmp_path / "c.jpg", target="img/c.png", **BUDGET)["status"] == "passed"


def test_check_image_each_failure_text(tmp_path: Path) -> None:
    path = save(tmp_path / "a.jpeg", Image.new("RGB", (30, 20), (5, 5, 5)), "JPEG")
    size = path.stat().st_size
    cases = [
        ({"formats": ["png", "webp"]}, "Encoded format is not allowed"),
        ({"width": {"min": 31}}, 'width: expected {"min":31}, actual 30'),
        ({"height": {"exact": 21}}, 'height: expected {"exact":21}, actual 20'),
        ({"aspectRatio": {"min": 1, "max": 1.4}}, 'aspectRatio: expected {"min":1,"max":1.4}, actual 1.5'),
        ({"fileSizeBytes": {"max": size - 1}}, f'fileSizeBytes: expected {{"max":{size - 1}}}, actual {size}'),
        ({"dpi": {"min": 72}}, 'dpi: expected {"min":72}, actual unknown'),
        ({"transparency": "transparent"}, "No actual transparent pixels"),
    ]
    for rule, text in cases:
        out = check_image(rule, path, **BUDGET)
        assert (out["status"], out["code"], out["message"]) == ("failed", "IMAGE_SPEC_MISMATCH", text), rule
    out = check_image({"width": {"max": 10}, "transparency": "transparent", "formats": ["webp"]}, path, **BUDGET)
    assert out["message"] == ("Encoded format is not allowed; width: expected {\"max\":10}, actual 30; "
                              "No actual transparent pixels")


def test_check_image_dpi_and_opaque(tmp_path: Path) -> None:
    im = Image.new("RGBA", (4, 4), (1, 1, 1, 255))
    im.putpixel((0, 0), (1, 1, 1, 254))
    path = save(tmp_path / "a.jpeg", im.convert("RGB"), "JPEG", dpi=(96, 96))
    assert check_image({"dpi": {"exact": 96}, "transparency": "opaque"}, path, **BUDGET)["status"] == "passed"
    assert check_image({"dpi": {"max": 90}}, path, **BUDGET)["message"] == 'dpi: expected {"max":90}, actual 96'
    png = save(tmp_path / "t.png", im, "PNG")
    out = check_image({"transparency": "opaque"}, png, **BUDGET)
    assert out["message"] == "Image contains transparent pixels" and out["metrics"]["transparentPixels"] == 1


def test_check_image_decode_failures_keep_their_kind(tmp_path: Path) -> None:
    out = check_image({}, write(tmp_path / "bad.png", png_bytes(32, 32)[:60]), **BUDGET)
    assert (out["status"], out["code"], out["repairable"], out["metrics"]) == ("failed", "IMAGE_CORRUPT", True, None)
    out = check_image({}, write(tmp_path / "big.png", png_bytes()), input_bytes=10, decoded_pixels=100)
    assert (out["status"], out["code"], out["repairable"]) == ("blocked", "INPUT_BUDGET", False)
    out = check_image({}, tmp_path / "missing.png", **BUDGET)
    assert (out["status"], out["code"], out["repairable"]) == ("failed", "IMAGE_MISSING", True)
