"""The ``visual`` block of acceptance.json (docs/visual.md §1): defaults, value rules, cross-field rules
1–8, the published JSON Schema, the layer loader, the digest and the effective-value helpers."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from tianshu_mcp.acceptance.config import AcceptanceConfigError, parse_layer, read_layer, resolve_checks
from tianshu_mcp.acceptance.schema import SCHEMA_FILE, acceptance_json_schema
from tianshu_mcp.acceptance.visual.config import (
    VisualConfigError,
    baseline_relative,
    config_digest,
    content_id,
    effective_capture,
    effective_thresholds,
    page_viewports,
    parse_visual,
    platform_name,
)
from tianshu_mcp.core.errors import ErrorCode

EXISTING = {"type": "existing", "url": "http://localhost:3000/"}
JUDGE = {"enabled": True, "command": "judge", "argsTemplate": ["<image:path>", "<expect:file>"]}

FULL: dict[str, Any] = {
    "enabled": True,
    "browser": {"mode": "managed"},
    "baselineRoot": "tests/visual/baselines",
    "viewports": [{"id": "desktop", "width": 1280, "height": 720},
                  {"id": "mobile", "width": 390, "height": 844, "deviceScaleFactor": 2}],
    "defaults": {"capture": "fullPage", "locale": "zh-Hans-CN", "timezone": "Europe/Berlin", "colorScheme": "dark"},
    "limits": {"concurrency": 2, "stabilitySamples": 2},
    "allowedOrigins": ["https://fonts.example.com", "ws://localhost:5173"],
    "pages": [
        {"id": "home", "source": {"type": "static", "root": "dist"}, "route": "/", "maskSelectors": [".clock"],
         "steps": [{"type": "click", "selector": "#menu"}, {"type": "input", "selector": "#q", "value": "hi"},
                   {"type": "hover", "selector": "a"}, {"type": "scroll", "y": 200},
                   {"type": "wait", "selector": ".ready", "state": "visible"}, {"type": "wait", "durationMs": 100},
                   {"type": "wait", "url": "http://localhost:3000/api"}],
         "content": {"expect": "A logo at the top", "blocking": True}},
        {"id": "login", "source": {"type": "command", "command": "npm", "args": ["run", "dev"],
                                   "env": {"PORT": "DEV_PORT"}, "readyUrl": "http://127.0.0.1:3000/health"},
         "route": "/login", "viewports": ["desktop"], "capture": "element", "selector": "#form",
         "baseline": "tests/login.PNG", "pixelThreshold": 0.2, "maxDiffRatio": 0.01},
        {"id": "about", "source": {"type": "existing", "url": "http://[::1]:8080/"}, "pixel": False,
         "content": {"expect": "About text", "samples": 1}},
    ],
    "images": [{"id": "logo", "files": ["assets/logo.png"], "formats": ["png"], "width": {"exact": 512},
                "aspectRatio": {"min": 0.9, "max": 1.1}, "transparency": "transparent"}],
    "content": {**JUDGE, "samples": 3, "timeoutMs": 60000, "minConfidence": 0.6},
    "contents": [{"id": "hero-text", "files": ["shots/hero.png"], "expect": "Says hello",
                  "argsTemplate": ["<image:base64:file>"], "allowRemote": True}],
}


def page(pid: str = "home", **kw: Any) -> dict[str, Any]:
    return {"id": pid, "source": EXISTING, **kw}


def error_of(data: Any) -> VisualConfigError:
    with pytest.raises(VisualConfigError) as ei:
        parse_visual(data)
    return ei.value


# --- defaults and round trip ------------------------------------------------------------------


def test_an_empty_block_gets_every_default() -> None:
    cfg = parse_visual({})
    assert cfg.model_dump(by_alias=True, mode="json") == {
        "enabled": False, "browser": {"mode": "managed"}, "baselineRoot": "tests/visual/baselines",
        "viewports": [{"id": "desktop", "width": 1280, "height": 720, "deviceScaleFactor": 1},
                      {"id": "mobile", "width": 390, "height": 844, "deviceScaleFactor": 1}],
        "defaults": {"capture": "viewport", "pixelThreshold": 0.1, "maxDiffRatio": 0.001, "locale": "en-US",
                     "timezone": "UTC", "colorScheme": "light"},
        "limits": {"concurrency": 1, "serviceTimeoutMs": 60000, "navigationTimeoutMs": 30000, "itemTimeoutMs": 60000,
                   "roundTimeoutMs": 300000, "stabilitySamples": 3, "inputBytes": 20971520,
                   "decodedPixels": 32000000, "artifactBytes": 524288000},
        "allowedOrigins": [], "pages": [], "images": [],
        "content": {"enabled": False, "allowRemote": False, "samples": 3, "timeoutMs": 90000, "cache": True},
        "contents": [],
    }
    # snake_case spellings read the camelCase fields
    assert cfg.limits.item_timeout_ms == 60000 and cfg.defaults.pixel_threshold == 0.1


def test_page_and_source_defaults() -> None:
    cfg = parse_visual({"pages": [page(source={"type": "command", "command": "serve",
                                                "readyUrl": "http://localhost:5000"})]})
    p = cfg.pages[0]
    assert (p.optional, p.route, p.maskSelectors, p.steps, p.pixel) == (False, "/", [], [], True)
    assert p.viewports is None and p.capture is None and p.content is None
    assert (p.source.args, p.source.cwd, p.source.env) == ([], ".", {})


def test_dump_round_trips_and_integral_floats_are_integers() -> None:
    cfg = parse_visual(FULL)
    dumped = cfg.model_dump(by_alias=True, mode="json")
    assert parse_visual(dumped) == cfg
    assert parse_visual(json.loads(json.dumps(dumped))).model_dump(by_alias=True, mode="json") == dumped
    assert "selector" not in dumped["pages"][0]  # omitted optional keys stay omitted, never null
    assert parse_visual({"viewports": [{"id": "a", "width": 100.0, "height": 50}]}).viewports[0].width == 100


# --- cross-field rules 1–8 ----------------------------------------------------------------------

RULES: list[tuple[str, dict[str, Any], dict[str, Any], str]] = [
    ("1 enabled without items", {"enabled": True},
     {"enabled": True, "images": [{"id": "logo", "files": ["logo.png"]}]}, "visual.enabled"),
    ("2 contents while content disabled (visual disabled too)",
     {"contents": [{"id": "c", "files": ["a.png"], "expect": "x"}]},
     {"contents": [{"id": "c", "files": ["a.png"], "expect": "x"}], "content": JUDGE}, "visual.contents[0]"),
    ("2 page content while content disabled", {"pages": [page(content={"expect": "x"})]},
     {"pages": [page(content={"expect": "x"})], "content": JUDGE}, "visual.pages[0].content"),
    ("3 unknown global placeholder", {"content": {"argsTemplate": ["--img", "<image:url>"]}},
     {"content": {"argsTemplate": ["--img=<image:path>", "a<b", "<not a token>"]}}, "visual.content.argsTemplate[1]"),
    ("3 unknown rule placeholder",
     {"contents": [{"id": "c", "files": ["a.png"], "expect": "x", "argsTemplate": ["<oops>"]}], "content": JUDGE},
     {"contents": [{"id": "c", "files": ["a.png"], "expect": "x", "argsTemplate": ["<expect:file>"]}],
      "content": JUDGE}, "visual.contents[0].argsTemplate[0]"),
    ("4 no command", {"pages": [page(content={"expect": "x"})], "content": {"enabled": True, "argsTemplate": ["a"]}},
     {"pages": [page(content={"expect": "x", "command": "j"})], "content": {"enabled": True, "argsTemplate": ["a"]}},
     "visual.pages[0].content.command"),
    ("4 no argsTemplate", {"pages": [page(content={"expect": "x"})], "content": {"enabled": True, "command": "j"}},
     {"pages": [page(content={"expect": "x", "argsTemplate": ["a"]})], "content": {"enabled": True, "command": "j"}},
     "visual.pages[0].content.argsTemplate"),
    ("4 base64 without allowRemote",
     {"pages": [page(content={"expect": "x"})], "content": {**JUDGE, "argsTemplate": ["<image:base64:file>"]}},
     {"pages": [page(content={"expect": "x", "allowRemote": True})],
      "content": {**JUDGE, "argsTemplate": ["<image:base64:file>"]}}, "visual.pages[0].content.allowRemote"),
    ("4 samples x timeout over the round budget",
     {"pages": [page(content={"expect": "x", "samples": 4})], "content": {**JUDGE, "timeoutMs": 100000}},
     {"pages": [page(content={"expect": "x", "samples": 3})], "content": {**JUDGE, "timeoutMs": 100000}},
     "visual.pages[0].content.samples"),
    ("5 duplicate viewport ids (case-insensitive)",
     {"viewports": [{"id": "desktop", "width": 1, "height": 1}, {"id": "Desktop", "width": 2, "height": 2}]},
     {"viewports": [{"id": "desktop", "width": 1, "height": 1}, {"id": "desk", "width": 2, "height": 2}]},
     "visual.viewports[1].id"),
    ("5 duplicate ids across pages and images",
     {"pages": [page("Home")], "images": [{"id": "home", "files": ["a.png"]}]},
     {"pages": [page("home")], "images": [{"id": "logo", "files": ["a.png"]}],
      "viewports": [{"id": "home", "width": 1, "height": 1}]}, "visual.images[0].id"),
    ("6 derived content id collides",
     {"pages": [page("a", content={"expect": "x"})], "content": JUDGE,
      "contents": [{"id": "A-Content", "files": ["a.png"], "expect": "x"}]},
     {"pages": [page("a", content={"expect": "x"})], "content": JUDGE,
      "contents": [{"id": "a-contents", "files": ["a.png"], "expect": "x"}]}, "visual.pages[0].content"),
    ("6 derived content id collides with a viewport",
     {"pages": [page("a", content={"expect": "x"})], "content": JUDGE,
      "viewports": [{"id": "a-content", "width": 1, "height": 1}]},
     {"pages": [page("a", content={"expect": "x"})], "content": JUDGE,
      "viewports": [{"id": "a-content2", "width": 1, "height": 1}]}, "visual.pages[0].content"),
    ("7 default element capture without selector", {"defaults": {"capture": "element"}},
     {"defaults": {"capture": "element", "selector": "#app"}}, "visual.defaults.selector"),
    ("7 page element capture without selector", {"pages": [page(capture="element")]},
     {"pages": [page(capture="element", selector="#card")]}, "visual.pages[0].selector"),
    ("7 unknown page viewport", {"pages": [page(viewports=["desktop", "tablet"])]},
     {"pages": [page(viewports=["mobile", "desktop"])]}, "visual.pages[0].viewports[1]"),
    ("7 duplicate page viewport", {"pages": [page(viewports=["desktop", "desktop"])]},
     {"pages": [page(viewports=["desktop"])]}, "visual.pages[0].viewports[1]"),
    ("8 pixel=false without content", {"pages": [page(pixel=False)]},
     {"pages": [page(pixel=False, content={"expect": "x"})], "content": JUDGE}, "visual.pages[0].pixel"),
    ("8 pixel=false with a baseline", {"pages": [page(pixel=False, content={"expect": "x"}, baseline="b.png")],
                                       "content": JUDGE},
     {"pages": [page(content={"expect": "x"}, baseline="b.png")], "content": JUDGE}, "visual.pages[0].baseline"),
    ("8 pixel=false with thresholds", {"pages": [page(pixel=False, content={"expect": "x"}, maxDiffRatio=0.1)],
                                       "content": JUDGE},
     {"pages": [page(content={"expect": "x"}, maxDiffRatio=0.1)], "content": JUDGE}, "visual.pages[0].maxDiffRatio"),
]


@pytest.mark.parametrize(("bad", "good", "path"), [r[1:] for r in RULES], ids=[r[0] for r in RULES])
def test_cross_field_rules(bad: dict[str, Any], good: dict[str, Any], path: str) -> None:
    err = error_of(bad)
    assert err.path == path and str(err).startswith(f"{path}: ") and err.code == "CONFIG_INVALID"
    parse_visual(good)


# --- value rules -------------------------------------------------------------------------------

LOCAL_URLS_OK = ["http://localhost", "https://127.0.0.1:8443/x?y=1#z", "http://[::1]:3000/", "HTTP://LOCALHOST:3000/"]
LOCAL_URLS_BAD = ["", "http://example.com/", "ftp://localhost/", "http://user:pw@localhost/", "http://@localhost/",
                  "http://localhost:99999/", "http://127.0.0.2/", "http://localhost.evil.com/", "localhost:3000",
                  "http://localhost /", "http:/localhost", "http://[::2]/", "http://localhost\\@evil/",
                  "http://localhost:3000\n"]


@pytest.mark.parametrize("url", LOCAL_URLS_OK)
def test_local_url_accepted(url: str) -> None:
    parse_visual({"pages": [page(source={"type": "existing", "url": url})]})


@pytest.mark.parametrize("url", LOCAL_URLS_BAD)
def test_local_url_refused(url: str) -> None:
    assert error_of({"pages": [page(source={"type": "command", "command": "x", "readyUrl": url})]}).path == \
        "visual.pages[0].source.readyUrl"


@pytest.mark.parametrize(("origin", "ok"), [
    ("http://localhost:3000", True), ("https://cdn.example.com", True), ("wss://example.com:8443", True),
    ("http://[::1]:8080", True), ("http://127.0.0.1", True), ("ws://localhost", True),
    ("http://localhost:3000/", False), ("https://example.com:443", False), ("http://Example.com", False),
    ("ftp://example.com", False), ("http://user@example.com", False), ("https://example.com/path", False),
    ("http://1.2.3", False), ("http://[0:0:0:0:0:0:0:1]", False), ("HTTP://example.com", False),
    ("http://example.com?q", False), ("", False), ("http://", False),
])
def test_allowed_origins(origin: str, ok: bool) -> None:
    data = {"allowedOrigins": ["http://localhost", origin]}
    if ok:
        parse_visual(data)
    else:
        assert error_of(data).path == "visual.allowedOrigins[1]"


@pytest.mark.parametrize(("route", "ok"), [("/", True), ("/a/b?c=1#x", True), ("", False), ("a", False),
                                           ("//evil.com/", False), ("/a\\b", False)])
def test_routes(route: str, ok: bool) -> None:
    data = {"pages": [page(route=route)]}
    if ok:
        assert parse_visual(data).pages[0].route == route
    else:
        assert error_of(data).path == "visual.pages[0].route"


@pytest.mark.parametrize(("path", "ok"), [
    ("a", True), ("a/b.png", True), ("a\\b", True), (".x", True), ("a..b/c", True), ("./a", True),
    ("", False), ("/abs", False), ("\\abs", False), ("C:x", False), ("c:\\x", False), ("a/../b", False),
    ("..", False), ("a\\..\\b", False), ("a\0b", False), ("a/..", False),
])
def test_project_relative_paths(path: str, ok: bool) -> None:
    data = {"baselineRoot": path}
    if ok:
        assert parse_visual(data).baselineRoot == path
    else:
        assert error_of(data).path == "visual.baselineRoot"


def test_baseline_must_be_png_and_storage_state_a_project_path() -> None:
    assert parse_visual({"pages": [page(baseline="shots/Home.PNG")]}).pages[0].baseline == "shots/Home.PNG"
    assert error_of({"pages": [page(baseline="shots/home.jpg")]}).path == "visual.pages[0].baseline"
    assert error_of({"pages": [page(storageState="/etc/state.json")]}).path == "visual.pages[0].storageState"


@pytest.mark.parametrize(("ident", "ok"), [
    ("a", True), ("A1_-", True), ("x" * 100, True), ("con1", True), ("com0", True), ("9lives", True),
    ("", False), ("-a", False), ("_a", False), ("a.b", False), ("a b", False), ("x" * 101, False),
    ("CON", False), ("nul", False), ("Com1", False), ("lpt9", False), ("中文", False), ("a\n", False),
])
def test_ids(ident: str, ok: bool) -> None:
    data = {"images": [{"id": ident, "files": ["a.png"]}]}
    if ok:
        parse_visual(data)
    else:
        assert error_of(data).path == "visual.images[0].id"


@pytest.mark.parametrize(("viewport", "key"), [
    ({"id": "v", "width": 0, "height": 10}, "width"), ({"id": "v", "width": 10, "height": 0}, "height"),
    ({"id": "v", "width": -1, "height": 10}, "width"), ({"id": "v", "width": 1.5, "height": 10}, "width"),
    ({"id": "v", "width": True, "height": 10}, "width"), ({"id": "v", "width": "10", "height": 10}, "width"),
    ({"id": "v", "width": 10, "height": 10, "deviceScaleFactor": 0}, "deviceScaleFactor"),
    ({"id": "v", "width": 10, "height": 10, "deviceScaleFactor": 4.5}, "deviceScaleFactor"),
])
def test_zero_and_malformed_viewports_are_refused(viewport: dict[str, Any], key: str) -> None:
    assert error_of({"viewports": [viewport]}).path == f"visual.viewports[0].{key}"
    assert error_of({"viewports": []}).path == "visual.viewports"
    parse_visual({"viewports": [{"id": "v", "width": 1, "height": 1, "deviceScaleFactor": 4}]})


@pytest.mark.parametrize(("extra", "path"), [
    ({"maskSelectors": [".ok", ""]}, "visual.pages[0].maskSelectors[1]"),
    ({"maskSelectors": ["   "]}, "visual.pages[0].maskSelectors[0]"),
    ({"selector": ""}, "visual.pages[0].selector"),
    ({"readySelector": ""}, "visual.pages[0].readySelector"),
    ({"steps": [{"type": "click", "selector": ""}]}, "visual.pages[0].steps[0].selector"),
    ({"steps": [{"type": "scroll", "selector": "#a", "x": 1}]}, "visual.pages[0].steps[0]"),
    ({"steps": [{"type": "scroll"}]}, "visual.pages[0].steps[0]"),
    ({"steps": [{"type": "wait"}]}, "visual.pages[0].steps[0]"),
    ({"steps": [{"type": "wait", "selector": "#a", "durationMs": 5}]}, "visual.pages[0].steps[0]"),
    ({"steps": [{"type": "wait", "durationMs": 10, "state": "visible"}]}, "visual.pages[0].steps[0]"),
    ({"steps": [{"type": "wait", "durationMs": 60001}]}, "visual.pages[0].steps[0].durationMs"),
    ({"steps": [{"type": "eval", "script": "1"}]}, "visual.pages[0].steps[0]"),
    ({"steps": [{"type": "input", "selector": "#q"}]}, "visual.pages[0].steps[0].value"),
    ({"pixelThreshold": 1.5}, "visual.pages[0].pixelThreshold"),
    ({"content": {"expect": ""}}, "visual.pages[0].content.expect"),
    ({"content": {"expect": "x" * 4001}}, "visual.pages[0].content.expect"),
    ({"content": {"expect": "x", "samples": 10}}, "visual.pages[0].content.samples"),
    ({"content": {"expect": "x", "argsTemplate": []}}, "visual.pages[0].content.argsTemplate"),
    ({"content": {"expect": "x", "argsTemplate": [""]}}, "visual.pages[0].content.argsTemplate[0]"),
    ({"source": {"type": "static", "root": "dist", "port": 70000}}, "visual.pages[0].source.port"),
    ({"source": {"type": "command", "command": "x", "readyUrl": "http://localhost:1", "env": {"1X": "Y"}}},
     'visual.pages[0].source.env["1X"]'),
    ({"source": {"type": "nope"}}, "visual.pages[0].source"),
    ({"source": {"type": "command", "readyUrl": "http://localhost:1"}}, "visual.pages[0].source.command"),
])
def test_page_value_rules(extra: dict[str, Any], path: str) -> None:
    assert error_of({"pages": [page(**extra)]}).path == path


@pytest.mark.parametrize(("rng", "ok"), [({"exact": 5}, True), ({"min": 1, "max": 1}, True), ({"max": 0.5}, True),
                                         ({}, False), ({"exact": 5, "min": 1}, False), ({"min": 3, "max": 2}, False),
                                         ({"min": 0}, False), ({"exact": float("inf")}, False)])
def test_ranges(rng: dict[str, Any], ok: bool) -> None:
    data = {"images": [{"id": "i", "files": ["a.png"], "dpi": rng}]}
    if ok:
        parse_visual(data)
    else:
        assert error_of(data).path.startswith("visual.images[0].dpi")


def test_image_and_content_files_are_deduplicated_case_insensitively() -> None:
    assert error_of({"images": [{"id": "i", "files": ["a/B.png", "A\\b.PNG"]}]}).path == "visual.images[0].files"
    assert error_of({"images": [{"id": "i", "files": []}]}).path == "visual.images[0].files"
    assert error_of({"contents": [{"id": "c", "files": ["x.png", "X.png"], "expect": "e"}],
                     "content": JUDGE}).path == "visual.contents[0].files"


@pytest.mark.parametrize(("key", "value", "ok"), [
    ("locale", "en-US", True), ("locale", "zh-Hans-CN", True), ("locale", "de", True), ("locale", "en_US", False),
    ("locale", "", False), ("locale", "en--US", False), ("locale", "e", False),
    ("timezone", "Europe/Berlin", True), ("timezone", "UTC", True), ("timezone", "Mars/Olympus", False),
    ("timezone", "", False), ("colorScheme", "no-preference", True), ("colorScheme", "sepia", False),
    ("capture", "fullPage", True), ("capture", "screen", False), ("maxDiffRatio", 0, True),
    ("maxDiffRatio", -0.1, False), ("pixelThreshold", float("nan"), False),
])
def test_defaults_values(key: str, value: Any, ok: bool) -> None:
    data = {"defaults": {key: value}}
    if ok:
        assert getattr(parse_visual(data).defaults, key) == value
    else:
        assert error_of(data).path == f"visual.defaults.{key}"


def test_browser_modes() -> None:
    assert parse_visual({"browser": {"mode": "chrome"}}).browser.mode == "chrome"
    edge = parse_visual({"browser": {"mode": "edge", "executablePath": "/opt/edge"}})
    assert edge.browser.executablePath == "/opt/edge"
    assert parse_visual({"browser": {"mode": "executable", "executablePath": "/x"}}).browser.mode == "executable"
    assert error_of({"browser": {"mode": "executable"}}).path == "visual.browser.executablePath"
    assert error_of({"browser": {"mode": "managed", "executablePath": "/x"}}).path == "visual.browser.executablePath"
    assert error_of({"browser": {"mode": "firefox"}}).path == "visual.browser"
    assert error_of({"browser": {"mode": "chrome", "executablePath": ""}}).path == "visual.browser.executablePath"


@pytest.mark.parametrize(("data", "path"), [
    ({"bogus": 1}, "visual.bogus"),
    ({"viewports": [{"id": "v", "width": 1, "height": 1, "dpr": 2}]}, "visual.viewports[0].dpr"),
    ({"defaults": {"fullPage": True}}, "visual.defaults.fullPage"),
    ({"limits": {"timeoutMs": 5}}, "visual.limits.timeoutMs"),
    ({"browser": {"mode": "chrome", "args": []}}, "visual.browser.args"),
    ({"pages": [page(extra=1)]}, "visual.pages[0].extra"),
    ({"pages": [page(source={**EXISTING, "port": 1})]}, "visual.pages[0].source.port"),
    ({"pages": [page(steps=[{"type": "click", "selector": "a", "force": True}])]}, "visual.pages[0].steps[0].force"),
    ({"pages": [page(content={"expect": "x", "timeoutMs": 5})]}, "visual.pages[0].content.timeoutMs"),
    ({"images": [{"id": "i", "files": ["a.png"], "width": {"exact": 1, "step": 1}}]}, "visual.images[0].width.step"),
    ({"content": {"enabled": False, "model": "gpt"}}, "visual.content.model"),
    ({"contents": [{"id": "c", "files": ["a.png"], "expect": "e", "x": 1}]}, "visual.contents[0].x"),
])
def test_unknown_keys_are_refused(data: dict[str, Any], path: str) -> None:
    err = error_of(data)
    assert err.path == path and "unknown key" in err.detail


@pytest.mark.parametrize("data", [None, [], "visual", 1, {"content": None}, {"pages": [page(selector=None)]},
                                  {"enabled": "true"}, {"enabled": 1}, {"limits": {"concurrency": 5}},
                                  {"limits": {"stabilitySamples": 1}}, {"content": {"minConfidence": 2}}])
def test_wrong_types_nulls_and_limits_are_refused(data: Any) -> None:
    assert isinstance(error_of(data), ValueError)


# --- published schema ----------------------------------------------------------------------------


def test_the_published_schema_contains_the_visual_definitions() -> None:
    for schema in (json.loads(SCHEMA_FILE.read_text(encoding="utf-8")), acceptance_json_schema()):
        defs = schema["$defs"]
        assert schema["properties"]["visual"] == {"$ref": "#/$defs/VisualConfig"}
        visual = defs["VisualConfig"]
        assert visual["additionalProperties"] is False
        keys = {"pages", "viewports", "limits", "images", "contents", "allowedOrigins", "browser", "defaults"}
        assert keys <= set(visual["properties"])
        assert {"Page", "Viewport", "Limits", "Defaults", "ImageRule", "Range", "ContentRule", "ContentConfig",
                "SourceCommand", "StepWait", "BrowserManaged"} <= set(defs)
        assert defs["Limits"]["properties"]["stabilitySamples"]["maximum"] == 3
        assert defs["Viewport"]["properties"]["width"]["exclusiveMinimum"] == 0
        assert "null" not in json.dumps(defs["Page"])  # optional keys are omitted, never null


SCHEMA_BAD: list[dict[str, Any]] = [
    {"bogus": 1}, {"enabled": True}, {"viewports": [{"id": "v", "width": 0, "height": 1}]},
    {"viewports": []}, {"pages": [{"id": "a"}]}, {"pages": [page("con")]},
    {"pages": [page(source={"type": "existing", "url": "http://example.com/"})]},
    {"pages": [page(route="//x")]}, {"pages": [page(maskSelectors=[""])]}, {"pages": [page(selector=None)]},
    {"pages": [page(steps=[{"type": "scroll", "selector": "a", "y": 1}])]},
    {"pages": [page(steps=[{"type": "wait"}])]}, {"pages": [page(steps=[{"type": "wait", "durationMs": 5,
                                                                          "state": "hidden"}])]},
    {"pages": [page(pixel=False)]}, {"pages": [page(content={"expect": "x"})]},
    {"contents": [{"id": "c", "files": ["a.png"], "expect": "x"}], "content": {"enabled": False}},
    {"content": {"argsTemplate": ["<image:url>"]}}, {"baselineRoot": "../x"}, {"baselineRoot": "/x"},
    {"allowedOrigins": ["http://localhost/"]}, {"images": [{"id": "i", "files": ["a.png"], "width": {}}]},
    {"images": [{"id": "i", "files": ["a.png"], "width": {"exact": 1, "max": 2}}]},
    {"defaults": {"capture": "element"}}, {"defaults": {"locale": "en_US"}}, {"limits": {"concurrency": 5}},
    {"browser": {"mode": "executable"}},
]


def test_schema_validates_a_valid_example_and_refuses_invalid_ones() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(acceptance_json_schema())
    for valid in (FULL, {}, {"enabled": False}, {"viewports": [{"id": "a", "width": 1, "height": 1}]}):
        assert validator.is_valid({"visual": valid}), list(validator.iter_errors({"visual": valid}))[:1]
        parse_layer({"visual": valid}, "project", "p")
    for bad in SCHEMA_BAD:
        assert not validator.is_valid({"visual": bad}), bad
        with pytest.raises(AcceptanceConfigError):
            parse_layer({"visual": bad}, "project", "p")


# --- the layer loader -----------------------------------------------------------------------------


def test_a_broken_visual_block_makes_the_layer_config_invalid(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    layer = project / ".tianshu-mcp" / "acceptance.json"
    layer.parent.mkdir(parents=True)
    broken = {"checks": [{"name": "t", "cmd": ["true"]}],
              "visual": {"enabled": True, "pages": [page(source={"type": "command", "command": "npm",
                                                                 "readyUrl": "http://example.com:3000"})]}}
    layer.write_text(json.dumps(broken), encoding="utf-8")
    with pytest.raises(AcceptanceConfigError) as ei:
        read_layer(layer, "project")
    err = ei.value
    assert err.code is ErrorCode.CONFIG_INVALID and err.layer == "project" and str(layer) in err.message
    assert "visual: pages[0].source.readyUrl: host must be exactly localhost" in err.message
    with pytest.raises(AcceptanceConfigError) as ei:
        resolve_checks(project, tmp_path / "home", None)
    assert ei.value.code is ErrorCode.CONFIG_INVALID
    # rule 2 applies even when visual is disabled
    layer.write_text(json.dumps({"visual": {"enabled": False, "contents": [
        {"id": "c", "files": ["a.png"], "expect": "x"}]}}), encoding="utf-8")
    with pytest.raises(AcceptanceConfigError) as ei:
        read_layer(layer, "project")
    assert "visual: contents[0]: " in ei.value.message and "content.enabled" in ei.value.message
    # a valid block is kept raw (layers replace it wholesale)
    layer.write_text(json.dumps({"visual": FULL}), encoding="utf-8")
    cfg = read_layer(layer, "project")
    assert cfg is not None and cfg.visual == FULL
    with pytest.raises(AcceptanceConfigError) as ei:
        parse_layer({"visual": {"enabled": True}}, "override", "acceptanceOverride")
    assert "visual: enabled: enabled visual acceptance needs" in ei.value.message


# --- digest ---------------------------------------------------------------------------------------


def test_config_digest_is_stable_and_tracks_every_change() -> None:
    assert config_digest(None) == hashlib.sha256(b"null").hexdigest()
    base = config_digest(parse_visual(FULL))
    assert len(base) == 64 and base == config_digest(parse_visual(copy.deepcopy(FULL)))
    reordered = dict(reversed(list(FULL.items())))
    assert config_digest(parse_visual(reordered)) == base
    # defaults applied: an empty block and its explicit default form agree
    empty = parse_visual({})
    assert config_digest(empty) == config_digest(parse_visual(empty.model_dump(by_alias=True, mode="json")))
    assert config_digest(empty) != config_digest(None)
    changes = [
        lambda c: c.update(enabled=False),
        lambda c: c["viewports"][0].update(width=1281),
        lambda c: c["pages"][0].update(route="/x"),
        lambda c: c["pages"][0]["steps"][0].update(selector="#other"),
        lambda c: c["limits"].update(itemTimeoutMs=59999),
        lambda c: c["content"].update(samples=2),
        lambda c: c["images"][0]["width"].update(exact=513),
        lambda c: c["defaults"].update(colorScheme="light"),
        lambda c: c.update(browser={"mode": "chrome"}),
        lambda c: c["allowedOrigins"].pop(),
    ]
    seen = {base}
    for change in changes:
        data = copy.deepcopy(FULL)
        change(data)
        digest = config_digest(parse_visual(data))
        assert digest not in seen
        seen.add(digest)


# --- effective values and baseline paths ------------------------------------------------------------


def test_effective_values() -> None:
    cfg = parse_visual(FULL)
    home, login, about = cfg.pages
    assert [v.id for v in page_viewports(cfg, home)] == ["desktop", "mobile"]
    assert [v.id for v in page_viewports(cfg, login)] == ["desktop"]
    two = parse_visual({"pages": [page(viewports=["mobile", "desktop"])]})
    assert [v.id for v in page_viewports(two, two.pages[0])] == ["mobile", "desktop"]
    assert effective_capture(cfg, home) == ("fullPage", None)
    assert effective_capture(cfg, login) == ("element", "#form")
    inherited = parse_visual({"defaults": {"capture": "element", "selector": "#app"}, "pages": [page()]})
    assert effective_capture(inherited, inherited.pages[0]) == ("element", "#app")
    assert effective_thresholds(cfg, home) == (0.1, 0.001)
    assert effective_thresholds(cfg, login) == (0.2, 0.01)
    assert content_id(home) == "home-content"


def test_baseline_relative_both_forms() -> None:
    cfg = parse_visual(FULL)
    home, login, _ = cfg.pages
    desktop, mobile = cfg.viewports
    assert baseline_relative(cfg, home, desktop, platform="linux") == \
        "tests/visual/baselines/linux/managed/home/desktop.png"
    assert baseline_relative(cfg, home, mobile) == f"tests/visual/baselines/{platform_name()}/managed/home/mobile.png"
    # page.baseline is shared by every viewport
    assert baseline_relative(cfg, login, desktop) == baseline_relative(cfg, login, mobile) == "tests/login.PNG"
    other = parse_visual({"baselineRoot": "./shots/", "browser": {"mode": "chrome"}, "pages": [page("p1")]})
    assert baseline_relative(other, other.pages[0], other.viewports[1], platform="win32") == \
        "shots/win32/chrome/p1/mobile.png"
    assert baseline_relative(other, other.pages[0], "tablet", platform="darwin") == "shots/darwin/chrome/p1/tablet.png"
    assert platform_name() in ("linux", "darwin", "win32") or platform_name() == __import__("sys").platform
    assert (platform_name("linux"), platform_name("darwin"), platform_name("win32")) == ("linux", "darwin", "win32")
