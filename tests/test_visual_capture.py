"""Page sources and screenshots in real headless Chromium (docs/visual.md §3, §3.1).

Every browser test launches Debian's Chromium through :class:`VisualBrowser` against the fixture
site ``tests/visual_site`` (served by the pool's static server: no network, no external fonts).
After every test no process the test started (Chromium, Playwright's driver, a command
service) may be left.
"""

from __future__ import annotations

import http.client
import io
import json
import os
import shutil
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import psutil
import pytest
from PIL import Image
from tianshu_mcp.acceptance.visual.capture import (
    Capture,
    CaptureSpec,
    VisualBrowser,
    load_storage_state,
)
from tianshu_mcp.acceptance.visual.errors import VisualError
from tianshu_mcp.acceptance.visual.services import ServicePool, static_file
from tianshu_mcp.core.procs import is_alive, tree_alive

CHROMIUM = "/usr/lib/chromium/chromium"
SITE = Path(__file__).resolve().parent / "visual_site"
needs_chromium = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium is not installed")
pytestmark = pytest.mark.anyio

SERVER_PY = """\
import http.server, os, sys
port = int(sys.argv[1])
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("<html><body style='margin:0'><h1 id='g'>" + os.environ.get("GREETING", "none")
                + "</h1></body></html>").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
with open("server.pid", "w") as fh:
    fh.write(str(os.getpid()))
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


# --- fixtures ------------------------------------------------------------------------------------

@pytest.fixture(autouse=True)
def no_leftovers() -> Iterator[None]:
    """No child process started during the test survives it (zombies count as gone)."""
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    yield
    deadline = time.monotonic() + 15
    while True:
        left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before and is_alive(p)]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert not left, [(p.pid, p.name()) for p in left]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project directory holding a copy of the fixture site under ``site/``."""
    root = tmp_path / "project"
    shutil.copytree(SITE, root / "site")
    return root


@pytest.fixture
async def pool(project: Path) -> AsyncIterator[ServicePool]:
    services = ServicePool(project, service_timeout_ms=20000)
    try:
        yield services
    finally:
        await services.aclose()


@pytest.fixture
async def browser() -> AsyncIterator[VisualBrowser]:
    shot = await VisualBrowser.launch(executable_path=CHROMIUM)
    try:
        yield shot
    finally:
        await shot.aclose()
    assert shot._record is not None and not tree_alive(shot._record)
    assert shot._profile is not None and not shot._profile.exists()


async def site(pool: ServicePool) -> str:
    return await pool.url_for({"type": "static", "root": "site"}, time.monotonic() + 30)


def spec(url: str, **kw: Any) -> CaptureSpec:
    kw.setdefault("width", 640)
    kw.setdefault("height", 400)
    kw.setdefault("item_deadline", time.monotonic() + 60)
    return CaptureSpec(url=url, **kw)


def pixels(shot: Capture) -> np.ndarray:
    with Image.open(io.BytesIO(shot.png)) as im:
        assert im.mode == "RGBA"
        return np.asarray(im)


async def failure(browser: VisualBrowser, capture: CaptureSpec) -> VisualError:
    with pytest.raises(VisualError) as info:
        await browser.capture(capture)
    return info.value


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url: str, path: str) -> tuple[int, dict[str, str], bytes]:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


# --- captures ------------------------------------------------------------------------------------

@needs_chromium
async def test_a_static_page_capture_is_stable_and_sized_viewport_times_dpr(browser: VisualBrowser,
                                                                           pool: ServicePool) -> None:
    base = await site(pool)
    first = await browser.capture(spec(f"{base}/index.html"))
    again = await browser.capture(spec(f"{base}/index.html"))
    assert pixels(first).shape == (400, 640, 4)
    assert 2 <= first.samples <= 3 and first.masks == []
    assert first.png == again.png  # a fresh context renders the same bytes
    env = first.environment
    assert env["viewport"] == {"width": 640, "height": 400, "deviceScaleFactor": 1}
    assert env["platform"] == sys.platform and env["browser"] == browser.version and env["browserKind"] == "managed"
    assert env["storageStateLoaded"] is False and env["arch"] and env["os"]

    double = await browser.capture(spec(f"{base}/index.html", device_scale_factor=2))
    assert pixels(double).shape == (800, 1280, 4)
    assert double.environment["viewport"]["deviceScaleFactor"] == 2


@needs_chromium
async def test_animations_transitions_and_a_focused_caret_still_give_a_stable_capture(
        browser: VisualBrowser, pool: ServicePool) -> None:
    base = await site(pool)
    first = await browser.capture(spec(f"{base}/animated.html"))
    second = await browser.capture(spec(f"{base}/animated.html"))
    assert first.png == second.png  # the infinite spinner, the slide, the fade and the caret are all frozen
    # the finite "forwards" slide is shown at its end state (margin-left 200px): green at x≈16+200+40
    img = pixels(first)
    slider_row = 60 + 16 + 80 + 20
    assert tuple(img[slider_row, 16 + 200 + 40][:3]) == (0x27, 0xAE, 0x60)
    # a page that keeps changing is detected
    err = await failure(browser, spec(f"{base}/unstable.html", stability_samples=3))
    assert err.code == "SCREENSHOT_UNSTABLE" and err.kind == "blocked"


@needs_chromium
async def test_masks_are_rectangles_in_screenshot_pixels_and_blanked(browser: VisualBrowser, pool: ServicePool) -> None:
    base = await site(pool)
    shot = await browser.capture(spec(f"{base}/index.html", device_scale_factor=2, mask_selectors=["#badge"]))
    assert shot.masks == [{"x": 800, "y": 200, "width": 300, "height": 100}]  # 400,100 150×50 CSS px × 2
    img = pixels(shot)
    assert (img[200:300, 800:1100] == 0).all()
    assert tuple(img[199, 800]) != (0, 0, 0, 0) and tuple(img[300, 800]) != (0, 0, 0, 0)
    # three inline items: one rectangle each
    items = await browser.capture(spec(f"{base}/index.html", mask_selectors=[".item"]))
    assert len(items.masks) == 3 and all(m["height"] == 30 and m["width"] in (100, 101) for m in items.masks)
    # element capture: the mask is relative to the element; masking everything is refused
    badge = await browser.capture(spec(f"{base}/index.html", capture="element", selector="main",
                                       mask_selectors=["#badge"]))
    main_top = 60  # <main> starts under the 60px header; #badge is absolute at (400, 100) in the page
    assert badge.masks == [{"x": 400, "y": 100 - main_top, "width": 150, "height": 50}]
    err = await failure(browser, spec(f"{base}/index.html", capture="element", selector="#card", mask_selectors=["#card"]))
    assert err.code == "MASK_ALL_PIXELS"
    scrolled = await browser.capture(spec(f"{base}/tall.html", capture="fullPage", mask_selectors=["header"],
                                          steps=[{"type": "scroll", "y": 500}]))
    assert scrolled.masks == [{"x": 0, "y": 0, "width": 640, "height": 60}]  # page coordinates, not viewport
    assert (await failure(browser, spec(f"{base}/index.html", mask_selectors=["#nothing"]))).code == "MASK_NOT_FOUND"
    assert (await failure(browser, spec(f"{base}/index.html", mask_selectors=["#empty"]))).code == "MASK_NOT_VISIBLE"


@needs_chromium
async def test_full_page_and_element_captures_have_their_own_sizes(browser: VisualBrowser, pool: ServicePool) -> None:
    base = await site(pool)
    full = await browser.capture(spec(f"{base}/tall.html", capture="fullPage"))
    assert pixels(full).shape == (60 + 1500, 640, 4)
    full2 = await browser.capture(spec(f"{base}/tall.html", capture="fullPage", device_scale_factor=2))
    assert pixels(full2).shape == (2 * 1560, 1280, 4)
    card = await browser.capture(spec(f"{base}/index.html", capture="element", selector="#card"))
    assert pixels(card).shape == (120, 300, 4)
    assert tuple(pixels(card)[0, 0][:3]) == (0x20, 0x46, 0x6E)  # the card's border, not the page around it

    below = await browser.capture(spec(f"{base}/interactive.html", capture="element", selector="#footer-box"))
    assert pixels(below).shape == (30, 120, 4)  # below the fold: scrolled into view
    assert (pixels(below)[:, :, :3] == (0x8E, 0x44, 0xAD)).all()
    tall = await browser.capture(spec(f"{base}/interactive.html", capture="element", selector="#spacer"))
    assert pixels(tall).shape == (2000, 640 - 32, 4)  # taller than the viewport: a full-page shot, clipped
    assert tuple(pixels(tall)[-1, 0][:3]) != (255, 255, 255)  # the gradient's dark end, not a blank

    err = await failure(browser, spec(f"{base}/index.html", capture="element", selector=".item"))
    assert (err.code, err.kind) == ("ELEMENT_AMBIGUOUS", "failed")
    err = await failure(browser, spec(f"{base}/index.html", capture="element", selector="#empty"))
    assert (err.code, err.kind) == ("ELEMENT_HIDDEN", "failed")
    assert (await failure(browser, spec(f"{base}/index.html", decoded_pixels=640 * 399))).code == "PIXEL_BUDGET"
    assert (await failure(browser, spec(f"{base}/tall.html", capture="fullPage",
                                        decoded_pixels=640 * 1000))).code == "PIXEL_BUDGET"


@needs_chromium
async def test_steps_click_input_hover_scroll_and_wait_change_the_page(browser: VisualBrowser, pool: ServicePool) -> None:
    base = await site(pool)
    url = f"{base}/interactive.html"
    plain = (await browser.capture(spec(url))).png
    variants = {
        "click": [{"type": "click", "selector": "#btn"}],
        "input": [{"type": "input", "selector": "#name", "value": "new text"}],
        "hover": [{"type": "hover", "selector": "#hoverbox"}],
        "scroll": [{"type": "scroll", "y": 300}],
        "scroll-to": [{"type": "scroll", "selector": "#bottom"}],
        "wait": [{"type": "click", "selector": "#reveal"}, {"type": "wait", "selector": "#late"}],
    }
    shots = {name: (await browser.capture(spec(url, steps=steps))).png for name, steps in variants.items()}
    for name, png in shots.items():
        assert png != plain, name
    assert len(set(shots.values())) == len(shots)
    same = await browser.capture(spec(url, steps=[{"type": "wait", "durationMs": 50}]))
    assert same.png == plain

    err = await failure(browser, spec(url, steps=[{"type": "click", "selector": "#missing"}], navigation_timeout_ms=3000))
    assert (err.code, err.kind) == ("INTERACTION_FAILED", "failed") and "Step 1 (click" in err.message, err


@needs_chromium
async def test_ready_selector_404_and_blocked_origins(browser: VisualBrowser, pool: ServicePool) -> None:
    base = await site(pool)
    await browser.capture(spec(f"{base}/index.html", ready_selector="#ready"))
    err = await failure(browser, spec(f"{base}/index.html", ready_selector="#nothing", navigation_timeout_ms=3000))
    assert err.code == "PAGE_NOT_READY", err
    err = await failure(browser, spec(f"{base}/missing.html"))
    assert err.code == "PAGE_UNREACHABLE" and "404" in err.message
    err = await failure(browser, spec(f"{base}/external.html"))
    assert err.code == "RESOURCE_BLOCKED" and "http://127.0.0.2:9" in err.message
    # allowed: the request goes out (and fails: nothing listens there), nothing is blocked
    await browser.capture(spec(f"{base}/external.html", allowed_origins=["http://127.0.0.2:9"]))
    # WebSockets: another origin is refused and reported, the page's own host is not blocked
    port = base.rsplit(":", 1)[1]
    err = await failure(browser, spec(f"{base}/ws.html?to=ws://127.0.0.2:9/socket", ready_selector="header"))
    assert err.code == "RESOURCE_BLOCKED" and "ws://127.0.0.2:9" in err.message
    await browser.capture(spec(f"{base}/ws.html?to=ws://127.0.0.1:{port}/socket"))
    # the page itself on a port nobody serves
    err = await failure(browser, spec(f"http://127.0.0.1:{free_port()}/"))
    assert err.code == "PAGE_UNREACHABLE"


@needs_chromium
async def test_a_server_that_never_answers_gives_a_coded_timeout(browser: VisualBrowser) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/"
    try:
        err = await failure(browser, spec(url, navigation_timeout_ms=1000))
        assert err.code == "PAGE_UNREACHABLE" and "timed out" in err.message
        err = await failure(browser, spec(url, item_deadline=time.monotonic() + 1.0))
        assert err.code == "ITEM_TIMEOUT"
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        listener.close()


@needs_chromium
async def test_a_login_state_is_loaded_into_the_context(browser: VisualBrowser, pool: ServicePool,
                                                        project: Path) -> None:
    base = await site(pool)
    (project / "state.json").write_text(json.dumps({
        "cookies": [{"name": "session", "value": "abc", "domain": "127.0.0.1", "path": "/"}],
        "origins": [{"origin": base, "localStorage": [{"name": "k", "value": "stored"}]}]}))
    state = load_storage_state(project, "state.json")
    assert state["cookies"][0]["expires"] == -1 and state["cookies"][0]["sameSite"] == "Lax"
    anonymous = await browser.capture(spec(f"{base}/cookie.html"))
    logged_in = await browser.capture(spec(f"{base}/cookie.html", storage_state=state))
    assert logged_in.png != anonymous.png
    assert logged_in.environment["storageStateLoaded"] is True


async def test_login_state_files_are_checked_without_echoing_them(tmp_path: Path) -> None:
    secret = "s3cr3t-token-value"

    def code_of(content: str | None, rel: str = "state.json") -> VisualError:
        if content is not None:
            (tmp_path / rel).write_text(content)
        with pytest.raises(VisualError) as info:
            load_storage_state(tmp_path, rel)
        assert secret not in info.value.message
        return info.value

    cookie = {"name": "sid", "value": secret, "domain": "localhost", "path": "/"}
    assert code_of("{not json " + secret).code == "LOGIN_STATE_INVALID"
    assert code_of(json.dumps({"cookies": [cookie], "extra": secret})).code == "LOGIN_STATE_INVALID"
    assert code_of(json.dumps({"cookies": [{**cookie, "token": secret}]})).code == "LOGIN_STATE_INVALID"
    assert code_of(json.dumps({"cookies": [{**cookie, "sameSite": "lax"}]})).code == "LOGIN_STATE_INVALID"
    assert code_of(json.dumps({"origins": [{"origin": "http://x/", "localStorage": []}]})).code == "LOGIN_STATE_INVALID"
    assert code_of(None, "missing.json").code == "LOGIN_STATE_INVALID"
    assert code_of(None, "../outside.json").code == "LOGIN_STATE_INVALID"
    err = code_of(json.dumps({"cookies": [{**cookie, "expires": time.time() - 60}]}))
    assert err.code == "LOGIN_STATE_EXPIRED"
    (tmp_path / "ok.json").write_text(json.dumps({"cookies": [{**cookie, "expires": time.time() + 3600}]}))
    assert load_storage_state(tmp_path, "ok.json")["origins"] == []


async def test_a_missing_browser_is_browser_missing(tmp_path: Path) -> None:
    with pytest.raises(VisualError) as info:
        await VisualBrowser.launch(executable_path=str(tmp_path / "no-chromium"))
    assert info.value.code == "BROWSER_MISSING"


# --- services ------------------------------------------------------------------------------------

async def test_the_static_server_gates_paths_and_never_caches(pool: ServicePool, project: Path, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("outside")
    os.symlink(tmp_path / "secret.txt", project / "site" / "link.txt")
    os.symlink(project / "site" / "index.html", project / "site" / "inner-link.html")
    (project / "site" / "sub").mkdir()
    (project / "site" / "sub" / "a.txt").write_text("a")
    (project / "site" / ".env").write_text("TOKEN=secret")
    (project / "site" / ".git").mkdir()
    (project / "site" / ".git" / "config").write_text("[core]")
    base = await site(pool)
    assert base.startswith("http://127.0.0.1:")
    assert base == await site(pool)  # identical definitions share one server
    status, headers, body = http_get(base, "/")
    assert status == 200 and b"Fixture site" in body
    assert headers["cache-control"] == "no-store" and headers["content-type"] == "text/html; charset=utf-8"
    assert http_get(base, "/style.css")[1]["content-type"].startswith("text/css")
    assert http_get(base, "/logo.svg")[1]["content-type"].startswith("image/svg+xml")
    assert http_get(base, "/sub/a.txt?x=1")[0] == 200
    for path in ("/link.txt", "/inner-link.html", "/sub/", "/sub", "/../secret.txt", "/%2e%2e/secret.txt",
                 "/sub/..%2f..%2fsecret.txt", "/nope", "//etc/passwd", "/index.html%00", "/.env", "/.git/config",
                 "/%2eenv"):
        assert http_get(base, path)[0] == 404, path
    assert static_file(project / "site", "/") == project / "site" / "index.html"

    for root in ("missing", "site/index.html", "../project", "/etc"):
        with pytest.raises(VisualError) as info:
            await pool.url_for({"type": "static", "root": root}, time.monotonic() + 5)
        assert info.value.code == "STATIC_ROOT", root
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        with pytest.raises(VisualError) as info:
            await pool.url_for({"type": "static", "root": "site", "port": taken.getsockname()[1]}, time.monotonic() + 5)
        assert info.value.code == "PORT_CONFLICT"
    existing = {"type": "existing", "url": "http://localhost:5999/app"}
    assert await pool.url_for(existing, time.monotonic() + 5) == "http://localhost:5999/app"
    await pool.aclose()
    with pytest.raises(OSError):
        http_get(base, "/")


def command_source(project: Path, port: int, **kw: Any) -> dict[str, Any]:
    (project / "serve.py").write_text(SERVER_PY)
    source = {"type": "command", "command": sys.executable, "args": ["serve.py", str(port)], "cwd": ".",
              "env": {}, "readyUrl": f"http://127.0.0.1:{port}/"}
    source.update(kw)
    return source


@needs_chromium
async def test_a_command_service_becomes_ready_is_captured_and_is_killed(
        browser: VisualBrowser, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TS_VISUAL_TEST_GREETING", "hello from the host")
    port = free_port()
    source = command_source(project, port, env={"GREETING": "TS_VISUAL_TEST_GREETING"})
    pool = ServicePool(project, service_timeout_ms=20000)
    try:
        base = await pool.url_for(source, time.monotonic() + 30)
        assert base == f"http://127.0.0.1:{port}"
        assert await pool.url_for(dict(reversed(list(source.items()))), time.monotonic() + 30) == base
        assert b"hello from the host" in http_get(base, "/")[2]
        pid = int((project / "server.pid").read_text())
        server = psutil.Process(pid)
        assert is_alive(server)
        shot = await browser.capture(spec(f"{base}/"))
        assert pixels(shot).shape == (400, 640, 4)
    finally:
        await pool.aclose()
    assert not is_alive(server)
    await pool.aclose()  # idempotent


async def test_command_service_failures_are_coded(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TS_VISUAL_TEST_ABSENT", raising=False)
    pool = ServicePool(project, service_timeout_ms=30000)
    deadline = time.monotonic() + 60
    try:
        exits = command_source(project, free_port(), args=["-c", "import sys; sys.exit(3)"])
        with pytest.raises(VisualError) as info:
            await pool.url_for(exits, deadline)
        assert info.value.code == "SERVICE_EXITED" and "3" in info.value.message

        with pytest.raises(VisualError) as info:
            await pool.url_for(command_source(project, free_port(), env={"X": "TS_VISUAL_TEST_ABSENT"}), deadline)
        assert info.value.code == "SERVICE_ENV_MISSING" and "TS_VISUAL_TEST_ABSENT" in info.value.message

        with pytest.raises(VisualError) as info:
            await pool.url_for(command_source(project, 1, readyUrl="http://127.0.0.1/"), deadline)
        assert info.value.code == "SERVICE_PORT_REQUIRED"

        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen(1)
            port = taken.getsockname()[1]
            with pytest.raises(VisualError) as info:
                await pool.url_for(command_source(project, port, readyUrl=f"http://localhost:{port}/"), deadline)
            assert info.value.code == "PORT_CONFLICT"
            with socket.create_connection(("127.0.0.1", port), timeout=5):
                pass  # the existing listener is untouched

        never = command_source(project, free_port(), args=["-c", "import time; time.sleep(60)"])
        impatient = ServicePool(project, service_timeout_ms=1000)
        try:
            with pytest.raises(VisualError) as info:
                await impatient.url_for(never, deadline)
            assert info.value.code == "ITEM_TIMEOUT" and "1000ms" in info.value.message
        finally:
            await impatient.aclose()
        with pytest.raises(VisualError) as info:  # the item deadline bounds it too
            await pool.url_for({**never, "args": ["-c", "import time; time.sleep(61)"]}, time.monotonic() + 0.3)
        assert info.value.code == "ITEM_TIMEOUT"
        with pytest.raises(VisualError) as info:
            await pool.url_for({**never, "cwd": "../"}, deadline)
        assert info.value.code == "CONFIG_INVALID"
    finally:
        await pool.aclose()

    stopped = False
    cancelled = ServicePool(project, service_timeout_ms=30000, should_stop=lambda: stopped)
    try:
        source = command_source(project, free_port(), args=["-c", "import time; time.sleep(60)"])
        async def stop_soon() -> None:
            nonlocal stopped
            await anyio.sleep(0.5)
            stopped = True

        async with anyio.create_task_group() as tg:
            tg.start_soon(stop_soon)
            with pytest.raises(VisualError) as info:
                await cancelled.url_for(source, time.monotonic() + 30)
        assert info.value.code == "CANCELLED" and info.value.kind == "cancelled"
    finally:
        await cancelled.aclose()


@needs_chromium
async def test_a_change_of_chinese_text_changes_the_screenshot(browser: VisualBrowser, pool: ServicePool,
                                                               project: Path) -> None:
    # without a CJK font both render as the same boxes and a change is invisible (setup installs one)
    for name, text in (("a.html", "我们卖水果"), ("b.html", "他们买苹果")):
        (project / "site" / name).write_text(f'<!doctype html><meta charset="utf-8"><p style="font-size:40px">{text}</p>',
                                             encoding="utf-8")
    base = await site(pool)
    a = await browser.capture(spec(f"{base}/a.html"))
    b = await browser.capture(spec(f"{base}/b.html"))
    assert a.png != b.png


# --- late web fonts, a service's stdin and process group (docs/visual.md §3 step 8, §3.1) ---------

FONT_SERVER_PY = """\
import http.server, os, sys, time
port, delay = int(sys.argv[1]), float(sys.argv[2])
FONT = open("late.ttf", "rb").read()
PAGE = (b"<!doctype html><html><head><meta charset='utf-8'><style>"
        b"@font-face { font-family: 'Late'; src: url('/late.ttf') format('truetype'); font-display: swap; }"
        b"body { margin: 0; background: #fff; } p { margin: 8px; font: 56px 'Late', monospace; color: #000; }"
        b"</style></head><body><p id='t'>Wig WAM 0123</p></body></html>")
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        path = self.path.split("?")[0]
        if path == "/late.ttf":
            if "mode=blocked" in (self.headers.get("Referer") or ""):
                self.send_response(404); self.send_header("Content-Length", "0"); self.end_headers(); return
            if "mode=late" in (self.headers.get("Referer") or ""):
                with open("font-requests.txt", "a") as fh:
                    fh.write("late\\n")
                time.sleep(delay)
            body, kind = FONT, "font/ttf"
        else:
            body, kind = PAGE, "text/html; charset=utf-8"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
"""
"""A page whose @font-face file arrives ``delay`` s late when the page URL says ``mode=late``
(seen in the font request's Referer), at once for ``mode=now``, never (404) for ``mode=blocked``."""

FONT_FILES = ("/usr/share/fonts/truetype/dejavu/DejaVuSerif-Bold.ttf",
              "/usr/share/fonts/truetype/liberation/LiberationSerif-Bold.ttf")


@needs_chromium
async def test_a_web_font_that_arrives_late_is_in_the_capture(browser: VisualBrowser, project: Path) -> None:
    font = next((Path(f) for f in FONT_FILES if Path(f).is_file()), None)
    if font is None:
        pytest.skip("no serif TrueType font to serve")
    shutil.copyfile(font, project / "late.ttf")
    (project / "fontserve.py").write_text(FONT_SERVER_PY)
    port = free_port()
    source = {"type": "command", "command": sys.executable, "args": ["fontserve.py", str(port), "2.5"], "cwd": ".",
              "env": {}, "readyUrl": f"http://127.0.0.1:{port}/"}
    pool = ServicePool(project, service_timeout_ms=20000)
    try:
        base = await pool.url_for(source, time.monotonic() + 30)
        started = time.monotonic()
        late = await browser.capture(spec(f"{base}/?mode=late"))
        took = time.monotonic() - started
        now = await browser.capture(spec(f"{base}/?mode=now"))
        blocked = await browser.capture(spec(f"{base}/?mode=blocked"))
    finally:
        await pool.aclose()
    assert (project / "font-requests.txt").read_text() == "late\n"  # the late font was requested once, and waited for
    assert took >= 2.5, took
    # the late capture shows the web font: pixel-identical to the capture where it came at once,
    # and unlike the fallback (monospace) rendering of the page whose font never loads
    assert pixels(late).shape == pixels(blocked).shape == (400, 640, 4)
    assert late.png == now.png
    ink = [int((pixels(shot)[:, :, :3].max(axis=2) < 128).sum()) for shot in (late, blocked)]
    assert late.png != blocked.png and ink[0] > ink[1] * 1.1, ink  # the bold serif has more ink than the fallback
    assert ink[1] > 1000  # the fallback text is there: text was not merely hidden


SERVICE_PROBE_PY = """\
import http.server, json, os, sys
port = int(sys.argv[1])
data = sys.stdin.buffer.read()  # EOF at once, or the service never becomes ready
record = {"stdin": data.decode("latin-1"), "pid": os.getpid(),
          "pgid": os.getpgid(0), "sid": os.getsid(0), "parentPid": os.getppid(),
          "parentPgid": os.getpgid(os.getppid()),
          "stdinIsDevnull": os.path.samestat(os.fstat(0), os.stat(os.devnull))}
with open("probe.json", "w") as fh:
    json.dump(record, fh)
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


async def test_a_command_service_runs_with_stdin_at_eof_in_its_own_process_group(project: Path) -> None:
    # our own stdin is a pipe that never ends while the service starts: a service that inherited
    # it would block in read() and never answer its readyUrl
    (project / "probe.py").write_text(SERVICE_PROBE_PY)
    port = free_port()
    source = {"type": "command", "command": sys.executable, "args": ["probe.py", str(port)], "cwd": ".", "env": {},
              "readyUrl": f"http://127.0.0.1:{port}/"}
    read_end, write_end = os.pipe()
    saved = os.dup(0)
    pool = ServicePool(project, service_timeout_ms=10000)
    try:
        os.dup2(read_end, 0)
        base = await pool.url_for(source, time.monotonic() + 15)
        os.dup2(saved, 0)
        assert http_get(base, "/")[2] == b"ok"
        probe = json.loads((project / "probe.json").read_text())
        server = psutil.Process(probe["pid"])
        assert is_alive(server)
    finally:
        os.dup2(saved, 0)
        for fd in (saved, read_end, write_end):
            os.close(fd)
        await pool.aclose()
    assert probe["stdin"] == "" and probe["stdinIsDevnull"] is True, probe  # EOF, not our never-ending pipe
    assert probe["parentPid"] == os.getpid()  # started by this process, not through a shell
    assert probe["pgid"] == probe["pid"] == probe["sid"], probe  # a session and group of its own
    assert probe["pgid"] != probe["parentPgid"] == os.getpgid(0), probe
    assert not is_alive(server)  # torn down with the pool
