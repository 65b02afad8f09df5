"""Pieces of the capture pipeline that do not drive the browser themselves (docs/visual.md §3):
the request guard (which origins a page may reach), the stabilisation script, the login-state
file check, and the pixel step of the stability loop (mask, compare, re-encode).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import time
import urllib.parse
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from .errors import VisualError
from .services import project_path

STORAGE_STATE_BYTES = 5 * 1024 * 1024
"""Largest login-state file read (bytes)."""

OPEN_SCHEMES = ("data", "blob", "about")
"""Schemes a page may always use (docs/visual.md §3 step 1)."""

STABILISE_CSS = """
*, *::before, *::after {
  transition: none !important;
  animation-duration: 0s !important;
  animation-delay: 0s !important;
  animation-iteration-count: 1 !important;
  caret-color: transparent !important;
  scroll-behavior: auto !important;
}
html { scroll-behavior: auto !important; }
"""
"""Stabilisation CSS: transitions off, CSS animations run to their end state at once (an
animation's end state is its last keyframe with ``fill-mode: forwards|both``, else the
element's own style), no text caret, no smooth scrolling (docs/visual.md §3 step 8)."""

STABILISE_JS = """css => {
  for (const a of document.getAnimations()) {
    try {
      const end = a.effect && a.effect.getComputedTiming ? a.effect.getComputedTiming().endTime : Infinity;
      if (Number.isFinite(end)) a.finish(); else a.cancel();
    } catch (e) { try { a.cancel(); } catch (e2) {} }
  }
  const style = document.createElement('style');
  style.setAttribute('data-tianshu-visual', '');
  style.textContent = css;
  (document.head || document.documentElement).appendChild(style);
  if (document.activeElement && document.activeElement !== document.body) {
    const el = document.activeElement;
    if (typeof el.setSelectionRange === 'function') { try { el.setSelectionRange(0, 0); } catch (e) {} }
  }
  return new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))));
}"""
"""Run Web Animations to their end (finite) or cancel them (infinite), then add
:data:`STABILISE_CSS`; resolves after two frames so the styles are applied."""

WAIT_ASSETS_JS = """async ([all, timeoutMs]) => {
  const visible = img => {
    const r = img.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) return false;
    return all || (r.bottom > 0 && r.right > 0 && r.top < innerHeight && r.left < innerWidth);
  };
  const images = Array.from(document.images).filter(visible);
  const settle = img => img.complete ? Promise.resolve() : new Promise(r => {
    img.addEventListener('load', r, { once: true });
    img.addEventListener('error', r, { once: true });
  });
  const work = Promise.all([document.fonts.ready, ...images.map(settle)])
    .then(() => Promise.all(images.map(img => img.decode ? img.decode().catch(() => {}) : null)));
  await Promise.race([work, new Promise(r => setTimeout(r, timeoutMs))]);
  return images.every(img => img.complete);
}"""
"""Wait until ``document.fonts.ready`` and the rendered images (all, or those in the viewport)
are loaded and decoded, at most ``timeoutMs``; returns whether every one completed."""

LAZY_SCROLL_JS = """async ([budget, dpr]) => {
  const height = () => Math.max(document.documentElement.scrollHeight, document.body ? document.body.scrollHeight : 0);
  const frame = () => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  const step = Math.max(1, window.innerHeight);
  for (let y = 0; y < height(); y += step) {
    if (height() * window.innerWidth * dpr * dpr > budget) break;
    window.scrollTo(0, y);
    await frame();
  }
  const h = height();
  window.scrollTo(0, 0);
  await frame();
  return h;
}"""
"""fullPage: scroll down in viewport-height steps so lazy content loads (stops once the page
outgrows the pixel budget), back to the top; returns the final ``scrollHeight`` (CSS px)."""

GEOMETRY_JS = """(els) => {
  els = els || [];
  if (els.length === 1) els[0].scrollIntoView({ block: 'nearest', inline: 'nearest', behavior: 'instant' });
  const d = document.documentElement, b = document.body || d;
  return {
    sx: window.scrollX, sy: window.scrollY,
    width: Math.max(b.scrollWidth, d.scrollWidth, b.offsetWidth, d.offsetWidth, b.clientWidth, d.clientWidth),
    height: Math.max(b.scrollHeight, d.scrollHeight, b.offsetHeight, d.offsetHeight, b.clientHeight, d.clientHeight),
    rects: els.map(e => { const r = e.getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; }),
  };
}"""
"""Scroll offset and full document size in CSS px (the size Playwright's fullPage shot takes);
given a locator's elements (``evaluate_all``), also their viewport-relative boxes ``[x, y,
width, height]`` — a single element is first scrolled into view (``nearest``)."""

RECTS_JS = "els => els.map(e => { const r = e.getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; })"
"""Viewport-relative boxes ``[x, y, width, height]`` (CSS px) of a locator's elements."""


def origin_of(url: str) -> str:
    """The serialized origin of ``url`` (``scheme://host[:port]``, default ports dropped, IPv6
    bracketed); ``<scheme>:`` for a URL without a host (``file:``, ``chrome:``)."""
    try:
        parts = urllib.parse.urlsplit(url)
        scheme = parts.scheme.lower()
        host = (parts.hostname or "").lower()
        port = parts.port
    except ValueError:
        return url.split("/", 1)[0][:100]
    if not host:
        return f"{scheme}:"
    if ":" in host:
        host = f"[{host}]"
    default = {"http": 80, "ws": 80, "https": 443, "wss": 443}.get(scheme)
    return f"{scheme}://{host}" + (f":{port}" if port is not None and port != default else "")


class RequestGuard:
    """Which requests a page may make (docs/visual.md §3 step 1): its own origin, ``allowed_origins``,
    ``data:``/``blob:``/``about:``; everything else is aborted and its origin recorded in
    :attr:`blocked` (insertion-ordered, unique). A WebSocket is allowed when its origin, or the
    same origin with ``http(s)`` for ``ws(s)``, is allowed."""

    def __init__(self, page_url: str, allowed_origins: Iterable[str]) -> None:
        self.allowed = {origin_of(page_url), *(origin_of(o) for o in allowed_origins)}
        self.blocked: dict[str, None] = {}

    def allows(self, url: str) -> bool:
        """True when ``url`` may be requested; records its origin otherwise."""
        scheme = url.split(":", 1)[0].lower()
        if scheme in OPEN_SCHEMES:
            return True
        origin = origin_of(url)
        as_http = origin.replace("ws://", "http://", 1).replace("wss://", "https://", 1)
        if origin in self.allowed or (scheme in ("ws", "wss") and as_http in self.allowed):
            return True
        self.blocked.setdefault(origin, None)
        return False

    async def install(self, context: Any) -> None:
        """Route every request and WebSocket of the Playwright ``context`` through :meth:`allows`."""

        async def on_request(route: Any) -> None:
            with contextlib.suppress(Exception):  # the page or context went away meanwhile
                if self.allows(route.request.url):
                    await route.continue_()
                else:
                    await route.abort("blockedbyclient")

        async def on_socket(ws: Any) -> None:
            with contextlib.suppress(Exception):  # the page or context went away meanwhile
                if self.allows(ws.url):
                    ws.connect_to_server()
                else:
                    await ws.close(code=1008, reason="blocked by visual acceptance")

        await context.route("**/*", on_request)
        await context.route_web_socket("**/*", on_socket)

    def error(self) -> VisualError:
        """``RESOURCE_BLOCKED`` naming the blocked origins."""
        return VisualError("RESOURCE_BLOCKED", "Blocked resource origins: " + ", ".join(self.blocked))


def mask_rects(boxes: Iterable[tuple[float, float, float, float]], dpr: float,
               size: tuple[int, int]) -> list[dict[str, int]]:
    """Mask rectangles in screenshot pixels: each CSS-px box ``(x, y, w, h)`` relative to the
    capture's origin, scaled by ``dpr``, widened to whole pixels and clipped to ``size``
    ``(width, height)``; boxes entirely outside the capture are dropped (docs/visual.md §3 step 10)."""
    out = []
    width, height = size
    for x, y, w, h in boxes:
        x0, y0 = max(0, math.floor(x * dpr)), max(0, math.floor(y * dpr))
        x1, y1 = min(width, math.ceil((x + w) * dpr)), min(height, math.ceil((y + h) * dpr))
        if x1 > x0 and y1 > y0:
            out.append({"x": x0, "y": y0, "width": x1 - x0, "height": y1 - y0})
    return out


def decode_rgba(png: bytes) -> np.ndarray:
    """``H × W × 4`` uint8 RGBA pixels of a screenshot PNG."""
    with Image.open(io.BytesIO(png)) as im:
        return np.asarray(im.convert("RGBA"))


def apply_masks(rgba: np.ndarray, rects: Iterable[dict[str, int]]) -> np.ndarray:
    """A copy of ``rgba`` with every masked pixel set to ``(0, 0, 0, 0)`` (docs/visual.md §3 step 12).

    Raises:
        VisualError: ``MASK_ALL_PIXELS`` when the masks cover every pixel.
    """
    rects = list(rects)
    if not rects:
        return rgba
    out = np.array(rgba, copy=True)
    covered = np.zeros(out.shape[:2], dtype=bool)
    for r in rects:
        covered[r["y"]:r["y"] + r["height"], r["x"]:r["x"] + r["width"]] = True
    if covered.all():
        raise VisualError("MASK_ALL_PIXELS", "The masks cover every pixel of the screenshot")
    out[covered] = 0
    return out


def encode_png(rgba: np.ndarray) -> bytes:
    """Deterministic PNG bytes of ``rgba`` (equal pixels → equal bytes)."""
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(rgba, dtype=np.uint8), "RGBA").save(buf, "PNG", compress_level=6)
    return buf.getvalue()


# --- login state (docs/visual.md §3 step 3) -------------------------------------------------------

_COOKIE_KEYS = {"name", "value", "domain", "path", "expires", "httpOnly", "secure", "sameSite"}


def load_storage_state(project_root: str | Path, rel: str) -> dict[str, Any]:
    """Read and check a Playwright-style login state file of the project.

    Shape (strict, unknown keys refused): ``{"cookies": [{name, value, domain, path="/",
    expires?, httpOnly?, secure?, sameSite? (Strict|Lax|None)}], "origins": [{origin,
    localStorage: [{name, value}]}]}``; both lists optional. Returns the state normalised for
    ``browser.new_context(storage_state=…)`` (every cookie field present, ``expires`` -1 for a
    session cookie).

    Raises:
        VisualError: ``LOGIN_STATE_INVALID`` (not a project file, > 5 MiB, not JSON, wrong shape;
            the message names the file and the field, never the contents) or
            ``LOGIN_STATE_EXPIRED`` (a cookie with ``0 < expires·1000 <= now``).
    """
    def invalid(why: str) -> VisualError:
        return VisualError("LOGIN_STATE_INVALID", f"Login state {rel}: {why}")

    path = project_path(project_root, rel)
    if path is None or not path.is_file():
        raise invalid("not a file inside the project")
    try:
        if path.stat().st_size > STORAGE_STATE_BYTES:
            raise invalid("larger than 5 MiB")
        data = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        raise invalid("not readable UTF-8 JSON") from None
    if not isinstance(data, dict) or set(data) - {"cookies", "origins"}:
        raise invalid("expected an object with only 'cookies' and 'origins'")
    cookies, origins = data.get("cookies", []), data.get("origins", [])
    if not isinstance(cookies, list) or not isinstance(origins, list):
        raise invalid("'cookies' and 'origins' must be lists")
    now_ms = time.time() * 1000
    out_cookies = []
    for i, c in enumerate(cookies):
        where = f"cookies[{i}]"
        if not isinstance(c, dict) or set(c) - _COOKIE_KEYS or not {"name", "value", "domain"} <= set(c):
            raise invalid(f"{where} must have name, value, domain and only known fields")
        if not all(isinstance(c[k], str) for k in ("name", "value", "domain")) or not c["name"] or not c["domain"]:
            raise invalid(f"{where}: name, value and domain must be strings (name and domain non-empty)")
        path_ = c.get("path", "/")
        expires = c.get("expires", -1)
        if not isinstance(path_, str) or not path_.startswith("/"):
            raise invalid(f"{where}.path must start with '/'")
        if isinstance(expires, bool) or not isinstance(expires, (int, float)) or not math.isfinite(expires):
            raise invalid(f"{where}.expires must be a number")
        if any(k in c and not isinstance(c[k], bool) for k in ("httpOnly", "secure")):
            raise invalid(f"{where}: httpOnly and secure must be booleans")
        if c.get("sameSite", "Lax") not in ("Strict", "Lax", "None"):
            raise invalid(f"{where}.sameSite must be Strict, Lax or None")
        if 0 < expires * 1000 <= now_ms:
            raise VisualError("LOGIN_STATE_EXPIRED", f"Login state {rel}: {where} expired; record a fresh login state")
        out_cookies.append({"name": c["name"], "value": c["value"], "domain": c["domain"], "path": path_,
                            "expires": expires if expires > 0 else -1, "httpOnly": c.get("httpOnly", False),
                            "secure": c.get("secure", False), "sameSite": c.get("sameSite", "Lax")})
    out_origins = []
    for i, o in enumerate(origins):
        where = f"origins[{i}]"
        if not isinstance(o, dict) or set(o) != {"origin", "localStorage"} or not isinstance(o["origin"], str):
            raise invalid(f"{where} must be exactly {{origin, localStorage}}")
        if urllib.parse.urlsplit(o["origin"]).scheme not in ("http", "https") or origin_of(o["origin"]) != o["origin"]:
            raise invalid(f"{where}.origin must be an http(s) origin")
        items = o["localStorage"]
        if not isinstance(items, list) or not all(
                isinstance(e, dict) and set(e) == {"name", "value"} and isinstance(e["name"], str)
                and isinstance(e["value"], str) for e in items):
            raise invalid(f"{where}.localStorage must be a list of {{name, value}} strings")
        out_origins.append({"origin": o["origin"], "localStorage": [dict(e) for e in items]})
    return {"cookies": out_cookies, "origins": out_origins}
