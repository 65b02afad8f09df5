"""Image rules: one project image file against its declared specification (docs/visual.md §2.3).

The result fields here are ``{status, code, message, repairable, metrics}``; the engine adds
``id``, ``kind: "image"``, ``target``, ``optional``, ``rules`` and ``durationMs``.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from .decode import decode_image
from .errors import VisualError, status_of

RANGE_KEYS = ("width", "height", "aspectRatio", "fileSizeBytes", "dpi")
"""Rule keys holding a ``{exact?, min?, max?}`` range, in the order they are checked."""

MATCH_MESSAGE = "Image meets specifications"


def _js_number(value: Any) -> str:
    """A number as JavaScript prints it (``72`` not ``72.0``), so messages read as the original's."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return json.dumps(value)
    if isinstance(value, float) and math.isfinite(value) and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return repr(value) if isinstance(value, float) else str(value)


def _range_json(spec: Mapping[str, Any]) -> str:
    """Compact JSON of a range (``{"min":100,"max":200}``), keys in ``exact, min, max`` order."""
    return "{" + ",".join(f'"{k}":{_js_number(spec[k])}' for k in ("exact", "min", "max") if k in spec) + "}"


def _outside(spec: Mapping[str, Any], actual: float | None) -> bool:
    if actual is None:
        return True
    return (("exact" in spec and actual != spec["exact"]) or ("min" in spec and actual < spec["min"])
            or ("max" in spec and actual > spec["max"]))


def check_image(rule: Mapping[str, Any], path: str | os.PathLike[str], *, input_bytes: int, decoded_pixels: int,
                deadline: float | None = None, target: str | None = None) -> dict[str, Any]:
    """Check one image file against an image rule (docs/visual.md §2.3).

    Args:
        rule: the Image rule JSON (camelCase): optional ``formats`` (list of ``png|jpeg|webp``),
            ranges ``width``, ``height`` (px), ``aspectRatio`` (width/height), ``fileSizeBytes``
            (bytes), ``dpi`` (dots per inch), and ``transparency`` (``transparent|opaque``).
        path: the file, already through the project path gate.
        input_bytes, decoded_pixels, deadline: §5 decode budgets (bytes, pixels, monotonic seconds).
        target: the file as the rule names it, for the extension rule (default: ``path``).

    Returns:
        ``{status, code, message, repairable, metrics}``: ``passed``/``IMAGE_MATCH``/``Image meets
        specifications``; or ``failed``/``IMAGE_SPEC_MISMATCH`` with every failed rule joined by ``"; "``
        (repairable); or a decode failure as its code with status from its kind (``IMAGE_CORRUPT``
        failed, ``INPUT_BUDGET`` blocked, …; ``metrics`` None). ``metrics`` = ``{width, height,
        aspectRatio, fileSizeBytes, format, dpi (None = unknown), transparentPixels (alpha < 255)}``.
    """
    try:
        decoded = decode_image(path, input_bytes=input_bytes, decoded_pixels=decoded_pixels, deadline=deadline)
    except VisualError as exc:
        return {"status": status_of(exc.kind), "code": exc.code, "message": exc.message,
                "repairable": exc.kind == "failed", "metrics": None}
    metrics: dict[str, Any] = {
        "width": decoded.width,
        "height": decoded.height,
        "aspectRatio": decoded.width / decoded.height,
        "fileSizeBytes": len(decoded.data),
        "format": decoded.format,
        "dpi": decoded.density,
        "transparentPixels": int(np.count_nonzero(decoded.rgba[..., 3] < 255)),
    }
    failures: list[str] = []
    name = os.fspath(target if target is not None else path)
    extension = os.path.splitext(name.replace("\\", "/").rsplit("/", 1)[-1])[1][1:].lower()
    if (extension if extension != "jpg" else "jpeg") != decoded.format:
        failures.append("File extension does not match encoded format")
    formats = rule.get("formats")
    if formats and decoded.format not in formats:
        failures.append("Encoded format is not allowed")
    for key in RANGE_KEYS:
        spec = rule.get(key)
        if spec and _outside(spec, metrics[key]):
            actual = "unknown" if metrics[key] is None else _js_number(metrics[key])
            failures.append(f"{key}: expected {_range_json(spec)}, actual {actual}")
    transparency = rule.get("transparency")
    if transparency == "transparent" and not metrics["transparentPixels"]:
        failures.append("No actual transparent pixels")
    if transparency == "opaque" and metrics["transparentPixels"]:
        failures.append("Image contains transparent pixels")
    if failures:
        return {"status": "failed", "code": "IMAGE_SPEC_MISMATCH", "message": "; ".join(failures),
                "repairable": True, "metrics": metrics}
    return {"status": "passed", "code": "IMAGE_MATCH", "message": MATCH_MESSAGE, "repairable": False,
            "metrics": metrics}
