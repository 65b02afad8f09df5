"""Images in: budgeted decoding to sRGB RGBA, PNG encoding (docs/visual.md §5).

Every image the visual stage reads (image rules, content checks, baselines, screenshots) goes through
:func:`decode_image` / :func:`decode_bytes`, which apply the spec's checks in the spec's order:

1. deadline (``ITEM_TIMEOUT``);
2. ``stat``: not a regular file → ``IMAGE_INVALID``; size > ``input_bytes`` → ``INPUT_BUDGET``
   (equality allowed); size 0 → ``IMAGE_EMPTY``; missing → ``IMAGE_MISSING``; the file grew while it
   was read → ``INPUT_CHANGED``; any other read error → ``IMAGE_UNREADABLE``;
3. header only (Pillow opens lazily): no dimensions or ``w*h > decoded_pixels`` → ``PIXEL_BUDGET``;
   not PNG/JPEG/WebP, multi-frame or animated → ``IMAGE_UNSUPPORTED``;
4. full decode — EXIF orientation applied, converted to sRGB through an embedded ICC profile, alpha
   ensured, Pillow warnings treated as errors — failure → ``IMAGE_CORRUPT``; deadline passed →
   ``ITEM_TIMEOUT``.

Pillow cannot interrupt a decode, so the deadline is checked before reading, after reading and after
decoding (the budgets bound the work in between).
"""

from __future__ import annotations

import io
import os
import stat
import threading
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
from PIL import Image, ImageCms, ImageOps, UnidentifiedImageError

from .errors import VisualError

DEFAULT_INPUT_BYTES = 20_971_520
"""``limits.inputBytes`` default (docs/visual.md §1)."""
DEFAULT_DECODED_PIXELS = 32_000_000
"""``limits.decodedPixels`` default (docs/visual.md §1)."""

_FORMATS = {"PNG": "png", "JPEG": "jpeg", "MPO": "jpeg", "WEBP": "webp"}
# Signatures of the supported formats: unidentifiable bytes that start like one of them are corrupt,
# anything else (SVG, text, unknown binaries) is unsupported.
_SIGNATURES = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff")
_SRGB = ImageCms.createProfile("sRGB")
# warnings.catch_warnings swaps process-wide state: decodes that watch for warnings take turns.
_WARN_LOCK = threading.Lock()
_PIL_DIR = os.path.dirname(Image.__file__)


@dataclass(frozen=True)
class Decoded:
    """A decoded image (docs/visual.md §5).

    Attributes:
        data: the input bytes as read (file size = ``len(data)``).
        format: ``png`` | ``jpeg`` | ``webp`` (the encoded format, not the extension).
        width, height: pixels after EXIF orientation.
        density: horizontal resolution in DPI from the file's metadata, None when unknown.
        rgba: ``height × width × 4`` ``uint8`` sRGB pixels, alpha ensured (255 when the file has none).
    """

    data: bytes = field(repr=False)
    format: str
    width: int
    height: int
    density: float | None
    rgba: np.ndarray = field(repr=False)


def _check_deadline(deadline: float | None) -> None:
    if deadline is not None and time.monotonic() >= deadline:
        raise VisualError("ITEM_TIMEOUT", "Image decoding deadline exceeded")


def _read_input(path: str | os.PathLike[str], input_bytes: int, deadline: float | None) -> bytes:
    """Step 2 of §5: stat, budget, read (bounded), growth check."""
    name = os.fspath(path)
    try:
        st = os.stat(name)
        if not stat.S_ISREG(st.st_mode):
            raise VisualError("IMAGE_INVALID", "Input is not a regular file", "failed")
        if st.st_size > input_bytes:
            raise VisualError("INPUT_BUDGET", f"Image exceeds input byte budget ({st.st_size} > {input_bytes} bytes)")
        if st.st_size == 0:
            raise VisualError("IMAGE_EMPTY", "Image is empty", "failed")
        # O_NONBLOCK: a file swapped for a FIFO after the stat must not hang the open.
        fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise VisualError("IMAGE_INVALID", "Input is not a regular file", "failed")
            chunks: list[bytes] = []
            want = st.st_size + 1
            while want > 0:
                _check_deadline(deadline)
                chunk = os.read(fd, min(want, 1 << 22))
                if not chunk:
                    break
                chunks.append(chunk)
                want -= len(chunk)
        finally:
            os.close(fd)
    except VisualError:
        raise
    except FileNotFoundError as exc:
        raise VisualError("IMAGE_MISSING", f"Missing image: {name}", "failed") from exc
    except OSError as exc:
        raise VisualError("IMAGE_UNREADABLE", f"Cannot read image (check permissions): {exc.strerror or exc}") from exc
    data = b"".join(chunks)
    if len(data) > st.st_size:
        raise VisualError("INPUT_CHANGED", "Image grew while being read; retry with a stable file")
    if not data:
        raise VisualError("IMAGE_EMPTY", "Image is empty", "failed")
    return data


def decode_image(path: str | os.PathLike[str], *, input_bytes: int = DEFAULT_INPUT_BYTES,
                 decoded_pixels: int = DEFAULT_DECODED_PIXELS, deadline: float | None = None) -> Decoded:
    """Read and decode an image file under the §5 budgets (docs/visual.md §5).

    Args:
        path: the file (already through :func:`project_file` when it comes from the project).
        input_bytes: file size limit in bytes (``limits.inputBytes``; a file of exactly this size passes).
        decoded_pixels: ``width × height`` limit in pixels (``limits.decodedPixels``), checked from the
            header before the pixels are decoded.
        deadline: ``time.monotonic()`` seconds after which the item has timed out, or None.

    Returns:
        :class:`Decoded` (``rgba`` is ``height × width × 4`` uint8, sRGB, EXIF-rotated).

    Raises:
        VisualError: in §5 order ``ITEM_TIMEOUT``, ``IMAGE_INVALID``, ``INPUT_BUDGET``, ``IMAGE_EMPTY``,
            ``IMAGE_MISSING``, ``INPUT_CHANGED``, ``IMAGE_UNREADABLE``, ``PIXEL_BUDGET``,
            ``IMAGE_UNSUPPORTED``, ``IMAGE_CORRUPT``, ``ITEM_TIMEOUT``.
    """
    _check_deadline(deadline)
    data = _read_input(path, input_bytes, deadline)
    _check_deadline(deadline)
    decoded = _decode(data, decoded_pixels)
    _check_deadline(deadline)
    return decoded


def decode_bytes(data: bytes, *, decoded_pixels: int = DEFAULT_DECODED_PIXELS) -> Decoded:
    """Decode in-memory image bytes (a screenshot PNG) with the §5 header and decode rules.

    Raises:
        VisualError: ``IMAGE_EMPTY``, ``PIXEL_BUDGET``, ``IMAGE_UNSUPPORTED``, ``IMAGE_CORRUPT``.
    """
    if not data:
        raise VisualError("IMAGE_EMPTY", "Image is empty", "failed")
    return _decode(bytes(data), decoded_pixels)


def encode_png(rgba: np.ndarray, *, compress_level: int = 6) -> bytes:
    """PNG bytes of ``rgba`` (``H × W × 4`` uint8; ``H × W × 3`` is taken as opaque RGB).

    Deterministic: equal pixels give equal bytes (the capture stability loop compares them, §3 step 12).
    """
    arr = np.ascontiguousarray(rgba, dtype=np.uint8)
    if arr.ndim != 3 or arr.shape[2] not in (3, 4):
        raise ValueError(f"expected an H x W x 4 uint8 array, got shape {arr.shape}")
    buf = io.BytesIO()
    Image.fromarray(arr, "RGBA" if arr.shape[2] == 4 else "RGB").save(buf, "PNG", compress_level=compress_level)
    return buf.getvalue()


def _decode(data: bytes, decoded_pixels: int) -> Decoded:
    """Steps 3–4 of §5 on bytes already read."""
    with _WARN_LOCK, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        im = _open_header(data, decoded_pixels)
        try:
            try:
                rgba, density = _pixels(im)
            except VisualError:
                raise
            except Exception as exc:  # any decoder failure is a corrupt image
                raise VisualError("IMAGE_CORRUPT", f"Image cannot be fully decoded: {exc}", "failed") from exc
        finally:
            im.close()
        pil_warnings = [w for w in caught if os.path.abspath(w.filename).startswith(_PIL_DIR)
                        and not issubclass(w.category, Image.DecompressionBombWarning)]
    if pil_warnings:
        raise VisualError("IMAGE_CORRUPT", f"Image cannot be fully decoded: {pil_warnings[0].message}", "failed")
    fmt = _FORMATS[im.format or ""]
    return Decoded(data=data, format=fmt, width=int(rgba.shape[1]), height=int(rgba.shape[0]),
                   density=density, rgba=rgba)


def _open_header(data: bytes, decoded_pixels: int) -> Image.Image:
    """Parse the header only; apply the pixel budget, then the format rules."""
    try:
        im = Image.open(io.BytesIO(data))
    except Image.DecompressionBombError as exc:
        raise VisualError("PIXEL_BUDGET", "Image exceeds decoded pixel budget") from exc
    except UnidentifiedImageError as exc:
        if data.startswith(_SIGNATURES) or (data[:4] == b"RIFF" and data[8:12] == b"WEBP"):
            raise VisualError("IMAGE_CORRUPT", "Image header cannot be decoded", "failed") from exc
        raise VisualError("IMAGE_UNSUPPORTED", "Only static PNG, JPEG and WebP are supported", "failed") from exc
    except Exception as exc:  # a plugin choking on the header
        raise VisualError("IMAGE_CORRUPT", f"Image header cannot be decoded: {exc}", "failed") from exc
    width, height = im.size
    if width <= 0 or height <= 0 or width * height > decoded_pixels:
        im.close()
        raise VisualError("PIXEL_BUDGET", f"Image exceeds decoded pixel budget ({width}x{height} > {decoded_pixels} pixels)")
    try:
        frames = int(getattr(im, "n_frames", 1) or 1)
        animated = bool(getattr(im, "is_animated", False))
    except Exception as exc:  # counting frames walks the file
        im.close()
        raise VisualError("IMAGE_CORRUPT", f"Image cannot be fully decoded: {exc}", "failed") from exc
    # MPO (a JPEG carrying extra pictures, common from cameras) is read as its first picture
    if im.format not in _FORMATS or (im.format != "MPO" and (animated or frames > 1)):
        im.close()
        raise VisualError("IMAGE_UNSUPPORTED", "Only static PNG, JPEG and WebP are supported", "failed")
    return im


def _pixels(im: Image.Image) -> tuple[np.ndarray, float | None]:
    """Full decode: EXIF orientation, sRGB, RGBA; density (DPI) from the metadata."""
    im.load()
    density = _density(im)
    icc = im.info.get("icc_profile")
    orientation = im.getexif().get(0x0112, 1)
    if orientation not in (None, 1):
        im = ImageOps.exif_transpose(im)
    if im.mode.startswith("I"):  # 16-bit grey: keep the high byte (Pillow's convert would clip)
        arr = np.asarray(im).astype(np.int64)
        im = Image.fromarray((np.clip(arr, 0, 65535) >> 8).astype(np.uint8), "L")
    if im.mode in ("P", "PA") or "transparency" in im.info:  # palette or tRNS colour key → real alpha
        im = im.convert("RGBA")
    alpha = im.getchannel("A") if "A" in im.getbands() else None
    base = im
    if alpha is not None:
        base = im.convert("RGB") if im.mode not in ("LA", "La") else im.convert("L")
    rgb = _to_srgb(base, icc)
    if alpha is not None:
        rgb.putalpha(alpha)
    return np.asarray(rgb.convert("RGBA")).copy(), density


def _to_srgb(im: Image.Image, icc: bytes | None) -> Image.Image:
    """``im`` (no alpha) as sRGB ``RGB``; through the embedded ICC profile when it is not sRGB."""
    if icc:
        try:
            src = ImageCms.ImageCmsProfile(io.BytesIO(icc))
            if "srgb" not in (ImageCms.getProfileDescription(src) or "").lower().replace(" ", ""):
                mode = im.mode if im.mode in ("RGB", "L", "CMYK") else "RGB"
                converted = ImageCms.profileToProfile(im.convert(mode), src, _SRGB, outputMode="RGB")
                if converted is not None:
                    return converted
        except (ImageCms.PyCMSError, OSError, ValueError):
            pass  # an unusable profile: the pixels are taken as sRGB
    return im.convert("RGB")


def _density(im: Image.Image) -> float | None:
    """Horizontal DPI from ``info["dpi"]`` (PNG pHYs, JPEG JFIF/EXIF), None when absent or zero."""
    dpi = im.info.get("dpi")
    try:
        value = float(dpi[0]) if isinstance(dpi, tuple) else float(dpi) if dpi is not None else None
    except (TypeError, ValueError):
        return None
    return value if value and value > 0 else None
