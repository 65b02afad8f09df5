"""Baselines without a browser (imports), and the baseline side of a comparison (docs/visual.md §11 breaker
findings): a missing candidate image, a git-ignored target, a corrupt approved baseline and a
baseline approved for another viewport are coded — and the last two block for a person instead
of sending the agent into rework. With real captures: the candidate (its digest is sha256 of
candidate.json), its offline preview and the approval record."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from tianshu_mcp.acceptance.visual.baselines import approve, prepare
from tianshu_mcp.acceptance.visual.config import parse_visual
from tianshu_mcp.acceptance.visual.engine import _compare
from tianshu_mcp.acceptance.visual.errors import VisualError

VISUAL = {"enabled": True, "viewports": [{"id": "desktop", "width": 48, "height": 32}],
          "pages": [{"id": "home", "source": {"type": "static", "root": "site"}}]}


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def png(path: Path, w: int = 48, h: int = 32, colour: tuple[int, int, int] = (40, 160, 90)) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((h, w, 3), colour, dtype=np.uint8)).save(path)
    return path


def project(tmp_path: Path, visual: dict = VISUAL, ignore: str = "") -> Path:
    repo = tmp_path / "repo"
    (repo / "site").mkdir(parents=True)
    (repo / "site" / "index.html").write_text("<p>x</p>")
    (repo / ".tianshu-mcp").mkdir()
    (repo / ".tianshu-mcp" / "acceptance.json").write_text(json.dumps({"visual": visual}))
    png(repo / "shots" / "home.png")
    if ignore:
        (repo / ".gitignore").write_text(ignore)
    git(repo, "init", "-q")
    return repo


def imported(home: Path, repo: Path) -> dict:
    return prepare(home, repo, imports=[{"caseId": "home", "viewportId": "desktop", "file": "shots/home.png"}])


def test_a_missing_candidate_image_is_candidate_changed_and_writes_nothing(tmp_path: Path) -> None:
    repo, home = project(tmp_path), tmp_path / "home"
    cand = imported(home, repo)
    (home / "visual-candidates" / cand["candidateId"] / "home-desktop.png").unlink()
    with pytest.raises(VisualError) as info:
        approve(home, cand["candidateId"], cand["digest"], "reviewed")
    assert info.value.code == "CANDIDATE_CHANGED"
    assert not (repo / "tests").exists()


def test_a_git_ignored_baseline_folder_is_refused(tmp_path: Path) -> None:
    repo, home = project(tmp_path, ignore="tests/\n"), tmp_path / "home"
    cand = imported(home, repo)
    with pytest.raises(VisualError) as info:
        approve(home, cand["candidateId"], cand["digest"], "reviewed")
    assert info.value.code == "BASELINE_IGNORED" and not (repo / "tests").exists()


def approved(tmp_path: Path) -> tuple[Path, Path]:
    repo, home = project(tmp_path), tmp_path / "home"
    cand = imported(home, repo)
    target = repo / approve(home, cand["candidateId"], cand["digest"], "reviewed")["targets"][0]
    return repo, target


def test_a_corrupt_approved_baseline_blocks_for_a_person(tmp_path: Path) -> None:
    repo, target = approved(tmp_path)
    target.write_bytes(target.read_bytes()[:60])  # truncated; its manifest digest updated to match
    manifest = Path(str(target) + ".manifest.json")
    m = json.loads(manifest.read_text())
    m["normalizedDigest"] = hashlib.sha256(target.read_bytes()).hexdigest()
    manifest.write_text(json.dumps(m))
    cfg = parse_visual(VISUAL)
    item = tmp_path / "item"
    png(item / "actual.png")
    with pytest.raises(VisualError) as info:
        _compare(cfg, cfg.pages[0], cfg.viewports[0], str(repo), item, [], {})
    assert info.value.kind == "blocked" and info.value.code == "IMAGE_CORRUPT" and "approved baseline" in info.value.message


def test_a_baseline_approved_for_another_viewport_blocks_instead_of_failing_the_agent(tmp_path: Path) -> None:
    repo, _target = approved(tmp_path)
    taller = {**VISUAL, "viewports": [{"id": "desktop", "width": 48, "height": 40}]}
    cfg = parse_visual(taller)
    item = tmp_path / "item"
    png(item / "actual.png", 48, 40)
    with pytest.raises(VisualError) as info:
        _compare(cfg, cfg.pages[0], cfg.viewports[0], str(repo), item, [], {})
    assert info.value.code == "BASELINE_CONFIG" and info.value.kind == "blocked" and "48×32" in info.value.message


# --- the candidate, its preview and the approval record (docs/visual.md §7), with real captures ---

CHROMIUM = "/usr/lib/chromium/chromium"
CAPTURED = {"enabled": True,
            "viewports": [{"id": "desktop", "width": 320, "height": 200}, {"id": "narrow", "width": 160, "height": 240}],
            "pages": [{"id": "home", "source": {"type": "static", "root": "site"}}]}


class _Resources(HTMLParser):
    """Every URL-bearing attribute (``src``, ``href``, ``srcset``, ``poster``, ``data``) and inline style text."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[tuple[str, str, str]] = []
        self.imgs: list[dict[str, str | None]] = []
        self.styles: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._in_style = tag == "style"
        for name, value in attrs:
            if name in ("src", "href", "srcset", "poster", "data", "action") and value is not None:
                self.urls.append((tag, name, value))
            if name == "style" and value:
                self.styles.append(value)
        if tag == "img":
            self.imgs.append(dict(attrs))

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.styles.append(data)


def offline_resources(text: str) -> _Resources:
    """Parse ``text`` and assert it reaches nothing remote: no absolute or protocol-relative URL,
    no ``url(…)``/``@import`` in a style. Returns the parser (its ``urls``, ``imgs``)."""
    parser = _Resources()
    parser.feed(text)
    for tag, name, value in parser.urls:
        assert not re.match(r"^\s*([a-z][a-z0-9+.-]*:|//)", value, re.IGNORECASE), (tag, name, value)
    for style in parser.styles:
        assert "url(" not in style and "@import" not in style, style
    assert not re.search(r"https?://", text.replace("http://www.w3.org/2000/svg", "")), "an http(s) URL in the page"
    return parser


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium is not installed")
def test_candidate_preview_digest_and_approval_record(tmp_path: Path) -> None:
    from tianshu_mcp.acceptance.visual.baselines import TaskGate
    from tianshu_mcp.acceptance.visual.config import config_digest
    from tianshu_mcp.acceptance.visual.snapshot import SNAPSHOT_FILE, freeze

    repo, home = project(tmp_path, CAPTURED), tmp_path / "home"
    (repo / "site" / "index.html").write_text("<!doctype html><body style='margin:0;background:#fff'>"
                                              "<div style='height:40px;background:#2a6'></div><p>Builds</p></body>")
    cand = prepare(home, repo)
    cdir = home / "visual-candidates" / cand["candidateId"]
    text = (cdir / "candidate.json").read_bytes()
    # the digest is sha256 of candidate.json exactly as written (the bytes approve checks)
    assert cand["digest"] == hashlib.sha256(text).hexdigest()
    body = json.loads(text)
    assert body["id"] == cand["candidateId"] and body["projectPath"] == str(repo.resolve())
    assert body["configDigest"] == config_digest(parse_visual(CAPTURED)) and body["createdAt"].endswith("Z")
    assert [e["target"] for e in body["entries"]] == [
        f"tests/visual/baselines/{sys.platform}/managed/home/desktop.png", f"tests/visual/baselines/{sys.platform}/managed/home/narrow.png"]
    assert cand["entries"] == [{"target": e["target"], "digest": e["digest"]} for e in body["entries"]]
    sizes = {"desktop": (320, 200), "narrow": (160, 240)}
    for e in body["entries"]:
        image = (cdir / e["image"]).read_bytes()
        assert e["digest"] == e["manifest"]["normalizedDigest"] == hashlib.sha256(image).hexdigest()
        assert e["originalDigest"] is None and e["originalManifestDigest"] is None
        vp = e["manifest"]["viewport"]
        with Image.open(cdir / e["image"]) as im:
            assert im.size == sizes[vp["id"]]
        assert e["manifest"]["caseId"] == "home" and e["manifest"]["browserKind"] == "managed" and e["manifest"]["masks"] == []
    assert sorted(p.name for p in cdir.iterdir()) == ["candidate.json", "home-desktop.png", "home-narrow.png", "preview.html"]
    # the preview is offline and shows each image with its digest
    assert cand["preview"] == str(cdir / "preview.html")
    preview = (cdir / "preview.html").read_text(encoding="utf-8")
    found = offline_resources(preview)
    assert [i["src"] for i in found.imgs] == [e["image"] for e in body["entries"]]
    for e in body["entries"]:
        assert (cdir / e["image"]).is_file()
        figure = preview[preview.index(f'src="{e["image"]}"'):]
        figure = figure[:figure.index("</figure>")]
        assert e["digest"] in figure and e["target"] in figure
    assert not (repo / "tests").exists()  # prepare writes nothing into the project

    # approve for a blocked task: the record says who/why/which candidate, the snapshot is refreshed
    task_dir = home / "tasks" / "tsk_20260101000000_abcdef"
    task_dir.mkdir(parents=True)
    frozen = freeze(task_dir, str(repo))
    gate = TaskGate("tsk_20260101000000_abcdef", task_dir, str(repo), lambda: True)
    done = approve(home, cand["candidateId"], cand["digest"], "  reviewed: green header at both sizes \n", gate)
    record = json.loads((cdir / "approval.json").read_text())
    assert record == {"note": "reviewed: green header at both sizes", "at": done["approvedAt"],
                      "candidateDigest": cand["digest"], "taskId": "tsk_20260101000000_abcdef"}
    assert done["targets"] == [e["target"] for e in body["entries"]]
    for e in body["entries"]:
        target = repo / e["target"]
        assert hashlib.sha256(target.read_bytes()).hexdigest() == e["digest"]
        manifest = json.loads(Path(str(target) + ".manifest.json").read_text())
        assert manifest == {**e["manifest"], "approval": {"note": record["note"], "at": record["at"],
                                                          "candidateId": cand["candidateId"], "candidateDigest": cand["digest"]}}
    snap = json.loads((task_dir / SNAPSHOT_FILE).read_text())
    assert snap["approved"] == {"note": record["note"], "at": record["at"], "previousDigest": frozen["configDigest"]}
    assert snap["baselines"] == {**{e["target"]: e["digest"] for e in body["entries"]},
                                 **{e["target"] + ".manifest.json": hashlib.sha256(
                                     Path(str(repo / e["target"]) + ".manifest.json").read_bytes()).hexdigest()
                                    for e in body["entries"]}}
    # approving without a task records taskId null
    again = prepare(home, repo, viewport_ids=["narrow"])
    approve(home, again["candidateId"], again["digest"], "second look")
    record2 = json.loads((home / "visual-candidates" / again["candidateId"] / "approval.json").read_text())
    assert record2["taskId"] is None and record2["candidateDigest"] == again["digest"] and record2["note"] == "second look"
