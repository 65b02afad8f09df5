"""Baselines without a browser (imports), and the baseline side of a comparison (issue 10 breaker
findings): a missing candidate image, a git-ignored target, a corrupt approved baseline and a
baseline approved for another viewport are coded — and the last two block for a person instead
of sending the agent into rework."""

from __future__ import annotations

import hashlib
import json
import subprocess
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
