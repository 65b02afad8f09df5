"""The visual section of a round's reports (docs/visual.md §11.8; docs/visual.md §10), from a real round:
a page captured in headless Chromium against a baseline approved from an earlier capture, then the
agent recolours its banner. ``report-0.html`` shows the failed page's actual, baseline, diff and
regions images side by side and reaches nothing outside the task directory; ``report-0.md`` (English)
lists the item's verdict, reason and artifact paths."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from PIL import Image
from test_acceptance_engine import git, make_pytest_repo, request
from test_visual_baselines import offline_resources
from tianshu_mcp.acceptance.engine import verify_round
from tianshu_mcp.acceptance.git import capture_baseline
from tianshu_mcp.acceptance.visual.baselines import approve, prepare

CHROMIUM = "/usr/lib/chromium/chromium"
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium is not installed")

PAGE = ("<!doctype html><html><head><meta charset='utf-8'><link rel='stylesheet' href='style.css'></head>"
        "<body><div class='banner'>Release board</div><p>All green.</p></body></html>")
STYLE = "body { margin: 0; background: #fff; font-family: sans-serif; } .banner { height: 40px; background: #2a6; }\n"
VISUAL = {"enabled": True, "viewports": [{"id": "desktop", "width": 320, "height": 200}],
          "pages": [{"id": "home", "source": {"type": "static", "root": "site"}}]}
QUAD = ("actual", "baseline", "diff", "regions")


def test_a_failed_page_is_reported_side_by_side_offline_and_in_the_markdown(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIANSHU_MCP_LOCALE", "en")
    repo, home = make_pytest_repo(tmp_path / "repo", gitignore=True), tmp_path / "home"
    (repo / "site").mkdir()
    (repo / "site" / "index.html").write_text(PAGE)
    (repo / "site" / "style.css").write_text(STYLE)
    (repo / ".tianshu-mcp").mkdir()
    (repo / ".tianshu-mcp" / "acceptance.json").write_text(json.dumps({"checks": [], "visual": VISUAL}))
    cand = prepare(home, repo)
    approve(home, cand["candidateId"], cand["digest"], "reviewed: green banner")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "site with an approved baseline")
    baseline = capture_baseline(repo)
    (repo / "site" / "style.css").write_text(STYLE.replace("#2a6", "#c33"))  # the agent's change
    out = verify_round(request(tmp_path, repo, baseline=baseline, home=home))
    task_dir = home / "tasks" / "tsk_20260101000000_abcdef"

    [page] = out.report["visual"]["results"]
    assert (page["id"], page["viewport"], page["status"], page["code"]) == ("home", "desktop", "failed", "PIXEL_DIFFERENCE")
    assert not out.passed and out.blocking_issues == []
    arts = page["artifacts"]
    assert set(arts) == {*QUAD, "metrics"} and all(Path(p).is_file() for p in arts.values())
    assert page["regions"] and page["metrics"]["bounds"]["y"] == 0 and page["metrics"]["bounds"]["height"] <= 40

    # --- report-0.html: self-contained, the quadruple side by side --------------------------------
    html_path = Path(out.report["files"]["html"])
    assert html_path == task_dir / "report-0.html"
    html = html_path.read_text(encoding="utf-8")
    found = offline_resources(html)  # no http(s)/protocol-relative URL, no url()/@import in styles
    assert "<link" not in html and not re.search(r"<script[^>]*\ssrc=", html) and "<iframe" not in html
    for tag, name, value in found.urls:  # every reference is a file of the task directory
        assert (task_dir / value).resolve().is_file() and (task_dir / value).resolve().is_relative_to(task_dir), (tag, name, value)
    article = html[html.index('<article data-status="failed">'):]
    article = article[:article.index("</article>")]
    assert "<h3>home / desktop — failed</h3>" in article and "<code>PIXEL_DIFFERENCE</code>" in article
    quad = article[article.index('<div class="quad">'):]
    quad = quad[:quad.index("</div>")]
    figures = re.findall(r'<figure><img loading="lazy" src="([^"]+)" alt="([^"]+)"><figcaption>([^<]+)</figcaption></figure>', quad)
    assert [(alt, cap) for _src, alt, cap in figures] == [(k, k) for k in QUAD], figures  # in this order, one row
    for (src, kind, _cap) in figures:
        assert not Path(src).is_absolute() and (task_dir / src).resolve() == Path(arts[kind]).resolve()
        with Image.open(task_dir / src) as im:
            assert im.size == (320, 200)
    assert ".quad{display:grid;grid-template-columns:repeat(4,1fr)" in html  # four columns: side by side
    assert 'type="range"' in article and "Region 1: (" in article and "<svg viewBox=\"0 0 320 200\"" in article
    assert html.count("<article") == 1 and "metrics.json" not in quad

    # --- report-0.md: the English visual section -------------------------------------------------
    md = Path(out.report["files"]["md"]).read_text(encoding="utf-8")
    section = md[md.index("## Visual acceptance"):]
    lines = section.splitlines()
    head = lines.index("### home / desktop [failed]")
    assert lines[head + 1:head + 4] == ["- Target: /", "- Reason: PIXEL_DIFFERENCE — Screenshot differs from approved baseline",
                                        "- Optional: false; repairable: true"], lines[head:head + 4]
    for kind in (*QUAD, "metrics"):
        assert f"- [{kind}]({arts[kind]})" in lines, kind
    assert any(line.startswith("- Diff regions: [{") for line in lines)
    assert any(line.startswith("- Actual metrics: {") and '"diffRatio":' in line for line in lines)
    assert f"Offline report: [HTML]({html_path})" in section
